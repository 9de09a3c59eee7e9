"""Special functions: the regularized incomplete gamma functions Igamma and Igammac, the
Hurwitz zeta function Zeta (these three with gradients with respect to x only, not the order),
the inverse error function Erfinv, the normal quantile function Ndtri, and `xlog1py`. Their
references are SciPy's.
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np

from jitflow.core.graph import Tensor, convert_to_tensor, make_op, name_scope
from jitflow.ops.registry import Example, register

__all__ = ["zeta", "igamma", "igammac"]

NAMESPACES = {
    "math": ["zeta", "igamma", "igammac", "erfinv", "ndtri", "xlog1py"],
}


def _sp():
    import scipy.special
    return scipy.special


def _binary_infer(op):
    from jitflow.core.shapes import broadcast_static
    a, x = op.inputs
    if a.dtype.name not in ("float32", "float64") or a.dtype != x.dtype:
        raise TypeError(f"{op.type} needs two float32 or two float64 inputs")
    return [(x.dtype, broadcast_static(a.shape, x.shape))]


def _typed(fn):
    return lambda op, *xs: np.asarray(fn(*xs)).astype(op.outputs[0].dtype.as_numpy_dtype)


def _igamma_grad(sign: float):
    def grad(op, g):
        from jitflow.ops.math.unary import exp, log
        from jitflow.ops.segment import lgamma
        a, x = op.inputs
        # d/dx P(a, x) = exp(-x) x^(a-1) / Gamma(a); Q = 1 - P
        dx = exp(-x + (a - 1.0) * log(x) - lgamma(a))
        from jitflow.ops.math.common import unbroadcast
        return [None, unbroadcast(g * dx * sign, x)]
    return grad


def _zeta_grad(op, g):
    from jitflow.ops.math.common import unbroadcast
    s, q = op.inputs
    return [None, unbroadcast(-g * s * zeta(s + 1.0, q), q)]


register("Igamma", infer=_binary_infer, ref=_typed(lambda a, x: _sp().gammainc(a, x)),
         grad=_igamma_grad(1.0), kind="other", doc="The regularized lower incomplete gamma.",
         examples=[Example(lambda a, x: igamma(a + 2.0, x), [(3,), (3,)],
                           lambda a, x: _sp().gammainc(a + 2, x), domain="positive",
                           grad=False)])
register("Igammac", infer=_binary_infer, ref=_typed(lambda a, x: _sp().gammaincc(a, x)),
         grad=_igamma_grad(-1.0), kind="other", doc="The regularized upper incomplete gamma.",
         examples=[Example(lambda a, x: igammac(a + 2.0, x), [(3,), (3,)],
                           lambda a, x: _sp().gammaincc(a + 2, x), domain="positive",
                           grad=False)])
register("Zeta", infer=_binary_infer, ref=_typed(lambda s, q: _sp().zeta(s, q)),
         grad=_zeta_grad, kind="other", doc="The Hurwitz zeta function zeta(x, q).",
         examples=[Example(lambda s, q: zeta(s + 2.0, q), [(3,), (3,)],
                           lambda s, q: _sp().zeta(s + 2, q), domain="positive",
                           grad=False)])


def _binary(op_type, a, x, name):
    from jitflow.ops.math.common import convert_pair
    with name_scope(name, op_type, [a, x]) as scope:
        a, x = convert_pair(a, x)
        return make_op(op_type, [a, x], name=scope[:-1]).outputs[0]


def igamma(a, x, name: Optional[str] = None) -> Tensor:
    """`tf.igamma`: the regularized lower incomplete gamma function P(a, x)."""
    return _binary("Igamma", a, x, name)


def igammac(a, x, name: Optional[str] = None) -> Tensor:
    """`tf.igammac`: the regularized upper incomplete gamma function Q(a, x)."""
    return _binary("Igammac", a, x, name)


def zeta(x, q, name: Optional[str] = None) -> Tensor:
    """`tf.zeta`: the Hurwitz zeta function."""
    return _binary("Zeta", x, q, name)


def _unary_special(op_type: str, fn, dfn, doc: str):
    def grad(op, g):
        return [g * dfn(op.inputs[0], op.outputs[0])]
    register(op_type, infer=lambda op: [(op.inputs[0].dtype, op.inputs[0].shape)],
             ref=_typed(fn), grad=grad, kind="other", doc=doc)


def _erfinv_d(x, y):
    from jitflow.ops.math.unary import exp, square
    return (math.sqrt(math.pi) / 2.0) * exp(square(y))


def _ndtri_d(x, y):
    from jitflow.ops.math.unary import exp, square
    return math.sqrt(2.0 * math.pi) * exp(square(y) / 2.0)


_unary_special("Erfinv", lambda x: _sp().erfinv(x), _erfinv_d, "The inverse error function.")
_unary_special("Ndtri", lambda x: _sp().ndtri(x), _ndtri_d,
               "The inverse of the standard normal CDF.")


def erfinv(x, name: Optional[str] = None) -> Tensor:
    """`tf.math.erfinv`."""
    return make_op("Erfinv", [convert_to_tensor(x)], name=name or "Erfinv").outputs[0]


def ndtri(x, name: Optional[str] = None) -> Tensor:
    """`tf.math.ndtri`: the quantile function of the standard normal distribution."""
    return make_op("Ndtri", [convert_to_tensor(x)], name=name or "Ndtri").outputs[0]


def xlog1py(x, y, name: Optional[str] = None) -> Tensor:
    """`tf.math.xlog1py`: x * log1p(y), and 0 where x is 0."""
    from jitflow.ops.sources import zeros_like
    from jitflow.ops.math.common import convert_pair, scalar_like
    from jitflow.ops.math.compare import equal, where_v2
    from jitflow.ops.math.unary import log1p
    with name_scope(name, "xlog1py", [x, y]):
        x, y = convert_pair(x, y)
        v = x * log1p(y)
        return where_v2(equal(x, scalar_like(0, x)), zeros_like(v), v)
