"""TensorFlow's V2 checkpoint bundle: `<prefix>.index` and `<prefix>.data-00000-of-00001`.

The index is a table (`jitflow.serialize.table`) whose empty key holds a `BundleHeaderProto`
(number of data shards, endianness, format version) and whose other keys, the tensor names in
sorted order, hold a `BundleEntryProto` each: dtype, shape, shard, offset and size of the bytes
in the data file, and the masked CRC-32C of those bytes. The data file holds the tensors' bytes
back to back: little-endian elements for numeric and bool tensors; for string tensors the
varint64 length of every element, a 4-byte masked CRC-32C of the lengths (taken over each length
as a little-endian uint32, or uint64 past 2**32 - 1, as TensorFlow does), then the elements'
bytes.

`encode_bundle` makes both files' contents; `BundleReader` reads them, verifying every checksum
it meets: a damaged, truncated or mismatched file raises `DataLossError` naming the file.
"""
from __future__ import annotations

import os
import struct
from typing import Iterable

import numpy as np

from jitflow.core import errors
from jitflow.serialize import crc32c
from jitflow.serialize.table import TableBuilder, read_table
from jitflow.serialize.tensor_util import (dtype_to_enum, enum_to_dtype, enum_to_numpy,
                                           shape_from_proto, shape_proto)

__all__ = ["encode_bundle", "BundleReader", "is_bundle_index", "data_filename"]

_VERSION_PRODUCER = 1  # TensorFlow's kTensorBundleVersion


def data_filename(prefix: str, shard: int = 0, num_shards: int = 1) -> str:
    return f"{prefix}.data-{shard:05d}-of-{num_shards:05d}"


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _length_words(lengths) -> bytes:
    return b"".join(struct.pack("<I" if n <= 0xFFFFFFFF else "<Q", n) for n in lengths)


def _tensor_bytes(arr: np.ndarray) -> bytes:
    if _is_string(arr):
        items = [x if isinstance(x, bytes) else str(x).encode("utf-8") if isinstance(x, str)
                 else bytes(x) for x in arr.reshape(-1)]
        lengths = b"".join(_varint(len(x)) for x in items)
        check = struct.pack("<I", crc32c.masked_value(_length_words(len(x) for x in items)))
        return lengths + check + b"".join(items)
    return np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()


def _is_string(arr: np.ndarray) -> bool:
    return arr.dtype == object or arr.dtype.kind in "SU"


def _string_crc_parts(data: bytes, n: int):
    """(lengths, position after the lengths) of a string entry's bytes; ValueError if bad."""
    lengths = []
    pos = 0
    for _ in range(n):
        v, shift = 0, 0
        while True:
            if pos >= len(data):
                raise ValueError("lengths run past the entry")
            b = data[pos]
            pos += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        lengths.append(v)
    return lengths, pos


def _entry_crc(arr: np.ndarray, data: bytes) -> int:
    if not _is_string(arr):
        return crc32c.masked_value(data)
    lengths, pos = _string_crc_parts(data, arr.size)
    crc = crc32c.value(_length_words(lengths))
    return crc32c.mask(crc32c.extend(crc, data[pos:]))


def encode_bundle(named_arrays: Iterable) -> tuple:
    """(data chunks, index bytes) of a one-shard bundle holding the (name, array) pairs.

    The entry CRC of a string tensor covers its lengths as the checksum words above, the
    length checksum and the elements (not the varint bytes), as TensorFlow computes it."""
    from jitflow.serialize import protos
    items = sorted(((str(n), np.asarray(a)) for n, a in named_arrays), key=lambda x: x[0])
    header = protos.BundleHeaderProto(num_shards=1, endianness=0)
    header.version.producer = _VERSION_PRODUCER
    table = TableBuilder()
    table.add(b"", header.SerializeToString())
    chunks = []
    offset = 0
    for name, arr in items:
        dt = "string" if _is_string(arr) else arr.dtype
        data = _tensor_bytes(arr)
        entry = protos.BundleEntryProto(dtype=dtype_to_enum(dt), shard_id=0, offset=offset,
                                        size=len(data), crc32c=_entry_crc(arr, data))
        shape_proto(list(arr.shape), entry.shape)
        table.add(name.encode("utf-8"), entry.SerializeToString())
        chunks.append(data)
        offset += len(data)
    return chunks, table.finish()


def is_bundle_index(head: bytes, size: int) -> bool:
    """Whether a file that starts with `head` (and has `size` bytes) may be a table: jitflow's
    older JSON index starts with '{'."""
    return not head.lstrip().startswith(b"{") and size >= 48


