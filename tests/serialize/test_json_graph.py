"""jitflow's JSON graph form (readable diffs) and meta graphs: structure, attribute round trips,
import, resume by names."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

import jitflow as tf
from jitflow import serialize
from jitflow.ops.registry import all_op_defs
from jitflow.core.shapes import TensorShape


def _attrs_equal(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype
                and a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))
    if isinstance(a, (list, tuple)):
        return (type(a) is type(b) and len(a) == len(b)
                and all(_attrs_equal(x, y) for x, y in zip(a, b)))
    if isinstance(a, dict):
        return (isinstance(b, dict) and a.keys() == b.keys()
                and all(_attrs_equal(a[k], b[k]) for k in a))
    if isinstance(a, float) and np.isnan(a):
        return isinstance(b, float) and np.isnan(b)
    return type(a) is type(b) and a == b


# -- the format ---------------------------------------------------------------------------------
def test_graph_def_structure_and_json():
    x = tf.placeholder(tf.float32, [None, 2], name="x")
    c = tf.constant(np.arange(40, dtype=np.float64), name="big")
    y = tf.add(x, 1.0, name="y")
    with tf.control_dependencies([y]):
        z = tf.identity(x, name="z")
    gd = serialize.as_graph_def_json(add_shapes=True)
    gd = json.loads(json.dumps(gd))  # JSON-serializable as is
    assert gd["format"] == "jitflow.GraphDef"
    assert gd["version"] == serialize.json_graph.GRAPH_DEF_VERSION
    names = [n["name"] for n in gd["node"]]
    assert names == [op.name for op in tf.get_default_graph().get_operations()]
    nodes = {n["name"]: n for n in gd["node"]}
    assert nodes["x"]["attr"] == {"dtype": {"$dtype": "float32"}, "shape": {"$shape": [None, 2]}}
    assert nodes["y"]["input"] == ["x:0", "y/y:0"]
    assert nodes["z"]["input"] == ["x:0", "^y"]
    assert nodes["y"]["output"] == [{"dtype": "float32", "shape": [None, 2]}]
    big = nodes["big"]["attr"]["value"]["$ndarray"]
    assert big["dtype"] == "float64" and big["shape"] == [40] and "base64" in big
    small = nodes["y/y"]["attr"]["value"]["$ndarray"]
    assert small == {"dtype": "float32", "shape": [], "list": [1.0]}
    assert c.op.name == "big" and z.op.name == "z"
    # without add_shapes only dtypes are recorded
    plain = serialize.as_graph_def_json()
    assert plain["node"][0]["output"] == [{"dtype": "float32"}]


@pytest.mark.parametrize("value", [
    0, -7, 2.5, float("inf"), float("nan"), True, None, "abc", b"\x00\xff",
    (1, 2), [1, (2, 3)], {"k": [1.5]}, slice(1, None, 2), Ellipsis,
    tf.float64, tf.bool, TensorShape(None), TensorShape([None, 3]), TensorShape([]),
    np.float32(1.25), np.int64(-3), np.bool_(True),
    np.arange(6, dtype=np.int32).reshape(2, 3), np.linspace(0, 1, 50).astype(np.float16),
    np.array([np.nan, np.inf, -1.0], dtype=np.float32), np.zeros((0, 2), np.uint8),
    np.array([b"a", b"bc"], dtype=object), np.array(True),
])
def test_attr_encoding_round_trips(value):
    enc = json.loads(json.dumps(serialize.encode_attr(value)))
    back = serialize.decode_attr(enc)
    if isinstance(value, np.generic):
        assert type(back) is type(value) and back == value
    else:
        assert _attrs_equal(value, back), (value, back)


def test_unencodable_attr_names_the_op():
    op = tf.get_default_graph().create_op("NoOp", [], {"fn": lambda: 0}, name="weird")
    with pytest.raises(TypeError, match="'fn' of op 'weird'"):
        serialize.as_graph_def_json()
    assert op.name == "weird"


# -- every registered op round-trips ------------------------------------------------------------
def _example_input(rng, shape, dt, ex):
    """Values inside the example's domain (positive, so every domain is satisfied)."""
    if dt == np.bool_ or ex.domain == "bool":
        return rng.random(shape) < 0.5
    if dt.kind in "iu" or ex.domain in ("int", "index"):
        return rng.integers(0, max(1, ex.index_max), size=shape).astype(dt)
    if isinstance(ex.domain, tuple):
        return rng.uniform(*ex.domain, size=shape).astype(dt)
    return rng.uniform(0.5, 0.9, size=shape).astype(dt)


