"""Slicing and gathering: Slice, StridedSlice and `Tensor.__getitem__`, Gather, GatherNd and
boolean_mask.
"""
from __future__ import annotations

import builtins
from typing import Optional

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.compiler.ir import (Alloc, Check, Lit, Region, Take, Value)
from jitflow.compiler.lower import (Pending, Unsupported, const_dim,
                                    is_static, static_size)
from jitflow.core.graph import Tensor, convert_to_tensor, make_op, name_scope
from jitflow.ops._array_args import _args, _const, _err, _int_list_arg, _tf_shape
from jitflow.ops.join import stack
from jitflow.ops.shape_ops import _ranked, shape
from jitflow.ops.sources import constant
from jitflow.ops.registry import Example, register
from jitflow.core.shapes import TensorShape

__all__ = ["slice", "strided_slice", "gather", "gather_nd", "boolean_mask", "newaxis"]


newaxis = None


# -- Slice ----------------------------------------------------------------------------------------
def _slice_bounds(begin, size_, dims):
    out = []
    for b, s, d in zip(begin, size_, dims):
        if d is None:
            out.append(None if s == -1 else s)
            continue
        if b < 0 or b > d:
            raise ValueError(f"Expected begin[{len(out)}] in [0, {d}], but got {b}")
        e = d if s == -1 else b + s
        if s < -1 or e > d:
            raise ValueError(f"Expected size[{len(out)}] in [0, {d - b}], but got {s}")
        out.append(e - b)
    return out


def _slice_infer(op):
    x = op.inputs[0]
    dims = x.shape.as_tuple()
    begin = op.attrs["begin"]
    size_ = op.attrs["size"]
    n = len(begin) if begin is not None else (len(size_) if size_ is not None else None)
    if dims is None:
        return [(x.dtype, TensorShape(None if n is None else [None] * n))]
    if n is not None and n != len(dims):
        raise ValueError(f"Shape must be rank {len(dims)} but is rank 1 for '{op.name}' (op: "
                         f"'Slice'): begin and size must have {len(dims)} elements, got {n}")
    if begin is None or size_ is None:
        if size_ is not None:
            return [(x.dtype, TensorShape([None if s == -1 else s for s in size_]))]
        return [(x.dtype, TensorShape([None] * len(dims)))]
    try:
        out = _slice_bounds(begin, size_, dims)
    except ValueError as e:
        raise ValueError(f"{e} for '{op.name}' (op: 'Slice')") from None
    return [(x.dtype, TensorShape(out))]


def _slice_index(op, xshape, dyn):
    begin, size_ = _args(op, dyn, "begin", "size")
    if len(begin) != len(xshape) or len(size_) != len(xshape):
        # the input's rank was unknown when the graph was built
        raise _err(f"Expected begin and size arguments to be 1-D tensors of size "
                   f"{len(xshape)}, but got shapes [{len(begin)}] and [{len(size_)}] "
                   "instead.", op)
    try:
        sizes = _slice_bounds(begin, size_, xshape)
    except ValueError as e:
        raise _err(str(e), op) from None
    return tuple(np.s_[b:b + s] for b, s in zip(begin, sizes))


def _slice_ref(op, x, *dyn):
    x = np.asarray(x)
    return np.array(x[_slice_index(op, x.shape, dyn)])


def _slice_grad_ref(op, g, x, *dyn):
    out = np.zeros(np.shape(x), dtype=np.asarray(g).dtype)
    out[_slice_index(op, np.shape(x), dyn)] = g
    return out


def _slice_start_len(d: int, b: int, e: int, s: int, bm: bool, em: bool) -> tuple:
    """Python's slice semantics for one axis of size d: (start, length)."""
    start, stop, step = builtins.slice(None if bm else b, None if em else e, s).indices(d)
    return start, len(builtins.range(start, stop, step))


def _entries_of(op, rank: int) -> list:
    """StridedSlice/Slice as per-axis entries: ("new",), ("all",), ("int", b) or
    ("slice", b, e, s, begin-masked, end-masked)."""
    if op.type in ("Slice", "SliceGrad"):
        out = []
        for b, s in zip(op.attrs["begin"], op.attrs["size"]):
            out.append(("slice1", int(b), int(s)))
        return out
    a = op.attrs
    entries = _strided_spec(a["begin"], a["end"], a["strides"], _ss_masks(op), rank)
    out = []
    for e in entries:
        if e[0] == "slice":
            out.append(("slice", 0 if e[1] is None else int(e[1]),
                        0 if e[2] is None else int(e[2]), int(e[3]), e[1] is None,
                        e[2] is None))
        else:
            out.append(e)
    return out


