"""Tier 1 (jitflow/backends/numba_cpu/tier1.py): LLVM IR written from the kernel IR.

Every registry example tier 1 covers gives the interpreter's values; hand-computed values pin
the semantics it shares with the Numba kernels (integer division, NaN rules, accumulation
order); failing checks leave variables as they were; background mode runs tier 1 before the
Numba kernel is ready and switches to it after (counted, never timed).
"""
from __future__ import annotations

import threading

import numpy as np
import pytest

import jitflow as tf
from helpers import assert_same_result, build_example, example_inputs, registry_params
from jitflow.core import errors
from jitflow.backends.numba_cpu import background, kernels, tier1
from jitflow.ops.registry import all_op_defs

STATS = kernels.STATS


def _runs() -> int:
    return STATS.get("tier1_runs", 0)


@pytest.fixture
def tier1_only(monkeypatch):
    monkeypatch.setenv("JITFLOW_COMPILE", "tier1")
    monkeypatch.setenv("JITFLOW_STRICT", "1")


def _run(fetch, feed=None, init=False):
    with tf.Session() as sess:
        if init:
            sess.run(tf.global_variables_initializer())
        return sess.run(fetch, feed)


# -- registry examples ----------------------------------------------------------------------------
@pytest.mark.parametrize("ex,dtype", list(registry_params()))
def test_registry_example_on_tier1_matches_the_interpreter(ex, dtype, monkeypatch):
    arrays = example_inputs(ex, dtype)
    phs, out = build_example(ex, arrays)
    feed = dict(zip(phs, arrays))
    with tf.Session(backend="interpreter") as sess:
        ref = sess.run(out, feed)
    monkeypatch.setenv("JITFLOW_COMPILE", "tier1")
    monkeypatch.setenv("JITFLOW_STRICT", "1")
    with tf.Session() as sess:
        got = sess.run(out, feed)
    tol = 1e-5 if np.asarray(ref).dtype != np.float16 else 1e-2
    assert_same_result(got, ref, rtol=tol, atol=tol, path="tier1")


def test_most_registry_examples_run_on_tier1(monkeypatch):
    """Coverage does not silently collapse: most examples that compile run on tier 1."""
    monkeypatch.setenv("JITFLOW_COMPILE", "tier1")
    monkeypatch.setenv("JITFLOW_STRICT", "1")
    ran = total = 0
    examples = [ex for d in all_op_defs() for ex in d.examples]
    for ex in examples[::7]:
        dt = ex.dtypes[0]
        arrays = example_inputs(ex, dt)
        with tf.Graph().as_default():
            phs, out = build_example(ex, arrays)
            before, b0 = _runs(), STATS.get("tier1_unsupported", 0)
            with tf.Session() as sess:
                sess.run(out, dict(zip(phs, arrays)))
            if _runs() > before:
                ran += 1
            if _runs() > before or STATS.get("tier1_unsupported", 0) > b0:
                total += 1
    assert total > 20 and ran >= 0.8 * total, (ran, total)


# -- hand-computed values ---------------------------------------------------------------------
def test_integer_division_and_modulo_round_toward_minus_infinity(tier1_only):
    a = tf.placeholder(tf.int32, [None])
    b = tf.placeholder(tf.int32, [None])
    feed = {a: np.array([7, -7, 7, -7, 0, -2147483648], np.int32),
            b: np.array([2, 2, -2, -2, 3, -1], np.int32)}
    r0 = _runs()
    q, m, t = _run([tf.floordiv(a, b), tf.floormod(a, b), tf.truncatediv(a, b)], feed)
    assert _runs() > r0
    np.testing.assert_array_equal(q, [3, -4, -4, 3, 0, -2147483648])
    np.testing.assert_array_equal(m, [1, 1, -1, -1, 0, 0])
    np.testing.assert_array_equal(t, [3, -3, -3, 3, 0, -2147483648])


def test_float_modulo_takes_the_divisor_sign(tier1_only):
    a = tf.placeholder(tf.float64, [None])
    b = tf.placeholder(tf.float64, [None])
    got = _run(tf.floormod(a, b), {a: [5.5, -5.5, 5.5, 0.0, -0.0], b: [2.0, 2.0, -2.0, -3.0, 3.0]})
    np.testing.assert_array_equal(got, [1.5, 0.5, -0.5, -0.0, 0.0])
    assert np.signbit(got[3]) and not np.signbit(got[4])


