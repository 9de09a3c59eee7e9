"""TFRecord files: the framing of event files, `tf.io.TFRecordWriter`, `tf_record_iterator`,
`tf.data.TFRecordDataset` and `tf.TFRecordReader`.

A record is `uint64 length, uint32 masked_crc32c(length bytes), data, uint32
masked_crc32c(data)`, all little-endian. A file may be compressed as a whole: "GZIP" (a gzip
stream) or "ZLIB" (a zlib stream), with zlib's settings as TensorFlow's writer uses them
(default level, memLevel 9), so the bytes equal TensorFlow's.

Reading follows TensorFlow's reader: both checksums are verified (a damaged record raises
`DataLossError` "corrupted record at <offset>"), a record whose header is complete but whose
data is cut short raises "truncated record at <offset>", and a partial header at the end of a
file ends it quietly. Offsets count uncompressed bytes (they are `TFRecordReader`'s keys).
"""
from __future__ import annotations

import gzip
import io
import struct
import zlib
from typing import Iterator, Optional, Union

from jitflow.core import errors
from jitflow.serialize import crc32c

__all__ = ["encode_record", "read_records", "iter_records", "open_compressed",
           "compression_string", "TFRecordCompressionType", "TFRecordOptions",
           "TFRecordWriter", "tf_record_iterator"]

_HEADER = 12   # uint64 length + uint32 its checksum


def encode_record(data: bytes) -> bytes:
    """One framed record."""
    length = struct.pack("<Q", len(data))
    return (length + struct.pack("<I", crc32c.masked_value(length)) + data
            + struct.pack("<I", crc32c.masked_value(data)))


class TFRecordCompressionType:
    """`tf.io.TFRecordCompressionType`: how a TFRecord file is compressed."""

    NONE = 0
    ZLIB = 1
    GZIP = 2


_BY_NUMBER = {TFRecordCompressionType.NONE: "", TFRecordCompressionType.ZLIB: "ZLIB",
              TFRecordCompressionType.GZIP: "GZIP"}


def compression_string(options) -> str:
    """"", "ZLIB" or "GZIP" from a TFRecordOptions, a TFRecordCompressionType number, a string
    (bytes too) or None; ValueError for anything else (as TensorFlow)."""
    if isinstance(options, TFRecordOptions):
        return compression_string(options.compression_type)
    if isinstance(options, bytes):
        options = options.decode("utf-8", "replace")
    if not options:
        return ""
    if isinstance(options, int) and not isinstance(options, bool) and options in _BY_NUMBER:
        return _BY_NUMBER[options]
    if isinstance(options, str) and options in ("ZLIB", "GZIP"):
        return options
    raise ValueError(f'Not a valid compression_type: "{options}"')


class TFRecordOptions:
    """`tf.io.TFRecordOptions`: the compression of a TFRecord file and zlib's settings for
    writing it (None: zlib's defaults as TensorFlow sets them)."""

    compression_type_map = dict(_BY_NUMBER)

    def __init__(self, compression_type=None, flush_mode: Optional[int] = None,
                 input_buffer_size: Optional[int] = None,
                 output_buffer_size: Optional[int] = None, window_bits: Optional[int] = None,
                 compression_level: Optional[int] = None,
                 compression_method: Optional[int] = None, mem_level: Optional[int] = None,
                 compression_strategy: Optional[int] = None) -> None:
        compression_string(compression_type)   # validate now, keep the value as given
        self.compression_type = compression_type
        self.flush_mode = flush_mode
        self.input_buffer_size = input_buffer_size
        self.output_buffer_size = output_buffer_size
        self.window_bits = window_bits
        self.compression_level = compression_level
        self.compression_method = compression_method
        self.mem_level = mem_level
        self.compression_strategy = compression_strategy

    @classmethod
    def get_compression_type_string(cls, options) -> str:
        """The compression as "", "ZLIB" or "GZIP"."""
        return compression_string(options)


