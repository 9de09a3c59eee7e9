"""tf.contrib against TensorFlow: whole models built by one function under tf_slim (TF 1.15's
contrib code, ported) and under jitflow's tf.contrib.slim, run with the same initial weights:
variable names, collections, outputs, regularization losses, and the variables after a few
training steps (batch-norm moving averages included) must agree. Without tf_slim, the same
layers are checked against TensorFlow's ops on the same weights; the fused RNN cells against
TensorFlow's LSTMBlockCell / GRUBlockCell kernels. All skip without TensorFlow."""
from __future__ import annotations

import numpy as np
import pytest

import jitflow as tf
from contrib_helpers import assert_same, run_both, tf1, tf_slim

RNG = np.random.default_rng(7)
X = RNG.standard_normal((16, 5)).astype(np.float32)
Y = RNG.integers(0, 3, 16)
IMG = RNG.standard_normal((4, 9, 9, 2)).astype(np.float32)


def _both(build, feeds, steps=0, rtol=1e-5, atol=1e-6):
    t, slim = tf_slim()
    res = run_both(build, feeds, (t, slim), (tf, tf.contrib.slim), steps=steps)
    assert_same(res, rtol=rtol, atol=atol)
    return res


def _train(t, loss, lr=0.1):
    with t.control_dependencies(t.get_collection(t.GraphKeys.UPDATE_OPS)):
        op = t.train.GradientDescentOptimizer(lr).minimize(loss)
    t.add_to_collection(t.GraphKeys.TRAIN_OP, op)


# -- tf_slim: whole models ------------------------------------------------------------------------
def _mlp(t, S):
    x = t.placeholder(t.float32, [None, 5], name="x")
    y = t.placeholder(t.int64, [None], name="y")
    h = S.fully_connected(x, 8, weights_regularizer=S.l2_regularizer(0.01),
                          normalizer_fn=S.batch_norm,
                          normalizer_params={"is_training": True, "scale": True, "decay": 0.9})
    h = S.fully_connected(h, 6, activation_fn=t.nn.tanh, scope="hidden",
                          weights_regularizer=S.l1_regularizer(0.02),
                          biases_regularizer=S.l2_regularizer(0.5))
    logits = S.fully_connected(h, 3, activation_fn=None,
                               biases_initializer=t.constant_initializer(0.1))
    loss = t.losses.sparse_softmax_cross_entropy(y, logits) + t.losses.get_regularization_loss()
    _train(t, loss)
    return {"x": x, "y": y}, [logits, loss]


def test_mlp_with_batch_norm_trains_like_tf_slim():
    res = _both(_mlp, {"x": X, "y": Y}, steps=3)
    assert res["jf"]["variables"][:6] == [
        "fully_connected/weights", "fully_connected/BatchNorm/beta",
        "fully_connected/BatchNorm/gamma", "fully_connected/BatchNorm/moving_mean",
        "fully_connected/BatchNorm/moving_variance", "hidden/weights"]
    assert res["jf"]["update_ops"] == 2 and len(res["jf"]["regularization"]) == 3


def _cnn(t, S):
    x = t.placeholder(t.float32, [None, 9, 9, 2], name="x")
    y = t.placeholder(t.int64, [None], name="y")
    with S.arg_scope([S.conv2d], padding="VALID",
                     weights_regularizer=S.l2_regularizer(1e-3)):
        h = S.conv2d(x, 4, [3, 3], stride=2, scope="conv1")
        h = S.conv2d(h, 3, 2, padding="SAME", normalizer_fn=S.batch_norm,
                     normalizer_params={"decay": 0.8, "scale": True})
    p1 = S.max_pool2d(h, [2, 2], stride=1)
    p2 = S.avg_pool2d(h, 2, stride=1, padding="SAME")
    f = S.flatten(t.concat([p1, p1 * 0 + 1], 1)) + 0 * S.flatten(p2)[:, :1]
    logits = S.fully_connected(f, 3, activation_fn=None, scope="logits")
    loss = t.losses.sparse_softmax_cross_entropy(y, logits) + t.losses.get_regularization_loss()
    _train(t, loss, lr=0.05)
    return {"x": x, "y": y}, [logits, loss, p2]


def test_cnn_with_arg_scope_trains_like_tf_slim():
    res = _both(_cnn, {"x": IMG, "y": Y[:4]}, steps=3, rtol=1e-4, atol=1e-5)
    # the tf.layers path of batch_norm (rank 4, default update collection) makes gamma first
    assert res["jf"]["variables"][2:6] == ["Conv/weights", "Conv/BatchNorm/gamma",
                                           "Conv/BatchNorm/beta", "Conv/BatchNorm/moving_mean"]