def test_maximum_minimum_propagate_nan(tier1_only):
    a = tf.placeholder(tf.float32, [None])
    b = tf.placeholder(tf.float32, [None])
    nan = np.nan
    feed = {a: np.array([nan, 1, 2, nan], np.float32), b: np.array([1, nan, 1, nan], np.float32)}
    mx, mn = _run([tf.maximum(a, b), tf.minimum(a, b)], feed)
    np.testing.assert_array_equal(mx, [nan, nan, 2, nan])
    np.testing.assert_array_equal(mn, [nan, nan, 1, nan])


def test_argmax_takes_the_first_of_ties_and_a_nan(tier1_only):
    x = tf.placeholder(tf.float32, [None, 4])
    v = np.array([[1, 3, 3, 0], [np.nan, 5, np.nan, 1], [2, np.nan, 9, 9]], np.float32)
    hi, lo = _run([tf.argmax(x, axis=1), tf.argmin(x, axis=1)], {x: v})
    np.testing.assert_array_equal(hi, [1, 0, 1])
    np.testing.assert_array_equal(lo, [3, 0, 1])


def test_integer_mean_truncates_toward_zero(tier1_only):
    x = tf.placeholder(tf.int32, [None, 3])
    got = _run(tf.reduce_mean(x, axis=1), {x: np.array([[1, 1, 2], [-1, -1, -2]], np.int32)})
    np.testing.assert_array_equal(got, [1, -1])


def test_innermost_sums_add_in_lanes_then_pairwise(tier1_only):
    """The Numba kernels' order: term j goes to lane j % 32 up to the last multiple of 32, the
    rest to the running sum, then the lanes pairwise."""
    from jitflow.backends.numba_cpu.emit import _LANES
    assert _LANES == 32 and tier1._LANES == _LANES
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
def test_matmul_with_transposes(tier1_only, ta, tb, dtype):
    rng = np.random.default_rng(0)
    a = rng.integers(-5, 5, (4, 3) if ta else (3, 4)).astype(dtype)
    b = rng.integers(-5, 5, (5, 4) if tb else (4, 5)).astype(dtype)
    pa, pb = tf.placeholder(dtype, a.shape), tf.placeholder(dtype, b.shape)
    r0 = _runs()
    got = _run(tf.matmul(pa, pb, transpose_a=ta, transpose_b=tb), {pa: a, pb: b})
    assert _runs() > r0
    want = (a.T if ta else a).astype(np.int64) @ (b.T if tb else b).astype(np.int64)
    np.testing.assert_array_equal(got, want.astype(dtype))


def test_matmul_with_an_empty_inner_dim_gives_zeros(tier1_only):
    pa, pb = tf.placeholder(tf.float32, [3, None]), tf.placeholder(tf.float32, [None, 2])
    got = _run(tf.matmul(pa, pb), {pa: np.zeros((3, 0), np.float32),
                                   pb: np.zeros((0, 2), np.float32)})
    np.testing.assert_array_equal(got, np.zeros((3, 2), np.float32))


def test_softmax_cross_entropy_rows(tier1_only):
    logits = tf.placeholder(tf.float64, [None, 3])
    labels = tf.placeholder(tf.int32, [None])
    lv = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]])
    loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    sm = tf.nn.softmax(logits)
    r0 = _runs()
    got_loss, got_sm = _run([loss, sm], {logits: lv, labels: np.array([2, 0], np.int32)})
    assert _runs() > r0
    e = np.exp(lv - lv.max(1, keepdims=True))
    p = e / e.sum(1, keepdims=True)
    np.testing.assert_allclose(got_sm, p, rtol=1e-15)
    np.testing.assert_allclose(got_loss, -np.log(p[[0, 1], [2, 0]]), rtol=1e-15)


def test_a_training_step_updates_variables_in_place(tier1_only):
    x = tf.placeholder(tf.float32, [None, 3])
    w = tf.Variable(np.ones((3, 2), np.float32))
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w)))
    step = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    xv = np.array([[1, 2, 3]], np.float32)
    r0 = _runs()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(step, {x: xv})
        got = sess.run(w)
    assert _runs() > r0
    # d/dw mean((x w)^2) = 2 x^T (x w) / 2
    want = np.ones((3, 2), np.float32) - 0.1 * (xv.T @ (xv @ np.ones((3, 2)))) * 2 / 2
    np.testing.assert_allclose(got, want, rtol=1e-6)


