"""TFRecord files: compression (GZIP, ZLIB) as TensorFlow writes it, the options' spellings,
TensorFlow's reader semantics for damaged and cut files, and the writer's errors."""
from __future__ import annotations

import gzip
import struct
import zlib

import pytest

import jitflow as tf
from jitflow.serialize import crc32c
from jitflow.serialize.tfrecord import encode_record, read_records

RECORDS = [b"hello", b"", b"x" * 1000, bytes(range(256)) * 50]


def _framed(records) -> bytes:
    return b"".join(encode_record(r) for r in records)


def _write(path, records, options=None) -> bytes:
    with tf.io.TFRecordWriter(str(path), options) as w:
        for r in records:
            w.write(r)
    return path.read_bytes()


@pytest.mark.parametrize("compression", ["", "GZIP", "ZLIB"])
def test_round_trip_each_compression(tmp_path, compression):
    path = tmp_path / "r.tfrecord"
    _write(path, RECORDS, compression)
    assert list(tf.io.tf_record_iterator(str(path), compression)) == RECORDS
    assert list(tf.python_io.tf_record_iterator(
        str(path), tf.python_io.TFRecordOptions(compression))) == RECORDS


def test_compressed_files_are_the_framed_records_in_gzip_and_zlib(tmp_path):
    raw = _framed(RECORDS)
    # by hand: the framing of the first record (length 5, its masked CRC, data, data CRC)
    assert raw[:12] == struct.pack("<QI", 5, crc32c.masked_value(struct.pack("<Q", 5)))
    assert raw[12:17] == b"hello"
    gz = _write(tmp_path / "g", RECORDS, "GZIP")
    zl = _write(tmp_path / "z", RECORDS, tf.io.TFRecordCompressionType.ZLIB)
    assert gz[:3] == b"\x1f\x8b\x08" and gzip.decompress(gz) == raw
    assert zl[:2] == b"x\x9c" and zlib.decompress(zl) == raw
    assert _write(tmp_path / "n", RECORDS) == raw


def test_options_spellings_and_errors():
    opts = tf.io.TFRecordOptions
    assert opts.get_compression_type_string(None) == ""
    assert opts.get_compression_type_string(tf.io.TFRecordCompressionType.GZIP) == "GZIP"
    assert opts.get_compression_type_string(1) == "ZLIB"
    assert opts.get_compression_type_string(opts("GZIP")) == "GZIP"
    assert opts(2).compression_type == 2   # kept as given
    for bad in ("gzip", "BZ2", 7):
        with pytest.raises(ValueError, match="Not a valid compression_type"):
            opts(bad)
    with pytest.raises(ValueError, match="Not a valid compression_type"):
        tf.io.TFRecordWriter("/tmp/never-written.tfrecord", "BZ2")


def test_writer_errors(tmp_path):
    w = tf.io.TFRecordWriter(str(tmp_path / "w.tfrecord"))
    w.write("h\u00e9llo")   # str is written as UTF-8
    with pytest.raises(TypeError, match="bytes or str"):
        w.write(5)
    w.close()
    w.close()   # closing again is harmless
    for call in (lambda: w.write(b"x"), w.flush):
        with pytest.raises(tf.errors.FailedPreconditionError, match="Writer is closed"):
            call()
    assert list(tf.io.tf_record_iterator(str(tmp_path / "w.tfrecord"))) == [b"h\xc3\xa9llo"]
    with pytest.raises(tf.errors.NotFoundError, match="No such file or directory"):
        tf.io.TFRecordWriter(str(tmp_path / "no" / "dir.tfrecord"))
    with pytest.raises(tf.errors.NotFoundError, match="No such file or directory"):
        tf.io.tf_record_iterator(str(tmp_path / "missing"))


def test_reader_semantics_for_cut_and_damaged_files(tmp_path):
    """As TensorFlow: a partial header ends the file quietly; a complete header with missing
    data is a truncated record; checksums name the offset (the data's for a data checksum)."""
    raw = _framed(RECORDS)
    path = tmp_path / "r.tfrecord"
    # records start at 0, 21, 37 and 1053
    for cut, want in ((5, []), (30, [5]), (40, [5, 0])):
        path.write_bytes(raw[:cut])
        assert [len(r) for r in tf.io.tf_record_iterator(str(path))] == want, cut
    for cut, offset in ((12, 0), (60, 37)):
        path.write_bytes(raw[:cut])
        with pytest.raises(tf.errors.DataLossError, match=f"truncated record at {offset}"):
            list(tf.io.tf_record_iterator(str(path)))
    for flip, msg in ((15, "corrupted record at 12"),
                      (9, r"corrupted record at 0 \(Is this even a TFRecord file\?\)"),
                      (22, "corrupted record at 21")):
        bad = bytearray(raw)
        bad[flip] ^= 1
        path.write_bytes(bytes(bad))
        with pytest.raises(tf.errors.DataLossError, match=msg):
            list(read_records(str(path)))


def test_reading_with_the_wrong_compression_is_data_loss(tmp_path):
    path = tmp_path / "r.tfrecord"
    _write(path, RECORDS)
    with pytest.raises(tf.errors.DataLossError):
        list(tf.io.tf_record_iterator(str(path), "ZLIB"))
    _write(path, RECORDS, "GZIP")
    with pytest.raises(tf.errors.DataLossError, match="Is this even a TFRecord file"):
        list(tf.io.tf_record_iterator(str(path)))


# -- TensorFlow parity ----------------------------------------------------------------------
@pytest.mark.parametrize("compression", ["", "GZIP", "ZLIB"])
def test_same_bytes_as_tensorflow_and_each_reads_the_other(tmp_path, compression):
    tf_ref = pytest.importorskip("tensorflow.compat.v1")
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    _write(ours, RECORDS, compression)
    with tf_ref.io.TFRecordWriter(str(theirs), compression or None) as w:
        for r in RECORDS:
            w.write(r)
    assert ours.read_bytes() == theirs.read_bytes()
    assert list(tf_ref.io.tf_record_iterator(str(ours), compression)) == RECORDS
    assert list(tf.io.tf_record_iterator(str(theirs), compression)) == RECORDS


def test_cut_files_read_as_tensorflow_reads_them(tmp_path):
    tf_ref = pytest.importorskip("tensorflow.compat.v1")
    raw = _framed(RECORDS)
    path = tmp_path / "r.tfrecord"

    def outcome(module):
        try:
            return [len(r) for r in module.io.tf_record_iterator(str(path))]
        except module.errors.DataLossError as e:
            return str(e).split("'")[0].split(" in ")[0].strip()
    for cut in (5, 12, 20, 30, 40, 60, len(raw) - 1):
        path.write_bytes(raw[:cut])
        assert outcome(tf) == outcome(tf_ref), cut
    for flip in (9, 15, 22, 40):
        bad = bytearray(raw)
        bad[flip] ^= 1
        path.write_bytes(bytes(bad))
        assert outcome(tf) == outcome(tf_ref), flip


def test_example_records_in_a_file_read_back(tmp_path):
    """The ordinary use: serialized Examples in a GZIP file, read by the iterator."""
    path = tmp_path / "ex.tfrecord"
    with tf.io.TFRecordWriter(str(path), "GZIP") as w:
        for i in range(3):
            ex = tf.train.Example(features=tf.train.Features(feature={
                "i": tf.train.Feature(int64_list=tf.train.Int64List(value=[i]))}))
            w.write(ex.SerializeToString())
    got = [tf.train.Example.FromString(r).features.feature["i"].int64_list.value[0]
           for r in tf.io.tf_record_iterator(str(path), "GZIP")]
    assert got == [0, 1, 2]
