"""More array ops of TF1's top level: dynamic_partition/dynamic_stitch, sort/argsort,
unique_with_counts, setdiff1d, repeat, batch_gather, histogram_fixed_width, ensure_shape,
saturate_cast, the scatter_nd/scatter variants on variables, random gamma and poisson draws,
and the static helpers (broadcast_static_shape, dimension_value, ...).

Ops whose output sizes depend on values (partition, unique, setdiff) are host-size ops with
NumPy references; the rest are compositions or references with TF's gradients.
"""
from __future__ import annotations

import collections
from typing import Optional

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.core import errors
from jitflow.core.graph import Tensor, convert_to_tensor, make_op, name_scope
from jitflow.ops.registry import Example, register
from jitflow.core.shapes import Dimension, TensorShape, as_shape, broadcast_static

__all__ = ["dynamic_partition", "dynamic_stitch", "sort", "argsort", "unique_with_counts",
           "setdiff1d", "repeat", "batch_gather", "parallel_stack", "histogram_fixed_width",
           "ensure_shape", "broadcast_static_shape", "broadcast_dynamic_shape",
           "dimension_value", "dimension_at_index", "scatter_nd_update", "scatter_nd_add",
           "scatter_nd_sub", "scatter_mul", "scatter_div", "scatter_max", "scatter_min",
           "random_gamma", "random_poisson", "guarantee_const", "searchsorted"]

NAMESPACES = {
    "random": [("gamma", "random_gamma"), ("poisson", "random_poisson"),
               ("get_seed", "_get_seed")],
}


def _get_seed(op_seed):
    """`tf.random.get_seed`: (graph seed, op seed) as `tf.get_seed`."""
    from jitflow.core.graph import get_default_graph
    return get_default_graph().seed, op_seed


# -- dynamic_partition / dynamic_stitch ------------------------------------------------------------
def _partition_infer(op):
    data, parts = op.inputs
    d, p = data.shape.as_tuple(), parts.shape.as_tuple()
    rest = None if d is None or p is None else list(d[len(p):])
    return [(data.dtype, TensorShape(None if rest is None else [None] + rest))
            for _ in range(op.attrs["num_partitions"])]


def _partition_ref(op, data, parts):
    data, parts = np.asarray(data), np.asarray(parts)
    n = op.attrs["num_partitions"]
    if parts.size and (parts.min() < 0 or parts.max() >= n):
        bad = parts[(parts < 0) | (parts >= n)].flat[0]
        raise errors.InvalidArgumentError(None, op, f"partitions has value {bad} which is "
                                                    f"not in [0, {n})")
    flat = parts.reshape(-1)
    rows = data.reshape((flat.size,) + data.shape[parts.ndim:])
    return tuple(rows[flat == i] for i in range(n))


def _partition_grad(op, *grads):
    from jitflow.ops.shape_ops import reshape, shape, size
    from jitflow.ops.sources import range as range_
    data, parts = op.inputs
    idx = reshape(range_(size(parts)), shape(parts))
    pieces = dynamic_partition(idx, parts, op.attrs["num_partitions"])
    gs = [g if g is not None else _zeros_rows(o) for g, o in zip(grads, op.outputs)]
    stitched = dynamic_stitch(pieces, gs)
    return [reshape(stitched, shape(data)), None]


def _zeros_rows(t: Tensor) -> Tensor:
    from jitflow.ops.sources import zeros_like
    return zeros_like(t)


register("DynamicPartition", infer=_partition_infer, ref=_partition_ref, grad=_partition_grad,
         kind="host", doc="Inputs (data, partitions): the rows of data for each partition id.")


def _stitch_infer(op):
    n = op.attrs["n"]
    idx, data = op.inputs[:n], op.inputs[n:]
    rest = None
    for i, d in zip(idx, data):
        dd, ii = d.shape.as_tuple(), i.shape.as_tuple()
        if dd is not None and ii is not None:
            rest = list(dd[len(ii):])
    return [(data[0].dtype, TensorShape(None if rest is None else [None] + rest))]


