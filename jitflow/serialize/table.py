"""The sorted string table of a checkpoint's `.index` file (LevelDB's table format, as
TensorFlow's `tensorflow/core/lib/io/table*` writes it).

File layout: data blocks, an (empty) meta-index block, an index block, and a 48-byte footer.
A block is a run of entries `varint32 shared, varint32 non_shared, varint32 value_length,
key[shared:], value`, where `shared` is the length of the prefix the key has in common with the
previous key (0 at each restart point), then the restart offsets (fixed32 each) and their count.
Each block is followed by a 5-byte trailer: the compression type (0: none) and the masked
CRC-32C of the block and that byte. The index block maps, for each data block, a key at least
the block's last key to the block's handle (varint64 offset, varint64 size). The footer holds
the handles of the meta-index and index blocks, zero-padded to 40 bytes, and the magic number.

Every checksum is verified when reading; a damaged file raises `DataLossError` naming it.
"""
from __future__ import annotations

import struct
from typing import Iterator

from jitflow.core import errors
from jitflow.serialize import crc32c

__all__ = ["TableBuilder", "read_table", "TABLE_MAGIC"]

TABLE_MAGIC = 0xDB4775248B80FB57
FOOTER_SIZE = 48
_BLOCK_TRAILER = 5
_BLOCK_SIZE = 256 * 1024  # a data block is closed once it grows past this
_RESTART_INTERVAL = 16


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


class _Corrupt(Exception):
    """Raised inside the parser; turned into DataLossError naming the file."""


def _read_varint(buf, pos: int, limit: int):
    result = 0
    shift = 0
    while True:
        if pos >= limit or shift > 63:
            raise _Corrupt("bad varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


class _BlockBuilder:
    def __init__(self, restart_interval: int) -> None:
        self.interval = restart_interval
        self.buf = bytearray()
        self.restarts = [0]
        self.counter = 0
        self.last_key = b""
        self.empty = True

    def add(self, key: bytes, value: bytes) -> None:
        shared = 0
        if self.counter < self.interval:
            limit = min(len(key), len(self.last_key))
            while shared < limit and key[shared] == self.last_key[shared]:
                shared += 1
        else:
            self.restarts.append(len(self.buf))
            self.counter = 0
        self.buf += _varint(shared) + _varint(len(key) - shared) + _varint(len(value))
        self.buf += key[shared:]
        self.buf += value
        self.last_key = key
        self.counter += 1
        self.empty = False

    def finish(self) -> bytes:
        return bytes(self.buf) + struct.pack(f"<{len(self.restarts)}I", *self.restarts) + \
            struct.pack("<I", len(self.restarts))

    def size_estimate(self) -> int:
        return len(self.buf) + 4 * len(self.restarts) + 4


class TableBuilder:
    """Accumulates (key, value) pairs added in strictly increasing key order; `finish()`
    returns the table's bytes."""

    def __init__(self, block_size: int = _BLOCK_SIZE) -> None:
        self._out = bytearray()
        self._block_size = block_size
        self._data = _BlockBuilder(_RESTART_INTERVAL)
        self._index = _BlockBuilder(1)
        self._last: bytes | None = None

    def _write_block(self, contents: bytes) -> bytes:
        handle = _varint(len(self._out)) + _varint(len(contents))
        trailer_type = b"\x00"
        crc = crc32c.mask(crc32c.extend(crc32c.value(contents), trailer_type))
        self._out += contents + trailer_type + struct.pack("<I", crc)
        return handle

    def _flush(self) -> None:
        if self._data.empty:
            return
        handle = self._write_block(self._data.finish())
        self._index.add(self._data.last_key, handle)
        self._data = _BlockBuilder(_RESTART_INTERVAL)

    def add(self, key: bytes, value: bytes) -> None:
        if self._last is not None and key <= self._last:
            raise ValueError(f"table keys must be added in increasing order: {key!r} after "
                             f"{self._last!r}")
        self._data.add(key, value)
        self._last = key
        if self._data.size_estimate() >= self._block_size:
            self._flush()

    def finish(self) -> bytes:
        self._flush()
        meta_handle = self._write_block(_BlockBuilder(_RESTART_INTERVAL).finish())
        index_handle = self._write_block(self._index.finish())
        footer = (meta_handle + index_handle).ljust(FOOTER_SIZE - 8, b"\x00")
        footer += struct.pack("<Q", TABLE_MAGIC)
        self._out += footer
        return bytes(self._out)


def _block(data, offset: int, size: int) -> memoryview:
    """The checked contents of the block at `offset` (CRC and compression byte verified)."""
    end = offset + size
    if offset < 0 or end + _BLOCK_TRAILER > len(data):
        raise _Corrupt(f"block at offset {offset} (size {size}) runs past the end of the file "
                       f"({len(data)} bytes): truncated")
    ctype = data[end]
    (stored,) = struct.unpack_from("<I", data, end + 1)
    actual = crc32c.value(data[offset:end + 1])
    if crc32c.unmask(stored) != actual:
        raise _Corrupt(f"block checksum mismatch at offset {offset}")
    if ctype != 0:
        raise _Corrupt(f"block at offset {offset} is compressed (type {ctype}); jitflow reads "
                       "uncompressed tables only")
    return data[offset:end]


def _entries(block) -> Iterator[tuple]:
    n = len(block)
    if n < 4:
        raise _Corrupt("block too short")
    (num_restarts,) = struct.unpack_from("<I", block, n - 4)
    limit = n - 4 - 4 * num_restarts
    if num_restarts == 0 or limit < 0:
        raise _Corrupt("bad restart array")
    pos = 0
    key = b""
    while pos < limit:
        shared, pos = _read_varint(block, pos, limit)
        non_shared, pos = _read_varint(block, pos, limit)
        vlen, pos = _read_varint(block, pos, limit)
        if shared > len(key) or pos + non_shared + vlen > limit:
            raise _Corrupt("bad entry in block")
        key = key[:shared] + bytes(block[pos:pos + non_shared])
        pos += non_shared
        yield key, bytes(block[pos:pos + vlen])
        pos += vlen


def _handle(value: bytes):
    off, pos = _read_varint(value, 0, len(value))
    size, _ = _read_varint(value, pos, len(value))
    return off, size


def read_table(data, filename: str = "<table>") -> list:
    """All (key, value) pairs of a table in order; DataLossError if it is damaged."""
    view = memoryview(data)
    try:
        if len(view) < FOOTER_SIZE:
            raise _Corrupt(f"file too short ({len(view)} bytes) to be an sstable")
        footer = view[len(view) - FOOTER_SIZE:]
        (magic,) = struct.unpack_from("<Q", footer, FOOTER_SIZE - 8)
        if magic != TABLE_MAGIC:
            raise _Corrupt("not an sstable (bad magic number)")
        meta_off, pos = _read_varint(footer, 0, 40)
        meta_size, pos = _read_varint(footer, pos, 40)
        index_off, index_size = _handle(bytes(footer[pos:40]))
        body = view[:len(view) - FOOTER_SIZE]
        _block(body, meta_off, meta_size)  # unused, but checked like the rest
        out = []
        last = None
        for _, handle in _entries(_block(body, index_off, index_size)):
            off, size = _handle(handle)
            for k, v in _entries(_block(body, off, size)):
                if last is not None and k <= last:
                    raise _Corrupt("keys out of order")
                last = k
                out.append((k, v))
        return out
    except _Corrupt as e:
        raise errors.DataLossError(None, None, f"Unable to read table file {filename}: "
                                               f"{e}") from None

