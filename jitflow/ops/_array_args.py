"""Helpers the array-op families share: shape-like arguments (static attributes or
run-time tensors), error construction, build-time values (see jitflow/core/fold.py).

The array ops, one module per family:

- `sources.py`    constants, placeholders, fills, ranges, linspace, one_hot, eye;
- `identity.py`   Identity, IdentityN, NoOp, group, tuple, Print, check_numerics;
- `shape_ops.py`  Shape, ShapeN, Size, Rank, Reshape, Transpose, ExpandDims, Squeeze;
- `join.py`       concat, stack, unstack, split;
- `slicing.py`    slice, strided_slice and `Tensor.__getitem__`, gather, gather_nd, boolean_mask;
- `tile_pad.py`   tile, pad, reverse, broadcast_to;
- `scatter.py`    scatter_nd, unsorted_segment_sum;
- `sequence.py`   sequence_mask, meshgrid, unique, invert_permutation, roll.

Arguments that TF1 takes as tensors (a shape, multiples, begin/size) are stored as attributes
when their value is known at build time, so shape rules and lowerings see plain ints. Only when
such an argument is a runtime tensor does it become an extra op input; each rule reads it
through `_args`, which takes the attribute if set and otherwise the next input.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from jitflow.core import fold as _fold
from jitflow.core.graph import Tensor, convert_to_tensor, name_scope
from jitflow.core.shapes import Dimension, TensorShape, shape_tf_str


def _err(message: str, op=None):
    from jitflow.core.errors import InvalidArgumentError
    return InvalidArgumentError(None, op, message)


# -- build-time values of tensors (jitflow/core/fold.py, the one static evaluator) --------------
def get_static_value(tensor) -> Optional[np.ndarray]:
    """The value of `tensor` when it is known at build time (TF1's `constant_value`), else None.

    Follows constants, the shape of fully defined tensors and a few small shape-arithmetic ops
    (at most 8 deep, so it never walks a long chain): see `jitflow.core.fold.static_value`.
    """
    return _fold.static_value(tensor)


def _const(t, depth: int) -> Optional[np.ndarray]:
    return _fold.static_value(t, depth)


_partial_shape = _fold.partial_shape


def _int_list_arg(value, what: str):
    """A shape-like argument: (static tuple of ints, None) or (None, int32/int64 tensor)."""
    if isinstance(value, TensorShape):
        value = value.as_list()
    if isinstance(value, (list, tuple)):
        value = [v.value if isinstance(v, Dimension) else v for v in value]
        if any(v is None for v in value):
            raise ValueError(f"{what} has an unknown dimension: {value!r}")
    if isinstance(value, (list, tuple)) and any(isinstance(v, Tensor) or hasattr(v, "_to_tensor")
                                                for v in value):
        from jitflow.ops.slicing import _packed   # (slicing imports this module)
        value = _packed(list(value))
    if isinstance(value, Tensor) or hasattr(value, "_to_tensor"):
        t = convert_to_tensor(value)
        c = _const(t, 8)
        if c is not None:
            return tuple(int(d) for d in np.reshape(c, -1)), None
        if not t.dtype.is_integer:
            raise TypeError(f"{what} must be an int32 or int64 tensor, got {t.dtype.name}")
        return None, t
    arr = np.asarray(value)
    if arr.dtype.kind == "f":
        if not np.all(arr == np.floor(arr)):
            raise TypeError(f"{what} must be integers, got {value!r}")
    if arr.dtype.kind not in "iuf" and arr.size:
        raise TypeError(f"{what} must be integers, got {value!r}")
    return tuple(int(d) for d in arr.reshape(-1)), None


def _autopack(values, dtype, name: str) -> Tensor:
    """A (nested) list holding tensors as one tensor (`tf.stack` of the rows, op "packed");
    Python numbers take the dtype of the tensors beside them."""
    from jitflow.ops.join import stack   # (join imports this module)
    def first_dtype(v):
        for e in v:
            if isinstance(e, (list, tuple)):
                d = first_dtype(e)
                if d is not None:
                    return d
            elif isinstance(e, Tensor) or hasattr(e, "_to_tensor"):
                return convert_to_tensor(e).dtype
        return None
    dt = dtype if dtype is not None else first_dtype(values)

    def pack(v):
        return stack([pack(e) if isinstance(e, (list, tuple)) else convert_to_tensor(e, dt)
                      for e in v])
    with name_scope(None, name) as scope:
        rows = [pack(e) if isinstance(e, (list, tuple)) else convert_to_tensor(e, dt)
                for e in values]
        return stack(rows, name=scope)


def _args(op, dyn, *keys):
    """The values of `keys`: the attribute when static, else the next dynamic input's value."""
    out = []
    it = iter(dyn)
    for k in keys:
        v = op.attrs.get(k)
        if v is None:
            v = tuple(int(d) for d in np.reshape(next(it), -1))
        out.append(v)
    return out


def _shape_of(op, key: str, index: int) -> TensorShape:
    """A shape argument's static view: the attr, or the partial value of input `index`."""
    v = op.attrs.get(key)
    if v is not None:
        return TensorShape(v)
    return _partial_shape(op.inputs[index])


def _tf_shape(shape) -> str:
    return shape_tf_str(shape)


def _norm_axis(axis: int, rank: int, what: str = "axis") -> int:
    if not -rank <= axis < rank:
        raise ValueError(f"{what} {axis} is out of range for a tensor of rank {rank} "
                         f"(must be in [{-rank}, {rank}))")
    return axis % rank if rank else 0
