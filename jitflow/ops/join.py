"""Joining and splitting: ConcatV2, Pack (stack), Unpack (unstack) and Split.
"""
from __future__ import annotations

import builtins
from typing import Optional

import numpy as np

from jitflow.compiler.ir import (Alloc, Check, Region, Take)
from jitflow.compiler.lower import (Pending, Unsupported, add_dims, const_dim,
                                    is_static, static_size)
from jitflow.core.graph import Tensor, convert_to_tensor, make_op, name_scope
from jitflow.ops._array_args import _err, _int_list_arg, _norm_axis, _tf_shape
from jitflow.ops.identity import identity
from jitflow.ops.shape_ops import _ranked
from jitflow.ops.sources import constant, zeros_like
from jitflow.ops.registry import Example, register
from jitflow.core.shapes import TensorShape

__all__ = ["concat", "stack", "pack", "unstack", "unpack", "split"]


# -- ConcatV2, Pack, Unpack, Split ---------------------------------------------------------------
def _concat_infer(op):
    xs = op.inputs
    axis = op.attrs["axis"]
    dtype = xs[0].dtype
    rank_ = None
    for t in xs:
        if t.dtype != dtype:
            raise TypeError(f"ConcatOp: expected all inputs of type {dtype.name}, got "
                            f"{t.dtype.name} for '{op.name}'")
        if t.shape.ndims is not None:
            rank_ = t.shape.ndims
    if rank_ is None:
        return [(dtype, TensorShape(None))]
    if rank_ == 0:
        raise ValueError(f"Can't concatenate scalars (use tf.stack instead) for '{op.name}' "
                         f"(op: 'ConcatV2')")
    a = _norm_axis(axis, rank_)
    out = [None] * rank_
    total = 0
    for t in xs:
        dims = t.shape.as_tuple()
        if dims is None:
            total = None
            continue
        if len(dims) != rank_:
            raise ValueError(f"Shape must be rank {rank_} but is rank {len(dims)} for "
                             f"'{op.name}' (op: 'ConcatV2') with input shapes: "
                             + ", ".join(_tf_shape(s.shape) for s in xs) + ".")
        for i, d in enumerate(dims):
            if i == a:
                continue
            if out[i] is not None and d is not None and out[i] != d:
                raise ValueError(f"Dimension {i} in both shapes must be equal, but are "
                                 f"{out[i]} and {d}. Shapes are "
                                 f"{_tf_shape(xs[0].shape)} and {_tf_shape(t.shape)}. for "
                                 f"'{op.name}' (op: 'ConcatV2')")
            out[i] = d if out[i] is None else out[i]
        if total is not None:
            total = None if dims[a] is None else total + dims[a]
    out[a] = total
    return [(dtype, TensorShape(out))]


def _concat_ref(op, *xs):
    try:
        return np.concatenate(xs, axis=op.attrs["axis"])
    except ValueError as e:
        raise _err(f"ConcatOp : {e}", op) from None


def _join(low, op, pos: int, axis: int, new_axis: bool) -> None:
    """ConcatV2 (new_axis False) and Pack (True): one region store per input."""
    out = op.outputs[0]
    if low.is_fed(out):
        return
    parts = [low.expr(t) for t in op.inputs]
    r0 = len(parts[0][2])
    r = r0 + 1 if new_axis else r0
    a = axis % r
    dtype = out.dtype.name
    ones, dims = list(parts[0][2]), list(parts[0][3])
    for p in parts[1:]:
        if len(p[2]) != r0:
            raise Unsupported("join of different ranks")
        for k in builtins.range(r0):
            if k == a and not new_axis:
                continue
            if p[3][k] != dims[k]:
                low.checks.append(Check(dims[k], p[3][k], pos, "Dimensions of inputs should "
                                        "match"))
    offsets = []
    if new_axis:
        offsets = [("const", i) for i in builtins.range(len(parts))]
        ones.insert(a, len(parts) == 1)
        dims.insert(a, const_dim(len(parts)))
    else:
        total = ("const", 0)
        for p in parts:
            offsets.append(total)
            total = add_dims(total, p[3][a])
        ones[a] = total == 1
        dims[a] = total
    v = low.buf(dtype, *low.refine(out, tuple(ones), tuple(dims)))
    low.emit(Alloc(v, None, pos))
    for p, off in zip(parts, offsets):
        items = []
        for k in builtins.range(r):
            if new_axis and k == a:
                items.append(("fixed", off))
                continue
            kp = k - 1 if new_axis and k > a else k
            start = off if (k == a and not new_axis) else ("const", 0)
            if p[2][kp]:
                items.append(("fixed", start))
            else:
                items.append(("lin", start, 1, kp))
        low.emit(Region(v, p[0], p[3], p[2], tuple(items), "set", pos))
    low.set(out, v)


