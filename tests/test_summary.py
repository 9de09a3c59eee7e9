"""tf.summary: summary ops (serialized Summary protos) and FileWriter event files."""
from __future__ import annotations

import glob
import os
import struct

import numpy as np
import pytest

import jitflow as tf
from jitflow.lib.summary import crc32c, masked_crc32c, tfrecord


def test_crc32c_known_values():
    # The CRC-32C check value and the iSCSI test vector of 32 zero bytes.
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(bytes(32)) == 0x8A9136AA
    crc = crc32c(b"abc")
    assert masked_crc32c(b"abc") == (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def test_tfrecord_framing():
    rec = tfrecord(b"hello")
    assert struct.unpack("<Q", rec[:8])[0] == 5
    assert struct.unpack("<I", rec[8:12])[0] == masked_crc32c(rec[:8])
    assert rec[12:17] == b"hello"
    assert struct.unpack("<I", rec[17:])[0] == masked_crc32c(b"hello")


def test_scalar_summary_names_and_bytes(backend):
    x = tf.placeholder(tf.float32, [])
    s = tf.summary.scalar("loss", x)
    with tf.name_scope("train"):
        h = tf.summary.scalar("acc", x * 2.0)
    assert s.name == "loss:0" and h.name == "train/acc:0" and s.dtype == tf.string
    assert tf.get_collection(tf.GraphKeys.SUMMARIES) == [s, h]
    m = tf.summary.merge_all()
    assert m.name == "Merge/MergeSummary:0"
    with tf.Session() as sess:
        got, merged = sess.run([s, m], {x: 1.5})
    # Summary{value{tag: "loss" simple_value: 1.5}} by hand: field 1 (message), tag field 1,
    # simple_value field 2 (fixed32).
    value = b"\x0a\x04loss" + b"\x15" + struct.pack("<f", 1.5)
    assert got == b"\x0a" + bytes([len(value)]) + value
    assert merged.startswith(got) and b"train/acc" in merged


def test_tags_are_cleaned_and_prefixed_by_family():
    a = tf.summary.scalar("my loss:1", tf.constant(1.0))
    b = tf.summary.scalar("lr", tf.constant(1.0), family="train")
    assert a.name == "my_loss_1:0" and b.name == "train/lr:0"
    assert a.op.get_attr("tag") == "my_loss_1"
    assert b.op.get_attr("tag") == "train/train/lr"  # TF1 repeats the family for its tab


def test_merge_all_empty_and_scalar_checks():
    assert tf.summary.merge_all() is None
    with pytest.raises(ValueError, match="scalar"):
        tf.summary.scalar("v", tf.zeros([2]))
    with pytest.raises(ValueError, match="4-D"):
        tf.summary.image("img", tf.zeros([2, 2]))


def _read_events(logdir):
    summary_iterator = pytest.importorskip("tensorflow.compat.v1").train.summary_iterator
    files = glob.glob(os.path.join(logdir, "events.out.tfevents.*"))
    assert len(files) == 1
    return list(summary_iterator(files[0]))


def test_file_writer_events_read_by_tensorflow(tmp_path, backend):
    x = tf.placeholder(tf.float32, [None])
    tf.summary.scalar("avg", tf.reduce_mean(x))
    tf.summary.histogram("values", x)
    tf.summary.image("img", tf.reshape(x, [1, 2, 2, 1]), max_outputs=1)
    tf.summary.text("note", "hello")
    merged = tf.summary.merge_all()
    writer = tf.summary.FileWriter(str(tmp_path), tf.get_default_graph())
    with tf.Session() as sess:
        for step in range(3):
            writer.add_summary(sess.run(merged, {x: [1.0, 2.0, 3.0, 4.0 + step]}), step)
    manual = tf.summary.Summary(value=[tf.summary.Summary.Value(tag="lr", simple_value=0.5)])
    writer.add_summary(manual, 7)
    writer.add_run_metadata(tf.RunMetadata(), "step007", 7)
    writer.flush()
    writer.close()
    events = _read_events(str(tmp_path))
    assert events[0].file_version == "brain.Event:2"
    nodes = {n.name: n for n in __import__("tensorflow").compat.v1.GraphDef.FromString(
        events[1].graph_def).node}
    assert nodes["Mean"].op == "Mean" and "Placeholder" in nodes
    summaries = [e for e in events if e.HasField("summary")]
    assert [e.step for e in summaries] == [0, 1, 2, 7]
    last = {v.tag: v for v in summaries[2].summary.value}
    assert last["avg"].simple_value == pytest.approx(3.0)
    histo = last["values"].histo
    assert (histo.num, histo.min, histo.max, histo.sum) == (4, 1.0, 6.0, 12.0)
    assert histo.sum_squares == 1 + 4 + 9 + 36 and sum(histo.bucket) == 4
    assert (last["img/image"].image.height, last["img/image"].image.width) == (2, 2)
    assert last["note"].tensor.string_val == [b"hello"]
    assert summaries[3].summary.value[0].tag == "lr"
    assert summaries[3].summary.value[0].simple_value == 0.5
    assert events[-1].tagged_run_metadata.tag == "step007" and events[-1].step == 7


def test_summaries_match_tensorflow(backend):
    t1 = pytest.importorskip("tensorflow.compat.v1")
    t1.disable_eager_execution()
    data = np.array([-3.0, -0.5, 0.0, 0.25, 1.0, 1.0, 7.5, 1e-13], dtype=np.float32)
    img = np.random.default_rng(0).uniform(-1, 1, (2, 3, 4, 3)).astype(np.float32)

    def program(t):
        x = t.placeholder(t.float32, [None])
        im = t.placeholder(t.float32, [None, 3, 4, 3])
        outs = [t.summary.scalar("s", t.reduce_sum(x)), t.summary.histogram("h", x),
                t.summary.image("im", im, max_outputs=2)]
        with t.Session() as sess:
            return sess.run(outs, {x: data, im: img})

    g = t1.Graph()
    with g.as_default():
        want = program(t1)
    got = program(tf)
    parse = t1.Summary.FromString
    assert parse(got[0]) == parse(want[0])
    assert parse(got[1]) == parse(want[1])
    gi, wi = parse(got[2]), parse(want[2])
    assert [v.tag for v in gi.value] == [v.tag for v in wi.value] == ["im/image/0",
                                                                         "im/image/1"]
    with g.as_default(), t1.Session() as sess:
        for a, b in zip(gi.value, wi.value):
            pa = sess.run(t1.image.decode_png(a.image.encoded_image_string))
            pb = sess.run(t1.image.decode_png(b.image.encoded_image_string))
            np.testing.assert_array_equal(pa, pb)
            assert (a.image.height, a.image.width, a.image.colorspace) == (3, 4, 3)


def test_file_writer_cache_and_reopen(tmp_path):
    w = tf.summary.FileWriterCache.get(str(tmp_path))
    assert tf.summary.FileWriterCache.get(str(tmp_path)) is w
    assert w.get_logdir() == str(tmp_path)
    tf.summary.FileWriterCache.clear()
    assert len(glob.glob(os.path.join(str(tmp_path), "events.out.tfevents.*"))) == 1