def _first_examples():
    for d in all_op_defs():
        for i, ex in enumerate(d.examples):
            yield pytest.param(ex, id=f"{d.type}-{ex.id or i}")


@pytest.mark.parametrize("ex", list(_first_examples()))
def test_registered_op_examples_round_trip(ex):
    dt = ex.dtypes[0]
    dts = dt if isinstance(dt, tuple) else (dt,) * len(ex.inputs)
    rng = np.random.default_rng(0)
    arrays = [_example_input(rng, s, np.dtype(d), ex) for s, d in zip(ex.inputs, dts)]
    g1 = tf.Graph()
    with g1.as_default():
        phs = [tf.placeholder(a.dtype, a.shape, name=f"in{i}") for i, a in enumerate(arrays)]
        out = ex.build(*phs)
        outs = out if isinstance(out, (list, tuple)) else [out]
        if ex.grad and all(t.dtype.is_floating for t in outs):
            # the gradient ops (and their attrs) must round-trip too
            tf.gradients([tf.reduce_sum(t) for t in outs], phs)
    gd = json.loads(json.dumps(serialize.as_graph_def_json(g1, add_shapes=True)))
    g2 = tf.Graph()
    with g2.as_default():
        tf.import_graph_def(gd, name="")
    assert g2.as_text() == g1.as_text()
    for a, b in zip(g1.get_operations(), g2.get_operations()):
        assert a.attrs.keys() == b.attrs.keys()
        for k in a.attrs:
            assert _attrs_equal(a.attrs[k], b.attrs[k]), (a.name, k)
    if ex.expect is None:
        return
    names = [t.name for t in outs]
    with tf.Session(graph=g1, backend="interpreter") as s1:
        r1 = s1.run(names, dict(zip([p.name for p in phs], arrays)))
    with tf.Session(graph=g2, backend="interpreter") as s2:
        r2 = s2.run(names, dict(zip([p.name for p in phs], arrays)))
    for a, b in zip(r1, r2):
        np.testing.assert_array_equal(a, b)


# -- import_graph_def -------------------------------------------------------------------------
def _small_graph():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 2], name="x")
        y = tf.multiply(x, 3.0, name="y")
        tf.add(y, 1.0, name="out")
    return g


def test_import_prefixes_names_and_runs(backend):
    gd = serialize.as_graph_def_json(_small_graph())
    out, x = tf.import_graph_def(gd, return_elements=["out:0", "x"])
    assert out.name == "import/out:0" and x.name == "import/x"
    assert x.type == "Placeholder"
    again = tf.import_graph_def(gd, return_elements=["out"])
    assert again[0].name == "import_1/out"
    with tf.Session() as sess:
        np.testing.assert_allclose(sess.run(out, {x.outputs[0]: [[1, 2]]}), [[4, 7]])


def test_import_input_map_replaces_tensors(backend):
    gd = serialize.as_graph_def_json(_small_graph(), add_shapes=True)
    feed = tf.placeholder(tf.float32, [3, 2], name="feed")
    doubled = feed * 2.0
    out, = tf.import_graph_def(gd, input_map={"x": doubled}, return_elements=["out:0"],
                               name="m")
    assert out.op.inputs[0].op.inputs[0] is doubled
    with tf.Session() as sess:
        np.testing.assert_allclose(sess.run(out, {feed: np.ones((3, 2))}), np.full((3, 2), 7.0))


