"""Static shapes with unknown (`None`) dimensions, as TF1's TensorShape and Dimension."""
from __future__ import annotations

from typing import Iterable, Optional

__all__ = ["Dimension", "TensorShape", "as_shape", "as_dimension", "unknown_shape",
           "broadcast_static"]


class Dimension:
    """One static dimension; `value` is an int or None (unknown)."""

    __slots__ = ("value",)

    def __init__(self, value) -> None:
        if isinstance(value, Dimension):
            value = value.value
        if value is not None:
            value = int(value)
            if value < 0:
                raise ValueError(f"Dimension {value} must be >= 0")
        self.value = value

    def __int__(self) -> int:
        if self.value is None:
            raise TypeError("Cannot convert an unknown Dimension to an int")
        return self.value

    __index__ = __int__

    def __eq__(self, other) -> Optional[bool]:
        other = other.value if isinstance(other, Dimension) else other
        if self.value is None or other is None:
            return None
        return self.value == other

    def __ne__(self, other):
        eq = self.__eq__(other)
        return None if eq is None else not eq

    def __hash__(self) -> int:
        return hash(self.value)

    # Arithmetic and ordering propagate unknown (None) values, as TF1's Dimension does.
    def _binary(self, other, fn) -> "Dimension":
        other = as_dim_value(other)
        if self.value is None or other is None:
            return Dimension(None)
        return Dimension(fn(self.value, other))

    def __add__(self, other) -> "Dimension":
        return self._binary(other, lambda a, b: a + b)

    __radd__ = __add__

    def __sub__(self, other) -> "Dimension":
        return self._binary(other, lambda a, b: a - b)

    def __rsub__(self, other) -> "Dimension":
        return self._binary(other, lambda a, b: b - a)

    def __mul__(self, other) -> "Dimension":
        return self._binary(other, lambda a, b: a * b)

    __rmul__ = __mul__

    def __floordiv__(self, other) -> "Dimension":
        return self._binary(other, lambda a, b: a // b)

    def __rfloordiv__(self, other) -> "Dimension":
        return self._binary(other, lambda a, b: b // a)

    def __mod__(self, other) -> "Dimension":
        return self._binary(other, lambda a, b: a % b)

    def _compare(self, other, fn) -> Optional[bool]:
        other = as_dim_value(other)
        if self.value is None or other is None:
            return None
        return fn(self.value, other)

    def __lt__(self, other) -> Optional[bool]:
        return self._compare(other, lambda a, b: a < b)

    def __le__(self, other) -> Optional[bool]:
        return self._compare(other, lambda a, b: a <= b)

    def __gt__(self, other) -> Optional[bool]:
        return self._compare(other, lambda a, b: a > b)

    def __ge__(self, other) -> Optional[bool]:
        return self._compare(other, lambda a, b: a >= b)

    def is_compatible_with(self, other) -> bool:
        other = as_dim_value(other)
        return self.value is None or other is None or self.value == other

    def assert_is_compatible_with(self, other) -> None:
        if not self.is_compatible_with(other):
            raise ValueError(f"Dimensions {self} and {Dimension(other)} are not compatible")

    def merge_with(self, other) -> "Dimension":
        other = as_dim_value(other)
        if not self.is_compatible_with(other):
            raise ValueError(f"Dimensions {self} and {other} are not compatible")
        return Dimension(self.value if self.value is not None else other)

    def __repr__(self) -> str:
        return f"Dimension({self.value})"

    def __str__(self) -> str:
        return "?" if self.value is None else str(self.value)


def as_dim_value(d):
    if isinstance(d, Dimension):
        return d.value
    if d is None:
        return None
    v = int(d)
    if v < 0:
        # TF: unknown is None, never -1 (tf.placeholder(tf.float32, [-1, 3]) is an error)
        raise ValueError(f"Error converting shape to a TensorShape: Dimension {v} must be >= 0.")
    return v


class TensorShape:
    """A static shape: `dims` is a tuple of int-or-None, or None for an unknown rank."""

    __slots__ = ("_dims",)

    def __init__(self, dims) -> None:
        if dims is None:
            self._dims = None
        elif isinstance(dims, TensorShape):
            self._dims = dims._dims
        else:
            if isinstance(dims, (int, Dimension)):
                dims = [dims]
            self._dims = tuple(as_dim_value(d) for d in dims)

    # -- queries ---------------------------------------------------------------------------
    @property
    def dims(self):
        return None if self._dims is None else [Dimension(d) for d in self._dims]

    @property
    def ndims(self) -> Optional[int]:
        return None if self._dims is None else len(self._dims)

    rank = ndims

    def as_list(self) -> list:
        if self._dims is None:
            raise ValueError("as_list() is not defined on an unknown TensorShape.")
        return list(self._dims)

    def as_tuple(self):
        """The dims as a tuple of int-or-None (None for an unknown rank)."""
        return self._dims

    def is_fully_defined(self) -> bool:
        return self._dims is not None and all(d is not None for d in self._dims)

    def num_elements(self) -> Optional[int]:
        if not self.is_fully_defined():
            return None
        n = 1
        for d in self._dims:
            n *= d
        return n

    def is_compatible_with(self, other) -> bool:
        other = as_shape(other)
        if self._dims is None or other._dims is None:
            return True
        if len(self._dims) != len(other._dims):
            return False
        return all(a is None or b is None or a == b for a, b in zip(self._dims, other._dims))

    def merge_with(self, other) -> "TensorShape":
        other = as_shape(other)
        if self._dims is None:
            return other
        if other._dims is None:
            return self
        if not self.is_compatible_with(other):
            raise ValueError(f"Shapes {self} and {other} are not compatible")
        return TensorShape([a if a is not None else b for a, b in zip(self._dims, other._dims)])

    def assert_is_compatible_with(self, other) -> None:
        if not self.is_compatible_with(other):
            raise ValueError(f"Shapes {self} and {as_shape(other)} are incompatible")

    def with_rank(self, rank: int) -> "TensorShape":
        if self._dims is None:
            return TensorShape([None] * rank)
        if len(self._dims) != rank:
            raise ValueError(f"Shape {self} must have rank {rank}")
        return self

    def assert_has_rank(self, rank: int) -> None:
        if self._dims is not None and len(self._dims) != rank:
            raise ValueError(f"Shape {self} must have rank {rank}")

    def assert_same_rank(self, other) -> None:
        other = as_shape(other)
        if self._dims is not None and other._dims is not None and \
                len(self._dims) != len(other._dims):
            raise ValueError(f"Shapes {self} and {other} must have the same rank")

    def assert_is_fully_defined(self) -> None:
        if not self.is_fully_defined():
            raise ValueError(f"Shape {self} is not fully defined")

    def with_rank_at_least(self, rank: int) -> "TensorShape":
        if self._dims is not None and len(self._dims) < rank:
            raise ValueError(f"Shape {self} must have rank at least {rank}")
        return self

    def most_specific_compatible_shape(self, other) -> "TensorShape":
        """The most specific shape compatible with both (unknown where they differ)."""
        other = as_shape(other)
        if self._dims is None or other._dims is None or len(self._dims) != len(other._dims):
            return TensorShape(None)
        return TensorShape([a if a == b else None for a, b in zip(self._dims, other._dims)])

    def __add__(self, other) -> "TensorShape":
        return self.concatenate(other)

    def __radd__(self, other) -> "TensorShape":
        return as_shape(other).concatenate(self)

    def concatenate(self, other) -> "TensorShape":
        other = as_shape(other)
        if self._dims is None or other._dims is None:
            return TensorShape(None)
        return TensorShape(self._dims + other._dims)

    # -- python protocol -------------------------------------------------------------------
    def __len__(self) -> int:
        if self._dims is None:
            raise ValueError("Cannot take the length of a shape with unknown rank.")
        return len(self._dims)

    def __iter__(self):
        if self._dims is None:
            raise ValueError("Cannot iterate over a shape with unknown rank.")
        return iter(Dimension(d) for d in self._dims)

    def __getitem__(self, key):
        if self._dims is None:
            return TensorShape(None) if isinstance(key, slice) else Dimension(None)
        if isinstance(key, slice):
            return TensorShape(self._dims[key])
        return Dimension(self._dims[key])

    def __bool__(self) -> bool:
        return self._dims is not None

    def __eq__(self, other) -> bool:
        try:
            other = as_shape(other)
        except (TypeError, ValueError):
            return NotImplemented
        return self._dims == other._dims

    def __ne__(self, other) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        return hash(self._dims)

    def __repr__(self) -> str:
        if self._dims is None:
            return "TensorShape(None)"
        return "TensorShape([" + ", ".join(f"Dimension({d})" for d in self._dims) + "])"

    def __str__(self) -> str:
        if self._dims is None:
            return "<unknown>"
        inner = ", ".join("?" if d is None else str(d) for d in self._dims)
        return f"({inner},)" if len(self._dims) == 1 else f"({inner})"


def as_shape(shape) -> TensorShape:
    """Convert a TensorShape, list/tuple of int-or-None, or None to a TensorShape."""
    return shape if isinstance(shape, TensorShape) else TensorShape(shape)


def as_dimension(value) -> Dimension:
    return value if isinstance(value, Dimension) else Dimension(value)


def unknown_shape(rank: Optional[int] = None) -> TensorShape:
    return TensorShape(None if rank is None else [None] * rank)


def broadcast_static(a: TensorShape, b: TensorShape, what: str = "") -> TensorShape:
    """NumPy broadcasting of two static shapes; raises ValueError when they can never match."""
    if a._dims is None or b._dims is None:
        return TensorShape(None)
    x, y = a._dims, b._dims
    n = max(len(x), len(y))
    x = (1,) * (n - len(x)) + x
    y = (1,) * (n - len(y)) + y
    out: list = []
    for p, q in zip(x, y):
        if p == 1:
            out.append(q)
        elif q == 1:
            out.append(p)
        elif p is None:
            out.append(q)
        elif q is None or p == q:
            out.append(p)
        else:
            raise ValueError(
                f"Dimensions must be equal, but are {p} and {q}{what} with input shapes: "
                f"{_tf_str(a)}, {_tf_str(b)}.")
    return TensorShape(out)


def _tf_str(s: TensorShape) -> str:
    return "?" if s._dims is None else "[" + ",".join(
        "?" if d is None else str(d) for d in s._dims) + "]"


def shape_tf_str(shape: Iterable) -> str:
    """TF's bracket form used in messages: [?,2]."""
    return _tf_str(as_shape(shape))