def _slice_axes(low, entries, src_ones, src_dims, pos: int, what: str) -> tuple:
    """(out ones, out dims, per-src-axis (kind, start/pos, stride, out axis)) of a slice."""
    ones, dims, axes = [], [], []
    di = 0
    for e in entries:
        if e[0] == "new":
            ones.append(True)
            dims.append(1)
            continue
        d = src_dims[di]
        k = len(dims)
        if e[0] == "all":
            ones.append(src_ones[di])
            dims.append(d)
            axes.append(("lin", ("const", 0), 1, k))
        elif e[0] == "int":
            b = e[1]
            if is_static(d):
                n = static_size(d)
                if not -n <= b < n:
                    low.checks.append(Check(1, ("const", 0), pos, what))
                axes.append(("fixed", ("const", b % n if n else 0)))
            else:
                x = ("const", b) if b >= 0 else ("arith", "+", ("const", b), d)
                low.check_in_range(("const", 0), x, d, pos, what)
                axes.append(("fixed", ("sidx", d, b)))
        elif e[0] == "slice1":  # Slice: begin in [0, d], begin + size <= d
            b, s = e[1], e[2]
            if is_static(d):
                n = static_size(d)
                ln = n - b if s == -1 else s
                if not (0 <= b <= n and 0 <= ln and b + ln <= n):
                    low.checks.append(Check(1, ("const", 0), pos, what))
                    ln = max(ln, 0)
                size = const_dim(ln) if ln != 0 else ("const", 0)
            else:
                low.check_in_range(("const", 0), ("const", b), ("arith", "+", d, ("const", 1)),
                          pos, what)
                if s == -1:
                    size = ("arith", "-", d, ("const", b))
                else:
                    low.check_in_range(("const", 0), ("const", b + s),
                              ("arith", "+", d, ("const", 1)), pos, what)
                    size = const_dim(s) if s != 0 else ("const", 0)
            ones.append(size == 1)
            dims.append(size)
            axes.append(("lin", ("const", b), 1, k))
        else:
            _, b, en, s, bm, em = e
            if bm and em and s == 1:  # the whole axis
                ones.append(src_ones[di])
                dims.append(d)
                axes.append(("lin", ("const", 0), 1, k))
            elif is_static(d):
                start, ln = _slice_start_len(static_size(d), b, en, s, bm, em)
                st = ("const", start)
                size = const_dim(ln) if ln != 0 else ("const", 0)
            else:
                st = ("sstart", d, b, en, s, bm, em)
                size = ("slen", d, b, en, s, bm, em)
            if not (bm and em and s == 1):
                ones.append(size == 1)
                dims.append(size)
                axes.append(("lin", st, s, k))
        di += 1
    return tuple(ones), tuple(dims), axes


def _lower_slice(low, op, pos: int) -> None:
    out = op.outputs[0]
    if low.is_fed(out):
        return
    src = low.stored(op.inputs[0], pos)
    entries = _entries_of(op, src.rank)
    ones, dims, axes = _slice_axes(low, entries, src.ones, src.dims, pos,
                                   "slice index out of bounds")
    items = []
    for (kind, a, *rest), one in zip(axes, src.ones):
        if one:
            items.append(("fixed", ("const", 0)))
        else:
            items.append((kind, a, *rest))
    expr = Take(src, tuple(items))
    ones, dims = low.refine(out, ones, dims)
    low.place(out, Pending(expr, src.dtype, ones, dims, low.reads_of(src), pos), pos)


def _lower_slice_grad(low, op, pos: int) -> None:
    out = op.outputs[0]
    if low.is_fed(out):
        return
    g_expr, dtype, g_ones, g_dims, _ = low.expr(op.inputs[0])
    _, _, x_ones, x_dims, _ = low.expr(op.inputs[1], shape_only=True)
    entries = _entries_of(op, len(x_ones))
    ones, dims, axes = _slice_axes(low, entries, x_ones, x_dims, pos,
                                   "slice index out of bounds")
    if len(ones) != len(g_ones):
        raise Unsupported("slice gradient rank")
    for a, b, oa, ob in zip(g_dims, dims, g_ones, ones):
        if not (oa and ob):
            low.check_equal(a, b, pos, "Incompatible shapes")
    v = low.buf(dtype, x_ones, x_dims)
    low.emit(Alloc(v, Lit(0, dtype), pos))
    items = []
    for (kind, a, *rest), one in zip(axes, x_ones):
        items.append(("fixed", ("const", 0)) if one and kind == "lin" else (kind, a, *rest))
    low.emit(Region(v, g_expr, g_dims, g_ones, tuple(items), "set", pos))
    low.set(out, v)


def _static_slice(op) -> bool:
    if op.type in ("Slice", "SliceGrad"):
        n = 2 if op.type == "Slice" else 3
        return (len(op.inputs) == n - 1 and op.attrs.get("begin") is not None
                and op.attrs.get("size") is not None)
    n = 1 if op.type == "StridedSlice" else 2
    if len(op.inputs) != n or any(op.attrs.get(k) is None for k in ("begin", "end", "strides")):
        return False
    try:
        _entries_of(op, op.inputs[n - 1].shape.ndims)
    except ValueError:
        return False
    return True


def _sup_slice(op) -> bool:
    x = op.inputs[0]
    return _ranked(x) and x.shape.ndims > 0 and _static_slice(op)


def _sup_slice_grad(op) -> bool:
    return _ranked(*op.inputs[:2]) and op.inputs[1].shape.ndims > 0 and _static_slice(op)


register("SliceGrad", infer=lambda op: [(op.inputs[0].dtype, op.inputs[1].shape)],
         lower=_lower_slice_grad, lowerable=_sup_slice_grad, shape_only=(1,), inline=(0,),
         ref=_slice_grad_ref,
         grad=lambda op, g: [_slice_like(op, g)] + [None] * (len(op.inputs) - 1),
         kind="other", doc="Scatter a Slice gradient into zeros shaped like input 1.")


