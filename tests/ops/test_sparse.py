"""SparseTensor: fetched as SparseTensorValue, fed through sparse_placeholder, densified."""
from __future__ import annotations

import numpy as np
import pytest

import jitflow as tf
from jitflow.core import errors


def test_fetch_and_feed_sparse_tensor(backend):
    sp = tf.SparseTensor(indices=[[0, 1], [2, 0]], values=[1.5, -2.0], dense_shape=[3, 2])
    assert sp.dtype == tf.float32 and sp.shape.as_list() == [3, 2]
    ph = tf.sparse_placeholder(tf.float32, shape=[None, 4])
    dense = tf.sparse.to_dense(ph)
    with tf.Session() as sess:
        v = sess.run(sp)
        assert isinstance(v, tf.SparseTensorValue)
        assert v.indices.tolist() == [[0, 1], [2, 0]] and v.indices.dtype == np.int64
        assert v.values.tolist() == [1.5, -2.0] and v.dense_shape.tolist() == [3, 2]
        fed = tf.SparseTensorValue(np.array([[1, 3]]), np.array([7.0], np.float32),
                                   np.array([2, 4]))
        want = np.zeros((2, 4), np.float32)
        want[1, 3] = 7
        np.testing.assert_array_equal(sess.run(dense, {ph: fed}), want)
        np.testing.assert_array_equal(sess.run(dense, {ph: ([[0, 0]], [1.0], [1, 4])}),
                                      [[1, 0, 0, 0]])
        both = sess.run({"s": sp, "d": tf.sparse_tensor_to_dense(sp, default_value=9.0)})
        np.testing.assert_array_equal(both["d"], [[9, 1.5], [9, 9], [-2, 9]])
        assert isinstance(both["s"], tf.SparseTensorValue)


def test_sparse_to_dense_and_its_gradient(backend):
    vals = tf.constant([1.0, 2.0, 3.0])
    d = tf.sparse_to_dense([[0, 0], [1, 2], [2, 1]], [3, 3], vals, default_value=-1.0)
    assert d.shape.as_list() == [3, 3]
    g = tf.gradients(tf.reduce_sum(d * tf.constant(np.arange(9.0, dtype=np.float32)
                                                   .reshape(3, 3))), vals)[0]
    with tf.Session() as sess:
        out, grad = sess.run([d, g])
    np.testing.assert_array_equal(out, [[1, -1, -1], [-1, -1, 2], [-1, 3, -1]])
    np.testing.assert_array_equal(grad, [0, 5, 7])
    with pytest.raises(errors.InvalidArgumentError, match="out of bounds"):
        with tf.Session() as sess:
            sess.run(tf.sparse_to_dense([[3, 0]], [3, 3], [1.0]))


def test_sparse_to_dense_parity_with_tensorflow():
    tf_ref = pytest.importorskip("tensorflow.compat.v1")
    g = tf_ref.Graph()
    with g.as_default():
        want = tf_ref.Session().run(tf_ref.sparse_to_dense([1, 3], [5], [4, 6], 0))
    with tf.Session() as sess:
        got = sess.run(tf.sparse_to_dense([1, 3], [5], [4, 6], 0))
    np.testing.assert_array_equal(got, want)
    assert got.dtype == want.dtype
