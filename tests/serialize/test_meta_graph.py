"""Checkpoint `.meta` files: TensorFlow imports jitflow's and restores its checkpoint; jitflow
imports TensorFlow's (golden and fresh), leaving out the save/restore subgraph."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import jitflow as tf

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")
sys.path.insert(0, DATA)
from golden_spec import checkpoint_values  # noqa: E402

X = np.random.default_rng(2).normal(size=(4, 3)).astype(np.float32)


def _inference_model(tmp_path):
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    w = tf.Variable(np.random.default_rng(0).normal(size=(3, 2)).astype(np.float32), name="w")
    b = tf.Variable(np.zeros(2, np.float32), name="b")
    y = tf.nn.softmax(tf.nn.relu(tf.matmul(x, w) + b), name="y")
    tf.add_to_collection("outputs", y)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(tf.assign(b, [0.25, -0.25]))
        want = sess.run(y, {x: X})
        prefix = tf.train.Saver().save(sess, str(tmp_path / "model"), global_step=3)
    return prefix, want


def test_meta_file_is_a_binary_meta_graph_def(tmp_path):
    prefix, _ = _inference_model(tmp_path)
    meta = tf.MetaGraphDef.FromString(open(prefix + ".meta", "rb").read())
    assert {n.name for n in meta.graph_def.node} >= {"x", "w", "w/Assign", "w/read", "y"}
    var_def = tf.serialize.protos.VariableDef.FromString(
        meta.collection_def["variables"].bytes_list.value[0])
    assert (var_def.variable_name, var_def.initializer_name, var_def.snapshot_name) == (
        "w:0", "w/Assign", "w/read:0")
    assert list(meta.collection_def["outputs"].node_list.value) == ["y:0"]


def test_tensorflow_imports_our_meta_graph_and_restores(tmp_path):
    tf_ref = pytest.importorskip("tensorflow.compat.v1")
    tf_ref.disable_eager_execution()
    prefix, want = _inference_model(tmp_path)
    with tf_ref.Graph().as_default():
        saver = tf_ref.train.import_meta_graph(prefix + ".meta")
        y = tf_ref.get_collection("outputs")[0]
        assert [v.name for v in tf_ref.global_variables()] == ["w:0", "b:0"]
        with tf_ref.Session() as sess:
            saver.restore(sess, tf_ref.train.latest_checkpoint(str(tmp_path)))
            np.testing.assert_allclose(sess.run(y, {"x:0": X}), want, rtol=1e-6)


def test_golden_meta_graph_written_by_tensorflow(backend):
    prefix = os.path.join(DATA, "ckpt", "model")
    with tf.Graph().as_default() as g:
        saver = tf.train.import_meta_graph(prefix + ".meta")
        assert not any(op.name.startswith("save/") for op in g.get_operations())
        names = sorted(v.op.name for v in tf.global_variables())
        assert names == sorted(checkpoint_values())
        with tf.Session(graph=g) as sess:
            saver.restore(sess, prefix)
            np.testing.assert_array_equal(sess.run("f32:0"), checkpoint_values()["f32"])
            np.testing.assert_array_equal(sess.run("scope/deeper/i64:0"),
                                          checkpoint_values()["scope/deeper/i64"])
