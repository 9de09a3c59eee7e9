"""dynamic_partition/stitch, sorting, sets, repeat, histograms, scatter variants, random
gamma/poisson and the shape helpers."""
from __future__ import annotations

import numpy as np
import pytest

import jitflow as tf
from jitflow.core import errors


def test_partition_and_stitch_with_gradients(backend):
    d = tf.constant([10.0, 20, 30, 40])
    parts = tf.dynamic_partition(d, tf.constant([1, 0, 1, 0]), 2)
    st = tf.dynamic_stitch([tf.constant([0, 2]), tf.constant([1, 3])],
                           [tf.constant([1.0, 2]), tf.constant([3.0, 4])])
    g = tf.gradients(tf.reduce_sum(parts[0] * 2.0) + tf.reduce_sum(parts[1]), d)[0]
    with tf.Session() as sess:
        p, s, gv = sess.run([parts, st, g])
    assert [x.tolist() for x in p] == [[20, 40], [10, 30]]
    assert s.tolist() == [1, 3, 2, 4] and gv.tolist() == [1, 2, 1, 2]
    with pytest.raises(errors.InvalidArgumentError, match="not in"):
        with tf.Session() as sess:
            sess.run(tf.dynamic_partition(d, tf.constant([0, 0, 2, 0]), 2))


def test_sort_argsort_and_gradient(backend):
    x = tf.constant([[3.0, 1, 2], [0, 5, 4]])
    desc = tf.sort(x, direction="DESCENDING")
    g = tf.gradients(tf.reduce_sum(desc * [[1.0, 2, 3]]), x)[0]
    with tf.Session() as sess:
        s, a, d, gv = sess.run([tf.sort(x), tf.argsort(x, direction="DESCENDING"), desc, g])
    assert s.tolist() == [[1, 2, 3], [0, 4, 5]] and a.tolist() == [[0, 2, 1], [1, 2, 0]]
    assert d.tolist() == [[3, 2, 1], [5, 4, 0]] and gv.tolist() == [[1, 3, 2], [3, 1, 2]]


def test_sets_repeat_histogram_searchsorted(backend):
    with tf.Session() as sess:
        u = sess.run(tf.unique_with_counts([1, 1, 3, 2, 3]))
        s = sess.run(tf.setdiff1d([1, 2, 3, 4], [2, 4]))
        r, h, ss, bg = sess.run([tf.repeat([1, 2], 2), tf.repeat([[1, 2]], [1, 3], axis=1),
                                 tf.searchsorted([[1, 3, 5]], [[2, 5]], side="right"),
                                 tf.batch_gather([[1, 2, 3], [4, 5, 6]], [[2, 0], [1, 1]])])
        hist = sess.run(tf.histogram_fixed_width([0.0, 1, 2, 9, -3], [0.0, 10.0], 5))
    assert u.y.tolist() == [1, 3, 2] and u.idx.tolist() == [0, 0, 1, 2, 1]
    assert u.count.tolist() == [2, 2, 1]
    assert s.out.tolist() == [1, 3] and s.idx.tolist() == [0, 2]
    assert r.tolist() == [1, 1, 2, 2] and h.tolist() == [[1, 2, 2, 2]]
    assert ss.tolist() == [[1, 3]] and bg.tolist() == [[3, 1], [5, 5]]
    assert hist.tolist() == [3, 1, 0, 0, 1]  # bins of width 2; -3 goes to the first


def test_scatter_variants_on_variables(backend):
    v = tf.Variable(np.ones((3, 2), np.float32))
    with tf.Session() as sess:
        sess.run(v.initializer)
        sess.run(tf.scatter_nd_update(v, [[0, 1]], [5.0]))
        sess.run(tf.scatter_nd_add(v, [[2, 0], [2, 0]], [1.0, 2.0]))
        sess.run(tf.scatter_mul(v, [1], [[3.0, 4.0]]))
        sess.run(tf.scatter_max(v, [0], [[0.0, 9.0]]))
        sess.run(tf.scatter_min(v, [2], [[2.0, 2.0]]))
        out = sess.run(v)
    assert out.tolist() == [[1, 9], [3, 4], [2, 1]]


def test_random_gamma_and_poisson_moments():
    tf.set_random_seed(1)
    g = tf.random_gamma([20000], [2.0, 5.0], beta=2.0)
    p = tf.random.poisson(3.0, [20000])
    with tf.Session() as sess:
        gv, pv = sess.run([g, p])
    assert gv.shape == (20000, 2) and pv.shape == (20000,) and pv.dtype == np.float32
    np.testing.assert_allclose(gv.mean(0), [1.0, 2.5], rtol=0.03)
    assert abs(pv.mean() - 3.0) < 0.06 and np.all(pv == np.floor(pv))


def test_shape_helpers_and_checks(backend):
    assert tf.broadcast_static_shape(tf.TensorShape([2, 1]), tf.TensorShape([3])).as_list() \
        == [2, 3]
    assert tf.dimension_value(tf.TensorShape([4, None])[0]) == 4
    assert tf.dimension_at_index(tf.TensorShape([None, 2]), 1).value == 2
    p = tf.placeholder(tf.float32, [None, None])
    e = tf.ensure_shape(p, [None, 3])
    assert e.shape.as_list() == [None, 3]
    with tf.Session() as sess:
        assert sess.run(tf.broadcast_dynamic_shape([2, 1], [3])).tolist() == [2, 3]
        with pytest.raises(errors.InvalidArgumentError, match="not compatible"):
            sess.run(e, {p: np.zeros((2, 2))})
        sat = sess.run(tf.saturate_cast([-5.0, 300.0, 7.6], tf.uint8))
    assert sat.tolist() == [0, 255, 7]