def _slice_like(op, g):
    """Slice `g` as the Slice (or its grad) described by `op`'s begin/size did."""
    dyn = list(op.inputs[2:])
    return make_op("Slice", [g] + dyn, {"begin": op.attrs["begin"],
                                        "size": op.attrs["size"]}).outputs[0]


def _slice_grad_rule(grad_op: str):
    """The gradient of a slicing op: `grad_op` scatters g into zeros shaped like the input."""
    def rule(op, g):
        x = op.inputs[0]
        dyn = list(op.inputs[1:])
        gx = make_op(grad_op, [g, x] + dyn, dict(op.attrs)).outputs[0]
        return [gx] + [None] * len(dyn)
    return rule


_slice_grad = _slice_grad_rule("SliceGrad")


register("Slice", infer=_slice_infer, ref=_slice_ref, grad=_slice_grad, kind="other",
         lower=_lower_slice, lowerable=_sup_slice,
         examples=[Example(build=lambda x: slice(x, [1, 0], [1, -1]), inputs=[(3, 4)],
                           expect=lambda x: x[1:2, :]),
                   Example(build=lambda x: slice(x, [0, 1, 1], [2, 1, 2]), inputs=[(2, 3, 3)],
                           expect=lambda x: x[0:2, 1:2, 1:3], id="3d")])


def slice(input_, begin, size, name: Optional[str] = None) -> Tensor:  # noqa: A001
    """`tf.slice`: `size[i]` elements from `begin[i]` along each axis (-1: to the end)."""
    x = convert_to_tensor(input_)
    b, bd = _int_list_arg(begin, "begin")
    s, sd = _int_list_arg(size, "size")
    inputs = [x] + [t for t in (bd, sd) if t is not None]
    return make_op("Slice", inputs, {"begin": b, "size": s}, name=name).outputs[0]


# -- StridedSlice and Tensor.__getitem__ -------------------------------------------------------
def _strided_spec(begin, end, strides, masks, ndim):
    """Expand a strided-slice spec to (numpy index tuple builder entries, dims consumed)."""
    bm, em, elm, nm, sm = masks
    n = len(begin)
    consumed = sum(1 for i in builtins.range(n)
                   if not (elm >> i) & 1 and not (nm >> i) & 1)
    entries = []
    seen_ellipsis = False
    for i in builtins.range(n):
        if (elm >> i) & 1:
            if seen_ellipsis:
                raise ValueError("Multiple ellipses in slice spec not allowed")
            seen_ellipsis = True
            entries.extend([("all",)] * max(ndim - consumed, 0))
        elif (nm >> i) & 1:
            entries.append(("new",))
        elif (sm >> i) & 1:
            entries.append(("int", begin[i]))
        else:
            if strides[i] == 0:
                raise ValueError("strides[%d] must be non-zero" % i)
            entries.append(("slice", None if (bm >> i) & 1 else begin[i],
                            None if (em >> i) & 1 else end[i], strides[i]))
    used = sum(1 for e in entries if e[0] != "new")
    if used > ndim:
        raise ValueError(f"Index out of range using input dim {ndim}; input has only {ndim} "
                         "dims")
    entries.extend([("all",)] * (ndim - used))
    return entries


def _entries_index(entries):
    idx = []
    for e in entries:
        if e[0] == "all":
            idx.append(np.s_[:])
        elif e[0] == "new":
            idx.append(None)
        elif e[0] == "int":
            idx.append(e[1])
        else:
            idx.append(np.s_[e[1]:e[2]:e[3]])
    return tuple(idx)


_MASKS = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")


def _ss_masks(op):
    return tuple(op.attrs[k] for k in _MASKS)


def _ss_infer(op):
    x = op.inputs[0]
    dims = x.shape.as_tuple()
    begin, end, strides = (op.attrs[k] for k in ("begin", "end", "strides"))
    if begin is None:
        vals = [_const(t, 8) for t in op.inputs[1:4]]
        begin, end, strides = (None if v is None else tuple(int(a) for a in v) for v in vals)
    masks = _ss_masks(op)
    if dims is None:
        return [(x.dtype, TensorShape(None))]
    if begin is None or end is None or strides is None:
        # Only the mask structure is known: slices become unknown dims.
        n = len(op.inputs[1].shape.as_list()) if op.inputs[1].shape.ndims == 1 and \
            op.inputs[1].shape[0].value is not None else None
        if n is None:
            return [(x.dtype, TensorShape(None))]
        z = (0,) * n
        entries = _strided_spec(z, z, (1,) * n, masks, len(dims))
        out = []
        di = 0
        for e in entries:
            if e[0] == "new":
                out.append(1)
                continue
            if e[0] == "all":
                out.append(dims[di])
            elif e[0] == "slice":
                out.append(None)
            di += 1
        return [(x.dtype, TensorShape(out))]
    try:
        entries = _strided_spec(begin, end, strides, masks, len(dims))
    except ValueError as e:
        raise ValueError(f"{e} for '{op.name}' (op: 'StridedSlice')") from None
    out = []
    di = 0
    for e in entries:
        if e[0] == "new":
            out.append(1)
            continue
        d = dims[di]
        if e[0] == "all":
            out.append(d)
        elif e[0] == "int":
            if d is not None and not -d <= e[1] < d:
                raise ValueError(f"slice index {e[1]} of dimension {di} out of bounds. for "
                                 f"'{op.name}' (op: 'StridedSlice') with input shapes: "
                                 f"{_tf_shape(x.shape)}")
        else:
            out.append(None if d is None else
                       len(builtins.range(*builtins.slice(
                           e[1], e[2], e[3]).indices(d))))
        di += 1
    return [(x.dtype, TensorShape(out))]