# -- failing checks leave variables intact ----------------------------------------------------
def test_a_gather_index_out_of_range_raises_and_writes_nothing(tier1_only):
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


def test_an_integer_division_by_zero_raises_and_writes_nothing(tier1_only):
    d = tf.placeholder(tf.int32, [None])
    v = tf.Variable(np.array([10, 20], np.int32))
    upd = tf.assign(v, tf.floordiv(v, d))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        r0 = _runs()
        sess.run(upd, {d: np.array([3, 7], np.int32)})
        assert _runs() > r0
        np.testing.assert_array_equal(sess.run(v), [3, 2])
        with pytest.raises(errors.InvalidArgumentError):
            sess.run(upd, {d: np.array([1, 0], np.int32)})
        np.testing.assert_array_equal(sess.run(v), [3, 2])


def test_a_shape_mismatch_raises_the_interpreters_error(tier1_only):
    a = tf.placeholder(tf.float32, [None])
    b = tf.placeholder(tf.float32, [None])
    with tf.Session() as sess:
        with pytest.raises(errors.InvalidArgumentError):
            sess.run(a + b, {a: np.ones(3, np.float32), b: np.ones(4, np.float32)})


def test_unsupported_kernels_fall_back_to_the_references(tier1_only):
    x = tf.placeholder(tf.uint8, [None])
    y = x * 3 + 1                                      # unsigned ints: not tier 1's
    u0 = STATS.get("tier1_unsupported", 0)
    got = _run(y, {x: np.array([1, 2, 200], np.uint8)})
    assert STATS.get("tier1_unsupported", 0) > u0
    np.testing.assert_array_equal(got, np.array([4, 7, 89], np.uint8))   # wraps


# -- window routines (convolutions, pooling) through their C entry points -------------------
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
def test_convolutions_and_pooling_run_on_tier1(tier1_only, dtype):
    fetches, feed = _window_net(dtype)
    with tf.Session(backend="interpreter") as sess:
        sess.run(tf.global_variables_initializer())
        want = sess.run(fetches, feed)
    r0, u0 = _runs(), STATS.get("tier1_unsupported", 0)
    got = _run(fetches, feed, init=True)
    assert _runs() > r0 and STATS.get("tier1_unsupported", 0) == u0
    tol = 1e-4 if dtype == np.float32 else 1e-10
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol * np.abs(w).max())


def test_window_kernels_wait_for_their_routines_in_background_mode(monkeypatch):
    """Until a routine's C entry point is built (on its own thread) its kernels run on the
    references; once it is, on tier 1; the results agree throughout."""
    from jitflow.backends.numba_cpu import nnlib_c
    monkeypatch.setenv("JITFLOW_COMPILE", "thread")
    monkeypatch.setattr(nnlib_c, "_ADDR", {})         # as in a new process
    gate = threading.Event()
    build = nnlib_c._build

    def held(fn, dtype):
        gate.wait()
        return build(fn, dtype)
    monkeypatch.setattr(nnlib_c, "_build", held)
    x = tf.placeholder(tf.float32, [None, 6, 6, 1])
    k = tf.constant(np.arange(8, dtype=np.float32).reshape(2, 2, 1, 2) / 7)
    y = tf.reduce_sum(tf.nn.max_pool(tf.nn.conv2d(x, k, [1, 1, 1, 1], "VALID") * 0.5,
                                     [1, 2, 2, 1], [1, 2, 2, 1], "VALID"), axis=[1, 2])
    xv = np.random.default_rng(3).standard_normal((2, 6, 6, 1)).astype(np.float32)
    hold = threading.Event()
    background.submit(hold.wait)                      # Numba's kernel stays not ready
    got = []
    try:
        with tf.Session() as sess:
            r0 = _runs()
            got += [sess.run(y, {x: xv}) for _ in range(3)]
            assert _runs() == r0                      # the references: routines not built
            assert nnlib_c._PENDING
            gate.set()
            assert nnlib_c.wait_idle(600)
            got += [sess.run(y, {x: xv}) for _ in range(2)]
            assert _runs() > r0                       # tier 1, calling the routines
    finally:
        gate.set()
        hold.set()
    assert background.wait_idle(600)
    with tf.Session(backend="interpreter") as sess:
        want = sess.run(y, {x: xv})
    for g in got:
        np.testing.assert_allclose(g, want, rtol=1e-5)


