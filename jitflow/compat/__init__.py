"""`tf.compat`: `tf.compat.v1` (jitflow itself) and TF1's string and path helpers."""
from __future__ import annotations

import numbers
import os

import numpy as np

from jitflow.compat import v1
from jitflow.ops.array_extra import dimension_at_index, dimension_value

__all__ = ["v1", "as_bytes", "as_text", "as_str", "as_str_any", "path_to_str",
           "bytes_or_text_types", "integral_types", "real_types", "complex_types",
           "dimension_value", "dimension_at_index"]

bytes_or_text_types = (bytes, str)
integral_types = (numbers.Integral, np.integer)
real_types = (numbers.Real, np.integer, np.floating)
complex_types = (numbers.Complex, np.number)


def as_bytes(bytes_or_text, encoding: str = "utf-8") -> bytes:
    """`bytes_or_text` as bytes: str encoded with `encoding`, bytes (or a bytearray) as is."""
    if isinstance(bytes_or_text, bytearray):
        return bytes(bytes_or_text)
    if isinstance(bytes_or_text, str):
        return bytes_or_text.encode(encoding)
    if isinstance(bytes_or_text, bytes):
        return bytes_or_text
    raise TypeError(f"Expected binary or unicode string, got {bytes_or_text!r}")


def as_text(bytes_or_text, encoding: str = "utf-8") -> str:
    """`bytes_or_text` as str: bytes decoded with `encoding`, str as is."""
    if isinstance(bytes_or_text, str):
        return bytes_or_text
    if isinstance(bytes_or_text, bytes):
        return bytes_or_text.decode(encoding)
    raise TypeError(f"Expected binary or unicode string, got {bytes_or_text!r}")


as_str = as_text


def as_str_any(value, encoding: str = "utf-8") -> str:
    """bytes decoded, anything else through `str()`."""
    if isinstance(value, bytes):
        return as_str(value, encoding)
    return str(value)


def path_to_str(path):
    """A path-like object's path as str; anything else unchanged."""
    if isinstance(path, os.PathLike):
        return as_str_any(path.__fspath__())
    return path
