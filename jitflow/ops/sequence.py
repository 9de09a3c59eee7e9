"""sequence_mask, meshgrid, unique, invert_permutation and roll.
"""
from __future__ import annotations

import builtins
from typing import Optional

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.core.graph import Tensor, convert_to_tensor, make_op, name_scope
from jitflow.ops._array_args import _err, _int_list_arg
from jitflow.ops.join import stack
from jitflow.ops.shape_ops import _check_out_type, reshape, size
from jitflow.ops.tile_pad import _same_shape_axes_infer, broadcast_to
from jitflow.ops.registry import Example, register
from jitflow.core.shapes import TensorShape

__all__ = ["sequence_mask", "meshgrid", "unique", "invert_permutation", "roll"]
NAMESPACES = {"math": ["invert_permutation"]}


# -- sequence_mask, meshgrid, unique, invert_permutation, roll ---------------------------------
def _sequence_mask_infer(op):
    lengths = op.inputs[0]
    if not lengths.dtype.is_integer:
        raise TypeError(f"lengths must be integers, got {lengths.dtype.name}")
    dims = lengths.shape.as_tuple()
    if dims is None:
        return [(op.attrs["dtype"], TensorShape(None))]
    return [(op.attrs["dtype"], TensorShape(dims + (op.attrs["maxlen"],)))]


def _sequence_mask_ref(op, lengths):
    lengths = np.asarray(lengths)
    n = op.attrs["maxlen"]
    if n is None:
        n = int(lengths.max()) if lengths.size else 0
    mask = np.arange(n) < lengths[..., None]
    return mask.astype(op.attrs["dtype"].as_numpy_dtype)


register("SequenceMask", infer=_sequence_mask_infer, ref=_sequence_mask_ref,
         differentiable=False, kind="other",
         examples=[Example(build=lambda n: sequence_mask(n, 4, dtype=_dtypes.float32),
                           inputs=[(3,)], dtypes=("int32",), domain="index", index_max=5,
                           expect=lambda n: (np.arange(4) < n[:, None]).astype(float))])


def sequence_mask(lengths, maxlen=None, dtype=_dtypes.bool_, name: Optional[str] = None):
    """`tf.sequence_mask`: mask[..., j] = j < lengths[...]; maxlen defaults to max(lengths)."""
    if maxlen is not None:
        static, dyn = _int_list_arg(maxlen, "maxlen")
        if dyn is not None:
            raise TypeError("sequence_mask: maxlen must be known at build time")
        maxlen = static[0]
    with name_scope(name, "SequenceMask", [lengths]) as scope:
        x = convert_to_tensor(lengths, name="lengths")
        return make_op("SequenceMask", [x], {"maxlen": maxlen,
                                             "dtype": _dtypes.as_dtype(dtype)},
                       name=scope).outputs[0]


def meshgrid(*args, **kwargs) -> list:
    """`tf.meshgrid(*args, indexing="xy", name="meshgrid")`: N-D coordinate grids."""
    indexing = kwargs.pop("indexing", "xy")
    name = kwargs.pop("name", "meshgrid")
    if kwargs:
        raise TypeError(f"Invalid keyword arguments: {sorted(kwargs)}")
    if indexing not in ("xy", "ij"):
        raise ValueError("indexing parameter must be either 'xy' or 'ij'")
    with name_scope(name, "meshgrid", list(args)):
        xs = [reshape(convert_to_tensor(a), [-1]) for a in args]
        n = len(xs)
        order = list(builtins.range(n))
        if indexing == "xy" and n > 1:
            order[0], order[1] = 1, 0
        dims = [xs[k].shape[0].value for k in order]
        if all(d is not None for d in dims):
            full = dims
        else:
            full = stack([size(xs[k]) for k in order])
        outs = []
        for i, x in enumerate(xs):
            pos = order.index(i)
            shp = [1] * n
            shp[pos] = -1
            outs.append(broadcast_to(reshape(x, shp), full))
        return outs


def _unique_infer(op):
    x = op.inputs[0]
    if x.shape.ndims not in (None, 1):
        raise ValueError(f"unique expects a 1D vector, got shape {x.shape}")
    return [(x.dtype, TensorShape([None])), (op.attrs["out_idx"], x.shape)]


def _unique_ref(op, x):
    x = np.asarray(x)
    _, first, inverse = np.unique(x, return_index=True, return_inverse=True)
    order = np.argsort(first)          # values in order of first appearance, as TF1
    rank_of = np.empty_like(order)
    rank_of[order] = np.arange(order.size)
    idx_dtype = op.attrs["out_idx"].as_numpy_dtype
    return x[np.sort(first)], rank_of[inverse.reshape(-1)].astype(idx_dtype)


register("Unique", infer=_unique_infer, ref=_unique_ref, differentiable=False, kind="other",
         examples=[Example(build=lambda x: unique(x)[1], inputs=[(6,)], dtypes=("int32",),
                           domain="index", index_max=3,
                           expect=lambda x: np.array([list(dict.fromkeys(x)).index(v)
                                                      for v in x]))])


def unique(x, out_idx=_dtypes.int32, name: Optional[str] = None):
    """`tf.unique`: (y, idx) with y the distinct values in order of first appearance and
    x == y[idx]."""
    import collections
    t = convert_to_tensor(x)
    op = make_op("Unique", [t], {"out_idx": _check_out_type(out_idx)}, name=name)
    return collections.namedtuple("Unique", ["y", "idx"])(*op.outputs)


def _invert_perm_ref(op, x):
    x = np.asarray(x)
    if sorted(x.tolist()) != list(builtins.range(x.size)):
        raise _err(f"{x.tolist()} is not a permutation of 0..{x.size - 1}", op)
    out = np.empty_like(x)
    out[x] = np.arange(x.size, dtype=x.dtype)
    return out


register("InvertPermutation", infer=lambda op: [(op.inputs[0].dtype, op.inputs[0].shape)],
         ref=_invert_perm_ref, differentiable=False, kind="other")


def invert_permutation(x, name: Optional[str] = None) -> Tensor:
    """`tf.invert_permutation`: y[x[i]] = i."""
    return make_op("InvertPermutation", [convert_to_tensor(x)], name=name).outputs[0]


register("Roll", infer=_same_shape_axes_infer,
         ref=lambda op, x: np.roll(x, op.attrs["shift"], axis=op.attrs["axis"]),
         grad=lambda op, g: [roll(g, [-s for s in op.attrs["shift"]], op.attrs["axis"])],
         kind="other",
         examples=[Example(build=lambda x: roll(x, [1, -2], [0, 1]), inputs=[(3, 4)],
                           expect=lambda x: np.roll(x, (1, -2), axis=(0, 1)))])


def roll(input, shift, axis, name: Optional[str] = None) -> Tensor:  # noqa: A002
    """`tf.roll`: shift elements cyclically along the given axes."""
    x = convert_to_tensor(input)
    sh, d1 = _int_list_arg(shift, "shift")
    ax, d2 = _int_list_arg(axis, "axis")
    if d1 is not None or d2 is not None:
        raise TypeError("roll: shift and axis must be known at build time")
    if len(sh) != len(ax):
        raise ValueError(f"shift and axis must have the same size: {len(sh)} vs {len(ax)}")
    return make_op("Roll", [x], {"shift": tuple(sh), "axis": tuple(ax)}, name=name).outputs[0]
