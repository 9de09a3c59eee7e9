"""The cuda backend (jitflow/backends/numba_cuda) against the reference interpreter.

Runs on an NVIDIA GPU, or under Numba's CUDA simulator (tests/conftest.py sets
NUMBA_ENABLE_CUDASIM=1 unless JITFLOW_CUDA_REAL=1): small shapes, since the simulator runs each
GPU thread as a Python thread. Skipped when numba-cuda is not installed (`pip install
'jitflow[cuda]'`). `make test-cuda` runs this folder alone.
"""
from __future__ import annotations

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import jitflow as tf
from helpers import assert_same_result, build_example, example_inputs
from jitflow.ops.registry import all_op_defs

pytestmark = pytest.mark.cuda


@pytest.fixture(scope="module", autouse=True)
def _cuda_or_skip():
    pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")
    from jitflow.backends.numba_cuda.driver import cuda_module
    try:
        cuda_module()
    except RuntimeError as e:
        pytest.skip(str(e))


def _run(fetches, feed, backend, init=True, steps=0, train=None):
    with tf.Session(backend=backend) as sess:
        if init:
            sess.run(tf.global_variables_initializer())
        for _ in range(steps):
            sess.run(train, feed)
        with np.errstate(all="ignore"):
            return sess.run(fetches, feed)


# -- every registry example: cuda == interpreter ------------------------------------------------
EXAMPLES = [(d.type, i, ex, dt) for d in all_op_defs() for i, ex in enumerate(d.examples)
            for dt in ex.dtypes]
if os.environ.get("JITFLOW_CUDA_REAL", "0") in ("", "0"):
    # on the simulator (`make test`), float64 only where the example has no float32 form: the
    # emitted source is the same text in either float type, and the simulator runs it in
    # Python; a real GPU runs every dtype
    _F32 = {(t, i) for t, i, ex, dt in EXAMPLES if dt == "float32"}
    EXAMPLES = [e for e in EXAMPLES if e[3] != "float64" or (e[0], e[1]) not in _F32]


@pytest.mark.parametrize("ex,dtype", [pytest.param(ex, dt, id=f"{t}-{ex.id or i}-{dt}")
                                      for t, i, ex, dt in EXAMPLES])
def test_registry_example_matches_the_interpreter(ex, dtype):
    arrays = example_inputs(ex, dtype)
    phs, out = build_example(ex, arrays)
    feed = dict(zip(phs, arrays))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # ops on the host (convolutions) warn once
        ref = _run(out, feed, "interpreter", init=False)
        got = _run(out, feed, "cuda", init=False)
    assert_same_result(got, ref, rtol=1e-5, atol=1e-5, path="cuda")


# -- random programs: cuda == interpreter (the differential fuzzer's protocol) ------------------
@pytest.mark.parametrize("seed", range(700000, 700016))
def test_random_program_matches_the_interpreter(seed):
    from fuzz.generator import generate
    from fuzz.runner import compare, run_program
    prog = generate(seed)
    ref = run_program(prog, tf, "interpreter")
    got = run_program(prog, tf, "cuda")
    assert got.crash is None, got.crash
    msg = compare(got, ref, None, "cuda")
    assert msg is None, msg


# -- classic programs train to the CPU backend's losses -------------------------------------------
def _linear_regression():
    rng = np.random.default_rng(0)
    xs = rng.uniform(-1, 1, (32, 1)).astype(np.float32)
    ys = 3 * xs - 1 + 0.1 * rng.standard_normal((32, 1)).astype(np.float32)
    x = tf.placeholder(tf.float32, [None, 1])
    y = tf.placeholder(tf.float32, [None, 1])
    w = tf.Variable(tf.zeros([1, 1]))
    b = tf.Variable(tf.zeros([1]))
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))
    train = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
    return loss, train, {x: xs, y: ys}


def _softmax_regression():
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 3, 24)
    xs = (rng.standard_normal((3, 5))[labels] + rng.standard_normal((24, 5))).astype(np.float32)
    x = tf.placeholder(tf.float32, [None, 5])
    y = tf.placeholder(tf.float32, [None, 3])
    w = tf.Variable(tf.zeros([5, 3]))
    b = tf.Variable(tf.zeros([3]))
    logits = tf.matmul(x, w) + b
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits_v2(labels=y, logits=logits))
    train = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
    return loss, train, {x: xs, y: np.eye(3, dtype=np.float32)[labels]}


