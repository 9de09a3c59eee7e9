"""tf.layers: names and variables as TF1, values against NumPy and TensorFlow's compat.v1."""
from __future__ import annotations

import numpy as np
import pytest

import jitflow as tf

RNG = np.random.default_rng(0)
X = RNG.standard_normal((5, 4)).astype(np.float32)
IMG = RNG.standard_normal((2, 6, 6, 3)).astype(np.float32)


def _values(sess) -> dict:
    return {v.op.name: sess.run(v) for v in tf.global_variables()}


def _tf_outputs(build, feeds: dict, values: dict, fetch_updates: bool = False):
    """Run `build(tf1, var)` in TensorFlow, `var(name)` giving a variable holding values[name].

    TensorFlow 2.21 has no `compat.v1.layers` (Keras 3), so the TensorFlow side spells each
    layer's math with TF's own ops (nn.conv2d, nn.fused_batch_norm, ...) on the same weights.
    """
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    tf1.disable_eager_execution()
    g = tf1.Graph()
    with g.as_default():
        made = {}

        def var(name):
            if name not in made:
                made[name] = tf1.Variable(values[name], name=name)
            return made[name]
        out, phs, updates = build(tf1, var)
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            feed = {phs[k]: a for k, a in feeds.items()}
            res = sess.run(out, feed)
            if fetch_updates:
                sess.run(updates, feed)
                res = (res, {k: sess.run(v) for k, v in made.items()})
            return res


def test_dense_names_and_default_initializers():
    x = tf.placeholder(tf.float32, [None, 4])
    h = tf.layers.dense(x, 3, activation=tf.nn.relu)
    tf.layers.dense(h, 2)
    with tf.variable_scope("foo"):
        tf.layers.dense(h, 2)
    tf.layers.dense(h, 2, name="out")
    tf.layers.dense(h, 2, name="out", reuse=True)
    names = [v.op.name for v in tf.global_variables()]
    assert names == ["dense/kernel", "dense/bias", "dense_1/kernel", "dense_1/bias",
                     "foo/dense/kernel", "foo/dense/bias", "out/kernel", "out/bias"]
    assert h.op.name == "dense/Relu"
    assert len(tf.trainable_variables()) == 8
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        k, b = sess.run(["dense/kernel:0", "dense/bias:0"])
    limit = np.sqrt(6.0 / (4 + 3))  # glorot_uniform
    assert k.shape == (4, 3) and np.all(np.abs(k) <= limit) and np.std(k) > 0
    np.testing.assert_array_equal(b, np.zeros(3, np.float32))


def test_dense_reuse_without_existing_variable_fails():
    x = tf.placeholder(tf.float32, [None, 4])
    with pytest.raises(ValueError, match="does not exist"):
        tf.layers.dense(x, 2, name="nothing", reuse=True)
    with pytest.raises(ValueError, match="last dimension"):
        tf.layers.dense(tf.placeholder(tf.float32, [None, None]), 2)