def test_import_errors_are_clear():
    gd = serialize.as_graph_def_json(_small_graph())
    bad = json.loads(json.dumps(gd))
    bad["node"][1]["op"] = "FancyOp"
    bad["node"].append({"name": "q", "op": "OtherOp", "input": [], "attr": {}})
    with pytest.raises(ValueError, match="FancyOp, OtherOp"):
        tf.import_graph_def(bad)
    with pytest.raises(ValueError, match="not found in graph_def"):
        tf.import_graph_def(gd, return_elements=["nope:0"])
    with pytest.raises(ValueError, match="not found in graph_def"):
        tf.import_graph_def(gd, input_map={"absent:0": tf.constant(1.0)})
    wrong = dict(gd, version=99)
    with pytest.raises(ValueError, match="version 99"):
        tf.import_graph_def(wrong)
    with pytest.raises(ValueError, match="format"):
        tf.import_graph_def({"node": []})


def test_late_control_inputs_survive():
    g = tf.Graph()
    with g.as_default():
        a = tf.constant(1.0, name="a")
        b = tf.constant(2.0, name="b")
        a.op._add_control_input(b.op)  # a control edge to an op created later
    g2 = tf.Graph()
    with g2.as_default():
        tf.import_graph_def(serialize.as_graph_def_json(g), name="")
    assert [c.name for c in g2.get_operation_by_name("a").control_inputs] == ["b"]


def test_write_graph_and_read_back(tmp_path):
    g = _small_graph()
    path = serialize.write_graph(serialize.as_graph_def_json(g), str(tmp_path / "logs"),
                                 "graph.json")
    assert path == str(tmp_path / "logs" / "graph.json")
    assert [p.name for p in (tmp_path / "logs").iterdir()] == ["graph.json"]  # no temp left
    gd = serialize.read_graph_def(path)
    assert gd == json.loads(json.dumps(serialize.as_graph_def_json(g)))
    compact = serialize.write_graph(serialize.as_graph_def_json(g), str(tmp_path), "c.json",
                                    as_text=False)
    assert "\n " not in open(compact).read()
    with tf.Graph().as_default() as g3:
        tf.import_graph_def(path, name="")  # a file path works too
        assert g3.as_text() == g.as_text()


# -- variables and meta graphs ------------------------------------------------------------------
def test_variable_from_ops_wraps_without_new_ops(backend):
    v = tf.Variable([1.0, 2.0], name="v")
    g = tf.get_default_graph()
    n_ops = len(g.get_operations())
    w = serialize.variable_from_ops(v.op, v.initializer, v.value(), trainable=False)
    assert len(g.get_operations()) == n_ops
    assert isinstance(w, tf.Variable) and w.name == "v:0" and not w.trainable
    assert w.initial_value is v.initial_value
    with tf.Session() as sess:
        sess.run(w.initializer)
        np.testing.assert_allclose(sess.run(w * 2.0), [2.0, 4.0])
        sess.run(tf.assign_add(w, [1.0, 1.0]))
        np.testing.assert_allclose(sess.run(v), [2.0, 3.0])
    with pytest.raises(TypeError, match="VariableV2"):
        serialize.variable_from_ops(v.value().op, v.initializer, v.value())


def _training_graph(opt: str = "adam"):
    """Adam with a global step, or momentum SGD with no scalar variables (see the report)."""
    x = tf.placeholder(tf.float32, [None, 2], name="x")
    y = tf.placeholder(tf.float32, [None, 1], name="y")
    w = tf.Variable(tf.zeros([2, 1]), name="w")
    if opt == "adam":
        b = tf.Variable(0.5, name="b")
        gs = tf.train.get_or_create_global_step()
        optimizer = tf.train.AdamOptimizer(0.1)
    else:
        b = tf.Variable([0.5], name="b")
        gs = tf.Variable([0], name="step", trainable=False)
        optimizer = tf.train.MomentumOptimizer(0.02, 0.5)
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y), name="loss")
    with tf.control_dependencies([tf.assign_add(gs, [1]) if opt != "adam" else gs]):
        train = optimizer.minimize(loss, global_step=gs if opt == "adam" else None,
                                   name="train")
    tf.add_to_collection("step_op", train)
    tf.add_to_collection("loss", loss)
    tf.add_to_collection("notes", "lr=0.1")
    return x, y, loss, train