def _mlp_adam():
    rng = np.random.default_rng(2)
    labels = rng.integers(0, 4, 16)
    xs = rng.standard_normal((16, 6)).astype(np.float32)
    x = tf.placeholder(tf.float32, [None, 6])
    y = tf.placeholder(tf.int64, [None])
    w1 = tf.Variable(rng.standard_normal((6, 8)).astype(np.float32) * 0.3)
    b1 = tf.Variable(np.zeros(8, np.float32))
    w2 = tf.Variable(rng.standard_normal((8, 4)).astype(np.float32) * 0.3)
    b2 = tf.Variable(np.zeros(4, np.float32))
    h = tf.nn.relu(tf.matmul(x, w1) + b1)
    logits = tf.matmul(h, w2) + b2
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y,
                                                                         logits=logits))
    train = tf.train.AdamOptimizer(0.05).minimize(loss)
    return loss, train, {x: xs, y: labels}


@pytest.mark.parametrize("program", [_linear_regression, _softmax_regression, _mlp_adam])
def test_classic_program_trains_to_the_cpu_losses(program):
    # the reference interpreter gives the CPU losses (the numba backend is held to it elsewhere;
    # compiling the step for it too cost the suite about 10 s per program)
    loss, train, feed = program()
    losses = {}
    for backend in ("interpreter", "cuda"):
        with tf.Session(backend=backend) as sess:
            sess.run(tf.global_variables_initializer())
            losses[backend] = [float(sess.run([loss, train], feed)[0]) for _ in range(3)]
    assert losses["cuda"][-1] < losses["cuda"][0]
    np.testing.assert_allclose(losses["cuda"], losses["interpreter"], rtol=2e-5, atol=1e-6)


# -- device residency ----------------------------------------------------------------------------
def test_variables_stay_on_the_device_and_host_readers_copy_them_back(tmp_path):
    v = tf.Variable(np.arange(4, dtype=np.float32))
    step = tf.assign_add(v, tf.ones([4]))
    doubled = v * 2.0
    saver = tf.train.Saver([v])
    with tf.Session(backend="cuda") as sess:
        sess.run(v.initializer)
        sess.run(step)
        sess.run(step)
        store = sess._store
        dev = store.device.get(v.op)
        assert dev is not None, "the variable lives on the device between runs"
        sess.run(step)
        assert store.device.get(v.op) is dev, "updated in place, not reallocated"
        np.testing.assert_array_equal(sess.run(doubled), 2 * (np.arange(4) + 3))
        np.testing.assert_array_equal(v.eval(sess), np.arange(4) + 3)   # copied back
        path = saver.save(sess, str(tmp_path / "ckpt"))
        v.load(np.full(4, 7, np.float32), sess)                        # a host write
        np.testing.assert_array_equal(sess.run(step), np.full(4, 8))   # uploaded again
    with tf.Session(backend="numba") as sess:
        saver.restore(sess, path)
        np.testing.assert_array_equal(sess.run(v), np.arange(4) + 3)


def test_an_op_without_a_cuda_emitter_runs_on_the_host_with_one_warning(monkeypatch):
    # windowlib.py runs every window routine today: take conv2d away to stand for one it lacks
    from jitflow.backends.numba_cuda import windowlib
    monkeypatch.setattr(windowlib, "ROUTINES", windowlib.ROUTINES - {"conv2d", "conv2d_w"})
    x = tf.placeholder(tf.float32, [1, 4, 4, 1])
    f = tf.constant(np.ones((2, 2, 1, 1), np.float32))
    y = tf.nn.relu(tf.nn.conv2d(x, f, [1, 1, 1, 1], "SAME")) * 2.0
    xv = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)
    from jitflow.backends.numba_cuda import driver
    driver._WARNED.discard("Conv2D")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got = _run(y, {x: xv}, "cuda", init=False)
    msgs = [str(m.message) for m in w if "cuda backend cannot emit" in str(m.message)]
    assert len(msgs) == 1 and "Conv2D" in msgs[0], msgs
    np.testing.assert_allclose(got, _run(y, {x: xv}, "interpreter", init=False), rtol=1e-6)


def test_check_failures_raise_the_interpreter_error_and_leave_variables_unchanged():
    x = tf.placeholder(tf.float32, [None, 3])
    w = tf.Variable(np.ones((3, 2), np.float32))
    step = tf.assign_sub(w, tf.matmul(tf.transpose(x), tf.ones([2, 2])))
    with tf.Session(backend="cuda") as sess:
        sess.run(w.initializer)
        with pytest.raises(tf.errors.InvalidArgumentError):
            sess.run(step, {x: np.ones((3, 3), np.float32)})
        np.testing.assert_array_equal(sess.run(w), np.ones((3, 2)))