def test_dense_values(backend):
    x = tf.placeholder(tf.float32, [None, 4])
    y = tf.layers.dense(x, 3, activation=tf.nn.relu,
                        kernel_initializer=tf.constant_initializer(0.5),
                        bias_initializer=tf.constant_initializer(-0.25))
    z = tf.layers.dense(x, 2, use_bias=False)
    x3 = tf.placeholder(tf.float32, [2, 5, 4])
    y3 = tf.layers.dense(x3, 3, name="seq")
    a3 = RNG.standard_normal((2, 5, 4)).astype(np.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got, gz, g3 = sess.run([y, z, y3], {x: X, x3: a3})
        w, w3, b3 = sess.run(["dense_1/kernel:0", "seq/kernel:0", "seq/bias:0"])
    np.testing.assert_allclose(got, np.maximum(X @ np.full((4, 3), 0.5) - 0.25, 0), rtol=1e-6)
    np.testing.assert_allclose(gz, X @ w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g3, a3 @ w3 + b3, rtol=1e-5, atol=1e-6)
    assert len(tf.global_variables()) == 5  # use_bias=False makes no bias


def test_dense_class_shares_variables_between_calls(backend):
    layer = tf.layers.Dense(2, name="shared")
    a = layer(tf.constant(X))
    b = layer(tf.constant(2 * X))
    assert [v.op.name for v in layer.variables] == ["shared/kernel", "shared/bias"]
    assert len(tf.global_variables()) == 2
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        va, vb = sess.run([a, b])
    np.testing.assert_allclose(vb, 2 * va, rtol=1e-5, atol=1e-6)


def test_cnn_layers_shapes_and_names():
    img = tf.placeholder(tf.float32, [None, 6, 6, 3])
    c = tf.layers.conv2d(img, 4, 3, padding="same", activation=tf.nn.relu)
    v = tf.layers.conv2d(c, 2, (3, 2), strides=(1, 2))
    p = tf.layers.max_pooling2d(c, 2, 2)
    a = tf.layers.average_pooling2d(c, pool_size=3, strides=1, padding="valid")
    f = tf.layers.flatten(p)
    assert c.shape.as_list() == [None, 6, 6, 4] and c.op.name == "conv2d/Relu"
    assert v.shape.as_list() == [None, 4, 3, 2]
    assert p.shape.as_list() == [None, 3, 3, 4] and p.op.name == "max_pooling2d/MaxPool"
    assert a.shape.as_list() == [None, 4, 4, 4]
    assert f.shape.as_list() == [None, 36]
    assert [x.op.name for x in tf.global_variables()] == [
        "conv2d/kernel", "conv2d/bias", "conv2d_1/kernel", "conv2d_1/bias"]
    assert tf.global_variables()[0].shape.as_list() == [3, 3, 3, 4]
    with pytest.raises(ValueError, match="padding"):
        tf.layers.conv2d(img, 2, 3, padding="full")


def _cnn(t):
    img = t.placeholder(t.float32, [None, 6, 6, 3])
    c = t.layers.conv2d(img, 4, 3, padding="same", activation=t.nn.relu)
    c2 = t.layers.conv2d(c, 2, (3, 2), strides=(1, 2), padding="valid")
    p = t.layers.max_pooling2d(c, 2, 2)
    a = t.layers.average_pooling2d(c, 3, 1, padding="same")
    f = t.layers.flatten(p)
    d = t.layers.dense(f, 3, activation=t.nn.tanh)
    return [c2, a, d], {"img": img}


def _cnn_tf(t, var):
    img = t.placeholder(t.float32, [None, 6, 6, 3])
    c = t.nn.relu(t.nn.bias_add(t.nn.conv2d(img, var("conv2d/kernel"), [1, 1, 1, 1], "SAME"),
                                var("conv2d/bias")))
    c2 = t.nn.bias_add(t.nn.conv2d(c, var("conv2d_1/kernel"), [1, 1, 2, 1], "VALID"),
                       var("conv2d_1/bias"))
    p = t.nn.max_pool(c, [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
    a = t.nn.avg_pool(c, [1, 3, 3, 1], [1, 1, 1, 1], "SAME")
    f = t.reshape(p, [-1, 36])
    d = t.tanh(t.matmul(f, var("dense/kernel")) + var("dense/bias"))
    return [c2, a, d], {"img": img}, []


def test_cnn_layers_match_tensorflow(backend):
    outs, phs = _cnn(tf)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got = sess.run(outs, {phs["img"]: IMG})
        values = _values(sess)
    want = _tf_outputs(_cnn_tf, {"img": IMG}, values)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_flatten_unknown_inner_dims(backend):
    x = tf.placeholder(tf.float32, [None, None, 2])
    f = tf.layers.flatten(x)
    with tf.Session() as sess:
        assert sess.run(f, {x: np.ones((3, 4, 2))}).shape == (3, 8)


def test_dropout_training_flag(backend):
    x = tf.ones([50, 40])
    off = tf.layers.dropout(x, rate=0.5)
    on = tf.layers.dropout(x, rate=0.25, training=True)
    flag = tf.placeholder(tf.bool, [])
    switched = tf.layers.dropout(x, rate=0.5, training=flag)
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(off), np.ones((50, 40)))
        v = sess.run(on)
        assert set(np.unique(v)) == {0.0, np.float32(1 / 0.75)}
        assert 0.15 < np.mean(v == 0) < 0.35
        np.testing.assert_array_equal(sess.run(switched, {flag: False}), np.ones((50, 40)))
        s = sess.run(switched, {flag: True})
        assert set(np.unique(s)) == {0.0, 2.0}


def test_batch_normalization_training_and_updates(backend):
    x = tf.placeholder(tf.float32, [None, 4])
    y = tf.layers.batch_normalization(x, training=True, momentum=0.9)
    inf = tf.layers.batch_normalization(x, training=False, name="batch_normalization",
                                        reuse=True)
    updates = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    assert len(updates) == 2
    names = sorted(v.op.name for v in tf.global_variables())
    assert names == ["batch_normalization/beta", "batch_normalization/gamma",
                     "batch_normalization/moving_mean", "batch_normalization/moving_variance"]
    assert len(tf.trainable_variables()) == 2
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got = sess.run(y, {x: X})
        np.testing.assert_allclose(got, (X - X.mean(0)) / np.sqrt(X.var(0) + 1e-3),
                                   rtol=1e-4, atol=1e-5)
        sess.run(updates, {x: X})
        mm, mv = sess.run(["batch_normalization/moving_mean:0",
                           "batch_normalization/moving_variance:0"])
        np.testing.assert_allclose(mm, 0.1 * X.mean(0), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(mv, 0.9 + 0.1 * X.var(0), rtol=1e-5)
        np.testing.assert_allclose(sess.run(inf, {x: X}), (X - mm) / np.sqrt(mv + 1e-3),
                                   rtol=1e-4, atol=1e-5)


def _bn(t):
    x = t.placeholder(t.float32, [None, 4])
    img = t.placeholder(t.float32, [None, 6, 6, 3])
    flag = t.placeholder(t.bool, [])
    a = t.layers.batch_normalization(x, training=True, momentum=0.8)
    b = t.layers.batch_normalization(img, training=flag, center=False)
    c = t.layers.batch_normalization(img, axis=1, training=False, epsilon=0.01)
    return [a, b, c], {"x": x, "img": img, "flag": flag}


def _bn_tf(t, var, training):
    """TF1's batch_normalization math: moments for 2-D inputs, the fused kernel for 4-D."""
    x = t.placeholder(t.float32, [None, 4])
    img = t.placeholder(t.float32, [None, 6, 6, 3])
    flag = t.placeholder(t.bool, [])
    bn = "batch_normalization"
    mean, variance = t.nn.moments(x, [0])
    a = t.nn.batch_normalization(x, mean, variance, var(f"{bn}/beta"), var(f"{bn}/gamma"), 1e-3)
    upd = [t.assign_sub(var(f"{bn}/moving_mean"), (var(f"{bn}/moving_mean") - mean) * 0.2),
           t.assign_sub(var(f"{bn}/moving_variance"),
                        (var(f"{bn}/moving_variance") - variance) * 0.2)]
    mm, mv = var(f"{bn}_1/moving_mean"), var(f"{bn}_1/moving_variance")
    zero = t.zeros([3])
    b, bm, bv = t.nn.fused_batch_norm(img, var(f"{bn}_1/gamma"), zero, mean=None if training
                                      else mm, variance=None if training else mv,
                                      epsilon=1e-3, is_training=training)
    decay = 0.01 if training else 0.0
    upd += [t.assign_sub(mm, (mm - bm) * decay), t.assign_sub(mv, (mv - bv) * decay)]
    p = f"{bn}_2/"
    shape = [1, 6, 1, 1]
    c = t.nn.batch_normalization(img, t.reshape(var(p + "moving_mean"), shape),
                                 t.reshape(var(p + "moving_variance"), shape),
                                 t.reshape(var(p + "beta"), shape),
                                 t.reshape(var(p + "gamma"), shape), 0.01)
    return [a, b, c], {"x": x, "img": img, "flag": flag}, upd


@pytest.mark.parametrize("training", [True, False])
def test_batch_normalization_matches_tensorflow(training, backend):
    outs, phs = _bn(tf)
    feeds = {"x": X, "img": IMG, "flag": training}
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        values = _values(sess)
        values = {k: v + RNG.uniform(0.1, 0.5, np.shape(v)).astype(np.float32)
                  for k, v in values.items()}
        for v in tf.global_variables():
            v.load(values[v.op.name], sess)
        feed = {phs[k]: a for k, a in feeds.items()}
        got = sess.run(outs, feed)
        sess.run(tf.get_collection(tf.GraphKeys.UPDATE_OPS), feed)
        after = _values(sess)
    want, want_after = _tf_outputs(lambda t, var: _bn_tf(t, var, training), feeds, values,
                                   fetch_updates=True)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
    for k in after:
        np.testing.assert_allclose(after[k], want_after[k], rtol=1e-5, atol=1e-6, err_msg=k)


def test_batch_normalization_fused_epsilon_floor():
    four = tf.layers.BatchNormalization(epsilon=1e-8)
    four(tf.zeros([2, 3, 3, 2]))
    two = tf.layers.BatchNormalization(epsilon=1e-8)
    two(tf.zeros([2, 3]))
    assert four.epsilon == 1.001e-5 and two.epsilon == 1e-8
    assert [v.op.name for v in two.variables] == [
        "batch_normalization_1/gamma", "batch_normalization_1/beta",
        "batch_normalization_1/moving_mean", "batch_normalization_1/moving_variance"]
    assert len(two.trainable_variables) == 2 and len(two.non_trainable_variables) == 2


SEQ = RNG.standard_normal((2, 9, 3)).astype(np.float32)


def _seq(t):
    x = t.placeholder(t.float32, [None, 9, 3])
    c = t.layers.conv1d(x, 4, 3, padding="same", activation=t.nn.relu)
    c2 = t.layers.conv1d(c, 2, 2, strides=2)
    p = t.layers.max_pooling1d(c, 2, 2)
    a = t.layers.average_pooling1d(c, 3, 1, padding="same")
    return [c2, p, a], {"x": x}


def _seq_tf(t, var):
    x = t.placeholder(t.float32, [None, 9, 3])
    c = t.nn.relu(t.nn.conv1d(x, var("conv1d/kernel"), 1, "SAME") + var("conv1d/bias"))
    c2 = t.nn.conv1d(c, var("conv1d_1/kernel"), 2, "VALID") + var("conv1d_1/bias")
    p = t.nn.pool(c, [2], "MAX", padding="VALID", strides=[2])
    a = t.nn.pool(c, [3], "AVG", padding="SAME", strides=[1])
    return [c2, p, a], {"x": x}, []


def test_conv1d_and_pooling1d_match_tensorflow(backend):
    outs, phs = _seq(tf)
    assert [o.shape.as_list() for o in outs] == [[None, 4, 2], [None, 4, 4], [None, 9, 4]]
    assert tf.global_variables()[0].shape.as_list() == [3, 3, 4]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got = sess.run(outs, {phs["x"]: SEQ})
        values = _values(sess)
    want = _tf_outputs(_seq_tf, {"x": SEQ}, values)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


_DTYPE_LAYERS = {
    "dense": lambda t, x: t.layers.dense(t.reshape(x, [-1, 48]), 5),
    "conv2d": lambda t, x: t.layers.conv2d(x, 2, 3),
    "conv2d_transpose": lambda t, x: t.layers.conv2d_transpose(x, 2, 3),
    "conv1d": lambda t, x: t.layers.conv1d(t.reshape(x, [-1, 16, 3]), 2, 3),
    "batch_normalization": lambda t, x: t.layers.batch_normalization(x),
    "max_pooling2d": lambda t, x: t.layers.max_pooling2d(x, 2, 2),
}


def _layer_dtypes(t, dtype) -> dict:
    """{layer: (output dtype, sorted dtypes of its variables, run output dtype)}."""
    out = {}
    g = t.Graph()
    with g.as_default():
        x = t.placeholder(dtype, [None, 4, 4, 3])
        ys = {}
        for name, build in _DTYPE_LAYERS.items():
            with t.variable_scope(name):
                ys[name] = build(t, x)
            vs = [v for v in t.global_variables() if v.name.startswith(name + "/")]
            out[name] = [ys[name].dtype.name, sorted({v.dtype.base_dtype.name for v in vs})]
        with t.Session() as sess:
            sess.run(t.global_variables_initializer())
            got = sess.run(ys, {x: np.ones((2, 4, 4, 3))})
        for name in out:
            out[name].append(got[name].dtype.name)
    return {k: tuple(v) for k, v in out.items()}


def test_layers_take_the_input_dtype():
    got = _layer_dtypes(tf, tf.float64)
    for name, (dt, var_dts, run_dt) in got.items():
        assert dt == run_dt == "float64", name
        assert var_dts == ([] if name == "max_pooling2d" else ["float64"]), name


def test_layers_dtype_matches_tensorflow_legacy_layers():
    """TF 2.21's compat.v1.layers exist only with tf-keras and TF_USE_LEGACY_KERAS=1, set
    before TensorFlow is imported: checked in a fresh interpreter."""
    pytest.importorskip("tensorflow")
    pytest.importorskip("tf_keras")
    import json
    import os
    import subprocess
    import sys
    code = ("import json, tensorflow.compat.v1 as t; t.disable_eager_execution();"
            "import tests.test_layers as m;"
            "print(json.dumps({k: list(v) for k, v in m._layer_dtypes(t, t.float64).items()}))")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=root + os.pathsep + os.path.join(root, "tests"))
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, cwd=root, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    want = {k: tuple(v) for k, v in json.loads(res.stdout.strip().splitlines()[-1]).items()}
    assert _layer_dtypes(tf, tf.float64) == want
