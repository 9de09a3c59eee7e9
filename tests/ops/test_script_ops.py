"""tf.py_func / tf.numpy_function: Python functions as ops, on every backend."""
from __future__ import annotations

import json

import numpy as np
import pytest

import jitflow as tf


def test_py_func_single_and_list_outputs(backend):
    x = tf.placeholder(tf.float32, [None])
    y = tf.py_func(lambda a: np.sort(a) * 2, [x], tf.float32)
    lo, n = tf.py_func(lambda a: (a.min(), np.int64(a.size)), [x], [tf.float32, tf.int64])
    z = y + 1.0
    assert y.shape.ndims is None and y.dtype == tf.float32 and n.dtype == tf.int64
    with tf.Session() as sess:
        yv, zv, lv, nv = sess.run([y, z, lo, n], {x: [3.0, -1.0, 2.0]})
    np.testing.assert_array_equal(yv, [-2.0, 4.0, 6.0])
    np.testing.assert_array_equal(zv, [-1.0, 5.0, 7.0])
    assert lv == -1.0 and nv == 3


def test_py_func_side_effects_and_no_outputs(backend):
    seen = []
    op = tf.py_func(lambda a: seen.append(float(a)), [tf.constant(2.5)], [])
    assert isinstance(op, tf.Operation)
    with tf.Session() as sess:
        sess.run(op)
        sess.run(op)
    assert seen == [2.5, 2.5]


def test_py_func_wrong_dtype_is_a_run_time_error(backend):
    y = tf.numpy_function(lambda a: a.astype(np.float64), [tf.constant([1.0])], tf.float32)
    with tf.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError, match="expects float32"):
            sess.run(y)


def test_py_func_graph_serializes_by_token(backend):
    y = tf.py_func(lambda a: a + 1, [tf.constant([1, 2])], tf.int32)
    from jitflow import serialize
    for gd in (json.loads(json.dumps(serialize.as_graph_def_json())),   # readable JSON form
               tf.get_default_graph().as_graph_def().SerializeToString()):   # GraphDef
        g2 = tf.Graph()
        with g2.as_default():
            tf.import_graph_def(gd, name="")
            with tf.Session() as sess:
                np.testing.assert_array_equal(sess.run(y.name), [2, 3])
