"""A variable's `read` snapshot is shared with the variable's buffer, and copied only when the
variable is written while the read still has consumers (the interpreter's order decides)."""
import numpy as np

import jitflow as tf
from helpers import assert_same_result


def _sgd_graph():
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    w = tf.Variable(np.arange(6, dtype=np.float32).reshape(3, 2) / 10, name="w")
    loss = tf.reduce_sum(tf.square(tf.matmul(x, w)))
    train = tf.train.GradientDescentOptimizer(0.01).minimize(loss)
    return x, w, loss, train


def test_a_read_used_only_before_the_update_is_not_copied():
    x, w, loss, train = _sgd_graph()
    feed = {x: np.ones((4, 3), np.float32)}
    with tf.Session(backend="numba") as sess:
        sess.run(tf.global_variables_initializer())
        src = sess.inspect(train, feed)
    assert "# w/read" not in src, src


def test_a_read_consumed_after_the_update_sees_the_value_from_before_it():
    x, w, loss, train = _sgd_graph()
    with tf.control_dependencies([train]):
        after = tf.identity(w.value() * 1.0, name="after")  # w/read consumed after the write
    feed = {x: np.ones((4, 3), np.float32)}
    results = {}
    for backend in ("interpreter", "numba"):
        with tf.Session(backend=backend) as sess:
            sess.run(tf.global_variables_initializer())
            results[backend] = [sess.run([after, loss], feed) for _ in range(3)]
    assert_same_result(results["numba"], results["interpreter"])
    # the read snapshot is the pre-update value: equal to the initial w on the first step
    np.testing.assert_allclose(results["numba"][0][0],
                               np.arange(6, dtype=np.float32).reshape(3, 2) / 10)