def _ss_index(op, ndim, dyn):
    begin, end, strides = _args(op, dyn, "begin", "end", "strides")
    return _entries_index(_strided_spec(begin, end, strides, _ss_masks(op), ndim))


def _ss_ref(op, x, *dyn):
    x = np.asarray(x)
    try:
        idx = _ss_index(op, x.ndim, dyn)
    except ValueError as e:
        raise _err(str(e), op) from None
    di = 0
    for e in idx:
        if e is None:
            continue
        if isinstance(e, (int, np.integer)) and not -x.shape[di] <= e < x.shape[di]:
            raise _err(f"slice index {e} of dimension {di} out of bounds.", op)
        di += 1
    return np.array(x[idx])


def _ss_grad_ref(op, g, x, *dyn):
    out = np.zeros(np.shape(x), dtype=np.asarray(g).dtype)
    idx = _ss_index(op, out.ndim, dyn)
    out[idx] = np.reshape(g, out[idx].shape)
    return out


def _ss_like(op, g):
    return make_op("StridedSlice", [g] + list(op.inputs[2:]), dict(op.attrs)).outputs[0]


register("StridedSliceGrad", infer=lambda op: [(op.inputs[0].dtype, op.inputs[1].shape)],
         lower=_lower_slice_grad, lowerable=_sup_slice_grad, shape_only=(1,), inline=(0,),
         ref=_ss_grad_ref,
         grad=lambda op, g: [_ss_like(op, g)] + [None] * (len(op.inputs) - 1),
         kind="other", doc="Scatter a StridedSlice gradient into zeros shaped like input 1.")


_ss_grad = _slice_grad_rule("StridedSliceGrad")


register("StridedSlice", infer=_ss_infer, ref=_ss_ref, grad=_ss_grad, kind="other",
         lower=_lower_slice, lowerable=_sup_slice,
         examples=[Example(build=lambda x: x[1:, ::-2], inputs=[(3, 5)],
                           expect=lambda x: x[1:, ::-2]),
                   Example(build=lambda x: x[..., 1, None], inputs=[(2, 3, 4)],
                           expect=lambda x: x[..., 1, None], id="ellipsis"),
                   Example(build=lambda x: x[-1], inputs=[(4, 2)], expect=lambda x: x[-1],
                           id="int"),
                   Example(build=lambda x: x[shape(x)[0] - 2], inputs=[(3, 2)],
                           expect=lambda x: x[1], id="tensor-index"),
                   Example(build=lambda x: strided_slice(x, [0, 3], [2, 0], [1, -1],
                                                         end_mask=1), inputs=[(3, 5)],
                           expect=lambda x: x[0:, 3:0:-1], id="masks")])


def strided_slice(input_, begin, end, strides=None, begin_mask: int = 0, end_mask: int = 0,
                  ellipsis_mask: int = 0, new_axis_mask: int = 0, shrink_axis_mask: int = 0,
                  var=None, name: Optional[str] = None) -> Tensor:
    """`tf.strided_slice`: NumPy-style basic slicing described by begin/end/strides and masks."""
    x = convert_to_tensor(input_)
    if strides is None:
        strides = [1] * (len(begin) if not isinstance(begin, Tensor) else
                         begin.shape.as_list()[0])
    parts = [_int_list_arg(v, n) for v, n in ((begin, "begin"), (end, "end"),
                                             (strides, "strides"))]
    attrs = {k: int(v) for k, v in zip(_MASKS, (begin_mask, end_mask, ellipsis_mask,
                                                new_axis_mask, shrink_axis_mask))}
    if all(d is None for _, d in parts):
        attrs.update(begin=parts[0][0], end=parts[1][0], strides=parts[2][0])
        inputs = [x]
    else:
        attrs.update(begin=None, end=None, strides=None)
        inputs = [x] + [d if d is not None else constant(np.array(s, np.int32))
                        for s, d in parts]
    return make_op("StridedSlice", inputs, attrs, name=name).outputs[0]


def _is_index_tensor(s) -> bool:
    return isinstance(s, Tensor) and s.dtype.is_integer and s.shape.ndims in (None, 0)


