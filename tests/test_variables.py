"""Variables, variable scopes, get_variable and initializers, as TF1 behaves."""
from __future__ import annotations

import numpy as np
import pytest

import jitflow as tf


# -- tf.Variable ---------------------------------------------------------------------------------
def test_variable_names_and_ops():
    v = tf.Variable(1.0)
    w = tf.Variable([1, 2], name="w")
    w2 = tf.Variable([1, 2], name="w")
    with tf.name_scope("layer"):
        lw = tf.Variable(tf.zeros([2, 3]), name="w")
    assert (v.name, w.name, w2.name, lw.name) == ("Variable:0", "w:0", "w_1:0", "layer/w:0")
    assert v.op.type == "VariableV2" and v.op.name == "Variable"
    assert w.initializer.type == "Assign" and w.initializer.name == "w/Assign"
    assert w.value().name == "w/read:0"
    assert lw.shape.as_list() == [2, 3] and lw.get_shape().as_list() == [2, 3]
    assert w.dtype == tf.int32 and lw.dtype == tf.float32
    assert w.graph is tf.get_default_graph()


def test_variable_collections_and_trainable():
    a = tf.Variable(1.0, name="a")
    b = tf.Variable(2.0, name="b", trainable=False)
    c = tf.Variable(3.0, name="c", collections=[tf.GraphKeys.LOCAL_VARIABLES], trainable=False)
    assert a.trainable and not b.trainable
    assert tf.global_variables() == [a, b]
    assert tf.trainable_variables() == [a]
    assert tf.local_variables() == [c]
    assert tf.get_collection(tf.GraphKeys.TRAINABLE_VARIABLES) == [a]
    with tf.variable_scope("s"):
        d = tf.Variable(4.0, name="d")
    assert tf.global_variables(scope="s") == [d]


def test_variable_needs_initial_value_with_shape():
    with pytest.raises(ValueError, match="initial_value must be specified"):
        tf.Variable()
    with pytest.raises(ValueError, match="shape"):
        tf.Variable(tf.placeholder(tf.float32, [None]))
    v = tf.Variable(tf.placeholder_with_default([1.0, 2.0], [None]), validate_shape=False)
    assert v.shape.ndims is None


def test_initialize_run_and_read(backend):
    w = tf.Variable([[1.0, 2.0]], name="w")
    y = w * 2.0
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        out = sess.run(y)
        np.testing.assert_array_equal(out, [[2.0, 4.0]])
        np.testing.assert_array_equal(w.eval(), [[1.0, 2.0]])
        np.testing.assert_array_equal(sess.run(w), [[1.0, 2.0]])
        assert sess.run(w).dtype == np.float32


def test_uninitialized_variable_raises_failed_precondition_naming_it(backend):
    w = tf.Variable(1.0, name="weights")
    with tf.Session() as sess:
        with pytest.raises(tf.errors.FailedPreconditionError, match="weights"):
            sess.run(w + 1.0)
        names = sess.run(tf.report_uninitialized_variables())
        assert list(names) == [b"weights"]
        assert not sess.run(tf.is_variable_initialized(w))
        sess.run(w.initializer)
        assert sess.run(tf.is_variable_initialized(w))
        assert len(sess.run(tf.report_uninitialized_variables())) == 0


def test_assign_ops_return_the_new_value(backend):
    v = tf.Variable(10.0)
    a, add, sub = v.assign(3.0), v.assign_add(2.0), v.assign_sub(1.5)
    f_add = tf.assign_add(v, 1.0)
    no_read = v.assign(0.0, read_value=False)
    assert isinstance(no_read, tf.Operation)
    with tf.Session() as sess:
        sess.run(v.initializer)
        assert sess.run(a) == 3.0
        assert sess.run(add) == 5.0
        assert sess.run(sub) == 3.5
        assert sess.run(f_add) == 4.5
        assert sess.run(v) == 4.5
        assert sess.run(no_read) is None
        assert sess.run(v) == 0.0


def test_assign_type_and_shape_checks():
    v = tf.Variable([1.0, 2.0])
    with pytest.raises(ValueError):
        v.assign([1.0, 2.0, 3.0])
    with pytest.raises((TypeError, ValueError)):
        tf.assign(v, tf.constant([1, 2]))
    with pytest.raises(TypeError):
        tf.assign(tf.constant(1.0), 2.0)


