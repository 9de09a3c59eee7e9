"""tf.contrib.framework (arg_scope, variable helpers), tf.contrib.training (HParams,
create_train_op), tf.contrib.losses and the tf.contrib.slim namespace: TF 1.15's behaviour,
checked by hand."""
from __future__ import annotations

import functools

import numpy as np
import pytest

import jitflow as tf

F = tf.contrib.framework
L = tf.contrib.layers


@pytest.fixture(autouse=True)
def _interpreter(monkeypatch):
    monkeypatch.setenv("JITFLOW_BACKEND", "interpreter")


def _names(variables) -> list:
    return [v.op.name for v in variables]


# -- arg_scope ------------------------------------------------------------------------------------
@F.add_arg_scope
def _f(a, b=1, c=2, d=3):
    return (a, b, c, d)


def _plain(a, b=1):
    return a, b


def test_arg_scope_defaults_nesting_and_explicit_arguments():
    assert _f(0) == (0, 1, 2, 3)
    with F.arg_scope([_f], b=10, c=20):
        assert _f(0) == (0, 10, 20, 3)
        assert _f(0, c=5) == (0, 10, 5, 3)           # the call's keyword wins
        with F.arg_scope([_f], c=30, d=40) as inner:
            assert _f(0) == (0, 10, 30, 40)
        assert _f(0) == (0, 10, 20, 3)
    assert _f(0) == (0, 1, 2, 3)
    with F.arg_scope(inner):                         # a saved scope, re-entered
        assert _f(0) == (0, 10, 30, 40)
    assert F.current_arg_scope() == {}


def test_arg_scope_on_contrib_layers_and_their_aliases():
    x = tf.placeholder(tf.float32, [None, 6, 6, 2])
    with F.arg_scope([L.conv2d], padding="VALID", activation_fn=None):
        a = L.conv2d(x, 3, 3)
        b = L.convolution2d(x, 3, 3, padding="SAME")
        c = L.convolution(x, 3, 3)                   # not in the scope: defaults apply
    assert L.conv2d is L.convolution2d
    assert a.shape.as_list() == [None, 4, 4, 3] and a.op.type == "BiasAdd"
    assert b.shape.as_list() == [None, 6, 6, 3]
    assert c.shape.as_list() == [None, 6, 6, 3] and c.op.type == "Relu"
    assert "padding" in F.arg_scoped_arguments(L.conv2d)
    assert "activation_fn" in F.arg_scoped_arguments(L.fully_connected)
    assert F.has_arg_scope(L.batch_norm) and F.has_arg_scope(F.model_variable)
    assert not F.has_arg_scope(_plain)


def test_arg_scope_errors():
    with pytest.raises(TypeError, match="list/tuple"):
        with F.arg_scope(_f, b=1):
            pass
    with pytest.raises(ValueError, match="not decorated"):
        with F.arg_scope([_plain], b=2):
            pass
    with pytest.raises(ValueError, match="kwargs must be empty"):
        with F.arg_scope({}, b=2):
            pass
    with pytest.raises(ValueError, match="not decorated"):
        F.arg_scoped_arguments(_plain)
    assert F.current_arg_scope() == {}                # a failed scope left nothing behind


def test_arg_scope_reaches_partials_of_a_scoped_function():
    g = functools.partial(_f, d=9)
    with F.arg_scope([_f], b=7):
        assert g(0) == (0, 7, 2, 9)