def test_train_namespace_exposes_serialization():
    assert tf.train.write_graph is serialize.write_graph
    assert tf.train.export_meta_graph is serialize.export_meta_graph
    assert tf.train.import_meta_graph is serialize.import_meta_graph


def test_meta_graph_restores_variables_and_collections(tmp_path, backend):
    g1 = tf.Graph()
    with g1.as_default():
        _training_graph()
        names = [v.name for v in tf.global_variables()]
        trainable = [v.name for v in tf.trainable_variables()]
        meta = tf.train.export_meta_graph(str(tmp_path / "m.meta"))
    assert (tmp_path / "m.meta").read_bytes() == meta.SerializeToString()
    g2 = tf.Graph()
    with g2.as_default():
        saver = tf.train.import_meta_graph(str(tmp_path / "m.meta"))
        assert isinstance(saver, tf.train.Saver)
        variables = tf.global_variables()
        assert [v.name for v in variables] == names
        assert all(isinstance(v, tf.Variable) for v in variables)
        assert [v.name for v in tf.trainable_variables()] == trainable
        assert tf.train.get_global_step().name == "global_step:0"
        train_op, = tf.get_collection("step_op")
        loss, = tf.get_collection("loss")
        assert isinstance(train_op, tf.Operation) and train_op.name == "train"
        assert isinstance(loss, tf.Tensor) and loss.name == "loss:0"
        assert tf.get_collection("notes") == [b"lr=0.1"]   # a bytes_list, as in TF
        for op in g1.get_operations():   # every op is back under its name (plus Const inputs)
            assert g2.get_operation_by_name(op.name).type == op.type
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            feed = {"x:0": [[1.0, 2.0]], "y:0": [[3.0]]}
            before = sess.run(loss, feed)
            for _ in range(3):
                sess.run(train_op, feed)
            assert sess.run(loss, feed) < before
            assert sess.run(tf.train.get_global_step()) == 3


def test_meta_graph_import_scope_prefixes_and_saver_uses_original_names(tmp_path):
    with tf.Graph().as_default():
        x, y, loss, train = _training_graph("sgd")
        with tf.Session(backend="interpreter") as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(train, {x: [[1.0, 1.0]], y: [[2.0]]})
            want = sess.run("w:0")
            ckpt = tf.train.Saver().save(sess, str(tmp_path / "ckpt"))
    with tf.Graph().as_default():
        saver = tf.train.import_meta_graph(ckpt + ".meta", import_scope="m")
        assert tf.global_variables()[0].name == "m/w:0"
        with tf.Session(backend="interpreter") as sess:
            saver.restore(sess, ckpt)
            np.testing.assert_array_equal(sess.run("m/w:0"), want)


def test_meta_graph_without_variables_returns_none():
    g = _small_graph()
    meta = tf.train.export_meta_graph(graph=g)
    with tf.Graph().as_default():
        assert tf.train.import_meta_graph(meta) is None
        assert tf.get_default_graph().get_operation_by_name("out").type == "Add"
    with pytest.raises(ValueError, match="Not a meta graph"):
        tf.train.import_meta_graph(serialize.as_graph_def_json(g))


