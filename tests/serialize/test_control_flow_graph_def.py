"""While loops and conds in GraphDefs: jitflow writes them as TensorFlow's functional While/If
nodes with a FunctionDefLibrary, reads them back and reads what TensorFlow writes with control
flow v2; TensorFlow imports and runs jitflow's graphs (TF-parity tests, skipped without TF)."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import jitflow as tf
from jitflow import serialize

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")
sys.path.insert(0, DATA)
from make_control_flow import FEEDS, OUTPUTS  # noqa: E402


def control_flow_reference(x: np.ndarray, n: int, tensor_array: bool = True) -> dict:
    """What tests/data/make_control_flow.py's graph computes, by hand in NumPy (loop_rows stays
    zeros without the TensorArray)."""
    x = x.astype(np.float32)
    i, acc, total = 0, np.ones(3, np.float32), np.float32(0)
    rows = np.zeros((n, 3), np.float32)
    while i < n and i < 6:
        acc = acc * x + np.float32(1) if i % 2 == 0 else acc * np.float32(0.5) - x
        if tensor_array:
            rows[i] = acc
        total = total + np.float32(0.5) * i
        i += 1
    result = acc * np.float32(2) if acc.sum() > 10 else acc + total
    return {"loop_i": i, "loop_acc": acc, "loop_total": total, "loop_rows": rows,
            "result": result}


def _build_like_fixture(tfm):
    """The fixture's graph, built with jitflow's (or TF's) graph API."""
    x = tfm.placeholder(tfm.float32, [3], name="x")
    n = tfm.placeholder(tfm.int32, [], name="n")

    def body(i, acc, total, ta):
        acc = tfm.cond(tfm.equal(i % 2, 0), lambda: acc * x + 1.0, lambda: acc * 0.5 - x)
        _, inner = tfm.while_loop(lambda j, s: j < i, lambda j, s: (j + 1, s + 0.5),
                                  [tfm.constant(0), tfm.constant(0.0)])
        return i + 1, acc, total + inner, ta.write(i, acc)

    ta = tfm.TensorArray(tfm.float32, size=n, element_shape=[3])
    i, acc, total, ta = tfm.while_loop(lambda i, a, t, ta: i < n, body,
                                       [tfm.constant(0), tfm.ones([3]), tfm.constant(0.0), ta],
                                       maximum_iterations=6, name="loop")
    tfm.identity(i, name="loop_i")
    tfm.identity(acc, name="loop_acc")
    tfm.identity(total, name="loop_total")
    tfm.identity(ta.stack(), name="loop_rows")
    r = tfm.cond(tfm.reduce_sum(acc) > 10.0, lambda: acc * 2.0, lambda: acc + total,
                 name="top")
    tfm.identity(r, name="result")


def _run_all(sess) -> list:
    return [dict(zip(OUTPUTS, sess.run([o + ":0" for o in OUTPUTS], {"x:0": xv, "n:0": nv})))
            for xv, nv in FEEDS]


def _check(results: list, rtol: float = 1e-6, tensor_array: bool = True) -> None:
    for (xv, nv), got in zip(FEEDS, results):
        want = control_flow_reference(xv, nv, tensor_array)
        for k in OUTPUTS:
            np.testing.assert_allclose(got[k], want[k], rtol=rtol, err_msg=f"{k} for n={nv}")


def test_reference_values_by_hand():
    """The reference itself, on a case worked out on paper: x = [1, 2, 3], n = 3."""
    r = control_flow_reference(np.array([1.0, 2.0, 3.0]), 3)
    # i=0: acc = x + 1 = [2, 3, 4]; i=1: acc*0.5 - x = [0, -0.5, -1]; i=2: acc*x + 1 = [1, 0, -2]
    np.testing.assert_allclose(r["loop_acc"], [1.0, 0.0, -2.0])
    assert r["loop_i"] == 3 and r["loop_total"] == 0.5 * (0 + 1 + 2)
    np.testing.assert_allclose(r["result"], [2.5, 1.5, -0.5])


# -- jitflow -> GraphDef -> jitflow ----------------------------------------------------------------
def test_round_trip_keeps_loops_and_conds(tmp_path):
    g1 = tf.Graph()
    with g1.as_default():
        _build_like_fixture(tf)
        with tf.Session() as sess:
            before = _run_all(sess)
    _check(before)
    gd = g1.as_graph_def()
    types = {n.name: n.op for n in gd.node}
    assert types["loop/Exit/While"] == "While" and types["loop/Exit"] == "IdentityN"
    assert types["top/Merge"] == "If"
    # the outer loop's body holds the inner loop and the cond: 2 loops x (cond, body) + 2 conds
    # x (then, else) functions
    assert len(gd.library.function) == 8
    assert not any(n.op.startswith(serialize.graph_def.NATIVE_PREFIX) for n in gd.node)
    for f in gd.library.function:
        assert not any(n.op.startswith("jitflow.") for n in f.node_def), f.signature.name
    path = tf.train.write_graph(g1, str(tmp_path), "cf.pb", as_text=False)
    text = tf.train.write_graph(g1, str(tmp_path), "cf.pbtxt", as_text=True)
    for source in (path, text):
        with tf.Graph().as_default() as g2:
            tf.import_graph_def(source, name="")
            with tf.Session(graph=g2) as sess:
                after = _run_all(sess)
        _check(after)
        for a, b in zip(before, after):
            for k in OUTPUTS:
                np.testing.assert_array_equal(a[k], b[k])


def test_round_trip_twice_is_stable():
    """A re-imported loop (TensorFlow's form: counter, limit and predicate are loop variables)
    written again still runs the same."""
    with tf.Graph().as_default() as g1:
        x = tf.placeholder(tf.float32, [None], name="x")
        k, y = tf.while_loop(lambda k, y: tf.reduce_sum(y) < 100.0,
                             lambda k, y: (k + 1, y * 2.0 + x), [tf.constant(0), x])
        tf.identity(k, name="k")
        tf.identity(y, name="y")
    gd = g1.as_graph_def()
    for _ in range(2):
        with tf.Graph().as_default() as g2:
            tf.import_graph_def(gd, name="")
        gd = g2.as_graph_def()
    with tf.Session(graph=g2) as sess:
        kv, yv = sess.run(["k:0", "y:0"], {"x:0": np.array([1.0, 2.0], np.float32)})
    # y: [1,2] -> [3,6] -> [7,14] -> [15,30] -> [31,62] -> [63,126] (sum 189 >= 100)
    assert kv == 5
    np.testing.assert_array_equal(yv, [63.0, 126.0])
    assert g2.get_tensor_by_name("y:0").shape.as_list() == [None]


def test_loop_capturing_a_variable_through_a_meta_graph(tmp_path):
    with tf.Graph().as_default():
        w = tf.Variable(np.array([0.5, 2.0], np.float32), name="w")
        x = tf.placeholder(tf.float32, [2], name="x")
        _, y = tf.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y * w),
                             [tf.constant(0), x])
        tf.identity(y, name="y")
        saver = tf.train.Saver()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            prefix = saver.save(sess, str(tmp_path / "model"))
    with tf.Graph().as_default() as g:
        saver = tf.train.import_meta_graph(prefix + ".meta")
        with tf.Session(graph=g) as sess:
            saver.restore(sess, prefix)
            got = sess.run("y:0", {"x:0": np.array([8.0, 1.0], np.float32)})
    np.testing.assert_array_equal(got, [1.0, 8.0])   # [8, 1] * [0.5, 2] ** 3


