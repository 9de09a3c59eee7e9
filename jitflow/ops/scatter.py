"""scatter_nd and unsorted_segment_sum.
"""
from __future__ import annotations

import builtins
from typing import Optional

import numpy as np

from jitflow.compiler.ir import X0, Alloc, Apply, Check, Lit, Load, Region, S
from jitflow.compiler.lower import Unsupported
from jitflow.core.graph import Tensor, convert_to_tensor, make_op, name_scope
from jitflow.ops._array_args import _args, _err, _int_list_arg, _shape_of, _tf_shape
from jitflow.ops.slicing import _gather_nd_index, gather, gather_nd
from jitflow.ops.registry import Example, register
from jitflow.core.shapes import TensorShape

__all__ = ["scatter_nd", "unsorted_segment_sum"]
NAMESPACES = {"math": ["unsorted_segment_sum"]}


# -- scatter_nd, unsorted_segment_sum ----------------------------------------------------------
def _scatter_nd_infer(op):
    indices, updates = op.inputs[:2]
    if not indices.dtype.is_integer:
        raise TypeError(f"Value for attr 'Tindices' of {indices.dtype.name} is not in the list "
                        "of allowed values: int32, int64")
    out = _shape_of(op, "shape", 2)
    idd, ud, od = indices.shape.as_tuple(), updates.shape.as_tuple(), out.as_tuple()
    if None not in (idd, ud, od) and idd[-1] is not None:
        want = TensorShape(idd[:-1] + od[idd[-1]:])
        if not want.is_compatible_with(TensorShape(ud)):
            raise ValueError(f"The shape of updates {_tf_shape(ud)} must be indices.shape[:-1] "
                             f"+ shape[indices.shape[-1]:] = {_tf_shape(want)} for "
                             f"'{op.name}' (op: 'ScatterNd')")
    return [(updates.dtype, out)]


def _scatter_nd_ref(op, indices, updates, *dyn):
    (shape_,) = _args(op, dyn, "shape")
    out = np.zeros(shape_, dtype=np.asarray(updates).dtype)
    np.add.at(out, _gather_nd_index(op, out, indices), updates)  # duplicates are summed
    return out


register("ScatterNd", infer=_scatter_nd_infer, ref=_scatter_nd_ref,
         grad=lambda op, g: [None, gather_nd(g, op.inputs[0])] + [None] * (len(op.inputs) - 2),
         kind="other",
         examples=[Example(build=lambda u: scatter_nd([[1], [3], [1]], u, [5, 2]),
                           inputs=[(3, 2)],
                           expect=lambda u: np.stack([np.zeros(2), u[0] + u[2], np.zeros(2),
                                                      u[1], np.zeros(2)]))])


def scatter_nd(indices, updates, shape, name: Optional[str] = None) -> Tensor:  # noqa: A002
    """`tf.scatter_nd`: zeros of `shape` with `updates` added at `indices` (sums duplicates)."""
    with name_scope(name, "ScatterNd", [indices, updates]) as scope:
        i = convert_to_tensor(indices, name="indices")
        u = convert_to_tensor(updates, name="updates")
        static, dyn = _int_list_arg(shape, "shape")
        inputs = [i, u] + ([dyn] if dyn is not None else [])
        return make_op("ScatterNd", inputs, {"shape": static}, name=scope).outputs[0]


def _segment_infer(op):
    data, ids = op.inputs
    if not ids.dtype.is_integer:
        raise TypeError(f"segment_ids must be int32 or int64, got {ids.dtype.name}")
    dd, idd = data.shape.as_tuple(), ids.shape.as_tuple()
    if dd is None or idd is None:
        return [(data.dtype, TensorShape(None))]
    if not TensorShape(dd[:len(idd)]).is_compatible_with(TensorShape(idd)):
        raise ValueError(f"segment_ids.shape = {_tf_shape(idd)} does not match the leading "
                         f"dimensions of data.shape = {_tf_shape(dd)}")
    return [(data.dtype, TensorShape((op.attrs["num_segments"],) + dd[len(idd):]))]


def _segment_ref(op, data, ids):
    data, ids = np.asarray(data), np.asarray(ids)
    n = op.attrs["num_segments"]
    if data.shape[:ids.ndim] != ids.shape:
        raise _err(f"data.shape = {list(data.shape)} does not start with segment_ids.shape = "
                   f"{list(ids.shape)}", op)
    out = np.zeros((n,) + data.shape[ids.ndim:], dtype=data.dtype)
    flat = ids.reshape(-1)
    if np.any(flat >= n):
        bad = int(np.argmax(flat >= n))
        raise _err(f"segment_ids[{bad}] = {int(flat[bad])} is out of range [0, {n})", op)
    keep = flat >= 0  # negative ids are dropped, as in TF1
    np.add.at(out, flat[keep], data.reshape((-1,) + data.shape[ids.ndim:])[keep])
    return out


