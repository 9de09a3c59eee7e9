"""Segment reductions and the tf.math special functions and compositions."""
from __future__ import annotations

import numpy as np
import pytest

import jitflow as tf
from jitflow.core import errors

D = np.array([[1.0, 2], [3, 4], [5, 6], [7, 8]], np.float32)
IDS = np.array([0, 0, 1, 3], np.int32)


def test_segment_values_by_hand(backend):
    d = tf.constant(D)
    outs = [tf.segment_sum(d, IDS), tf.segment_max(d, IDS), tf.segment_min(d, IDS),
            tf.segment_mean(d, IDS), tf.segment_prod(d, IDS),
            tf.unsorted_segment_max(d, IDS, 5), tf.unsorted_segment_mean(d, IDS, 5),
            tf.unsorted_segment_prod(d, [0, -1, 0, 2], 3),
            tf.unsorted_segment_sqrt_n(d, IDS, 4), tf.sparse_segment_sum(d, [0, 2], [0, 0]),
            tf.sparse.segment_mean(d, [1, 2, 3], [0, 1, 1])]
    with tf.Session() as sess:
        got = [g.tolist() for g in sess.run(outs)]
    assert got[0] == [[4, 6], [5, 6], [0, 0], [7, 8]]
    assert got[1] == [[3, 4], [5, 6], [0, 0], [7, 8]]  # an empty sorted segment gives 0
    assert got[2] == [[1, 2], [5, 6], [0, 0], [7, 8]]
    assert got[3] == [[2, 3], [5, 6], [0, 0], [7, 8]]
    assert got[4] == [[3, 8], [5, 6], [1, 1], [7, 8]]
    assert got[5][2] == [-np.inf, -np.inf]   # unsorted: the lowest value
    assert got[6][0] == [2, 3] and got[6][4] == [0, 0]
    assert got[7] == [[5, 12], [1, 1], [7, 8]]
    np.testing.assert_allclose(got[8][0], np.array([4, 6]) / np.sqrt(2), rtol=1e-6)
    assert got[9] == [[6, 8]] and got[10] == [[3, 4], [6, 7]]
    with pytest.raises(errors.InvalidArgumentError, match="not increasing"):
        with tf.Session() as sess:
            sess.run(tf.segment_sum(d, [1, 0, 0, 0]))


@pytest.mark.parametrize("how", ["sum", "mean", "max", "min", "prod"])
def test_segment_gradients_match_tensorflow(how):
    tf_ref = pytest.importorskip("tensorflow.compat.v1")
    x = np.array([[1.0, -2], [3, 4], [5, 0.5], [7, 8], [2, 2]], np.float32)
    ids = np.array([0, 0, 1, 1, 3], np.int32)

    def build(t):
        d = t.constant(x)
        y = getattr(t, f"segment_{how}")(d, ids)
        yu = getattr(t.math, f"unsorted_segment_{how}")(d, ids, 4)
        w = t.constant(np.arange(8, dtype=np.float32).reshape(4, 2))
        loss = t.reduce_sum(y * w) + t.reduce_sum(t.where(t.is_finite(yu), yu,
                                                          t.zeros_like(yu)) * w)
        return [y, t.gradients(loss, d)[0]]
    g = tf_ref.Graph()
    with g.as_default():
        want = tf_ref.Session().run(build(tf_ref))
    with tf.Session() as sess:
        got = sess.run(build(tf))
    for w, h in zip(want, got):
        np.testing.assert_allclose(h, w, rtol=1e-6)


