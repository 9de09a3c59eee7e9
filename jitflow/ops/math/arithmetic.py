"""Binary arithmetic: Add, Sub, Mul, RealDiv, DivNoNan, FloorDiv, FloorMod, TruncateDiv,
TruncateMod, Pow, and the functions `tf.add` ... `tf.pow` (`truediv` casts integers to float,
`div` keeps TF1's Python 2 semantics).
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.compiler.ir import X0, X1, S
from jitflow.core.graph import Tensor, make_op, name_scope
from jitflow.ops.math.casting import cast
from jitflow.ops.math.common import (
    _FLOATS, _NUMERIC, _binary_examples, _binary_rule, _tf_operand_order, binary_op,
    convert_pair, scalar_like, unbroadcast,
)
from jitflow.ops.math.compare import greater, where_v2
from jitflow.ops.math.unary import log
from jitflow.ops.registry import Example, register

__all__ = [
    "add", "subtract", "multiply", "truediv", "divide", "realdiv", "div", "div_no_nan", "floordiv",
    "floor_div", "mod", "floormod", "pow", "scalar_mul", "truncatediv", "truncatemod",
]

NAMESPACES = {
    "math": [
        "add", "subtract", "multiply", "truediv", "divide", "div_no_nan", "floordiv", "floormod",
        "mod", "pow", "scalar_mul", "truncatediv", "truncatemod",
    ],
}


# -- arithmetic -----------------------------------------------------------------------------------
def _add_grad(op, g):
    x, y = op.inputs
    return [unbroadcast(g, x), unbroadcast(g, y)]


def _sub_grad(op, g):
    x, y = op.inputs
    return [unbroadcast(g, x), unbroadcast(-g, y)]


def _mul_grad(op, g):
    x, y = op.inputs
    return [unbroadcast(g * y, x), unbroadcast(g * x, y)]


def _div_grad(op, g):
    x, y = op.inputs
    # TF's form, -x / y / y: exactly 0 for x / x, where -x / y**2 leaves an ulp
    return [unbroadcast(g / y, x), unbroadcast(g * (-x / y / y), y)]


register("Add", infer=_binary_rule(_NUMERIC), ref=lambda op, x, y: np.add(x, y),
         grad=_add_grad, kind="elementwise", scalar="add",
         examples=_binary_examples(lambda a, b: add(a, b), np.add))
register("Sub", infer=_binary_rule(_NUMERIC), ref=lambda op, x, y: np.subtract(x, y),
         grad=_sub_grad, kind="elementwise", scalar="sub",
         examples=_binary_examples(lambda a, b: subtract(a, b), np.subtract))
register("Mul", infer=_binary_rule(_NUMERIC), ref=lambda op, x, y: np.multiply(x, y),
         grad=_mul_grad, kind="elementwise", scalar="mul",
         examples=_binary_examples(lambda a, b: multiply(a, b), np.multiply))
register("RealDiv", infer=_binary_rule(_NUMERIC), ref=lambda op, x, y: np.true_divide(x, y),
         grad=_div_grad, kind="elementwise", scalar="div",
         examples=_binary_examples(lambda a, b: a / b, np.true_divide, ("float32", "float64"),
                                   "nonzero"))


def _div_no_nan_ref(op, x, y):
    x, y = np.asarray(x), np.asarray(y)
    safe = np.where(y == 0, np.ones_like(y), y)
    return np.where(y == 0, np.zeros_like(x * y), x / safe)


def _div_no_nan_grad(op, g):
    x, y = op.inputs
    return [unbroadcast(div_no_nan(g, y), x),
            unbroadcast(g * div_no_nan(div_no_nan(-x, y), y), y)]


register("DivNoNan", infer=_binary_rule(_FLOATS), ref=_div_no_nan_ref, grad=_div_no_nan_grad,
         kind="elementwise",
         scalar=S.select(S.eq(X1, 0), 0, S.div(X0, X1)),
         examples=_binary_examples(lambda a, b: div_no_nan(a, b), np.true_divide,
                                   ("float32", "float64"), "nonzero")
         + [Example(lambda a, b: div_no_nan(a, b * 0.0), [(2, 3), (3,)],
                    lambda a, b: np.zeros((2, 3)), grad=False, id="zero")])


def _int_divisor_check(y) -> None:
    y = np.asarray(y)
    if y.dtype.kind in "iu" and np.any(y == 0):
        raise ValueError("Integer division by zero")


def _floordiv_ref(op, x, y):
    _int_divisor_check(y)
    return np.floor_divide(x, y)


def _floormod_ref(op, x, y):
    _int_divisor_check(y)
    return np.mod(x, y)


def _floormod_grad(op, g):
    x, y = op.inputs
    return [unbroadcast(g, x), unbroadcast(-g * floordiv(x, y), y)]


register("FloorDiv", infer=_binary_rule(_NUMERIC), ref=_floordiv_ref,
         differentiable=False, kind="elementwise", scalar="floordiv",
         doc="Division rounded toward negative infinity (Python's `//`), ints and floats; an "
             "integer division by zero is an InvalidArgumentError, as in TF.",
         examples=_binary_examples(lambda a, b: a // b, np.floor_divide, domain="nonzero",
                                   grad=False))
register("FloorMod", infer=_binary_rule(_NUMERIC), ref=_floormod_ref,
         grad=_floormod_grad, kind="elementwise", scalar="floormod",
         doc="Remainder with the sign of the divisor (Python's `%`).",
         examples=_binary_examples(lambda a, b: a % b, np.mod, domain="nonzero", grad=False))


def _pow_grad(op, g):
    x, y = op.inputs
    z = op.outputs[0]
    gx = g * y * pow(x, y - scalar_like(1, y))
    safe_log = where_v2(greater(x, scalar_like(0, x)),
                        log(where_v2(greater(x, scalar_like(0, x)), x, scalar_like(1, x))),
                        scalar_like(0, x))
    gy = g * z * safe_log
    return [unbroadcast(gx, x), unbroadcast(gy, y)]


register("Pow", infer=_binary_rule(_NUMERIC), ref=lambda op, x, y: np.power(x, y),
         grad=_pow_grad, kind="elementwise", scalar="pow",
         examples=_binary_examples(lambda a, b: pow(a, b), np.power, ("float32", "float64"),
                                   "positive")
         + [Example(lambda a, b: pow(a, b), [(2, 3), (3,)], np.power, ("int32",), (0, 4),
                    id="int")])


def _truncatediv_ref(op, x, y):
    x, y = np.asarray(x), np.asarray(y)
    if x.dtype.kind in "iu":
        _int_divisor_check(y)
        # floor division, then one step toward zero where the signs differ and it was inexact
        # (no abs: abs(INT_MIN) overflows)
        q = np.floor_divide(x, y)
        adj = (np.remainder(x, y) != 0) & ((x < 0) != (y < 0))
        return (q + adj).astype(x.dtype)
    return np.trunc(x / y)


register("TruncateDiv", infer=_binary_rule(_NUMERIC), ref=_truncatediv_ref,
         differentiable=False, kind="elementwise", scalar="truncdiv",
         doc="Division rounded toward zero (C's `/` on integers).",
         examples=_binary_examples(lambda a, b: truncatediv(a, b),
                                   lambda a, b: np.trunc(a.astype(np.float64) / b),
                                   domain="nonzero", grad=False))
def _truncatemod_ref(op, x, y):
    _int_divisor_check(y)
    return np.fmod(x, y)


register("TruncateMod", infer=_binary_rule(_NUMERIC), ref=_truncatemod_ref, differentiable=False,
         kind="elementwise", scalar="truncmod",
         doc="Remainder with the sign of the dividend (C's `%`).",
         examples=_binary_examples(lambda a, b: truncatemod(a, b), np.fmod, domain="nonzero",
                                   grad=False))


# -- public functions -----------------------------------------------------------------------------
def add(x, y, name: Optional[str] = None) -> Tensor:
    """`tf.add` (op `Add`)."""
    _tf_operand_order("Add", x, y)
    return binary_op("Add", x, y, name)


def subtract(x, y, name: Optional[str] = None) -> Tensor:
    """`tf.subtract` (op `Sub`)."""
    _tf_operand_order("Sub", x, y)
    return binary_op("Sub", x, y, name)


def multiply(x, y, name: Optional[str] = None) -> Tensor:
    """`tf.multiply` (op `Mul`)."""
    _tf_operand_order("Mul", x, y)
    return binary_op("Mul", x, y, name)


def scalar_mul(scalar, x, name: Optional[str] = None) -> Tensor:
    """`tf.scalar_mul`: a scalar times a tensor."""
    return binary_op("Mul", scalar, x, name, "scalar_mul")


def realdiv(x, y, name: Optional[str] = None) -> Tensor:
    _tf_operand_order("RealDiv", x, y)
    return binary_op("RealDiv", x, y, name)


def truediv(x, y, name: Optional[str] = None) -> Tensor:
    """`tf.truediv`: integers are cast to float (int8/16 -> float32, int32/64 -> float64)."""
    _tf_operand_order("RealDiv", x, y)
    return _truediv(x, y, name)


def _truediv(x, y, name: Optional[str] = None) -> Tensor:
    with name_scope(name, "truediv", [x, y]) as scope:
        x, y = convert_pair(x, y)
        if not x.dtype.is_floating:
            target = _dtypes.float32 if x.dtype.size <= 2 else _dtypes.float64
            x, y = cast(x, target), cast(y, target)
        return make_op("RealDiv", [x, y], name=scope).outputs[0]


def divide(x, y, name: Optional[str] = None) -> Tensor:
    """`tf.divide`: x / y."""
    return _truediv(x, y, name=name)


def div(x, y, name: Optional[str] = None) -> Tensor:
    """`tf.div` (legacy, Python 2 semantics): floor division for ints, true division for floats."""
    with name_scope(name, "div", [x, y]) as scope:
        x, y = convert_pair(x, y)
        op_type = "RealDiv" if x.dtype.is_floating else "FloorDiv"
        return make_op(op_type, [x, y], name=scope).outputs[0]


def div_no_nan(x, y, name: Optional[str] = None) -> Tensor:
    """`tf.div_no_nan`: x / y, and 0 wherever y is 0."""
    return binary_op("DivNoNan", x, y, name, "div_no_nan")


def floordiv(x, y, name: Optional[str] = None) -> Tensor:
    """`tf.floordiv`: x / y rounded toward negative infinity (op `FloorDiv`)."""
    _tf_operand_order("FloorDiv", x, y)
    return binary_op("FloorDiv", x, y, name, "floordiv")


def floor_div(x, y, name: Optional[str] = None) -> Tensor:
    """`tf.floor_div` (the raw `FloorDiv` op)."""
    _tf_operand_order("FloorDiv", x, y)
    return binary_op("FloorDiv", x, y, name, "FloorDiv")


def floormod(x, y, name: Optional[str] = None) -> Tensor:
    """`tf.floormod` / `tf.mod`: remainder with the divisor's sign (op `FloorMod`)."""
    _tf_operand_order("FloorMod", x, y)
    return binary_op("FloorMod", x, y, name, "FloorMod")


mod = floormod


def pow(x, y, name: Optional[str] = None) -> Tensor:  # noqa: A001  (TF1's name)
    """`tf.pow`: x ** y elementwise (op `Pow`)."""
    _tf_operand_order("Pow", x, y)
    return binary_op("Pow", x, y, name, "Pow")


def truncatediv(x, y, name: Optional[str] = None) -> Tensor:
    """`tf.truncatediv`: division rounded toward zero (op `TruncateDiv`)."""
    _tf_operand_order("TruncateDiv", x, y)
    return binary_op("TruncateDiv", x, y, name)


def truncatemod(x, y, name: Optional[str] = None) -> Tensor:
    """`tf.truncatemod`: remainder with the dividend's sign (op `TruncateMod`)."""
    _tf_operand_order("TruncateMod", x, y)
    return binary_op("TruncateMod", x, y, name)
