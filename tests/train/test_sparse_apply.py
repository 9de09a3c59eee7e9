"""Sparse updates of large embedding tables: the same numbers as the dense update, only the
gathered rows touched, bad indices change nothing."""
from __future__ import annotations

import numpy as np
import pytest

import jitflow as tf
from jitflow.core import errors
from jitflow.train import sparse_apply

ROWS, DIM = 70000, 2   # above SPARSE_MIN_ELEMENTS


def _step(idx_dtype=np.int32, twice=True):
    table0 = np.random.default_rng(0).standard_normal((ROWS, DIM)).astype(np.float32)
    ids = tf.placeholder(idx_dtype, [None])
    emb = tf.Variable(table0)
    h = tf.nn.embedding_lookup(emb, ids)
    loss = tf.reduce_sum(h * h)
    if twice:
        loss = loss + tf.reduce_sum(tf.gather(emb, ids[:1]) * 3.0)
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    return table0, ids, emb, train


def test_large_tables_use_the_sparse_update(backend):
    assert ROWS * DIM >= sparse_apply.SPARSE_MIN_ELEMENTS
    table0, ids, emb, train = _step()
    types = {op.type for op in tf.get_default_graph().get_operations()}
    assert "SparseApplyGradientDescent" in types
    feed = np.array([3, 7, 3, 69999], np.int32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(train, {ids: feed})
        after = sess.run(emb)
    want = table0.copy()
    grad = np.zeros_like(table0)
    np.add.at(grad, feed, 2 * table0[feed])
    grad[3] += 3.0
    want -= 0.1 * grad
    np.testing.assert_allclose(after, want, rtol=1e-6, atol=1e-6)
    untouched = np.ones(ROWS, bool)
    untouched[feed] = False
    np.testing.assert_array_equal(after[untouched], table0[untouched])


def test_bad_index_changes_nothing(backend):
    table0, ids, emb, train = _step(twice=False)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        with pytest.raises(errors.InvalidArgumentError):
            sess.run(train, {ids: np.array([1, ROWS], np.int32)})
        np.testing.assert_array_equal(sess.run(emb), table0)


def test_small_tables_stay_dense():
    ids = tf.placeholder(tf.int32, [None])
    emb = tf.Variable(np.ones((10, 3), np.float32))
    tf.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(tf.gather(emb, ids)))
    types = {op.type for op in tf.get_default_graph().get_operations()}
    assert "SparseApplyGradientDescent" not in types and "GatherGrad" in types


def test_same_result_as_tensorflow():
    tf_ref = pytest.importorskip("tensorflow.compat.v1")
    feed = np.array([5, 0, 5, 123], np.int64)
    g = tf_ref.Graph()
    with g.as_default():
        table0 = np.random.default_rng(0).standard_normal((ROWS, DIM)).astype(np.float32)
        ids = tf_ref.placeholder(tf_ref.int64, [None])
        emb = tf_ref.Variable(table0)
        loss = tf_ref.reduce_sum(tf_ref.square(tf_ref.nn.embedding_lookup(emb, ids)))
        train = tf_ref.train.GradientDescentOptimizer(0.25).minimize(loss)
        with tf_ref.Session() as s:
            s.run(tf_ref.global_variables_initializer())
            s.run(train, {ids: feed})
            want = s.run(emb)
    ids = tf.placeholder(tf.int64, [None])
    emb = tf.Variable(table0)
    loss = tf.reduce_sum(tf.square(tf.nn.embedding_lookup(emb, ids)))
    train = tf.train.GradientDescentOptimizer(0.25).minimize(loss)
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        s.run(train, {ids: feed})
        np.testing.assert_allclose(s.run(emb), want, rtol=1e-6)