# -- background mode: tier 1 first, Numba once ready ------------------------------------------
def test_background_mode_runs_the_faster_of_tier1_and_the_references_until_numba_is_ready(
        monkeypatch):
    monkeypatch.setenv("JITFLOW_COMPILE", "thread")
    x = tf.placeholder(tf.float32, [None])
    y = tf.reduce_sum(tf.tanh(x * 0.61) - 0.27 * x)   # a kernel no other test compiles
    xv = np.arange(5, dtype=np.float32)
    want = np.sum(np.tanh(xv * np.float32(0.61)) - np.float32(0.27) * xv)
    gate = threading.Event()
    background.submit(gate.wait)                      # hold the compiler thread
    got = []
    try:
        with tf.Session() as sess:
            r0 = _runs()
            got.append(sess.run(y, {x: xv}))
            ex_ = next(iter(sess._specs.values())).executable
            seg = ex_.steps[0]
            c, = [c for c in ex_.kernels[seg].compiled.values() if not c.ready]
            # the first run: the references (nothing to build before the first result)
            assert _runs() == r0 and c.tier1 is None and c.ref_cost > 0
            got.append(sess.run(y, {x: xv}))
            # the second: tier 1, timed
            assert _runs() == r0 + 1 and c.tier1 and c.t1_cost > 0
            # then whichever was faster
            c.t1_cost = c.ref_cost * 10
            got.append(sess.run(y, {x: xv}))
            assert _runs() == r0 + 1
            c.t1_cost = 0.0
            got.append(sess.run(y, {x: xv}))
            assert _runs() == r0 + 2
            gate.set()
            assert background.wait_idle(600)
            r1 = _runs()
            got += [sess.run(y, {x: xv}) for _ in range(2)]
            assert _runs() == r1              # the Numba kernel runs now
            assert c.ready and c.called
    finally:
        gate.set()
    np.testing.assert_allclose(got, [want] * 6, rtol=1e-6)


def test_tier1_can_be_turned_off_in_background_mode(monkeypatch):
    monkeypatch.setenv("JITFLOW_COMPILE", "thread")
    monkeypatch.setenv("JITFLOW_TIER1", "0")
    x = tf.placeholder(tf.float32, [None])
    y = tf.reduce_sum(tf.sin(x * 0.43))
    gate = threading.Event()
    background.submit(gate.wait)
    try:
        r0 = _runs()
        got = _run(y, {x: np.arange(3, dtype=np.float32)})
        assert _runs() == r0
    finally:
        gate.set()
    assert background.wait_idle(600)
    np.testing.assert_allclose(got, np.sum(np.sin(np.arange(3) * np.float32(0.43))), rtol=1e-6)


def test_tier1_builds_a_kernel_once_and_shares_identical_ones(tier1_only):
    x = tf.placeholder(tf.float64, [None])
    y = x * 3.25 + 1.5
    b0 = tier1.STATS["built"]
    for _ in range(2):
        with tf.Session() as sess:
            np.testing.assert_array_equal(sess.run(y, {x: [1.0, 2.0]}), [4.75, 8.0])
    assert tier1.STATS["built"] - b0 <= 1