# -- variables ------------------------------------------------------------------------------------
def test_model_variable_variable_and_collections():
    with tf.variable_scope("net"):
        m = F.model_variable("m", [2], initializer=tf.ones_initializer(),
                             collections=["extra"])
        v = F.variable("v", [3], collections=["only"])
        with F.arg_scope([F.model_variable], trainable=False):
            frozen = F.model_variable("frozen", [1])
    assert m.op.name == "net/m" and v.op.name == "net/v"
    assert _names(tf.get_collection(tf.GraphKeys.MODEL_VARIABLES)) == ["net/m", "net/frozen"]
    assert _names(tf.get_collection("extra")) == ["net/m"]
    assert _names(tf.get_collection("only")) == ["net/v"]
    assert "net/v" not in _names(tf.global_variables())     # collections replace the default
    assert frozen not in tf.trainable_variables()
    loc = F.local_variable(np.zeros(2, np.float32), name="loc")
    assert tf.get_collection(tf.GraphKeys.LOCAL_VARIABLES) == [loc]
    assert loc not in tf.global_variables() and loc not in tf.trainable_variables()
    F.add_model_variable(loc)
    F.add_model_variable(loc)
    assert _names(F.get_model_variables()) == ["net/m", "net/frozen", "loc"]


def test_finding_variables_by_scope_name_and_suffix():
    x = tf.placeholder(tf.float32, [None, 3])
    with tf.variable_scope("enc"):
        L.fully_connected(x, 2, scope="fc1")
        L.fully_connected(x, 2, scope="fc2")
    L.fully_connected(x, 2, scope="head")
    assert _names(F.get_variables("enc")) == ["enc/fc1/weights", "enc/fc1/biases",
                                               "enc/fc2/weights", "enc/fc2/biases"]
    with tf.variable_scope("enc") as sc:
        pass
    assert F.get_variables(sc) == F.get_variables("enc")
    assert _names(F.get_variables_by_name("biases")) == ["enc/fc1/biases", "enc/fc2/biases",
                                                          "head/biases"]
    assert _names(F.get_variables_by_suffix("weights", "enc/fc2")) == ["enc/fc2/weights"]
    assert _names(F.get_trainable_variables("head")) == ["head/weights", "head/biases"]
    assert F.get_unique_variable("head/weights").op.name == "head/weights"
    with pytest.raises(ValueError, match="Couldn't find"):
        F.get_unique_variable("nothing")
    with pytest.raises(ValueError, match="uniquely"):
        F.get_unique_variable("enc/fc")
    assert _names(F.get_variables_to_restore(exclude=["enc/fc1", "head"])) == [
        "enc/fc2/weights", "enc/fc2/biases"]
    assert _names(F.get_variables_to_restore(include=["head"], exclude=["head/biases"])) == [
        "head/weights"]
    assert _names(F.filter_variables(tf.global_variables(), include_patterns=["fc"],
                                     exclude_patterns=["biases"])) == [
        "enc/fc1/weights", "enc/fc2/weights"]
    assert F.get_variable_full_name(tf.global_variables()[0]) == "enc/fc1/weights"
    with pytest.raises(TypeError, match="exclude"):
        F.get_variables_to_restore(exclude="head")


def test_assign_from_values_and_from_checkpoint(tmp_path):
    a = tf.Variable(np.zeros((2, 2), np.float32), name="a")
    b = tf.Variable(np.zeros(3, np.float32), name="scope/b")
    op, feed = F.assign_from_values({"a": [1.0, 2.0, 3.0, 4.0], "scope/b": [5.0, 6.0, 7.0]})
    fn = F.assign_from_values_fn({"scope/b": np.ones(3)})
    saver = tf.train.Saver({"a": a})
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(op, feed)
        np.testing.assert_array_equal(sess.run(a), [[1, 2], [3, 4]])
        np.testing.assert_array_equal(sess.run(b), [5, 6, 7])
        fn(sess)
        np.testing.assert_array_equal(sess.run(b), [1, 1, 1])
        path = saver.save(sess, str(tmp_path / "ckpt"))
    restore = F.assign_from_checkpoint_fn(path, [a, b], ignore_missing_vars=True)
    assert F.assign_from_checkpoint_fn(path, [b], ignore_missing_vars=True) is None
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        restore(sess)
        np.testing.assert_array_equal(sess.run(a), [[1, 2], [3, 4]])
        np.testing.assert_array_equal(sess.run(b), [0, 0, 0])   # not in the checkpoint
    with pytest.raises(ValueError, match="wasn't found"):
        F.assign_from_values({"zzz": 1.0})
    with pytest.raises(ValueError, match="empty"):
        F.assign_from_checkpoint_fn(path, [])