def _stitch_ref(op, *args):
    n = op.attrs["n"]
    idx = [np.asarray(a).reshape(-1) for a in args[:n]]
    data = [np.asarray(d) for d in args[n:]]
    rows = [d.reshape((i.size,) + d.shape[np.asarray(args[k]).ndim:])
            for k, (i, d) in enumerate(zip(idx, data))]
    size = max((int(i.max()) + 1 for i in idx if i.size), default=0)
    out = np.zeros((size,) + rows[0].shape[1:], dtype=rows[0].dtype)
    for i, r in zip(idx, rows):
        out[i] = r  # later inputs win, as TF
    return out


def _stitch_grad(op, g):
    from jitflow.ops.slicing import gather
    n = op.attrs["n"]
    return [None] * n + [gather(g, i) for i in op.inputs[:n]]


register("DynamicStitch", infer=_stitch_infer, ref=_stitch_ref, grad=_stitch_grad, kind="host",
         doc="Inputs (n index tensors, n data tensors): rows placed at their indices.")


def dynamic_partition(data, partitions, num_partitions: int, name: Optional[str] = None) -> list:
    """`tf.dynamic_partition`: the rows of `data` split by `partitions` ids."""
    with name_scope(name, "DynamicPartition", [data, partitions]) as scope:
        d = convert_to_tensor(data, name="data")
        p = convert_to_tensor(partitions, name="partitions")
        if p.dtype != _dtypes.int32:
            raise TypeError(f"partitions must be int32, got {p.dtype.name}")
        op = make_op("DynamicPartition", [d, p], {"num_partitions": int(num_partitions)},
                     name=scope[:-1])
        return list(op.outputs)


def dynamic_stitch(indices, data, name: Optional[str] = None) -> Tensor:
    """`tf.dynamic_stitch`: out[indices[m][i]] = data[m][i] (later ones win)."""
    with name_scope(name, "DynamicStitch", list(indices) + list(data)) as scope:
        idx = [convert_to_tensor(i, name="indices") for i in indices]
        dat = [convert_to_tensor(d, name="data") for d in data]
        if len(idx) != len(dat):
            raise ValueError("dynamic_stitch needs as many data tensors as index tensors")
        return make_op("DynamicStitch", idx + dat, {"n": len(idx)},
                       name=scope[:-1]).outputs[0]


# -- sorting and sets -----------------------------------------------------------------------------
def sort(values, axis: int = -1, direction: str = "ASCENDING",
         name: Optional[str] = None) -> Tensor:
    """`tf.sort`: values sorted along `axis` (gathers at `argsort`'s indices, so it has
    gradients)."""
    from jitflow.ops.shape_ops import reshape, shape, transpose
    from jitflow.ops.slicing import gather
    with name_scope(name, "sort", [values]):
        x = convert_to_tensor(values, name="values")
        r = x.shape.ndims
        if r is None:
            if axis != -1:
                raise ValueError(f"sort along axis {axis} needs a tensor of known rank (got "
                                 f"'{x.name}' of unknown rank); axis -1 works on any rank")
            flat = reshape(x, [-1, shape(x)[-1]])
            return reshape(batch_gather(flat, argsort(flat, direction=direction)), shape(x))
        a = axis % r
        if r == 1:
            return gather(x, argsort(x, direction=direction))
        perm = [d for d in range(r) if d != a] + [a]
        xt = transpose(x, perm) if a != r - 1 else x
        flat = reshape(xt, [-1, shape(xt)[-1]])
        out = reshape(batch_gather(flat, argsort(flat, direction=direction)), shape(xt))
        if a != r - 1:
            out = transpose(out, [perm.index(d) for d in range(r)])
        return out


def _argsort_ref(op, x):
    x = np.asarray(x)
    a = op.attrs["axis"]
    if op.attrs["direction"] == "DESCENDING":
        return _desc(x, a)
    return np.argsort(x, axis=a, kind="stable").astype(np.int32)