class BundleReader:
    """The entries of a V2 checkpoint, and its tensors on demand (checked)."""

    def __init__(self, prefix: str, index_bytes: bytes) -> None:
        from google.protobuf.message import DecodeError

        from jitflow.serialize import protos
        self._prefix = prefix
        index_file = prefix + ".index"
        pairs = read_table(index_bytes, index_file)
        if not pairs or pairs[0][0] != b"":
            raise errors.DataLossError(None, None, f"Unable to read {index_file}: the bundle "
                                                   "header entry is missing")
        try:
            header = protos.BundleHeaderProto.FromString(pairs[0][1])
            entries = {k.decode("utf-8"): protos.BundleEntryProto.FromString(v)
                       for k, v in pairs[1:]}
        except (DecodeError, UnicodeDecodeError) as e:
            raise errors.DataLossError(None, None, f"Unable to read {index_file}: bad entry "
                                                   f"({e})") from None
        if header.endianness != 0:
            raise errors.UnimplementedError(None, None, f"{index_file}: big-endian checkpoints "
                                                        "are not supported")
        self.num_shards = max(1, header.num_shards)
        self.entries = entries

    def shapes(self) -> dict:
        return {n: shape_from_proto(e.shape).as_list() for n, e in self.entries.items()}

    def dtype_enum(self, name: str) -> int:
        return self.entries[name].dtype

    def dtype(self, name: str):
        return enum_to_dtype(self.entries[name].dtype, f"tensor {name}")

    def read(self, name: str) -> np.ndarray:
        """The tensor `name`, its CRC verified."""
        e = self.entries[name]
        if len(e.slices):
            raise errors.UnimplementedError(
                None, None, f"Tensor {name} in {self._prefix} is saved in slices (a partitioned "
                            "variable); jitflow reads whole tensors only")
        path = data_filename(self._prefix, e.shard_id, self.num_shards)
        try:
            with open(path, "rb") as f:
                f.seek(e.offset)
                data = f.read(e.size)
        except FileNotFoundError:
            raise errors.NotFoundError(None, None, f"Checkpoint data file {path} not found "
                                                   f"(reading tensor {name})") from None
        if len(data) != e.size:
            raise errors.DataLossError(None, None, f"Truncated checkpoint data file {path}: "
                                                   f"tensor {name} needs bytes {e.offset}.."
                                                   f"{e.offset + e.size}")
        shape = shape_from_proto(e.shape).as_list()
        npd = enum_to_numpy(e.dtype, f"tensor {name}")
        n = int(np.prod(shape)) if shape else 1
        try:
            got = _entry_crc(np.empty(n, dtype=npd), data)
        except ValueError as err:
            raise errors.DataLossError(None, None, f"Bad string tensor {name} in {path}: "
                                                   f"{err}") from None
        if got != e.crc32c:
            raise errors.DataLossError(None, None, f"Checksum does not match: stored "
                                                   f"{e.crc32c} vs. calculated on the restored "
                                                   f"bytes {got} (tensor {name} in {path})")
        if npd == np.dtype(object):
            return _decode_strings(data, n, shape, name, path)
        if len(data) != n * npd.itemsize:
            raise errors.DataLossError(None, None, f"Tensor {name} in {path} has {len(data)} "
                                                   f"bytes; shape {shape} needs "
                                                   f"{n * npd.itemsize}")
        return np.frombuffer(data, dtype=npd.newbyteorder("<")).astype(npd).reshape(shape)


def _decode_strings(data: bytes, n: int, shape, name: str, path: str) -> np.ndarray:
    def bad(why):
        return errors.DataLossError(None, None, f"Bad string tensor {name} in {path}: {why}")
    try:
        lengths, pos = _string_crc_parts(data, n)
    except ValueError as e:
        raise bad(str(e)) from None
    if pos + 4 > len(data):
        raise bad("missing length checksum")
    (check,) = struct.unpack_from("<I", data, pos)
    if crc32c.masked_value(_length_words(lengths)) != check:
        raise bad("length checksum mismatch")
    pos += 4
    out = np.empty(n, dtype=object)
    for i, ln in enumerate(lengths):
        if pos + ln > len(data):
            raise bad("element runs past the entry")
        out[i] = data[pos:pos + ln]
        pos += ln
    return out.reshape(shape)


def read_index_file(prefix: str) -> bytes:
    path = prefix + ".index"
    with open(path, "rb") as f:
        return f.read()


def exists(prefix: str) -> bool:
    return os.path.isfile(prefix + ".index")