def test_assign_shape_mismatch_at_run_time(backend):
    v = tf.Variable([1.0, 2.0])
    p = tf.placeholder(tf.float32, [None])
    with tf.Session() as sess:
        sess.run(v.initializer)
        with pytest.raises(tf.errors.InvalidArgumentError):
            sess.run(v.assign(p), {p: [1.0, 2.0, 3.0]})
        with pytest.raises(tf.errors.InvalidArgumentError):
            sess.run(v.assign_add(p), {p: [1.0, 2.0, 3.0]})
        np.testing.assert_array_equal(sess.run(v), [1.0, 2.0])


def test_read_value_is_ordered_by_control_dependencies(backend):
    v = tf.Variable(1.0)
    inc = v.assign_add(1.0)
    with tf.control_dependencies([inc]):
        after = v.read_value()
    with tf.Session() as sess:
        sess.run(v.initializer)
        assert sess.run(after) == 2.0
        assert sess.run(after) == 3.0


def test_initialized_value_chains_initializers(backend):
    a = tf.Variable(tf.constant(3.0), name="a")
    b = tf.Variable(a.initialized_value() * 2.0, name="b")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert sess.run(b) == 6.0
        sess.run(a.assign(10.0))
        sess.run(b.initializer)  # a is initialized now: b reads its current value
        assert sess.run(b) == 20.0


def test_load_and_eval(backend):
    v = tf.Variable([0.0, 0.0])
    with tf.Session() as sess:
        v.load([3.0, 4.0], sess)
        np.testing.assert_array_equal(v.eval(session=sess), [3.0, 4.0])
        with pytest.raises(ValueError):
            v.load([1.0, 2.0, 3.0], sess)


def test_variable_operators_and_slicing(backend):
    v = tf.Variable([[1.0, 2.0], [3.0, 4.0]])
    exprs = [v + 1.0, 2.0 * v, v - v, -v, v[1], v[:, ::-1], v / 2.0]
    with tf.Session() as sess:
        sess.run(v.initializer)
        out = sess.run(exprs)
    m = np.array([[1.0, 2.0], [3.0, 4.0]])
    for got, want in zip(out, [m + 1, 2 * m, m - m, -m, m[1], m[:, ::-1], m / 2]):
        np.testing.assert_array_equal(got, want)


def test_two_sessions_keep_separate_values(backend):
    v = tf.Variable(0.0)
    inc = v.assign_add(1.0)
    with tf.Session() as s1, tf.Session() as s2:
        s1.run(v.initializer)
        s2.run(v.initializer)
        s1.run(inc)
        s1.run(inc)
        s2.run(inc)
        assert s1.run(v) == 2.0 and s2.run(v) == 1.0


def test_local_variables_initializer(backend):
    c = tf.Variable(5, collections=[tf.GraphKeys.LOCAL_VARIABLES], trainable=False)
    init = tf.local_variables_initializer()
    assert init.type == "NoOp"
    assert tf.initializers.local_variables is tf.local_variables_initializer
    assert tf.initializers.global_variables is tf.global_variables_initializer
    with tf.Session() as sess:
        sess.run(init)
        assert sess.run(c) == 5


# -- variable_scope and get_variable -----------------------------------------------------------
def test_get_variable_names_and_default_glorot_uniform(backend):
    with tf.variable_scope("layer"):
        w = tf.get_variable("w", [30, 20])
        b = tf.get_variable("b", [20], initializer=tf.zeros_initializer())
        i = tf.get_variable("i", [2], dtype=tf.int32)
    assert (w.name, b.name, i.name) == ("layer/w:0", "layer/b:0", "layer/i:0")
    assert w.initializer.name.startswith("layer/w/")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        vw, vb, vi = sess.run([w, b, i])
    limit = np.sqrt(6.0 / 50.0)
    assert np.abs(vw).max() <= limit and np.abs(vw).max() > 0.8 * limit
    assert abs(vw.std() - limit / np.sqrt(3)) < 0.02
    np.testing.assert_array_equal(vb, np.zeros(20))
    np.testing.assert_array_equal(vi, [0, 0])


def test_get_variable_reuse_errors():
    with tf.variable_scope("layer"):
        tf.get_variable("w", [2])
    with pytest.raises(ValueError, match="Variable layer/w already exists, disallowed. Did you "
                                         "mean to set reuse=True"):
        with tf.variable_scope("layer"):
            tf.get_variable("w", [2])
    with pytest.raises(ValueError, match="Variable layer/v does not exist, or was not created "
                                         "with tf.get_variable()"):
        with tf.variable_scope("layer", reuse=True):
            tf.get_variable("v", [2])
    with pytest.raises(ValueError, match="Trying to share variable layer/w"):
        with tf.variable_scope("layer", reuse=True):
            tf.get_variable("w", [3])
    with pytest.raises(ValueError, match="dtype"):
        with tf.variable_scope("layer", reuse=True):
            tf.get_variable("w", [2], dtype=tf.float64)