def _desc(x, a):
    """Indices sorting x descending, ties in their original order (as TF)."""
    if x.dtype.kind in "iub":
        key = -x.astype(np.int64)
    else:
        key = -x
    return np.argsort(key, axis=a, kind="stable").astype(np.int32)


register("ArgSort", infer=lambda op: [(_dtypes.int32, op.inputs[0].shape)], ref=_argsort_ref,
         differentiable=False, kind="other",
         doc="The indices that sort the input along attr axis (ties keep their order).",
         examples=[Example(lambda x: argsort(x), [(2, 5)],
                           lambda x: np.argsort(x, axis=-1, kind="stable"))])


def argsort(values, axis: int = -1, direction: str = "ASCENDING", stable: bool = False,
            name: Optional[str] = None) -> Tensor:
    """`tf.argsort`: the indices sorting `values` along `axis` (int32)."""
    if direction not in ("ASCENDING", "DESCENDING"):
        raise ValueError(f"{direction} should be one of ASCENDING, DESCENDING")
    with name_scope(name, "argsort", [values]) as scope:
        x = convert_to_tensor(values, name="values")
        r = x.shape.ndims
        if r is None and axis != -1:
            raise ValueError(f"argsort along axis {axis} needs a tensor of known rank (got "
                             f"'{x.name}' of unknown rank); axis -1 works on any rank")
        a = -1 if r is None else axis % r
        return make_op("ArgSort", [x], {"axis": a, "direction": direction},
                       name=scope[:-1]).outputs[0]


def _uwc_infer(op):
    x = op.inputs[0]
    t = op.attrs["out_idx"]
    return [(x.dtype, TensorShape([None])), (t, x.shape), (t, TensorShape([None]))]


def _uwc_ref(op, x):
    x = np.asarray(x)
    _, first, inv, counts = np.unique(x, return_index=True, return_inverse=True,
                                      return_counts=True)
    order = np.argsort(first)        # TF keeps the order of first appearance
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    t = op.attrs["out_idx"].as_numpy_dtype
    return x[np.sort(first)], rank[inv.reshape(-1)].astype(t), counts[order].astype(t)


register("UniqueWithCounts", infer=_uwc_infer, ref=_uwc_ref, differentiable=False, kind="host",
         doc="(unique values in order of appearance, index of each input, counts).")


def unique_with_counts(x, out_idx=_dtypes.int32, name: Optional[str] = None):
    """`tf.unique_with_counts`: (y, idx, count) with y in order of first appearance."""
    op = make_op("UniqueWithCounts", [convert_to_tensor(x)],
                 {"out_idx": _dtypes.as_dtype(out_idx)}, name=name or "UniqueWithCounts")
    return collections.namedtuple("UniqueWithCounts", ["y", "idx", "count"])(*op.outputs)


def _setdiff_ref(op, x, y):
    x, y = np.asarray(x), np.asarray(y)
    keep = ~np.isin(x, y)
    return x[keep], np.flatnonzero(keep).astype(op.attrs["index_dtype"].as_numpy_dtype)


register("ListDiff", infer=lambda op: [(op.inputs[0].dtype, TensorShape([None])),
                                       (op.attrs["index_dtype"], TensorShape([None]))],
         ref=_setdiff_ref, differentiable=False, kind="host",
         doc="(the values of x not in y, their positions in x).")


def setdiff1d(x, y, index_dtype=_dtypes.int32, name: Optional[str] = None):
    """`tf.setdiff1d`: (out, idx): the values of 1-D `x` not in `y`, and where they are."""
    op = make_op("ListDiff", [convert_to_tensor(x), convert_to_tensor(y)],
                 {"index_dtype": _dtypes.as_dtype(index_dtype)}, name=name or "ListDiff")
    return collections.namedtuple("ListDiff", ["out", "idx"])(*op.outputs)


def _searchsorted_ref(op, seq, vals):
    seq, vals = np.asarray(seq), np.asarray(vals)
    side = op.attrs["side"]
    out = np.empty(vals.shape, dtype=op.attrs["out_type"].as_numpy_dtype)
    for idx in np.ndindex(*vals.shape[:-1]):
        out[idx] = np.searchsorted(seq[idx], vals[idx], side=side)
    return out


