"""Random ops: shapes and dtypes, TF1 seeding semantics, and the distributions' statistics."""
from __future__ import annotations

import numpy as np
import pytest

import jitflow as tf
from jitflow.ops.registry import get_op_def


def test_shapes_from_lists_and_tensors(backend):
    x = tf.placeholder(tf.float32, [None, 3])
    a = tf.random_uniform(tf.shape(x))
    b = tf.random_normal([2, 4], dtype=tf.float64)
    c = tf.truncated_normal((5,))
    assert a.shape.as_list() == [None, 3] and a.dtype == tf.float32
    assert b.shape.as_list() == [2, 4] and b.dtype == tf.float64
    with tf.Session() as sess:
        va, vb, vc = sess.run([a, b, c], {x: np.zeros((7, 3))})
    assert va.shape == (7, 3) and va.dtype == np.float32
    assert vb.shape == (2, 4) and vb.dtype == np.float64
    assert vc.shape == (5,) and vc.dtype == np.float32


def test_each_run_draws_new_values(backend):
    r = tf.random_normal([8])
    with tf.Session() as sess:
        a, b = sess.run(r), sess.run(r)
    assert not np.array_equal(a, b)


def test_one_run_computes_a_random_tensor_once(backend):
    r = tf.random_uniform([6])
    with tf.Session() as sess:
        a, b = sess.run([r, r])
        c, d = sess.run([r, r * 1.0])
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(c, d)


def test_graph_seed_repeats_sequence_in_a_new_session(backend):
    tf.set_random_seed(42)
    r = tf.random_normal([4])
    u = tf.random_uniform([4])
    with tf.Session() as sess:
        first = [sess.run(r), sess.run(r)]
        ru = sess.run(u)
    with tf.Session() as sess:
        second = [sess.run(r), sess.run(r)]
    np.testing.assert_array_equal(first[0], second[0])
    np.testing.assert_array_equal(first[1], second[1])
    assert not np.array_equal(first[0], first[1])
    # two ops with no op seed under one graph seed draw differently
    assert not np.allclose(np.sort(first[0]), np.sort(ru))


def test_two_unseeded_ops_under_a_graph_seed_differ(backend):
    tf.set_random_seed(1)
    a = tf.random_normal([5])
    b = tf.random_normal([5])
    with tf.Session() as sess:
        va, vb = sess.run([a, b])
    assert not np.array_equal(va, vb)


def test_op_seed_alone_repeats_and_no_seed_differs(backend):
    s = tf.random_uniform([6], seed=7)
    n = tf.random_uniform([6])
    with tf.Session() as s1, tf.Session() as s2:
        np.testing.assert_array_equal(s1.run(s), s2.run(s))
        assert not np.array_equal(s1.run(n), s2.run(n))


def test_same_graph_seed_in_two_graphs_gives_same_values(backend):
    vals = []
    for _ in range(2):
        g = tf.Graph()
        with g.as_default():
            tf.set_random_seed(5)
            r = tf.random_normal([3])
            with tf.Session() as sess:
                vals.append(sess.run(r))
    np.testing.assert_array_equal(vals[0], vals[1])


def test_random_normal_statistics(backend):
    r = tf.random_normal([20000], mean=3.0, stddev=0.5, seed=1)
    with tf.Session() as sess:
        v = sess.run(r)
    assert abs(v.mean() - 3.0) < 0.03 and abs(v.std() - 0.5) < 0.02


def test_truncated_normal_stays_within_two_stddev(backend):
    r = tf.truncated_normal([20000], mean=1.0, stddev=2.0, seed=3)
    with tf.Session() as sess:
        v = sess.run(r)
    assert v.min() >= 1.0 - 4.0 and v.max() <= 1.0 + 4.0
    # the standard normal truncated at 2 has stddev 0.8796
    assert abs(v.std() - 2.0 * 0.8796) < 0.05


def test_random_uniform_float_and_int(backend):
    f = tf.random_uniform([20000], -2.0, 3.0, seed=2)
    i = tf.random_uniform([5000], 3, 7, dtype=tf.int32, seed=2)
    i64 = tf.random_uniform([4], maxval=2, dtype=tf.int64)
    assert i.op.type == "RandomUniformInt" and i.dtype == tf.int32
    with tf.Session() as sess:
        vf, vi, v64 = sess.run([f, i, i64])
    assert vf.min() >= -2.0 and vf.max() < 3.0 and abs(vf.mean() - 0.5) < 0.05
    assert set(np.unique(vi)) == {3, 4, 5, 6} and vi.dtype == np.int32
    assert v64.dtype == np.int64 and set(np.unique(v64)) <= {0, 1}


def test_random_uniform_int_requires_maxval():
    with pytest.raises(ValueError, match="maxval"):
        tf.random_uniform([2], dtype=tf.int32)
    with pytest.raises(ValueError):
        tf.random_normal([2], dtype=tf.int32)


def test_random_shuffle_permutes_first_axis(backend):
    v = np.arange(20, dtype=np.float32).reshape(10, 2)
    s = tf.random_shuffle(tf.constant(v), seed=4)
    with tf.Session() as sess:
        a, b = sess.run(s), sess.run(s)
    for out in (a, b):
        assert sorted(out[:, 0].tolist()) == v[:, 0].tolist()
        np.testing.assert_array_equal(out[:, 1] - out[:, 0], np.ones(10))
    assert not np.array_equal(a, b)


def test_multinomial(backend):
    logits = tf.constant([[0.0, 50.0, 0.0], [np.log(0.25), np.log(0.75), -np.inf]])
    m = tf.multinomial(logits, 4000, seed=1)
    assert m.dtype == tf.int64 and m.shape.as_list() == [2, 4000]
    with tf.Session() as sess:
        v = sess.run(m)
    assert (v[0] == 1).all()
    assert set(np.unique(v[1])) <= {0, 1}
    assert abs((v[1] == 1).mean() - 0.75) < 0.04


def test_random_namespace():
    assert tf.random.normal is tf.random_normal
    assert tf.random.uniform is tf.random_uniform
    assert tf.random.truncated_normal is tf.truncated_normal
    assert tf.random.shuffle is tf.random_shuffle
    assert tf.random.categorical is tf.multinomial
    tf.random.set_random_seed(9)
    assert tf.get_default_graph().seed == 9


def test_random_ops_are_stateful_and_not_differentiable():
    for op_type in ("RandomStandardNormal", "RandomUniform", "RandomUniformInt",
                    "TruncatedNormal", "RandomShuffle", "Multinomial"):
        od = get_op_def(op_type)
        assert od.stateful and od.needs_ctx and not od.differentiable and od.kind == "random"
    x = tf.placeholder(tf.float32, [3])
    (g,) = tf.gradients(tf.reduce_sum(x * tf.random_normal([3])), [x])
    with tf.Session() as sess:
        assert sess.run(g, {x: np.ones(3)}).shape == (3,)


def test_op_seed_zero_is_a_real_seed(backend):
    r = tf.random_normal([4], seed=0)
    with tf.Session() as s1, tf.Session() as s2:
        np.testing.assert_array_equal(s1.run(r), s2.run(r))
