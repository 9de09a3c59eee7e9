"""TF1 SavedModels: jitflow's read by jitflow and TensorFlow, TensorFlow's (golden and fresh)
read by jitflow, with the serving signature's tensors giving the same numbers."""
from __future__ import annotations

import os
import shutil
import sys

import numpy as np
import pytest

import jitflow as tf

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")
sys.path.insert(0, DATA)
from golden_spec import mlp_batch  # noqa: E402

W = np.linspace(-1, 1, 15, dtype=np.float32).reshape(5, 3)
B = np.array([0.5, -0.5, 2.0], np.float32)


def _want():
    return np.maximum(mlp_batch() @ W + B, 0)


def _save_with_jitflow(export_dir):
    with tf.Graph().as_default() as g:
        x = tf.placeholder(tf.float32, [None, 5], name="x")
        w = tf.Variable(np.zeros((5, 3), np.float32), name="w")
        b = tf.Variable(B, name="b")
        y = tf.nn.relu(tf.matmul(x, w) + b, name="y")
        with tf.Session(graph=g) as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(tf.assign(w, W))
            tf.saved_model.simple_save(sess, export_dir, inputs={"x": x}, outputs={"y": y})


def _load_and_run(export_dir, backend_name=None):
    with tf.Graph().as_default() as g:
        with tf.Session(graph=g, backend=backend_name) as sess:
            meta = tf.saved_model.loader.load(sess, [tf.saved_model.tag_constants.SERVING],
                                              export_dir)
            sig = meta.signature_def[
                tf.saved_model.signature_constants.DEFAULT_SERVING_SIGNATURE_DEF_KEY]
            assert sig.method_name == tf.saved_model.signature_constants.PREDICT_METHOD_NAME
            return sess.run(sig.outputs["y"].name, {sig.inputs["x"].name: mlp_batch()})


def test_simple_save_and_load(tmp_path, backend):
    export_dir = str(tmp_path / "model")
    _save_with_jitflow(export_dir)
    assert sorted(os.listdir(export_dir)) == ["saved_model.pb", "variables"]
    assert sorted(os.listdir(os.path.join(export_dir, "variables"))) == [
        "variables.data-00000-of-00001", "variables.index"]
    np.testing.assert_allclose(_load_and_run(export_dir, backend), _want(), rtol=1e-6)


def test_golden_saved_model_written_by_tensorflow(tmp_path, backend):
    export_dir = str(tmp_path / "sm")
    shutil.copytree(os.path.join(DATA, "saved_model"), export_dir)
    want = np.load(os.path.join(DATA, "saved_model_expected.npz"))["y"]
    np.testing.assert_allclose(_load_and_run(export_dir, backend), want, rtol=1e-6)


def test_builder_refuses_a_non_empty_directory_and_wrong_tags(tmp_path):
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "f").write_text("x")
    with pytest.raises(AssertionError, match="already exists"):
        tf.saved_model.builder.SavedModelBuilder(str(tmp_path / "busy"))
    export_dir = str(tmp_path / "model")
    _save_with_jitflow(export_dir)
    with tf.Graph().as_default(), tf.Session() as sess:
        with pytest.raises(RuntimeError, match="could not be found"):
            tf.saved_model.loader.load(sess, ["train"], export_dir)


def test_builder_with_main_op_and_text(tmp_path):
    export_dir = str(tmp_path / "m")
    with tf.Graph().as_default() as g:
        v = tf.Variable(1.0, name="v")
        counter = tf.Variable(0.0, name="counter", collections=[])
        main = tf.group(counter.initializer, name="main")
        with tf.Session(graph=g) as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(tf.assign(v, 4.0))
            b = tf.saved_model.builder.SavedModelBuilder(export_dir)
            sig = tf.saved_model.signature_def_utils.predict_signature_def(
                {"c": tf.identity(counter, name="c_in")}, {"v": tf.identity(v, name="v_out")})
            b.add_meta_graph_and_variables(sess, ["serve"], {"s": sig}, main_op=main)
            path = b.save(as_text=True)
    assert path.endswith("saved_model.pbtxt")
    with tf.Graph().as_default() as g2, tf.Session(graph=g2) as sess:
        tf.saved_model.loader.load(sess, ["serve"], export_dir)
        assert sess.run("v:0") == 4.0 and sess.run("counter:0") == 0.0  # main op ran


def test_tensorflow_loads_what_jitflow_saved(tmp_path):
    tf_ref = pytest.importorskip("tensorflow.compat.v1")
    tf_ref.disable_eager_execution()
    export_dir = str(tmp_path / "model")
    _save_with_jitflow(export_dir)
    with tf_ref.Graph().as_default(), tf_ref.Session() as sess:
        meta = tf_ref.saved_model.loader.load(sess, ["serve"], export_dir)
        sig = meta.signature_def["serving_default"]
        got = sess.run(sig.outputs["y"].name, {sig.inputs["x"].name: mlp_batch()})
    np.testing.assert_allclose(got, _want(), rtol=1e-6)


def test_jitflow_loads_what_tensorflow_saved(tmp_path, backend):
    pytest.importorskip("tensorflow.compat.v1")
    from make_golden import write_saved_model
    export_dir, expected = write_saved_model(str(tmp_path / "tf_model"))
    np.testing.assert_allclose(_load_and_run(export_dir, backend), expected["y"], rtol=1e-6)
