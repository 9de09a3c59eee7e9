"""tf.contrib.layers: TF 1.15's names, defaults, collections and errors, and values computed
by hand (NumPy). Most tests build graphs only or run them on the reference interpreter (the
compiled backends are the core's business); the training program and batch norm run on every
backend."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import jitflow as tf

L = tf.contrib.layers
RNG = np.random.default_rng(3)


@pytest.fixture(autouse=True)
def _interpreter_unless_asked(request, monkeypatch):
    if "backend" not in request.fixturenames:
        monkeypatch.setenv("JITFLOW_BACKEND", "interpreter")


def _names(variables) -> list:
    return [v.op.name for v in variables]


def _run(fetches, feed=None):
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        return sess.run(fetches, feed)


# -- the namespace --------------------------------------------------------------------------------
def test_contrib_loads_on_first_use_and_import_jitflow_does_not_load_it():
    code = ("import sys, jitflow as tf\n"
            "assert 'jitflow.contrib' not in sys.modules\n"
            "assert 'jitflow.contrib.layers' not in sys.modules\n"
            "slim = tf.contrib.slim\n"
            "assert tf.compat.v1.contrib.layers is tf.contrib.layers\n"
            "assert slim.fully_connected is tf.contrib.layers.fully_connected\n"
            "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


@pytest.mark.parametrize("path, word", [
    ("seq2seq", "seq2seq"), ("learn", "learn"), ("layers.conv3d", "3-D"),
    ("layers.real_valued_column", "feature columns"), ("rnn.NASCell", "NASCell"),
    ("slim.learning.train", "Supervisor"), ("slim.metrics", "tf.metrics")])
def test_missing_tf115_names_raise_attribute_error_saying_so(path, word):
    obj = tf.contrib
    *head, last = path.split(".")
    for part in head:
        obj = getattr(obj, part)
    with pytest.raises(AttributeError, match=word):
        getattr(obj, last)
    assert not hasattr(obj, last)


# -- initializers ---------------------------------------------------------------------------------
def test_contrib_fans_and_scales_as_tf115_counts_them():
    from jitflow.contrib.layers.initializers import contrib_fans
    assert contrib_fans([3, 3, 4, 8]) == (36.0, 72.0)
    assert contrib_fans([7]) == (7.0, 7.0)
    assert contrib_fans([]) == (1.0, 1.0)
    assert contrib_fans([5, 2]) == (5.0, 2.0)
    he = L.variance_scaling_initializer()                  # factor 2, FAN_IN, normal
    assert he.scale([3, 3, 4, 8]) == pytest.approx(np.sqrt(1.3 * 2.0 / 36))
    avg = L.variance_scaling_initializer(1.0, "FAN_AVG", uniform=True)
    assert avg.scale([3, 3, 4, 8]) == pytest.approx(np.sqrt(3.0 / 54))
    out = L.variance_scaling_initializer(0.5, "FAN_OUT", uniform=True)
    assert out.scale([10, 4]) == pytest.approx(np.sqrt(1.5 / 4))
    assert L.xavier_initializer().scale([10, 30]) == pytest.approx(np.sqrt(6 / 40))
    assert L.xavier_initializer(uniform=False).scale([10, 30]) == \
        pytest.approx(np.sqrt(1.3 / 20))
    assert L.xavier_initializer_conv2d is L.xavier_initializer


def test_initializer_draws_have_the_documented_ranges_and_spreads():
    shape = [200, 300]
    uni = L.xavier_initializer(seed=1)(shape)
    nrm = L.variance_scaling_initializer(seed=2)(shape)
    f64 = L.xavier_initializer(dtype=tf.float64)([4, 4])
    u, n, d = _run([uni, nrm, f64])
    limit = np.sqrt(6 / 500)
    assert -limit <= u.min() and u.max() <= limit and u.max() > 0.99 * limit
    assert u.std() == pytest.approx(limit / np.sqrt(3), rel=0.02)
    sigma = np.sqrt(1.3 * 2 / 200)
    assert np.abs(n).max() <= 2 * sigma + 1e-7              # truncated at two stddevs
    assert n.std() == pytest.approx(0.8796 * sigma, rel=0.02)
    assert d.dtype == np.float64 and u.dtype == np.float32


def test_initializer_seed_repeats_and_bad_arguments_raise():
    a = L.xavier_initializer(seed=5)([3, 4])
    b = L.xavier_initializer(seed=5)([3, 4])
    va, vb = _run([a, b])
    np.testing.assert_array_equal(va, vb)
    with pytest.raises(TypeError, match="non-floating"):
        L.xavier_initializer(dtype=tf.int32)
    with pytest.raises(TypeError, match="FAN_IN"):
        L.variance_scaling_initializer(mode="fan_in")


# -- fully_connected ------------------------------------------------------------------------------
def test_fully_connected_values_names_and_collections():
    w = np.arange(12, dtype=np.float32).reshape(3, 4) / 10 - 0.5
    x = tf.placeholder(tf.float32, [None, 3])
    y = L.fully_connected(x, 4, weights_initializer=tf.constant_initializer(w),
                          biases_initializer=tf.constant_initializer(0.25),
                          variables_collections={"weights": ["W"], "biases": ["B"]},
                          outputs_collections="ends")
    z = L.fully_connected(y, 2)
    assert _names(tf.global_variables()) == ["fully_connected/weights", "fully_connected/biases",
                                             "fully_connected_1/weights",
                                             "fully_connected_1/biases"]
    assert _names(tf.get_collection(tf.GraphKeys.MODEL_VARIABLES)) == \
        _names(tf.global_variables())
    assert _names(tf.trainable_variables()) == _names(tf.global_variables())
    assert _names(tf.get_collection("W")) == ["fully_connected/weights"]
    assert _names(tf.get_collection("B")) == ["fully_connected/biases"]
    assert y.op.name == "fully_connected/Relu" and z.op.name == "fully_connected_1/Relu"
    assert tf.get_collection("ends") == [y]
    assert L.utils.convert_collection_to_dict("ends") == {"fully_connected": y}
    assert tf.get_default_graph().get_tensor_by_name("fully_connected/weights:0").shape == (3, 4)
    xv = RNG.standard_normal((5, 3)).astype(np.float32)
    got = _run(y, {x: xv})
    np.testing.assert_allclose(got, np.maximum(xv @ w + 0.25, 0), rtol=1e-6)


def test_fully_connected_scope_reuse_trainable_and_no_biases():
    x = tf.placeholder(tf.float32, [None, 3])
    a = L.fully_connected(x, 2, scope="fc")
    b = L.fully_connected(x, 2, scope="fc", reuse=True)
    L.fully_connected(x, 2, biases_initializer=None, trainable=False, scope="frozen")
    L.fully_connected(x, 2, normalizer_fn=tf.identity, scope="normed")
    with tf.variable_scope("outer"):
        L.fully_connected(x, 2)
    assert _names(tf.global_variables()) == ["fc/weights", "fc/biases", "frozen/weights",
                                             "normed/weights", "outer/fully_connected/weights",
                                             "outer/fully_connected/biases"]
    assert "frozen/weights" not in _names(tf.trainable_variables())
    xv = RNG.standard_normal((2, 3)).astype(np.float32)
    va, vb = _run([a, b], {x: xv})
    np.testing.assert_array_equal(va, vb)
    with pytest.raises(ValueError, match="already exists"):
        L.fully_connected(x, 2, scope="fc")


def test_fully_connected_regularizer_rank3_and_errors():
    x = tf.placeholder(tf.float32, [None, 4, 3])
    y = L.fully_connected(x, 2, activation_fn=None, weights_regularizer=L.l2_regularizer(0.5))
    assert y.shape.as_list() == [None, 4, 2]
    (reg,) = tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)
    xv = RNG.standard_normal((2, 4, 3)).astype(np.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        w, b, out, r = sess.run(["fully_connected/weights:0", "fully_connected/biases:0", y,
                                 reg], {x: xv})
    np.testing.assert_allclose(out, xv @ w + b, rtol=1e-5, atol=1e-6)
    assert r == pytest.approx(0.5 * (w ** 2).sum() / 2, rel=1e-5)
    with pytest.raises(ValueError, match="num_outputs type"):
        L.fully_connected(x, 2.0)
    with pytest.raises(ValueError, match="min_ndim=2"):
        L.fully_connected(tf.placeholder(tf.float32, [3]), 2)


def test_linear_relu6_elu_are_fully_connected_with_that_activation():
    x = tf.placeholder(tf.float32, [None, 3])
    one = tf.constant_initializer(1.0)
    outs = [f(x, 1, weights_initializer=one, biases_initializer=tf.constant_initializer(-3.0))
            for f in (L.linear, L.relu6, L.elu, L.relu)]
    got = _run(outs, {x: [[1.0, 2.0, 4.0], [0.0, 0.0, 1.0]]})
    s = np.array([[4.0], [-2.0]])
    np.testing.assert_allclose(got[0], s)
    np.testing.assert_allclose(got[1], np.clip(s, 0, 6))
    np.testing.assert_allclose(got[2], np.where(s > 0, s, np.exp(s) - 1), rtol=1e-6)
    np.testing.assert_allclose(got[3], np.maximum(s, 0))


# -- convolutions and pooling ---------------------------------------------------------------------
def test_conv2d_hand_values_names_and_shapes():
    x = tf.placeholder(tf.float32, [None, 4, 4, 1])
    y = L.conv2d(x, 2, [3, 3], weights_initializer=tf.ones_initializer(),
                 biases_initializer=tf.constant_initializer(-1.0), activation_fn=None)
    s = L.conv2d(x, 3, 2, stride=2, padding="VALID")
    d = L.conv2d(x, 1, 3, rate=2, scope="dilated")
    assert _names(tf.global_variables()) == ["Conv/weights", "Conv/biases", "Conv_1/weights",
                                             "Conv_1/biases", "dilated/weights",
                                             "dilated/biases"]
    assert tf.global_variables()[0].shape == (3, 3, 1, 2)
    assert y.shape.as_list() == [None, 4, 4, 2] and s.shape.as_list() == [None, 2, 2, 3]
    assert d.shape.as_list() == [None, 4, 4, 1] and s.op.name == "Conv_1/Relu"
    got = _run(y, {x: np.ones((1, 4, 4, 1), np.float32)})
    # SAME 3x3 sums of ones: 4 at the corners, 6 on the edges, 9 inside; minus the bias 1
    want = np.array([[4, 6, 6, 4], [6, 9, 9, 6], [6, 9, 9, 6], [4, 6, 6, 4]]) - 1.0
    np.testing.assert_allclose(got[0, :, :, 0], want)
    np.testing.assert_allclose(got[0, :, :, 1], want)


def test_conv1d_and_conv2d_transpose_shapes_and_names():
    x = tf.placeholder(tf.float32, [2, 7, 3])
    y = L.conv1d(x, 4, 3, stride=2)
    z = L.conv2d_transpose(tf.placeholder(tf.float32, [2, 3, 3, 5]), 2, [3, 3], stride=2)
    assert y.shape.as_list() == [2, 4, 4] and z.shape.as_list() == [2, 6, 6, 2]
    assert _names(tf.global_variables()) == ["Conv/weights", "Conv/biases",
                                             "Conv2d_transpose/weights",
                                             "Conv2d_transpose/biases"]
    assert tf.global_variables()[2].shape == (3, 3, 2, 5)


def test_convolution_errors():
    with pytest.raises(NotImplementedError, match="data_format"):
        L.conv2d(tf.placeholder(tf.float32, [1, 2, 4, 4]), 2, 3, data_format="NCHW")
    with pytest.raises(ValueError, match="Invalid data_format"):
        L.conv2d(tf.placeholder(tf.float32, [1, 4, 4, 2]), 2, 3, data_format="HWC")
    with pytest.raises(NotImplementedError, match="3-D"):
        L.convolution(tf.placeholder(tf.float32, [1, 4, 4, 4, 2]), 2, 3)
    with pytest.raises(ValueError, match="rank 4"):
        L.conv2d(tf.placeholder(tf.float32, [1, 4, 2]), 2, 3)
    with pytest.raises(ValueError, match="padding"):
        L.conv2d(tf.placeholder(tf.float32, [1, 4, 4, 2]), 2, 3, padding="FULL")


def test_max_and_avg_pool2d_hand_values():
    xv = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)
    x = tf.constant(xv)
    mp = L.max_pool2d(x, 2)
    ap = L.avg_pool2d(x, [2, 2], stride=1)
    ms = L.max_pool2d(x, 3, stride=2, padding="SAME", scope="same_pool")
    assert mp.op.name == "MaxPool2D/MaxPool" and ap.op.name.startswith("AvgPool2D/")
    assert ms.op.name.startswith("same_pool/")
    m, a, s = _run([mp, ap, ms])
    np.testing.assert_array_equal(m[0, :, :, 0], [[5, 7], [13, 15]])
    np.testing.assert_allclose(a[0, :, :, 0], [[2.5, 3.5, 4.5], [6.5, 7.5, 8.5],
                                               [10.5, 11.5, 12.5]])
    np.testing.assert_array_equal(s[0, :, :, 0], [[10, 11], [14, 15]])
    with pytest.raises(ValueError, match="ndim=4"):
        L.max_pool2d(tf.constant(xv[0]), 2)


# -- flatten, dropout, one-hot, small functions ---------------------------------------------------
def test_flatten_one_hot_softmax_unit_norm():
    x = tf.placeholder(tf.float32, [None, 2, 3, 2])
    f = L.flatten(x)
    assert f.shape.as_list() == [None, 12] and f.op.name.startswith("Flatten/")
    oh = L.one_hot_encoding(tf.constant([2, 0]), 3)
    assert oh.dtype == tf.float32 and oh.op.name.startswith("OneHotEncoding/")
    logits = tf.constant(RNG.standard_normal((2, 3, 4)).astype(np.float32))
    sm = L.softmax(logits)
    un = L.unit_norm(logits, 1)
    xv = RNG.standard_normal((3, 2, 3, 2)).astype(np.float32)
    fv, ohv, smv, unv, lv = _run([f, oh, sm, un, logits], {x: xv})
    np.testing.assert_array_equal(fv, xv.reshape(3, 12))
    np.testing.assert_array_equal(ohv, [[0, 0, 1], [1, 0, 0]])
    e = np.exp(lv - lv.max(-1, keepdims=True))
    np.testing.assert_allclose(smv, e / e.sum(-1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(unv, lv / np.sqrt(1e-7 + (lv ** 2).sum(1, keepdims=True)),
                               rtol=1e-5)
    with pytest.raises(ValueError, match="dim must be"):
        L.unit_norm(logits, 3)


def test_dropout_keeps_scales_or_passes_through():
    x = tf.ones([100, 100])
    keep = tf.placeholder_with_default(0.25, [])
    training = tf.placeholder_with_default(True, [])
    d = L.dropout(x, keep, seed=1)
    off = L.dropout(x, 0.5, is_training=False)
    flag = L.dropout(x, 0.5, is_training=training, seed=2)
    assert d.op.name.startswith("Dropout/") and flag.op.name.startswith("Dropout_2/")
    with tf.Session() as sess:
        dv, ov, fv = sess.run([d, off, flag])
        one = sess.run(d, {keep: 1.0})
        fo = sess.run(flag, {training: False})
    assert set(np.unique(dv)) <= {0.0, 4.0} and abs((dv > 0).mean() - 0.25) < 0.03
    assert set(np.unique(fv)) <= {0.0, 2.0} and abs((fv > 0).mean() - 0.5) < 0.03
    np.testing.assert_array_equal(ov, 1.0)
    np.testing.assert_array_equal(one, 1.0)
    np.testing.assert_array_equal(fo, 1.0)


def test_repeat_and_stack_scopes():
    x = tf.placeholder(tf.float32, [None, 6, 6, 2])
    r = L.repeat(x, 3, L.conv2d, 4, [3, 3], scope="conv1")
    s = L.stack(L.flatten(r), L.fully_connected, [5, (3, None)], scope="fc")
    t = L.stack(L.flatten(r), L.fully_connected, [2])
    assert _names(tf.global_variables()) == [
        "conv1/conv1_1/weights", "conv1/conv1_1/biases", "conv1/conv1_2/weights",
        "conv1/conv1_2/biases", "conv1/conv1_3/weights", "conv1/conv1_3/biases",
        "fc/fc_1/weights", "fc/fc_1/biases", "fc/fc_2/weights", "fc/fc_2/biases",
        "Stack/fully_connected_1/weights", "Stack/fully_connected_1/biases"]
    assert s.op.name == "fc/fc_2/BiasAdd" and t.shape.as_list() == [None, 2]
    with pytest.raises(ValueError, match="stack_args"):
        L.stack(x, L.fully_connected, 5)


def test_bias_add_separable_conv2d_and_embed_sequence():
    x = tf.placeholder(tf.float32, [None, 5, 5, 2])
    b = L.bias_add(x, initializer=tf.constant_initializer(0.5))
    sep = L.separable_conv2d(x, 3, 3, depth_multiplier=2)
    dw = L.separable_conv2d(x, None, 3, scope="dw")
    ids = tf.constant([[1, 2, 1], [0, 3, 3]])
    emb = L.embed_sequence(ids, vocab_size=4, embed_dim=3)
    emb_u = L.embed_sequence(ids, unique=True, scope="EmbedSequence", reuse=True)
    assert _names(tf.global_variables()) == [
        "BiasAdd/biases", "SeparableConv2d/depthwise_weights",
        "SeparableConv2d/pointwise_weights", "SeparableConv2d/biases", "dw/depthwise_weights",
        "dw/biases", "EmbedSequence/embeddings"]
    assert sep.shape.as_list() == [None, 5, 5, 3] and dw.shape.as_list() == [None, 5, 5, 2]
    assert tf.global_variables()[2].shape == (1, 1, 4, 3)
    xv = RNG.standard_normal((1, 5, 5, 2)).astype(np.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        bv, e, eu, table = sess.run([b, emb, emb_u, "EmbedSequence/embeddings:0"], {x: xv})
    np.testing.assert_allclose(bv, xv + 0.5)
    np.testing.assert_array_equal(e, table[[[1, 2, 1], [0, 3, 3]]])
    np.testing.assert_array_equal(eu, e)
    with pytest.raises(ValueError, match="vocab size"):
        L.embed_sequence(ids, vocab_size=4)


# -- batch_norm -----------------------------------------------------------------------------------
def _bn_numpy(x, axes, gamma, beta, eps, mean=None, var=None):
    if mean is None:
        mean, var = x.mean(axes), x.var(axes)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def test_batch_norm_defaults_names_and_training_values(backend):
    xv = (RNG.standard_normal((6, 3, 3, 2)) * 2 + 1).astype(np.float32)
    x = tf.placeholder(tf.float32, [None, 3, 3, 2])
    y = L.batch_norm(x)
    assert _names(tf.global_variables()) == ["BatchNorm/beta", "BatchNorm/moving_mean",
                                             "BatchNorm/moving_variance"]
    assert _names(tf.trainable_variables()) == ["BatchNorm/beta"]
    assert _names(tf.get_collection(tf.GraphKeys.MODEL_VARIABLES)) == \
        _names(tf.global_variables())
    updates = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    assert len(updates) == 2
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got, _ = sess.run([y, updates], {x: xv})
        mm, mv = sess.run(["BatchNorm/moving_mean:0", "BatchNorm/moving_variance:0"])
    axes = (0, 1, 2)
    np.testing.assert_allclose(got, _bn_numpy(xv, axes, 1.0, 0.0, 1e-3), rtol=1e-4,
                               atol=1e-5)
    n = 6 * 3 * 3
    np.testing.assert_allclose(mm, 0.001 * xv.mean(axes), rtol=1e-4)
    # the fused kernel's moving variance follows the unbiased batch variance
    np.testing.assert_allclose(mv, 0.999 + 0.001 * xv.var(axes) * n / (n - 1), rtol=1e-5)


def test_batch_norm_inference_forced_updates_and_flag(backend):
    xv = (RNG.standard_normal((8, 3)) * 3 - 2).astype(np.float32)
    x = tf.placeholder(tf.float32, [None, 3])
    flag = tf.placeholder(tf.bool, [])
    forced = L.batch_norm(x, decay=0.5, updates_collections=None, scale=True, scope="forced")
    inf = L.batch_norm(x, is_training=False, scope="forced", reuse=True)
    by_flag = L.batch_norm(x, decay=0.5, is_training=flag, scope="flagged")
    assert tf.get_collection(tf.GraphKeys.UPDATE_OPS)[0].op.name.startswith("flagged/")
    assert len(tf.get_collection(tf.GraphKeys.UPDATE_OPS)) == 2
    updates = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        f = sess.run(forced, {x: xv})           # runs the moving-average updates itself
        mm, mv = sess.run(["forced/moving_mean:0", "forced/moving_variance:0"])
        i = sess.run(inf, {x: xv})
        t_on = sess.run(by_flag, {x: xv, flag: True})
        sess.run(updates, {x: xv, flag: False})   # no change when not training
        still = sess.run(["flagged/moving_mean:0", "flagged/moving_variance:0"])
        t_off = sess.run(by_flag, {x: xv, flag: False})
    n = 8
    np.testing.assert_allclose(f, _bn_numpy(xv, 0, 1.0, 0.0, 1e-3), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(mm, 0.5 * xv.mean(0), rtol=1e-5)
    np.testing.assert_allclose(mv, 0.5 + 0.5 * xv.var(0) * n / (n - 1), rtol=1e-5)
    np.testing.assert_allclose(i, (xv - mm) / np.sqrt(mv + 1e-3), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(t_on, f, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(still[0], 0.0)
    np.testing.assert_allclose(still[1], 1.0)
    np.testing.assert_allclose(t_off, xv / np.sqrt(1 + 1e-3), rtol=1e-5)


def test_batch_norm_rank3_unfused_nchw_params_and_errors():
    x3 = (RNG.standard_normal((4, 5, 3)) + 1).astype(np.float32)
    a = L.batch_norm(tf.constant(x3), decay=0.0, epsilon=1e-5, center=False, scale=True,
                     param_initializers={"gamma": tf.constant_initializer(2.0)},
                     variables_collections={"gamma": ["G"]}, trainable=False)
    xc = (RNG.standard_normal((2, 3, 4, 4)) - 1).astype(np.float32)
    c = L.batch_norm(tf.constant(xc), data_format="NCHW", scale=True)
    u = L.batch_norm(tf.constant(xc), fused=False, decay=0.0, scope="unfused")
    assert _names(tf.get_collection("G")) == ["BatchNorm/gamma"]
    assert "BatchNorm/gamma" not in _names(tf.trainable_variables())
    assert tf.global_variables()[0].op.name == "BatchNorm/gamma"   # no beta: center=False
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        av, cv, uv, _ = sess.run([a, c, u, tf.get_collection(tf.GraphKeys.UPDATE_OPS)])
        mv3, mvu = sess.run(["BatchNorm/moving_variance:0", "unfused/moving_variance:0"])
    np.testing.assert_allclose(av, _bn_numpy(x3, (0, 1), 2.0, 0.0, 1e-5), rtol=1e-4,
                               atol=1e-5)
    np.testing.assert_allclose(mv3, x3.var((0, 1)), rtol=1e-5)       # rank 3: biased
    np.testing.assert_allclose(mvu, xc.var((0, 1, 2)), rtol=1e-5)    # fused=False: biased
    m = xc.mean((0, 2, 3), keepdims=True)
    v = xc.var((0, 2, 3), keepdims=True)
    np.testing.assert_allclose(cv, (xc - m) / np.sqrt(v + 1e-3), rtol=1e-4, atol=1e-5)
    n_updates = len(tf.get_collection(tf.GraphKeys.UPDATE_OPS))
    L.batch_norm(tf.constant(x3), is_training=np.bool_(False), scope="numpy_flag")
    L.batch_norm(tf.constant(x3), is_training=tf.constant(False), scope="const_flag")
    assert len(tf.get_collection(tf.GraphKeys.UPDATE_OPS)) == n_updates   # inference only
    with pytest.raises(ValueError, match="channels dimension"):
        L.batch_norm(tf.placeholder(tf.float32, [None, None]))
    with pytest.raises(ValueError, match="undefined rank"):
        L.batch_norm(tf.placeholder(tf.float32))
    with pytest.raises(ValueError, match="NCHW or NHWC"):
        L.batch_norm(tf.constant(x3), data_format="NWC")
    with pytest.raises(NotImplementedError, match="renorm"):
        L.batch_norm(tf.constant(x3), renorm=True)


def test_layer_norm_values_and_variables():
    xv = RNG.standard_normal((3, 4, 5)).astype(np.float32) * 4
    y = L.layer_norm(tf.constant(xv))
    z = L.layer_norm(tf.constant(xv), begin_norm_axis=-1, begin_params_axis=1, center=False,
                     activation_fn=tf.nn.relu)
    assert _names(tf.global_variables()) == ["LayerNorm/beta", "LayerNorm/gamma",
                                             "LayerNorm_1/gamma"]
    assert tf.global_variables()[2].shape == (4, 5)
    yv, zv = _run([y, z])
    m, v = xv.mean((1, 2), keepdims=True), xv.var((1, 2), keepdims=True)
    np.testing.assert_allclose(yv, (xv - m) / np.sqrt(v + 1e-12), rtol=1e-4, atol=1e-5)
    m, v = xv.mean(-1, keepdims=True), xv.var(-1, keepdims=True)
    np.testing.assert_allclose(zv, np.maximum((xv - m) / np.sqrt(v + 1e-12), 0), rtol=1e-4,
                               atol=1e-5)
    with pytest.raises(ValueError, match="must be < rank"):
        L.layer_norm(tf.constant(xv), begin_norm_axis=3)


# -- regularizers ---------------------------------------------------------------------------------
def test_regularizers_values_and_checks():
    wv = np.array([[1.0, -2.0], [0.5, 3.0]], np.float32)
    w = tf.constant(wv)
    l1 = L.l1_regularizer(0.1)(w)
    l2 = L.l2_regularizer(0.2)(w)
    both = L.l1_l2_regularizer(0.1, 0.2)(w)
    only = L.l1_l2_regularizer(0.0, 0.2)(w)
    total = L.sum_regularizer([L.l1_regularizer(0.1), None, L.l2_regularizer(0.2)])(w)
    applied = L.apply_regularization(L.l2_regularizer(0.2), [w, w])
    assert l2.op.name == "l2_regularizer" and l1.op.name == "l1_regularizer"
    assert tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES) == [applied]
    got = _run([l1, l2, both, only, total, applied])
    a1, a2 = 0.1 * np.abs(wv).sum(), 0.2 * (wv ** 2).sum() / 2
    np.testing.assert_allclose(got, [a1, a2, a1 + a2, a2, a1 + a2, 2 * a2], rtol=1e-6)
    assert L.l2_regularizer(0.0)(w) is None and L.sum_regularizer([None]) is None
    with pytest.raises(ValueError, match="integer"):
        L.l2_regularizer(1)
    with pytest.raises(ValueError, match="less than 0"):
        L.l1_regularizer(-0.5)
    with pytest.raises(ValueError, match="No weights"):
        L.apply_regularization(L.l2_regularizer(0.1))


def test_apply_regularization_defaults_to_the_weights_collection():
    w = tf.Variable([3.0, 4.0], name="w")
    tf.add_to_collection(tf.GraphKeys.WEIGHTS, w)
    penalty = L.apply_regularization(L.l2_regularizer(1.0))
    assert _run(penalty) == pytest.approx(12.5)


# -- optimize_loss and summaries ------------------------------------------------------------------
def test_optimize_loss_sgd_step_by_hand_and_errors():
    w = tf.Variable([1.0, -2.0], name="w")
    loss = tf.reduce_sum(w * w)
    step = tf.train.get_or_create_global_step()
    train = L.optimize_loss(loss, step, 0.1, "SGD")
    assert "OptimizeLoss/learning_rate" in _names(tf.global_variables())
    tags = sorted(s.op.name for s in tf.get_collection(tf.GraphKeys.SUMMARIES))
    # the default summaries: the loss and the global gradient norm (the learning rate only
    # when a decay function makes it change)
    assert tags == ["OptimizeLoss/global_norm/gradient_norm", "OptimizeLoss/loss"]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        lv = sess.run(train)
        wv, sv = sess.run([w, step])
    assert lv == pytest.approx(5.0)
    np.testing.assert_allclose(wv, [1.0 - 0.1 * 2.0, -2.0 + 0.1 * 4.0], rtol=1e-6)
    assert sv == 1
    with pytest.raises(ValueError, match="Optimizer name"):
        L.optimize_loss(loss, step, 0.1, "Nope", name="b")
    with pytest.raises(ValueError, match="Learning rate is None"):
        L.optimize_loss(loss, step, None, "SGD", name="c")
    with pytest.raises(ValueError, match="Summaries should be one of"):
        L.optimize_loss(loss, step, 0.1, "SGD", summaries=["weights"], name="d")


def test_summarize_helpers_make_scalar_and_histogram_summaries():
    x = tf.placeholder(tf.float32, [None, 3])
    h = L.fully_connected(x, 2, outputs_collections=tf.GraphKeys.ACTIVATIONS)
    L.summarize_tensor(tf.reduce_mean(h))
    L.summarize_activations()
    L.summarize_variables("fully_connected/weights")
    types = sorted(s.op.type for s in tf.get_collection(tf.GraphKeys.SUMMARIES))
    assert types.count("ScalarSummary") == 2 and types.count("HistogramSummary") == 2
    names = [s.op.name for s in tf.get_collection(tf.GraphKeys.SUMMARIES)]
    assert any("fully_connected/Relu/zeros" in n for n in names)


# -- a TF1 program written with tf.contrib.layers -------------------------------------------------
def test_small_cnn_trains_with_contrib_layers(backend):
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((64, 6, 6, 1)).astype(np.float32)
    ys = (xs[:, :3].mean((1, 2, 3)) > xs[:, 3:].mean((1, 2, 3))).astype(np.int64)
    x = tf.placeholder(tf.float32, [None, 6, 6, 1])
    y = tf.placeholder(tf.int64, [None])
    training = tf.placeholder_with_default(False, [])
    tf.set_random_seed(1)
    with tf.contrib.framework.arg_scope([L.conv2d, L.fully_connected],
                                        weights_initializer=L.xavier_initializer(seed=1),
                                        weights_regularizer=L.l2_regularizer(1e-4)):
        h = L.conv2d(x, 4, [3, 3], normalizer_fn=L.batch_norm,
                     normalizer_params={"is_training": training, "decay": 0.9})
        h = L.max_pool2d(h, 2)
        h = L.fully_connected(L.flatten(h), 8)
        logits = L.fully_connected(h, 2, activation_fn=None)
    loss = tf.losses.sparse_softmax_cross_entropy(y, logits) + tf.losses.get_regularization_loss()
    with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
        train = tf.train.AdamOptimizer(0.05).minimize(loss)
    assert _names(tf.trainable_variables()) == [
        "Conv/weights", "Conv/BatchNorm/beta", "fully_connected/weights",
        "fully_connected/biases", "fully_connected_1/weights", "fully_connected_1/biases"]
    assert len(tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)) == 3
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        first = sess.run(loss, {x: xs, y: ys})
        for _ in range(40):
            sess.run(train, {x: xs, y: ys, training: True})
        last = sess.run(loss, {x: xs, y: ys})
        mm = sess.run("Conv/BatchNorm/moving_mean:0")
    assert last < 0.5 * first
    assert np.abs(mm).max() > 0   # the moving averages moved
