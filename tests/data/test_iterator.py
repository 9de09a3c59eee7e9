"""Iterators: one-shot, initializable (fed placeholders), reinitializable, feedable; the end of
the data; threads; and a training step fed by get_next that still compiles."""
from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest

import jitflow as tf
from jitflow.core import errors
from pipeline_helpers import native_steps


def test_initializable_iterator_with_fed_placeholders(backend):
    x = tf.placeholder(tf.float32, [None, 2])
    bs = tf.placeholder(tf.int64, [])
    it = tf.data.Dataset.from_tensor_slices(x).batch(bs).make_initializable_iterator()
    nxt = it.get_next()
    assert nxt.shape.as_list() == [None, 2] and it.output_types == tf.float32
    with tf.Session() as sess:
        with pytest.raises(errors.FailedPreconditionError, match="not been initialized"):
            sess.run(nxt)
        for data, size in ((np.arange(10).reshape(5, 2), 2), (np.ones((3, 2)), 3)):
            sess.run(it.initializer, {x: data, bs: size})
            got = []
            while True:
                try:
                    got.append(sess.run(nxt))
                except errors.OutOfRangeError:
                    break
            np.testing.assert_array_equal(np.concatenate(got), data)
            assert len(got[0]) == size
        with pytest.raises(errors.OutOfRangeError, match="End of sequence"):
            sess.run(nxt)  # stays at the end


def test_one_shot_iterator_starts_itself_per_session(backend):
    nxt = tf.data.Dataset.range(3).make_one_shot_iterator().get_next()
    for _ in range(2):
        with tf.Session() as sess:
            assert [sess.run(nxt) for _ in range(3)] == [0, 1, 2]
            with pytest.raises(errors.OutOfRangeError):
                sess.run(nxt)
    assert tf.data.make_one_shot_iterator(tf.data.Dataset.range(1)).output_shapes.ndims == 0


def test_reinitializable_and_feedable_iterators(backend):
    it = tf.data.Iterator.from_structure(tf.int64, tf.TensorShape([]))
    nxt = it.get_next()
    a = it.make_initializer(tf.data.Dataset.range(3))
    b = it.make_initializer(tf.data.Dataset.range(5, 7))
    with pytest.raises(TypeError, match="Expected output types"):
        it.make_initializer(tf.data.Dataset.from_tensors(1.0))
    with pytest.raises(ValueError, match="does not have an initializer"):
        it.initializer  # noqa: B018
    handle = tf.placeholder(tf.string, [])
    feedable = tf.data.Iterator.from_string_handle(handle, tf.int64, tf.TensorShape([]))
    f_next = feedable.get_next()
    train_it = tf.data.Dataset.range(100, 103).make_one_shot_iterator()
    with tf.Session() as sess:
        sess.run(a)
        assert [sess.run(nxt) for _ in range(2)] == [0, 1]
        sess.run(b)
        assert [sess.run(nxt) for _ in range(2)] == [5, 6]
        h = sess.run(train_it.string_handle())
        assert isinstance(h, bytes)
        sess.run(a)
        ha = sess.run(it.string_handle())
        assert sess.run(f_next, {handle: h}) == 100
        assert sess.run(f_next, {handle: ha}) == 0
        assert sess.run(f_next, {handle: h}) == 101


def test_get_next_structure_and_classes():
    ds = tf.data.Dataset.from_tensor_slices(({"a": np.zeros((4, 2), np.float32)},
                                             np.arange(4)))
    it = ds.make_initializable_iterator()
    feats, labels = it.get_next()
    assert set(feats) == {"a"} and feats["a"].shape.as_list() == [2]
    assert tf.data.get_output_classes(it) == ({"a": tf.Tensor}, tf.Tensor)
    assert tf.data.get_output_types(ds) == ({"a": tf.float32}, tf.int64)
    assert tf.data.get_output_shapes(ds)[1].ndims == 0


def test_training_step_fed_by_an_iterator_compiles():
    """The pipeline runs on the host; the step's numeric ops are one native kernel with no
    reference fallback, and training converges."""
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((256, 3)).astype(np.float32)
    ys = xs @ np.array([[1.0], [2.0], [-1.0]], np.float32) + 0.5
    ds = tf.data.Dataset.from_tensor_slices((xs, ys)).shuffle(256, seed=1).repeat().batch(32)
    x, y = ds.make_one_shot_iterator().get_next()
    w = tf.Variable(tf.zeros([3, 1]))
    b = tf.Variable(0.0)
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with tf.Session(backend="numba") as sess:
            sess.run(tf.global_variables_initializer())
            for _ in range(200):
                sess.run(train)
            steps = native_steps(sess, train)
            w_val, b_val = sess.run([w, b])
    np.testing.assert_allclose(w_val.ravel(), [1, 2, -1], atol=1e-3)
    assert abs(b_val - 0.5) < 1e-3
    assert [k for k, _ in steps] == ["host", "host", "native"], steps
    assert ("host", "IteratorGetNext") in steps


def test_threads_share_an_iterator():
    nxt = tf.data.Dataset.range(400).make_one_shot_iterator().get_next()
    got: list = []
    lock = threading.Lock()
    with tf.Session() as sess:
        def worker():
            while True:
                try:
                    v = sess.run(nxt)
                except errors.OutOfRangeError:
                    return
                with lock:
                    got.append(int(v))
        threads = [threading.Thread(target=worker) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert sorted(got) == list(range(400))


def test_graphs_with_pipelines_serialize():
    ds = tf.data.Dataset.range(3).map(lambda n: n * 2)
    nxt = ds.make_one_shot_iterator().get_next()
    meta = tf.train.export_meta_graph()
    assert meta
    with tf.Session() as sess:
        assert sess.run(nxt) == 0


def test_element_arrays_are_not_views_of_the_data():
    data = np.arange(6.0).reshape(3, 2)
    nxt = tf.data.Dataset.from_tensor_slices(data).make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        first = sess.run(nxt)
        first[0] = 99.0
        assert sess.run(nxt).tolist() == [2.0, 3.0]
    assert data[0, 0] == 0.0
