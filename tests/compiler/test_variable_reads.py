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


def _both(fetches, feed=None, steps=2):
    results = {}
    for backend in ("interpreter", "numba"):
        with tf.Session(backend=backend) as sess:
            sess.run(tf.global_variables_initializer())
            results[backend] = [sess.run(fetches, feed) for _ in range(steps)]
    assert_same_result(results["numba"], results["interpreter"])
    return results["numba"]


def test_an_assigned_value_is_read_from_the_variable_without_a_copy():
    # Adam's pattern: m = assign(m, ...) then m's new value used by the next update
    m = tf.Variable(np.arange(6, dtype=np.float32), name="m")
    p = tf.Variable(np.ones(6, np.float32), name="p")
    new_m = tf.assign(m, m * 0.9 + 0.5)
    train = tf.group(tf.assign_sub(p, new_m * 0.1))
    _both([train, new_m, p])
    with tf.Session(backend="numba") as sess:
        sess.run(tf.global_variables_initializer())
        src = sess.inspect(train)
    assert ".copy()" not in src, src


def test_an_assigned_value_keeps_its_value_when_the_variable_is_written_again():
    v = tf.Variable(np.arange(5, dtype=np.float32), name="v")
    first = tf.assign(v, v + 1.0)
    with tf.control_dependencies([first]):
        second = tf.assign(v, v.read_value() * 3.0)
    with tf.control_dependencies([second]):
        both = first * 10.0 + second   # `first` read after the second write
    out = _both([both, first, second], steps=3)
    np.testing.assert_allclose(out[0][1], np.arange(5) + 1.0)
    np.testing.assert_allclose(out[0][2], (np.arange(5) + 1.0) * 3.0)