def test_reuse_true_auto_reuse_and_inheritance():
    with tf.variable_scope("a"):
        w = tf.get_variable("w", [1])
    with tf.variable_scope("a", reuse=True):
        assert tf.get_variable("w", [1]) is w
        assert tf.get_variable("w") is w
        with tf.variable_scope("inner", reuse=False):  # False inherits True
            assert tf.get_variable_scope().reuse
    for _ in range(2):
        with tf.variable_scope("auto", reuse=tf.AUTO_REUSE):
            x = tf.get_variable("x", [2])
    assert x is tf.global_variables()[-1] and x.name == "auto/x:0"
    assert len(tf.global_variables()) == 2


def test_reuse_variables_and_get_variable_scope():
    with tf.variable_scope("m") as scope:
        assert tf.get_variable_scope() is scope and scope.name == "m"
        w = tf.get_variable("w", [1])
        scope.reuse_variables()
        assert tf.get_variable("w") is w
    assert tf.get_variable_scope().name == "" and not tf.get_variable_scope().reuse


def test_reentering_scope_opens_a_new_name_scope_but_keeps_variable_names():
    with tf.variable_scope("scope") as sc:
        v = tf.get_variable("v", [1])
        op1 = tf.add(v, 1.0)
    with tf.variable_scope(sc, reuse=True):
        v2 = tf.get_variable("v", [1])
        op2 = tf.add(v2, 1.0)
    with tf.variable_scope("scope", reuse=True):
        op3 = tf.add(v2, 1.0)
    assert v2 is v
    assert op1.name == "scope/Add:0"
    assert op2.name == "scope_1/Add:0"
    assert op3.name == "scope_2/Add:0"
    assert sc.original_name_scope == "scope/"


def test_nested_scopes_and_scope_object_from_another_place():
    with tf.variable_scope("outer"):
        with tf.variable_scope("inner") as inner:
            w = tf.get_variable("w", [1])
            t = tf.constant(1.0, name="t")
    assert w.name == "outer/inner/w:0" and t.name == "outer/inner/t:0"
    with tf.variable_scope("elsewhere"):
        with tf.variable_scope(inner, reuse=True):
            assert tf.get_variable_scope().name == "outer/inner"
            assert tf.get_variable("w") is w
            c = tf.constant(2.0, name="c")
    assert c.name == "elsewhere/inner/c:0"


def test_variable_scope_inside_name_scope():
    with tf.name_scope("ns"):
        with tf.variable_scope("vs"):
            v = tf.get_variable("v", [1])
            t = tf.Variable(1.0, name="t")
            c = tf.constant(0.0, name="c")
    assert v.name == "vs/v:0"
    assert t.name == "ns/vs/t:0" and c.name == "ns/vs/c:0"


def test_default_name_is_made_unique_and_reset_on_reentry():
    def dense():
        with tf.variable_scope(None, default_name="dense"):
            return tf.get_variable("k", [1])
    with tf.variable_scope("net"):
        a, b = dense(), dense()
    with tf.variable_scope("net", reuse=True):
        c, d = dense(), dense()
    assert (a.name, b.name) == ("net/dense/k:0", "net/dense_1/k:0")
    assert c is a and d is b
    for reuse in (True, tf.AUTO_REUSE):
        with pytest.raises(ValueError, match="reuse=True cannot be used without a "
                                             "name_or_scope"):
            tf.variable_scope(None, default_name="x", reuse=reuse)
    with pytest.raises(TypeError):
        tf.variable_scope(None)


def test_scope_initializer_and_dtype_defaults(backend):
    with tf.variable_scope("s", initializer=tf.constant_initializer(0.5), dtype=tf.float64):
        v = tf.get_variable("v", [2])
        with tf.variable_scope("t"):
            u = tf.get_variable("u", [1], initializer=tf.ones_initializer())
    assert v.dtype == tf.float64 and u.dtype == tf.float64
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_array_equal(sess.run(v), [0.5, 0.5])
        np.testing.assert_array_equal(sess.run(u), [1.0])


