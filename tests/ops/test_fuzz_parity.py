"""TF behaviours the differential fuzzer found jitflow missing, each with hand-computed values
(checked on every backend through the `backend` fixture)."""
from __future__ import annotations

import numpy as np
import pytest

import jitflow as tf
from jitflow.core import errors


@pytest.mark.parametrize("fn", [tf.add, tf.subtract, tf.multiply, tf.maximum, tf.minimum, tf.pow,
                                tf.equal, tf.less, tf.truediv, tf.floordiv, tf.squared_difference])
def test_function_form_converts_a_python_first_operand_on_its_own(fn):
    """`tf.add(1.5, x64)`: TF makes 1.5 a float32 tensor first, then refuses x64."""
    x64 = tf.placeholder(tf.float64, [2])
    x32 = tf.placeholder(tf.float32, [2])
    with pytest.raises(TypeError, match="float64 that does not match type float32"):
        fn(1.5, x64)
    with pytest.raises(TypeError, match="float32 that does not match type int32"):
        fn(2, x32)
    with pytest.raises(TypeError):
        fn(1.5, tf.Variable(np.zeros(2)))         # a float64 variable, too
    assert fn(x64, 1.5).op.inputs[1].dtype == tf.float64   # the tensor first: converted to it
    assert fn(1.5, x32).op.inputs[0].dtype == tf.float32


def test_operators_and_divide_convert_the_python_side_to_the_tensor():
    x64 = tf.placeholder(tf.float64, [2])
    for y in (1.5 + x64, 1.5 - x64, 2 * x64, 1.5 / x64, tf.divide(1.5, x64), 3 // x64,
              2.0 ** x64, tf.scalar_mul(2.0, x64)):
        assert y.dtype == tf.float64


def test_reshape_infers_minus_one_beside_a_zero_from_nonzero_dims(backend):
    x = tf.placeholder(tf.float32, [None, None])
    ys = [tf.reshape(x, [-1, 0]), tf.reshape(x, [0, -1]), tf.reshape(x, [-1, 0, 3])]
    assert [y.shape.as_list() for y in ys] == [[None, 0], [0, None], [None, 0, 3]]
    with tf.Session() as sess:
        got = sess.run(ys, {x: np.zeros((0, 3), np.float32)})
    assert [g.shape for g in got] == [(3, 0), (0, 3), (1, 0, 3)]


def test_reshape_checks_divisibility_against_known_dims_at_build():
    with pytest.raises(ValueError, match="evenly divisible by 3 but is 10"):
        tf.reshape(tf.placeholder(tf.float32, [None, 3]), [2, 5])
    assert tf.reshape(tf.placeholder(tf.float32, [None, 3]), [2, 6]).shape.as_list() == [2, 6]


@pytest.mark.parametrize("shape", [[-2, 3], [-1, 3]])
def test_negative_static_dimensions_are_rejected(shape):
    with pytest.raises(ValueError, match=f"Dimension {shape[0]} must be >= 0"):
        tf.placeholder(tf.float32, shape)


def test_empty_max_and_min_give_the_identity(backend):
    x = tf.placeholder(tf.float32, [None])
    i = tf.cast(x, tf.int32)
    with tf.Session() as sess:
        r = sess.run([tf.reduce_max(x), tf.reduce_min(x), tf.reduce_max(i), tf.reduce_min(i),
                      tf.reduce_max(x, keepdims=True)], {x: np.zeros(0, np.float32)})
    assert r[0] == -np.inf and r[1] == np.inf
    assert r[2] == np.iinfo(np.int32).min and r[3] == np.iinfo(np.int32).max
    assert r[4].shape == (1,) and r[4][0] == -np.inf


@pytest.mark.parametrize("fn", [tf.nn.softmax, tf.nn.log_softmax])
def test_softmax_of_empty_rows_is_empty(backend, fn):
    x = tf.placeholder(tf.float32, [None, None])
    with tf.Session() as sess:
        assert sess.run(fn(x), {x: np.zeros((2, 0), np.float32)}).shape == (2, 0)
        assert sess.run(fn(x, axis=0), {x: np.zeros((0, 3), np.float32)}).shape == (0, 3)


def test_softmax_over_a_named_axis_needs_a_known_rank():
    x = tf.placeholder(tf.float32, None)
    assert tf.nn.softmax(x).shape.ndims is None
    with pytest.raises(TypeError, match="unknown rank"):
        tf.nn.softmax(x, axis=0)


def test_gradient_of_x_over_x_is_exactly_zero(backend):
    x = tf.placeholder(tf.float32, [3])
    g = tf.gradients(x / x, x)[0]
    with tf.Session() as sess:
        r = sess.run(g, {x: np.array([0.3, 1.7, -2.9], np.float32)})
    np.testing.assert_array_equal(r, np.zeros(3, np.float32))


def test_missing_feed_is_invalid_argument(backend):
    x = tf.placeholder(tf.float32, [None], name="needed")
    with tf.Session() as sess:
        with pytest.raises(errors.InvalidArgumentError, match="needed"):
            sess.run(x * 2.0)