_RESUME_SCRIPT = r'''
import json, sys
import numpy as np
import jitflow as tf

mode, ckpt = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(0)
xs = rng.standard_normal((16, 2)).astype(np.float32)
ys = (xs @ np.array([[2.0], [-1.0]], np.float32) + 0.3).astype(np.float32)
losses = []
if mode == "first":
    sys.path.insert(0, sys.argv[3])
    from test_json_graph import _training_graph
    x, y, loss, train = _training_graph("momentum")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(4):
            sess.run(train, {x: xs, y: ys})
        tf.train.Saver().save(sess, ckpt)
        for _ in range(5):
            losses.append(float(sess.run([loss, train], {x: xs, y: ys})[0]))
        losses.append(float(sess.run("step:0")[0]))
else:
    saver = tf.train.import_meta_graph(ckpt + ".meta")
    train = tf.get_collection("step_op")[0]
    loss = tf.get_collection("loss")[0]
    with tf.Session() as sess:
        saver.restore(sess, ckpt)
        for _ in range(5):
            losses.append(float(sess.run([loss, train], {"x:0": xs, "y:0": ys})[0]))
        losses.append(float(sess.run("step:0")[0]))
print(json.dumps(losses))
'''


def test_training_resumes_in_a_new_process_by_names_alone(tmp_path, backend):
    import subprocess
    import sys
    script = tmp_path / "resume.py"
    script.write_text(_RESUME_SCRIPT)
    tests_dir = os.path.dirname(os.path.abspath(__file__))
    ckpt = str(tmp_path / "model")

    def run(*args):
        proc = subprocess.run([sys.executable, str(script), *args], capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout.strip().splitlines()[-1])

    uninterrupted = run("first", ckpt, tests_dir)
    resumed = run("resume", ckpt)
    assert resumed == uninterrupted
    assert resumed[-1] == 9.0  # the step counter continued from the checkpoint
    assert resumed[0] > resumed[-2]  # and training made progress


def test_meta_graph_keeps_the_graph_seed(backend):
    g1 = tf.Graph()
    with g1.as_default():
        tf.set_random_seed(7)
        tf.Variable(tf.random_normal([3]), name="r")
        meta = tf.train.export_meta_graph()
    with tf.Session(graph=g1) as sess:
        sess.run(tf.global_variables_initializer())
        want = sess.run("r:0")
    g2 = tf.Graph()
    with g2.as_default():
        tf.train.import_meta_graph(meta)
        assert g2.seed == 7
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            np.testing.assert_array_equal(sess.run("r:0"), want)


def _assert_graphs_equal(g1, g2):
    assert g2.as_text() == g1.as_text()
    for a, b in zip(g1.get_operations(), g2.get_operations()):
        assert a.attrs.keys() == b.attrs.keys()
        for k in a.attrs:
            assert _attrs_equal(a.attrs[k], b.attrs[k]), (a.name, k)


def test_state_and_structural_ops_round_trip(backend):
    g1 = tf.Graph()
    with g1.as_default():
        v = tf.Variable([1.0, 2.0], name="v")
        w = tf.Variable(v.initialized_value() * 2.0, name="w")
        inited = tf.is_variable_initialized(v)
        report = tf.report_uninitialized_variables()
        a = tf.placeholder_with_default(tf.constant([3.0, 4.0]), [None], name="a")
        c = tf.concat([a, w], 0)
        t = tf.tile(a, tf.constant([2]))
        tf.gradients([tf.reduce_sum(c), tf.reduce_sum(t)], [a, w])
        tf.group(tf.assign_add(v, a), tf.assign_sub(w, a), name="update")
    g2 = tf.Graph()
    with g2.as_default():
        tf.import_graph_def(json.loads(json.dumps(serialize.as_graph_def_json(g1))), name="")
    _assert_graphs_equal(g1, g2)
    for g in (g1, g2):
        with tf.Session(graph=g) as sess:
            assert list(sess.run(report.name)) == [b"v", b"w"]
            assert not sess.run(inited.name)
            sess.run(tf.variables_initializer([]))  # nothing to do
            sess.run([v.initializer.name])
            sess.run("w/Assign")
            sess.run("update")
            np.testing.assert_allclose(sess.run("v:0"), [4.0, 6.0])
            np.testing.assert_allclose(sess.run("w:0"), [-1.0, 0.0])
