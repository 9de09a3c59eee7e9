"""Session configuration as TF1 programs write it: ConfigProto and its messages, what a Session
honours of them, traced runs (RunOptions, RunMetadata, step stats), timelines and devices."""
from __future__ import annotations

import json

import numpy as np
import pytest

import jitflow as tf
from jitflow.core.session import register_backend, _BACKENDS
from jitflow.runtime import config as runtime_config

CPU = "/job:localhost/replica:0/task:0/device:CPU:0"


@pytest.fixture(autouse=True)
def _no_session_threads(monkeypatch):
    """A config's intra_op_parallelism_threads is process-wide: keep it out of other tests."""
    monkeypatch.setattr(runtime_config, "_SESSION_THREADS", [])
    monkeypatch.delenv("JITFLOW_THREADS", raising=False)


def _tf1():
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    tf1.disable_eager_execution()
    return tf1


# -- ConfigProto and its messages ------------------------------------------------------------------
def _common_config(t):
    """A config as TF1 tutorials write it (`t`: jitflow or tf.compat.v1)."""
    config = t.ConfigProto(gpu_options=t.GPUOptions(per_process_gpu_memory_fraction=0.4),
                           allow_soft_placement=True, log_device_placement=False,
                           intra_op_parallelism_threads=2, inter_op_parallelism_threads=1,
                           device_count={"GPU": 0})
    config.gpu_options.allow_growth = True
    config.gpu_options.visible_device_list = "0"
    config.graph_options.optimizer_options.global_jit_level = t.OptimizerOptions.ON_1
    config.graph_options.optimizer_options.opt_level = t.OptimizerOptions.L1
    return config


def test_config_messages_as_written_in_tf1_programs():
    config = _common_config(tf)
    assert config.gpu_options.allow_growth is True
    assert config.gpu_options.per_process_gpu_memory_fraction == 0.4
    assert config.gpu_options.visible_device_list == "0"
    assert config.allow_soft_placement and not config.log_device_placement
    assert (config.intra_op_parallelism_threads, config.inter_op_parallelism_threads) == (2, 1)
    assert dict(config.device_count) == {"GPU": 0}
    assert config.graph_options.optimizer_options.global_jit_level == 1
    assert tf.RunOptions.FULL_TRACE == 3 and tf.RunOptions.NO_TRACE == 0
    assert tf.OptimizerOptions.OFF == -1 and tf.OptimizerOptions.L0 == -1
    # the text form (repr and str) is protobuf's text format, fields in number order
    assert repr(tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)) == "trace_level: FULL_TRACE\n"
    text = str(config)
    assert text.index("device_count") < text.index("intra_op") < text.index("gpu_options")
    assert "  allow_growth: true\n" in text and "global_jit_level: ON_1" in text
    # the wire format: field numbers and types as TensorFlow's (hand-encoded)
    assert tf.GPUOptions(allow_growth=True).SerializeToString() == b"\x20\x01"
    assert tf.ConfigProto(allow_soft_placement=True).SerializeToString() == b"\x38\x01"
    assert tf.ConfigProto(intra_op_parallelism_threads=2).SerializeToString() == b"\x10\x02"
    back = tf.ConfigProto.FromString(config.SerializeToString())
    assert back == config and back.gpu_options.allow_growth


def test_config_field_validation():
    with pytest.raises(ValueError, match='no "foo" field'):
        tf.ConfigProto(foo=1)
    config = tf.ConfigProto()
    with pytest.raises(TypeError):
        config.gpu_options.allow_growth = "yes"
    with pytest.raises(AttributeError):
        config.gpu_options.no_such_option = 1
    with pytest.raises(TypeError, match="must be a tf.ConfigProto, but got \"str\""):
        tf.Session(config="allow_growth")
    with pytest.raises(TypeError, match="must be a tf.ConfigProto, but got \"GPUOptions\""):
        tf.Session(config=tf.GPUOptions())


def test_config_messages_match_tensorflow():
    tf1 = _tf1()
    ours, theirs = _common_config(tf), _common_config(tf1)
    assert ours.SerializeToString(deterministic=True) == \
        theirs.SerializeToString(deterministic=True)
    assert repr(ours) == repr(theirs)
    assert tf1.ConfigProto.FromString(ours.SerializeToString()) == theirs
    opts = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE, timeout_in_ms=5)
    assert str(opts) == str(tf1.RunOptions(trace_level=tf1.RunOptions.FULL_TRACE,
                                           timeout_in_ms=5))
    for name in ("ConfigProto", "GPUOptions", "GraphOptions", "OptimizerOptions", "RunOptions",
                 "RunMetadata"):
        assert getattr(tf, name).DESCRIPTOR.full_name == \
            getattr(tf1, name).DESCRIPTOR.full_name
    # a session takes TensorFlow's own ConfigProto too (same wire format)
    with tf.Session(config=theirs) as sess:
        assert sess._config.gpu_options.allow_growth


