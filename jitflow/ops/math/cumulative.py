"""Running sums and products along an axis: Cumsum, Cumprod (`exclusive`, `reverse`), and
`tf.cumsum`, `tf.cumprod`.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from jitflow.core.graph import Tensor, convert_to_tensor, make_op, name_scope
from jitflow.ops.math.common import _NUMERIC, check_dtype
from jitflow.ops.registry import Example, register

__all__ = [
    "cumsum", "cumprod",
]

NAMESPACES = {
    "math": [
        "cumsum", "cumprod",
    ],
}


# -- cumulative sums and products -----------------------------------------------------------------
def _cum_infer(op):
    x = op.inputs[0]
    check_dtype(op, x, _NUMERIC)
    return [(x.dtype, x.shape)]


def _cum_ref(npfn, identity):
    def ref(op, x):
        x = np.asarray(x)
        axis, exclusive, reverse = op.attrs["axis"], op.attrs["exclusive"], op.attrs["reverse"]
        if reverse:
            x = np.flip(x, axis)
        out = npfn(x, axis=axis, dtype=x.dtype)
        if exclusive:
            out = np.moveaxis(out, axis, 0)
            first = np.full((1,) + out.shape[1:], identity, dtype=x.dtype)
            out = np.moveaxis(np.concatenate([first, out[:-1]]), 0, axis)
        if reverse:
            out = np.flip(out, axis)
        return np.ascontiguousarray(out)
    return ref


def _cumsum_grad(op, g):
    a = op.attrs
    return [cumsum(g, a["axis"], exclusive=a["exclusive"], reverse=not a["reverse"])]


def _cumprod_grad(op, g):
    """TF's rule: cumsum(prod * g, reversed) / x (inexact where x has zeros, as in TF)."""
    x, a = op.inputs[0], op.attrs
    prod = op.outputs[0]
    out = cumsum(prod * g, a["axis"], exclusive=a["exclusive"], reverse=not a["reverse"])
    return [out / x]


def _cum_examples(fn, npfn, domain="real"):
    def flip_excl(a, axis, exclusive, reverse):
        b = np.flip(a, axis) if reverse else a
        c = npfn(b.astype(np.float64), axis=axis)
        if exclusive:
            c = np.moveaxis(c, axis, 0)
            c = np.moveaxis(np.concatenate([np.ones_like(c[:1]) * (npfn is np.cumprod),
                                            c[:-1]]), 0, axis)
        return np.flip(c, axis) if reverse else c
    out = []
    for axis, ex, rev in ((0, False, False), (1, True, False), (-1, False, True),
                          (0, True, True)):
        out.append(Example(
            (lambda a, axis=axis, ex=ex, rev=rev: fn(a, axis, exclusive=ex, reverse=rev)),
            [(3, 4)], (lambda a, axis=axis, ex=ex, rev=rev: flip_excl(a, axis, ex, rev)),
            ("float32", "float64", "int32"), domain,
            id=f"ax{axis}{'_excl' if ex else ''}{'_rev' if rev else ''}"))
    return out


register("Cumsum", infer=_cum_infer, ref=_cum_ref(np.cumsum, 0), grad=_cumsum_grad,
         kind="other", doc="Running sum along attr axis (exclusive: shifted by one; reverse: "
                           "from the end).",
         examples=_cum_examples(lambda *a, **k: cumsum(*a, **k), np.cumsum))
register("Cumprod", infer=_cum_infer, ref=_cum_ref(np.cumprod, 1), grad=_cumprod_grad,
         kind="other", doc="Running product along attr axis (exclusive, reverse as Cumsum).",
         examples=_cum_examples(lambda *a, **k: cumprod(*a, **k), np.cumprod, "nonzero"))


def _cum(op_type, x, axis, exclusive, reverse, name):
    with name_scope(name, op_type, [x]) as scope:
        x = convert_to_tensor(x, name="x")
        axis = int(axis.op.attrs["value"]) if isinstance(axis, Tensor) and \
            axis.op.type == "Const" else int(axis)
        r = x.shape.ndims
        if r is not None:
            if not -r <= axis < r:
                raise ValueError(f"axis {axis} is out of range for a tensor of rank {r}")
            axis %= r
        # rank unknown: a negative axis stays negative (counted from the end when it runs)
        return make_op(op_type, [x], {"axis": axis, "exclusive": bool(exclusive),
                                      "reverse": bool(reverse)}, name=scope).outputs[0]


def cumsum(x, axis=0, exclusive: bool = False, reverse: bool = False,
           name: Optional[str] = None) -> Tensor:
    """`tf.cumsum`: running sums along `axis` (op `Cumsum`)."""
    return _cum("Cumsum", x, axis, exclusive, reverse, name)


def cumprod(x, axis=0, exclusive: bool = False, reverse: bool = False,
            name: Optional[str] = None) -> Tensor:
    """`tf.cumprod`: running products along `axis` (op `Cumprod`)."""
    return _cum("Cumprod", x, axis, exclusive, reverse, name)