def _getitem(tensor, slice_spec):
    """`Tensor.__getitem__`: ints, slices (any step), None/newaxis, Ellipsis, scalar int
    tensors; built as one `strided_slice` op."""
    if not isinstance(slice_spec, (list, tuple)) or isinstance(slice_spec, Tensor):
        slice_spec = [slice_spec]
    elif isinstance(slice_spec, list):
        raise TypeError("Only integers, slices (`:`), ellipsis (`...`), tf.newaxis (`None`) "
                        "and scalar tf.int32/tf.int64 tensors are valid indices, got "
                        f"{slice_spec!r}")
    begin, end, strides = [], [], []
    masks = dict.fromkeys(_MASKS, 0)
    for i, s in enumerate(slice_spec):
        bit = 1 << i
        if isinstance(s, builtins.slice):
            for part, lst, m in ((s.start, begin, "begin_mask"), (s.stop, end, "end_mask")):
                if part is None:
                    lst.append(0)
                    masks[m] |= bit
                else:
                    lst.append(_index_value(part, slice_spec))
            strides.append(1 if s.step is None else _index_value(s.step, slice_spec))
        elif s is Ellipsis:
            begin.append(0)
            end.append(0)
            strides.append(1)
            masks["ellipsis_mask"] |= bit
        elif s is None:
            begin.append(0)
            end.append(0)
            strides.append(1)
            masks["new_axis_mask"] |= bit
        else:
            v = _index_value(s, slice_spec)
            begin.append(v)
            if isinstance(v, Tensor):
                from jitflow.ops.math.arithmetic import add
                end.append(add(v, constant(1, dtype=v.dtype)))
            else:
                end.append(v + 1)
            strides.append(1)
            masks["shrink_axis_mask"] |= bit
    with name_scope(None, "strided_slice", [tensor]) as scope:
        return strided_slice(tensor, _packed(begin), _packed(end), _packed(strides),
                             name=scope, **masks)


def _index_value(s, spec):
    if isinstance(s, (bool, np.bool_)):
        raise TypeError(f"Only integers, slices (`:`), ellipsis (`...`), tf.newaxis (`None`) "
                        f"and scalar tf.int32/tf.int64 tensors are valid indices, got {spec!r}")
    if isinstance(s, (int, np.integer)):
        return int(s)
    if hasattr(s, "_to_tensor"):
        s = s._to_tensor()
    if _is_index_tensor(s):
        return s
    raise TypeError(f"Only integers, slices (`:`), ellipsis (`...`), tf.newaxis (`None`) and "
                    f"scalar tf.int32/tf.int64 tensors are valid indices, got {s!r}")


def _packed(values):
    if not any(isinstance(v, Tensor) for v in values):
        return list(values)
    from jitflow.ops.math.casting import cast
    return stack([cast(v, _dtypes.int32) if isinstance(v, Tensor) else
                  constant(v, dtype=_dtypes.int32) for v in values])


Tensor.__getitem__ = _getitem


# -- Gather, GatherNd ---------------------------------------------------------------------------
def _gather_infer(op):
    params, indices = op.inputs
    if not indices.dtype.is_integer:
        raise TypeError(f"Value for attr 'Tindices' of {indices.dtype.name} is not in the list "
                        "of allowed values: int32, int64")
    pd, idd = params.shape.as_tuple(), indices.shape.as_tuple()
    if pd is None or idd is None:
        return [(params.dtype, TensorShape(None))]
    a = op.attrs["axis"]
    if not -len(pd) <= a < len(pd):
        raise ValueError(f"Shape must be at least rank {a + 1} but is rank {len(pd)} for "
                         f"'{op.name}' (op: 'GatherV2')")
    a %= len(pd)
    b = op.attrs.get("batch_dims", 0)
    if b:
        for k in builtins.range(b):
            if None not in (pd[k], idd[k]) and pd[k] != idd[k]:
                raise ValueError(f"Dimension {k} in both shapes must be equal, but are "
                                 f"{pd[k]} and {idd[k]}: params.shape[:batch_dims] must equal "
                                 f"indices.shape[:batch_dims] for '{op.name}' (op: 'GatherV2')"
                                 f" with input shapes: {_tf_shape(pd)}, {_tf_shape(idd)}")
        batch = tuple(d if d is not None else e for d, e in zip(pd[:b], idd[:b]))
        return [(params.dtype, TensorShape(batch + pd[b:a] + idd[b:] + pd[a + 1:]))]
    return [(params.dtype, TensorShape(pd[:a] + idd + pd[a + 1:]))]


def _check_indices(op, idx, limit, what="indices"):
    bad = (idx < 0) | (idx >= limit)
    if np.any(bad):
        pos = np.argwhere(bad)[0]
        where = ",".join(str(int(p)) for p in pos)
        raise _err(f"{what}[{where}] = {int(idx[tuple(pos)])} is not in [0, {limit})", op)


def _batched(op, params, indices):
    """(batch_dims, axis, batch shape) of a GatherV2, after checking that params and indices
    share the batch dims (TF's run-time error otherwise)."""
    b, a = op.attrs.get("batch_dims", 0), op.attrs["axis"] % np.ndim(params)
    if np.shape(params)[:b] != np.shape(indices)[:b]:
        raise _err(f"params.shape[:batch_dims] = {list(np.shape(params)[:b])} must equal "
                   f"indices.shape[:batch_dims] = {list(np.shape(indices)[:b])}", op)
    return b, a, np.shape(params)[:b]


def _gather_ref(op, params, indices):
    params = np.asarray(params)
    indices = np.asarray(indices)
    b, a, batch = _batched(op, params, indices)
    _check_indices(op, indices, params.shape[a])
    if not b:
        return np.take(params, indices, axis=a)
    # one gather per batch element (the first b dims of params and indices are shared)
    n = int(np.prod(batch, dtype=np.int64))
    p2 = params.reshape((n,) + params.shape[b:])
    i2 = indices.reshape((n,) + indices.shape[b:])
    rest = params.shape[b:a] + indices.shape[b:] + params.shape[a + 1:]
    out = np.empty((n,) + rest, dtype=params.dtype)
    for k in builtins.range(n):
        out[k] = np.take(p2[k], i2[k], axis=a - b)
    return out.reshape(batch + rest)