register("SearchSorted", infer=lambda op: [(op.attrs["out_type"], op.inputs[1].shape)],
         ref=_searchsorted_ref, differentiable=False, kind="other",
         doc="Where each value would go in the sorted innermost rows of the sequence.")


def searchsorted(sorted_sequence, values, side: str = "left", out_type=_dtypes.int32,
                 name: Optional[str] = None) -> Tensor:
    """`tf.searchsorted`: insertion points of `values` in the sorted innermost rows."""
    if side not in ("left", "right"):
        raise ValueError(f"side must be 'left' or 'right', got {side!r}")
    return make_op("SearchSorted", [convert_to_tensor(sorted_sequence),
                                    convert_to_tensor(values)],
                   {"side": side, "out_type": _dtypes.as_dtype(out_type)},
                   name=name or "SearchSorted").outputs[0]


# -- repeat, batch_gather, stacking ---------------------------------------------------------------
def repeat(input, repeats, axis=None, name: Optional[str] = None) -> Tensor:  # noqa: A002
    """`tf.repeat`: each element (or slice along `axis`) repeated `repeats` times (a gather
    at static indices)."""
    from jitflow.ops.shape_ops import reshape
    from jitflow.ops.slicing import gather
    with name_scope(name, "Repeat", [input, repeats]):
        x = convert_to_tensor(input, name="input")
        if isinstance(repeats, Tensor):
            if repeats.op.type != "Const":
                raise NotImplementedError("repeat: repeats must be known at build time")
            repeats = repeats.op.attrs["value"]
        if axis is None:
            x = reshape(x, [-1])
            axis = 0
        n = x.shape.as_tuple()[axis]
        reps = np.broadcast_to(np.asarray(repeats, np.int64), (n,) if n is not None else ())
        if n is None:
            if np.ndim(repeats):
                raise NotImplementedError("repeat: per-element repeats need a static size")
            raise NotImplementedError("repeat needs a static size along the axis")
        return gather(x, np.repeat(np.arange(n), reps).astype(np.int32), axis=axis)


def batch_gather(params, indices, name: Optional[str] = None) -> Tensor:
    """`tf.batch_gather`: params[b..., indices[b..., i], ...] (batch dims shared)."""
    from jitflow.ops.join import stack
    from jitflow.ops.shape_ops import expand_dims, shape
    from jitflow.ops.slicing import gather_nd
    from jitflow.ops.sources import range as range_
    from jitflow.ops.tile_pad import tile
    from jitflow.ops.math.casting import cast
    with name_scope(name, "BatchGather", [params, indices]):
        p = convert_to_tensor(params, name="params")
        i = convert_to_tensor(indices, name="indices")
        if i.shape.ndims != 2:
            if i.shape.ndims == 1:
                from jitflow.ops.slicing import gather
                return gather(p, i)
            raise NotImplementedError("batch_gather supports rank-2 indices")
        b = shape(i)[0]
        k = shape(i)[1]
        rows = tile(expand_dims(range_(b), 1), stack([1, k]))
        idx = stack([rows, cast(i, _dtypes.int32)], axis=-1)
        return gather_nd(p, idx)


def parallel_stack(values, name: str = "parallel_stack") -> Tensor:
    """`tf.parallel_stack`: the same as `tf.stack` along axis 0."""
    from jitflow.ops.join import stack
    return stack(values, 0, name=name)


def histogram_fixed_width(values, value_range, nbins: int = 100, dtype=_dtypes.int32,
                          name: Optional[str] = None) -> Tensor:
    """`tf.histogram_fixed_width`: counts of values in `nbins` equal bins over `value_range`
    (values outside go to the first or last bin)."""
    return make_op("HistogramFixedWidth", [convert_to_tensor(values),
                                           convert_to_tensor(value_range)],
                   {"nbins": int(nbins), "dtype": _dtypes.as_dtype(dtype)},
                   name=name or "HistogramFixedWidth").outputs[0]