@pytest.mark.parametrize("case", ["rank2_forced", "rank3", "rank4_unfused", "flag_true",
                                  "flag_false"])
def test_batch_norm_variants_match_tf_slim(case):
    x3 = RNG.standard_normal((3, 4, 5)).astype(np.float32) * 2 + 1
    x4 = RNG.standard_normal((3, 4, 4, 2)).astype(np.float32) * 2 + 1
    data = {"rank2_forced": X * 3 - 1, "rank3": x3, "rank4_unfused": x4, "flag_true": x4,
            "flag_false": x4}[case]

    def build(t, S):
        x = t.placeholder(t.float32, [None] + list(data.shape[1:]), name="x")
        kw = {"decay": 0.5, "center": True, "scale": True}
        if case == "rank2_forced":
            out = S.batch_norm(x, updates_collections=None, **kw)
        elif case == "rank4_unfused":
            out = S.batch_norm(x, fused=False, epsilon=1e-6, **kw)
        elif case.startswith("flag"):
            flag = t.placeholder_with_default(case == "flag_true", [])
            out = S.batch_norm(x, is_training=flag, **kw)
        else:
            out = S.batch_norm(x, **kw)
        loss = t.reduce_sum(t.square(out - 0.5))
        _train(t, loss)
        return {"x": x}, out
    _both(build, {"x": data}, steps=2, rtol=1e-4, atol=1e-5)


def _assorted(t, S):
    x = t.placeholder(t.float32, [None, 9, 9, 2], name="x")
    ln = S.layer_norm(x, begin_norm_axis=2)
    ln2 = S.layer_norm(x, center=False, begin_params_axis=1, scope="ln_all")
    up = S.conv2d_transpose(x, 3, [3, 3], stride=2, activation_fn=None)
    sep = S.separable_conv2d(x, 4, [3, 3], depth_multiplier=2, stride=2)
    dw = S.separable_conv2d(x, None, 2, depth_multiplier=3, padding="VALID", scope="dw")
    b = S.bias_add(x, initializer=t.constant_initializer(0.3), activation_fn=t.nn.relu)
    r = S.repeat(x, 2, S.conv2d, 2, [1, 1], scope="rep")
    st = S.stack(S.flatten(x), S.fully_connected, [4, 3], scope="fc")
    un = S.unit_norm(x, 3)
    sm = S.softmax(x)
    c1 = S.conv1d(x[:, 0], 3, 2, rate=2)
    oh = S.one_hot_encoding(t.constant([0, 2, 1]), 4)
    return {"x": x}, [ln, ln2, up, sep, dw, b, r, st, un, sm, c1, oh]


def test_assorted_layers_match_tf_slim():
    res = _both(_assorted, {"x": IMG}, rtol=1e-4, atol=1e-5)
    v = res["jf"]["variables"]
    assert "SeparableConv2d/depthwise_weights" in v and "dw/depthwise_weights" in v
    assert "rep/rep_2/weights" in v and "fc/fc_2/biases" in v
    assert "Conv2d_transpose/weights" in v and "BiasAdd/biases" in v


def _optimize(t, S):
    x = t.placeholder(t.float32, [None, 5], name="x")
    y = t.placeholder(t.int64, [None], name="y")
    step = t.train.get_or_create_global_step()
    logits = S.fully_connected(S.fully_connected(x, 6), 3, activation_fn=None)
    loss = t.losses.sparse_softmax_cross_entropy(y, logits)
    train = S.optimize_loss(loss, step, 0.3, "Momentum", clip_gradients=0.5,
                            learning_rate_decay_fn=lambda lr, s: lr * 0.9,
                            gradient_multipliers={"fully_connected/weights:0": 2.0},
                            summaries=[])
    t.add_to_collection(t.GraphKeys.TRAIN_OP, train)
    return {"x": x, "y": y}, train


def test_optimize_loss_matches_tf_slim():
    res = _both(_optimize, {"x": X, "y": Y}, steps=4)
    assert "OptimizeLoss/learning_rate" in res["jf"]["variables"]
    assert "OptimizeLoss/fully_connected/weights/Momentum" in res["jf"]["variables"]
    assert res["jf"]["values"]["global_step"] == 5   # 4 steps, then the fetch