def _gather_grad_ref(op, g, indices, params):
    a = op.attrs["axis"] % np.ndim(params)
    g = np.asarray(g)
    out = np.zeros(np.shape(params), dtype=g.dtype)
    b = op.attrs.get("batch_dims", 0)
    if b:
        batch = np.shape(params)[:b]
        n = int(np.prod(batch, dtype=np.int64))
        o2 = out.reshape((n,) + out.shape[b:])
        i2 = np.reshape(indices, (n,) + np.shape(indices)[b:])
        g2 = g.reshape((n,) + g.shape[b:])
        for k in builtins.range(n):
            pm = np.moveaxis(o2[k], a - b, 0)
            gk = g2[k]
            nidx = i2[k].ndim
            gk = gk.reshape(gk.shape[:a - b] + (-1,) + gk.shape[a - b + nidx:])
            np.add.at(pm, i2[k].reshape(-1), np.moveaxis(gk, a - b, 0))
        return out
    pm = np.moveaxis(out, a, 0)
    nidx = np.ndim(indices)
    gm = np.moveaxis(g.reshape(g.shape[:a] + (-1,) + g.shape[a + nidx:]), a, 0)
    np.add.at(pm, np.reshape(indices, -1), gm)
    return out


def _indices(low, t, pos: int):
    """The indices of a gather: a Value, or a Python int for a scalar constant."""
    lit = low.literal(t)
    if lit is not None:
        return int(lit.value)
    v = low.value(t, pos)
    if not isinstance(v, Value):
        raise Unsupported("gather indices")
    return v


def _lower_gather(low, op, pos: int) -> None:
    out = op.outputs[0]
    if low.is_fed(out):
        return
    params = low.stored(op.inputs[0], pos)
    r = params.rank
    a = op.attrs["axis"] % r
    idx = _indices(low, op.inputs[1], pos)
    what = "indices is not in [0, dim)"
    d = params.dims[a]
    if isinstance(idx, int):
        low.check_in_range(("const", 0), ("const", idx), d, pos, what)
        n_i, i_ones, i_dims = 0, (), ()
        ax_item = ("fixed", ("const", idx))
    else:
        low.range_check(idx, d, pos, what)
        n_i, i_ones, i_dims = idx.rank, idx.ones, idx.dims
        ax_item = ("take", idx, tuple(builtins.range(a, a + n_i)))
    ones = params.ones[:a] + i_ones + params.ones[a + 1:]
    dims = params.dims[:a] + i_dims + params.dims[a + 1:]
    items = []
    for k in builtins.range(r):
        if k == a:
            items.append(ax_item)
        elif params.ones[k]:
            items.append(("fixed", ("const", 0)))
        else:
            items.append(("lin", ("const", 0), 1, k if k < a else k + n_i - 1))
    reads = low.reads_of(params) | low.reads_of(idx)
    ones, dims = low.refine(out, ones, dims)
    low.place(out, Pending(Take(params, tuple(items)), params.dtype, ones, dims, reads, pos),
               pos)


def _lower_gather_grad(low, op, pos: int) -> None:
    out = op.outputs[0]
    if low.is_fed(out):
        return
    g_expr, dtype, g_ones, g_dims, _ = low.expr(op.inputs[0])
    _, _, p_ones, p_dims, _ = low.expr(op.inputs[2], shape_only=True)
    r = len(p_ones)
    a = op.attrs["axis"] % r
    idx = _indices(low, op.inputs[1], pos)
    what = "indices is not in [0, dim)"
    if isinstance(idx, int):
        low.check_in_range(("const", 0), ("const", idx), p_dims[a], pos, what)
        n_i, ax_item = 0, ("fixed", ("const", idx))
    else:
        low.range_check(idx, p_dims[a], pos, what)
        n_i = idx.rank
        ax_item = ("take", idx, tuple(builtins.range(a, a + n_i)))
    if len(g_ones) != r - 1 + n_i:
        raise Unsupported("gather gradient rank")
    v = low.buf(dtype, p_ones, p_dims)
    low.emit(Alloc(v, Lit(0, dtype), pos))
    items = []
    for k in builtins.range(r):
        if k == a:
            items.append(ax_item)
        elif p_ones[k]:
            items.append(("fixed", ("const", 0)))
        else:
            kg = k if k < a else k + n_i - 1
            low.check_equal(g_dims[kg], p_dims[k], pos, "Incompatible shapes")
            items.append(("lin", ("const", 0), 1, kg))
    low.emit(Region(v, g_expr, g_dims, g_ones, tuple(items), "add", pos))
    low.set(out, v)


def _sup_gather(op) -> bool:
    p, i = op.inputs[:2]
    return (len(op.inputs) == 2 and _ranked(p, i) and p.shape.ndims > 0
            and not op.attrs.get("batch_dims", 0))


def _sup_gather_grad(op) -> bool:
    return (_ranked(*op.inputs) and op.inputs[2].shape.ndims > 0
            and not op.attrs.get("batch_dims", 0))