SPECIAL = {
    "lgamma": lambda t: t.lgamma([0.5, 3.0, 10.0]),
    "digamma": lambda t: t.math.digamma([0.5, 1.0, 7.5]),
    "erfc": lambda t: t.math.erfc([-1.0, 0.3, 4.0]),
    "polygamma": lambda t: t.math.polygamma(1.0, [0.5, 2.0]),
    "lbeta": lambda t: t.math.lbeta([[1.0, 2.0, 3.0]]),
    "xlogy": lambda t: t.math.xlogy([0.0, 2.0], [0.0, 3.0]),
    "xdivy": lambda t: t.math.xdivy([0.0, 2.0], [0.0, 4.0]),
    "multiply_no_nan": lambda t: t.math.multiply_no_nan([np.inf, 2.0], [0.0, 3.0]),
    "reciprocal_no_nan": lambda t: t.math.reciprocal_no_nan([0.0, 4.0]),
    "bincount": lambda t: t.math.bincount([1, 1, 3, 7], minlength=9),
    "bincount_w": lambda t: t.math.bincount([1, 1, 3], weights=[0.5, 1.0, 2.0], maxlength=3),
    "confusion": lambda t: t.math.confusion_matrix([0, 1, 2, 1], [0, 2, 2, 1]),
    "non_decreasing": lambda t: t.math.is_non_decreasing([1, 2, 2, 3]),
    "strictly": lambda t: t.math.is_strictly_increasing([1, 2, 2]),
    "euclid": lambda t: t.math.reduce_euclidean_norm([[3.0, 4.0], [6.0, 8.0]], axis=1),
    "cumlse": lambda t: t.math.cumulative_logsumexp([1.0, 2.0, 30.0]),
    "polyval": lambda t: t.math.polyval([1.0, 2.0, 3.0], t.constant([2.0, -1.0])),
    "lgamma_grad": lambda t: (lambda x: t.gradients(t.reduce_sum(t.lgamma(x)), x)[0])(
        t.constant([0.7, 2.5])),
    "erfc_grad": lambda t: (lambda x: t.gradients(t.reduce_sum(t.math.erfc(x)), x)[0])(
        t.constant([0.7, -1.5])),
}


@pytest.mark.parametrize("name", sorted(SPECIAL))
def test_math_parity_with_tensorflow(name):
    tf_ref = pytest.importorskip("tensorflow.compat.v1")
    g = tf_ref.Graph()
    with g.as_default():
        want = tf_ref.Session().run(SPECIAL[name](tf_ref))
    with tf.Session() as sess:
        got = sess.run(SPECIAL[name](tf))
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                               rtol=2e-5)
    assert np.asarray(got).dtype == np.asarray(want).dtype


def test_special_functions_by_hand(backend):
    with tf.Session() as sess:
        lg, dg, ec, xl = sess.run([tf.lgamma(4.0), tf.digamma(1.0), tf.erfc(0.0),
                                   tf.math.xlogy(0.0, 0.0)])
    assert lg == pytest.approx(np.log(6.0), rel=1e-6)
    assert dg == pytest.approx(-0.5772156649, rel=1e-6)
    assert ec == 1.0 and xl == 0.0


def test_more_special_functions_and_sparse_products(backend):
    sp = tf.SparseTensor([[0, 1], [2, 0], [2, 2]], [2.0, 3.0, -1.0], [3, 3])
    b = tf.constant(np.arange(6.0).reshape(3, 2), tf.float32)
    prod = tf.sparse_tensor_dense_matmul(sp, b)
    g = tf.gradients(tf.reduce_sum(prod), b)[0]
    with tf.Session() as sess:
        p, gv, rs, ig, ze, ei, nd = sess.run([
            prod, g, tf.sparse_reduce_sum(sp, 1), tf.igamma(2.0, 1.0), tf.zeta(2.0, 1.0),
            tf.math.erfinv(0.5), tf.math.ndtri(0.975)])
    dense = np.array([[0, 2, 0], [0, 0, 0], [3, 0, -1]], np.float32)
    np.testing.assert_allclose(p, dense @ np.arange(6.0).reshape(3, 2))
    np.testing.assert_allclose(gv, dense.sum(0)[:, None] * np.ones((3, 2)))
    assert rs.tolist() == [2, 0, 2]
    assert ig == pytest.approx(1 - 2 / np.e, rel=1e-6)
    assert ze == pytest.approx(np.pi ** 2 / 6, rel=1e-6)
    assert ei == pytest.approx(0.4769362762, rel=1e-6) and nd == pytest.approx(1.959964, rel=1e-5)