def _slim_train_op(t, S):
    x = t.placeholder(t.float32, [None, 5], name="x")
    y = t.placeholder(t.int64, [None], name="y")
    h = S.fully_connected(x, 6, normalizer_fn=S.batch_norm)
    logits = S.fully_connected(h, 3, activation_fn=None)
    S.losses.sparse_softmax_cross_entropy(logits, y)
    total = S.losses.get_total_loss()
    op = S.learning.create_train_op(total, t.train.GradientDescentOptimizer(0.2),
                                    clip_gradient_norm=0.3,
                                    gradient_multipliers={"fully_connected_1/biases": 3.0})
    return {"x": x, "y": y}, [op, total]


def test_slim_create_train_op_matches_tf_slim():
    _both(_slim_train_op, {"x": X, "y": Y}, steps=3)


def test_arg_scope_and_variable_helpers_match_tf_slim():
    def build(t, S):
        x = t.placeholder(t.float32, [None, 5], name="x")
        with S.arg_scope([S.fully_connected], activation_fn=t.nn.sigmoid,
                         variables_collections=["mine"]):
            with S.arg_scope([S.fully_connected], biases_initializer=None) as sc:
                a = S.fully_connected(x, 3, scope="a")
            with S.arg_scope(sc):
                b = S.fully_connected(a, 2, scope="b", activation_fn=None)
            c = S.fully_connected(b, 2, scope="c")
        with S.arg_scope([S.model_variable], trainable=False):
            S.model_variable("counter", [2], initializer=t.ones_initializer())
        got = [S.get_variables("a"), S.get_variables_by_name("weights"),
               S.get_variables_by_suffix("biases"), S.get_variables_to_restore(exclude=["b"]),
               S.get_model_variables(), t.get_collection("mine"), [S.get_unique_variable(
                   "c/weights")]]
        t.add_to_collection("names", [v.op.name for group in got for v in group])
        return {"x": x}, c
    t, slim = tf_slim()
    res = run_both(build, {"x": X}, (t, slim), (tf, tf.contrib.slim))
    assert_same(res)
    g_names = []
    for t_mod, s_mod in ((t, slim), (tf, tf.contrib.slim)):
        with t_mod.Graph().as_default():
            build(t_mod, s_mod)
            g_names.append(t_mod.get_collection("names")[0])
    assert g_names[1] == g_names[0]
    assert "counter" not in res["jf"]["trainable_variables"]


# -- without tf_slim: TensorFlow's ops on the same weights ----------------------------------------
def test_fully_connected_and_conv2d_match_tensorflow_ops():
    t = tf1()
    x = tf.placeholder(tf.float32, [None, 9, 9, 2])
    c = tf.contrib.layers.conv2d(x, 3, [3, 2], stride=2, padding="VALID")
    f = tf.contrib.layers.fully_connected(tf.contrib.layers.flatten(c), 4,
                                          activation_fn=tf.nn.elu)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        w = {v.op.name: sess.run(v) for v in tf.global_variables()}
        got = sess.run(f, {x: IMG})
    g = t.Graph()
    with g.as_default():
        h = t.nn.relu(t.nn.bias_add(t.nn.conv2d(IMG, w["Conv/weights"], [1, 2, 2, 1], "VALID"),
                                    w["Conv/biases"]))
        h = t.reshape(h, [4, -1])
        want = t.nn.elu(t.matmul(h, w["fully_connected/weights"])
                        + w["fully_connected/biases"])
        with t.Session() as sess:
            want = sess.run(want)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_batch_norm_matches_tensorflow_fused_batch_norm():
    t = tf1()
    data = RNG.standard_normal((3, 4, 4, 2)).astype(np.float32) * 3 + 2
    x = tf.placeholder(tf.float32, data.shape)
    out = tf.contrib.layers.batch_norm(x, decay=0.7, scale=True,
                                       param_initializers={"gamma": tf.constant_initializer(
                                           [0.5, 2.0]), "beta": tf.constant_initializer(0.25)})
    ups = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got, _ = sess.run([out, ups], {x: data})
        mm, mv = sess.run(["BatchNorm/moving_mean:0", "BatchNorm/moving_variance:0"])
    g = t.Graph()
    with g.as_default():
        y, m, v = t.nn.fused_batch_norm(data, [0.5, 2.0], [0.25, 0.25], epsilon=1e-3)
        with t.Session() as sess:
            want, m, v = sess.run([y, m, v])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(mm, 0.3 * m, rtol=1e-5)
    np.testing.assert_allclose(mv, 0.7 + 0.3 * v, rtol=1e-5)   # v: TF's unbiased variance


