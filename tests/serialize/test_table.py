"""The table of a checkpoint index and TFRecord framing: round trips, TF's reader where it is
installed, and damage raising DataLossError."""
from __future__ import annotations

import struct

import pytest

import jitflow as tf
from jitflow.serialize import crc32c
from jitflow.serialize.table import TABLE_MAGIC, TableBuilder, read_table
from jitflow.serialize.tfrecord import encode_record, read_records


def _pairs(n):
    return [(f"key/{i:05d}".encode(), bytes([i % 251]) * (i % 37)) for i in range(n)]


@pytest.mark.parametrize("n,block", [(0, 4096), (1, 4096), (40, 4096), (3000, 512)])
def test_table_round_trip(n, block):
    builder = TableBuilder(block_size=block)
    for k, v in _pairs(n):
        builder.add(k, v)
    raw = builder.finish()
    assert struct.unpack("<Q", raw[-8:])[0] == TABLE_MAGIC
    assert read_table(raw) == _pairs(n)


def test_keys_must_increase():
    b = TableBuilder()
    b.add(b"b", b"")
    with pytest.raises(ValueError, match="increasing"):
        b.add(b"a", b"")


def test_every_flipped_byte_is_detected():
    builder = TableBuilder(block_size=64)
    for k, v in _pairs(12):
        builder.add(k, v)
    raw = builder.finish()
    for i in range(len(raw)):
        bad = bytearray(raw)
        bad[i] ^= 0x10
        try:
            got = read_table(bytes(bad), "t.index")
        except tf.errors.DataLossError as e:
            assert "t.index" in str(e)
            continue
        # a flip in the footer's zero padding changes nothing that is read
        assert got == _pairs(12) and len(raw) - 48 <= i < len(raw) - 8, i


def test_records_round_trip_and_damage(tmp_path):
    path = tmp_path / "r.tfrecord"
    records = [b"", b"one", b"x" * 5000]
    path.write_bytes(b"".join(encode_record(r) for r in records))
    assert list(read_records(str(path))) == records
    raw = path.read_bytes()
    first = encode_record(b"")
    assert struct.unpack("<I", first[8:12])[0] == crc32c.masked_value(first[:8])
    for cut in (14, len(raw) - 2):   # a whole header, then too little data
        path.write_bytes(raw[:cut])
        with pytest.raises(tf.errors.DataLossError, match="truncated"):
            list(read_records(str(path)))
    path.write_bytes(raw[:5])   # a partial header ends the file (as TensorFlow reads it)
    assert list(read_records(str(path))) == []
    bad = bytearray(raw)
    bad[len(first) + 14] ^= 1   # a data byte of the second record
    path.write_bytes(bytes(bad))
    with pytest.raises(tf.errors.DataLossError, match="corrupted record"):
        list(read_records(str(path)))


def test_tensorflow_reads_our_records(tmp_path):
    tf_ref = pytest.importorskip("tensorflow.compat.v1")
    path = str(tmp_path / "r.tfrecord")
    with tf.io.TFRecordWriter(path) as w:
        for r in (b"a", b"bb" * 100):
            w.write(r)
    assert list(tf_ref.io.tf_record_iterator(path)) == [b"a", b"bb" * 100]
    path2 = str(tmp_path / "tf.tfrecord")
    with tf_ref.io.TFRecordWriter(path2) as w:
        w.write(b"from tf")
    assert list(tf.io.tf_record_iterator(path2)) == [b"from tf"]
