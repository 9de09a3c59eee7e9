"""CRC-32C (Castagnoli), the checksum of TFRecords, checkpoint tables and bundle entries.

`value(data)` is the standard CRC-32C (`value(b"123456789") == 0xE3069283`); `extend(crc, data)`
continues one; `mask`/`unmask` are the rotation TensorFlow stores in files (a CRC of bytes that
hold CRCs is then not trivially zero).

Short inputs go through a table-driven loop; long ones split into many equal lanes whose CRCs
NumPy computes side by side, four bytes a step (slicing-by-4 tables), then combines: the CRC
register is linear over GF(2), so the CRC of `A + B` is the CRC of `A` advanced over `len(B)`
zero bytes (a 32x32 bit matrix, applied as four 256-entry tables) xor the CRC of `B` from a zero
register.
The package `google-crc32c` (a dependency) computes it in C, about 100x faster than the lanes
(see benchmarks/checkpoint_io.py); the lanes are the fallback where its C extension is missing.
"""
from __future__ import annotations

import functools

import numpy as np

__all__ = ["value", "extend", "mask", "unmask", "masked_value"]

_POLY = 0x82F63B78  # reflected Castagnoli polynomial
_MASK_DELTA = 0xA282EAD8
_SMALL = 1 << 12  # below this many bytes the plain loop is faster than the lanes


@functools.lru_cache(maxsize=None)
def _table() -> tuple:
    out = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        out.append(c)
    return tuple(out)


@functools.lru_cache(maxsize=None)
def _np_table() -> np.ndarray:
    return np.array(_table(), dtype=np.uint32)


@functools.lru_cache(maxsize=None)
def _np_tables4() -> tuple:
    """Slicing-by-4: T[k][b] is the register contribution of byte b followed by k zero bytes."""
    t0 = _np_table()
    tables = [t0]
    for _ in range(3):
        p = tables[-1]
        tables.append((p >> 8) ^ t0[p & 0xFF])
    return tuple(tables)


def _raw_loop(reg: int, data) -> int:
    t = _table()
    for b in data:
        reg = t[(reg ^ b) & 0xFF] ^ (reg >> 8)
    return reg


# -- the "advance over zero bytes" operators, as the images of the 32 basis vectors ----------------
def _apply(cols: tuple, x: int) -> int:
    out = 0
    i = 0
    while x:
        if x & 1:
            out ^= cols[i]
        x >>= 1
        i += 1
    return out


@functools.lru_cache(maxsize=64)
def _zeros_pow2(k: int) -> tuple:
    """The operator that advances the register over 2**k zero bytes."""
    if k == 0:
        t = _table()
        return tuple(t[(1 << i) & 0xFF] ^ ((1 << i) >> 8) for i in range(32))
    half = _zeros_pow2(k - 1)
    return tuple(_apply(half, c) for c in half)


@functools.lru_cache(maxsize=256)
def _zeros(n: int) -> tuple:
    """The operator that advances the register over n zero bytes."""
    cols = tuple(1 << i for i in range(32))  # identity
    k = 0
    while n:
        if n & 1:
            step = _zeros_pow2(k)
            cols = tuple(_apply(step, c) for c in cols)
        n >>= 1
        k += 1
    return cols


@functools.lru_cache(maxsize=256)
def _byte_tables(n: int) -> np.ndarray:
    """_zeros(n) as four 256-entry tables, one per byte of the register: shape (4, 256)."""
    cols = np.array(_zeros(n), dtype=np.uint32)
    b = np.arange(256, dtype=np.uint32)
    out = np.zeros((4, 256), dtype=np.uint32)
    for j in range(4):
        for bit in range(8):
            out[j] ^= np.where((b >> bit) & 1 == 1, cols[8 * j + bit], np.uint32(0))
    return out


def _advance(regs: np.ndarray, n: int) -> np.ndarray:
    t = _byte_tables(n)
    return (t[0][regs & 0xFF] ^ t[1][(regs >> 8) & 0xFF] ^ t[2][(regs >> 16) & 0xFF]
            ^ t[3][regs >> 24])


def _raw_lanes(data: np.ndarray) -> int:
    """The CRC register of `data` from a zero register, lane-parallel, 4 bytes a step."""
    n = data.size
    lanes = 1 << 14 if n < (1 << 24) else 1 << 16
    lanes = min(lanes, 1 << max(0, (n // 256).bit_length() - 1))
    length = -(-n // lanes)
    length += (-length) % 4
    # leading zero bytes leave a zero register unchanged: pad in front to lanes * length
    padded = np.zeros(lanes * length, dtype=np.uint8)
    padded[lanes * length - n:] = data
    words = np.ascontiguousarray(padded.reshape(lanes, length).view("<u4").T)
    t0, t1, t2, t3 = _np_tables4()
    regs = np.zeros(lanes, dtype=np.uint32)
    for j in range(length // 4):
        x = regs ^ words[j]
        regs = t3[x & 0xFF] ^ t2[(x >> 8) & 0xFF] ^ t1[(x >> 16) & 0xFF] ^ t0[x >> 24]
    while regs.size > 1:  # combine neighbours: lanes of `length` bytes become 2 * length
        regs = _advance(regs[0::2], length) ^ regs[1::2]
        length *= 2
    return int(regs[0])


def _extend_py(crc: int, data) -> int:
    reg = (crc ^ 0xFFFFFFFF) & 0xFFFFFFFF
    mv = memoryview(data).cast("B") if not isinstance(data, np.ndarray) else None
    n = mv.nbytes if mv is not None else data.nbytes
    if n < _SMALL:
        reg = _raw_loop(reg, mv if mv is not None else data.reshape(-1).view(np.uint8).tolist())
    else:
        arr = (np.frombuffer(mv, dtype=np.uint8) if mv is not None
               else np.ascontiguousarray(data).reshape(-1).view(np.uint8))
        reg = _apply(_zeros(n), reg) ^ _raw_lanes(arr)
    return reg ^ 0xFFFFFFFF


@functools.lru_cache(maxsize=None)
def _accelerator():
    try:
        import google_crc32c
    except ImportError:
        return None
    return google_crc32c if google_crc32c.implementation == "c" else None


def extend(crc: int, data) -> int:
    """The CRC-32C of the bytes that gave `crc` followed by `data` (bytes-like)."""
    acc = _accelerator()
    if acc is not None:   # it takes read-only bytes only
        if not isinstance(data, bytes):
            data = data.tobytes() if isinstance(data, np.ndarray) else bytes(data)
        return acc.extend(crc, data)
    return _extend_py(crc, data)


def value(data) -> int:
    """The CRC-32C of `data` (bytes, bytearray, memoryview or a contiguous NumPy array)."""
    return extend(0, data)


def mask(crc: int) -> int:
    """TensorFlow's masked form of a CRC (rotate right by 15 bits, add a constant)."""
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def unmask(masked: int) -> int:
    rot = (masked - _MASK_DELTA) & 0xFFFFFFFF
    return ((rot >> 17) | (rot << 15)) & 0xFFFFFFFF


def masked_value(data) -> int:
    return mask(value(data))