def test_index_and_divisor_checks_raise_the_interpreter_errors():
    """Gather indices out of range and integer division by zero are checked on a copy of the
    values (one NumPy test per check): the interpreter's error, and in-range values pass."""
    p = tf.constant(np.arange(12, dtype=np.float32).reshape(4, 3))
    i = tf.placeholder(tf.int32, [None])
    a = tf.placeholder(tf.int32, [None])
    b = tf.placeholder(tf.int32, [None])
    g = tf.gather(p, i) * 2.0
    d = tf.floordiv(a, b) + 1
    cases = [(g, {i: np.array([0, 3, 1], np.int32)}, None),
             (g, {i: np.array([0, 4, 1], np.int32)}, tf.errors.InvalidArgumentError),
             (g, {i: np.array([-1], np.int32)}, tf.errors.InvalidArgumentError),
             (d, {a: np.array([7, -7], np.int32), b: np.array([2, 3], np.int32)}, None),
             (d, {a: np.array([7, -7], np.int32), b: np.array([2, 0], np.int32)},
              tf.errors.InvalidArgumentError)]
    for fetch, feed, err in cases:
        if err is None:
            np.testing.assert_array_equal(_run(fetch, feed, "cuda", init=False),
                                          _run(fetch, feed, "interpreter", init=False))
            continue
        with pytest.raises(err) as ref:
            _run(fetch, feed, "interpreter", init=False)
        with pytest.raises(err) as got:
            _run(fetch, feed, "cuda", init=False)
        assert str(got.value) == str(ref.value)


def test_inspect_shows_the_cuda_source_and_debug_level_4_prints_it(monkeypatch, capsys):
    x = tf.placeholder(tf.float32, [None])
    y = tf.reduce_sum(tf.tanh(x) * 2.0)
    v = tf.Variable(np.zeros(3, np.float32))
    step = tf.assign_add(v, tf.ones([3]))
    with tf.Session(backend="cuda") as sess:
        src = sess.inspect(y, {x: np.ones(5, np.float32)})
        sess.run(v.initializer)
        assert "# AssignAdd" in sess.inspect(step)
        np.testing.assert_array_equal(sess.run(v), np.zeros(3))   # inspecting wrote nothing
    assert "@cuda.jit" in src and "cuda.shared.array" in src and "# Sum" in src
    monkeypatch.setenv("JITFLOW_DEBUG", "4")
    with tf.Session(backend="cuda") as sess:
        sess.run(y, {x: np.ones(3, np.float32) * 0.5})
    assert "generated cuda source" in capsys.readouterr().err


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_reductions_with_few_outputs_split_over_blocks_and_match_the_interpreter(dtype):
    """A full or few-row reduction of many elements is spread over several blocks per output
    (partials, then a combining kernel): every reduction kind, NaN and ties included."""
    from jitflow.backends.numba_cuda.driver import _Runtime, cuda_module, simulated
    rt = _Runtime(cuda_module(), simulated())
    n = 600 if rt.sim else 50000
    assert rt.split(1, 3 * n) > 1 and rt.split(3, n) > 1   # the split path is what runs
    assert rt.split(rt.fill_blocks, 3 * n) == 1
    rng = np.random.default_rng(5)
    xv = rng.standard_normal((3, n)).astype(dtype)
    xv[1, n // 2] = np.nan
    xv[2, 7] = xv[2, n - 3] = 9.0   # a tie: the first index wins
    x = tf.placeholder(dtype, [3, n])
    clean = tf.where(tf.is_nan(x), tf.zeros_like(x), x)
    flat = tf.reshape(clean, [-1])
    fetches = [tf.reduce_sum(x), tf.reduce_sum(clean), tf.reduce_mean(clean, 1),
               tf.argmax(x, 1), tf.argmin(flat), tf.argmax(flat), tf.reduce_max(x, 1),
               tf.reduce_min(clean), tf.nn.l2_loss(clean),
               tf.reduce_prod(clean[:, :64] * 0.01 + 1.0, 1), tf.reduce_any(clean > 3.5, 1),
               tf.reduce_all(clean > -6.0), tf.reduce_sum(tf.cast(clean > 0, tf.int32)),
               tf.reduce_max(tf.cast(clean * 10, tf.int64))]
    ref = _run(fetches, {x: xv}, "interpreter", init=False)
    got = _run(fetches, {x: xv}, "cuda", init=False)
    assert_same_result(got, ref, rtol=1e-5, atol=1e-5, path="cuda")
    np.testing.assert_array_equal(got[3], [np.argmax(xv[0]), n // 2, 7])


def test_without_a_gpu_or_the_simulator_the_error_says_how_to_get_either():
    code = ("import jitflow as tf\n"
            "try:\n    tf.Session(backend='cuda')\n"
            "except RuntimeError as e:\n    print('ERR', e)\n"
            "else:\n    print('GPU')\n")
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=300).stdout
    if out.startswith("GPU"):
        pytest.skip("a CUDA GPU is present")
    assert "NUMBA_ENABLE_CUDASIM=1" in out and "pip install 'jitflow[cuda]'" in out, out