def _hist_ref(op, values, vr):
    v = np.asarray(values, np.float64).reshape(-1)
    lo, hi = float(vr[0]), float(vr[1])
    n = op.attrs["nbins"]
    idx = np.clip(np.floor((v - lo) / (hi - lo) * n).astype(np.int64), 0, n - 1)
    return np.bincount(idx, minlength=n).astype(op.attrs["dtype"].as_numpy_dtype)


register("HistogramFixedWidth", infer=lambda op: [(op.attrs["dtype"],
                                                   TensorShape([op.attrs["nbins"]]))],
         ref=_hist_ref, differentiable=False, kind="other",
         doc="Counts of values in nbins equal bins over value_range.")


# -- shape helpers --------------------------------------------------------------------------------
def ensure_shape(x, shape, name: Optional[str] = None) -> Tensor:
    """`tf.ensure_shape`: x, with its static shape merged with `shape` and checked when it
    runs (InvalidArgumentError on a mismatch)."""
    x = convert_to_tensor(x, name="x")
    s = as_shape(shape)
    if not x.shape.is_compatible_with(s):
        raise ValueError(f"Shapes {x.shape} and {s} are incompatible")
    out = make_op("EnsureShape", [x], {"shape": s}, name=name or "EnsureShape").outputs[0]
    return out


def _ensure_ref(op, x):
    if not op.attrs["shape"].is_compatible_with(TensorShape(np.shape(x))):
        raise errors.InvalidArgumentError(
            None, op, f"Shape of tensor {op.inputs[0].name} {list(np.shape(x))} is not "
                      f"compatible with expected shape {op.attrs['shape']}.")
    return x


register("EnsureShape", infer=lambda op: [(op.inputs[0].dtype,
                                           op.inputs[0].shape.merge_with(op.attrs["shape"]))],
         ref=_ensure_ref, grad=lambda op, g: [g], kind="other",
         doc="The input, its shape checked against attr shape.")


def guarantee_const(input, name: Optional[str] = None) -> Tensor:  # noqa: A002
    """`tf.guarantee_const`: the input (a hint TF's runtime uses; nothing to do here)."""
    from jitflow.ops.identity import identity
    return identity(input, name=name or "GuaranteeConst")


def broadcast_static_shape(shape_x, shape_y) -> TensorShape:
    """`tf.broadcast_static_shape`: the broadcast of two TensorShapes."""
    return broadcast_static(as_shape(shape_x), as_shape(shape_y))


def broadcast_dynamic_shape(shape_x, shape_y, name: Optional[str] = None) -> Tensor:
    """`tf.broadcast_dynamic_shape`: the broadcast of two shape vectors."""
    return make_op("BroadcastArgs", [convert_to_tensor(shape_x), convert_to_tensor(shape_y)],
                   name=name or "BroadcastArgs").outputs[0]


register("BroadcastArgs", infer=lambda op: [(op.inputs[0].dtype, TensorShape([None]))],
         ref=lambda op, a, b: np.array(np.broadcast_shapes(tuple(np.asarray(a)),
                                                           tuple(np.asarray(b))),
                                       dtype=op.inputs[0].dtype.as_numpy_dtype),
         differentiable=False, kind="other", doc="The broadcast shape of two shape vectors.")


def dimension_value(dimension):
    """`tf.dimension_value`: a Dimension's int value (or None), ints unchanged."""
    return dimension.value if isinstance(dimension, Dimension) else dimension


def dimension_at_index(shape, index):
    """`tf.dimension_at_index`: dimension `index` of `shape` as a Dimension."""
    s = as_shape(shape)
    if s.ndims is None:
        return Dimension(None)
    return Dimension(s.as_tuple()[index])