# -- reading --------------------------------------------------------------------------------
class _ZlibReader(io.RawIOBase):
    """A readable stream of a zlib-compressed file's uncompressed bytes."""

    def __init__(self, f, wbits: int) -> None:
        self._f = f
        self._z = zlib.decompressobj(wbits)
        self._buf = b""

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        while not self._buf:
            if self._z.eof:
                return 0
            chunk = self._f.read(1 << 16)
            try:
                self._buf = (self._z.decompress(chunk) if chunk else self._z.flush())
            except zlib.error as e:
                raise errors.DataLossError(None, None, f"inflate() failed: {e}") from None
            if not chunk and not self._buf:
                return 0
        n = min(len(b), len(self._buf))
        b[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n

    def close(self) -> None:
        self._f.close()
        super().close()


def open_compressed(path: str, compression: str = ""):
    """A binary stream of the uncompressed contents of `path` ("", "GZIP" or "ZLIB");
    NotFoundError when the file does not exist."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise errors.NotFoundError(None, None, f"{path}; No such file or directory") from None
    except IsADirectoryError:
        raise errors.FailedPreconditionError(None, None, f"{path}; Is a directory") from None
    if compression == "GZIP":
        return io.BufferedReader(_ZlibReader(f, 31))
    if compression == "ZLIB":
        return io.BufferedReader(_ZlibReader(f, 15))
    return f


def _read(f, n: int) -> bytes:
    try:
        return f.read(n)
    except (OSError, EOFError, gzip.BadGzipFile) as e:
        raise errors.DataLossError(None, None, f"inflate() failed: {e}") from None


def iter_records(f, path: str) -> Iterator[tuple]:
    """(offset, data) for each record of the open stream `f`, checked as TensorFlow checks."""
    offset = 0
    while True:
        head = _read(f, _HEADER)
        if len(head) < _HEADER:
            return   # nothing, or a partial header: the end of the file
        (stored,) = struct.unpack("<I", head[8:])
        if crc32c.masked_value(head[:8]) != stored:
            hint = " (Is this even a TFRecord file?)" if offset == 0 else ""
            raise errors.DataLossError(None, None,
                                       f"corrupted record at {offset}{hint} in {path}")
        (n,) = struct.unpack("<Q", head[:8])
        body = _read(f, n + 4)
        if len(body) < n + 4:
            raise errors.DataLossError(None, None, f"truncated record at {offset} in {path}")
        data = body[:n]
        (stored,) = struct.unpack("<I", body[n:])
        if crc32c.masked_value(data) != stored:
            raise errors.DataLossError(
                None, None, f"corrupted record at {offset + _HEADER} in {path}")
        yield offset, data
        offset += _HEADER + n + 4


def read_records(path: str, compression: str = "") -> Iterator[bytes]:
    """The records of a TFRecord file, checked; DataLossError on damage."""
    with open_compressed(str(path), compression) as f:
        for _, data in iter_records(f, str(path)):
            yield data


def tf_record_iterator(path: str, options=None) -> Iterator[bytes]:
    """`tf.io.tf_record_iterator` / `tf.python_io.tf_record_iterator`: the records of a file,
    compressed as `options` says (a TFRecordOptions, "GZIP", "ZLIB" or "")."""
    compression = compression_string(options)
    path = path.decode() if isinstance(path, bytes) else str(path)
    f = open_compressed(path, compression)   # NotFoundError now, as TensorFlow

    def records():
        with f:
            for _, data in iter_records(f, path):
                yield data
    return records()


# -- writing --------------------------------------------------------------------------------
def _compressor(options: Optional[TFRecordOptions], compression: str):
    o = options if isinstance(options, TFRecordOptions) else TFRecordOptions()
    bits = 15 if o.window_bits is None else int(o.window_bits)
    return zlib.compressobj(
        -1 if o.compression_level is None else int(o.compression_level),
        zlib.DEFLATED if o.compression_method is None else int(o.compression_method),
        bits + 16 if compression == "GZIP" else bits,
        9 if o.mem_level is None else int(o.mem_level),
        zlib.Z_DEFAULT_STRATEGY if o.compression_strategy is None
        else int(o.compression_strategy))


class TFRecordWriter:
    """`tf.io.TFRecordWriter`: writes framed records to a new file, compressed as `options`
    says (a TFRecordOptions, a TFRecordCompressionType, "GZIP", "ZLIB", "" or None)."""

    def __init__(self, path: Union[str, bytes], options=None) -> None:
        compression = compression_string(options)
        self._flush_mode = getattr(options, "flush_mode", None)
        self._z = _compressor(options, compression) if compression else None
        path = path.decode() if isinstance(path, bytes) else str(path)
        try:
            self._f = open(path, "wb")
        except FileNotFoundError:
            raise errors.NotFoundError(None, None, f"{path}; No such file or directory") \
                from None

    def write(self, record: Union[bytes, str]) -> None:
        """Append one record."""
        if self._f is None:
            raise errors.FailedPreconditionError(None, None, "Writer is closed.")
        if isinstance(record, str):
            record = record.encode("utf-8")
        elif not isinstance(record, (bytes, bytearray)):
            raise TypeError(f"TFRecordWriter.write() takes bytes or str, got "
                            f"{type(record).__name__}")
        data = encode_record(bytes(record))
        self._f.write(self._z.compress(data) if self._z is not None else data)

    def flush(self) -> None:
        """Push what is written to the file (a zlib sync point only when `flush_mode` asks)."""
        if self._f is None:
            raise errors.FailedPreconditionError(None, None, "Writer is closed.")
        if self._z is not None and self._flush_mode not in (None, zlib.Z_NO_FLUSH):
            self._f.write(self._z.flush(int(self._flush_mode)))
        self._f.flush()

    def close(self) -> None:
        """Finish the compressed stream and close the file (again: nothing)."""
        if self._f is None:
            return
        if self._z is not None:
            self._f.write(self._z.flush())
        self._f.close()
        self._f = None

    def __enter__(self) -> "TFRecordWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
