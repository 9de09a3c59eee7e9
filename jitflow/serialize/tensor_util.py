"""NumPy arrays <-> TensorProto, shapes <-> TensorShapeProto, jitflow dtypes <-> DataType.

`make_tensor_proto(value)` / `make_ndarray(proto)` are `tf.make_tensor_proto` and
`tf.make_ndarray`. Reading follows TensorFlow's rules: `tensor_content` holds little-endian
element bytes; otherwise the typed field of the dtype holds the values, an empty field means
zeros, and a field shorter than the tensor repeats its last value.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.core import errors
from jitflow.core.shapes import TensorShape

__all__ = ["DT", "dtype_to_enum", "enum_to_dtype", "enum_to_numpy", "make_tensor_proto",
           "make_ndarray", "shape_proto", "shape_from_proto"]

# TensorFlow's DataType numbers (tensorflow/core/framework/types.proto)
DT = {"float32": 1, "float64": 2, "int32": 3, "uint8": 4, "int16": 5, "int8": 6, "string": 7,
      "int64": 9, "bool": 10, "uint16": 17, "float16": 19, "variant": 21}
_BY_ENUM = {v: k for k, v in DT.items()}
# element types jitflow can read into NumPy although it has no dtype of its own for them
_NUMPY_ONLY = {8: np.complex64, 18: np.complex128, 22: np.uint32,
               23: np.uint64}
_CONTENT = {"float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8",
            "uint16"}
_REF = 100


def dtype_to_enum(dtype) -> int:
    """The DataType number of a jitflow dtype (or anything `tf.as_dtype` accepts)."""
    name = _dtypes.as_dtype(dtype).name
    try:
        return DT[name]
    except KeyError:
        raise TypeError(f"dtype {name} has no TensorFlow DataType") from None


def enum_to_dtype(enum: int, where: str = "") -> _dtypes.DType:
    """The jitflow dtype of a DataType number (reference types map to their value type)."""
    if enum > _REF:
        enum -= _REF
    name = _BY_ENUM.get(int(enum))
    if name is None:
        raise errors.UnimplementedError(
            None, None, f"DataType {_enum_name(enum)} is not supported by jitflow"
            + (f" ({where})" if where else ""))
    return _dtypes.as_dtype(name)


def _enum_name(enum: int) -> str:
    try:
        from jitflow.serialize import protos
        return protos.pool().FindEnumTypeByName("tensorflow.DataType").values_by_number[
            int(enum)].name
    except (KeyError, ImportError):
        return str(enum)


def enum_to_numpy(enum: int, where: str = "") -> np.dtype:
    """The NumPy dtype of a DataType number, including types jitflow only reads."""
    if enum > _REF:
        enum -= _REF
    if int(enum) in _NUMPY_ONLY:
        return np.dtype(_NUMPY_ONLY[int(enum)])
    d = enum_to_dtype(enum, where)
    return np.dtype(object) if d == _dtypes.string else np.dtype(d.as_numpy_dtype)


def shape_proto(shape, out=None):
    """A TensorShapeProto of a shape (None: unknown rank; None dims: -1)."""
    from jitflow.serialize import protos
    p = out if out is not None else protos.TensorShapeProto()
    p.SetInParent()  # a scalar's shape is present and empty, as TensorFlow writes it
    dims = TensorShape(shape).as_tuple() if not isinstance(shape, TensorShape) else \
        shape.as_tuple()
    if dims is None:
        p.unknown_rank = True
    else:
        for d in dims:
            p.dim.add(size=-1 if d is None else int(d))
    return p


def shape_from_proto(p) -> TensorShape:
    if p.unknown_rank:
        return TensorShape(None)
    return TensorShape([None if d.size < 0 else int(d.size) for d in p.dim])


def _as_bytes(x) -> bytes:
    if isinstance(x, bytes):
        return x
    if isinstance(x, str):
        return x.encode("utf-8")
    return bytes(x)


def make_tensor_proto(values, dtype=None, shape=None, verify_shape: bool = False,
                      allow_broadcast: bool = False):
    """`tf.make_tensor_proto`: a TensorProto holding `values` (as TF writes it)."""
    from jitflow.serialize import protos
    if dtype is not None:
        dtype = _dtypes.as_dtype(dtype)
    if dtype == _dtypes.string or (dtype is None and _is_strings(values)):
        arr = np.array(values, dtype=object)
        flat = [_as_bytes(x) for x in arr.reshape(-1)]
        dt = _dtypes.string
    else:
        arr = np.asarray(values, dtype=None if dtype is None else dtype.as_numpy_dtype)
        if dtype is None:
            from jitflow.core.graph import _infer_numpy
            arr = _infer_numpy(values) if not isinstance(values, np.ndarray) else arr
        dt = _dtypes.as_dtype(arr.dtype)
        flat = None
    if shape is not None:
        shape = [int(d) for d in shape]
        n = int(np.prod(shape)) if shape else 1
        if verify_shape and list(arr.shape) != shape:
            raise TypeError(f"Expected Tensor's shape: {tuple(shape)}, got {arr.shape}.")
        if arr.size not in (n, 1) and not (allow_broadcast and arr.size == 1):
            if arr.size > n or not allow_broadcast:
                raise ValueError(f"Too many elements provided. Needed at most {n}, but "
                                 f"received {arr.size}" if arr.size > n else
                                 f"Expected {n} values for shape {shape}, got {arr.size}")
    else:
        shape = list(arr.shape)
    p = protos.TensorProto(dtype=dtype_to_enum(dt))
    shape_proto(shape, p.tensor_shape)
    n = int(np.prod(shape)) if shape else 1
    if dt == _dtypes.string:
        p.string_val.extend(flat)
        return p
    if dt.name in _CONTENT and arr.size == n and n > 1:
        p.tensor_content = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<"),
                                                            copy=False).tobytes()
        return p
    flat = arr.reshape(-1)
    _typed_field(p, dt).extend(_typed_values(flat, dt))
    return p


def _is_strings(values) -> bool:
    if isinstance(values, (bytes, str)):
        return True
    if isinstance(values, np.ndarray):
        return values.dtype.kind in "SUO"
    if isinstance(values, (list, tuple)):
        return any(_is_strings(v) for v in values)
    return False


def _typed_field(p, dt):
    name = dt.name
    if name == "float32":
        return p.float_val
    if name == "float64":
        return p.double_val
    if name in ("int32", "int16", "int8", "uint8", "uint16"):
        return p.int_val
    if name == "int64":
        return p.int64_val
    if name == "bool":
        return p.bool_val
    if name == "float16":
        return p.half_val
    if name == "string":
        return p.string_val
    raise TypeError(f"no TensorProto field for {name}")


def _typed_values(flat: np.ndarray, dt) -> list:
    if dt.name == "float16":
        return flat.astype(np.float16).view(np.uint16).astype(np.int32).tolist()
    return flat.tolist()


def make_ndarray(tensor, where: str = "") -> np.ndarray:
    """`tf.make_ndarray`: the NumPy value of a TensorProto (a new, writable array)."""
    enum = tensor.dtype
    npd = enum_to_numpy(enum, where)
    shape = [int(d.size) for d in tensor.tensor_shape.dim]
    if any(d < 0 for d in shape):
        raise errors.InvalidArgumentError(None, None, f"TensorProto with an unknown dimension "
                                                      f"{shape}" + (f" ({where})" if where
                                                                    else ""))
    n = int(np.prod(shape)) if shape else 1
    if tensor.tensor_content:
        if npd == np.dtype(object):
            raise errors.InvalidArgumentError(None, None, "string TensorProto with "
                                                          "tensor_content" + _at(where))
        raw = tensor.tensor_content
        if len(raw) != n * npd.itemsize:
            raise errors.InvalidArgumentError(
                None, None, f"TensorProto holds {len(raw)} bytes of content, but shape "
                            f"{shape} of {npd.name} needs {n * npd.itemsize}" + _at(where))
        return np.frombuffer(raw, dtype=npd.newbyteorder("<")).astype(npd).reshape(shape)
    if npd == np.dtype(object):
        vals = list(tensor.string_val)
        arr = np.empty(len(vals), dtype=object)
        arr[:] = vals
    else:
        arr = _typed_array(tensor, int(enum) % _REF, npd)
    if arr.size > n:
        raise errors.InvalidArgumentError(None, None, f"TensorProto has {arr.size} values for "
                                                      f"shape {shape}" + _at(where))
    if arr.size < n:
        if arr.size == 0:
            fill = b"" if npd == np.dtype(object) else 0
            out = np.full(n, fill, dtype=npd)
        else:  # TensorFlow's rule: the last value repeats
            out = np.concatenate([arr, np.full(n - arr.size, arr[-1], dtype=npd)])
        arr = out
    return np.array(arr.reshape(shape), dtype=npd)


def _at(where: str) -> str:
    return f" ({where})" if where else ""


def _typed_array(t, enum: int, npd: np.dtype) -> np.ndarray:
    if enum == 1:
        return np.array(t.float_val, dtype=np.float32)
    if enum == 2:
        return np.array(t.double_val, dtype=np.float64)
    if enum in (3, 4, 5, 6, 17):
        return np.array(t.int_val, dtype=np.int64).astype(npd)
    if enum == 9:
        return np.array(t.int64_val, dtype=np.int64)
    if enum == 10:
        return np.array(t.bool_val, dtype=np.bool_)
    if enum == 19:
        return np.array(t.half_val, dtype=np.int64).astype(np.uint16).view(np.float16)
    if enum == 22:
        return np.array(t.uint32_val, dtype=np.uint32)
    if enum == 23:
        return np.array(t.uint64_val, dtype=np.uint64)
    if enum == 8:
        v = np.array(t.scomplex_val, dtype=np.float32)
        return v[0::2] + 1j * v[1::2]
    if enum == 18:
        v = np.array(t.dcomplex_val, dtype=np.float64)
        return v[0::2] + 1j * v[1::2]
    raise errors.UnimplementedError(None, None, f"TensorProto of DataType {enum} is not "
                                                "supported")


def numpy_dtype_of(dtype) -> Optional[np.dtype]:
    d = _dtypes.as_dtype(dtype)
    return None if d == _dtypes.string else np.dtype(d.as_numpy_dtype)