def test_session_accepts_config_and_honours_intra_op_threads():
    x = tf.placeholder(tf.float32, [None])
    y = x * 2.0
    with tf.Session(config=_common_config(tf)) as sess:
        assert sess.run(y, {x: [1.0, 2.5]}).tolist() == [2.0, 5.0]
        assert sess._config.gpu_options.allow_growth
    assert runtime_config.threads() == 2     # the config's intra_op_parallelism_threads


def test_jitflow_threads_wins_over_the_config(monkeypatch):
    monkeypatch.setenv("JITFLOW_THREADS", "1")
    tf.Session(config=tf.ConfigProto(intra_op_parallelism_threads=3)).close()
    assert runtime_config.threads() == 1
    monkeypatch.delenv("JITFLOW_THREADS")
    assert runtime_config.threads() == 3


def test_log_device_placement_prints_each_op_of_a_new_run(capsys, backend):
    a = tf.constant(1.0, name="c1")
    b = tf.add(a, a, name="sum")
    with tf.Session(config=tf.ConfigProto(log_device_placement=True)) as sess:
        assert sess.run(b) == 2.0
        first = capsys.readouterr().out.splitlines()
        sess.run(b)
        again = capsys.readouterr().out
    assert sorted(first) == sorted([f"c1: (Const): {CPU}", f"sum: (Add): {CPU}"])
    assert again == ""   # the same run signature is placed once


# -- traced runs -----------------------------------------------------------------------------------
def _model():
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    w = tf.Variable(np.ones((3, 1), np.float32), name="w")
    y = tf.matmul(x, w, name="y")
    z = tf.reduce_sum(y, name="z")
    step = tf.assign_add(w, tf.ones([3, 1]), name="step")
    return x, w, z, step


def test_traced_run_fills_step_stats(backend):
    x, w, z, step = _model()
    md = tf.RunMetadata()
    opts = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
    feed = {x: [[1.0, 2.0, 3.0]]}
    with tf.Session() as sess:
        sess.run(w.initializer)
        plain = sess.run(z, feed)
        traced = sess.run(z, feed, options=opts, run_metadata=md)
        assert traced == plain == 6.0 and type(traced) is type(plain)
        # the update of a traced run happens once
        sess.run(step, options=opts, run_metadata=md)
        np.testing.assert_array_equal(sess.run(w), np.full((3, 1), 2.0, np.float32))
        assert sess.run(z, feed) == 12.0    # untraced runs after a traced one
    (dev,) = md.step_stats.dev_stats
    assert dev.device == CPU
    names = [n.node_name for n in dev.node_stats]
    assert "step" in names and names.count("step") == 1
    for n in dev.node_stats:
        assert n.all_start_micros > 1_500_000_000_000_000     # microseconds since the epoch
        assert n.all_end_rel_micros == n.op_end_rel_micros >= 0
        assert n.all_start_nanos // 1000 == n.all_start_micros
        assert n.timeline_label.startswith(f"{n.node_name} = ")
    starts = [n.all_start_nanos for n in dev.node_stats]
    assert starts == sorted(starts)


def test_traced_run_records_every_op_it_runs():
    x, w, z, step = _model()
    md = tf.RunMetadata()
    with tf.Session(backend="interpreter") as sess:
        sess.run(w.initializer)
        sess.run(z, {x: [[1.0, 2.0, 3.0]]}, run_metadata=md,
                 options=tf.RunOptions(trace_level=tf.RunOptions.SOFTWARE_TRACE))
    nodes = md.step_stats.dev_stats[0].node_stats
    # the fed placeholder is not run; the ops in execution order
    assert [n.node_name for n in nodes] == ["w", "w/read", "y", "z"]
    stats = {n.node_name: n for n in nodes}
    assert stats["y"].timeline_label == "y = MatMul(x, w/read)"
    assert stats["z"].timeline_label == "z = Sum(y)"
    out = stats["y"].output[0]
    assert out.slot == 0 and [d.size for d in out.tensor_description.shape.dim] == [1, 1]
    assert out.tensor_description.dtype == 1     # DT_FLOAT
    assert out.tensor_description.allocation_description.requested_bytes == 4


def test_no_trace_and_no_metadata_leave_the_metadata_alone():
    x, w, z, step = _model()
    md = tf.RunMetadata()
    with tf.Session() as sess:
        sess.run(w.initializer)
        sess.run(z, {x: [[1.0, 1.0, 1.0]]}, options=tf.RunOptions(), run_metadata=md)
        sess.run(z, {x: [[1.0, 1.0, 1.0]]}, run_metadata=md)
        sess.run(z, {x: [[1.0, 1.0, 1.0]]},
                 options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE))
    assert not md.HasField("step_stats")


