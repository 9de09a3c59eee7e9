"""tf.arg_max / tf.arg_min: TF1's older spellings of argmax / argmin."""
from __future__ import annotations

import numpy as np
import pytest

import jitflow as tf


def test_arg_max_arg_min(backend):
    x = tf.placeholder(tf.float32, [None, 3])
    outs = [tf.arg_max(x, 1), tf.arg_min(x, 0), tf.arg_max(x, 0, output_type=tf.int32),
            tf.arg_min(x, dimension=1, name="amin")]
    assert outs[0].dtype == tf.int64 and outs[2].dtype == tf.int32
    assert outs[3].op.name == "amin" and outs[0].op.type == "ArgMax"
    v = np.array([[1, 5, 2], [7, 0, 1]], np.float32)
    with tf.Session() as sess:
        got = sess.run(outs, {x: v})
    assert [g.tolist() for g in got] == [[1, 0], [0, 1, 1], [1, 0, 0], [0, 1]]


def test_parity_with_tensorflow():
    tf_ref = pytest.importorskip("tensorflow.compat.v1")
    v = np.array([[1, 5, 2], [7, 0, 7]], np.float32)
    g = tf_ref.Graph()
    with g.as_default():
        want = tf_ref.Session().run([tf_ref.arg_max(v, 1), tf_ref.arg_min(v, 0)])
    with tf.Session() as sess:
        got = sess.run([tf.arg_max(v, 1), tf.arg_min(v, 0)])
    for w, h in zip(want, got):
        np.testing.assert_array_equal(h, w)
        assert h.dtype == w.dtype