# -- scatter variants on variables ----------------------------------------------------------------
def _scatter_nd_var_ref(kind: str):
    def ref(op, var_op, indices, updates, ctx):
        out = np.array(ctx.read_var(var_op), copy=True)
        idx = np.asarray(indices)
        k = idx.shape[-1]
        flat = idx.reshape(-1, k)
        upd = np.asarray(updates).reshape((flat.shape[0],) + out.shape[k:])
        if np.any(flat < 0) or np.any(flat >= np.asarray(out.shape[:k])):
            raise errors.InvalidArgumentError(None, op, f"indices of '{op.name}' are out of "
                                                        f"range for shape {list(out.shape)}")
        key = tuple(flat.T)
        if kind == "update":
            out[key] = upd
        elif kind == "add":
            np.add.at(out, key, upd)
        else:
            np.subtract.at(out, key, upd)
        return ctx.write_var(var_op, out)
    return ref


def _scatter_var_ref(fn):
    def ref(op, var_op, indices, updates, ctx):
        out = np.array(ctx.read_var(var_op), copy=True)
        idx = np.asarray(indices).reshape(-1)
        if np.any(idx < 0) or np.any(idx >= out.shape[0]):
            raise errors.InvalidArgumentError(None, op, f"indices of '{op.name}' are not in "
                                                        f"[0, {out.shape[0]})")
        upd = np.broadcast_to(np.asarray(updates), idx.shape + out.shape[1:])
        fn.at(out, idx, upd.astype(out.dtype))
        return ctx.write_var(var_op, out)
    return ref


_VAR_OP = dict(infer=lambda op: [(op.inputs[0].dtype, op.inputs[0].shape)], needs_ctx=True,
               stateful=True, differentiable=False, kind="state")
for _t, _k in (("ScatterNdUpdate", "update"), ("ScatterNdAdd", "add"), ("ScatterNdSub", "sub")):
    register(_t, ref=_scatter_nd_var_ref(_k), doc=f"Scatter-{_k} rows of a variable at "
                                                   "N-d indices.", **_VAR_OP)
for _t, _f in (("ScatterMul", np.multiply), ("ScatterDiv", np.divide),
               ("ScatterMax", np.maximum), ("ScatterMin", np.minimum)):
    register(_t, ref=_scatter_var_ref(_f), doc="Combine rows of a variable at indices with "
                                               "updates.", **_VAR_OP)


def _var_scatter(op_type: str, ref, indices, updates, name) -> Tensor:
    v = ref.op.outputs[0] if hasattr(ref, "op") and not isinstance(ref, Tensor) else ref
    i = convert_to_tensor(indices, name="indices")
    u = convert_to_tensor(updates, dtype=v.dtype if not isinstance(updates, Tensor) else None,
                          name="updates")
    return make_op(op_type, [v, i, u], name=name or op_type).outputs[0]


def scatter_nd_update(ref, indices, updates, use_locking: bool = True,
                      name: Optional[str] = None) -> Tensor:
    """`tf.scatter_nd_update`: ref[indices] = updates (N-d indices)."""
    return _var_scatter("ScatterNdUpdate", ref, indices, updates, name)


def scatter_nd_add(ref, indices, updates, use_locking: bool = False,
                   name: Optional[str] = None) -> Tensor:
    """`tf.scatter_nd_add`: ref[indices] += updates (N-d indices)."""
    return _var_scatter("ScatterNdAdd", ref, indices, updates, name)


def scatter_nd_sub(ref, indices, updates, use_locking: bool = False,
                   name: Optional[str] = None) -> Tensor:
    """`tf.scatter_nd_sub`: ref[indices] -= updates (N-d indices)."""
    return _var_scatter("ScatterNdSub", ref, indices, updates, name)


def scatter_mul(ref, indices, updates, use_locking: bool = False,
                name: Optional[str] = None) -> Tensor:
    """`tf.scatter_mul`: ref[indices] *= updates."""
    return _var_scatter("ScatterMul", ref, indices, updates, name)


def scatter_div(ref, indices, updates, use_locking: bool = False,
                name: Optional[str] = None) -> Tensor:
    """`tf.scatter_div`: ref[indices] /= updates."""
    return _var_scatter("ScatterDiv", ref, indices, updates, name)