def test_xavier_matches_glorot_uniform_limits_and_variance_scaling_stddev():
    t = tf1()
    shape = [60, 40]
    init = tf.contrib.layers.xavier_initializer(seed=3)
    with tf.Session() as sess:
        ours = sess.run(init(shape))
    g = t.Graph()
    with g.as_default():
        theirs = t.Session().run(t.glorot_uniform_initializer(seed=3)(shape))
    limit = np.sqrt(6.0 / 100)
    for a in (ours, theirs):
        assert a.min() >= -limit and a.max() <= limit and a.max() > 0.95 * limit
    assert abs(ours.std() - theirs.std()) < 0.1 * theirs.std()


# -- the fused RNN cells against TensorFlow's kernels ---------------------------------------------
def test_lstm_block_cell_matches_tensorflow_kernel():
    t = tf1()
    xv = RNG.standard_normal((3, 4)).astype(np.float32)
    c0 = RNG.standard_normal((3, 5)).astype(np.float32)
    h0 = RNG.standard_normal((3, 5)).astype(np.float32)
    cell = tf.contrib.rnn.LSTMBlockCell(5, forget_bias=0.7, cell_clip=0.9, use_peephole=True)
    out, st = cell(tf.constant(xv), tf.contrib.rnn.LSTMStateTuple(tf.constant(c0),
                                                                  tf.constant(h0)))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        w = {v.op.name.split("/")[-1]: sess.run(v) for v in tf.global_variables()}
        w["bias"] = RNG.standard_normal(20).astype(np.float32)
        tf.get_default_graph().get_tensor_by_name("lstm_cell/bias:0")
        [v for v in tf.global_variables() if v.op.name == "lstm_cell/bias"][0].load(w["bias"],
                                                                                   sess)
        got = sess.run([out, st.c, st.h])
    g = t.Graph()
    with g.as_default():
        res = t.raw_ops.LSTMBlockCell(x=xv, cs_prev=c0, h_prev=h0, w=w["kernel"],
                                      wci=w["w_i_diag"], wcf=w["w_f_diag"], wco=w["w_o_diag"],
                                      b=w["bias"], forget_bias=0.7, cell_clip=0.9,
                                      use_peephole=True)
        with t.Session() as sess:
            res = sess.run(res)
    want_c, want_h = res[1], res[6]
    np.testing.assert_allclose(got[1], want_c, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[2], want_h, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[0], want_h, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("v2", [False, True])
def test_gru_block_cells_match_tensorflow_kernel(v2):
    t = tf1()
    xv = RNG.standard_normal((3, 4)).astype(np.float32)
    h0 = RNG.standard_normal((3, 5)).astype(np.float32)
    cls = tf.contrib.rnn.GRUBlockCellV2 if v2 else tf.contrib.rnn.GRUBlockCell
    out, st = cls(5)(tf.constant(xv), tf.constant(h0))
    names = ["gates/kernel", "gates/bias", "candidate/kernel", "candidate/bias"] if v2 else \
        ["w_ru", "b_ru", "w_c", "b_c"]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        by_name = {v.op.name: v for v in tf.global_variables()}
        assert sorted(by_name) == sorted("gru_cell/" + n for n in names)
        w = [RNG.standard_normal(by_name["gru_cell/" + n].shape.as_list()).astype(np.float32)
             for n in names]
        for n, val in zip(names, w):
            by_name["gru_cell/" + n].load(val, sess)
        got = sess.run(out)
    g = t.Graph()
    with g.as_default():
        res = t.raw_ops.GRUBlockCell(x=xv, h_prev=h0, w_ru=w[0], w_c=w[2], b_ru=w[1], b_c=w[3])
        with t.Session() as sess:
            want = sess.run(res)[3]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("factor, mode, uniform", [(2.0, "FAN_IN", False),
                                                   (1.0, "FAN_AVG", True),
                                                   (0.5, "FAN_OUT", False)])
def test_variance_scaling_draws_match_tf_slims_distribution(factor, mode, uniform):
    t, slim = tf_slim()
    shape = [3, 3, 16, 32]
    with tf.Session() as sess:
        ours = sess.run(tf.contrib.layers.variance_scaling_initializer(
            factor, mode, uniform, seed=1)(shape))
    with t.Graph().as_default():
        theirs = t.Session().run(slim.variance_scaling_initializer(factor, mode, uniform,
                                                                    seed=1)(shape))
    assert ours.dtype == theirs.dtype
    # the same bound (uniform limit, or two truncation stddevs) and the same spread
    assert np.abs(ours).max() <= np.abs(theirs).max() * 1.02
    assert np.abs(theirs).max() <= np.abs(ours).max() * 1.02
    assert ours.std() == pytest.approx(theirs.std(), rel=0.05)
