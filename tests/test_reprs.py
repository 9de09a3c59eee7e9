"""How graph objects print, as TF1 prints them: tensors, operations (their NodeDef in text
format), variables, shapes, dimensions and dtypes."""
from __future__ import annotations

import pytest

import jitflow as tf


def _build(t):
    """The same small graph in jitflow or tf.compat.v1."""
    x = t.placeholder(t.float32, [None], name="x")
    u = t.placeholder(t.float32, name="u")
    a = t.constant([1.0, 2.0], name="a")
    s = t.constant(["a", "bc"], name="s")
    i = t.constant(3, name="i")
    y = t.multiply(x, 2.0, name="y")
    w = t.Variable(t.zeros([3, 1]), name="w")
    m = t.matmul(t.ones([2, 3]), w, name="mm")
    c = t.constant(1.0, name="c1")
    with t.control_dependencies([w.initializer]):
        d = t.identity(c, name="d")
    return dict(x=x, u=u, a=a, s=s, i=i, y=y, w=w, m=m, d=d)


def test_tensor_str_and_repr():
    g = _build(tf)
    assert str(g["y"]) == 'Tensor("y:0", shape=(?,), dtype=float32)'
    assert repr(g["y"]) == "<tf.Tensor 'y:0' shape=(?,) dtype=float32>"
    assert str(g["u"]) == 'Tensor("u:0", dtype=float32)'      # unknown rank: no shape
    assert repr(g["u"]) == "<tf.Tensor 'u:0' shape=<unknown> dtype=float32>"
    assert str(g["m"]) == 'Tensor("mm:0", shape=(2, 1), dtype=float32)'
    assert str(g["i"]) == 'Tensor("i:0", shape=(), dtype=int32)'
    assert str(g["s"]) == 'Tensor("s:0", shape=(2,), dtype=string)'
    assert str(g["w"]) == repr(g["w"]) == "<tf.Variable 'w:0' shape=(3, 1) dtype=float32_ref>"


def test_operation_str_is_its_node_def_text():
    g = _build(tf)
    assert repr(g["y"].op) == "<tf.Operation 'y' type=Mul>"
    assert str(g["y"].op) == (
        'name: "y"\nop: "Mul"\ninput: "x"\ninput: "y/y"\n'
        'attr {\n  key: "T"\n  value {\n    type: DT_FLOAT\n  }\n}\n')
    assert str(g["d"].op) == (
        'name: "d"\nop: "Identity"\ninput: "c1"\ninput: "^w/Assign"\n'
        'attr {\n  key: "T"\n  value {\n    type: DT_FLOAT\n  }\n}\n')
    text = str(g["x"].op)
    assert text.startswith('name: "x"\nop: "Placeholder"\n') and "size: -1" in text
    assert 'tensor_content: "\\000\\000\\200?\\000\\000\\000@"' in str(g["a"].op)  # 1.0, 2.0
    assert g["y"].op.node_def.name == "y" and list(g["y"].op.node_def.input) == ["x", "y/y"]
    # a variable's initializer and read are colocated with it
    assert g["w"].initializer.get_attr("_class") == [b"loc:@w"]
    assert g["w"].initializer.colocation_groups() == [b"loc:@w"]
    assert g["x"].op.colocation_groups() == [b"loc:@x"]
    assert 's: "loc:@w"' in str(g["w"].initializer)


# attributes TF 2.x added after TF 1.15, whose attribute sets jitflow writes (so that TF 1.15
# reads its GraphDefs): new attributes of op definitions, and the mark TF 2 puts on the ops a
# control_dependencies block names
_TF2_ATTRS = {"MatMul": ("grad_a", "grad_b")}
_TF2_MARKS = ("_has_manual_control_dependencies",)


@pytest.fixture
def tf1():
    """tf.compat.v1 in TF1 mode (`disable_v2_behavior`: reference variables, TF1's shapes and
    control dependencies), as TF1 programs run; TF 2's defaults again afterwards."""
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    tf1.disable_v2_behavior()
    yield tf1
    tf1.enable_v2_behavior()


def _tf1_graph(tf1):
    with tf1.Graph().as_default() as g1:
        built = _build(tf1)
    return g1, built


@pytest.mark.parametrize("name", ["x", "u", "a", "s", "i", "y", "w", "w/Assign", "w/read", "mm",
                                  "d"])
def test_operation_str_matches_tensorflow(name, tf1):
    g1, _ = _tf1_graph(tf1)
    theirs = g1.get_operation_by_name(name)
    _build(tf)
    ours = tf.get_default_graph().get_operation_by_name(name)
    assert repr(ours) == repr(theirs)
    extra = _TF2_ATTRS.get(theirs.type, ()) + tuple(
        a for a in _TF2_MARKS if a in theirs.node_def.attr)
    if not extra:
        assert str(ours) == str(theirs)
    else:   # the same once TF 2's defaulted attributes are added to ours
        assert not set(extra) & set(ours.node_def.attr)
        node = type(theirs.node_def).FromString(ours.node_def.SerializeToString())
        for attr in extra:
            node.attr[attr].CopyFrom(theirs.node_def.attr[attr])
        assert str(node) == str(theirs)


def test_tensor_and_variable_reprs_match_tensorflow(tf1):
    _, theirs = _tf1_graph(tf1)
    ours = _build(tf)
    for k in ours:
        assert (str(ours[k]), repr(ours[k])) == (str(theirs[k]), repr(theirs[k])), k


def test_shape_dimension_and_dtype_reprs():
    s = tf.TensorShape([None, 3])
    assert (str(s), repr(s)) == ("(?, 3)", "TensorShape([Dimension(None), Dimension(3)])")
    assert (str(tf.TensorShape([4])), repr(tf.TensorShape([4]))) == \
        ("(4,)", "TensorShape([Dimension(4)])")
    assert (str(tf.TensorShape([])), repr(tf.TensorShape([]))) == ("()", "TensorShape([])")
    assert (str(tf.TensorShape(None)), repr(tf.TensorShape(None))) == \
        ("<unknown>", "TensorShape(None)")
    assert (str(tf.Dimension(3)), repr(tf.Dimension(3))) == ("3", "Dimension(3)")
    assert (str(tf.Dimension(None)), repr(tf.Dimension(None))) == ("?", "Dimension(None)")
    assert (str(tf.float32), repr(tf.float32)) == ("<dtype: 'float32'>", "tf.float32")
    assert (str(tf.string), repr(tf.bool)) == ("<dtype: 'string'>", "tf.bool")


def test_shape_dimension_and_dtype_reprs_match_tensorflow(tf1):
    for dims in ([None, 3], [4], [], None):
        ours, theirs = tf.TensorShape(dims), tf1.TensorShape(dims)
        assert (str(ours), repr(ours)) == (str(theirs), repr(theirs))
    for v in (3, None):
        assert repr(tf.Dimension(v)) == repr(tf1.Dimension(v))
        assert str(tf.Dimension(v)) == str(tf1.Dimension(v))
    for name in ("float32", "float64", "int32", "int64", "bool", "string", "uint8"):
        assert str(getattr(tf, name)) == str(getattr(tf1, name))
        assert repr(getattr(tf, name)) == repr(getattr(tf1, name))
