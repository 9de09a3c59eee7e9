"""Long chains build and run without RecursionError: planning, the interpreter and the
compiler walk graphs iteratively."""
from __future__ import annotations

import numpy as np

import jitflow as tf

N = 20_000


def _add_chain(n: int = N):
    x = tf.placeholder(tf.float32, [2], name="x")
    y = x
    for _ in range(n):
        y = y + 1.0
    return x, y


def test_chain_on_the_interpreter():
    x, y = _add_chain()
    assert y.name == f"add_{N - 1}:0"
    with tf.Session(backend="interpreter") as sess:
        out = sess.run(y, {x: [0.0, 1.0]})
        again = sess.run(y, {x: [1.0, 2.0]})
    np.testing.assert_array_equal(out, [N, N + 1])
    np.testing.assert_array_equal(again, [N + 1, N + 2])


def test_chain_on_every_backend(backend):
    x, y = _add_chain()
    with tf.Session() as sess:
        out = sess.run(y, {x: [0.0, 1.0]})
    np.testing.assert_array_equal(out, [N, N + 1])


def test_chain_of_structural_ops(backend):
    x = tf.placeholder(tf.float32, [2, 3])
    y = x
    for i in range(N // 4):
        y = tf.transpose(y) if i % 2 else tf.reshape(y, [3, 2])
    with tf.Session() as sess:
        out = sess.run(y, {x: np.arange(6, dtype=np.float32).reshape(2, 3)})
    want = np.arange(6, dtype=np.float32).reshape(2, 3)
    for i in range(N // 4):
        want = want.T if i % 2 else want.reshape(3, 2)
    np.testing.assert_array_equal(out, want)


def test_chain_of_control_dependencies(backend):
    v = tf.Variable(0)
    ops = [v.assign_add(1).op]
    for _ in range(N // 2):
        with tf.control_dependencies([ops[-1]]):
            ops.append(tf.no_op())
    with tf.Session() as sess:
        sess.run(v.initializer)
        sess.run(ops[-1])
        assert sess.run(v) == 1


def test_text_form_and_static_values_of_a_long_chain():
    c = tf.constant(0)
    for _ in range(N // 2):
        c = c + 1
    text = tf.get_default_graph().as_text()
    assert text.count("\n") + 1 == len(tf.get_default_graph().get_operations())
    # build-time evaluation looks only a few ops deep, so a long chain is simply unknown
    assert tf.get_static_value(c) is None
