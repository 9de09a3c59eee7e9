"""Readers over a queue of file names: records, keys, headers, the end of the queue."""
from __future__ import annotations

import numpy as np
import pytest

import jitflow as tf
from jitflow.core import errors


def _files(tmp_path):
    a = tmp_path / "a.csv"
    a.write_bytes(b"h1\nx,1\ny,2\r\n")
    b = tmp_path / "b.csv"
    b.write_bytes(b"h2\nz,3")
    return [str(a), str(b)]


def _queue_of(names):
    q = tf.FIFOQueue(10, tf.string, shapes=[[]])
    return q, q.enqueue_many([names]), q.close()


def test_text_line_reader(tmp_path, backend):
    names = _files(tmp_path)
    q, fill, close = _queue_of(names)
    reader = tf.TextLineReader(skip_header_lines=1)
    key, value = reader.read(q)
    assert key.dtype == tf.string and value.shape.ndims == 0
    done = reader.num_work_units_completed()
    with tf.Session() as sess:
        sess.run([fill])
        sess.run(close)
        got = [sess.run([key, value]) for _ in range(3)]
        assert got == [[f"{names[0]}:2".encode(), b"x,1"], [f"{names[0]}:3".encode(), b"y,2"],
                       [f"{names[1]}:2".encode(), b"z,3"]]
        assert sess.run(reader.num_records_produced()) == 3
        with pytest.raises(errors.OutOfRangeError):
            sess.run(value)
        assert sess.run(done) == 2


def test_read_up_to_whole_file_and_fixed_length(tmp_path, backend):
    names = _files(tmp_path)
    q, fill, close = _queue_of(names)
    keys, vals = tf.TextLineReader().read_up_to(q, 2)
    with tf.Session() as sess:
        sess.run(fill)
        sess.run(close)
        assert sess.run(vals).tolist() == [b"h1", b"x,1"]
        assert sess.run(vals).tolist() == [b"y,2", b"h2"]
        assert sess.run(vals).tolist() == [b"z,3"]
    tf.reset_default_graph()
    q, fill, close = _queue_of(names)
    k, v = tf.WholeFileReader().read(q)
    with tf.Session() as sess:
        sess.run(fill)
        assert sess.run([k, v]) == [names[0].encode(), b"h1\nx,1\ny,2\r\n"]
    tf.reset_default_graph()
    binf = tmp_path / "r.bin"
    binf.write_bytes(bytes(range(12)))
    q, fill, close = _queue_of([str(binf)])
    k, v = tf.FixedLengthRecordReader(4, header_bytes=2, footer_bytes=2).read(q)
    rec = tf.decode_raw(v, tf.uint8) if hasattr(tf, "decode_raw") else v
    with tf.Session() as sess:
        sess.run(fill)
        sess.run(close)
        first = sess.run([k, v])
        assert first == [f"{binf}:0".encode(), bytes([2, 3, 4, 5])]
        assert sess.run(v) == bytes([6, 7, 8, 9])
        with pytest.raises(errors.OutOfRangeError):
            sess.run(rec)


def test_missing_file_is_not_found(tmp_path):
    q, fill, close = _queue_of([str(tmp_path / "nope.csv")])
    _, v = tf.TextLineReader().read(q)
    with tf.Session() as sess:
        sess.run(fill)
        with pytest.raises(errors.NotFoundError):
            sess.run(v)


def test_matching_files(tmp_path, backend):
    names = _files(tmp_path)
    m = tf.io.matching_files(str(tmp_path / "*.csv"))
    with tf.Session() as sess:
        assert sess.run(m).tolist() == [n.encode() for n in sorted(names)]


def test_reader_requires_a_queue():
    with pytest.raises(TypeError, match="queue"):
        tf.TextLineReader().read(tf.constant("x"))
    _ = np
