"""Dtype conversion: the op Cast and `tf.cast`, `tf.to_float`, `tf.to_double`, `tf.to_int32`,
`tf.to_int64`, and `tf.saturate_cast` (values clipped to the target's range first).
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.core.graph import Tensor, convert_to_tensor, make_op, name_scope
from jitflow.ops.registry import Example, register

__all__ = [
    "cast", "to_float", "to_double", "to_int32", "to_int64", "saturate_cast",
]


# -- Cast -----------------------------------------------------------------------------------------
def _cast_grad(op, g):
    x = op.inputs[0]
    if x.dtype.is_floating and op.outputs[0].dtype.is_floating:
        return [cast(g, x.dtype)]
    return [None]


register("Cast", infer=lambda op: [(op.attrs["DstT"], op.inputs[0].shape)],
         ref=lambda op, x: np.asarray(x).astype(op.attrs["DstT"].as_numpy_dtype),
         grad=_cast_grad, kind="elementwise",
         scalar="cast", doc="Convert to attr DstT (the result cast to DstT).",
         examples=[Example(lambda a: cast(a * 3.0, "int32"), [(2, 3)],
                           lambda a: (a * 3.0).astype(np.int32), grad=False, id="to_int"),
                   Example(lambda a: cast(a, "float64"), [(2, 3)], lambda a: a,
                           ("float32",), id="widen")])


def cast(x, dtype, name: Optional[str] = None) -> Tensor:
    """`tf.cast`: convert to `dtype` (float -> int truncates toward zero, as C does)."""
    dtype = _dtypes.as_dtype(dtype)
    x = convert_to_tensor(x)
    if x.dtype == dtype:
        return x
    return make_op("Cast", [x], {"DstT": dtype, "SrcT": x.dtype}, name=name or "Cast").outputs[0]


def to_float(x, name: str = "ToFloat") -> Tensor:
    return cast(x, _dtypes.float32, name=name)


def to_double(x, name: str = "ToDouble") -> Tensor:
    return cast(x, _dtypes.float64, name=name)


def to_int32(x, name: str = "ToInt32") -> Tensor:
    return cast(x, _dtypes.int32, name=name)


def to_int64(x, name: str = "ToInt64") -> Tensor:
    return cast(x, _dtypes.int64, name=name)


# -- saturate_cast --------------------------------------------------------------------------------
def saturate_cast(value, dtype, name: Optional[str] = None) -> Tensor:
    """`tf.saturate_cast`: cast with values clipped to the target dtype's range."""
    from jitflow.ops.math.compare import clip_by_value
    dtype = _dtypes.as_dtype(dtype)
    with name_scope(name, "saturate_cast", [value]):
        x = convert_to_tensor(value, name="value")
        if dtype.is_integer or (x.dtype.is_floating and dtype.is_floating and
                                np.dtype(dtype.as_numpy_dtype).itemsize <
                                np.dtype(x.dtype.as_numpy_dtype).itemsize):
            lo, hi = float(dtype.min), float(dtype.max)
            if x.dtype.is_integer:
                info = np.iinfo(x.dtype.as_numpy_dtype)
                lo, hi = max(lo, info.min), min(hi, info.max)
            x = clip_by_value(x, np.asarray(lo).astype(x.dtype.as_numpy_dtype),
                              np.asarray(hi).astype(x.dtype.as_numpy_dtype))
        return cast(x, dtype)