def test_traced_run_of_bad_options_raises_as_tensorflow():
    c = tf.constant(1.0)
    with tf.Session() as sess:
        with pytest.raises(AttributeError, match="tf.RunOptions"):
            sess.run(c, options="x")
        with pytest.raises(AttributeError, match="tf.RunMetadata"):
            sess.run(c, options=tf.RunOptions(), run_metadata="x")


def test_a_backend_can_time_its_own_kernels():
    class Traced:
        def __init__(self, inner):
            self.inner = inner

        def __call__(self, feeds, store):
            return self.inner(feeds, store)

        def traced(self, feeds, store, record):
            out = self.inner(feeds, store)
            record("kernel0", "JitflowKernel", ["x"], 1_000_000_000_000, 1_000_000_004_000,
                   out)
            return out

    class Backend:
        name = "traced-test"

        def __init__(self):
            from jitflow.backends.interpreter import Interpreter
            self.inner = Interpreter()

        def compile(self, plan):
            return Traced(self.inner.compile(plan))

    register_backend("traced-test", Backend)
    try:
        x = tf.placeholder(tf.float32, [2], name="x")
        y = x * 3.0
        md = tf.RunMetadata()
        with tf.Session(backend="traced-test") as sess:
            out = sess.run(y, {x: [1.0, 2.0]}, run_metadata=md,
                           options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE))
        assert out.tolist() == [3.0, 6.0]
        (node,) = md.step_stats.dev_stats[0].node_stats
        assert (node.node_name, node.timeline_label) == ("kernel0", "kernel0 = JitflowKernel(x)")
        assert (node.all_start_micros, node.all_end_rel_micros) == (1_000_000_000, 4)
    finally:
        _BACKENDS.pop("traced-test", None)


def test_traced_run_fills_tensorflows_run_metadata():
    tf1 = _tf1()
    x, w, z, step = _model()
    md = tf1.RunMetadata()
    with tf.Session() as sess:
        sess.run(w.initializer)
        sess.run(z, {x: [[1.0, 2.0, 3.0]]}, run_metadata=md,
                 options=tf1.RunOptions(trace_level=tf1.RunOptions.FULL_TRACE))
    assert md.step_stats.dev_stats[0].device == CPU
    assert "y" in [n.node_name for n in md.step_stats.dev_stats[0].node_stats]


def test_file_writer_records_run_metadata(tmp_path):
    x, w, z, step = _model()
    md = tf.RunMetadata()
    with tf.Session() as sess:
        sess.run(w.initializer)
        sess.run(z, {x: [[1.0, 2.0, 3.0]]}, run_metadata=md,
                 options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE))
    writer = tf.summary.FileWriter(str(tmp_path))
    writer.add_run_metadata(md, "step1", 1)
    writer.close()
    from jitflow.lib.summary import summary_iterator
    (path,) = list(tmp_path.iterdir())
    events = [e for e in summary_iterator(str(path)) if e.HasField("tagged_run_metadata")]
    assert events[0].tagged_run_metadata.tag == "step1"
    assert tf.RunMetadata.FromString(events[0].tagged_run_metadata.run_metadata) == md


# -- timelines -------------------------------------------------------------------------------------
def _traced_metadata():
    x, w, z, step = _model()
    md = tf.RunMetadata()
    with tf.Session() as sess:
        sess.run(w.initializer)
        sess.run([z, step], {x: [[1.0, 2.0, 3.0]]}, run_metadata=md,
                 options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE))
    return md


def test_timeline_is_chrome_trace_json_with_one_event_per_step():
    from jitflow.client import timeline
    md = _traced_metadata()
    stats = list(md.step_stats.dev_stats[0].node_stats)
    trace = json.loads(timeline.Timeline(md.step_stats).generate_chrome_trace_format())
    events = trace["traceEvents"]
    ops = [e for e in events if e["ph"] == "X"]
    assert len(ops) == len(stats) > 0
    assert sorted(e["args"]["name"] for e in ops) == sorted(s.node_name for s in stats)
    by_name = {e["args"]["name"]: e for e in ops}
    y = by_name["y"]
    assert (y["name"], y["cat"], y["pid"]) == ("MatMul", "Op", 1)
    assert (y["args"]["input0"], y["args"]["input1"]) == ("x", "w/read")
    s = next(st for st in stats if st.node_name == "y")
    assert (y["ts"], y["dur"]) == (s.all_start_micros, s.all_end_rel_micros)
    names = {e["args"]["name"] for e in events if e["ph"] == "M"}
    assert names == {"Allocators", f"{CPU} Compute", f"{CPU} Tensors"}
    # sequential ops share lane 0; nothing overlaps within a lane
    lanes: dict = {}
    for e in ops:
        lanes.setdefault(e["tid"], []).append((e["ts"], e["ts"] + e["dur"]))
    for spans in lanes.values():
        spans.sort()
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))


