"""conv2d_transpose (tf.nn and tf.layers): shapes, values against TensorFlow, gradients by
finite differences, and the run-time size check."""
from __future__ import annotations

import numpy as np
import pytest

import jitflow as tf
from jitflow.core import errors

RNG = np.random.default_rng(0)
V = RNG.standard_normal((2, 3, 3, 4)).astype(np.float32)
F = RNG.standard_normal((3, 3, 5, 4)).astype(np.float32)
CASES = [("SAME", [2, 6, 6, 5]), ("VALID", [2, 7, 7, 5]), ("SAME", [2, 5, 5, 5])]


def _build(t, padding, out_shape):
    v, f = t.constant(V), t.constant(F)
    y = t.nn.conv2d_transpose(v, f, out_shape, [1, 2, 2, 1], padding)
    return [y] + t.gradients(t.reduce_sum(y * y), [v, f])


@pytest.mark.parametrize("padding,out_shape", CASES)
def test_matches_tensorflow(padding, out_shape):
    tf_ref = pytest.importorskip("tensorflow.compat.v1")
    g = tf_ref.Graph()
    with g.as_default():
        want = tf_ref.Session(graph=g).run(_build(tf_ref, padding, out_shape))
    for backend in ("interpreter", "numba"):
        with tf.Session(backend=backend) as sess:
            got = sess.run(_build(tf, padding, out_shape))
        for w, h in zip(want, got):
            np.testing.assert_allclose(h, w, rtol=2e-4, atol=2e-3)


def test_static_shape_name_and_checks():
    y = tf.nn.conv2d_transpose(tf.constant(V), tf.constant(F), [2, 6, 6, 5], [1, 2, 2, 1])
    assert y.shape.as_list() == [2, 6, 6, 5] and y.op.name == "conv2d_transpose"
    x = tf.placeholder(tf.float32, [None, 3, 3, 4])
    dyn = tf.nn.conv2d_transpose(x, tf.constant(F), tf.stack([tf.shape(x)[0], 6, 6, 5]),
                                 [1, 2, 2, 1])
    assert dyn.shape.as_list() == [None, 6, 6, 5]
    with pytest.raises(ValueError, match="input channels does not match"):
        tf.nn.conv2d_transpose(tf.zeros([1, 3, 3, 2]), tf.constant(F), [1, 6, 6, 5], 2)
    with pytest.raises(ValueError, match="output_shape does not match filter's output"):
        tf.nn.conv2d_transpose(tf.constant(V), tf.constant(F), [2, 6, 6, 4], 2)
    bad = tf.nn.conv2d_transpose(tf.constant(V), tf.constant(F), [2, 9, 9, 5], [1, 2, 2, 1])
    with pytest.raises(errors.InvalidArgumentError, match="Size of out_backprop doesn't match"):
        with tf.Session() as sess:
            sess.run(bad)


def test_gradients_by_finite_differences():
    v = tf.placeholder(tf.float64, [1, 2, 3, 2])
    f = tf.placeholder(tf.float64, [3, 2, 3, 2])
    y = tf.nn.conv2d_transpose(v, f, [1, 4, 5, 3], [1, 2, 2, 1], "SAME")
    w = tf.constant(np.random.default_rng(1).standard_normal((1, 4, 5, 3)))
    loss = tf.reduce_sum(y * w)
    grads = tf.gradients(loss, [v, f])
    rng = np.random.default_rng(2)
    vals = {v: rng.standard_normal((1, 2, 3, 2)), f: rng.standard_normal((3, 2, 3, 2))}
    with tf.Session(backend="interpreter") as sess:
        got = sess.run(grads, vals)
        for t, g in zip((v, f), got):
            num = np.zeros_like(vals[t])
            for idx in np.ndindex(num.shape):
                d = dict(vals)
                d[t] = vals[t].copy()
                d[t][idx] += 1e-6
                up = sess.run(loss, d)
                d[t][idx] -= 2e-6
                num[idx] = (up - sess.run(loss, d)) / 2e-6
            np.testing.assert_allclose(g, num, rtol=1e-6, atol=1e-6)


def test_conv2d_backprop_input_is_the_same_op(backend):
    x = tf.constant(V)
    a = tf.nn.conv2d_backprop_input([2, 6, 6, 5], tf.constant(F), x, [1, 2, 2, 1], "SAME")
    b = tf.nn.conv2d_transpose(x, tf.constant(F), [2, 6, 6, 5], [1, 2, 2, 1], "SAME")
    with tf.Session() as sess:
        va, vb = sess.run([a, b])
    np.testing.assert_array_equal(va, vb)


@pytest.mark.parametrize("padding,strides,kernel,want_hw", [
    ("same", 2, 3, (8, 8)), ("valid", (2, 1), (3, 2), (9, 5)), ("valid", 1, 3, (6, 6))])
def test_layer_shapes_and_values(backend, padding, strides, kernel, want_hw):
    x = tf.placeholder(tf.float32, [None, 4, 4, 3])
    layer = tf.layers.Conv2DTranspose(2, kernel, strides=strides, padding=padding,
                                      kernel_initializer=tf.constant_initializer(0.1),
                                      bias_initializer=tf.constant_initializer(0.5))
    y = layer(x)
    assert y.shape.as_list() == [None, *want_hw, 2]
    assert layer.kernel.shape.as_list() == [*np.broadcast_to(kernel, 2), 2, 3]
    xv = RNG.standard_normal((2, 4, 4, 3)).astype(np.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        out = sess.run(y, {x: xv})
    kh, kw = np.broadcast_to(kernel, 2)
    sh, sw = np.broadcast_to(strides, 2)
    # every output pixel sums 0.1 * (all input channels) over the taps that reach it
    full = np.zeros((2, (4 - 1) * sh + kh, (4 - 1) * sw + kw))
    for i in range(4):
        for j in range(4):
            full[:, i * sh:i * sh + kh, j * sw:j * sw + kw] += xv[:, i, j, :].sum(-1)[:, None,
                                                                                     None]
    if padding == "same":  # the transposed SAME convolution crops its padding (before: half)
        ph = max((4 - 1) * sh + kh - want_hw[0], 0) // 2
        pw = max((4 - 1) * sw + kw - want_hw[1], 0) // 2
        full = full[:, ph:ph + want_hw[0], pw:pw + want_hw[1]]
    np.testing.assert_allclose(out[..., 0], 0.1 * full + 0.5, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out[..., 1], out[..., 0], rtol=1e-6)


def test_layer_function_names_its_variables():
    x = tf.placeholder(tf.float32, [None, 4, 4, 3])
    tf.layers.conv2d_transpose(x, 6, 3, strides=2, padding="same")
    tf.layers.conv2d_transpose(x, 2, 3, activation=tf.nn.relu)
    assert [v.name for v in tf.trainable_variables()] == [
        "conv2d_transpose/kernel:0", "conv2d_transpose/bias:0",
        "conv2d_transpose_1/kernel:0", "conv2d_transpose_1/bias:0"]