def _segment_grad(op, g):
    data, ids = op.inputs
    safe = make_op("SegmentIdsClip", [ids], {"num_segments": op.attrs["num_segments"]})
    gathered = gather(g, safe.outputs[0])
    mask = make_op("SegmentIdsMask", [ids, data]).outputs[0]
    from jitflow.ops.math.arithmetic import multiply
    return [multiply(gathered, mask), None]


register("SegmentIdsClip", infer=lambda op: [(op.inputs[0].dtype, op.inputs[0].shape)],
         ref=lambda op, ids: np.clip(ids, 0, op.attrs["num_segments"] - 1),
         differentiable=False, kind="other", doc="Negative segment ids mapped to 0.")
def _ids_mask_infer(op):
    ids, data = op.inputs
    ri, rd = ids.shape.ndims, data.shape.ndims
    if ri is None or rd is None:
        return [(data.dtype, TensorShape(None))]
    return [(data.dtype, TensorShape(ids.shape.as_tuple() + (1,) * (rd - ri)))]


def _ids_mask_ref(op, ids, data):
    keep = np.asarray(ids) >= 0
    return keep.reshape(keep.shape + (1,) * (np.ndim(data) - keep.ndim)).astype(
        np.asarray(data).dtype)


register("SegmentIdsMask", infer=_ids_mask_infer, ref=_ids_mask_ref, differentiable=False,
         kind="other",
         doc="1 where a segment id is kept (>= 0), shaped to broadcast against the data.")
def _lower_segment_sum(low, op, pos: int) -> None:
    """A zero-filled output and one `ir.Region` adding each data row at its segment id (in
    data order, as the reference's np.add.at): ids >= num_segments fail the kernel's check
    (the references raise TF's error); negative ids are skipped (`Region.where`)."""
    out = op.outputs[0]
    data, ids = op.inputs
    d = low.expr(data)
    iv = low.value(ids, pos)
    ri = iv.rank
    if len(d.ones) < ri:
        low.fail(pos, "data.shape does not start with segment_ids.shape")
        raise Unsupported("segment ids of a higher rank than the data")
    for k in builtins.range(ri):
        if iv.ones[k] != d.ones[k] or iv.dims[k] != d.dims[k]:
            low.checks.append(Check(iv.dims[k], d.dims[k], pos,
                                    "data.shape does not start with segment_ids.shape"))
    n = int(op.attrs["num_segments"])
    low.range_check(iv, ("const", n), pos, "segment_ids is out of range", lower=False)
    if low.is_fed(out):
        return
    dt = d.dtype
    ones = (n == 1,) + d.ones[ri:]
    dims = (1 if n == 1 else ("const", n),) + d.dims[ri:]
    v = low.buf(dt, ones, dims)
    low.emit(Alloc(v, Lit(0, dt), pos))
    axes = tuple(builtins.range(ri))
    items = (("take", iv, axes) if ri else ("fixed", ("const", 0)),) + tuple(
        ("lin", ("const", 0), 1, k) for k in builtins.range(ri, len(d.ones)))
    keep = Apply(S.ge(X0, 0), [Load(iv, axes if ri else None)], "bool", pos, False,
                 iv.dtype)
    low.emit(Region(v, d.expr, d.dims, d.ones, items, "add", pos, keep))
    low.set(out, v)


def _segment_lowerable(op) -> bool:
    data, ids = op.inputs
    return (ids.shape.ndims is not None and data.shape.ndims is not None
            and data.dtype.name != "bool" and ids.shape.ndims >= 1)


register("UnsortedSegmentSum", infer=_segment_infer, ref=_segment_ref, grad=_segment_grad,
         kind="other", lower=_lower_segment_sum, lowerable=_segment_lowerable, inline=(0,),
         examples=[Example(build=lambda d, i: unsorted_segment_sum(d, i, 4),
                           inputs=[(5, 2), (5,)], dtypes=(("float32", "int32"),),
                           domain="index", index_max=4,
                           expect=lambda d, i: np.stack([d[i == k].sum(0)
                                                         for k in builtins.range(4)]))])


def unsorted_segment_sum(data, segment_ids, num_segments, name: Optional[str] = None) -> Tensor:
    """`tf.unsorted_segment_sum`: out[k] = sum of data rows whose segment id is k (negative
    ids are dropped)."""
    static, dyn = _int_list_arg(num_segments, "num_segments")
    if dyn is not None:
        raise TypeError("unsorted_segment_sum: num_segments must be known at build time")
    with name_scope(name, "UnsortedSegmentSum", [data, segment_ids]) as scope:
        d = convert_to_tensor(data, name="data")
        i = convert_to_tensor(segment_ids, name="segment_ids")
        return make_op("UnsortedSegmentSum", [d, i], {"num_segments": static[0]},
                       name=scope).outputs[0]
