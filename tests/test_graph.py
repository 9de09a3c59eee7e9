"""The graph core: Graph, default graphs, names and scopes, control dependencies, Operation,
Tensor (attributes, overloads, slicing), dtypes and static shapes, as TF1 behaves."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import jitflow as tf
from jitflow.core.shapes import Dimension, TensorShape


# -- default graphs --------------------------------------------------------------------------------
def test_default_graph_and_reset():
    g = tf.get_default_graph()
    assert tf.get_default_graph() is g
    c = tf.constant(1.0)
    assert c.graph is g
    tf.reset_default_graph()
    g2 = tf.get_default_graph()
    assert g2 is not g and g2.get_operations() == []


def test_as_default_nesting():
    g1, g2 = tf.Graph(), tf.Graph()
    outer = tf.get_default_graph()
    with g1.as_default() as entered:
        assert entered is g1 and tf.get_default_graph() is g1
        with g2.as_default():
            assert tf.get_default_graph() is g2
            c = tf.constant(1.0)
        assert tf.get_default_graph() is g1
    assert tf.get_default_graph() is outer
    assert c.graph is g2 and g1.get_operations() == []


def test_reset_default_graph_inside_nested_graph_raises():
    with tf.Graph().as_default():
        with pytest.raises(AssertionError):
            tf.reset_default_graph()


def test_default_graph_is_thread_local_and_threads_see_the_global_default():
    global_g = tf.get_default_graph()
    seen = {}

    def worker():
        seen["graph"] = tf.get_default_graph()

    with tf.Graph().as_default() as mine:
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        assert tf.get_default_graph() is mine
    assert seen["graph"] is global_g


def test_finalize_forbids_new_ops():
    g = tf.Graph()
    with g.as_default():
        tf.constant(1.0)
    g.finalize()
    assert g.finalized
    with g.as_default():
        with pytest.raises(RuntimeError, match="finalized"):
            tf.constant(2.0)
    with pytest.raises(RuntimeError):
        g.add_to_collection("x", 1)


# -- lookup ------------------------------------------------------------------------------------
def test_get_operations_and_lookup_by_name():
    a = tf.constant(1.0, name="a")
    b = tf.add(a, a, name="b")
    g = tf.get_default_graph()
    assert g.get_operations() == [a.op, b.op]
    assert g.get_tensor_by_name("b:0") is b
    assert g.get_operation_by_name("a") is a.op
    assert g.as_graph_element("b") is b.op
    with pytest.raises(KeyError):
        g.get_tensor_by_name("missing:0")
    with pytest.raises(KeyError):
        g.get_tensor_by_name("b:3")
    with pytest.raises(ValueError):
        g.get_tensor_by_name("b")
    with pytest.raises(ValueError):
        g.get_operation_by_name("b:0")
    with pytest.raises(TypeError):
        g.get_tensor_by_name(3)


def test_collections():
    g = tf.get_default_graph()
    tf.add_to_collection("things", 1)
    tf.add_to_collections(["things", "other"], 2)
    assert tf.get_collection("things") == [1, 2] and tf.get_collection("other") == [2]
    assert tf.get_collection("none") == []
    ref = tf.get_collection_ref("things")
    ref.append(3)
    assert tf.get_collection("things") == [1, 2, 3]
    copy = tf.get_collection("things")
    copy.append(4)
    assert len(tf.get_collection("things")) == 3
    assert set(g.get_all_collection_keys()) >= {"things", "other"}
    g.clear_collection("other")
    assert g.get_collection("other") == []
    with tf.name_scope("s"):
        v = tf.constant(1.0, name="v")
    w = tf.constant(1.0, name="w")
    tf.add_to_collection("ts", v)
    tf.add_to_collection("ts", w)
    assert tf.get_collection("ts", scope="s") == [v]


# -- names and scopes ------------------------------------------------------------------------------
def test_unique_names_like_tf1():
    a = tf.constant(1.0)
    x = a + a
    y = a + a
    z = tf.add(a, a)
    n1 = tf.identity(a, name="n")
    n2 = tf.identity(a, name="n")
    # names are unique case-insensitively, as in TF1
    assert (x.name, y.name, z.name) == ("add:0", "add_1:0", "Add_2:0")
    assert (n1.name, n2.name) == ("n:0", "n_1:0")
    assert x.op.name == "add" and x.value_index == 0


def test_name_scope_nesting_and_reentry():
    with tf.name_scope("scope") as s1:
        a = tf.constant(1.0, name="a")
        with tf.name_scope("inner"):
            b = tf.constant(1.0, name="b")
    with tf.name_scope("scope") as s2:
        c = tf.constant(1.0, name="c")
    with tf.name_scope(s1):  # a scope string ending in '/' re-enters exactly
        d = tf.constant(1.0, name="d")
        with tf.name_scope(None):
            e = tf.constant(1.0, name="e")
    assert (s1, s2) == ("scope/", "scope_1/")
    assert (a.name, b.name, c.name) == ("scope/a:0", "scope/inner/b:0", "scope_1/c:0")
    assert d.name == "scope/d:0" and e.name == "e:0"


def test_name_scope_default_name_and_values():
    g = tf.Graph()
    with g.as_default():
        t = tf.constant(1.0)
    with tf.name_scope(None, "default", [t]) as scope:
        assert tf.get_default_graph() is g
        assert scope == "default/"
    with tf.name_scope("given", "default") as scope:
        assert scope == "given/"
    with pytest.raises(ValueError):
        with tf.name_scope("bad name!"):
            pass


def test_get_name_scope():
    g = tf.get_default_graph()
    with tf.name_scope("a"):
        with tf.name_scope("b"):
            assert g.get_name_scope() == "a/b"
    assert g.get_name_scope() == ""


# -- control dependencies, group, no_op, identity --------------------------------------------------
def test_control_dependencies_nested_and_cleared():
    a = tf.constant(1.0, name="a")
    b = tf.constant(2.0, name="b")
    with tf.control_dependencies([a]):
        c = tf.constant(3.0, name="c")
        with tf.control_dependencies([b.op]):
            d = tf.constant(4.0, name="d")
            with tf.control_dependencies(None):
                e = tf.constant(5.0, name="e")
    assert c.op.control_inputs == [a.op]
    assert set(d.op.control_inputs) == {a.op, b.op}
    assert e.op.control_inputs == []
    assert tf.constant(6.0).op.control_inputs == []


def test_control_dependency_not_added_when_an_input_already_depends_on_it():
    a = tf.constant(1.0)
    with tf.control_dependencies([a]):
        b = tf.identity(a)
        c = b * 2.0
    assert b.op.control_inputs == []  # a is already an input
    assert c.op.control_inputs == []  # b was created in the block


def test_control_dependencies_order_execution(backend):
    v = tf.Variable(0.0)
    inc = v.assign_add(1.0)
    with tf.control_dependencies([inc]):
        out = tf.identity(v.read_value())
    with tf.Session() as sess:
        sess.run(v.initializer)
        assert sess.run(out) == 1.0
        assert sess.run(out) == 2.0


def test_group_and_no_op(backend):
    v = tf.Variable(0.0)
    w = tf.Variable(0.0)
    g = tf.group(v.assign(1.0), w.assign(2.0), name="both")
    n = tf.no_op(name="nothing")
    assert g.type == "NoOp" and g.name == "both" and len(g.control_inputs) == 2
    assert n.type == "NoOp" and n.outputs == ()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert sess.run(g) is None
        assert sess.run(n) is None
        assert sess.run([v, w]) == [1.0, 2.0]


def test_identity(backend):
    x = tf.placeholder(tf.int64, [2])
    y = tf.identity(x, name="same")
    assert y.name == "same:0" and y.dtype == tf.int64 and y.op.type == "Identity"
    with tf.Session() as sess:
        out = sess.run(y, {x: [1, 2]})
    np.testing.assert_array_equal(out, [1, 2])
    assert out.dtype == np.int64


# -- Operation and Tensor --------------------------------------------------------------------------
def test_operation_attributes(backend):
    a = tf.constant(1.0, name="a")
    b = tf.placeholder(tf.float32, [None], name="b")
    c = tf.add(a, b, name="c")
    op = c.op
    assert (op.name, op.type) == ("c", "Add")
    assert list(op.inputs) == [a, b] and list(op.outputs) == [c]
    assert op.graph is tf.get_default_graph() and op.control_inputs == []
    # TF1's NodeDef message: inputs name output 0 by its op
    assert op.node_def.name == "c" and list(op.node_def.input) == ["a", "b"]
    assert a.op.get_attr("dtype") == tf.float32
    with pytest.raises(ValueError):
        a.op.get_attr("nope")
    assert "c = Add(a:0, b:0)" in tf.get_default_graph().as_text()
    v = tf.Variable(0.0)
    with tf.Session():
        v.initializer.run()
        v.assign(5.0).op.run()
        assert v.eval() == 5.0


def test_tensor_attributes():
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    assert x.name == "x:0" and x.op.name == "x" and x.dtype == tf.float32
    assert x.shape.as_list() == [None, 3] and x.get_shape().as_list() == [None, 3]
    assert x.shape.ndims == 2 and x.shape[1].value == 3 and x.shape[0].value is None
    assert str(x.shape) == "(?, 3)"
    assert x.graph is tf.get_default_graph()
    u = tf.placeholder(tf.float32)
    assert u.shape.ndims is None
    with pytest.raises(ValueError):
        u.shape.as_list()
    u.set_shape([2, None])
    assert u.shape.as_list() == [2, None]
    with pytest.raises(ValueError):
        u.set_shape([3, 1])
    with pytest.raises(TypeError):
        bool(x)
    with pytest.raises(TypeError):
        iter(x)
    with pytest.raises(TypeError):
        len(x)
    assert x.consumers() == []
    y = x * 2.0
    assert x.consumers() == [y.op]


def test_tensor_eval_with_default_and_explicit_session(backend):
    c = tf.constant([1, 2])
    with pytest.raises(ValueError, match="default session"):
        c.eval()
    with tf.Session():
        np.testing.assert_array_equal(c.eval(), [1, 2])
    s2 = tf.Session()
    np.testing.assert_array_equal(c.eval(session=s2), [1, 2])
    s2.close()


_BINARY = [
    ("__add__", lambda a, b: a + b, "Add", np.add),
    ("__sub__", lambda a, b: a - b, "Sub", np.subtract),
    ("__mul__", lambda a, b: a * b, "Mul", np.multiply),
    ("__truediv__", lambda a, b: a / b, "RealDiv", np.true_divide),
    ("__floordiv__", lambda a, b: a // b, "FloorDiv", np.floor_divide),
    ("__mod__", lambda a, b: a % b, "FloorMod", np.mod),
    ("__pow__", lambda a, b: a ** b, "Pow", np.power),
    ("__lt__", lambda a, b: a < b, "Less", np.less),
    ("__le__", lambda a, b: a <= b, "LessEqual", np.less_equal),
    ("__gt__", lambda a, b: a > b, "Greater", np.greater),
    ("__ge__", lambda a, b: a >= b, "GreaterEqual", np.greater_equal),
]


@pytest.mark.parametrize("name,fn,op_type,ref", _BINARY, ids=[b[0] for b in _BINARY])
def test_binary_operator_overloads(name, fn, op_type, ref, backend):
    va = np.array([1.5, 2.0, 3.0], np.float32)
    vb = np.array([0.5, 4.0, 3.0], np.float32)
    a = tf.placeholder(tf.float32, [3])
    b = tf.placeholder(tf.float32, [3])
    t, r, rr = fn(a, b), fn(a, 2.0), fn(2.0, a)
    assert t.op.type == op_type and r.op.type == op_type
    if name in ("__lt__", "__le__", "__gt__", "__ge__"):
        # Python reflects `2.0 < a` to `a > 2.0`
        flipped = {"Less": "Greater", "LessEqual": "GreaterEqual"}
        flipped.update({v: k for k, v in flipped.items()})
        assert rr.op.type == flipped[op_type]
    else:
        assert rr.op.type == op_type
    with tf.Session() as sess:
        out = sess.run([t, r, rr], {a: va, b: vb})
    np.testing.assert_allclose(out[0], ref(va, vb), rtol=1e-6)
    np.testing.assert_allclose(out[1], ref(va, np.float32(2.0)), rtol=1e-6)
    np.testing.assert_allclose(out[2], ref(np.float32(2.0), va), rtol=1e-6)


def test_unary_logical_and_matmul_overloads(backend):
    va = np.array([[1.0, -2.0], [3.0, -4.0]], np.float32)
    a = tf.placeholder(tf.float32, [2, 2])
    p = tf.placeholder(tf.bool, [2])
    q = tf.placeholder(tf.bool, [2])
    exprs = [-a, abs(a), a @ a, p & q, p | q, p ^ q, ~p]
    assert [e.op.type for e in exprs[:3]] == ["Neg", "Abs", "MatMul"]
    vp, vq = np.array([True, False]), np.array([True, True])
    with tf.Session() as sess:
        out = sess.run(exprs, {a: va, p: vp, q: vq})
    for got, want in zip(out, [-va, np.abs(va), va @ va, vp & vq, vp | vq, vp ^ vq, ~vp]):
        np.testing.assert_allclose(got, want)


def test_numpy_on_the_left_defers_to_tensor(backend):
    a = tf.constant([1.0, 2.0])
    t = np.float32(3.0) * a
    assert isinstance(t, tf.Tensor)
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(t), [3.0, 6.0])


def test_tensor_slicing(backend):
    v = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    x = tf.constant(v)
    parts = [x[0], x[:, 1], x[..., ::-1], x[tf.newaxis, 1, :, 2], x[-1, -1, -1]]
    with tf.Session() as sess:
        out = sess.run(parts)
    for got, want in zip(out, [v[0], v[:, 1], v[..., ::-1], v[None, 1, :, 2], v[-1, -1, -1]]):
        np.testing.assert_array_equal(got, want)
    assert isinstance(out[-1], np.float32)


def test_cross_graph_inputs_are_rejected():
    g = tf.Graph()
    with g.as_default():
        other = tf.constant(1.0)
    mine = tf.constant(2.0)
    with pytest.raises(ValueError):
        tf.add(mine, other)


# -- dtypes ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt,npd", [
    (tf.float16, np.float16), (tf.float32, np.float32), (tf.float64, np.float64),
    (tf.int8, np.int8), (tf.int16, np.int16), (tf.int32, np.int32), (tf.int64, np.int64),
    (tf.uint8, np.uint8), (tf.bool, np.bool_)])
def test_dtypes(dt, npd, backend):
    assert dt.as_numpy_dtype is npd and dt.base_dtype is dt
    assert tf.as_dtype(npd) is dt and tf.as_dtype(np.dtype(npd)) is dt
    assert tf.as_dtype(dt.name) is dt and dt == np.dtype(npd)
    assert dt.is_floating == (np.dtype(npd).kind == "f")
    assert dt.is_integer == (np.dtype(npd).kind in "iu")
    x = tf.placeholder(dt, [2])
    with tf.Session() as sess:
        out = sess.run(tf.identity(x), {x: np.array([1, 0]).astype(npd)})
    assert out.dtype == npd


def test_dtype_aliases_and_errors():
    assert tf.as_dtype("float") is tf.float32 and tf.as_dtype("double") is tf.float64
    assert tf.as_dtype("half") is tf.float16 and tf.as_dtype(float) is tf.float32
    assert tf.as_dtype(int) is tf.int32 and tf.as_dtype(bool) is tf.bool
    assert tf.float32 != tf.float64 and tf.float32 == "float32"
    assert tf.int8.min == -128 and tf.uint8.max == 255 and tf.uint8.is_unsigned
    assert tf.placeholder("float", [1]).dtype is tf.float32
    assert repr(tf.float32) == "tf.float32"
    with pytest.raises(TypeError):
        tf.as_dtype("not_a_type")
    with pytest.raises(TypeError):
        tf.as_dtype(np.complex128)


# -- static shapes ---------------------------------------------------------------------------------
def test_tensor_shape_operations():
    s = TensorShape([None, 3])
    assert s.is_compatible_with([2, 3]) and not s.is_compatible_with([2, 4])
    assert s.merge_with([2, None]).as_list() == [2, 3]
    with pytest.raises(ValueError):
        s.merge_with([2, 4])
    assert not s.is_fully_defined() and TensorShape([2, 3]).num_elements() == 6
    assert s.num_elements() is None
    assert TensorShape(None).ndims is None and TensorShape(None).is_compatible_with([1, 2])
    assert s.concatenate([4]).as_list() == [None, 3, 4]
    assert s == TensorShape([None, 3]) and s != TensorShape([None, 4])
    assert Dimension(3) == 3 and (Dimension(None) == 3) is None
    assert s.with_rank(2) is s
    with pytest.raises(ValueError):
        s.with_rank(3)
    assert str(TensorShape([])) == "()" and str(TensorShape([5])) == "(5,)"
    assert tf.TensorShape([1, None]).as_list() == [1, None]


def test_dimension_arithmetic_propagates_unknown():
    x = tf.placeholder(tf.float32, [None, 2, 3])
    d0, d1, d2 = x.shape
    assert (d1 * d2).value == 6 and (d1 + 1).value == 3 and (10 - d2).value == 7
    assert (d2 // 2).value == 1 and (7 // d2).value == 2 and (d2 % 2).value == 1
    assert (d0 * 2).value is None and (d0 + d1).value is None
    assert (d1 < d2) is True and (d1 >= d2) is False and (d0 < 3) is None
    assert tf.reshape(x, [-1, d1 * d2]).shape.as_list() == [None, 6]
    with pytest.raises(ValueError):
        d1.assert_is_compatible_with(3)


def test_tensor_shape_helpers():
    s = TensorShape([None, 3])
    assert (s + [4]).as_list() == [None, 3, 4] and ([1] + s).as_list() == [1, None, 3]
    s.assert_has_rank(2)
    s.assert_same_rank([1, 2])
    with pytest.raises(ValueError):
        s.assert_has_rank(1)
    with pytest.raises(ValueError):
        s.assert_is_fully_defined()
    with pytest.raises(ValueError):
        s.with_rank_at_least(3)
    assert s.with_rank_at_least(1) is s
    assert TensorShape([2, 3]).most_specific_compatible_shape([2, 4]).as_list() == [2, None]
    assert TensorShape([2]).most_specific_compatible_shape([2, 4]).ndims is None


def test_lists_holding_tensors_are_packed(backend):
    a = tf.constant(1.0)
    b = tf.placeholder(tf.float32, [])
    t = tf.convert_to_tensor([a, b, 3])
    n = tf.convert_to_tensor([[a, 2.0], [3.0, b]])
    m = tf.reduce_mean([a, b])
    assert t.op.type == "Pack" and t.op.name == "packed" and t.shape.as_list() == [3]
    assert n.shape.as_list() == [2, 2] and n.dtype == tf.float32
    with tf.Session() as sess:
        vt, vn, vm = sess.run([t, n, m], {b: 5.0})
    np.testing.assert_array_equal(vt, [1.0, 5.0, 3.0])
    np.testing.assert_array_equal(vn, [[1.0, 2.0], [3.0, 5.0]])
    assert vm == 3.0
    with pytest.raises((TypeError, ValueError)):
        tf.convert_to_tensor([a, tf.constant(1)])


def test_python_float_converts_straight_to_float64_without_float32_rounding(backend):
    x = tf.placeholder(tf.float64, [2])
    y = x * 1.0001
    with tf.Session() as sess:
        out = sess.run(y, {x: [1.0, 2.0]})
    np.testing.assert_array_equal(out, np.array([1.0, 2.0]) * 1.0001)


def test_ndarray_times_variable_is_one_tensor():
    v = tf.Variable([1.0, 2.0])
    z = np.array([2.0, 3.0], dtype=np.float32) * v
    assert isinstance(z, tf.Tensor)
    assert z.shape.as_list() == [2]


@tf.RegisterGradient("TimesThreeForTest")
def _times_three(op, grad):
    return [grad * 3.0]


def test_gradient_override_map_selects_the_registered_gradient(backend):
    a = tf.placeholder(tf.float32, [])
    with tf.get_default_graph().gradient_override_map({"Identity": "TimesThreeForTest"}):
        b = tf.identity(a)
    c = tf.identity(a)
    gb, gc = tf.gradients(b, a)[0], tf.gradients(c, a)[0]
    with tf.Session() as sess:
        assert sess.run([gb, gc], {a: 1.0}) == [3.0, 1.0]
