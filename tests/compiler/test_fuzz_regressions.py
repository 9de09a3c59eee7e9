"""Minimal regression tests for each class of failure the differential fuzzer found (see
tests/fuzz/). Each runs the compiled backend against the interpreter and asserts the kernel was
used (no silent fallback to the references)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import jitflow as tf
from helpers import assert_same_result
from jitflow.backends import base
from jitflow.backends.numba_cpu import pyprint
from jitflow.backends.numba_cpu.cache import STATS


@pytest.fixture
def strict(monkeypatch):
    monkeypatch.setenv("JITFLOW_STRICT", "1")
    monkeypatch.setenv("JITFLOW_POISON", "1")


def _fallbacks() -> int:
    return STATS.get("reference_fallbacks", 0)


def _both(fetches, feeds: list, rtol=2e-6):
    """Run `fetches` for each feed dict on both backends (one session each, in order)."""
    out = {}
    for name in ("interpreter", "numba"):
        with tf.Session(backend=name) as sess:
            out[name] = [sess.run(fetches, fd) for fd in feeds]
    for a, b in zip(out["numba"], out["interpreter"]):
        assert_same_result(a, b, rtol, rtol)
    return out["numba"]


def test_cross_entropy_of_rank1_logits_is_a_scalar_kernel_result(strict):
    """Rank-1 logits give a rank-0 loss: the kernel once emitted `np.empty((,), ...)`."""
    x = tf.placeholder(tf.float32, [None])
    lab = tf.placeholder(tf.float32, [None])
    loss = tf.nn.softmax_cross_entropy_with_logits_v2(labels=lab, logits=x)
    a = np.array([0.5, -1.0, 2.0], np.float32)
    n0 = _fallbacks()
    (r,), = [_both([loss], [{x: a, lab: np.array([0.2, 0.3, 0.5], np.float32)}])[0]]
    assert type(r) is np.float32
    e = a - a.max()
    ls = np.log(np.exp(e).sum())
    np.testing.assert_allclose(r, -np.sum(np.array([0.2, 0.3, 0.5]) * (e - ls)), rtol=1e-5)
    assert _fallbacks() == n0


@pytest.mark.parametrize("fn", [tf.nn.softmax, tf.nn.log_softmax])
def test_row_op_over_an_axis_fed_with_size_one_compiles(fn, strict):
    """A `None` axis fed with size 1 is its own shape class; it compiles (softmax is 1, log
    softmax 0, NaN for non-finite input) instead of falling back."""
    x = tf.placeholder(tf.float32, [2, None])
    y = fn(x)
    n0 = _fallbacks()
    one = np.array([[0.5], [np.inf]], np.float32)
    r = _both(y, [{x: one}])[0]
    assert r[0, 0] == (1.0 if fn is tf.nn.softmax else 0.0) and np.isnan(r[1, 0])
    assert _fallbacks() == n0


def test_cross_entropy_and_its_gradient_over_a_unit_axis(strict):
    x = tf.placeholder(tf.float32, [None, None])
    lab = tf.placeholder(tf.float32, [None, None])
    loss = tf.nn.softmax_cross_entropy_with_logits_v2(labels=lab, logits=x)
    g = tf.gradients(tf.reduce_sum(loss), x)[0]
    n0 = _fallbacks()
    feeds = [{x: np.full((3, 1), v, np.float32), lab: np.full((3, 1), 0.7, np.float32)}
             for v in (0.5, -2.0)]
    r = _both([loss, g], feeds)
    np.testing.assert_allclose(r[0][1], np.full((3, 1), 0.3, np.float32), rtol=1e-6)
    assert _fallbacks() == n0


def test_gradient_of_a_scalar_loss_broadcasts_a_literal(strict):
    """The gradient of a rank-0 loss starts from a scalar literal broadcast to the logits."""
    x = tf.placeholder(tf.float64, [None])
    loss = tf.nn.softmax_cross_entropy_with_logits_v2(labels=tf.nn.softmax(x * 2.0), logits=x)
    g = tf.gradients(loss, x)[0]
    n0 = _fallbacks()
    _both([loss, g], [{x: np.array([0.1, -0.4, 1.3])}, {x: np.array([0.7])}], rtol=1e-12)
    assert _fallbacks() == n0


def test_same_inputs_give_the_same_bits_after_another_shape_class():
    """A shape class without a kernel runs through the references for that class only: the
    other classes keep their kernels, so a run never changes with what ran before it."""
    x = tf.placeholder(tf.float32, [None, None])
    y = tf.nn.softmax(x * 1.7) + tf.exp(x)
    a = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    with tf.Session(backend="numba") as sess:
        first = sess.run(y, {x: a})
        sess.run(y, {x: a[:, :1]})
        sess.run(y, {x: a[:1, :]})
        again = sess.run(y, {x: a})
    assert first.tobytes() == again.tobytes()


def test_generated_source_is_parsed_before_numba(monkeypatch):
    """Source that does not parse is a code generation bug: strict mode raises it; otherwise
    the segment falls back to its references for that class with one warning naming an op."""
    monkeypatch.setenv("JITFLOW_COMPILE", "numba")
    real = pyprint.print_function

    def broken(lk, name="kernel", parallel=False, poison=False):
        return real(lk, name, parallel, poison).replace("):\n", "):\n    x = (,)\n", 1)

    monkeypatch.setattr(pyprint, "print_function", broken)
    x = tf.placeholder(tf.float32, [None], name="xin")
    y = tf.tanh(x, name="the_tanh")
    a = np.array([0.25, -1.5], np.float32)
    monkeypatch.setenv("JITFLOW_STRICT", "1")
    with tf.Session(backend="numba") as sess:
        with pytest.raises(base.CodegenError, match="does not parse"):
            sess.run(y, {x: a})
    monkeypatch.setenv("JITFLOW_STRICT", "0")
    base.WARNED_OPS.clear()
    with tf.Session(backend="numba") as sess:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            r = sess.run(y, {x: a})
            r2 = sess.run(y, {x: a})
    np.testing.assert_allclose(r, np.tanh(a), rtol=1e-6)
    assert r.tobytes() == r2.tobytes()
    msgs = [str(m.message) for m in w if "code generation bug" in str(m.message)]
    assert len(msgs) == 1 and "the_tanh" in msgs[0]


def test_llvm_ir_that_does_not_parse_is_a_codegen_bug(monkeypatch, tmp_path):
    """IR the LLVM printer gets wrong: strict mode raises it; otherwise the segment runs its
    Numba kernel (the same bits) with one warning naming an op."""
    from jitflow.backends.numba_cpu import llvmjit
    real = llvmjit.print_llvm

    def broken(*args):
        lg = real(*args)
        lg.text = lg.text.replace("ret i32 0", "ret i32 %nowhere", 1)
        return lg

    monkeypatch.setattr(llvmjit, "print_llvm", broken)
    monkeypatch.setenv("JITFLOW_COMPILE", "sync")
    monkeypatch.setenv("JITFLOW_CACHE_DIR", str(tmp_path))   # no object of it on disk
    x = tf.placeholder(tf.float32, [None], name="xin")
    y = tf.tanh(x * 1.375, name="the_other_tanh")
    a = np.array([0.25, -1.5], np.float32)
    monkeypatch.setenv("JITFLOW_STRICT", "1")
    with tf.Session(backend="numba") as sess:
        with pytest.raises(base.CodegenError, match="fast path could not build it"):
            sess.run(y, {x: a})
    monkeypatch.setenv("JITFLOW_STRICT", "0")
    base.WARNED_OPS.clear()
    with tf.Session(backend="numba") as sess:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            r = sess.run(y, {x: a})
        spec = next(iter(sess._specs.values()))
        (c,) = spec.executable.kernels[spec.executable.steps[0]].compiled.values()
    assert c.level == "numba"
    msgs = [str(m.message) for m in w if "code generation bug" in str(m.message)]
    assert len(msgs) == 1 and ("the_other_tanh" in msgs[0] or "mul" in msgs[0]), msgs
    monkeypatch.setattr(llvmjit, "print_llvm", real)
    with tf.Session(backend="numba") as sess:
        assert sess.run(y, {x: a}).tobytes() == r.tobytes()


def test_poison_mode_fills_every_allocation(monkeypatch):
    """JITFLOW_POISON=1: buffers start as NaN (integers as a sentinel), so a read of an
    element never written shows in the result."""
    assert pyprint.POISON["float32"] == "np.nan" and pyprint.POISON["int32"] == "-1431655766"
    x = tf.placeholder(tf.float32, [None, 3])
    w = tf.placeholder(tf.float32, [3, 2])
    y = tf.matmul(x, w) + 1.0
    monkeypatch.setenv("JITFLOW_POISON", "1")
    feed = {x: np.ones((2, 3), np.float32), w: np.ones((3, 2), np.float32)}
    with tf.Session(backend="numba") as sess:
        src = sess.inspect(y, feed)
        r = sess.run(y, feed)
    np.testing.assert_array_equal(r, np.full((2, 2), 4.0, np.float32))
    assert "np.full(" in src and "np.nan" in src and "np.empty(" not in src


def test_transposed_operand_broadcast_into_a_higher_rank(strict):
    """A transpose is an inlined load with explicit loop axes; broadcast into a consumer of
    higher rank its axes must move right (once it read past the end of its input)."""
    x = tf.placeholder(tf.float32, [4, 2])
    y = tf.placeholder(tf.float32, [2])
    z = tf.placeholder(tf.float32, [3, 2])
    outs = [x / tf.transpose(y, [0]), tf.transpose(tf.transpose(z) * 2.0) + y,
            tf.where(x > 3.0, x, tf.transpose(y, [0]) + x)]
    a = np.arange(8, dtype=np.float32).reshape(4, 2)
    b = np.array([2.0, 4.0], np.float32)
    c = np.arange(6, dtype=np.float32).reshape(3, 2)
    n0 = _fallbacks()
    r = _both(outs, [{x: a, y: b, z: c}])[0]
    np.testing.assert_array_equal(r[0], a / b)
    np.testing.assert_array_equal(r[1], c * 2.0 + b)
    assert _fallbacks() == n0


def test_one_hot_broadcast_into_a_higher_rank(strict):
    """OneHot reads its position (an `Index` of a loop axis): the same rule as above."""
    idx = tf.placeholder(tf.int32, [None])
    y = tf.one_hot(idx, 4) * tf.ones([3, 1, 1])
    r = _both(y, [{idx: np.array([2, 0], np.int32)}])[0]
    np.testing.assert_array_equal(r, np.broadcast_to(np.eye(4, dtype=np.float32)[[2, 0]],
                                                     (3, 2, 4)))


def test_int32_overflow_inside_a_fused_chain_wraps_like_tf(strict):
    """Numba computes int32 math in 64 bits; each op's result is wrapped to int32, so an
    overflowing product feeding max, division or a cast gives TF's (wrapped) answer."""
    x = tf.placeholder(tf.int32, [None])
    z = tf.placeholder(tf.int32, [None])
    p = x * x * x * x * x
    outs = [tf.maximum(p, z), p // 7, tf.cast(p, tf.float32)]
    a = np.array([100, -77, 3], np.int32)
    wrapped = (a.astype(np.int64) ** 5 + 2 ** 31) % 2 ** 32 - 2 ** 31    # int32 wrap-around
    r = _both(outs, [{x: a, z: np.array([0, 5, -3], np.int32)}])[0]
    np.testing.assert_array_equal(r[0], np.maximum(wrapped, [0, 5, -3]))
    np.testing.assert_array_equal(r[1], wrapped // 7)
    np.testing.assert_array_equal(r[2], wrapped.astype(np.float32))


@pytest.mark.parametrize("classes", [1, 3])
def test_cross_entropy_of_zero_terms_is_positive_zero(classes, strict):
    """TF sums labels * (lse - z) from +0: a row whose terms are all zero is +0 whatever the
    labels' signs (1 / loss is +inf), on the row kernel and on the unit-axis path."""
    x = tf.placeholder(tf.float32, [None, classes])
    lab = tf.placeholder(tf.float32, [None, classes])
    loss = tf.nn.softmax_cross_entropy_with_logits_v2(labels=lab, logits=x)
    feed = {x: np.zeros((2, classes), np.float32),
            lab: np.zeros((2, classes), np.float32) - (0.5 if classes == 1 else 0.0)}
    if classes == 3:
        feed[lab][:, 0] = -0.0
    r = _both(1.0 / loss, [feed])[0] if classes == 1 else _both(loss, [feed])[0]
    if classes == 1:
        np.testing.assert_array_equal(r, [np.inf, np.inf])
    else:
        assert np.all(np.signbit(r) == [False, False])


def test_sliced_size_one_dim_broadcast_along_a_longer_axis(strict):
    """A slice reads positions computed from the loop index; when its size-1 dim broadcasts
    along a longer consumer axis it is stored first (it once read past its end: 0.0 where
    TF gives the product)."""
    c = tf.constant(np.array([-1.5, -2.0], np.float32))
    x = tf.placeholder(tf.float32, [2])
    m = tf.placeholder(tf.float32, [3, 2])
    outs = [tf.slice(c, [1], [-1]) * x, c[1:] + m,
            tf.one_hot(tf.constant([0]), 1) * m[:, :1]]
    n0 = _fallbacks()
    r = _both(outs, [{x: np.array([1.0, 2.0], np.float32), m: np.ones((3, 2), np.float32)}])[0]
    np.testing.assert_array_equal(r[0], [-2.0, -4.0])
    np.testing.assert_array_equal(r[1], np.full((3, 2), -1.0, np.float32))
    np.testing.assert_array_equal(r[2], np.ones((3, 1), np.float32))
    assert _fallbacks() == n0