# -- bit for bit with the Numba kernels -------------------------------------------------------
def _both_tiers(build, feed_of, monkeypatch):
    """The fetches of `build()` on tier 1 and on the Numba kernels (sync)."""
    out = {}
    for mode in ("tier1", "sync"):
        monkeypatch.setenv("JITFLOW_COMPILE", mode)
        with tf.Graph().as_default():
            fetches, phs = build()
            r0 = _runs()
            with tf.Session() as sess:
                out[mode] = sess.run(fetches, feed_of(phs))
            assert (_runs() > r0) == (mode == "tier1")
    return out["tier1"], out["sync"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_kernels_without_math_functions_agree_with_numba(dtype, monkeypatch):
    """Same operations in the same order: equal up to the multiply-adds Numba's kernels may
    fuse into FMAs (they compile with fastmath={"contract"}; tier 1's fast instruction
    selector fuses none), so a few ulps; integer results (argmax) exactly."""
    def build():
        x = tf.placeholder(dtype, [None, 37])
        y = tf.placeholder(dtype, [None, 37])
        z = tf.maximum(x * 1.25 - y, tf.minimum(y, -x)) + tf.floormod(x, y + 3.5)
        z = tf.where(x > y, z * tf.sign(y), tf.abs(z) / (y + 0.5)) + tf.floor(x) - tf.round(y)
        fetches = [z, tf.reduce_sum(z, 1), tf.reduce_sum(z * z, 0), tf.reduce_mean(z),
                   tf.reduce_max(z, 1), tf.reduce_min(z, 0), tf.reduce_prod(z[:, :5] * 0.5, 1),
                   tf.argmax(z, 1), tf.argmin(z, 1), tf.nn.l2_loss(z),
                   tf.matmul(z, y, transpose_b=True)]
        return fetches, (x, y)

    rng = np.random.default_rng(7)
    xv = (rng.standard_normal((5, 37)) * 10).astype(dtype)
    yv = (rng.standard_normal((5, 37)) * 3).astype(dtype)
    xv[0, 3], yv[1, 4] = np.nan, np.nan
    got, want = _both_tiers(build, lambda p: {p[0]: xv, p[1]: yv}, monkeypatch)
    ulps = 4 * np.finfo(dtype).eps
    for g, w in zip(got, want):
        assert np.asarray(g).dtype == np.asarray(w).dtype
        if np.asarray(g).dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=ulps, atol=0)
        else:
            np.testing.assert_array_equal(g, w)


def test_integer_kernels_equal_numba_bit_for_bit(monkeypatch):
    def build():
        a = tf.placeholder(tf.int32, [None, 9])
        b = tf.placeholder(tf.int32, [None, 9])
        c = tf.floordiv(a, b) * 3 + tf.floormod(a * 7, b) - tf.truncatediv(a, b)
        c = tf.maximum(c, -a) + tf.cast(tf.greater(a, b), tf.int32) * tf.abs(b)
        fetches = [c, tf.reduce_sum(c, 1), tf.reduce_prod(c[:, :3], 0), tf.reduce_mean(c, 1),
                   tf.reduce_max(c, 0), tf.argmax(c, 1), tf.cast(c, tf.float32) * 0.5,
                   tf.matmul(c, b, transpose_b=True)]
        return fetches, (a, b)

    rng = np.random.default_rng(11)
    av = rng.integers(-1000, 1000, (4, 9)).astype(np.int32)
    bv = rng.integers(1, 40, (4, 9)).astype(np.int32) * rng.choice([-1, 1], (4, 9)).astype(
        np.int32)
    got, want = _both_tiers(build, lambda p: {p[0]: av, p[1]: bv}, monkeypatch)
    for g, w in zip(got, want):
        assert np.asarray(g).dtype == np.asarray(w).dtype
        np.testing.assert_array_equal(g, w)


def test_an_unaligned_feed_is_copied_for_tier1(tier1_only):
    raw = np.zeros(4 * 6 + 1, np.uint8)
    a = np.frombuffer(raw.data, np.float32, 6, offset=1)   # misaligned float32s
    assert not a.flags.aligned
    x = tf.placeholder(tf.float32, [None])
    r0 = _runs()
    got = _run(x * 2.0 + 1.0, {x: a})
    assert _runs() > r0
    np.testing.assert_array_equal(got, np.ones(6, np.float32))


def test_window_entry_points_load_only_private_cache_files(tmp_path):
    """A window routine's C entry point is cached on disk by Numba (files 0600) and loaded by
    the next process; a cache file others could have written is never loaded (pickles)."""
    import os
    import stat
    import subprocess
    import sys
    probe = ("from jitflow.backends.numba_cpu import nnlib_c\n"
             "assert nnlib_c.address('avg_pool', 'float64', wait=True)\n"
             "print(nnlib_c._KEEP[-1].cache_hits)\n")
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))

    def hits() -> int:
        out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                             text=True, timeout=600)
        assert out.returncode == 0, out.stderr
        return int(out.stdout.split()[-1])

    assert hits() == 0                                   # compiled, then saved
    files = [p for p in tmp_path.rglob("*") if p.is_file() and "c_avg_pool" in p.name]
    assert files and all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in files)
    assert hits() == 1                                   # loaded
    for p in files:
        p.chmod(0o666)
    assert hits() == 0                                   # refused: compiled again
