"""TensorFlow's V2 checkpoints: golden files written by TensorFlow read without it, and round
trips with TensorFlow both ways when it is installed (every dtype jitflow supports)."""
from __future__ import annotations

import os
import shutil
import sys

import numpy as np
import pytest

import jitflow as tf

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")
sys.path.insert(0, DATA)
from golden_spec import checkpoint_values  # noqa: E402

VALUES = checkpoint_values()


def _dtype_of(value):
    return tf.string if value.dtype == object else tf.as_dtype(value.dtype)


def _assert_same(got, want, name=""):
    if isinstance(got, bytes):  # a fetched string scalar is bytes, as in TensorFlow
        assert want.shape == () and got == want.item(), name
        return
    got = np.asarray(got)
    if want.dtype == object:
        assert got.dtype == object and got.shape == want.shape, name
        assert [bytes(x) for x in got.reshape(-1)] == list(want.reshape(-1)), name
    else:
        assert got.dtype == want.dtype and got.shape == want.shape, (name, got.dtype, got.shape)
        np.testing.assert_array_equal(got, want, err_msg=name)


def _check_reader(prefix):
    reader = tf.train.NewCheckpointReader(prefix)
    shapes = reader.get_variable_to_shape_map()
    dtypes = reader.get_variable_to_dtype_map()
    assert set(shapes) == set(VALUES)
    for name, want in VALUES.items():
        assert shapes[name] == list(want.shape), name
        assert dtypes[name] == _dtype_of(want), name
        assert reader.has_tensor(name)
        _assert_same(reader.get_tensor(name), want, name)
    assert not reader.has_tensor("nothere")
    with pytest.raises(tf.errors.NotFoundError, match="nothere"):
        reader.get_tensor("nothere")
    assert tf.train.list_variables(prefix) == sorted((n, list(v.shape))
                                                     for n, v in VALUES.items())


def _restore_into_jitflow(prefix, backend=None):
    variables = {}
    with tf.Graph().as_default() as g:
        for name, value in VALUES.items():
            zeros = np.zeros(value.shape, value.dtype) if value.dtype != object else \
                np.full(value.shape, b"", dtype=object)
            variables[name] = tf.Variable(tf.constant(zeros, dtype=_dtype_of(value)), name=name)
        with tf.Session(graph=g) as sess:
            tf.train.Saver().restore(sess, prefix)
            return {n: sess.run(v) for n, v in variables.items()}


def test_golden_checkpoint_written_by_tensorflow_reads_without_it(tmp_path):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(os.path.join(DATA, "ckpt"), ckpt)
    prefix = tf.train.latest_checkpoint(str(ckpt))   # the state file names it relatively
    assert prefix == str(ckpt / "model")
    _check_reader(prefix)
    assert tf.train.load_checkpoint(str(ckpt)).has_tensor("f32")
    np.testing.assert_array_equal(tf.train.load_variable(str(ckpt), "f32:0"), VALUES["f32"])


def test_golden_checkpoint_restores_every_dtype(backend):
    got = _restore_into_jitflow(os.path.join(DATA, "ckpt", "model"))
    for name, want in VALUES.items():
        _assert_same(got[name], want, name)


def test_init_from_golden_checkpoint():
    with tf.Graph().as_default():
        with tf.variable_scope("new"):
            v = tf.get_variable("i16", shape=[2, 2], dtype=tf.int16)
        f = tf.Variable(np.zeros((2, 3, 4), np.float32), name="renamed")
        tf.train.init_from_checkpoint(os.path.join(DATA, "ckpt", "model"),
                                      {"scope/": "new/", "f32": f})
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            _assert_same(sess.run(v), VALUES["scope/i16"])
            _assert_same(sess.run(f), VALUES["f32"])


def _save_with_jitflow(path):
    with tf.Graph().as_default() as g:
        for name, value in VALUES.items():
            tf.Variable(tf.constant(value, dtype=_dtype_of(value)), name=name)
        with tf.Session(graph=g) as sess:
            sess.run(tf.global_variables_initializer())
            return tf.train.Saver().save(sess, path, write_meta_graph=False)


def test_jitflow_checkpoint_round_trip_every_dtype(tmp_path, backend):
    prefix = _save_with_jitflow(str(tmp_path / "m"))
    _check_reader(prefix)
    got = _restore_into_jitflow(prefix)
    for name, want in VALUES.items():
        _assert_same(got[name], want, name)


# -- with TensorFlow --------------------------------------------------------------------------
def test_tensorflow_restores_what_jitflow_saved(tmp_path):
    tf_ref = pytest.importorskip("tensorflow.compat.v1")
    prefix = _save_with_jitflow(str(tmp_path / "m"))
    reader = tf_ref.train.NewCheckpointReader(prefix)
    assert sorted(reader.get_variable_to_shape_map()) == sorted(VALUES)
    for name, want in VALUES.items():
        _assert_same(reader.get_tensor(name), want, name)
        assert reader.get_variable_to_dtype_map()[name].name == _dtype_of(want).name
    assert tf_ref.train.latest_checkpoint(str(tmp_path)) == prefix
    with tf_ref.Graph().as_default():
        vs = {n: tf_ref.Variable(tf_ref.zeros(v.shape, dtype=_dtype_of(v).name), name=n)
              for n, v in VALUES.items()}
        with tf_ref.Session() as sess:
            tf_ref.train.Saver().restore(sess, prefix)
            for name, want in VALUES.items():
                _assert_same(sess.run(vs[name]), want, name)


def test_jitflow_restores_what_tensorflow_saved(tmp_path, backend):
    pytest.importorskip("tensorflow.compat.v1")
    from make_golden import write_checkpoint
    prefix = write_checkpoint(str(tmp_path))
    _check_reader(prefix)
    got = _restore_into_jitflow(prefix)
    for name, want in VALUES.items():
        _assert_same(got[name], want, name)
