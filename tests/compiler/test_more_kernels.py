"""Ops that used to run only as reference steps between kernels, now lowered into the kernel
IR (LinSpace, UnsortedSegmentSum, Diag, MatrixDiag, MatrixDiagPart, Squeeze, BatchMatMulV2 of
two matrices): on every CPU path (LLVM `sync` and `quick`, Numba) the run is kernels only and
gives the interpreter's bits (also with the vectorized inner loops); invalid operands raise
TF1's error naming the op."""
from __future__ import annotations

import numpy as np
import pytest

import jitflow as tf
from jitflow.backends.numba_cpu.executable import Executable
from jitflow.compiler.program import Segment
from jitflow.core import errors
from helpers import compile_mode

#: LLVM optimized and quick code, quick code with 16-byte vector loops (small examples run
#: vector bodies and scalar tails), Numba
MODES = ("sync", "quick", "quick:v16", "numba")


def rand(*shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def run_both(fetches, feed):
    """{backend: results}; the numba backend must run kernels only."""
    out = {}
    for name in ("interpreter", "numba"):
        with tf.Session(backend=name) as sess:
            out[name] = sess.run(fetches, feed)
            if name == "numba":
                for spec in sess._specs.values():
                    ex = spec.executable
                    if isinstance(ex, Executable) and spec.plan.ops:
                        assert all(isinstance(s, Segment) for s in ex.steps), \
                            ex.describe(list(feed.values()), sess._store)
    return out["numba"], out["interpreter"]


def same_bits(got, want, rtol=0.0):
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        if rtol:
            np.testing.assert_allclose(g, w, rtol=rtol)
        else:
            assert g.tobytes() == w.tobytes(), (g, w)


@pytest.fixture(params=MODES)
def mode(request):
    with compile_mode(request.param):
        yield request.param


def test_linspace(mode):
    a, b = tf.placeholder(tf.float32, []), tf.placeholder(tf.float64, [])
    ys = [tf.linspace(a, a + 4.0, 5) * 1.0, tf.linspace(b, b * 3.0, 7) + 0.0,
          tf.linspace(a, a * 2.0, 1) - 0.0, tf.linspace(a, a, 4) * 1.0,
          tf.linspace(b, b - 1.0, 2) * 1.0]
    for av, bv in ((np.float32(-1.3), 2.7), (np.float32(0.1), 1e-310)):
        got, want = run_both(ys, {a: av, b: bv})
        same_bits(got, want)
    np.testing.assert_array_equal(got[0], np.float32(0.1) + np.arange(5, dtype=np.float32))


def test_linspace_hand_values():
    a = tf.placeholder(tf.float64, [])
    with tf.Session(backend="numba") as sess:
        r = sess.run(tf.linspace(a, a + 1.0, 5) * 2.0, {a: 1.0})
    np.testing.assert_array_equal(r, [2.0, 2.5, 3.0, 3.5, 4.0])


def test_unsorted_segment_sum(mode):
    d = tf.placeholder(tf.float32, [None, 3])
    i = tf.placeholder(tf.int32, [None])
    y = tf.unsorted_segment_sum(d * 2.0, i, 4) + 1.0
    ids = np.array([0, 3, -1, 0, 2, 3], np.int32)
    dv = rand(6, 3)
    got, want = run_both([y], {d: dv, i: ids})
    same_bits(got, want)
    expect = np.ones((4, 3), np.float32)
    for k, s in enumerate(ids):
        if s >= 0:
            expect[s] += dv[k] * 2
    np.testing.assert_allclose(got[0], expect, rtol=1e-6)


def test_unsorted_segment_sum_of_a_matrix_of_ids(mode):
    d = tf.placeholder(tf.float64, [None, 2, 3])
    i = tf.placeholder(tf.int64, [None, 2])
    y = tf.unsorted_segment_sum(d * 3.0, i + 0, 3)
    got, want = run_both([y], {d: rand(4, 2, 3, dtype=np.float64),
                               i: np.array([[0, 2], [1, -1], [2, 2], [0, 0]])})
    same_bits(got, want)


def test_unsorted_segment_sum_id_out_of_range_raises(mode):
    d = tf.placeholder(tf.float32, [None])
    i = tf.placeholder(tf.int32, [None])
    y = tf.unsorted_segment_sum(d, i, 2)
    with tf.Session(backend="numba") as sess:
        with pytest.raises(errors.InvalidArgumentError, match="out of range"):
            sess.run(y, {d: np.ones(3, np.float32), i: np.array([0, 2, 1], np.int32)})


def test_diag_and_matrix_diag(mode):
    x = tf.placeholder(tf.float32, [None, 2])
    v = tf.placeholder(tf.int32, [3])
    ys = [tf.diag(x * 3.0), tf.matrix_diag(x + 1.0), tf.diag(v) * 1,
          tf.reduce_sum(tf.diag(x), axis=[0, 1])]
    got, want = run_both(ys, {x: rand(3, 2), v: np.array([1, 2, 3], np.int32)})
    same_bits(got, want)
    np.testing.assert_array_equal(got[2], [[1, 0, 0], [0, 2, 0], [0, 0, 3]])


@pytest.mark.parametrize("shape", [(2, 3, 5), (2, 4, 3), (2, 3, 1), (1, 1, 4)])
def test_matrix_diag_part(mode, shape):
    x = tf.placeholder(tf.float64, [None, None, None])
    ys = [tf.matrix_diag_part(x * 2.0), tf.reduce_sum(tf.matrix_diag_part(x), axis=1)]
    xv = rand(*shape, dtype=np.float64)
    got, want = run_both(ys, {x: xv})
    same_bits(got, want)
    k = min(shape[1:])
    np.testing.assert_array_equal(got[0], 2.0 * xv[:, np.arange(k), np.arange(k)])


def test_squeeze_and_matmul_of_unknown_ranks(mode):
    x = tf.placeholder(tf.float32)
    m = tf.placeholder(tf.float32, [None, None])
    ys = [tf.squeeze(x * 2.0, axis=[1]), tf.matmul(m, m, transpose_b=True) + 0.0]
    got, want = run_both(ys, {x: rand(3, 1, 2), m: rand(3, 4, seed=1)})
    same_bits(got, want, rtol=1e-6)


_TD_BITS: dict = {}


@pytest.mark.parametrize("sa,sb,axes", [((None, 3, 4), (4, 5), [[2], [0]]),
                                         ((2, 3, 4), (5, 4, 2), [[0, 2], [2, 1]]),
                                         ((4, 3, 2), (3, 5), [[1], [0]]),
                                         ((2, 3), (4,), 0)])
def test_tensordot_runs_as_one_reduce_with_its_gradients(mode, sa, sb, axes):
    a, b = tf.placeholder(tf.float32, sa), tf.placeholder(tf.float32, sb)
    y = tf.tensordot(a, b, axes) * 1.0
    ga, gb = tf.gradients(tf.reduce_sum(y * y), [a, b])
    av = rand(*[d or 6 for d in sa], seed=1)
    bv = rand(*sb, seed=2)
    got, want = run_both([y, ga, gb], {a: av, b: bv})
    np.testing.assert_allclose(got[0], np.tensordot(av, bv, axes), rtol=1e-5, atol=1e-6)
    for g, w in zip(got, want):   # (BLAS's order in the reference: rounding, not bits)
        assert np.asarray(g).dtype == np.asarray(w).dtype
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    # every compiled path sums in the same order: the same bits in every mode
    key = (sa, sb, str(axes))
    first = _TD_BITS.setdefault(key, [np.asarray(g).tobytes() for g in got])
    assert [np.asarray(g).tobytes() for g in got] == first
