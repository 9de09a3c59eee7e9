"""The parallel kernel variants: large operands run element loops and row reductions on
several threads (JITFLOW_THREADS, from JITFLOW_PARALLEL_MIN elements) with the serial kernel's
results; small ones, and JITFLOW_THREADS=1, never use them."""
from __future__ import annotations

import numpy as np
import pytest

import jitflow as tf
from jitflow.backends.numba_cpu import kernels
from jitflow.runtime import config
from helpers import assert_same_result

RNG = np.random.default_rng(21)


@pytest.fixture
def threads(monkeypatch):
    monkeypatch.setenv("JITFLOW_THREADS", "2")
    monkeypatch.setenv("JITFLOW_PARALLEL_MIN", "1000")
    monkeypatch.setenv("JITFLOW_STRICT", "1")


def _kernel_of(sess):
    ex = next(iter(sess._specs.values())).executable
    (c,) = [c for s in ex.steps if s in ex.kernels for c in ex.kernels[s].compiled.values()]
    return c


def _graph():
    x = tf.placeholder(tf.float32, [None, None])
    w = tf.placeholder(tf.float32, [None])
    y = tf.tanh(x * w + 0.5) - tf.exp(-x * x)
    rows = tf.reduce_mean(tf.square(y - 1.0), 1)
    cols = tf.reduce_sum(y, 0)
    total = tf.reduce_max(y)
    return x, w, [y, rows, cols, total]


def test_large_operands_run_the_parallel_variant_with_the_serial_results(threads):
    x, w, fetches = _graph()
    xv = RNG.standard_normal((64, 50)).astype(np.float32)
    wv = RNG.standard_normal(50).astype(np.float32)
    with tf.Session(backend="interpreter") as sess:
        want = sess.run(fetches, {x: xv, w: wv})
    with tf.Session(backend="numba") as sess:
        got = sess.run(fetches, {x: xv, w: wv})
        c = _kernel_of(sess)
        assert "numba.prange" in c.par_source
        assert c.par is not None and c.par.fn is not None and not c.par.broken
        small = sess.run(fetches, {x: xv[:4], w: wv})   # 200 elements: the serial kernel
        again = sess.run(fetches, {x: xv, w: wv})        # the warm path sends it back
    assert_same_result(got, want, rtol=1e-6, atol=1e-6)
    assert_same_result(again, got, rtol=0, atol=0)
    with tf.Session(backend="interpreter") as sess:
        assert_same_result(small, sess.run(fetches, {x: xv[:4], w: wv}), rtol=1e-6, atol=1e-6)


def test_a_training_step_on_large_operands(threads):
    x = tf.placeholder(tf.float32, [None, 40])
    v = tf.Variable(RNG.standard_normal(40).astype(np.float32))
    loss = tf.reduce_mean(tf.square(tf.sigmoid(x * v) - 0.3))
    train = tf.train.AdamOptimizer(0.1).minimize(loss)
    xv = RNG.standard_normal((100, 40)).astype(np.float32)
    res = {}
    for backend in ("interpreter", "numba"):
        with tf.Session(backend=backend) as sess:
            sess.run(tf.global_variables_initializer())
            res[backend] = [sess.run([train, loss], {x: xv})[1] for _ in range(3)] + \
                [sess.run(v)]
    assert_same_result(res["numba"], res["interpreter"], rtol=1e-5, atol=1e-6)


def test_one_thread_makes_no_parallel_variant(monkeypatch):
    monkeypatch.setenv("JITFLOW_THREADS", "1")
    monkeypatch.setenv("JITFLOW_PARALLEL_MIN", "10")
    x, w, fetches = _graph()
    with tf.Session(backend="numba") as sess:
        sess.run(fetches, {x: np.ones((8, 8), np.float32), w: np.ones(8, np.float32)})
        c = _kernel_of(sess)
    assert c.par_source is None and c.par is None


def test_the_thread_knobs_parse():
    import os
    old = {k: os.environ.get(k) for k in ("JITFLOW_THREADS", "JITFLOW_PARALLEL_MIN")}
    try:
        os.environ["JITFLOW_THREADS"] = "3"
        os.environ["JITFLOW_PARALLEL_MIN"] = "123"
        assert config.threads() == 3 and config.parallel_min() == 123
        os.environ["JITFLOW_THREADS"] = "0"
        assert config.threads() == 1
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.mark.parametrize("user", [None, ("OMP_WAIT_POLICY", "ACTIVE"), ("GOMP_SPINCOUNT", "7")])
def test_idle_openmp_threads_spin_briefly_unless_the_user_says(monkeypatch, user):
    """Before the first parallel kernel loads GNU OpenMP, its idle threads get a short spin
    (they would otherwise spin for milliseconds after each parallel region, a whole core on a
    2-core machine); a wait policy or spin count from the user is left as it is."""
    monkeypatch.setattr(kernels, "PAR_STATE", {})
    for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT"):
        monkeypatch.setenv(k, "")   # recorded, so that teardown restores what was there
        monkeypatch.delenv(k)
    if user is not None:
        monkeypatch.setenv(*user)
    kernels.prepare_parallel()
    import os
    if user is None:
        assert os.environ["GOMP_SPINCOUNT"] == str(kernels._GOMP_SPINCOUNT) == "10000"
    else:
        assert os.environ[user[0]] == user[1]
        assert os.environ.get("GOMP_SPINCOUNT") == (user[1] if user[0] == "GOMP_SPINCOUNT"
                                                    else None)
    assert kernels.PAR_STATE["prepared"]