def test_cond_returning_a_captured_tensor_and_maximum_iterations_zero():
    with tf.Graph().as_default() as g1:
        p = tf.placeholder(tf.bool, [], name="p")
        a = tf.constant([1.0, 2.0], name="a")
        r = tf.cond(p, lambda: a, lambda: a * 3.0)
        tf.identity(r, name="r")
        _, z = tf.while_loop(lambda i, z: True, lambda i, z: (i + 1, z + 1.0),
                             [tf.constant(0), a], maximum_iterations=0)
        tf.identity(z, name="z")
    with tf.Graph().as_default() as g2:
        tf.import_graph_def(g1.as_graph_def(), name="")
        with tf.Session(graph=g2) as sess:
            np.testing.assert_array_equal(sess.run("r:0", {"p:0": True}), [1.0, 2.0])
            np.testing.assert_array_equal(sess.run("r:0", {"p:0": False}), [3.0, 6.0])
            np.testing.assert_array_equal(sess.run("z:0"), [1.0, 2.0])


def _tensor_array_graph():
    """TensorArrays in loops: a fixed-size one written per row of an unstacked input, map_fn
    over a leading dimension unknown when built, a dynamic-size one grown by the loop."""
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 2], name="x")
        n = tf.shape(x)[0]
        inp = tf.TensorArray(tf.float32, size=n).unstack(x)

        def body(i, ta):
            return i + 1, ta.write(i, inp.read(i) * tf.cast(i, tf.float32))
        _, ta = tf.while_loop(lambda i, ta: i < n, body,
                              [tf.constant(0), tf.TensorArray(tf.float32, size=n)])
        tf.identity(ta.stack(), name="stacked")
        tf.identity(ta.size(), name="size")
        tf.identity(tf.map_fn(lambda r: tf.reduce_sum(r) * 2.0, x), name="mapped")
        dyn = tf.TensorArray(tf.float32, size=0, dynamic_size=True, element_shape=[])
        _, dyn = tf.while_loop(lambda i, d: i < 4,
                               lambda i, d: (i + 1, d.write(i, tf.cast(i * i, tf.float32))),
                               [tf.constant(0), dyn])
        tf.identity(dyn.stack(), name="dyn")
    return g