def test_global_step_helpers():
    assert F.get_global_step() is None
    step = F.get_or_create_global_step()
    assert F.get_or_create_global_step() is step and step.op.name == "global_step"
    assert F.assert_or_get_global_step() is step
    with pytest.raises(TypeError, match="integer"):
        F.assert_or_get_global_step(global_step_tensor=tf.constant(1.0))


# -- HParams --------------------------------------------------------------------------------------
def test_hparams_parse_cast_json_and_errors():
    H = tf.contrib.training.HParams
    hp = H(learning_rate=0.1, layers=[64, 32], name="mlp", use_bn=True, steps=100)
    assert hp.learning_rate == 0.1 and hp.layers == [64, 32] and "steps" in hp
    hp.parse("learning_rate=0.5,layers=[8, 4,2],name=cnn,use_bn=false,steps=7")
    assert hp.values() == {"learning_rate": 0.5, "layers": [8, 4, 2], "name": "cnn",
                           "use_bn": False, "steps": 7}
    hp.set_hparam("learning_rate", 3)                 # int -> float is allowed
    assert hp.learning_rate == 3.0 and isinstance(hp.learning_rate, float)
    hp.parse_json('{"steps": 9, "layers": [1]}')
    assert hp.steps == 9 and hp.layers == [1]
    assert H(**hp.values()).to_json(sort_keys=True) == hp.to_json(sort_keys=True)
    hp.add_hparam("dropout", 0.5)
    assert hp.get("dropout") == 0.5 and hp.get("missing", 3) == 3
    hp.del_hparam("dropout")
    assert "dropout" not in hp
    assert str(hp).startswith("[('layers', [1])")
    for bad, msg in (("steps=1.5", "Could not parse"), ("nope=1", "Unknown hyperparameter"),
                     ("steps=1,steps=2", "Multiple assignments"),
                     ("steps", "Malformed"), ("layers=3", "Must pass a list")):
        with pytest.raises(ValueError, match=msg):
            hp.parse(bad)
    with pytest.raises(ValueError, match="Could not cast"):
        hp.set_hparam("steps", 2.5)
    with pytest.raises(ValueError, match="Could not cast"):
        hp.set_hparam("name", 3)
    with pytest.raises(ValueError, match="reserved"):
        hp.add_hparam("steps", 1)
    with pytest.raises(KeyError):
        hp.set_hparam("unknown", 1)
    with pytest.raises(ValueError, match="incompatible"):
        hp.get("steps", "text")


# -- training -------------------------------------------------------------------------------------
def test_create_train_op_runs_updates_counts_steps_and_collects_itself():
    tf.set_random_seed(7)   # the same initial weights every run
    x = tf.constant(np.arange(12, dtype=np.float32).reshape(4, 3))
    h = L.fully_connected(x, 2, normalizer_fn=L.batch_norm, activation_fn=None)
    y = L.fully_connected(h, 1, activation_fn=None, weights_initializer=tf.ones_initializer())
    loss = tf.reduce_mean(tf.square(y - x[:, :1] / 10))
    train = tf.contrib.training.create_train_op(loss, tf.train.GradientDescentOptimizer(0.1))
    slim_train = tf.contrib.slim.learning.create_train_op(
        loss, tf.train.GradientDescentOptimizer(0.1), global_step=None,
        clip_gradient_norm=1e-3)
    collected = tf.get_collection(tf.GraphKeys.TRAIN_OP)   # with the optimizers' own ops
    assert train in collected and slim_train in collected
    assert collected.index(train) < collected.index(slim_train)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        w0 = sess.run("fully_connected_1/weights:0")
        sess.run(train)
        mm = sess.run("fully_connected/BatchNorm/moving_mean:0")
        assert sess.run(tf.train.get_global_step()) == 1
        w1 = sess.run("fully_connected_1/weights:0")
        sess.run(slim_train)
        w2 = sess.run("fully_connected_1/weights:0")
        assert sess.run(tf.train.get_global_step()) == 1
    assert np.abs(mm).max() > 0 and not np.allclose(w0, w1)
    # each gradient clipped to norm 1e-3, times the learning rate 0.1 (the difference of two
    # float32 weights near 0.6 is exact to about an ulp of them each)
    ulp = np.spacing(np.abs(w1).max())
    assert np.linalg.norm(w2 - w1) <= 1e-4 + 2 * ulp * np.sqrt(w1.size)


