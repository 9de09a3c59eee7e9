"""Activations: Relu, Relu6, LeakyRelu, Elu, Selu, Softsign, elementwise ops with scalar
expressions (`tf.nn.relu` ...), and the compositions `swish` (`silu`) and `crelu`.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.compiler.ir import X0, S
from jitflow.core.graph import Tensor, convert_to_tensor, make_op, name_scope
from jitflow.ops.math.casting import cast
from jitflow.ops.math.common import _FLOATS, _NUMERIC, scalar_like, unary_infer
from jitflow.ops.math.compare import greater, less, logical_and, where_v2
from jitflow.ops.math.unary import abs
from jitflow.ops.registry import Example, register

__all__: list = []

NAMESPACES = {
    "nn": [
        "relu", "relu6", "leaky_relu", "elu", "selu", "softsign", "swish", "silu", "crelu",
    ],
    "math": [
        "softsign",
    ],
}


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _act_infer(allowed):
    return lambda op: unary_infer(op, allowed)


def _masked(cond: Tensor, g: Tensor, other: Optional[Tensor] = None) -> Tensor:
    """g where cond holds, else `other` (zero by default)."""
    return where_v2(cond, g, scalar_like(0, g) if other is None else other)


def _act_example(fn, expect, dtypes=("float32", "float64"), domain="nonzero"):
    # "nonzero" keeps inputs away from the kink at 0, where finite differences mislead
    return [Example(lambda a: fn(a), [(2, 5)], expect, dtypes, domain)]


# -- activations ----------------------------------------------------------------------------------
# Relu and Relu6 differentiate through their output, as TF's ReluGrad(g, y) and
# Relu6Grad(g, y) do: the same mask as the input's unless the output is fed (fuzz seed 23000018)
def _relu_grad(op, g):
    # g * (y > 0): a nan in g stays nan even where y == 0
    y = op.outputs[0]
    return [g * cast(greater(y, scalar_like(0, y)), g.dtype)]


def _relu6_grad(op, g):
    y = op.outputs[0]
    inside = logical_and(greater(y, scalar_like(0, y)), less(y, scalar_like(6, y)))
    return [g * cast(inside, g.dtype)]


def _leaky_grad(op, g):
    x = op.inputs[0]
    return [_masked(greater(x, scalar_like(0, x)), g, g * scalar_like(op.attrs["alpha"], g))]


def _elu_grad(op, g):
    y = op.outputs[0]
    return [_masked(less(y, scalar_like(0, y)), g * (y + scalar_like(1, y)), g)]


def _selu_grad(op, g):
    y = op.outputs[0]
    return [_masked(less(y, scalar_like(0, y)),
                    g * (y + scalar_like(_SELU_SCALE * _SELU_ALPHA, y)),
                    g * scalar_like(_SELU_SCALE, g))]


def _softsign_grad(op, g):
    x = op.inputs[0]
    d = scalar_like(1, x) + abs(x)
    return [g / (d * d)]


def _leaky_scalar(op):
    return S.select(S.gt(X0, 0), X0, S.mul(float(op.attrs["alpha"]), X0))


register("Relu", infer=_act_infer(_NUMERIC), ref=lambda op, x: np.maximum(x, 0).astype(x.dtype),
         grad=_relu_grad, kind="elementwise", scalar=S.maximum(X0, 0),
         examples=_act_example(lambda a: relu(a), lambda a: np.maximum(a, 0),
                               ("float32", "float64", "int32")))
register("Relu6", infer=_act_infer(_NUMERIC),
         ref=lambda op, x: np.minimum(np.maximum(x, 0), 6).astype(x.dtype), grad=_relu6_grad,
         kind="elementwise",
         scalar=S.minimum(S.maximum(X0, 0), 6),
         examples=[Example(lambda a: relu6(a * 4.0), [(2, 5)],
                           lambda a: np.clip(a * 4.0, 0, 6), domain=(0.1, 1.4), id="range"),
                   Example(lambda a: relu6(a), [(2, 5)], lambda a: np.clip(a, 0, 6),
                           ("int32",), "int", grad=False, id="int")])
register("LeakyRelu", infer=_act_infer(_FLOATS),
         ref=lambda op, x: np.where(x > 0, x, x * op.attrs["alpha"]).astype(x.dtype),
         grad=_leaky_grad, kind="elementwise", scalar=_leaky_scalar,
         examples=_act_example(lambda a: leaky_relu(a), lambda a: np.where(a > 0, a, 0.2 * a))
         + [Example(lambda a: leaky_relu(a, alpha=0.5), [(3,)],
                    lambda a: np.where(a > 0, a, 0.5 * a), domain="nonzero", id="alpha")])
register("Elu", infer=_act_infer(_FLOATS),
         ref=lambda op, x: np.where(x > 0, x, np.expm1(np.minimum(x, 0))).astype(x.dtype),
         grad=_elu_grad, kind="elementwise",
         scalar=S.select(S.gt(X0, 0), X0, S.expm1(X0)),
         examples=_act_example(lambda a: elu(a), lambda a: np.where(a > 0, a, np.exp(a) - 1)))
register("Selu", infer=_act_infer(_FLOATS),
         ref=lambda op, x: np.where(x > 0, _SELU_SCALE * x, _SELU_SCALE * _SELU_ALPHA
                                    * np.expm1(np.minimum(x, 0))).astype(x.dtype),
         grad=_selu_grad, kind="elementwise",
         scalar=S.select(S.gt(X0, 0), S.mul(_SELU_SCALE, X0),
                         S.mul(_SELU_SCALE * _SELU_ALPHA, S.expm1(X0))),
         examples=_act_example(lambda a: selu(a), lambda a: np.where(
             a > 0, 1.0507009873554805 * a, 1.0507009873554805 * 1.6732632423543772
             * (np.exp(a) - 1))))
register("Softsign", infer=_act_infer(_FLOATS), ref=lambda op, x: x / (1 + np.abs(x)),
         grad=_softsign_grad, kind="elementwise",
         scalar=S.div(X0, S.add(1, S.abs(X0))),
         examples=_act_example(lambda a: softsign(a), lambda a: a / (1 + np.abs(a)),
                               domain="real"))


def _act(op_type: str, features, name):
    with name_scope(name, op_type, [features]) as scope:
        x = convert_to_tensor(features, name="features")
        return make_op(op_type, [x], name=scope).outputs[0]


def relu(features, name: Optional[str] = None) -> Tensor:
    """`tf.nn.relu`: max(x, 0) (op `Relu`)."""
    return _act("Relu", features, name)


def relu6(features, name: Optional[str] = None) -> Tensor:
    """`tf.nn.relu6`: min(max(x, 0), 6) (op `Relu6`)."""
    return _act("Relu6", features, name)


def leaky_relu(features, alpha: float = 0.2, name: Optional[str] = None) -> Tensor:
    """`tf.nn.leaky_relu`: x for x > 0, alpha * x otherwise (op `LeakyRelu`)."""
    with name_scope(name, "LeakyRelu", [features]) as scope:
        x = convert_to_tensor(features, name="features")
        if x.dtype.is_integer:
            x = cast(x, _dtypes.float32)
        return make_op("LeakyRelu", [x], {"alpha": float(alpha)}, name=scope).outputs[0]


def elu(features, name: Optional[str] = None) -> Tensor:
    """`tf.nn.elu`: x for x > 0, exp(x) - 1 otherwise (op `Elu`)."""
    return _act("Elu", features, name)


def selu(features, name: Optional[str] = None) -> Tensor:
    """`tf.nn.selu`: scale * elu with alpha (the self-normalizing constants) (op `Selu`)."""
    return _act("Selu", features, name)


def softsign(features, name: Optional[str] = None) -> Tensor:
    """`tf.nn.softsign`: x / (1 + |x|) (op `Softsign`)."""
    return _act("Softsign", features, name)


# -- swish and crelu (compositions) ---------------------------------------------------------------
def swish(features, beta: float = 1.0, name: Optional[str] = None) -> Tensor:
    """`tf.nn.swish` / `silu`: x * sigmoid(beta * x)."""
    from jitflow.ops.math.unary import sigmoid
    with name_scope(name, "swish", [features]):
        x = convert_to_tensor(features, name="features")
        return x * sigmoid(x * beta if beta != 1.0 else x)


silu = swish


def crelu(features, name: Optional[str] = None, axis: int = -1) -> Tensor:
    """`tf.nn.crelu`: relu of [x, -x] concatenated along `axis`."""
    from jitflow.ops.join import concat
    with name_scope(name, "CRelu", [features]):
        x = convert_to_tensor(features, name="features")
        return relu(concat([x, -x], axis))
