"""CRC-32C: known check values, the lane-parallel path against the byte loop, extend, mask."""
from __future__ import annotations

import numpy as np
import pytest

from jitflow.serialize import crc32c


def test_known_values():
    assert crc32c.value(b"123456789") == 0xE3069283   # the CRC-32C check value
    assert crc32c.value(bytes(32)) == 0x8A9136AA      # iSCSI test vector: 32 zero bytes
    assert crc32c.value(b"\xff" * 32) == 0x62A8AB43   # ... and 32 bytes of 0xff
    assert crc32c.value(bytes(range(32))) == 0x46DD794E
    assert crc32c.value(b"") == 0


@pytest.mark.parametrize("n", [1, 4095, 4096, 4097, 70001, 1 << 20])
def test_lanes_agree_with_the_byte_loop(n):
    data = np.random.default_rng(n).integers(0, 256, n, dtype=np.uint8).tobytes()
    want = crc32c._raw_loop(0xFFFFFFFF, data) ^ 0xFFFFFFFF
    assert crc32c._extend_py(0, data) == want
    assert crc32c.value(np.frombuffer(data, np.uint8)) == want
    assert crc32c.value(memoryview(data)[1:]) == crc32c.value(bytearray(data[1:]))
    cut = n // 3
    assert crc32c.extend(crc32c.value(data[:cut]), data[cut:]) == want


def test_mask_round_trip_and_definition():
    for c in (0, 1, 0xE3069283, 0xFFFFFFFF):
        m = crc32c.mask(c)
        assert m == (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF
        assert crc32c.unmask(m) == c


def test_numpy_lanes_agree_with_google_crc32c():
    google_crc32c = pytest.importorskip("google_crc32c")
    for n in (4097, 123457, 1 << 20):
        data = np.random.default_rng(n + 1).integers(0, 256, n, dtype=np.uint8).tobytes()
        assert crc32c._extend_py(0, data) == google_crc32c.value(data)
