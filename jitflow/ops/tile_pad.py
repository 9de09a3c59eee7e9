"""Tile, Pad, Reverse and BroadcastTo.
"""
from __future__ import annotations

import builtins
from typing import Optional

import numpy as np

from jitflow.compiler.ir import (Alloc, Lit, Region, Take)
from jitflow.compiler.lower import (Pending, Unsupported, add_dims, const_dim,
                                    is_static, static_size)
from jitflow.core.graph import Tensor, convert_to_tensor, make_op, name_scope
from jitflow.ops._array_args import (_args, _err, _int_list_arg, _norm_axis, _shape_of, _tf_shape,
                                     get_static_value)
from jitflow.ops.join import _sup_unary
from jitflow.ops.shape_ops import _ranked, shape
from jitflow.ops.sources import _unbroadcast, zeros
from jitflow.ops.registry import Example, register
from jitflow.core.shapes import TensorShape

__all__ = ["tile", "pad", "reverse", "reverse_v2", "broadcast_to"]


# -- Tile, Pad, Reverse, BroadcastTo ------------------------------------------------------------
def _tile_infer(op):
    x = op.inputs[0]
    mult = op.attrs["multiples"]
    dims = x.shape.as_tuple()
    if mult is None:
        return [(x.dtype, TensorShape(None if dims is None else [None] * len(dims)))]
    if dims is None:
        return [(x.dtype, TensorShape([None] * len(mult)))]
    if len(mult) != len(dims):
        raise ValueError(f"Shape must be rank {len(dims)} but is rank 1 for '{op.name}' (op: "
                         f"'Tile'): multiples has {len(mult)} elements, input has rank "
                         f"{len(dims)}")
    return [(x.dtype, TensorShape([None if d is None else d * m for d, m in zip(dims, mult)]))]


def _tile_ref(op, x, *dyn):
    (mult,) = _args(op, dyn, "multiples")
    if np.ndim(x) != len(mult):
        raise _err(f"Expected multiples argument to be a vector of length {np.ndim(x)} but got "
                   f"length {len(mult)}", op)
    return np.tile(x, mult)


def _tile_grad_ref(op, g, x):
    g = np.asarray(g)
    xs = np.shape(x)
    mult = [gd // xd if xd else 0 for gd, xd in zip(g.shape, xs)]
    split_shape = [v for m, d in zip(mult, xs) for v in (m, d)]
    return g.reshape(split_shape).sum(axis=tuple(builtins.range(0, 2 * len(xs),
                                                                              2)))


def _tile_dim(one: bool, d, m: int) -> tuple:
    if m == 1:
        return one, d
    if m == 0:
        return False, ("const", 0)
    return False, (("const", m) if one else ("arith", "*", d, ("const", m)))


def _lower_tile(low, op, pos: int) -> None:
    out = op.outputs[0]
    if low.is_fed(out):
        return
    src = low.stored(op.inputs[0], pos)
    mult = [int(m) for m in op.attrs["multiples"]]
    shaped = [_tile_dim(o, d, m) for o, d, m in zip(src.ones, src.dims, mult)]
    ones, dims = low.refine(out, tuple(o for o, _ in shaped), tuple(d for _, d in shaped))
    items = tuple(("fixed", ("const", 0)) if one else
                  (("lin", ("const", 0), 1, k) if m == 1 else ("mod", k, d))
                  for k, (one, d, m) in enumerate(zip(src.ones, src.dims, mult)))
    low.place(out, Pending(Take(src, items), src.dtype, ones, dims, low.reads_of(src), pos), pos)


def _lower_tile_grad(low, op, pos: int) -> None:
    out = op.outputs[0]
    if low.is_fed(out):
        return
    g_expr, dtype, g_ones, g_dims, _ = low.expr(op.inputs[0])
    _, _, x_ones, x_dims, _ = low.expr(op.inputs[1], shape_only=True)
    if len(g_ones) != len(x_ones):
        raise Unsupported("tile gradient rank")
    v = low.buf(dtype, x_ones, x_dims)
    low.emit(Alloc(v, Lit(0, dtype), pos))
    items = tuple(("fixed", ("const", 0)) if one else ("mod", k, d)
                  for k, (one, d) in enumerate(zip(x_ones, x_dims)))
    low.emit(Region(v, g_expr, g_dims, g_ones, items, "add", pos))
    low.set(out, v)


register("TileGrad", infer=lambda op: [(op.inputs[0].dtype, op.inputs[1].shape)],
         lower=_lower_tile_grad, shape_only=(1,), inline=(0,),
         lowerable=lambda op: _ranked(*op.inputs) and op.inputs[1].shape.ndims > 0,
         ref=_tile_grad_ref,
         grad=lambda op, g: [_tile_like(g, op.inputs[0], op.inputs[1]), None], kind="other",
         doc="Sum a Tile gradient over the copies, back to the shape of input 1.")


def _tile_like(g, big, small):
    if big.shape.is_fully_defined() and small.shape.is_fully_defined():
        return tile(g, [b // s if s else 0 for b, s in zip(big.shape.as_list(),
                                                            small.shape.as_list())])
    return tile(g, make_op("TileMultiples", [shape(big), shape(small)]).outputs[0])


