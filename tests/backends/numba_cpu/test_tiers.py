"""The compiled tiers (JITFLOW_COMPILE quick, sync (optimized), numba) and the default mode's
switch between them: every tier computes the loop-level form's operations in its order, so
they give the same bits, which these tests check on the registry examples and on hand-computed
semantics (integer division, NaN rules, accumulation order, checks that write nothing). Which
code ran is counted (`Compiled.level`), never timed.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import jitflow as tf
from helpers import (assert_same_result, build_example, compile_mode, example_inputs,
                     registry_params, same_bits)
from jitflow.backends.numba_cpu import background, llvmjit
from jitflow.core import errors

MODES = ("quick", "sync", "numba")


@pytest.fixture(params=MODES)
def every_mode(request, monkeypatch):
    monkeypatch.setenv("JITFLOW_COMPILE", request.param)
    monkeypatch.setenv("JITFLOW_STRICT", "1")
    return request.param


def _run(fetch, feed=None, init=False):
    with tf.Session() as sess:
        if init:
            sess.run(tf.global_variables_initializer())
        return sess.run(fetch, feed)


def _levels(sess) -> list:
    """The level of every kernel a session compiled."""
    return [c.level for spec in sess._specs.values()
            for ks in getattr(spec.executable, "kernels", {}).values()
            for c in ks.compiled.values() if hasattr(c, "level")]


def _in_modes(fetch, feed, modes, init=False) -> list:
    out = []
    for m in modes:
        with compile_mode(m):
            out.append(_run(fetch, feed, init))
    return out


def _same_bits(a, b, path="") -> None:
    if isinstance(a, (list, tuple)):
        for i, (x, y) in enumerate(zip(a, b)):
            _same_bits(x, y, f"{path}[{i}]")
        return
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, path
    assert same_bits(a, b), f"{path}: the tiers' bits differ"


# -- registry examples: the same bits on every tier ---------------------------------------
@pytest.mark.parametrize("ex,dtype", list(registry_params()))
def test_registry_example_gives_the_same_bits_quick_and_optimized(ex, dtype, monkeypatch):
    arrays = example_inputs(ex, dtype)
    phs, out = build_example(ex, arrays)
    feed = dict(zip(phs, arrays))
    monkeypatch.setenv("JITFLOW_STRICT", "1")
    # quick code printed for 16-byte vectors: the examples' few elements run vector bodies
    # and scalar tails; the optimized code for the host's vectors
    quick, opt = _in_modes(out, feed, ("quick:v16", "sync"))
    _same_bits(quick, opt)
    with tf.Session(backend="interpreter") as sess:
        ref = sess.run(out, feed)
    tol = 1e-5 if np.asarray(ref).dtype != np.float16 else 1e-2
    assert_same_result(quick, ref, rtol=tol, atol=tol, path="fast path")


@pytest.mark.parametrize("ex,dtype", list(registry_params())[::4])
def test_registry_example_gives_the_same_bits_on_numba(ex, dtype, monkeypatch):
    """A quarter of the examples (every one runs in `make fuzz`'s tier comparison)."""
    arrays = example_inputs(ex, dtype)
    phs, out = build_example(ex, arrays)
    feed = dict(zip(phs, arrays))
    monkeypatch.setenv("JITFLOW_STRICT", "1")
    quick, numba = _in_modes(out, feed, ("quick", "numba"))
    _same_bits(quick, numba)


# -- hand-computed values, in every mode -------------------------------------------------------
def test_integer_division_and_modulo_round_toward_minus_infinity(every_mode):
    a = tf.placeholder(tf.int32, [None])
    b = tf.placeholder(tf.int32, [None])
    feed = {a: np.array([7, -7, 7, -7, 0, -2147483648], np.int32),
            b: np.array([2, 2, -2, -2, 3, -1], np.int32)}
    q, m, t = _run([tf.floordiv(a, b), tf.floormod(a, b), tf.truncatediv(a, b)], feed)
    np.testing.assert_array_equal(q, [3, -4, -4, 3, 0, -2147483648])
    np.testing.assert_array_equal(m, [1, 1, -1, -1, 0, 0])
    np.testing.assert_array_equal(t, [3, -3, -3, 3, 0, -2147483648])


def test_float_modulo_takes_the_divisor_sign(every_mode):
    a = tf.placeholder(tf.float64, [None])
    b = tf.placeholder(tf.float64, [None])
    got = _run(tf.floormod(a, b), {a: [5.5, -5.5, 5.5, 0.0, -0.0], b: [2.0, 2.0, -2.0, -3.0, 3.0]})
    np.testing.assert_array_equal(got, [1.5, 0.5, -0.5, -0.0, 0.0])
    assert np.signbit(got[3]) and not np.signbit(got[4])


def test_maximum_minimum_propagate_nan(every_mode):
    a = tf.placeholder(tf.float32, [None])
    b = tf.placeholder(tf.float32, [None])
    nan = np.nan
    feed = {a: np.array([nan, 1, 2, nan], np.float32), b: np.array([1, nan, 1, nan], np.float32)}
    mx, mn = _run([tf.maximum(a, b), tf.minimum(a, b)], feed)
    np.testing.assert_array_equal(mx, [nan, nan, 2, nan])
    np.testing.assert_array_equal(mn, [nan, nan, 1, nan])


def test_argmax_takes_the_first_of_ties_and_a_nan(every_mode):
    x = tf.placeholder(tf.float32, [None, 4])
    v = np.array([[1, 3, 3, 0], [np.nan, 5, np.nan, 1], [2, np.nan, 9, 9]], np.float32)
    hi, lo = _run([tf.argmax(x, axis=1), tf.argmin(x, axis=1)], {x: v})
    np.testing.assert_array_equal(hi, [1, 0, 1])
    np.testing.assert_array_equal(lo, [3, 0, 1])


def test_integer_mean_truncates_toward_zero(every_mode):
    x = tf.placeholder(tf.int32, [None, 3])
    got = _run(tf.reduce_mean(x, axis=1), {x: np.array([[1, 1, 2], [-1, -1, -2]], np.int32)})
    np.testing.assert_array_equal(got, [1, -1])


def test_innermost_sums_add_in_lanes_then_pairwise(every_mode):
    """The Numba kernels' order: term j goes to lane j % 32 up to the last multiple of 32, the
    rest to the running sum, then the lanes pairwise."""
    from jitflow.compiler.loopgen import LANES
    assert LANES == 32
    rng = np.random.default_rng(3)
    v = (rng.standard_normal(141) * 10 ** rng.uniform(-8, 8, 141)).astype(np.float64)
    x = tf.placeholder(tf.float64, [None])
    got = _run(tf.reduce_sum(x), {x: v})
    lanes = [0.0] * 32
    for j in range(128):
        lanes[j % 32] += v[j]
    acc = 0.0
    for j in range(128, 141):
        acc += v[j]
    while len(lanes) > 1:
        lanes = [a + b for a, b in zip(lanes[::2], lanes[1::2])]
    assert got == acc + lanes[0]


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_matmul_with_transposes(every_mode, ta, tb, dtype):
    rng = np.random.default_rng(0)
    a = rng.integers(-5, 5, (4, 3) if ta else (3, 4)).astype(dtype)
    b = rng.integers(-5, 5, (5, 4) if tb else (4, 5)).astype(dtype)
    pa, pb = tf.placeholder(dtype, a.shape), tf.placeholder(dtype, b.shape)
    got = _run(tf.matmul(pa, pb, transpose_a=ta, transpose_b=tb), {pa: a, pb: b})
    want = (a.T if ta else a).astype(np.int64) @ (b.T if tb else b).astype(np.int64)
    np.testing.assert_array_equal(got, want.astype(dtype))


def test_matmul_with_an_empty_inner_dim_gives_zeros(every_mode):
    pa, pb = tf.placeholder(tf.float32, [3, None]), tf.placeholder(tf.float32, [None, 2])
    got = _run(tf.matmul(pa, pb), {pa: np.zeros((3, 0), np.float32),
                                   pb: np.zeros((0, 2), np.float32)})
    np.testing.assert_array_equal(got, np.zeros((3, 2), np.float32))


def test_softmax_cross_entropy_rows(every_mode):
    logits = tf.placeholder(tf.float64, [None, 3])
    labels = tf.placeholder(tf.int32, [None])
    lv = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]])
    loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    sm = tf.nn.softmax(logits)
    got_loss, got_sm = _run([loss, sm], {logits: lv, labels: np.array([2, 0], np.int32)})
    e = np.exp(lv - lv.max(1, keepdims=True))
    p = e / e.sum(1, keepdims=True)
    np.testing.assert_allclose(got_sm, p, rtol=1e-15)
    np.testing.assert_allclose(got_loss, -np.log(p[[0, 1], [2, 0]]), rtol=1e-15)


