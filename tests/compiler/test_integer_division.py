"""Integer division and modulo: a zero divisor raises InvalidArgumentError naming the op on
every backend, on the warm path and in make_callable, leaving variables unchanged; truncated
division rounds toward zero without overflowing at INT_MIN (as TF)."""
from __future__ import annotations

import numpy as np
import pytest

import jitflow as tf
from jitflow.core import errors

_OPS = {"floordiv": lambda a, b: a // b, "floormod": tf.floormod,
        "truncatediv": tf.truncatediv, "truncatemod": tf.truncatemod}


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("name", sorted(_OPS))
def test_division_by_zero_raises_on_every_path(backend, name, dtype):
    x = tf.placeholder(dtype, [None], name="x")
    y = tf.placeholder(dtype, [None], name="y")
    z = _OPS[name](x, y)
    a = np.array([7, -7, 3], dtype)
    good, bad = np.array([2, 2, -2], dtype), np.array([2, 0, 1], dtype)
    with tf.Session() as sess:
        expect = sess.run(z, {x: a, y: good})
        for _ in range(3):      # first call, then the warm path
            with pytest.raises(errors.InvalidArgumentError, match=z.op.name):
                sess.run(z, {x: a, y: bad})
            np.testing.assert_array_equal(sess.run(z, {x: a, y: good}), expect)
        run = sess.make_callable(z, [x, y])
        for _ in range(2):
            with pytest.raises(errors.InvalidArgumentError):
                run(a, bad)
        np.testing.assert_array_equal(run(a, good), expect)


def test_division_by_a_computed_zero_leaves_variables_unchanged(backend):
    x = tf.placeholder(tf.int32, [None])
    v = tf.Variable(np.array([10, 20], np.int32))
    w = tf.Variable(np.array([1, 1], np.int32))
    step = tf.group(tf.assign_add(w, tf.ones([2], tf.int32)),
                    tf.assign(v, v // (x - 1)))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(2):
            with pytest.raises(errors.InvalidArgumentError):
                sess.run(step, {x: np.array([1, 3], np.int32)})
            np.testing.assert_array_equal(sess.run(v), [10, 20])
            np.testing.assert_array_equal(sess.run(w), [1, 1])
        sess.run(step, {x: np.array([2, 3], np.int32)})
        np.testing.assert_array_equal(sess.run(v), [10, 10])
        np.testing.assert_array_equal(sess.run(w), [2, 2])


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_truncatediv_rounds_toward_zero_at_int_min(backend, dtype):
    lo = np.iinfo(dtype).min
    x = tf.placeholder(dtype, [None])
    y = tf.placeholder(dtype, [None])
    a = np.array([lo, lo, -7, 7, -7, 7, 6], dtype)
    b = np.array([2, 3, 2, -2, -2, 2, -3], dtype)
    with tf.Session() as sess:
        q, r = sess.run([tf.truncatediv(x, y), tf.truncatemod(x, y)], {x: a, y: b})
    # hand-computed with Python's unbounded ints: |p| // |s| with the sign of p * s
    want_q = [(1 if (p < 0) == (s < 0) else -1) * (abs(p) // abs(s))
              for p, s in zip(a.tolist(), b.tolist())]
    np.testing.assert_array_equal(q, np.array(want_q, dtype))
    np.testing.assert_array_equal(r, np.array([p - s * w for p, s, w in
                                               zip(a.tolist(), b.tolist(), want_q)], dtype))
    assert q[0] == lo // 2 < 0 and q[2] == -3 and q[3] == -3 and r[2] == -1 and r[3] == 1