TA_NAMES = ["stacked:0", "size:0", "mapped:0", "dyn:0"]
TA_X = np.arange(6, dtype=np.float32).reshape(3, 2)


def _check_tensor_arrays(got) -> None:
    stacked, size, mapped, dyn = got
    np.testing.assert_array_equal(stacked, [[0, 0], [2, 3], [8, 10]])   # row i * i
    assert size == 3
    np.testing.assert_array_equal(mapped, [2, 10, 18])   # 2 * row sums 1, 5, 9
    np.testing.assert_array_equal(dyn, [0, 1, 4, 9])


def test_tensor_arrays_in_loops_round_trip():
    g1 = _tensor_array_graph()
    with tf.Session(graph=g1) as sess:
        _check_tensor_arrays(sess.run(TA_NAMES, {"x:0": TA_X}))
    gd = g1.as_graph_def()
    types = {n.op for n in gd.node} | {n.op for f in gd.library.function for n in f.node_def}
    assert {"TensorListReserve", "TensorListSetItem", "TensorListGetItem",
            "TensorListStack", "TensorListLength"} <= types
    assert not any(t.startswith("jitflow.") for t in types)
    with tf.Graph().as_default() as g2:
        tf.import_graph_def(gd, name="")
    from jitflow.serialize.functions import graph_level_ops
    for op in graph_level_ops(g1):   # jitflow's TensorArray ops come back as themselves
        if op.type.startswith("TensorArray"):
            assert g2.get_operation_by_name(op.name).type == op.type
    assert any(op.type == "TensorArrayWriteV3" for op in g2.get_operations())   # in a body
    with tf.Session(graph=g2) as sess:
        for _ in range(2):   # each run makes its TensorArrays anew
            _check_tensor_arrays(sess.run(TA_NAMES, {"x:0": TA_X}))


def test_tensorflow_lists_read_as_lists():
    """A GraphDef of TensorList ops without jitflow's marks (as TensorFlow writes them) runs on
    jitflow's list ops."""
    from jitflow.serialize.functions import MARK_TYPE_ATTR
    gd = _tensor_array_graph().as_graph_def()
    for n in list(gd.node) + [m for f in gd.library.function for m in f.node_def]:
        if MARK_TYPE_ATTR in n.attr:
            del n.attr[MARK_TYPE_ATTR]
    with tf.Graph().as_default() as g2:
        tf.import_graph_def(gd, name="")
        types = {op.type for op in g2.get_operations()}
        assert "TensorListReserve" in types and "TensorListSetItem" in types
        assert not any(t.startswith("TensorArray") for t in types)
        with tf.Session(graph=g2) as sess:
            _check_tensor_arrays(sess.run(TA_NAMES, {"x:0": TA_X}))


