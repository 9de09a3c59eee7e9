"""TF1 dtypes: a thin, hashable wrapper around NumPy dtypes with TF1's names."""
from __future__ import annotations

import numpy as np

_PYBOOL = type(True)

__all__ = [
    "DType", "as_dtype", "float16", "float32", "float64", "half", "double",
    "int8", "int16", "int32", "int64", "uint8", "uint16", "bool", "string", "variant",
    "as_bytes_array",
]


class DType:
    """A tensor element type. Compare with `==` against DTypes, NumPy dtypes or strings."""

    __slots__ = ("name", "_np")

    def __init__(self, name: str, np_dtype) -> None:
        self.name = name
        self._np = np.dtype(np_dtype) if np_dtype is not None else None

    @property
    def as_numpy_dtype(self):
        return self._np.type

    @property
    def base_dtype(self) -> "DType":
        return self

    @property
    def real_dtype(self) -> "DType":
        return self

    @property
    def is_floating(self) -> bool:
        return self._np is not None and self._np.kind == "f"

    @property
    def is_integer(self) -> bool:
        return self._np is not None and self._np.kind in "iu"

    @property
    def is_unsigned(self) -> bool:
        return self._np is not None and self._np.kind == "u"

    @property
    def is_bool(self) -> bool:
        return self is bool_

    @property
    def is_numpy_compatible(self) -> bool:
        return self is not string and self is not variant

    @property
    def size(self) -> int:
        return self._np.itemsize

    @property
    def min(self):
        return np.finfo(self._np).min if self.is_floating else np.iinfo(self._np).min

    @property
    def max(self):
        return np.finfo(self._np).max if self.is_floating else np.iinfo(self._np).max

    def is_compatible_with(self, other) -> bool:
        return self == as_dtype(other)

    def __eq__(self, other) -> bool:
        if other is None:
            return False
        if isinstance(other, DType):
            return self is other
        try:
            return self is as_dtype(other)
        except TypeError:
            return False

    def __ne__(self, other) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f"tf.{self.name}"

    def __str__(self) -> str:
        return f"<dtype: '{self.name}'>"

    def __reduce__(self):
        return as_dtype, (self.name,)


float16 = DType("float16", np.float16)
float32 = DType("float32", np.float32)
float64 = DType("float64", np.float64)
int8 = DType("int8", np.int8)
int16 = DType("int16", np.int16)
int32 = DType("int32", np.int32)
int64 = DType("int64", np.int64)
uint8 = DType("uint8", np.uint8)
uint16 = DType("uint16", np.uint16)   # 16-bit images (decode_png, encode_png)
bool_ = DType("bool", np.bool_)
string = DType("string", object)
# A host object (a TensorArray's contents, a while loop's kept iterations) in a rank-0 object
# array; never inside a numeric kernel.
variant = DType("variant", object)
half = float16
double = float64
bool = bool_  # noqa: A001  (TF1 exports the name `tf.bool`)

_ALL = [float16, float32, float64, int8, int16, int32, int64, uint8, uint16, bool_, string]
_BY_NAME = {d.name: d for d in _ALL}
_BY_NAME.update({"variant": variant, "DT_VARIANT": variant})
_BY_NAME.update({"float": float32, "double": float64, "half": float16, "int": int32,
                 "long": int64, "bool_": bool_, "str": string,
                 "DT_FLOAT": float32, "DT_DOUBLE": float64, "DT_HALF": float16,
                 "DT_INT8": int8, "DT_INT16": int16, "DT_INT32": int32, "DT_INT64": int64,
                 "DT_UINT8": uint8, "DT_UINT16": uint16, "DT_BOOL": bool_, "DT_STRING": string})
_BY_NP = {d._np: d for d in _ALL if d is not string}


_TF_TYPE_STRING = {"float32": "float", "float64": "double", "float16": "half"}


def type_string(dtype) -> str:
    """The type name TF1's runtime messages use ("float" for float32, "double", "int32")."""
    name = as_dtype(dtype).name
    return _TF_TYPE_STRING.get(name, name)


def as_bytes_array(value, what: str = "value") -> np.ndarray:
    """`value` (str, bytes, nested lists of them, NumPy str/bytes/object arrays) as an object
    array of `bytes`, TF1's representation of a string tensor (str is encoded as UTF-8).

    Raises TypeError naming `what` for an element that is not a string.
    """
    if isinstance(value, np.ndarray) and value.dtype == object:
        arr = value
    else:
        try:
            # object arrays keep bytes whole (a fixed-width "S" array drops trailing NULs)
            arr = value if isinstance(value, np.ndarray) else np.asarray(value, dtype=object)
        except ValueError as e:
            raise ValueError(f"Cannot convert {what} {value!r} to a string tensor: {e}") from None
        if arr.dtype.kind not in "SUO":
            raise TypeError(f"Expected string, got {value!r} of type '{type(value).__name__}' "
                            f"instead ({what}).")
    flat = arr.reshape(-1)
    out = np.empty(flat.shape, dtype=object)
    for i, v in enumerate(flat.tolist() if arr.dtype != object else flat):
        if isinstance(v, bytes):
            out[i] = v
        elif isinstance(v, str):
            out[i] = v.encode("utf-8")
        else:
            raise TypeError(f"Expected string, got {v!r} of type '{type(v).__name__}' instead "
                            f"({what}).")
    return out.reshape(arr.shape)


def is_string_value(value) -> bool:
    """Whether a Python/NumPy value is made of strings (str or bytes), at any nesting."""
    if isinstance(value, (str, bytes)):
        return True
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "SU":
            return True
        return value.dtype == object and value.size > 0 and all(
            isinstance(v, (str, bytes)) for v in value.reshape(-1))
    if isinstance(value, (list, tuple)) and value:
        v = value
        while isinstance(v, (list, tuple)) and v:
            v = v[0]
        return isinstance(v, (str, bytes))
    return False


def as_dtype(value) -> DType:
    """Convert a DType, NumPy dtype or type, Python type or name string to a DType."""
    if isinstance(value, DType):
        return value
    if isinstance(value, str):
        d = _BY_NAME.get(value)
        if d is not None:
            return d
    if value is float:
        return float32
    if value is int:
        return int32
    if value is _PYBOOL:
        return bool_
    try:
        npd = np.dtype(value)
    except TypeError:
        raise TypeError(f"Cannot convert value {value!r} to a TensorFlow DType.") from None
    if npd.kind in "SUO":
        return string
    d = _BY_NP.get(npd)
    if d is None:
        raise TypeError(f"Cannot convert value {value!r} to a TensorFlow DType.")
    return d