def test_a_training_step_updates_variables_in_place(every_mode):
    x = tf.placeholder(tf.float32, [None, 3])
    w = tf.Variable(np.ones((3, 2), np.float32))
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w)))
    step = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    xv = np.array([[1, 2, 3]], np.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(step, {x: xv})
        got = sess.run(w)
    # d/dw mean((x w)^2) = 2 x^T (x w) / 2
    want = np.ones((3, 2), np.float32) - 0.1 * (xv.T @ (xv @ np.ones((3, 2)))) * 2 / 2
    np.testing.assert_allclose(got, want, rtol=1e-6)


# -- failing checks leave variables intact ----------------------------------------------------
def test_a_gather_index_out_of_range_raises_and_writes_nothing(every_mode):
    idx = tf.placeholder(tf.int32, [None])
    v = tf.Variable(np.arange(4, dtype=np.float32))
    upd = tf.assign_add(v, tf.ones([4]) * tf.reduce_sum(tf.gather(v, idx)))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(upd, {idx: np.array([1], np.int32)})
        np.testing.assert_array_equal(sess.run(v), [1, 2, 3, 4])
        with pytest.raises(errors.InvalidArgumentError):
            sess.run(upd, {idx: np.array([0, 7], np.int32)})
        np.testing.assert_array_equal(sess.run(v), [1, 2, 3, 4])


def test_an_integer_division_by_zero_raises_and_writes_nothing(every_mode):
    d = tf.placeholder(tf.int32, [None])
    v = tf.Variable(np.array([10, 20], np.int32))
    upd = tf.assign(v, tf.floordiv(v, d))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(upd, {d: np.array([3, 7], np.int32)})
        np.testing.assert_array_equal(sess.run(v), [3, 2])
        with pytest.raises(errors.InvalidArgumentError):
            sess.run(upd, {d: np.array([1, 0], np.int32)})
        np.testing.assert_array_equal(sess.run(v), [3, 2])


def test_a_shape_mismatch_raises_the_interpreters_error(every_mode):
    a = tf.placeholder(tf.float32, [None])
    b = tf.placeholder(tf.float32, [None])
    with tf.Session() as sess:
        with pytest.raises(errors.InvalidArgumentError):
            sess.run(a + b, {a: np.ones(3, np.float32), b: np.ones(4, np.float32)})


def test_unsigned_integers_wrap(every_mode):
    x = tf.placeholder(tf.uint8, [None])
    got = _run(x * 3 + 1, {x: np.array([1, 2, 200], np.uint8)})
    np.testing.assert_array_equal(got, np.array([4, 7, 89], np.uint8))   # wraps
def _window_net(dtype):
    """A small network of every window routine and its gradients: (fetches, feed)."""
    rng = np.random.default_rng(7)
    x = tf.placeholder(dtype, [None, 9, 9, 2])
    w1 = tf.Variable(rng.standard_normal((3, 3, 2, 4)).astype(dtype))
    w2 = tf.Variable(rng.standard_normal((2, 2, 4, 3)).astype(dtype))
    dw = tf.Variable(rng.standard_normal((3, 3, 3, 2)).astype(dtype))
    h = tf.nn.relu(tf.nn.conv2d(x, w1, [1, 1, 1, 1], "SAME"))
    h = tf.nn.max_pool(h, [1, 3, 3, 1], [1, 2, 2, 1], "SAME")
    h = tf.nn.conv2d(h, w2, [1, 1, 1, 1], "VALID", dilations=[1, 2, 2, 1])
    h = tf.nn.depthwise_conv2d(h, dw, [1, 1, 1, 1], "SAME")
    h = tf.nn.avg_pool(h, [1, 2, 2, 1], [1, 1, 1, 1], "SAME")
    loss = tf.reduce_sum(h * h)
    grads = tf.gradients(loss, [x, w1, w2, dw])
    feed = {x: rng.standard_normal((3, 9, 9, 2)).astype(dtype)}
    return [loss] + grads, feed


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_convolutions_and_pooling_in_every_mode(every_mode, dtype):
    fetches, feed = _window_net(dtype)
    with tf.Session(backend="interpreter") as sess:
        sess.run(tf.global_variables_initializer())
        want = sess.run(fetches, feed)
    got = _run(fetches, feed, init=True)
    tol = 1e-4 if dtype == np.float32 else 1e-10
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol * np.abs(w).max())




