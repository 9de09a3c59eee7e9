"""TFRecord files: the framing of event files (and of `tf.io.TFRecordWriter`).

A record is `uint64 length, uint32 masked_crc32c(length bytes), data, uint32
masked_crc32c(data)`, all little-endian. Reading verifies both checksums: a damaged or
truncated record raises `DataLossError` naming the file and the offset.
"""
from __future__ import annotations

import struct
from typing import Iterator, Optional

from jitflow.core import errors
from jitflow.serialize import crc32c

__all__ = ["encode_record", "read_records", "TFRecordWriter", "tf_record_iterator"]


def encode_record(data: bytes) -> bytes:
    """One framed record."""
    length = struct.pack("<Q", len(data))
    return (length + struct.pack("<I", crc32c.masked_value(length)) + data
            + struct.pack("<I", crc32c.masked_value(data)))


def read_records(path: str) -> Iterator[bytes]:
    """The records of a TFRecord file, checked; DataLossError on damage."""
    with open(path, "rb") as f:
        offset = 0
        while True:
            head = f.read(12)
            if not head:
                return
            if len(head) < 12:
                raise errors.DataLossError(None, None, f"truncated record at {offset} in {path}")
            length_bytes = head[:8]
            (stored,) = struct.unpack("<I", head[8:])
            if crc32c.masked_value(length_bytes) != stored:
                raise errors.DataLossError(
                    None, None, f"corrupted record at {offset} in {path}: length checksum "
                                "mismatch")
            (n,) = struct.unpack("<Q", length_bytes)
            body = f.read(n + 4)
            if len(body) < n + 4:
                raise errors.DataLossError(None, None, f"truncated record at {offset} in {path}")
            data = body[:n]
            (stored,) = struct.unpack("<I", body[n:])
            if crc32c.masked_value(data) != stored:
                raise errors.DataLossError(
                    None, None, f"corrupted record at {offset} in {path}: data checksum "
                                "mismatch")
            yield data
            offset += 12 + n + 4


def tf_record_iterator(path: str, options=None) -> Iterator[bytes]:
    """`tf.io.tf_record_iterator` / `tf.python_io.tf_record_iterator` (uncompressed files)."""
    if options not in (None, "", 0) and getattr(options, "compression_type", 0) not in (0, None,
                                                                                          ""):
        raise NotImplementedError("compressed TFRecord files are not supported")
    return read_records(str(path))


class TFRecordWriter:
    """`tf.io.TFRecordWriter`: appends framed records to a new file."""

    def __init__(self, path: str, options: Optional[object] = None) -> None:
        self._f = open(str(path), "wb")

    def write(self, record: bytes) -> None:
        self._f.write(encode_record(bytes(record)))

    def flush(self) -> None:
        self._f.flush()

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> "TFRecordWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