def _lower_concat(low, op, pos: int) -> None:
    _join(low, op, pos, op.attrs["axis"], False)


def _lower_pack(low, op, pos: int) -> None:
    _join(low, op, pos, op.attrs["axis"], True)


def _lower_unpack(low, op, pos: int) -> None:
    src = low.stored(op.inputs[0], pos)
    r = src.rank
    a = op.attrs["axis"] % r
    num = int(op.attrs["num"])
    low.check_equal(src.dims[a], const_dim(num), pos, "Input shape axis must equal num")
    ones = src.ones[:a] + src.ones[a + 1:]
    dims = src.dims[:a] + src.dims[a + 1:]
    for j, out in enumerate(op.outputs):
        if low.is_fed(out):
            continue
        items = []
        for k in builtins.range(r):
            if k == a:
                items.append(("fixed", ("const", j if not src.ones[a] else 0)))
            elif src.ones[k]:
                items.append(("fixed", ("const", 0)))
            else:
                items.append(("lin", ("const", 0), 1, k if k < a else k - 1))
        o1, d1 = low.refine(out, ones, dims)
        low.place(out, Pending(Take(src, tuple(items)), src.dtype, o1, d1, low.reads_of(src), pos),
                   pos)


def _lower_split(low, op, pos: int) -> None:
    src = low.stored(op.inputs[0], pos)
    r = src.rank
    a = op.attrs["axis"] % r
    d = src.dims[a]
    sizes = list(op.attrs["sizes"])
    what = "Determined shape must match input shape along split_dim"
    if op.attrs["even"]:
        n = len(sizes)
        if is_static(d):
            if static_size(d) % n:
                low.checks.append(Check(1, ("const", 0), pos, what))
            sizes = [const_dim(static_size(d) // n) if static_size(d) // n else ("const", 0)] * n
        else:
            low.checks.append(Check(("mod", (d,), n), ("const", 0), pos, what))
            sizes = [("div", (d,), n) if n > 1 else d] * n
    else:
        known = sum(s for s in sizes if s != -1)
        if -1 in sizes:
            rest = (const_dim(static_size(d) - known) if is_static(d) and static_size(d) - known > 0
                    else ("arith", "-", d, ("const", known)))
            low.check_in_range(("const", 0), ("const", known), ("arith", "+", d, ("const", 1)),
                      pos, what)
        else:
            rest = None
            low.check_equal(d, const_dim(known), pos, what)
        sizes = [rest if s == -1 else (const_dim(s) if s else ("const", 0)) for s in sizes]
    start = ("const", 0)
    for out, s in zip(op.outputs, sizes):
        if not low.is_fed(out):
            items = []
            for k in builtins.range(r):
                if src.ones[k]:
                    items.append(("fixed", ("const", 0)))
                else:
                    items.append(("lin", start if k == a else ("const", 0), 1, k))
            ones = tuple(s == 1 if k == a else src.ones[k] for k in builtins.range(r))
            dims = tuple(s if k == a else src.dims[k] for k in builtins.range(r))
            ones, dims = low.refine(out, ones, dims)
            low.place(out, Pending(Take(src, tuple(items)), src.dtype, ones, dims,
                                    low.reads_of(src), pos), pos)
        start = add_dims(start, s)


def _lower_concat_grad_slice(low, op, pos: int) -> None:
    out = op.outputs[0]
    if low.is_fed(out):
        return
    src = low.stored(op.inputs[0], pos)
    r = src.rank
    a = op.attrs["axis"] % r
    i = op.attrs["index"]
    shapes = [low.expr(t, shape_only=True) for t in op.inputs[1:]]
    start = ("const", 0)
    for p in shapes[:i]:
        start = add_dims(start, p[3][a])
    _, _, ones, dims, _ = shapes[i]
    total = start
    for p in shapes[i:]:
        total = add_dims(total, p[3][a])
    low.check_equal(src.dims[a], total, pos, "Incompatible shapes")
    ones, dims = low.refine(out, ones, dims)
    items = []
    for k in builtins.range(r):
        if src.ones[k]:
            items.append(("fixed", ("const", 0)))
        else:
            items.append(("lin", start if k == a else ("const", 0), 1, k))
    low.place(out, Pending(Take(src, tuple(items)), src.dtype, ones, dims, low.reads_of(src), pos),
               pos)


def _sup_join(op) -> bool:
    return _ranked(*op.inputs) and len(op.inputs) > 0 and (
        op.type == "Pack" or op.inputs[0].shape.ndims > 0)


def _sup_unary(op) -> bool:
    return len(op.inputs) == 1 and _ranked(op.inputs[0]) and op.inputs[0].shape.ndims > 0


register("ConcatGradSlice",
         lower=_lower_concat_grad_slice, lowerable=lambda op: _ranked(*op.inputs),
         shape_only=builtins.range(1, 1 << 16),
         infer=lambda op: [(op.inputs[0].dtype, op.inputs[1 + op.attrs["index"]].shape)],
         ref=lambda op, g, *xs: _concat_grad_slice(op, g, xs),
         grad=lambda op, g: [None] * len(op.inputs), differentiable=False, kind="other",
         doc="The part of a ConcatV2 gradient belonging to input `index` (inputs give sizes).")


def _concat_grad_slice(op, g, xs):
    a = op.attrs["axis"] % np.ndim(g)
    i = op.attrs["index"]
    start = sum(np.shape(x)[a] for x in xs[:i])
    idx = [np.s_[:]] * np.ndim(g)
    idx[a] = np.s_[start:start + np.shape(xs[i])[a]]
    return np.array(np.asarray(g)[tuple(idx)])


def _concat_grad(op, g):
    axis = op.attrs["axis"]
    xs = op.inputs
    sizes = [t.shape[axis % t.shape.ndims].value if t.shape.ndims else None for t in xs]
    if all(s is not None for s in sizes) and g.shape.ndims is not None:
        return list(split(g, sizes, axis=axis))
    return [make_op("ConcatGradSlice", [g, *xs], {"axis": axis, "index": i}).outputs[0]
            for i in builtins.range(len(xs))]


register("ConcatV2", infer=_concat_infer, ref=_concat_ref, grad=_concat_grad, kind="other",
         lower=_lower_concat, lowerable=_sup_join, inline=True,
         examples=[Example(build=lambda x, y: concat([x, y], 1), inputs=[(2, 3), (2, 1)],
                           expect=lambda x, y: np.concatenate([x, y], 1)),
                   Example(build=lambda x, y: concat([x, y, x], -1), inputs=[(2,), (1,)],
                           expect=lambda x, y: np.concatenate([x, y, x]), id="three")])


def concat(values, axis, name: str = "concat") -> Tensor:
    """`tf.concat(values, axis)`: join tensors along an existing axis."""
    if isinstance(axis, (list, tuple)) and not isinstance(values, (list, tuple)):
        raise TypeError("tf.concat takes (values, axis): the argument order changed in "
                        f"TensorFlow 1.0; got values={values!r} and axis={axis!r}")
    if not isinstance(values, (list, tuple)):
        values = [values]
    static, dyn = _int_list_arg(axis, "axis")
    if dyn is not None or len(static) != 1:
        raise TypeError("concat: `axis` must be a single int known at build time")
    with name_scope(name, "concat", list(values)) as scope:
        xs = [convert_to_tensor(v) for v in values]
        if len(xs) == 1:
            r = xs[0].shape.ndims
            if r is not None:
                _norm_axis(static[0], r)
            return identity(xs[0], name=scope)
        return make_op("ConcatV2", xs, {"axis": static[0]}, name=scope).outputs[0]


def _pack_infer(op):
    xs = op.inputs
    dtype = xs[0].dtype
    sh = TensorShape(None)
    for t in xs:
        if t.dtype != dtype:
            raise TypeError(f"Pack: expected all inputs of type {dtype.name}, got "
                            f"{t.dtype.name} for '{op.name}'")
        if not sh.is_compatible_with(t.shape):
            raise ValueError(f"Shapes must be equal rank, but are {sh.ndims} and "
                             f"{t.shape.ndims}; From merging shape 0 with other shapes. for "
                             f"'{op.name}' (op: 'Pack') with input shapes: "
                             + ", ".join(_tf_shape(s.shape) for s in xs) + ".")
        sh = sh.merge_with(t.shape)
    if sh.ndims is None:
        return [(dtype, TensorShape(None))]
    r = sh.ndims + 1
    a = _norm_axis(op.attrs["axis"], r)
    dims = list(sh.as_tuple())
    dims.insert(a, len(xs))
    return [(dtype, TensorShape(dims))]


register("Pack", infer=_pack_infer,
         lower=_lower_pack, lowerable=_sup_join, inline=True,
         ref=lambda op, *xs: np.stack(xs, axis=op.attrs["axis"]),
         grad=lambda op, g: unstack(g, num=len(op.inputs), axis=op.attrs["axis"]),
         kind="other",
         examples=[Example(build=lambda x, y: stack([x, y]), inputs=[(2, 3), (2, 3)],
                           expect=lambda x, y: np.stack([x, y])),
                   Example(build=lambda x, y: stack([x, y, x], axis=-1), inputs=[(2,), (2,)],
                           expect=lambda x, y: np.stack([x, y, x], -1), id="last")])


def stack(values, axis: int = 0, name: str = "stack") -> Tensor:
    """`tf.stack` (formerly `tf.pack`): join tensors along a new axis (op `Pack`)."""
    with name_scope(name, "stack", list(values)) as scope:
        xs = [convert_to_tensor(v) for v in values]
        dt = next((x.dtype for x in xs if x.op.type != "Const"), xs[0].dtype if xs else None)
        xs = [x if x.dtype == dt or x.op.type != "Const" else
              constant(x.op.attrs["value"], dtype=dt) for x in xs]
        return make_op("Pack", xs, {"axis": int(axis)}, name=scope).outputs[0]


pack = stack


def _unpack_infer(op):
    x = op.inputs[0]
    dims = x.shape.as_tuple()
    num = op.attrs["num"]
    if dims is None:
        return [(x.dtype, TensorShape(None))] * num
    a = _norm_axis(op.attrs["axis"], len(dims))
    if dims[a] is not None and dims[a] != num:
        raise ValueError(f"Dimension {a} must be {num} but is {dims[a]}")
    rest = TensorShape(dims[:a] + dims[a + 1:])
    return [(x.dtype, rest)] * num


def _unpack_ref(op, x):
    x = np.asarray(x)
    a = op.attrs["axis"]
    if x.shape[a] != op.attrs["num"]:
        raise _err(f"Input shape axis {a} must equal {op.attrs['num']}, got shape "
                   f"{list(x.shape)}", op)
    return tuple(np.array(v) for v in np.moveaxis(x, a, 0))


def _fill_missing(grads, outputs):
    return [g if g is not None else zeros_like(o) for g, o in zip(grads, outputs)]


register("Unpack", infer=_unpack_infer, ref=_unpack_ref,
         lower=_lower_unpack, lowerable=_sup_unary,
         grad=lambda op, *gs: [stack(_fill_missing(gs, op.outputs), axis=op.attrs["axis"])],
         kind="other",
         examples=[Example(build=lambda x: unstack(x)[1], inputs=[(3, 2)],
                           expect=lambda x: x[1]),
                   Example(build=lambda x: unstack(x, axis=1)[0] * unstack(x, axis=1)[2],
                           inputs=[(2, 3)], expect=lambda x: x[:, 0] * x[:, 2], id="axis1")])


def unstack(value, num: Optional[int] = None, axis: int = 0, name: str = "unstack") -> list:
    """`tf.unstack` (formerly `tf.unpack`): split along `axis` into rank-(R-1) tensors."""
    x = convert_to_tensor(value)
    if num is None:
        dims = x.shape.as_tuple()
        if dims is None:
            raise ValueError(f"Cannot infer num from shape {x.shape}")
        num = dims[_norm_axis(axis, len(dims))]
        if num is None:
            raise ValueError(f"Cannot infer num from shape {x.shape}")
    return list(make_op("Unpack", [x], {"num": int(num), "axis": int(axis)},
                        name=name).outputs)


unpack = unstack


def _split_infer(op):
    x = op.inputs[0]
    sizes = op.attrs["sizes"]
    dims = x.shape.as_tuple()
    if dims is None:
        return [(x.dtype, TensorShape(None))] * len(sizes)
    a = _norm_axis(op.attrs["axis"], len(dims))
    d = dims[a]
    sizes = list(sizes)
    if op.attrs["even"]:
        n = len(sizes)
        if d is not None:
            if d % n:
                raise ValueError(f"Dimension size must be evenly divisible by {n} but is {d} "
                                 f"for '{op.name}' (op: 'Split') with input shapes: [], "
                                 f"{_tf_shape(x.shape)}.")
            sizes = [d // n] * n
        else:
            sizes = [None] * n
    else:
        if sizes.count(-1) > 1:
            raise ValueError(f"Cannot infer split sizes for '{op.name}': only one size may be "
                             "-1")
        known = sum(s for s in sizes if s != -1)
        if d is not None:
            if -1 in sizes:
                if known > d:
                    raise ValueError(f"Determined shape must either match input shape along "
                                     f"split_dim exactly if fully specified, or be less than "
                                     f"the size of the input along split_dim if not fully "
                                     f"specified.  Got: {known}")
                sizes[sizes.index(-1)] = d - known
            elif known != d:
                raise ValueError(f"Determined shape must either match input shape along "
                                 f"split_dim exactly if fully specified, or be less than the "
                                 f"size of the input along split_dim if not fully specified.  "
                                 f"Got: {known}")
        else:
            sizes = [None if s == -1 else s for s in sizes]
    out = []
    for s in sizes:
        dd = list(dims)
        dd[a] = s
        out.append((x.dtype, TensorShape(dd)))
    return out


def _split_ref(op, x):
    x = np.asarray(x)
    a = op.attrs["axis"] % x.ndim
    d = x.shape[a]
    sizes = list(op.attrs["sizes"])
    if op.attrs["even"]:
        n = len(sizes)
        if d % n:
            raise _err(f"Number of ways to split should evenly divide the split dimension, but "
                       f"got split_dim {a} (size = {d}) and num_split {n}", op)
        sizes = [d // n] * n
    elif -1 in sizes:
        sizes[sizes.index(-1)] = d - sum(s for s in sizes if s != -1)
    if sum(sizes) != d or min(sizes) < 0:
        raise _err(f"Determined shape must either match input shape along split_dim exactly if "
                   f"fully specified, or be less than the size of the input along split_dim "
                   f"if not fully specified.  Got: {sum(sizes)}", op)
    cuts = np.cumsum(sizes)[:-1]
    return tuple(np.array(p) for p in np.split(x, cuts, axis=a))


register("Split", infer=_split_infer, ref=_split_ref,
         lower=_lower_split, lowerable=_sup_unary,
         grad=lambda op, *gs: [concat(_fill_missing(gs, op.outputs), op.attrs["axis"])],
         kind="other",
         examples=[Example(build=lambda x: split(x, 3, axis=1)[2], inputs=[(2, 6)],
                           expect=lambda x: x[:, 4:]),
                   Example(build=lambda x: split(x, [1, -1, 2])[1], inputs=[(6, 2)],
                           expect=lambda x: x[1:4], id="sizes")])


def split(value, num_or_size_splits, axis=0, num: Optional[int] = None,
          name: str = "split") -> list:
    """`tf.split`: an int splits evenly (op `Split`), a list gives sizes (one may be -1)."""
    x = convert_to_tensor(value)
    static_axis, dyn = _int_list_arg(axis, "axis")
    if dyn is not None or len(static_axis) != 1:
        raise TypeError("split: `axis` must be a single int known at build time")
    axis = static_axis[0]
    if isinstance(num_or_size_splits, int) or np.ndim(num_or_size_splits) == 0 and not \
            isinstance(num_or_size_splits, Tensor):
        n = int(num_or_size_splits)
        if n <= 0:
            raise ValueError(f"num_or_size_splits must be positive, got {n}")
        attrs = {"sizes": (0,) * n, "even": True, "axis": axis}
    else:
        sizes, dyn = _int_list_arg(num_or_size_splits, "num_or_size_splits")
        if dyn is not None:
            raise TypeError("split: sizes must be known when the graph is built")
        if num is not None and num != len(sizes):
            raise ValueError(f"num={num} does not match {len(sizes)} split sizes")
        attrs = {"sizes": tuple(sizes), "even": False, "axis": axis}
    return list(make_op("Split", [x], attrs, name=name).outputs)