# -- the default mode ----------------------------------------------------------------------------
def test_auto_mode_runs_quick_code_then_switches_to_the_optimized_code(monkeypatch, tmp_path):
    """A kernel too large for optimized code at once runs its quick code first; the optimized
    code is compiled on the compiler thread and later runs use it, with the same bits; the
    warm path drops the quick code it held."""
    monkeypatch.setenv("JITFLOW_COMPILE", "auto")
    monkeypatch.setenv("JITFLOW_CACHE_DIR", str(tmp_path))   # no optimized object on disk yet
    x = tf.placeholder(tf.float32, [None])
    y = x
    for k in range(30):   # more ops than get optimized code on their first run
        y = tf.tanh(y * (1.0 + k / 100.0)) + 0.01 * k
    xv = np.linspace(-2, 2, 50).astype(np.float32)
    gate = threading.Event()
    background.submit(gate.wait)   # the optimized code waits behind this job
    try:
        with tf.Session() as sess:
            first = sess.run(y, {x: xv})
            second = sess.run(y, {x: xv})
            assert _levels(sess) == ["quick"]
            gate.set()
            assert background.wait_idle(120)
            third = sess.run(y, {x: xv})
            fourth = sess.run(y, {x: xv})
            assert _levels(sess) == ["opt"]
    finally:
        gate.set()
    _same_bits([first, second], [third, fourth])