def test_gradient_of_a_loop_cannot_be_written():
    with tf.Graph().as_default() as g:
        x = tf.placeholder(tf.float32, [], name="x")
        _, y = tf.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y * x),
                             [tf.constant(0), tf.constant(1.0)])
        tf.gradients(y, x)
        with pytest.raises(ValueError, match="WhileGrad"):
            g.as_graph_def()


# -- TensorFlow -> jitflow ------------------------------------------------------------------------
def test_reads_tensorflow_control_flow_v2_fixture(backend):
    """tests/data/control_flow.pb: StatelessWhile/StatelessIf with nested functions, written by
    TensorFlow 2.21 (tests/data/make_control_flow.py)."""
    path = os.path.join(DATA, "control_flow.pb")
    with tf.Graph().as_default() as g:
        tf.import_graph_def(path, name="")
        with tf.Session(graph=g) as sess:
            got = _run_all(sess)
    _check(got)
    expected = np.load(os.path.join(DATA, "control_flow_expected.npz"))
    for k, res in enumerate(got):
        for name in OUTPUTS:
            np.testing.assert_allclose(res[name], expected[f"{name}_{k}"], rtol=1e-6)


def test_reads_tensorflow_tf1_frames_fixture(backend):
    """tests/data/control_flow_v1.pb: the fixture's loops and conds as TF1's Enter/Exit/Switch/
    Merge frames (control flow v2 off), read as While/If ops."""
    path = os.path.join(DATA, "control_flow_v1.pb")
    with tf.Graph().as_default() as g:
        tf.import_graph_def(path, name="")
        types = {op.type for op in g.get_operations()}
        assert {"While", "If"} <= types and not types & {"Enter", "Merge", "Switch"}
        with tf.Session(graph=g) as sess:
            got = _run_all(sess)
    _check(got, tensor_array=False)
    expected = np.load(os.path.join(DATA, "control_flow_v1_expected.npz"))
    for k, res in enumerate(got):
        for name in OUTPUTS:
            np.testing.assert_allclose(res[name], expected[f"{name}_{k}"], rtol=1e-6)


def rnn_reference(x: np.ndarray, w: np.ndarray) -> tuple:
    """make_control_flow.write_rnn_v1's RNN by hand: h = tanh([x_t, h] w) per step."""
    h = np.zeros((x.shape[1], w.shape[1]), np.float32)
    outs = []
    for t in range(x.shape[0]):
        h = np.tanh(np.concatenate([x[t], h], 1) @ w)
        outs.append(h)
    return np.stack(outs), h


