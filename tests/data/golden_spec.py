"""What the TensorFlow-written files in tests/data hold: the variable values of the golden
checkpoint and the inputs of the golden graphs. Shared by make_golden.py (which writes the files
with TensorFlow) and the tests (which read them with jitflow, with TensorFlow absent)."""
from __future__ import annotations

import numpy as np


def checkpoint_values() -> dict:
    """{variable name: value} of tests/data/ckpt/model: every dtype jitflow supports."""
    r = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
    return {
        "f16": (r[0] / 8 - 1).astype(np.float16),
        "f32": (r / 3 - 2).astype(np.float32),
        "f64": np.array([np.pi, -np.e, 1e-300, 1e300]),
        "scope/i8": np.array([-128, -1, 0, 127], np.int8),
        "scope/i16": np.array([[-32768, 7], [300, 32767]], np.int16),
        "scope/i32": np.array(-123456, np.int32),
        "scope/deeper/i64": np.array([2**40 + 1, -(2**62)], np.int64),
        "u8": np.array([0, 1, 254, 255], np.uint8),
        "flags": np.array([[True, False, True]]),
        "text": np.array([b"", b"hello", "\u00e9t\u00e9".encode(), b"x" * 200], dtype=object),
        "scalar_text": np.array(b"one string", dtype=object),
        "empty": np.zeros((0, 3), np.float32),
    }


def image_batch() -> np.ndarray:
    """The input fed to the golden CNN (batch 2, 8x8, 3 channels)."""
    return np.random.default_rng(17).normal(size=(2, 8, 8, 3)).astype(np.float32)


def mlp_batch() -> np.ndarray:
    return np.random.default_rng(18).normal(size=(3, 5)).astype(np.float32)