@pytest.fixture
def rent(monkeypatch):
    """The one-CPU rule's clock, restored after the test (the compiler thread idle)."""
    assert background.wait_idle(120)
    for k, v in (("start", None), ("fg0", 0.0), ("spent", 0.0), ("queued", 0.0)):
        monkeypatch.setitem(background._RENT, k, v)
    yield background._RENT
    assert background.wait_idle(120)


def _wake():
    with background._IDLE:
        background._IDLE.notify_all()


def test_on_one_cpu_a_compile_waits_until_the_program_has_run_as_long(monkeypatch, rent):
    monkeypatch.setattr(background, "cpus", lambda: 1)
    ran = []
    background.submit(lambda: ran.append("dear"), cost=1e6)   # a million seconds of compiling
    background.submit(lambda: ran.append("free"))             # queued behind it
    assert not background.wait_idle(0.3)
    assert ran == [] and background.pending() == 2 and rent["queued"] == 1e6
    # the waiting job is the worker's current one: a fork meanwhile resubmits it in the child
    assert getattr(background._STATE["current"], "cost", None) == 1e6
    rent["start"] -= 1e6          # the program has now run that long: the job may start
    _wake()
    assert background.wait_idle(120)
    assert ran == ["dear", "free"] and rent["spent"] == 1e6 and rent["queued"] == 0