def test_reads_tf1_tensor_arrays_in_frames(backend):
    """tests/data/rnn_v1.pb: TF1's resource TensorArrays (handle and flow) in a TF1 loop."""
    from make_control_flow import RNN_W, RNN_X
    with tf.Graph().as_default() as g:
        tf.import_graph_def(os.path.join(DATA, "rnn_v1.pb"), name="")
        with tf.Session(graph=g) as sess:
            out, state = sess.run(["out:0", "state:0"], {"x:0": RNN_X})
            short = sess.run("out:0", {"x:0": RNN_X[:2]})
    want_out, want_state = rnn_reference(RNN_X, RNN_W)
    np.testing.assert_allclose(out, want_out, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(state, want_state, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(short, want_out[:2], rtol=1e-5, atol=1e-6)
    expected = np.load(os.path.join(DATA, "rnn_v1_expected.npz"))
    np.testing.assert_allclose(out, expected["out"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(state, expected["state"], rtol=1e-5, atol=1e-6)


def test_broken_tf1_frames_are_refused():
    from jitflow.serialize import protos
    gd = protos.GraphDef()
    gd.node.add(name="c", op="Const").attr["dtype"].type = 1
    e = gd.node.add(name="enter", op="Enter", input=["c"])
    e.attr["frame_name"].s = b"f"
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="TF1 control flow.*Enter node enter feeds no Merge"):
            tf.import_graph_def(gd, name="")


def test_unknown_op_inside_a_function_is_named():
    with tf.Graph().as_default() as g1:
        p = tf.placeholder(tf.bool, [], name="p")
        tf.cond(p, lambda: tf.constant(1.0), lambda: tf.constant(2.0), name="c")
    gd = g1.as_graph_def()
    gd.library.function[0].node_def[0].op = "NoSuchOp"
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="NoSuchOp"):
            tf.import_graph_def(gd, name="")


# -- with TensorFlow ------------------------------------------------------------------------------
def _tf():
    tf_ref = pytest.importorskip("tensorflow.compat.v1")
    tf_ref.disable_eager_execution()
    return tf_ref


def test_tensorflow_runs_jitflow_loops_and_conds(tmp_path):
    tf_ref = _tf()
    with tf.Graph().as_default() as g1:
        _build_like_fixture(tf)
        with tf.Session() as sess:
            want = _run_all(sess)
    path = tf.train.write_graph(g1, str(tmp_path), "cf.pb", as_text=False)
    gd = tf_ref.GraphDef.FromString(open(path, "rb").read())
    with tf_ref.Graph().as_default() as g2:
        tf_ref.import_graph_def(gd, name="")
        with tf_ref.Session(graph=g2) as sess:
            got = _run_all(sess)
    for a, b in zip(want, got):
        for k in OUTPUTS:
            np.testing.assert_allclose(a[k], b[k], rtol=1e-6)
            assert np.asarray(a[k]).dtype == np.asarray(b[k]).dtype


def test_tensorflow_restores_a_jitflow_meta_graph_with_a_loop(tmp_path):
    tf_ref = _tf()
    with tf.Graph().as_default():
        w = tf.Variable(np.array([0.5, 2.0], np.float32), name="w")
        x = tf.placeholder(tf.float32, [2], name="x")
        _, y = tf.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y * w),
                             [tf.constant(0), x])
        r = tf.cond(tf.reduce_sum(y) > 5.0, lambda: y - 1.0, lambda: y + w)
        tf.identity(r, name="r")
        saver = tf.train.Saver()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            prefix = saver.save(sess, str(tmp_path / "model"))
            want = sess.run("r:0", {"x:0": np.array([8.0, 1.0], np.float32)})
    with tf_ref.Graph().as_default() as g:
        saver = tf_ref.train.import_meta_graph(prefix + ".meta")
        with tf_ref.Session(graph=g) as sess:
            saver.restore(sess, prefix)
            got = sess.run("r:0", {"x:0": np.array([8.0, 1.0], np.float32)})
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_tensorflow_runs_jitflow_tensor_arrays_in_loops(tmp_path):
    tf_ref = _tf()
    path = tf.train.write_graph(_tensor_array_graph(), str(tmp_path), "ta.pb", as_text=False)
    gd = tf_ref.GraphDef.FromString(open(path, "rb").read())
    with tf_ref.Graph().as_default() as g:
        tf_ref.import_graph_def(gd, name="")
        with tf_ref.Session(graph=g) as sess:
            _check_tensor_arrays(sess.run(TA_NAMES, {"x:0": TA_X}))


def test_reads_what_tensorflow_writes_now(tmp_path):
    """A fresh TensorFlow-written file (control flow v2) against the hand reference, and the
    same graph built by TensorFlow and run by TensorFlow."""
    _tf()
    from make_control_flow import write_control_flow
    path, expected = write_control_flow(str(tmp_path))
    with tf.Graph().as_default() as g:
        tf.import_graph_def(path, name="")
        with tf.Session(graph=g) as sess:
            got = _run_all(sess)
    _check(got)
    for k, res in enumerate(got):
        for name in OUTPUTS:
            np.testing.assert_allclose(res[name], expected[f"{name}_{k}"], rtol=1e-6)


def _saved_loop_model(export_dir: str):
    with tf.Graph().as_default():
        w = tf.Variable(np.array([0.5, 2.0], np.float32), name="w")
        x = tf.placeholder(tf.float32, [2], name="x")
        _, y = tf.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y * w),
                             [tf.constant(0), x])
        r = tf.cond(tf.reduce_sum(y) > 5.0, lambda: y - 1.0, lambda: y + w)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            tf.saved_model.simple_save(sess, export_dir, inputs={"x": x}, outputs={"r": r})