def scatter_max(ref, indices, updates, use_locking: bool = False,
                name: Optional[str] = None) -> Tensor:
    """`tf.scatter_max`: ref[indices] = max(ref[indices], updates)."""
    return _var_scatter("ScatterMax", ref, indices, updates, name)


def scatter_min(ref, indices, updates, use_locking: bool = False,
                name: Optional[str] = None) -> Tensor:
    """`tf.scatter_min`: ref[indices] = min(ref[indices], updates)."""
    return _var_scatter("ScatterMin", ref, indices, updates, name)


# -- random gamma and poisson ---------------------------------------------------------------------
def _gamma_ref(op, alpha, beta, ctx):
    shape = tuple(op.attrs["shape"]) + np.broadcast_shapes(np.shape(alpha), np.shape(beta))
    draw = ctx.rng(op).gamma(np.broadcast_to(alpha, shape), size=shape) / np.broadcast_to(
        beta, shape)
    return draw.astype(op.attrs["dtype"].as_numpy_dtype)


def _poisson_ref(op, lam, ctx):
    shape = tuple(op.attrs["shape"]) + np.shape(lam)
    return ctx.rng(op).poisson(np.broadcast_to(lam, shape), size=shape).astype(
        op.attrs["dtype"].as_numpy_dtype)


def _rand_infer(op):
    extra = broadcast_static(*[t.shape for t in op.inputs]) if len(op.inputs) == 2 \
        else op.inputs[0].shape
    if extra.ndims is None:
        return [(op.attrs["dtype"], TensorShape(None))]
    return [(op.attrs["dtype"], TensorShape(list(op.attrs["shape"]) + list(extra.as_tuple())))]


register("RandomGamma", infer=_rand_infer, ref=_gamma_ref, needs_ctx=True, stateful=True,
         differentiable=False, kind="random", doc="Gamma(alpha, beta) draws of attr shape "
                                                  "(+ the parameters' shape).")
register("RandomPoissonV2", infer=_rand_infer, ref=_poisson_ref, needs_ctx=True, stateful=True,
         differentiable=False, kind="random", doc="Poisson(lam) draws of attr shape "
                                                  "(+ lam's shape).")


def _static_shape(shape) -> list:
    from jitflow.ops._array_args import _int_list_arg
    static, dyn = _int_list_arg(shape, "shape")
    if dyn is not None:
        raise NotImplementedError("random gamma/poisson: the shape must be static")
    return list(static)


def random_gamma(shape, alpha, beta=None, dtype=_dtypes.float32, seed=None,
                 name: Optional[str] = None) -> Tensor:
    """`tf.random.gamma`: Gamma(alpha, rate beta) samples of shape `shape` + alpha's shape."""
    dtype = _dtypes.as_dtype(dtype)
    with name_scope(name, "random_gamma", [shape, alpha, beta]) as scope:
        a = convert_to_tensor(alpha, dtype=dtype if not isinstance(alpha, Tensor) else None)
        b = convert_to_tensor(1.0 if beta is None else beta,
                              dtype=dtype if not isinstance(beta, Tensor) else None)
        return make_op("RandomGamma", [a, b], {"shape": _static_shape(shape), "dtype": dtype,
                                               "seed": None if seed is None else int(seed)},
                       name=scope[:-1]).outputs[0]


def random_poisson(lam, shape, dtype=_dtypes.float32, seed=None,
                   name: Optional[str] = None) -> Tensor:
    """`tf.random.poisson` (TF1 argument order: lam, shape)."""
    dtype = _dtypes.as_dtype(dtype)
    with name_scope(name, "random_poisson", [lam, shape]) as scope:
        lam_t = convert_to_tensor(lam, dtype=_dtypes.float32 if not isinstance(lam, Tensor)
                                  else None)
        return make_op("RandomPoissonV2", [lam_t], {"shape": _static_shape(shape),
                                                    "dtype": dtype,
                                                    "seed": None if seed is None else int(seed)},
                       name=scope[:-1]).outputs[0]