def test_get_variable_from_a_value_and_options(backend):
    v = tf.get_variable("v", initializer=tf.constant([1.0, 2.0]))
    n = tf.get_variable("n", initializer=np.array([3, 4], np.int32), trainable=False)
    assert v.shape.as_list() == [2] and n.dtype == tf.int32
    assert v in tf.trainable_variables() and n not in tf.trainable_variables()
    with pytest.raises(ValueError, match="do not specify shape"):
        tf.get_variable("bad", [2], initializer=tf.constant([1.0, 2.0]))
    with pytest.raises(ValueError, match="fully defined"):
        tf.get_variable("unknown", [None, 2])
    col = tf.get_variable("c", [1], collections=["mine"])
    assert tf.get_collection("mine") == [col] and col not in tf.global_variables()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_array_equal(sess.run(v), [1.0, 2.0])
        np.testing.assert_array_equal(sess.run(n), [3, 4])


def test_regularizer_and_custom_getter(backend):
    def reg(v):
        return tf.reduce_sum(v * v)

    calls = []

    def getter(next_getter, name, *args, **kwargs):
        calls.append(name)
        return next_getter(name, *args, **kwargs)

    with tf.variable_scope("r", regularizer=reg, custom_getter=getter):
        v = tf.get_variable("v", initializer=tf.constant([1.0, 2.0]))
    losses = tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)
    assert calls == ["r/v"] and len(losses) == 1
    with tf.Session() as sess:
        sess.run(v.initializer)
        assert sess.run(losses[0]) == 5.0


def test_scopes_are_per_graph():
    g = tf.Graph()
    with tf.variable_scope("outer"):
        with g.as_default():
            assert tf.get_variable_scope().name == ""
            w = tf.get_variable("w", [1])
    assert w.name == "w:0" and w.graph is g


# -- initializers ---------------------------------------------------------------------------------
def _init_value(init, shape, dtype=tf.float32):
    t = init(shape, dtype=dtype)
    with tf.Session() as sess:
        return sess.run(t)


def test_constant_zeros_ones_initializers(backend):
    np.testing.assert_array_equal(_init_value(tf.zeros_initializer(), [2]), [0, 0])
    np.testing.assert_array_equal(_init_value(tf.ones_initializer(), [2], tf.int32), [1, 1])
    np.testing.assert_array_equal(_init_value(tf.constant_initializer([1, 2, 3, 4]), [2, 2]),
                                  [[1, 2], [3, 4]])
    np.testing.assert_array_equal(_init_value(tf.constant_initializer(7), [3]), [7, 7, 7])
    with pytest.raises(TypeError):
        tf.constant_initializer([1, 2], verify_shape=True)([3])


def test_random_initializer_statistics(backend):
    n = _init_value(tf.random_normal_initializer(1.0, 0.5, seed=1), [20000])
    u = _init_value(tf.random_uniform_initializer(-1.0, 2.0, seed=1), [20000])
    t = _init_value(tf.truncated_normal_initializer(0.0, 1.0, seed=1), [20000])
    assert abs(n.mean() - 1.0) < 0.03 and abs(n.std() - 0.5) < 0.02
    assert u.min() >= -1.0 and u.max() < 2.0 and abs(u.mean() - 0.5) < 0.05
    assert np.abs(t).max() <= 2.0


def test_variance_scaling_and_glorot(backend):
    shape = [200, 100]
    fan_avg = 150.0
    gu = _init_value(tf.glorot_uniform_initializer(seed=2), shape)
    gn = _init_value(tf.glorot_normal_initializer(seed=2), shape)
    vs = _init_value(tf.variance_scaling_initializer(2.0, "fan_in", "uniform", seed=2), shape)
    vn = _init_value(tf.variance_scaling_initializer(1.0, "fan_out", "untruncated_normal",
                                                     seed=2), shape)
    assert np.abs(gu).max() <= np.sqrt(6.0 / (2 * fan_avg))
    assert abs(gn.std() - np.sqrt(1.0 / fan_avg)) < 0.003
    assert np.abs(gn).max() <= 2 * np.sqrt(1.0 / fan_avg) / 0.87962566103423978 + 1e-6
    assert np.abs(vs).max() <= np.sqrt(3 * 2.0 / 200) and vs.std() > 0.05
    assert abs(vn.std() - np.sqrt(1.0 / 100)) < 0.003
    with pytest.raises(ValueError):
        tf.variance_scaling_initializer(mode="fan_sideways")
    assert tf.initializers.glorot_uniform is tf.glorot_uniform_initializer


def test_orthogonal_initializer(backend):
    q = _init_value(tf.orthogonal_initializer(gain=2.0, seed=3), [3, 5])
    np.testing.assert_allclose(q @ q.T, 4.0 * np.eye(3), atol=1e-5)
    q2 = _init_value(tf.orthogonal_initializer(seed=3), [6, 4], dtype=tf.float64)
    np.testing.assert_allclose(q2.T @ q2, np.eye(4), atol=1e-10)
    with pytest.raises(ValueError):
        tf.orthogonal_initializer()([3])


