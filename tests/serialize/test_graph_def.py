"""GraphDefs in TensorFlow's format: every registered op survives a proto round trip, frozen
graphs written by TensorFlow run with TensorFlow's outputs, TensorFlow imports what jitflow
writes, and clear errors for what jitflow cannot build."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import jitflow as tf
from jitflow import serialize
from jitflow.ops.registry import all_op_defs

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")
sys.path.insert(0, DATA)
from golden_spec import image_batch, mlp_batch  # noqa: E402
from test_json_graph import _example_input  # noqa: E402


def _examples():
    for d in all_op_defs():
        for i, ex in enumerate(d.examples):
            yield pytest.param(ex, id=f"{d.type}-{ex.id or i}")


@pytest.mark.parametrize("ex", list(_examples()))
def test_registered_op_examples_survive_the_proto(ex):
    """Build (with gradients), write as binary GraphDef, import: same values."""
    dt = ex.dtypes[0]
    dts = dt if isinstance(dt, tuple) else (dt,) * len(ex.inputs)
    rng = np.random.default_rng(0)
    arrays = [_example_input(rng, s, np.dtype(d), ex) for s, d in zip(ex.inputs, dts)]
    g1 = tf.Graph()
    with g1.as_default():
        phs = [tf.placeholder(a.dtype, a.shape, name=f"in{i}") for i, a in enumerate(arrays)]
        out = ex.build(*phs)
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        if ex.grad and all(t.dtype.is_floating for t in outs):
            outs += [g for g in tf.gradients([tf.reduce_sum(t) for t in outs], phs)
                     if g is not None]
    data = g1.as_graph_def().SerializeToString()
    g2 = tf.Graph()
    with g2.as_default():
        tf.import_graph_def(data, name="")
    for op in g1.get_operations():
        assert g2.get_operation_by_name(op.name).type == op.type
    if ex.expect is None:
        return
    names = [t.name for t in outs]
    feed = dict(zip([p.name for p in phs], arrays))
    with tf.Session(graph=g1, backend="interpreter") as s1:
        r1 = s1.run(names, feed)
    with tf.Session(graph=g2, backend="interpreter") as s2:
        r2 = s2.run(names, feed)
    for a, b in zip(r1, r2):
        np.testing.assert_array_equal(a, b)


def _run_golden_cnn(graph_def, backend_name):
    with tf.Graph().as_default() as g:
        probs, label = tf.import_graph_def(graph_def, return_elements=["probs:0", "label:0"],
                                           name="")
        with tf.Session(graph=g, backend=backend_name) as sess:
            return sess.run([probs, label], {"images:0": image_batch()})


def test_frozen_cnn_written_by_tensorflow_runs_with_its_outputs(backend):
    with open(os.path.join(DATA, "cnn_frozen.pb"), "rb") as f:
        data = f.read()
    want = np.load(os.path.join(DATA, "cnn_expected.npz"))
    probs, label = _run_golden_cnn(data, backend)
    np.testing.assert_allclose(probs, want["probs"], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(label, want["label"])
    assert label.dtype == np.int64
    gd = serialize.read_graph_def(os.path.join(DATA, "cnn_frozen.pb"))
    assert {"Conv2D", "FusedBatchNormV3", "MaxPool", "AvgPool", "ConcatV2", "Relu6", "Mean",
            "Squeeze", "Reshape", "MatMul", "Softmax", "ArgMax"} <= {n.op for n in gd.node}


def test_text_graph_def_written_by_tensorflow(backend):
    with open(os.path.join(DATA, "mlp.pbtxt")) as f:
        text = f.read()
    want = np.load(os.path.join(DATA, "mlp_expected.npz"))["out"]
    out, = tf.import_graph_def(text, return_elements=["out:0"])
    assert out.name == "import/out:0"
    with tf.Session() as sess:
        got = sess.run(out, {"import/x:0": mlp_batch()})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_input_map_and_return_elements_on_a_tf_graph():
    with open(os.path.join(DATA, "mlp.pbtxt")) as f:
        text = f.read()
    want = np.load(os.path.join(DATA, "mlp_expected.npz"))["out"]
    batch = tf.constant(mlp_batch(), name="batch")
    out, x_op = tf.import_graph_def(text, input_map={"x:0": batch},
                                    return_elements=["out:0", "x"], name="net")
    assert x_op.name == "net/x" and x_op.type == "Placeholder"
    with tf.Session() as sess:
        np.testing.assert_allclose(sess.run(out), want, rtol=1e-5, atol=1e-6)


def test_unknown_op_type_names_the_type_and_the_node():
    from jitflow.serialize import protos
    gd = protos.GraphDef()
    gd.node.add(name="a", op="Placeholder").attr["dtype"].type = 1
    n = gd.node.add(name="weird_node", op="FancyOp", input=["a"])
    n.attr["T"].type = 1
    with pytest.raises(ValueError, match="'FancyOp' \\(node 'weird_node'\\)"):
        tf.import_graph_def(gd)
    bad = protos.GraphDef()
    bad.node.add(name="c", op="Const")   # no value attribute
    with pytest.raises(ValueError, match="node 'c'"):
        tf.import_graph_def(bad)


def test_as_graph_def_is_a_proto_and_write_graph_writes_both_forms(tmp_path):
    from google.protobuf import text_format

    from jitflow.serialize import protos
    x = tf.placeholder(tf.float32, [None, 2], name="x")
    tf.reduce_sum(x * 2.0, axis=1, name="s")
    gd = tf.get_default_graph().as_graph_def()
    assert isinstance(gd, protos.GraphDef)
    nodes = {n.name: n for n in gd.node}
    assert nodes["s"].op == "Sum" and nodes["s"].input == ["mul", "s/reduction_indices"]
    assert nodes["s"].attr["keep_dims"].b is False and nodes["x"].attr["dtype"].type == 1
    assert [d.size for d in nodes["x"].attr["shape"].shape.dim] == [-1, 2]
    binary = tf.train.write_graph(tf.get_default_graph(), str(tmp_path), "g.pb", as_text=False)
    text = tf.train.write_graph(gd, str(tmp_path), "g.pbtxt")
    assert protos.GraphDef.FromString(open(binary, "rb").read()) == gd
    assert text_format.Parse(open(text).read(), protos.GraphDef()) == gd
    assert sorted(os.listdir(tmp_path)) == ["g.pb", "g.pbtxt"]
    with tf.Graph().as_default() as g2:
        tf.import_graph_def(binary, name="")
        with tf.Session() as sess:
            np.testing.assert_allclose(sess.run("s:0", {"x:0": [[1.0, 2.0]]}), [6.0])
    assert g2.get_operation_by_name("s").type == "Sum"


def test_jitflow_only_ops_are_kept_as_jitflow_nodes():
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    y = tf.nn.softmax(x, axis=0, name="y")   # TensorFlow's Softmax is over the last axis only
    gd = tf.get_default_graph().as_graph_def()
    node = [n for n in gd.node if n.name == "y"][0]
    assert node.op == "jitflow.Softmax" and "_jitflow_attrs" in node.attr
    with tf.Graph().as_default() as g2:
        tf.import_graph_def(gd, name="")
        assert g2.get_operation_by_name("y").get_attr("axis") == 0
    assert y.op.type == "Softmax"


# -- with TensorFlow --------------------------------------------------------------------------
def _tf():
    tf_ref = pytest.importorskip("tensorflow.compat.v1")
    tf_ref.disable_eager_execution()
    return tf_ref


def test_tensorflow_imports_and_runs_what_jitflow_wrote(tmp_path):
    tf_ref = _tf()
    rng = np.random.default_rng(5)
    x = tf.placeholder(tf.float32, [None, 6, 6, 2], name="x")
    f = tf.constant(rng.normal(size=(3, 3, 2, 4)).astype(np.float32))
    h = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(x, f, [1, 1, 1, 1], "SAME"),
                                  tf.constant(rng.normal(size=4).astype(np.float32))))
    h = tf.nn.avg_pool(tf.nn.max_pool(h, [1, 2, 2, 1], [1, 2, 2, 1], "VALID"),
                       [1, 2, 2, 1], [1, 1, 1, 1], "SAME")
    flat = tf.reshape(h, [-1, 36])
    parts = tf.split(flat, [30, 6], axis=1)
    z = tf.concat([tf.tanh(parts[0]), tf.reduce_max(parts[1], 1, keepdims=True)], 1)
    y = tf.nn.softmax(tf.matmul(z, tf.constant(rng.normal(size=(31, 5)).astype(np.float32))),
                      name="y")
    idx = tf.argmax(y, 1, name="idx")
    top = tf.identity(tf.transpose(tf.expand_dims(y, 0))[1:3, 0], name="top")
    xv = rng.normal(size=(3, 6, 6, 2)).astype(np.float32)
    with tf.Session() as sess:
        want = sess.run([y, idx, top], {x: xv})
    path = tf.train.write_graph(tf.get_default_graph(), str(tmp_path), "g.pb", as_text=False)
    gd = tf_ref.GraphDef.FromString(open(path, "rb").read())
    with tf_ref.Graph().as_default():
        tf_ref.import_graph_def(gd, name="")
        with tf_ref.Session() as sess:
            got = sess.run(["y:0", "idx:0", "top:0"], {"x:0": xv})
    for a, b in zip(want, got):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
        assert np.asarray(a).dtype == np.asarray(b).dtype
    text = tf.train.write_graph(tf.get_default_graph(), str(tmp_path), "g.pbtxt", as_text=True)
    from google.protobuf import text_format
    parsed = text_format.Parse(open(text).read(), tf_ref.GraphDef())
    assert [n.name for n in parsed.node] == [n.name for n in gd.node]


def test_golden_graphs_regenerated_by_tensorflow(tmp_path, backend):
    from make_golden import write_cnn
    tf_ref = _tf()
    path, expected = write_cnn(str(tmp_path))
    graph_def = tf_ref.GraphDef.FromString(open(path, "rb").read())   # TensorFlow's message
    probs, label = _run_golden_cnn(graph_def, backend)
    np.testing.assert_allclose(probs, expected["probs"], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(label, expected["label"])


@pytest.mark.parametrize("ex", list(_examples()))
def test_tensorflow_runs_every_op_written_in_its_form(ex):
    """Each registered op example whose nodes all have a TensorFlow form (no jitflow.<type>
    node) imports into TensorFlow and computes jitflow's values."""
    tf_ref = _tf()
    if ex.expect is None:
        pytest.skip("no value to compare (random or stateful example)")
    dt = ex.dtypes[0]
    dts = dt if isinstance(dt, tuple) else (dt,) * len(ex.inputs)
    rng = np.random.default_rng(0)
    arrays = [_example_input(rng, s, np.dtype(d), ex) for s, d in zip(ex.inputs, dts)]
    with tf.Graph().as_default() as g:
        phs = [tf.placeholder(a.dtype, a.shape, name=f"in{i}") for i, a in enumerate(arrays)]
        out = ex.build(*phs)
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        gd = g.as_graph_def()
        if any(n.op.startswith("jitflow.") for n in gd.node):
            pytest.skip("an op of this example has no TensorFlow form")
        feed = {p.name: a for p, a in zip(phs, arrays)}
        with tf.Session(graph=g, backend="interpreter") as sess:
            want = sess.run([t.name for t in outs], feed)
    with tf_ref.Graph().as_default():
        tf_ref.import_graph_def(tf_ref.GraphDef.FromString(gd.SerializeToString()), name="")
        with tf_ref.Session() as sess:
            got = sess.run([t.name for t in outs], feed)
    for a, b in zip(want, got):
        assert np.asarray(a).dtype == np.asarray(b).dtype
        np.testing.assert_allclose(np.asarray(a, dtype=float) if np.asarray(a).dtype != bool
                                   else a, b, rtol=1e-5, atol=1e-5)