register("GatherGrad", infer=lambda op: [(op.inputs[0].dtype, op.inputs[2].shape)],
         lower=_lower_gather_grad, lowerable=_sup_gather_grad, shape_only=(2,), inline=(0,),
         ref=_gather_grad_ref,
         grad=lambda op, g: [gather(g, op.inputs[1], axis=op.attrs["axis"],
                                    batch_dims=op.attrs.get("batch_dims", 0)), None, None],
         kind="other",
         doc="Sum a GatherV2 gradient into zeros shaped like `params` (input 2) by index.")


def _gather_grad(op, g):
    params, indices = op.inputs
    attrs = {"axis": op.attrs["axis"]}
    if op.attrs.get("batch_dims", 0):
        attrs["batch_dims"] = op.attrs["batch_dims"]
    return [make_op("GatherGrad", [g, indices, params], attrs).outputs[0], None]


register("GatherV2", infer=_gather_infer, ref=_gather_ref, grad=_gather_grad, kind="other",
         lower=_lower_gather, lowerable=_sup_gather,
         examples=[Example(build=lambda p, i: gather(p, i), inputs=[(4, 3), (5,)],
                           dtypes=(("float32", "int32"), ("float64", "int64")),
                           domain="index", index_max=4, expect=lambda p, i: p[i]),
                   Example(build=lambda p, i: gather(p, i, axis=1), inputs=[(2, 3), (2, 2)],
                           dtypes=(("float32", "int32"),), domain="index",
                           expect=lambda p, i: np.take(p, i, axis=1), id="axis1"),
                   Example(build=lambda p, i: gather(p, i, axis=2, batch_dims=1),
                           inputs=[(2, 3, 4), (2, 5)], dtypes=(("float64", "int32"),),
                           domain="index", index_max=3,
                           expect=lambda p, i: np.stack([p[k][:, i[k]] for k in range(2)]),
                           id="batch_dims1")])


def gather(params, indices, validate_indices=None, name: Optional[str] = None,
           axis=None, batch_dims: int = 0) -> Tensor:
    """`tf.gather`: slices of `params` along `axis` at `indices` (op `GatherV2`).

    With `batch_dims` b the first b dims of `params` and `indices` are batch dims gathered
    element by element (`axis` defaults to b and must be >= b; negative values count from
    the end of `params` / `indices`). An index outside [0, dim) raises InvalidArgumentError
    when the op runs. Without batch dims the op compiles; with them it runs its NumPy
    reference.
    """
    with name_scope(name, "GatherV2", [params, indices]) as scope:
        p = convert_to_tensor(params, name="params")
        i = convert_to_tensor(indices, name="indices")
        b = int(batch_dims)
        if axis is None:
            axis = b
        static, dyn = _int_list_arg(axis, "axis")
        if dyn is not None:
            raise TypeError("gather: `axis` must be known when the graph is built")
        a = static[0]
        attrs = {"axis": a}
        if b:
            ri, rp = i.shape.ndims, p.shape.ndims
            if ri is None or rp is None:
                raise ValueError("gather with batch_dims needs params and indices of known "
                                 "rank")
            if b < 0:
                b += ri
            if not 0 <= b <= ri:
                raise ValueError(f"batch_dims = {batch_dims} must be in [-{ri}, {ri}] "
                                 f"(the rank of indices)")
            if b >= rp:
                raise ValueError(f"batch_dims ({b}) must be less than rank(params) ({rp}).")
            a_pos = a + rp if a < 0 else a
            if a_pos < b:
                raise ValueError(f"batch_dims ({b}) must be less than or equal to axis "
                                 f"({a}).")
            attrs = {"axis": a_pos, "batch_dims": b}
        return make_op("GatherV2", [p, i], attrs, name=scope).outputs[0]


def _gather_nd_infer(op):
    params, indices = op.inputs
    if not indices.dtype.is_integer:
        raise TypeError(f"Value for attr 'Tindices' of {indices.dtype.name} is not in the list "
                        "of allowed values: int32, int64")
    pd, idd = params.shape.as_tuple(), indices.shape.as_tuple()
    if pd is None or idd is None or idd[-1] is None:
        return [(params.dtype, TensorShape(None))]
    k = idd[-1]
    if k > len(pd):
        raise ValueError(f"indices.shape[-1] must be <= params.rank, but saw indices shape: "
                         f"{_tf_shape(idd)} and params shape: {_tf_shape(pd)} for "
                         f"'{op.name}' (op: 'GatherNd')")
    return [(params.dtype, TensorShape(idd[:-1] + pd[k:]))]


def _gather_nd_index(op, params, indices):
    indices = np.asarray(indices)
    k = indices.shape[-1]
    for j in builtins.range(k):
        col = indices[..., j]
        bad = (col < 0) | (col >= params.shape[j])
        if np.any(bad):
            pos = np.argwhere(bad)[0]
            where = ",".join(str(int(p)) for p in pos)
            vals = ", ".join(str(int(v)) for v in indices[tuple(pos)])
            raise _err(f"indices[{where}] = [{vals}] does not index into param shape "
                       f"{list(params.shape)}", op)
    return tuple(indices[..., j] for j in builtins.range(k))


