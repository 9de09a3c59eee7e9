"""Framework helpers: custom_gradient, make_template, IndexedSlices, asserts, tables."""
from __future__ import annotations

import numpy as np
import pytest

import jitflow as tf


def test_custom_gradient(backend):
    @tf.custom_gradient
    def clip_grad(x):
        def grad(dy):
            return tf.clip_by_value(dy, -0.1, 0.1)
        return tf.identity(x), grad

    x = tf.constant([1.0, 2.0])
    y = clip_grad(x) * 5.0
    g = tf.gradients(tf.reduce_sum(y), x)[0]
    rev = tf.grad_pass_through(tf.round)(x * 0.6)
    gr = tf.gradients(tf.reduce_sum(rev), x)[0]
    with tf.Session() as sess:
        yv, gv, rv, grv = sess.run([y, g, rev, gr])
    assert yv.tolist() == [5.0, 10.0] and gv.tolist() == pytest.approx([0.1, 0.1])
    assert rv.tolist() == [1.0, 1.0] and grv.tolist() == pytest.approx([0.6, 0.6])


def test_make_template_shares_variables():
    def layer(x):
        w = tf.get_variable("w", [2, 2], initializer=tf.ones_initializer())
        return tf.matmul(x, w)
    t = tf.make_template("net", layer)
    a = t(tf.ones([1, 2]))
    b = t(tf.ones([1, 2]) * 2.0)
    assert [v.name for v in tf.trainable_variables()] == ["net/w:0"]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert sess.run(a).tolist() == [[2, 2]] and sess.run(b).tolist() == [[4, 4]]


def test_indexed_slices_densify(backend):
    s = tf.IndexedSlices(tf.constant([[1.0, 2.0], [3.0, 4.0]]), tf.constant([2, 0]),
                         tf.constant([3, 2]))
    assert tf.is_tensor(s) and s.shape.as_list() == [3, 2]
    with tf.Session() as sess:
        assert sess.run(tf.convert_to_tensor(s)).tolist() == [[3, 4], [0, 0], [1, 2]]


def test_asserts_and_small_helpers(backend):
    assert tf.assert_same_float_dtype([tf.constant(1.0)]) == tf.float32
    with pytest.raises(TypeError):
        tf.assert_integer(tf.constant(1.0))
    with pytest.raises(ValueError, match="rank at least"):
        tf.assert_rank_at_least(tf.constant([1.0]), 2)
    with pytest.raises(ValueError):
        tf.assert_scalar(tf.constant([1.0]))
    with pytest.raises(TypeError):
        tf.assert_proper_iterable(np.array([1]))
    near = tf.assert_near(tf.constant([1.0]), tf.constant([1.0 + 1e-7]))
    far = tf.assert_near(tf.constant([1.0]), tf.constant([1.5]))
    with tf.Session() as sess:
        sess.run(near)
        sess.run(tf.tables_initializer())
        assert sess.run(tf.timestamp()) > 1.6e9
        with pytest.raises(tf.errors.InvalidArgumentError, match="tolerance"):
            sess.run(far)
    with tf.init_scope(), tf.container("c"), tf.colocate_with(near):
        pass
    assert tf.get_logger().name == "tensorflow"


def test_check_numerics_ops():
    x = tf.placeholder(tf.float32, [])
    y = tf.log(x)
    check = tf.add_check_numerics_ops()
    with tf.Session() as sess:
        sess.run(check, {x: 2.0})
        with pytest.raises(tf.errors.InvalidArgumentError):
            sess.run([y, check], {x: -1.0})