def test_timeline_lanes_flows_and_memory_by_hand():
    from jitflow.client.timeline import Timeline
    md = tf.RunMetadata()
    dev = md.step_stats.dev_stats.add(device=CPU)
    # a (0-10 us) and b (5-15 us) overlap: two lanes; c reads both after them
    for name, label, start, dur in (("a", "a = Const()", 100, 10), ("b", "b = Const()", 105, 10),
                                    ("c", "c = Add(a, b)", 120, 4)):
        n = dev.node_stats.add(node_name=name, timeline_label=label, all_start_micros=start,
                               all_end_rel_micros=dur, op_end_rel_micros=dur)
        out = n.output.add(slot=0)
        out.tensor_description.dtype = 1
    events = json.loads(Timeline(md.step_stats).generate_chrome_trace_format(
        show_memory=True))["traceEvents"]
    ops = {e["args"]["name"]: e for e in events if e["ph"] == "X"}
    assert (ops["a"]["tid"], ops["b"]["tid"], ops["c"]["tid"]) == (0, 1, 0)
    assert ops["c"]["name"] == "Add" and (ops["c"]["ts"], ops["c"]["dur"]) == (120, 4)
    # one arrow: b (lane 1) -> c (lane 0), from b's end to c's start
    starts = [e for e in events if e["ph"] == "s"]
    ends = [e for e in events if e["ph"] == "t"]
    assert [(e["name"], e["tid"], e["ts"]) for e in starts] == [("b", 1, 115)]
    assert [(e["name"], e["tid"], e["ts"]) for e in ends] == [("b", 0, 120)]
    # tensors: created when their op ends, deleted when their last reader ends
    objs = {(e["ph"], e["name"]): e for e in events if e["ph"] in "NOD"}
    assert objs[("N", "a:0")]["ts"] == 110 and objs[("D", "a:0")]["ts"] == 124
    assert objs[("D", "c:0")]["ts"] == 124 and objs[("N", "c:0")]["pid"] == 2
    assert "DT_FLOAT" in objs[("O", "a:0")]["args"]["snapshot"]["tensor_description"]
    no_flow = json.loads(Timeline(md.step_stats).generate_chrome_trace_format(
        show_dataflow=False))["traceEvents"]
    assert not [e for e in no_flow if e["ph"] in "st"]
    with pytest.raises(ValueError, match="op_time"):
        Timeline(md.step_stats).generate_chrome_trace_format(op_time="wall")


def test_timeline_under_tensorflows_module_path():
    from jitflow.python.client import timeline
    assert timeline.Timeline is tf.python.client.timeline.Timeline
    from jitflow.client.timeline import Timeline
    assert timeline.Timeline is Timeline


def test_timeline_reads_tensorflows_step_stats():
    tf1 = _tf1()
    from jitflow.client.timeline import Timeline
    g = tf1.Graph()
    with g.as_default():
        a = tf1.placeholder(tf1.float32, [2])
        b = tf1.reduce_sum(a * 2.0)
        md = tf1.RunMetadata()
        with tf1.Session() as sess:
            sess.run(b, {a: [1.0, 2.0]}, run_metadata=md,
                     options=tf1.RunOptions(trace_level=tf1.RunOptions.FULL_TRACE))
    n = sum(len(d.node_stats) for d in md.step_stats.dev_stats)
    events = json.loads(Timeline(md.step_stats).generate_chrome_trace_format())["traceEvents"]
    assert len([e for e in events if e["ph"] == "X"]) == n


# -- devices ---------------------------------------------------------------------------------------
def test_list_devices():
    with tf.Session() as sess:
        (dev,) = sess.list_devices()
        again = sess.list_devices()[0]
    assert (dev.name, dev.device_type, dev.memory_limit_bytes) == (CPU, "CPU", 268435456)
    assert isinstance(dev.incarnation, int) and dev.incarnation == again.incarnation
    assert -2 ** 63 <= dev.incarnation < 2 ** 63
    assert repr(dev) == f"_DeviceAttributes({CPU}, CPU, 268435456, {dev.incarnation})"
    sess = tf.Session()
    sess.close()
    with pytest.raises(RuntimeError, match="closed"):
        sess.list_devices()


def test_list_devices_matches_tensorflow():
    tf1 = _tf1()
    with tf1.Session(graph=tf1.Graph()) as s:
        theirs = [d for d in s.list_devices() if d.device_type == "CPU"][0]
    with tf.Session() as sess:
        ours = sess.list_devices()[0]
    assert (ours.name, ours.device_type, ours.memory_limit_bytes) == \
        (theirs.name, theirs.device_type, theirs.memory_limit_bytes)
    assert repr(ours).split(", ")[:3] == repr(theirs).split(", ")[:3]