def _gather_nd_ref(op, params, indices):
    params = np.asarray(params)
    return np.array(params[_gather_nd_index(op, params, indices)])


def _gather_nd_grad_ref(op, g, indices, params):
    out = np.zeros(np.shape(params), dtype=np.asarray(g).dtype)
    np.add.at(out, _gather_nd_index(op, out, indices), g)
    return out


register("GatherNdGrad", infer=lambda op: [(op.inputs[0].dtype, op.inputs[2].shape)],
         ref=_gather_nd_grad_ref,
         grad=lambda op, g: [gather_nd(g, op.inputs[1]), None, None], kind="other",
         doc="Sum a GatherNd gradient into zeros shaped like `params` (input 2).")
register("GatherNd", infer=_gather_nd_infer, ref=_gather_nd_ref,
         grad=lambda op, g: [make_op("GatherNdGrad", [g, op.inputs[1], op.inputs[0]])
                             .outputs[0], None],
         kind="other",
         examples=[Example(build=lambda p, i: gather_nd(p, i), inputs=[(3, 3, 2), (4, 2)],
                           dtypes=(("float32", "int32"),), domain="index",
                           expect=lambda p, i: p[i[:, 0], i[:, 1]])])


def gather_nd(params, indices, name: Optional[str] = None, batch_dims: int = 0) -> Tensor:
    """`tf.gather_nd`: the last axis of `indices` indexes the leading axes of `params`."""
    if batch_dims:
        raise NotImplementedError("gather_nd: batch_dims is not supported")
    with name_scope(name, "GatherNd", [params, indices]) as scope:
        p = convert_to_tensor(params, name="params")
        i = convert_to_tensor(indices, name="indices")
        return make_op("GatherNd", [p, i], name=scope).outputs[0]


# -- boolean_mask -------------------------------------------------------------------------------
def _bm_infer(op):
    x, mask = op.inputs
    if mask.dtype != _dtypes.bool_:
        raise TypeError(f"mask must be a bool tensor, got {mask.dtype.name}")
    dims, md = x.shape.as_tuple(), mask.shape.as_tuple()
    a = op.attrs["axis"]
    if md is None:
        raise ValueError("Number of mask dimensions must be specified, even if some "
                         "dimensions are None.  E.g. shape=[None] is ok, but shape=None is "
                         "not.")
    k = len(md)
    if k == 0:
        raise ValueError("mask cannot be scalar.")
    if dims is None:
        return [(x.dtype, TensorShape(None))]
    if not TensorShape(dims[a:a + k]).is_compatible_with(TensorShape(md)):
        raise ValueError(f"Shapes {_tf_shape(dims[a:a + k])} and {_tf_shape(md)} are "
                         "incompatible")
    return [(x.dtype, TensorShape(dims[:a] + (None,) + dims[a + k:]))]


def _bm_ref(op, x, mask):
    x = np.asarray(x)
    mask = np.asarray(mask)
    a = op.attrs["axis"]
    if x.shape[a:a + mask.ndim] != mask.shape:
        raise _err(f"mask shape {list(mask.shape)} does not match tensor shape "
                   f"{list(x.shape)} at axis {a}", op)
    return np.array(x[(np.s_[:],) * a + (mask,)])


def _bm_grad_ref(op, g, x, mask):
    out = np.zeros(np.shape(x), dtype=np.asarray(g).dtype)
    out[(np.s_[:],) * op.attrs["axis"] + (np.asarray(mask),)] = g
    return out


register("BooleanMaskGrad", infer=lambda op: [(op.inputs[0].dtype, op.inputs[1].shape)],
         ref=_bm_grad_ref,
         grad=lambda op, g: [make_op("BooleanMask", [g, op.inputs[2]], dict(op.attrs))
                             .outputs[0], None, None],
         kind="other", doc="Scatter a boolean_mask gradient back to the masked positions.")
register("BooleanMask", infer=_bm_infer, ref=_bm_ref,
         grad=lambda op, g: [make_op("BooleanMaskGrad", [g, op.inputs[0], op.inputs[1]],
                                     dict(op.attrs)).outputs[0], None],
         kind="other",
         examples=[Example(build=lambda x, m: boolean_mask(x, m), inputs=[(4, 2), (4,)],
                           dtypes=(("float32", "bool"), ("float64", "bool")),
                           expect=lambda x, m: x[m]),
                   Example(build=lambda x, m: boolean_mask(x, m, axis=1),
                           inputs=[(2, 3, 2), (3, 2)], dtypes=(("float32", "bool"),),
                           expect=lambda x, m: x[:, m], id="axis1")])


def boolean_mask(tensor, mask, name: str = "boolean_mask", axis=None) -> Tensor:
    """`tf.boolean_mask`: the entries of `tensor` where `mask` (leading dims at `axis`) holds.

    The result's masked dimension is unknown (None) until the op runs.
    """
    with name_scope(name, "boolean_mask", [tensor, mask]) as scope:
        x = convert_to_tensor(tensor, name="tensor")
        m = convert_to_tensor(mask, name="mask")
        a = 0 if axis is None else int(axis)
        if a < 0 and x.shape.ndims is not None:
            a += x.shape.ndims
        return make_op("BooleanMask", [x, m], {"axis": a}, name=scope).outputs[0]