def test_saved_model_with_a_loop_and_a_cond(tmp_path):
    export_dir = str(tmp_path / "model")
    _saved_loop_model(export_dir)
    with tf.Graph().as_default() as g:
        with tf.Session(graph=g) as sess:
            meta = tf.saved_model.loader.load(sess, ["serve"], export_dir)
            sig = meta.signature_def["serving_default"]
            got = sess.run(sig.outputs["r"].name,
                           {sig.inputs["x"].name: np.array([8.0, 1.0], np.float32)})
    # y = [8, 1] * [0.5, 2] ** 3 = [1, 8]; sum 9 > 5: y - 1
    np.testing.assert_array_equal(got, [0.0, 7.0])


def test_tensorflow_loads_a_jitflow_saved_model_with_a_loop(tmp_path):
    tf_ref = _tf()
    export_dir = str(tmp_path / "model")
    _saved_loop_model(export_dir)
    with tf_ref.Graph().as_default() as g:
        with tf_ref.Session(graph=g) as sess:
            meta = tf_ref.saved_model.loader.load(sess, ["serve"], export_dir)
            sig = meta.signature_def["serving_default"]
            got = sess.run(sig.outputs["r"].name,
                           {sig.inputs["x"].name: np.array([8.0, 1.0], np.float32)})
    np.testing.assert_array_equal(got, [0.0, 7.0])


def test_reads_tf1_frames_tensorflow_writes_now(tmp_path):
    """Fresh TF1-frame graphs: the fixture's, and loops and conds of other shapes (no iteration
    limit, a branch returning its input, a cond of two outputs, a loop in a branch)."""
    tf_ref = _tf()
    from make_control_flow import write_control_flow
    path, expected = write_control_flow(str(tmp_path), v2=False)
    with tf.Graph().as_default() as g:
        tf.import_graph_def(path, name="")
        with tf.Session(graph=g) as sess:
            got = _run_all(sess)
    _check(got, tensor_array=False)
    from tensorflow.python.ops import control_flow_util
    saved = control_flow_util.ENABLE_CONTROL_FLOW_V2
    control_flow_util.ENABLE_CONTROL_FLOW_V2 = False
    try:
        with tf_ref.Graph().as_default() as g:
            x = tf_ref.placeholder(tf_ref.float32, [None], name="x")
            p = tf_ref.placeholder(tf_ref.bool, [], name="p")
            k, y = tf_ref.while_loop(lambda k, y: tf_ref.reduce_sum(y) < 50.0,
                                     lambda k, y: (k + 1, y * 2.0 + 1.0), (tf_ref.constant(0), x))
            a, b = tf_ref.cond(p, lambda: (x, y * 2.0), lambda: (x + 1.0, tf_ref.while_loop(
                lambda j, z: j < 3, lambda j, z: (j + 1, z - 1.0), (0, y))[1]))
            for t, name in ((k, "k"), (y, "y"), (a, "a"), (b, "b")):
                tf_ref.identity(t, name=name)
    finally:
        control_flow_util.ENABLE_CONTROL_FLOW_V2 = saved
    assert "Enter" in {n.op for n in g.as_graph_def().node}
    feeds = [{"x:0": np.array([1.0, 2.0], np.float32), "p:0": v} for v in (True, False)]
    with tf_ref.Session(graph=g) as sess:
        want = [sess.run(["k:0", "y:0", "a:0", "b:0"], f) for f in feeds]
    with tf.Graph().as_default() as g2:
        tf.import_graph_def(g.as_graph_def().SerializeToString(), name="")
        with tf.Session(graph=g2) as sess:
            for f, w in zip(feeds, want):
                for a_, b_ in zip(sess.run(["k:0", "y:0", "a:0", "b:0"], f), w):
                    np.testing.assert_allclose(a_, b_, rtol=1e-6)


def test_reads_tf1_tensor_arrays_tensorflow_writes_now(tmp_path):
    _tf()
    from make_control_flow import RNN_X, write_rnn_v1
    path, expected = write_rnn_v1(str(tmp_path))
    with tf.Graph().as_default() as g:
        tf.import_graph_def(path, name="")
        with tf.Session(graph=g) as sess:
            out, state = sess.run(["out:0", "state:0"], {"x:0": RNN_X})
    np.testing.assert_allclose(out, expected["out"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(state, expected["state"], rtol=1e-5, atol=1e-6)
