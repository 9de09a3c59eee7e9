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


# -- TFRecordReader -----------------------------------------------------------------------------
def _tfrecord(path, records, options=None) -> str:
    with tf.io.TFRecordWriter(str(path), options) as w:
        for r in records:
            w.write(r)
    return str(path)


@pytest.mark.parametrize("compression", ["", "GZIP", "ZLIB"])
def test_tfrecord_reader_keys_are_file_and_offset(tmp_path, backend, compression):
    # records of 5, 0 and 1000 bytes start at 0, 21 and 37 (12-byte header + 4-byte footer)
    a = _tfrecord(tmp_path / "a.tfrecord", [b"hello", b"", b"x" * 1000], compression)
    b = _tfrecord(tmp_path / "b.tfrecord", [b"last"], compression)
    q, fill, close = _queue_of([a, b])
    reader = tf.TFRecordReader(options=tf.io.TFRecordOptions(compression) if compression
                               else None)
    key, value = reader.read(q)
    with tf.Session() as sess:
        sess.run(fill)
        sess.run(close)
        got = [sess.run([key, value]) for _ in range(4)]
        with pytest.raises(errors.OutOfRangeError):
            sess.run(value)
        assert sess.run(reader.num_records_produced()) == 4
    assert [k for k, _ in got] == [f"{a}:0".encode(), f"{a}:21".encode(), f"{a}:37".encode(),
                                   f"{b}:0".encode()]
    assert [v for _, v in got] == [b"hello", b"", b"x" * 1000, b"last"]


def test_tfrecord_reader_read_up_to_and_damage(tmp_path):
    path = _tfrecord(tmp_path / "r.tfrecord", [b"a", b"bb", b"ccc"])
    q, fill, close = _queue_of([path])
    keys, vals = tf.TFRecordReader().read_up_to(q, 2)
    with tf.Session() as sess:
        sess.run(fill)
        sess.run(close)
        assert sess.run(vals).tolist() == [b"a", b"bb"]
        assert sess.run(vals).tolist() == [b"ccc"]
    tf.reset_default_graph()
    raw = bytearray(open(path, "rb").read())
    raw[13] ^= 1   # the first record's data
    open(path, "wb").write(bytes(raw))
    q, fill, close = _queue_of([path])
    _, v = tf.TFRecordReader().read(q)
    with tf.Session() as sess:
        sess.run(fill)
        with pytest.raises(errors.DataLossError, match="corrupted record at 12"):
            sess.run(v)
    with pytest.raises(ValueError, match="Not a valid compression_type"):
        tf.TFRecordReader(options="BZ2")


def test_tfrecord_reader_keys_match_tensorflow(tmp_path):
    tf_ref = pytest.importorskip("tensorflow.compat.v1")
    path = _tfrecord(tmp_path / "r.tfrecord", [b"hello", b"", b"x" * 1000], "GZIP")
    out = []
    for m in (tf_ref, tf):
        g = m.Graph()
        with g.as_default():
            q = m.FIFOQueue(4, m.string, shapes=[[]])
            fill = q.enqueue_many([[path]])
            r = m.TFRecordReader(options=m.python_io.TFRecordOptions(
                m.python_io.TFRecordCompressionType.GZIP))
            k, v = r.read_up_to(q, 3)
            with m.Session(graph=g) as sess:
                sess.run(fill)
                out.append([x.tolist() for x in sess.run([k, v])])
    assert out[0] == out[1]


# -- read_file / write_file ---------------------------------------------------------------------
def test_read_and_write_file(tmp_path, backend):
    target = tmp_path / "new" / "sub" / "f.bin"   # the folders are made, as TensorFlow
    data = bytes(range(256)) + b"\x00end"
    write = tf.io.write_file(str(target), data)
    name = tf.placeholder(tf.string, [])
    read = tf.read_file(name)
    assert read.shape.as_list() == [] and read.dtype == tf.string
    with tf.Session() as sess:
        assert sess.run(write) is None
        assert target.read_bytes() == data
        assert sess.run(read, {name: str(target)}) == data
        with pytest.raises(errors.NotFoundError, match="nope; No such file or directory"):
            sess.run(read, {name: str(tmp_path / "nope")})
        with pytest.raises(errors.FailedPreconditionError, match="Is a directory"):
            sess.run(read, {name: str(tmp_path / "new")})
    with pytest.raises(ValueError, match="Shape must be rank 0 but is rank 1"):
        tf.io.read_file([str(target)])
    with pytest.raises(ValueError, match="Shape must be rank 0 but is rank 1"):
        tf.write_file(str(target), ["a"])
    with pytest.raises(TypeError):
        tf.read_file(5)


def test_read_file_then_decode_in_a_pipeline(tmp_path, backend):
    pytest.importorskip("PIL")
    img = (np.arange(24, dtype=np.uint8).reshape(2, 4, 3) * 10)
    names = []
    for i in range(3):
        p = tmp_path / f"{i}.png"
        with tf.Session() as sess:
            p.write_bytes(sess.run(tf.image.encode_png(img + i)))
        names.append(str(p))
    ds = tf.data.Dataset.from_tensor_slices(names).map(
        lambda f: tf.image.decode_png(tf.io.read_file(f), channels=3))
    nxt = ds.make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        for i in range(3):
            np.testing.assert_array_equal(sess.run(nxt), img + i)