def test_on_one_cpu_the_run_paths_own_compiling_is_not_rent(monkeypatch, rent):
    monkeypatch.setattr(background, "cpus", lambda: 1)
    ran = []
    background.submit(lambda: ran.append("a"), cost=50.0)
    background.submit(lambda: ran.append("b"), cost=50.0)
    rent["start"] -= 60.0         # 60 s since the first job: not the 100 s both cost
    assert not background.wait_idle(0.3) and ran == []
    rent["start"] -= 60.0         # 120 s, but 30 of them compiling on the run path
    with background._LOCK:
        background._FG["busy"] += 30.0
    _wake()
    assert not background.wait_idle(0.3) and ran == []
    rent["start"] -= 10.0         # 130 - 30 = 100 s of running: both start
    _wake()
    assert background.wait_idle(120)
    assert ran == ["a", "b"]


def test_with_two_cpus_a_compile_starts_at_once(monkeypatch, rent):
    monkeypatch.setattr(background, "cpus", lambda: 2)
    ran = []
    background.submit(lambda: ran.append("dear"), cost=1e6)
    assert background.wait_idle(120)
    assert ran == ["dear"]


def test_optimized_compiles_are_queued_with_their_cost(monkeypatch, tmp_path):
    monkeypatch.setenv("JITFLOW_COMPILE", "auto")
    monkeypatch.setenv("JITFLOW_CACHE_DIR", str(tmp_path))
    costs = []
    real = background.submit
    monkeypatch.setattr(background, "submit",
                        lambda job, cost=0.0: (costs.append(cost), real(job, cost)))
    x = tf.placeholder(tf.float32, [None])
    y = x
    for k in range(30):   # (constants no other test uses: no code shared in this process)
        y = tf.sigmoid(y * (1.0 + k / 37.0)) - 0.03 * k
    with tf.Session() as sess:
        sess.run(y, {x: np.ones(4, np.float32)})
    assert background.wait_idle(120)
    priced = [c for c in costs if c > 0]      # (a warm-up job may come first, free)
    assert len(priced) == 1 and priced[0] < 10


def test_small_kernels_get_optimized_code_at_once(monkeypatch):
    monkeypatch.setenv("JITFLOW_COMPILE", "auto")
    x = tf.placeholder(tf.float32, [None])
    with tf.Session() as sess:
        sess.run(tf.tanh(x) * 2.0, {x: np.ones(4, np.float32)})
        assert _levels(sess) == ["opt"]


def test_identical_kernels_share_their_code(monkeypatch):
    monkeypatch.setenv("JITFLOW_COMPILE", "quick")
    x = tf.placeholder(tf.float32, [None])
    y = tf.sigmoid(x * 0.123456) - 0.654321
    built = llvmjit.STATS["built"]
    for _ in range(3):
        with tf.Session() as sess:
            sess.run(y, {x: np.ones(3, np.float32)})
    assert llvmjit.STATS["built"] <= built + 1


def test_a_program_exiting_while_kernels_compile_exits_with_its_status(tmp_path):
    """The interpreter waits for the compile in progress (LLVM must not be torn down under a
    compiling thread) and drops the rest: the program's own exit status comes back."""
    prog = tmp_path / "short.py"
    prog.write_text(textwrap.dedent("""
        import sys
        import numpy as np
        import jitflow as tf
        xs = [tf.placeholder(tf.float32, [None]) for _ in range(6)]
        with tf.Session() as sess:
            for i, x in enumerate(xs):
                y = x
                for k in range(40 + i):
                    y = tf.tanh(y * (1.0 + k / 97.0)) + 0.001 * k
                sess.run(y, {x: np.ones(8, np.float32)})
        print("done")
        sys.exit(3)
    """))
    env = dict(os.environ, JITFLOW_COMPILE="auto")
    for _ in range(3):
        out = subprocess.run([sys.executable, str(prog)], env=env, capture_output=True,
                             text=True, timeout=300)
        assert out.returncode == 3, out.stderr[-2000:]
        assert out.stdout.strip() == "done"