def test_initializer_class_passed_to_get_variable(backend):
    v = tf.get_variable("v", [2], initializer=tf.ones_initializer)
    with tf.Session() as sess:
        sess.run(v.initializer)
        np.testing.assert_array_equal(sess.run(v), [1.0, 1.0])


def test_scatter_update_add_sub(backend):
    v = tf.Variable(np.zeros((4, 2), np.float32))
    i = tf.placeholder(tf.int32, [None])
    up = tf.scatter_update(v, [1, 3], [[1.0, 2.0], [3.0, 4.0]])
    add = tf.scatter_add(v, i, tf.ones([2, 2]))
    sub = tf.scatter_sub(v, 0, [5.0, 5.0])
    assert up.shape.as_list() == [4, 2] and up.op.type == "ScatterUpdate"
    with tf.Session() as sess:
        sess.run(v.initializer)
        np.testing.assert_array_equal(sess.run(up), [[0, 0], [1, 2], [0, 0], [3, 4]])
        np.testing.assert_array_equal(sess.run(add, {i: [1, 1]}),
                                      [[0, 0], [3, 4], [0, 0], [3, 4]])
        np.testing.assert_array_equal(sess.run(sub)[0], [-5, -5])
        with pytest.raises(tf.errors.InvalidArgumentError, match="is not in \\[0, 4\\)"):
            sess.run(add, {i: [4, 0]})
        np.testing.assert_array_equal(sess.run(v)[:2], [[-5, -5], [3, 4]])
    with pytest.raises(ValueError):
        tf.scatter_update(v, [0], [[1.0, 2.0, 3.0]])
    with pytest.raises(TypeError):
        tf.scatter_update(tf.constant([1.0]), [0], [2.0])


def test_basics_example_runs():
    """examples/basics.py: shared variables, re-entered scope names, feeds skipping updates."""
    import os
    import subprocess
    import sys
    path = os.path.join(os.path.dirname(__file__), "..", "examples", "basics.py")
    env = dict(os.environ, JITFLOW_BACKEND="interpreter")
    proc = subprocess.run([sys.executable, path], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "variables: ['layer/w:0', 'layer/b:0', 'total:0']" in out
    assert "layer_1/add" in out
    assert "accumulated: 30.0" in out and "total is still 30.0" in out


def test_variable_scope_without_name_scope_and_with_values():
    with tf.variable_scope("a", auxiliary_name_scope=False):
        w = tf.get_variable("w", [1])
        c = tf.constant(1.0, name="c")
    assert w.name == "a/w:0" and c.name == "c:0"
    g = tf.Graph()
    with g.as_default():
        t = tf.constant(1.0)
    with tf.variable_scope("v", values=[t]):
        e = tf.constant(2.0, name="e")
        v = tf.get_variable("k", [1])
    assert e.graph is g and e.name == "v/e:0" and v.graph is g and v.name == "v/k:0"
    assert tf.get_default_graph() is not g


def test_sliced_variable_assign(backend):
    v = tf.Variable(np.zeros((3, 4), np.float32))
    i = tf.placeholder(tf.int32, [])
    a = v[1:3, ::2].assign([[1.0, 2.0], [3.0, 4.0]])
    b = v[i].assign(tf.ones([4]))
    c = v[:, -1].assign(tf.constant([7.0, 8.0, 9.0]))
    assert a.op.type == "StridedSliceAssign" and a.shape.as_list() == [3, 4]
    want = np.zeros((3, 4), np.float32)
    with tf.Session() as sess:
        sess.run(v.initializer)
        want[1:3, ::2] = [[1, 2], [3, 4]]
        np.testing.assert_array_equal(sess.run(a), want)
        want[2] = 1
        np.testing.assert_array_equal(sess.run(b, {i: 2}), want)
        want[:, -1] = [7, 8, 9]
        np.testing.assert_array_equal(sess.run(c), want)
        np.testing.assert_array_equal(sess.run(v), want)
        d = v[i:].assign(tf.zeros([2, 4]))
        with pytest.raises(tf.errors.InvalidArgumentError, match="does not match"):
            sess.run(d, {i: 0})
        np.testing.assert_array_equal(sess.run(v), want)
    with pytest.raises(ValueError, match="does not match"):
        v[0].assign([1.0, 2.0])
    assert not hasattr((v + 1.0)[0], "assign")