# -- losses ---------------------------------------------------------------------------------------
def test_contrib_losses_take_predictions_first_and_collect_the_result():
    Lo = tf.contrib.losses
    pred = tf.constant([[0.5, 1.0], [2.0, 0.0]])
    lab = tf.constant([[1.0, 1.0], [1.0, 0.0]])
    mse = Lo.mean_squared_error(pred, lab)
    ad = Lo.absolute_difference(pred, lab, weights=[[1.0], [0.0]])
    logits = tf.constant([[2.0, 0.0, -1.0], [0.0, 1.0, 0.0]])
    sce = Lo.softmax_cross_entropy(logits, tf.constant([[1.0, 0, 0], [0, 0, 1.0]]))
    ssce = Lo.sparse_softmax_cross_entropy(logits, tf.constant([0, 2]))
    hinge = Lo.hinge_loss(tf.constant([[0.3], [-2.0]]), tf.constant([[1.0], [0.0]]))
    assert tf.get_collection(tf.GraphKeys.LOSSES) == [mse, ad, sce, ssce]
    total = Lo.get_total_loss()
    with tf.Session() as sess:
        m, a, s, ss, h, t = sess.run([mse, ad, sce, ssce, hinge, total])
    assert m == pytest.approx((0.25 + 0 + 1 + 0) / 4)
    assert a == pytest.approx(0.5 / 2)                  # over the 2 non-zero weights
    lg = np.array([[2.0, 0.0, -1.0], [0.0, 1.0, 0.0]])
    lse = np.log(np.exp(lg).sum(1))
    want = ((lse - lg[[0, 1], [0, 2]]).mean())
    assert s == pytest.approx(want, rel=1e-5) and ss == pytest.approx(want, rel=1e-5)
    np.testing.assert_allclose(h, [[0.7], [0.0]], rtol=1e-6)   # unreduced, not collected
    assert t == pytest.approx(m + a + s + ss, rel=1e-5)


# -- the slim namespace ---------------------------------------------------------------------------
def test_slim_namespace_has_what_slim_programs_use():
    slim = tf.contrib.slim
    for name in ("arg_scope", "add_arg_scope", "conv2d", "fully_connected", "max_pool2d",
                 "avg_pool2d", "flatten", "dropout", "batch_norm", "l2_regularizer",
                 "xavier_initializer", "variance_scaling_initializer", "repeat", "stack",
                 "model_variable", "variable", "get_variables_to_restore",
                 "assign_from_checkpoint_fn", "get_or_create_global_step", "one_hot_encoding",
                 "conv2d_transpose", "separable_conv2d", "softmax", "layer_norm"):
        assert getattr(slim, name) is getattr(tf.contrib.layers, name, None) or \
            getattr(slim, name) is getattr(tf.contrib.framework, name, None), name
    assert slim.losses is tf.contrib.losses and slim.layers is tf.contrib.layers
    assert slim.utils.convert_collection_to_dict is L.utils.convert_collection_to_dict
    assert callable(slim.learning.create_train_op)
