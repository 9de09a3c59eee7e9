"""End-to-end smoke tests of the seeds' programs on every backend."""
import numpy as np

import jitflow as tf


def test_seeds_graph_prints_3_75(backend):
    a = tf.constant(15, name="a")
    b = tf.constant(5, name="b")
    res = tf.divide(tf.multiply(a, b), tf.add(a, b))
    with tf.Session() as sess:
        out = sess.run(res)
    assert out == 3.75
    assert isinstance(out, np.float64)


def test_fed_placeholders_and_variable(backend):
    x = tf.placeholder(tf.float32, [None, 2], name="x")
    w = tf.Variable([[1.0], [2.0]], name="w")
    y = tf.matmul(x, w) if hasattr(tf, "matmul") else x * 2.0
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        out = sess.run(y, {x: [[1.0, 1.0], [2.0, 0.5]]})
    assert out.dtype == np.float32
    assert out.shape[0] == 2