register("TileMultiples", infer=lambda op: [(op.inputs[0].dtype, op.inputs[0].shape)],
         ref=lambda op, a, b: np.where(np.asarray(b) > 0, np.asarray(a) // np.maximum(b, 1), 0),
         differentiable=False, kind="other",
         doc="Elementwise shape(big) // shape(small): the multiples of a tile.")


register("Tile", infer=_tile_infer, ref=_tile_ref,
         lower=_lower_tile, lowerable=lambda op: len(op.inputs) == 1 and _sup_unary(op),
         grad=lambda op, g: [make_op("TileGrad", [g, op.inputs[0]]).outputs[0]]
         + [None] * (len(op.inputs) - 1),
         kind="other",
         examples=[Example(build=lambda x: tile(x, [2, 3]), inputs=[(2, 2)],
                           expect=lambda x: np.tile(x, (2, 3)))])


def tile(input, multiples, name: Optional[str] = None) -> Tensor:
    """`tf.tile`: repeat `input` `multiples[i]` times along axis i."""
    x = convert_to_tensor(input)
    static, dyn = _int_list_arg(multiples, "multiples")
    inputs = [x] + ([dyn] if dyn is not None else [])
    return make_op("Tile", inputs, {"multiples": static}, name=name).outputs[0]


def _pad_infer(op):
    x, cval = op.inputs
    pads = op.attrs["paddings"]
    dims = x.shape.as_tuple()
    if cval.dtype != x.dtype:
        raise TypeError(f"Input 'constant_values' of 'PadV2' Op has type {cval.dtype.name} that "
                        f"does not match type {x.dtype.name} of argument 'input'.")
    if dims is None:
        return [(x.dtype, TensorShape([None] * len(pads)))]
    if len(pads) != len(dims):
        raise ValueError(f"Shape must be rank {len(dims)} but paddings has {len(pads)} rows "
                         f"for '{op.name}' (op: 'PadV2') with input shapes: "
                         f"{_tf_shape(x.shape)}, [{len(pads)},2].")
    mode = op.attrs["mode"]
    out = []
    for d, (lo, hi) in zip(dims, pads):
        if lo < 0 or hi < 0:
            raise ValueError(f"Paddings must be non-negative: {lo} {hi}")
        if mode != "CONSTANT" and d is not None:
            lim = d - 1 if mode == "REFLECT" else d
            if lo > lim or hi > lim:
                raise ValueError(f"paddings must be no greater than the dimension size: {lo}, "
                                 f"{hi} greater than {lim} for '{op.name}' (op: 'MirrorPad')")
        out.append(None if d is None else d + lo + hi)
    return [(x.dtype, TensorShape(out))]


_NP_MODE = {"CONSTANT": "constant", "REFLECT": "reflect", "SYMMETRIC": "symmetric"}


def _pad_ref(op, x, cval):
    pads = op.attrs["paddings"]
    mode = op.attrs["mode"]
    if mode == "CONSTANT":
        return np.pad(x, pads, mode="constant", constant_values=cval)
    return np.pad(x, pads, mode=_NP_MODE[mode])


def _pad_grad_ref(op, g, x):
    g = np.asarray(g)
    pads = op.attrs["paddings"]
    if op.attrs["mode"] == "CONSTANT":
        return np.array(g[tuple(np.s_[lo:lo + d] for (lo, _), d in zip(pads, np.shape(x)))])
    # Mirror modes: each output position copies one input position per axis; sum back.
    out = g
    for ax, ((lo, hi), d) in enumerate(zip(pads, np.shape(x))):
        src = np.pad(np.arange(d), (lo, hi), mode=_NP_MODE[op.attrs["mode"]])
        moved = np.moveaxis(out, ax, 0)
        acc = np.zeros((d,) + moved.shape[1:], dtype=g.dtype)
        np.add.at(acc, src, moved)
        out = np.moveaxis(acc, 0, ax)
    return np.array(out)


def _lower_pad(low, op, pos: int) -> None:
    out = op.outputs[0]
    if low.is_fed(out):
        return
    x_expr, dtype, x_ones, x_dims, _ = low.expr(op.inputs[0])
    c_expr, _, c_ones, _, _ = low.expr(op.inputs[1])
    if c_ones:
        raise Unsupported("pad value is not a scalar")
    pads = op.attrs["paddings"]
    ones, dims, items = [], [], []
    for k, (one, d, (lo, hi)) in enumerate(zip(x_ones, x_dims, pads)):
        n = add_dims(add_dims(d, const_dim(lo) if lo else ("const", 0)),
                     const_dim(hi) if hi else ("const", 0))
        ones.append(n == 1)
        dims.append(n)
        items.append(("fixed", const_dim(lo) if lo else ("const", 0)) if one
                     else ("lin", ("const", lo), 1, k))
    ones, dims = low.refine(out, tuple(ones), tuple(dims))
    v = low.buf(dtype, ones, dims)
    low.emit(Alloc(v, c_expr, pos))
    low.emit(Region(v, x_expr, x_dims, x_ones, tuple(items), "set", pos))
    low.set(out, v)


def _lower_pad_grad(low, op, pos: int) -> None:
    out = op.outputs[0]
    if low.is_fed(out):
        return
    src = low.stored(op.inputs[0], pos)
    _, _, ones, dims, _ = low.expr(op.inputs[1], shape_only=True)
    items = []
    for k, (one, (lo, _hi)) in enumerate(zip(src.ones, op.attrs["paddings"])):
        items.append(("fixed", ("const", 0)) if one else ("lin", ("const", lo), 1, k))
    low.place(out, Pending(Take(src, tuple(items)), src.dtype, ones, dims, low.reads_of(src), pos),
               pos)


register("PadGrad", infer=lambda op: [(op.inputs[0].dtype, op.inputs[1].shape)],
         lower=_lower_pad_grad, shape_only=(1,),
         lowerable=lambda op: op.attrs["mode"] == "CONSTANT" and _ranked(*op.inputs)
         and op.inputs[1].shape.ndims > 0,
         ref=_pad_grad_ref,
         grad=lambda op, g: [make_op("PadV2", [g, zeros([], g.dtype)], dict(op.attrs))
                             .outputs[0], None],
         kind="other", doc="The gradient of PadV2: the interior of the padded gradient.")


def _pad_grad(op, g):
    x = op.inputs[0]
    gx = make_op("PadGrad", [g, x], dict(op.attrs)).outputs[0]
    if op.attrs["mode"] != "CONSTANT":
        return [gx, None]
    from jitflow.ops.math.common import unbroadcast
    border = make_op("PadBorderSum", [g, x], dict(op.attrs)).outputs[0]
    return [gx, unbroadcast(border, op.inputs[1])]


def _pad_border_ref(op, g, x):
    g = np.asarray(g)
    inner = _pad_grad_ref(op, g, x)
    return np.asarray(g.sum() - inner.sum(), dtype=g.dtype)


register("PadBorderSum", infer=lambda op: [(op.inputs[0].dtype, TensorShape([]))],
         ref=_pad_border_ref, differentiable=False, kind="other",
         doc="The sum of a padded gradient over the padding: the constant value's gradient.")


register("PadV2", infer=_pad_infer, ref=_pad_ref, grad=_pad_grad, kind="other",
         lower=_lower_pad, inline=True,
         lowerable=lambda op: op.attrs["mode"] == "CONSTANT" and _ranked(op.inputs[0])
         and op.inputs[0].shape.ndims > 0,
         examples=[Example(build=lambda x: pad(x, [[1, 0], [2, 1]]), inputs=[(2, 3)],
                           expect=lambda x: np.pad(x, [[1, 0], [2, 1]])),
                   Example(build=lambda x: pad(x, [[1, 2]], constant_values=3), inputs=[(3,)],
                           expect=lambda x: np.pad(x, [[1, 2]], constant_values=3),
                           id="value"),
                   Example(build=lambda x: pad(x, [[2, 1], [0, 1]], mode="REFLECT"),
                           inputs=[(3, 3)],
                           expect=lambda x: np.pad(x, [[2, 1], [0, 1]], mode="reflect"),
                           id="reflect"),
                   Example(build=lambda x: pad(x, [[2, 1]], mode="symmetric"), inputs=[(3,)],
                           expect=lambda x: np.pad(x, [[2, 1]], mode="symmetric"),
                           id="symmetric")])


def pad(tensor, paddings, mode: str = "CONSTANT", name: Optional[str] = None,
        constant_values=0) -> Tensor:
    """`tf.pad`: `paddings[i] = [before, after]`; modes CONSTANT, REFLECT and SYMMETRIC."""
    mode = mode.upper()
    if mode not in _NP_MODE:
        raise ValueError(f"Unknown padding mode: {mode}")
    p = get_static_value(paddings) if isinstance(paddings, Tensor) else np.asarray(paddings)
    if p is None:
        raise TypeError("pad: `paddings` must be known when the graph is built")
    p = np.asarray(p)
    if p.ndim != 2 or p.shape[1] != 2:
        raise ValueError(f"paddings must be a matrix with 2 columns: {p.tolist()}")
    with name_scope(name, "Pad", [tensor]) as scope:
        x = convert_to_tensor(tensor, name="input")
        c = convert_to_tensor(constant_values, dtype=x.dtype, name="constant_values")
        attrs = {"paddings": tuple((int(a), int(b)) for a, b in p), "mode": mode}
        return make_op("PadV2", [x, c], attrs, name=scope).outputs[0]


def _same_shape_axes_infer(op):
    """Output like the input; every attr `axis` entry must be valid for its rank."""
    x = op.inputs[0]
    r = x.shape.ndims
    if r is not None:
        for a in op.attrs["axis"]:
            _norm_axis(a, r)
    return [(x.dtype, x.shape)]


def _lower_reverse(low, op, pos: int) -> None:
    out = op.outputs[0]
    if low.is_fed(out):
        return
    src = low.stored(op.inputs[0], pos)
    rev = {a % src.rank for a in op.attrs["axis"]}
    items = []
    for k, (one, d) in enumerate(zip(src.ones, src.dims)):
        if one:
            items.append(("fixed", ("const", 0)))
        elif k in rev:
            last = (const_dim(static_size(d) - 1) if is_static(d)
                    else ("arith", "-", d, ("const", 1)))
            items.append(("lin", last, -1, k))
        else:
            items.append(("lin", ("const", 0), 1, k))
    low.place(out, Pending(Take(src, tuple(items)), src.dtype, src.ones, src.dims,
                            low.reads_of(src), pos), pos)


register("ReverseV2", infer=_same_shape_axes_infer,
         lower=_lower_reverse, lowerable=_sup_unary,
         ref=lambda op, x: np.array(np.flip(x, axis=op.attrs["axis"])),
         grad=lambda op, g: [reverse(g, op.attrs["axis"])], kind="other",
         examples=[Example(build=lambda x: reverse(x, [1]), inputs=[(2, 3)],
                           expect=lambda x: x[:, ::-1]),
                   Example(build=lambda x: reverse(x, [0, -1]), inputs=[(2, 3)],
                           expect=lambda x: x[::-1, ::-1], id="both")])


def reverse(tensor, axis, name: Optional[str] = None) -> Tensor:
    """`tf.reverse` (op `ReverseV2`): flip the given axes."""
    x = convert_to_tensor(tensor)
    static, dyn = _int_list_arg(axis, "axis")
    if dyn is not None:
        raise TypeError("reverse: `axis` must be known when the graph is built")
    return make_op("ReverseV2", [x], {"axis": tuple(static)}, name=name).outputs[0]


reverse_v2 = reverse


def _broadcast_to_infer(op):
    x = op.inputs[0]
    target = _shape_of(op, "shape", 1)
    if target.ndims is None or x.shape.ndims is None:
        return [(x.dtype, target)]
    from jitflow.core.shapes import broadcast_static
    try:
        out = broadcast_static(x.shape, target)
    except ValueError:
        out = None
    if out is None or out.ndims != target.ndims or not target.is_compatible_with(out):
        raise ValueError(f"Incompatible shapes for broadcasting: {_tf_shape(x.shape)} and "
                         f"{_tf_shape(target)} for '{op.name}' (op: 'BroadcastTo')")
    return [(x.dtype, TensorShape([t if t is not None else o
                                   for t, o in zip(target.as_tuple(), out.as_tuple())]))]


def _broadcast_to_ref(op, x, *dyn):
    (target,) = _args(op, dyn, "shape")
    try:
        return np.array(np.broadcast_to(x, target))
    except ValueError:
        raise _err(f"Incompatible shapes: {list(np.shape(x))} vs. {list(target)}", op) from None


def _lower_broadcast_to(low, op, pos: int) -> None:
    """An elementwise identity broadcast to the static target shape."""
    target = op.attrs.get("shape")
    if len(op.inputs) != 1 or target is None or any(
            not isinstance(d, (int, np.integer)) or d < 0 for d in target):
        raise Unsupported("BroadcastTo with a computed shape")
    ones = tuple(int(d) == 1 for d in target)
    dims = tuple(1 if int(d) == 1 else ("const", int(d)) for d in target)
    low.elementwise(op, pos, target=(ones, dims))


register("BroadcastTo", infer=_broadcast_to_infer, ref=_broadcast_to_ref,
         lower=_lower_broadcast_to, inline=True,
         grad=lambda op, g: [_unbroadcast(g, op.inputs[0])] + [None] * (len(op.inputs) - 1),
         kind="elementwise",
         examples=[Example(build=lambda x: broadcast_to(x, [2, 3, 4]), inputs=[(3, 1)],
                           expect=lambda x: np.broadcast_to(x, (2, 3, 4)))])


def broadcast_to(input, shape, name: Optional[str] = None) -> Tensor:  # noqa: A002
    """`tf.broadcast_to`: broadcast `input` to `shape` with NumPy's rules."""
    x = convert_to_tensor(input)
    static, dyn = _int_list_arg(shape, "shape")
    inputs = [x] + ([dyn] if dyn is not None else [])
    return make_op("BroadcastTo", inputs, {"shape": static}, name=name).outputs[0]
