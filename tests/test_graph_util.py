"""tf.graph_util: freezing variables into constants, subgraph extraction."""
from __future__ import annotations

import numpy as np
import pytest

import jitflow as tf

X = np.arange(6, dtype=np.float32).reshape(2, 3) / 4


def _model():
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    w = tf.Variable(np.ones((3, 2), np.float32), name="w")
    b = tf.Variable(np.array([0.5, -1.0], np.float32), name="b")
    y = tf.nn.softmax(tf.matmul(x, w) + b, name="y")
    tf.identity(y * 2.0, name="unused")
    return x, w, y


def test_freeze_replaces_variables_by_their_values(backend):
    with tf.Graph().as_default() as g:
        x, w, y = _model()
        with tf.Session(graph=g) as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(tf.assign(w, np.arange(6, dtype=np.float32).reshape(3, 2)))
            want = sess.run(y, {x: X})
            frozen = tf.graph_util.convert_variables_to_constants(sess, g.as_graph_def(), ["y"])
    ops = {n.name: n.op for n in frozen.node}
    assert ops["w"] == "Const" and ops["b"] == "Const" and "unused" not in ops
    assert not any(op in ("VariableV2", "Assign") for op in ops.values())
    with tf.Graph().as_default() as g2:
        y2, = tf.import_graph_def(frozen.SerializeToString(), return_elements=["y:0"], name="")
        assert not tf.global_variables()
        with tf.Session(graph=g2) as sess:   # no initializer, no checkpoint
            np.testing.assert_allclose(sess.run(y2, {"x:0": X}), want, rtol=1e-6)
    assert tf.compat.v1.graph_util.convert_variables_to_constants is \
        tf.graph_util.convert_variables_to_constants


def test_extract_sub_graph_and_errors():
    with tf.Graph().as_default() as g:
        _model()
    sub = tf.graph_util.extract_sub_graph(g.as_graph_def(), ["y"])
    names = {n.name for n in sub.node}
    assert "x" in names and "w" in names and "unused" not in names
    with pytest.raises(AssertionError, match="nothere"):
        tf.graph_util.extract_sub_graph(g.as_graph_def(), ["nothere"])
    plain = tf.graph_util.remove_training_nodes(sub)
    assert not any(n.op == "Identity" for n in plain.node)


def test_tensorflow_runs_our_frozen_graph():
    tf_ref = pytest.importorskip("tensorflow.compat.v1")
    tf_ref.disable_eager_execution()
    with tf.Graph().as_default() as g:
        x, w, y = _model()
        with tf.Session(graph=g) as sess:
            sess.run(tf.global_variables_initializer())
            want = sess.run(y, {x: X})
            frozen = tf.graph_util.convert_variables_to_constants(sess, g.as_graph_def(), ["y"])
    with tf_ref.Graph().as_default():
        tf_ref.import_graph_def(tf_ref.GraphDef.FromString(frozen.SerializeToString()), name="")
        with tf_ref.Session() as sess:
            np.testing.assert_allclose(sess.run("y:0", {"x:0": X}), want, rtol=1e-6)
