"""Elementwise math: one registry entry per op (shape rule, NumPy reference, gradient, template).

Binary ops broadcast as NumPy does; their gradients sum back over the broadcast axes through
`unbroadcast`, the one helper all of them share.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from jitflow import dtypes as _dtypes
from jitflow.graph import Tensor, convert_to_tensor, make_op, name_scope
from jitflow.ops.registry import register
from jitflow.shapes import broadcast_static

__all__ = ["cast", "add", "subtract", "multiply", "negative", "square", "unbroadcast", "binary_op",
           "unary_op", "truediv", "divide", "realdiv"]


# -- shared rules ------------------------------------------------------------------------------
def binary_infer(op, out_dtype=None):
    """Both inputs of one dtype; the output broadcasts their shapes."""
    x, y = op.inputs
    if x.dtype != y.dtype:
        raise TypeError(f"Input 'y' of '{op.type}' Op has type {y.dtype.name} that does not "
                        f"match type {x.dtype.name} of argument 'x'.")
    shape = broadcast_static(x.shape, y.shape, f" for '{op.name}' (op: '{op.type}')")
    return [(out_dtype or x.dtype, shape)]


def unary_infer(op):
    x = op.inputs[0]
    return [(x.dtype, x.shape)]


def convert_pair(x, y):
    """Convert two operands; a Python/NumPy value takes the dtype of the tensor beside it.

    Constants made here are named `x`/`y` inside the current scope, as TF1 names them.
    """
    if isinstance(x, Tensor) or hasattr(x, "_to_tensor"):
        x = convert_to_tensor(x, name="x")
        y = convert_to_tensor(y, dtype=x.dtype.base_dtype, name="y")
    elif isinstance(y, Tensor) or hasattr(y, "_to_tensor"):
        y = convert_to_tensor(y, name="y")
        x = convert_to_tensor(x, dtype=y.dtype.base_dtype, name="x")
    else:
        x = convert_to_tensor(x, name="x")
        y = convert_to_tensor(y, dtype=x.dtype, name="y")
    return x, y


def binary_op(op_type: str, x, y, name: Optional[str] = None,
              default_name: Optional[str] = None) -> Tensor:
    """Create a binary op in a scope named like the op (TF1: `mul/y` then `mul`)."""
    with name_scope(name, default_name or op_type, [x, y]) as scope:
        x, y = convert_pair(x, y)
        return make_op(op_type, [x, y], name=scope).outputs[0]


def unary_op(op_type: str, x, name: Optional[str] = None,
             default_name: Optional[str] = None) -> Tensor:
    with name_scope(name, default_name or op_type, [x]) as scope:
        x = convert_to_tensor(x, name="x")
        return make_op(op_type, [x], name=scope).outputs[0]


# -- unbroadcast: sum a gradient back to an input's shape -------------------------------------
def _unbroadcast_ref(op, g, x):
    shape = np.shape(x)
    g = np.asarray(g)
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        i + lead for i, d in enumerate(shape) if d == 1 and g.shape[i + lead] != 1)
    return np.sum(g, axis=axes, keepdims=False).reshape(shape).astype(g.dtype, copy=False)


register("Unbroadcast",
         infer=lambda op: [(op.inputs[0].dtype, op.inputs[1].shape)],
         ref=_unbroadcast_ref, grad=lambda op, g: [_broadcast_like(g, op.inputs[0]), None],
         kind="reduce", doc="Sum input 0 over the axes along which it was broadcast from "
                            "input 1's shape (the gradient of broadcasting).")


def _broadcast_like_ref(op, x, like):
    return np.broadcast_to(x, np.shape(like)).copy()


register("BroadcastLike",
         infer=lambda op: [(op.inputs[0].dtype, op.inputs[1].shape)],
         ref=_broadcast_like_ref,
         grad=lambda op, g: [unbroadcast(g, op.inputs[0]), None],
         kind="elementwise", template="{0}",
         doc="Broadcast input 0 to input 1's shape (input 1 only gives the shape).")


def _broadcast_like(x: Tensor, like: Tensor) -> Tensor:
    if x.shape.is_fully_defined() and x.shape == like.shape:
        return x
    return make_op("BroadcastLike", [x, like], name="BroadcastLike").outputs[0]


def unbroadcast(grad: Optional[Tensor], x: Tensor) -> Optional[Tensor]:
    """Reduce `grad` (shaped like a broadcast result) to the shape of input `x`."""
    if grad is None:
        return None
    if grad.shape.is_fully_defined() and grad.shape == x.shape:
        return grad
    return make_op("Unbroadcast", [grad, x], name="Unbroadcast").outputs[0]


# -- arithmetic --------------------------------------------------------------------------------
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
    return [unbroadcast(g / y, x), unbroadcast(-g * x / (y * y), y)]


register("Add", infer=binary_infer, ref=lambda op, x, y: np.add(x, y), grad=_add_grad,
         kind="elementwise", template="({0} + {1})")
register("Sub", infer=binary_infer, ref=lambda op, x, y: np.subtract(x, y), grad=_sub_grad,
         kind="elementwise", template="({0} - {1})")
register("Mul", infer=binary_infer, ref=lambda op, x, y: np.multiply(x, y), grad=_mul_grad,
         kind="elementwise", template="({0} * {1})")
register("RealDiv", infer=binary_infer, ref=lambda op, x, y: np.true_divide(x, y),
         grad=_div_grad, kind="elementwise", template="({0} / {1})")
register("Neg", infer=unary_infer, ref=lambda op, x: np.negative(x),
         grad=lambda op, g: [-g], kind="elementwise", template="(-{0})")
register("Square", infer=unary_infer, ref=lambda op, x: np.square(x),
         grad=lambda op, g: [g * (op.inputs[0] * 2)], kind="elementwise",
         template="({0} * {0})")


def _cast_grad(op, g):
    x = op.inputs[0]
    if x.dtype.is_floating and op.outputs[0].dtype.is_floating:
        return [cast(g, x.dtype)]
    return [None]


register("Cast", infer=lambda op: [(op.attrs["DstT"], op.inputs[0].shape)],
         ref=lambda op, x: np.asarray(x).astype(op.attrs["DstT"].as_numpy_dtype),
         grad=_cast_grad, kind="elementwise",
         template=lambda op: "{0}", doc="Convert to attr DstT (the code generator casts on store).")


def cast(x, dtype, name: Optional[str] = None) -> Tensor:
    """`tf.cast`: convert to `dtype` (float -> int truncates toward zero, as C does)."""
    dtype = _dtypes.as_dtype(dtype)
    x = convert_to_tensor(x)
    if x.dtype == dtype:
        return x
    return make_op("Cast", [x], {"DstT": dtype, "SrcT": x.dtype}, name=name).outputs[0]


def add(x, y, name: Optional[str] = None) -> Tensor:
    """`tf.add` (op `Add`)."""
    return binary_op("Add", x, y, name)


def subtract(x, y, name: Optional[str] = None) -> Tensor:
    """`tf.subtract` (op `Sub`)."""
    return binary_op("Sub", x, y, name)


def multiply(x, y, name: Optional[str] = None) -> Tensor:
    """`tf.multiply` (op `Mul`)."""
    return binary_op("Mul", x, y, name)


def realdiv(x, y, name: Optional[str] = None) -> Tensor:
    return binary_op("RealDiv", x, y, name)


def truediv(x, y, name: Optional[str] = None) -> Tensor:
    """`tf.truediv`: integers are cast to float (int8/16 -> float32, int32/64 -> float64)."""
    with name_scope(name, "truediv", [x, y]) as scope:
        x, y = convert_pair(x, y)
        if not x.dtype.is_floating:
            target = _dtypes.float32 if x.dtype.size <= 2 else _dtypes.float64
            x, y = cast(x, target), cast(y, target)
        return make_op("RealDiv", [x, y], name=scope).outputs[0]


def divide(x, y, name: Optional[str] = None) -> Tensor:
    """`tf.divide`: x / y."""
    return truediv(x, y, name=name)


def negative(x, name: Optional[str] = None) -> Tensor:
    """`tf.negative` (op `Neg`)."""
    return unary_op("Neg", x, name)


def square(x, name: Optional[str] = None) -> Tensor:
    """`tf.square` (op `Square`)."""
    return unary_op("Square", x, name)


# -- operator overloads on Tensor ---------------------------------------------------------------
def _install_operators() -> None:
    ops = {
        "__add__": lambda a, b: binary_op("Add", a, b, None, "add"),
        "__radd__": lambda a, b: binary_op("Add", b, a, None, "add"),
        "__sub__": lambda a, b: binary_op("Sub", a, b, None, "sub"),
        "__rsub__": lambda a, b: binary_op("Sub", b, a, None, "sub"),
        "__mul__": lambda a, b: binary_op("Mul", a, b, None, "mul"),
        "__rmul__": lambda a, b: binary_op("Mul", b, a, None, "mul"),
        "__truediv__": lambda a, b: truediv(a, b),
        "__rtruediv__": lambda a, b: truediv(b, a),
        "__neg__": lambda a: unary_op("Neg", a),
    }
    for k, f in ops.items():
        setattr(Tensor, k, f)


_install_operators()
