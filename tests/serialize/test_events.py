"""Event files through the Event/Summary messages: TensorFlow's golden file read without it,
jitflow's files read back (and by TensorFlow, in tests/test_summary.py), damage detected."""
from __future__ import annotations

import glob
import os

import numpy as np
import pytest

import jitflow as tf

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")


def test_golden_event_file_written_by_tensorflow():
    path, = glob.glob(os.path.join(DATA, "events", "events.out.tfevents.*"))
    events = list(tf.train.summary_iterator(path))
    assert events[0].file_version == "brain.Event:2"
    graph = tf.GraphDef.FromString(events[1].graph_def)
    assert {"x", "Mean"} <= {n.name for n in graph.node}
    assert tf.MetaGraphDef.FromString(events[2].meta_graph_def).graph_def.node
    summaries = [e for e in events if e.HasField("summary")]
    assert [e.step for e in summaries] == [0, 1, 2]
    for step, e in enumerate(summaries):
        values = {v.tag: v for v in e.summary.value}
        x = np.arange(4.0) * (step + 1)
        # TF's tag is "mean_1": its reduce_mean op had taken the name "Mean"
        assert values["mean_1"].simple_value == pytest.approx(x.mean())
        h = values["values"].histo
        assert (h.num, h.min, h.max, h.sum) == (4, x.min(), x.max(), x.sum())
    assert events[-1].session_log.status == tf.SessionLog.STOP and events[-1].step == 3


def test_our_events_read_back(tmp_path, backend):
    x = tf.placeholder(tf.float32, [None], name="x")
    tf.summary.scalar("m", tf.reduce_mean(x))
    tf.summary.histogram("h", x)
    merged = tf.summary.merge_all()
    writer = tf.summary.FileWriter(str(tmp_path), tf.get_default_graph())
    with tf.Session() as sess:
        writer.add_summary(sess.run(merged, {x: [1.0, 3.0]}), 5)
    writer.add_session_log(tf.SessionLog(status=tf.SessionLog.CHECKPOINT,
                                         checkpoint_path="/ck"), 6)
    writer.add_meta_graph(tf.train.export_meta_graph(), 7)
    writer.close()
    path, = glob.glob(str(tmp_path / "events.out.tfevents.*"))
    events = list(tf.train.summary_iterator(path))
    assert [e.WhichOneof("what") for e in events] == [
        "file_version", "graph_def", "meta_graph_def", "summary", "session_log",
        "meta_graph_def"]
    graph = tf.GraphDef.FromString(events[1].graph_def)
    nodes = {n.name: n for n in graph.node}
    assert nodes["x"].attr["dtype"].type == 1   # the full GraphDef, attributes included
    values = {v.tag: v for v in events[3].summary.value}
    assert values["m"].simple_value == 2.0 and values["h"].histo.num == 2
    assert events[4].session_log.checkpoint_path == "/ck" and events[4].step == 6
    assert tf.MetaGraphDef.FromString(events[5].meta_graph_def).graph_def.node


def test_damaged_event_file_is_data_loss(tmp_path):
    writer = tf.summary.FileWriter(str(tmp_path))
    writer.add_summary(tf.Summary(value=[tf.Summary.Value(tag="a", simple_value=1.0)]), 1)
    writer.close()
    path, = glob.glob(str(tmp_path / "events.out.tfevents.*"))
    raw = bytearray(open(path, "rb").read())
    raw[-6] ^= 0x20
    with open(path, "wb") as f:
        f.write(raw)
    it = tf.train.summary_iterator(path)
    assert next(it).file_version == "brain.Event:2"
    with pytest.raises(tf.errors.DataLossError, match="corrupted record"):
        next(it)


def test_tensorflow_summary_iterator_reads_session_logs(tmp_path):
    tf_ref = pytest.importorskip("tensorflow.compat.v1")
    writer = tf.summary.FileWriter(str(tmp_path))
    writer.add_session_log(tf.SessionLog(status=tf.SessionLog.START), 2)
    writer.close()
    path, = glob.glob(str(tmp_path / "events.out.tfevents.*"))
    events = list(tf_ref.train.summary_iterator(path))
    assert events[1].session_log.status == tf_ref.SessionLog.START and events[1].step == 2
