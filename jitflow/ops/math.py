"""Elementwise math: one registry entry per op (shape rule, NumPy reference, gradient, lowering).

Binary ops broadcast as NumPy does; their gradients sum back over the broadcast axes through
`unbroadcast`, the one helper all of them share.

Lowering. An elementwise op's `scalar` is what one element of its result is, as a scalar
expression of the kernel IR (jitflow/compiler/ir.py) over its operands `X0`, `X1`, ...: a scalar
op name applied to all operands in order (`"add"`), or a tree built with `S` (`S.mul(S.sub(X0,
X1), S.sub(X0, X1))`; numbers are constants the backends type in the op's dtype). A callable
`scalar(op)` picks the expression from the op (e.g. by dtype). Each backend spells the scalar ops
(jitflow/backends/*/scalar_ops.py); the fuser inlines the expressions into one loop.
"""
from __future__ import annotations

from typing import Optional

import math

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.compiler.ir import X0, X1, Check, Load, S
from jitflow.compiler.lower import Pending, Unsupported
from jitflow.core.graph import Tensor, convert_to_tensor, make_op, name_scope
from jitflow.ops.registry import Example, register
from jitflow.core.shapes import TensorShape, broadcast_static, shape_tf_str

__all__ = [
    "cast", "add", "subtract", "multiply", "negative", "square", "unbroadcast", "binary_op",
    "unary_op", "truediv", "divide", "realdiv", "div", "div_no_nan", "add_n", "stop_gradient",
    "floordiv", "floor_div", "mod", "floormod", "pow", "abs", "sign", "sqrt", "rsqrt",
    "reciprocal", "exp", "log", "log1p", "expm1", "sin", "cos", "tan", "tanh", "sigmoid",
    "log_sigmoid", "maximum", "minimum", "squared_difference", "floor", "ceil", "round", "rint",
    "is_nan", "is_finite", "is_inf", "clip_by_value", "equal", "not_equal", "less",
    "less_equal", "greater", "greater_equal", "logical_and", "logical_or", "logical_not",
    "logical_xor", "where", "where_v2", "scalar_mul", "to_float", "to_double", "to_int32",
    "to_int64", "erf", "cumsum", "cumprod", "asin", "acos", "atan", "sinh", "cosh", "asinh",
    "acosh", "atanh", "atan2", "truncatediv", "truncatemod", "accumulate_n",
]

NAMESPACES = {
    "math": [
        "add", "subtract", "multiply", "negative", "square", "truediv", "divide", "div_no_nan",
        "add_n", "floordiv", "floormod", "mod", "pow", "abs", "sign", "sqrt", "rsqrt",
        "reciprocal", "exp", "log", "log1p", "expm1", "sin", "cos", "tan", "tanh", "sigmoid",
        "log_sigmoid", "maximum", "minimum", "squared_difference", "floor", "ceil", "round",
        "rint", "is_nan", "is_finite", "is_inf", "equal", "not_equal", "less", "less_equal",
        "greater", "greater_equal", "logical_and", "logical_or", "logical_not", "logical_xor",
        "scalar_mul", "softplus", "erf", "cumsum", "cumprod", "asin", "acos", "atan", "sinh",
        "cosh", "asinh", "acosh", "atanh", "atan2", "truncatediv", "truncatemod",
        "accumulate_n",
    ],
    "nn": ["sigmoid", "tanh", "softplus"],
}

_FLOATS = ("float16", "float32", "float64")
_INTS = ("int8", "int16", "int32", "int64", "uint8")
_NUMERIC = _FLOATS + _INTS


# -- shared rules ---------------------------------------------------------------------------------
def check_dtype(op, t: Tensor, allowed, arg: str = "x") -> None:
    """TF1's build-time TypeError for an input dtype an op does not support."""
    if t.dtype.name not in allowed:
        raise TypeError(f"Value passed to parameter '{arg}' has DataType {t.dtype.name} not in "
                        f"list of allowed values: {', '.join(allowed)} (op '{op.type}')")


def binary_infer(op, out_dtype=None, allowed=None):
    """Both inputs of one dtype; the output broadcasts their shapes."""
    x, y = op.inputs
    if x.dtype != y.dtype:
        raise TypeError(f"Input 'y' of '{op.type}' Op has type {y.dtype.name} that does not "
                        f"match type {x.dtype.name} of argument 'x'.")
    if allowed is not None:
        check_dtype(op, x, allowed)
    shape = broadcast_static(x.shape, y.shape, f" for '{op.name}' (op: '{op.type}')")
    return [(out_dtype or x.dtype, shape)]


def unary_infer(op, allowed=None, out_dtype=None):
    x = op.inputs[0]
    if allowed is not None:
        check_dtype(op, x, allowed)
    return [(out_dtype or x.dtype, x.shape)]


def _binary_rule(allowed=None, out_dtype=None):
    return lambda op: binary_infer(op, out_dtype, allowed)


def _unary_rule(allowed=None, out_dtype=None):
    return lambda op: unary_infer(op, allowed, out_dtype)


def convert_pair(x, y):
    """Convert two operands; a Python/NumPy value takes the dtype of the tensor beside it.

    Constants made here are named `x`/`y` inside the current scope, as TF1 names them.
    """
    x_is_t = isinstance(x, Tensor) or hasattr(x, "_to_tensor")
    y_is_t = isinstance(y, Tensor) or hasattr(y, "_to_tensor")
    if x_is_t and y_is_t:
        # two tensors keep their dtypes: a mismatch is the op's TypeError, as in TF1
        x = convert_to_tensor(x, name="x")
        y = convert_to_tensor(y, name="y")
    elif x_is_t:
        x = convert_to_tensor(x, name="x")
        y = convert_to_tensor(y, dtype=x.dtype.base_dtype, name="y")
    elif y_is_t:
        y = convert_to_tensor(y, name="y")
        x = convert_to_tensor(x, dtype=y.dtype.base_dtype, name="x")
    else:
        x = convert_to_tensor(x, name="x")
        y = convert_to_tensor(y, dtype=x.dtype, name="y")
    return x, y


def _tf_operand_order(op_type: str, x, y) -> None:
    """TF converts a function's operands in order: a Python or NumPy first operand keeps its
    own dtype (a float is float32, an int int32), so a tensor second operand of another dtype
    is a TypeError (`tf.add(1.5, x_float64)`). The operators (`1.5 + x`) convert the Python side
    to the tensor's dtype instead, and so does `tf.divide`."""
    x_is_t = isinstance(x, Tensor) or hasattr(x, "_to_tensor")
    y_is_t = isinstance(y, Tensor) or hasattr(y, "_to_tensor")
    if x_is_t or not y_is_t or getattr(y, "dtype", None) is None:
        return
    if isinstance(x, (np.ndarray, np.generic)):
        name = x.dtype.name
    else:
        try:
            kind = np.asarray(x).dtype.kind
        except Exception:  # noqa: BLE001  (left to the conversion's own error)
            return
        name = {"f": "float32", "i": "int32", "u": "int32", "b": "bool",
                "c": "complex128"}.get(kind)
    want = y.dtype.base_dtype.name
    if name is not None and name != want:
        raise TypeError(f"Input 'y' of '{op_type}' Op has type {want} that does not match "
                        f"type {name} of argument 'x'.")


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


def scalar_like(value, t: Tensor) -> Tensor:
    """A rank-0 constant of `t`'s dtype (for gradient rules and composed ops)."""
    return convert_to_tensor(np.asarray(value, dtype=t.dtype.as_numpy_dtype), name="Const")


# -- unbroadcast: sum a gradient back to an input's shape -----------------------------------------
def unbroadcast_axes(g_ones, x_ones) -> tuple:
    """The axes of a gradient (axis k of g is 1 where g_ones[k]) that Unbroadcast sums to
    reach an input of x_ones' rank: the leading ones, and those where x is 1 and g is not."""
    lead = len(g_ones) - len(x_ones)
    return tuple(range(lead)) + tuple(
        k + lead for k, one in enumerate(x_ones) if one and not g_ones[k + lead])


def _unbroadcast_ref(op, g, x):
    shape = np.shape(x)
    g = np.asarray(g)
    if g.shape == shape:
        return g
    axes = unbroadcast_axes([d == 1 for d in g.shape], [d == 1 for d in shape])
    return np.sum(g, axis=axes, keepdims=False).reshape(shape).astype(g.dtype, copy=False)


def _lower_unbroadcast(low, op, pos: int) -> None:
    """A sum over the broadcast axes (`ir.Reduce`); with none, an inlinable identity."""
    g, x = op.inputs
    _, _, g_ones, g_dims, _ = low.expr(g, shape_only=True)
    _, _, x_ones, x_dims, _ = low.expr(x, shape_only=True)
    lead = len(g_ones) - len(x_ones)
    if lead < 0:
        raise Unsupported("unbroadcast to a higher rank")
    axes = unbroadcast_axes(g_ones, x_ones)
    for k, one in enumerate(x_ones):
        if not one and not g_ones[k + lead] and g_dims[k + lead] != x_dims[k]:
            low.checks.append(Check(g_dims[k + lead], x_dims[k], pos, "Incompatible shapes"))
    if not axes and lead == 0:
        # the same shape (checked above): described by g's dims, so that a stored g is shared
        # rather than copied
        src = low.expr(g)
        low.identity_of(op, pos, src, x_ones, src.dims if src.ones == x_ones else x_dims)
        return
    low.reduce(op, pos, "sum", axes, False, out_dims=(x_ones, x_dims))


def _unbroadcast_reduced_axes(op):
    g, x = (t.shape.as_tuple() for t in op.inputs[:2])
    if g is None or x is None:
        return None
    if len(g) < len(x):   # not a valid Unbroadcast: its lowering refuses it
        return ()
    return unbroadcast_axes([d == 1 for d in g], [d == 1 for d in x])


register("Unbroadcast",
         infer=lambda op: [(op.inputs[0].dtype, op.inputs[1].shape)],
         ref=_unbroadcast_ref, grad=lambda op, g: [_broadcast_like(g, op.inputs[0]), None],
         lower=_lower_unbroadcast, shape_only=(1,), inline=True,
         kind="reduce", reduced_axes=_unbroadcast_reduced_axes,
         doc="Sum input 0 over the axes along which it was broadcast from input 1's shape "
             "(the gradient of broadcasting).",
         examples=[Example(lambda g, x: unbroadcast(g, x), [(2, 3), (1, 3)],
                           lambda g, x: g.sum(axis=0, keepdims=True), id="keep"),
                   Example(lambda g, x: unbroadcast(g, x), [(4, 2, 3), (2, 1)],
                           lambda g, x: g.sum(axis=(0, 2))[:, None], id="lead")])


def _broadcast_like_ref(op, x, like):
    return np.broadcast_to(x, np.shape(like)).copy()


register("BroadcastLike",
         infer=lambda op: [(op.inputs[0].dtype, op.inputs[1].shape)],
         ref=_broadcast_like_ref,
         grad=lambda op, g: [unbroadcast(g, op.inputs[0]), None],
         kind="elementwise", scalar=X0,
         doc="Broadcast input 0 to input 1's shape (input 1 only gives the shape).",
         examples=[Example(lambda a, b: broadcast_like(a, b), [(3,), (2, 3)],
                           lambda a, b: np.broadcast_to(a, b.shape))])


def _broadcast_like(x: Tensor, like: Tensor) -> Tensor:
    if x.shape.is_fully_defined() and x.shape == like.shape:
        return x
    return make_op("BroadcastLike", [x, like], name="BroadcastLike").outputs[0]


def broadcast_like(x: Tensor, like: Tensor) -> Tensor:
    """`x` broadcast (NumPy rules) to the shape of `like` (which only gives the shape)."""
    return _broadcast_like(x, like)


def zeros_like_of(t: Tensor) -> Tensor:
    """Zeros with `t`'s dtype and (run-time) shape, as a broadcast scalar."""
    return _broadcast_like(scalar_like(0, t), t)


def unbroadcast(grad: Optional[Tensor], x: Tensor) -> Optional[Tensor]:
    """Reduce `grad` (shaped like a broadcast result) to the shape of input `x`."""
    if grad is None:
        return None
    if grad.shape.is_fully_defined() and grad.shape == x.shape:
        return grad
    return make_op("Unbroadcast", [grad, x], name="Unbroadcast").outputs[0]


# -- BroadcastReduced: re-insert reduced axes (gradient of reductions) ----------------------------
def _broadcast_reduced_infer(op):
    g, like = op.inputs
    return [(g.dtype, like.shape)]


def _broadcast_reduced_ref(op, g, like):
    g = np.asarray(g)
    shape = np.shape(like)
    keep = list(shape)
    for a in op.attrs["axis"]:
        keep[a] = 1
    return np.broadcast_to(g.reshape(keep), shape).copy()


def _broadcast_reduced_grad(op, g):
    from jitflow.ops.reduce import reduce_sum
    return [reduce_sum(g, axis=list(op.attrs["axis"])), None]


def _lower_broadcast_reduced(low, op, pos: int) -> None:
    """A load of the stored reduction result with its reduced axes mapped away (`Load.axes`),
    inlined into the consumer."""
    g, like = op.inputs
    _, _, l_ones, l_dims, _ = low.expr(like, shape_only=True)
    rank = len(l_ones)
    axes = tuple(sorted(a + rank if a < 0 else a for a in op.attrs["axis"]))
    out = op.outputs[0]
    lit = low.literal(g)
    if lit is not None:
        # a scalar (the gradient of a rank-0 loss) broadcast to `like`'s shape
        if not low.is_fed(out):
            low.place(out, Pending(lit, lit.dtype, tuple(l_ones), l_dims, frozenset(), pos),
                      pos)
        return
    gv = low.value(g, pos)
    if gv.rank == rank:
        amap = tuple(range(rank))
    elif gv.rank == rank - len(axes):
        amap = tuple(k for k in range(rank) if k not in axes)
    else:
        raise Unsupported("BroadcastReduced ranks")
    for j, k in enumerate(amap):
        if not gv.ones[j] and not l_ones[k] and gv.dims[j] != l_dims[k]:
            low.checks.append(Check(gv.dims[j], l_dims[k], pos, "Incompatible shapes"))
    if low.is_fed(out):
        return
    low.place(out, Pending(Load(gv, amap), gv.dtype, tuple(l_ones), l_dims, frozenset(), pos),
              pos)


register("BroadcastReduced", infer=_broadcast_reduced_infer, ref=_broadcast_reduced_ref,
         grad=_broadcast_reduced_grad, kind="other",
         lower=_lower_broadcast_reduced, shape_only=(1,), inline=(1,),
         doc="Insert size-1 axes `axis` into input 0 (a reduction result without keepdims) and "
             "broadcast it to input 1's shape: the gradient of a reduction.",
         examples=[Example(lambda g, x: broadcast_reduced(g, x, (1,)), [(2, 4), (2, 3, 4)],
                           lambda g, x: np.broadcast_to(g[:, None, :], x.shape)),
                   Example(lambda g, x: broadcast_reduced(g, x, (0, 2)), [(3,), (2, 3, 4)],
                           lambda g, x: np.broadcast_to(g[None, :, None], x.shape), id="two")])


def broadcast_reduced(g: Tensor, like: Tensor, axis) -> Tensor:
    """Undo a reduction's shape: `g` with the reduced `axis` re-inserted, broadcast to `like`."""
    return make_op("BroadcastReduced", [g, like], {"axis": tuple(axis)},
                   name="BroadcastReduced").outputs[0]


# -- AddN, StopGradient ---------------------------------------------------------------------------
def _add_n_infer(op):
    first = op.inputs[0]
    shape = first.shape
    for t in op.inputs[1:]:
        if t.dtype != first.dtype:
            raise TypeError(f"Inputs of 'AddN' must all have one dtype: got {first.dtype.name} "
                            f"and {t.dtype.name}")
        if not shape.is_compatible_with(t.shape):
            raise ValueError(f"Shapes must be equal rank, but are {shape} and {t.shape} for "
                             f"'{op.name}' (op: 'AddN')")
        shape = shape.merge_with(t.shape)
    check_dtype(op, first, _NUMERIC, "inputs")
    return [(first.dtype, shape)]


def _add_n_ref(op, *xs):
    out = np.array(xs[0], copy=True)
    for x in xs[1:]:
        out = out + x
    return out


register("AddN", infer=_add_n_infer, ref=_add_n_ref,
         grad=lambda op, g: [g] * len(op.inputs), kind="elementwise",
         scalar="add",
         examples=[Example(lambda a, b, c: add_n([a, b, c]), [(2, 3)] * 3,
                           lambda a, b, c: a + b + c, ("float32", "float64", "int32")),
                   Example(lambda a, b: add_n([a, b]), [(4,), (4,)],
                           lambda a, b: a + b, id="two")])


def add_n(inputs, name: Optional[str] = None) -> Tensor:
    """`tf.add_n`: the elementwise sum of a list of same-shaped tensors (op `AddN`)."""
    if isinstance(inputs, Tensor) or not inputs:
        raise ValueError("inputs must be a list of at least one Tensor with the same dtype "
                         "and shape")
    inputs = [convert_to_tensor(x) for x in inputs]
    if len(inputs) == 1:
        from jitflow.ops.array import identity
        return identity(inputs[0], name=name) if name else inputs[0]
    return make_op("AddN", inputs, name=name or "AddN").outputs[0]


register("StopGradient", infer=unary_infer, ref=lambda op, x: np.asarray(x),
         differentiable=False, kind="elementwise", scalar=X0,
         doc="Identity whose input receives no gradient.",
         examples=[Example(lambda a: stop_gradient(a), [(2, 3)], lambda a: a,
                           ("float32", "float64", "int32"), grad=False)])


def stop_gradient(input, name: Optional[str] = None) -> Tensor:
    """`tf.stop_gradient`: the value of `input`, treated as a constant by `tf.gradients`."""
    x = convert_to_tensor(input)
    return make_op("StopGradient", [x], name=name or "StopGradient").outputs[0]


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


def _binary_examples(fn, npfn, dtypes=("float32", "float64", "int32"), domain="real",
                     grad=True):
    """Same-shape, broadcast and scalar cases for a binary op."""
    return [
        Example(lambda a, b: fn(a, b), [(2, 3), (2, 3)], npfn, dtypes, domain, grad, id="same"),
        Example(lambda a, b: fn(a, b), [(2, 3), (3,)], npfn, dtypes, domain, grad, id="bcast"),
        Example(lambda a, b: fn(a, b), [(4, 1), (1, 3)], npfn, dtypes, domain, grad, id="outer"),
        Example(lambda a, b: fn(a, b), [(2, 3), ()], npfn, dtypes, domain, grad, id="scalar"),
    ]


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


def _neg_ex():
    return [Example(lambda a: -a, [(2, 3)], np.negative, ("float32", "float64", "int32"))]


register("Neg", infer=_unary_rule(_NUMERIC), ref=lambda op, x: np.negative(x),
         grad=lambda op, g: [-g], kind="elementwise", scalar="neg", examples=_neg_ex())
register("Square", infer=_unary_rule(_NUMERIC), ref=lambda op, x: np.square(x),
         grad=lambda op, g: [g * (op.inputs[0] * scalar_like(2, op.inputs[0]))],
         kind="elementwise", scalar=S.mul(X0, X0),
         examples=[Example(lambda a: square(a), [(2, 3)], np.square,
                           ("float32", "float64", "int32"))])


# -- unary math -----------------------------------------------------------------------------------
def _unary(op_type, ref, grad, scalar, allowed=_FLOATS, domain="real", grad_ok=True,
           fn=None, expect=None, dtypes=("float32", "float64"), out_dtype=None):
    """Register a unary elementwise op with one example on a (2, 3) input."""
    examples = []
    if fn is not None:
        examples = [Example(lambda a: fn(a), [(2, 3)], expect or (lambda a: ref(None, a)),
                            dtypes, domain, grad_ok)]
    register(op_type, infer=_unary_rule(allowed, out_dtype), ref=ref, grad=grad,
             differentiable=grad is not None, kind="elementwise", scalar=scalar,
             examples=examples)


def _abs_grad(op, g):
    return [g * sign(op.inputs[0])]


def _sign_grad(op, g):
    return [zeros_like_of(op.inputs[0])]


# The gradients of Sqrt, Rsqrt and Reciprocal are ops of their own, as in TF: written in terms
# of the forward output y and the incoming gradient dy, and 0 wherever dy is 0 (so a zero
# gradient stays zero where y is 0, inf or nan, as TF's kernels give it)
def _y_dy(op_type: str, y, dy):
    return make_op(op_type, [y, dy], name=op_type).outputs[0]


def _sqrt_grad(op, g):
    return [_y_dy("SqrtGrad", op.outputs[0], g)]


def _rsqrt_grad(op, g):
    return [_y_dy("RsqrtGrad", op.outputs[0], g)]


def _reciprocal_grad(op, g):
    return [_y_dy("ReciprocalGrad", op.outputs[0], g)]


def _y_dy_ref(fn):
    """NumPy reference of a (y, dy) gradient op: fn(y, dy), and 0 where dy == 0."""
    def ref(op, y, dy):
        y, dy = np.asarray(y), np.asarray(dy)
        with np.errstate(all="ignore"):
            val = fn(y, dy)
        return np.where(dy == 0, np.zeros_like(val), val).astype(y.dtype)
    return ref


def _sqrt_grad_grad(op, g):
    # out = 0.5 * dy / y: d/dy_ = -g * out / y, d/d(dy) = 0.5 * g / y
    y = op.inputs[0]
    ga = g / y
    return [-ga * op.outputs[0], scalar_like(0.5, y) * ga]


def _rsqrt_grad_grad(op, g):
    # out = -0.5 * dy * y^3: d/dy_ = -1.5 * g * dy * y^2, d/d(dy) = RsqrtGrad(y, g)
    y, dy = op.inputs
    return [scalar_like(-1.5, y) * g * dy * (y * y), _y_dy("RsqrtGrad", y, g)]


def _reciprocal_grad_grad(op, g):
    # out = -dy * y^2: d/dy_ = -2 * g * dy * y, d/d(dy) = ReciprocalGrad(y, g)
    y, dy = op.inputs
    return [scalar_like(-2, y) * g * dy * y, _y_dy("ReciprocalGrad", y, g)]


def _y_dy_examples(op_type: str, expect, domain: str) -> list:
    def build(y, dy):
        return _y_dy(op_type, y, dy)
    return [Example(build, [(2, 3), (2, 3)], expect, ("float32", "float64"), domain,
                    id="same"),
            # dy == 0 where y is 0 (0/0, 0*inf): 0, not nan
            Example(lambda y, dy: build(y - y, dy * 0.0), [(2, 3), (2, 3)],
                    lambda y, dy: np.zeros((2, 3)), grad=False, id="zero")]


register("SqrtGrad", infer=_binary_rule(_FLOATS), ref=_y_dy_ref(lambda y, dy: 0.5 * dy / y),
         grad=_sqrt_grad_grad, kind="elementwise",
         scalar=S.select(S.eq(X1, 0), 0, S.div(S.mul(0.5, X1), X0)),
         examples=_y_dy_examples("SqrtGrad", lambda y, dy: 0.5 * dy / y, "positive"))
register("RsqrtGrad", infer=_binary_rule(_FLOATS),
         ref=_y_dy_ref(lambda y, dy: -0.5 * (dy * y) * (y * y)), grad=_rsqrt_grad_grad,
         kind="elementwise",
         scalar=S.select(S.eq(X1, 0), 0, S.mul(S.mul(-0.5, S.mul(X1, X0)), S.mul(X0, X0))),
         examples=_y_dy_examples("RsqrtGrad", lambda y, dy: -0.5 * dy * y ** 3, "positive"))
register("ReciprocalGrad", infer=_binary_rule(_FLOATS),
         ref=_y_dy_ref(lambda y, dy: -y * y * dy), grad=_reciprocal_grad_grad,
         kind="elementwise",
         scalar=S.select(S.eq(X1, 0), 0, S.mul(S.mul(S.neg(X0), X0), X1)),
         examples=_y_dy_examples("ReciprocalGrad", lambda y, dy: -y * y * dy, "nonzero"))


def _log1p_grad(op, g):
    x = op.inputs[0]
    return [g / (x + scalar_like(1, x))]


def _tan_grad(op, g):
    c = cos(op.inputs[0])
    return [g / (c * c)]


def _tanh_grad(op, g):
    y = op.outputs[0]
    return [g * (scalar_like(1, y) - y * y)]


def _sigmoid_grad(op, g):
    y = op.outputs[0]
    return [g * (y * (scalar_like(1, y) - y))]


def _softplus_grad(op, g):
    return [g * sigmoid(op.inputs[0])]


def _erf_np(x):
    from scipy.special import erf as _erf
    return _erf(x)


def _erf_grad(op, g):
    x = op.inputs[0]
    return [g * scalar_like(2 / math.sqrt(math.pi), x) * exp(-(x * x))]


def _sigmoid_np(x):
    x = np.asarray(x)
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1, e) / (1 + e)


def _softplus_np(x):
    return np.logaddexp(np.zeros_like(x), x)


_unary("Abs", lambda op, x: np.abs(x), _abs_grad, "abs", _NUMERIC, fn=lambda a: abs(a),
       expect=np.abs, dtypes=("float32", "float64", "int32"), domain="nonzero")
_unary("Sign", lambda op, x: np.sign(x), _sign_grad, "sign", _NUMERIC,
       fn=lambda a: sign(a), expect=np.sign, dtypes=("float32", "float64", "int32"),
       grad_ok=False)
_unary("Sqrt", lambda op, x: np.sqrt(x), _sqrt_grad, "sqrt", domain="positive",
       fn=lambda a: sqrt(a), expect=np.sqrt)
_unary("Rsqrt", lambda op, x: 1 / np.sqrt(x), _rsqrt_grad, S.div(1, S.sqrt(X0)),
       domain="positive", fn=lambda a: rsqrt(a), expect=lambda a: 1 / np.sqrt(a))
_unary("Reciprocal", lambda op, x: np.reciprocal(x), _reciprocal_grad, S.div(1, X0),
       domain="nonzero", fn=lambda a: reciprocal(a), expect=lambda a: 1 / a)
_unary("Exp", lambda op, x: np.exp(x), lambda op, g: [g * op.outputs[0]], "exp",
       fn=lambda a: exp(a), expect=np.exp)
_unary("Log", lambda op, x: np.log(x), lambda op, g: [g / op.inputs[0]], "log",
       domain="positive", fn=lambda a: log(a), expect=np.log)
_unary("Log1p", lambda op, x: np.log1p(x), _log1p_grad, "log1p", domain="unit",
       fn=lambda a: log1p(a), expect=np.log1p)
_unary("Expm1", lambda op, x: np.expm1(x), lambda op, g: [g * exp(op.inputs[0])],
       "expm1", fn=lambda a: expm1(a), expect=np.expm1)
_unary("Sin", lambda op, x: np.sin(x), lambda op, g: [g * cos(op.inputs[0])], "sin",
       fn=lambda a: sin(a), expect=np.sin)
_unary("Cos", lambda op, x: np.cos(x), lambda op, g: [-g * sin(op.inputs[0])],
       "cos", fn=lambda a: cos(a), expect=np.cos)
_unary("Tan", lambda op, x: np.tan(x), _tan_grad, "tan", domain="unit",
       fn=lambda a: tan(a), expect=np.tan)
_unary("Tanh", lambda op, x: np.tanh(x), _tanh_grad, "tanh", fn=lambda a: tanh(a),
       expect=np.tanh)
# exp(-|x|) keeps both branches finite; the naive 1/(1+exp(-x)) flushes subnormal results to 0
_unary("Sigmoid", lambda op, x: _sigmoid_np(x), _sigmoid_grad,
       "sigmoid",
       fn=lambda a: sigmoid(a), expect=lambda a: 1 / (1 + np.exp(-a.astype(np.float64))))
_unary("Softplus", lambda op, x: _softplus_np(x), _softplus_grad,
       "softplus",
       fn=lambda a: softplus(a), expect=lambda a: np.log(1 + np.exp(a.astype(np.float64))))
_unary("Erf", lambda op, x: _erf_np(x), _erf_grad, "erf", fn=lambda a: erf(a),
       expect=lambda a: np.vectorize(math.erf)(a.astype(np.float64)))
_unary("Floor", lambda op, x: np.floor(x), None, "floor", fn=lambda a: floor(a),
       expect=np.floor, grad_ok=False)
_unary("Ceil", lambda op, x: np.ceil(x), None, "ceil", fn=lambda a: ceil(a),
       expect=np.ceil, grad_ok=False)
_unary("Round", lambda op, x: np.rint(x), None,
       lambda op: X0 if op.outputs[0].dtype.is_integer else S.rint(X0), _NUMERIC,
       fn=lambda a: round(a * 2.0 if a.dtype.is_floating else a),
       expect=lambda a: np.rint(a * 2.0) if a.dtype.kind == "f" else a,
       dtypes=("float32", "float64", "int32"), grad_ok=False)
_unary("Rint", lambda op, x: np.rint(x), None, "rint", fn=lambda a: rint(a * 2.0),
       expect=lambda a: np.rint(a * 2.0), grad_ok=False)
_unary("IsNan", lambda op, x: np.isnan(x), None, "isnan", out_dtype=_dtypes.bool_,
       fn=lambda a: is_nan(a), expect=np.isnan, grad_ok=False)
_unary("IsFinite", lambda op, x: np.isfinite(x), None, "isfinite",
       out_dtype=_dtypes.bool_, fn=lambda a: is_finite(a), expect=np.isfinite, grad_ok=False)
_unary("IsInf", lambda op, x: np.isinf(x), None, "isinf", out_dtype=_dtypes.bool_,
       fn=lambda a: is_inf(a), expect=np.isinf, grad_ok=False)


def _one_minus_sq(x):
    return scalar_like(1, x) - x * x


_unary("Asin", lambda op, x: np.arcsin(x), lambda op, g: [g * rsqrt(_one_minus_sq(op.inputs[0]))],
       "asin", domain="unit", fn=lambda a: asin(a), expect=np.arcsin)
_unary("Acos", lambda op, x: np.arccos(x),
       lambda op, g: [-g * rsqrt(_one_minus_sq(op.inputs[0]))], "acos", domain="unit",
       fn=lambda a: acos(a), expect=np.arccos)
_unary("Atan", lambda op, x: np.arctan(x),
       lambda op, g: [g / (scalar_like(1, op.inputs[0]) + op.inputs[0] * op.inputs[0])],
       "atan", fn=lambda a: atan(a), expect=np.arctan)
_unary("Sinh", lambda op, x: np.sinh(x), lambda op, g: [g * cosh(op.inputs[0])],
       "sinh", fn=lambda a: sinh(a), expect=np.sinh)
_unary("Cosh", lambda op, x: np.cosh(x), lambda op, g: [g * sinh(op.inputs[0])],
       "cosh", fn=lambda a: cosh(a), expect=np.cosh)
# through the output, as TF: g / cosh(y) and g / sinh(y) (a fed output is what they see)
_unary("Asinh", lambda op, x: np.arcsinh(x), lambda op, g: [g / cosh(op.outputs[0])],
       "asinh", fn=lambda a: asinh(a), expect=np.arcsinh)
_unary("Acosh", lambda op, x: np.arccosh(x), lambda op, g: [g / sinh(op.outputs[0])],
       "acosh", domain=(1.2, 3.0), fn=lambda a: acosh(a), expect=np.arccosh)
_unary("Atanh", lambda op, x: np.arctanh(x),
       lambda op, g: [g / _one_minus_sq(op.inputs[0])], "atanh", domain="unit",
       fn=lambda a: atanh(a), expect=np.arctanh)


# -- maximum, minimum, squared difference ---------------------------------------------------------
def _minmax_grad(op, g):
    x, y = op.inputs
    pick_x = greater_equal(x, y) if op.type == "Maximum" else less_equal(x, y)
    zero = scalar_like(0, g)
    return [unbroadcast(where_v2(pick_x, g, zero), x),
            unbroadcast(where_v2(pick_x, zero, g), y)]


def _sqdiff_grad(op, g):
    x, y = op.inputs
    d = g * (scalar_like(2, x) * (x - y))
    return [unbroadcast(d, x), unbroadcast(-d, y)]


register("Maximum", infer=_binary_rule(_NUMERIC), ref=lambda op, x, y: np.maximum(x, y),
         grad=_minmax_grad, kind="elementwise", scalar="maximum",
         examples=_binary_examples(lambda a, b: maximum(a, b), np.maximum))
register("Minimum", infer=_binary_rule(_NUMERIC), ref=lambda op, x, y: np.minimum(x, y),
         grad=_minmax_grad, kind="elementwise", scalar="minimum",
         examples=_binary_examples(lambda a, b: minimum(a, b), np.minimum))
def _atan2_grad(op, g):
    y, x = op.inputs
    d = g / (x * x + y * y)
    return [unbroadcast(d * x, y), unbroadcast(-d * y, x)]


register("Atan2", infer=_binary_rule(_FLOATS), ref=lambda op, y, x: np.arctan2(y, x),
         grad=_atan2_grad, kind="elementwise", scalar="atan2",
         doc="The angle of the point (x, y): arctan(y / x) in the right quadrant.",
         examples=_binary_examples(lambda a, b: atan2(a, b), np.arctan2, ("float32", "float64"),
                                   "nonzero"))


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


register("SquaredDifference", infer=_binary_rule(_NUMERIC),
         ref=lambda op, x, y: np.square(np.subtract(x, y)), grad=_sqdiff_grad,
         kind="elementwise", scalar=S.mul(S.sub(X0, X1), S.sub(X0, X1)),
         examples=_binary_examples(lambda a, b: squared_difference(a, b),
                                   lambda a, b: np.square(a - b)))


# -- comparisons and logic ------------------------------------------------------------------------
def _cmp(op_type, npfn, fn, allowed=_NUMERIC):
    register(op_type, infer=_binary_rule(allowed, _dtypes.bool_),
             ref=lambda op, x, y: npfn(x, y), differentiable=False, kind="elementwise",
             scalar=fn,
             examples=_binary_examples(lambda a, b: _CMP_FNS[op_type](a, b), npfn,
                                       ("float32", "int32"), "int", grad=False))


_CMP_FNS: dict = {}
_cmp("Equal", np.equal, "eq", _NUMERIC + ("bool", "string"))
_cmp("NotEqual", np.not_equal, "ne", _NUMERIC + ("bool", "string"))
_cmp("Less", np.less, "lt")
_cmp("LessEqual", np.less_equal, "le")
_cmp("Greater", np.greater, "gt")
_cmp("GreaterEqual", np.greater_equal, "ge")

_BOOL = ("bool",)
register("LogicalAnd", infer=_binary_rule(_BOOL), ref=lambda op, x, y: np.logical_and(x, y),
         differentiable=False, kind="elementwise", scalar="and",
         examples=_binary_examples(lambda a, b: a & b, np.logical_and, ("bool",), "bool",
                                   grad=False))
register("LogicalOr", infer=_binary_rule(_BOOL), ref=lambda op, x, y: np.logical_or(x, y),
         differentiable=False, kind="elementwise", scalar="or",
         examples=_binary_examples(lambda a, b: a | b, np.logical_or, ("bool",), "bool",
                                   grad=False))
register("LogicalNot", infer=_unary_rule(_BOOL), ref=lambda op, x: np.logical_not(x),
         differentiable=False, kind="elementwise", scalar="not",
         examples=[Example(lambda a: ~a, [(2, 3)], np.logical_not, ("bool",), "bool", False)])


# -- select ---------------------------------------------------------------------------------------
def _select_grad(op, g):
    c, x, y = op.inputs
    zero = scalar_like(0, g)
    return [None, unbroadcast(where_v2(c, g, zero), x), unbroadcast(where_v2(c, zero, g), y)]


def _select_v2_infer(op):
    c, x, y = op.inputs
    if not c.dtype.is_bool:
        raise TypeError(f"Input 'condition' of '{op.type}' Op has type {c.dtype.name} that "
                        "does not match expected type of bool.")
    if x.dtype != y.dtype:
        raise TypeError(f"Input 'e' of '{op.type}' Op has type {y.dtype.name} that does not "
                        f"match type {x.dtype.name} of argument 't'.")
    what = f" for '{op.name}' (op: '{op.type}')"
    shape = broadcast_static(broadcast_static(c.shape, x.shape, what), y.shape, what)
    return [(x.dtype, shape)]


def _select_infer(op):
    c, x, y = op.inputs
    (dtype, shape), = _select_v2_infer(op)
    if not x.shape.is_compatible_with(y.shape):
        what = (f"rank, but are {x.shape.ndims} and {y.shape.ndims}"
                if x.shape.ndims != y.shape.ndims else f"shape, but are {x.shape} and {y.shape}")
        raise ValueError(f"Shapes must be equal {what} for '{op.name}' (op: 'Select') with "
                         f"input shapes: {shape_tf_str(c.shape)}, {shape_tf_str(x.shape)}, "
                         f"{shape_tf_str(y.shape)}.")
    shape = x.shape.merge_with(y.shape)
    if c.shape.ndims is not None and shape.ndims is not None and c.shape.ndims != shape.ndims:
        raise ValueError(f"Shapes must be equal rank, but are {c.shape.ndims} and "
                         f"{shape.ndims} for '{op.name}' (op: 'Select')")
    return [(dtype, shape)]


def _where_ref(op, c, x, y):
    return np.where(c, x, y)


register("SelectV2", infer=_select_v2_infer, ref=_where_ref, grad=_select_grad,
         kind="elementwise", scalar="select",
         examples=[Example(lambda c, a, b: where_v2(c > 0, a, b), [(2, 3), (2, 3), (3,)],
                           lambda c, a, b: np.where(c > 0, a, b), id="bcast"),
                   Example(lambda c, a, b: where_v2(c > 0, a, b), [(2, 1), (1, 3), ()],
                           lambda c, a, b: np.where(c > 0, a, b), id="outer")])
register("Select", infer=_select_infer, ref=_where_ref, grad=_select_grad,
         kind="elementwise", scalar="select",
         doc="TF1 `tf.where(c, x, y)`: x and y of one shape; c of their rank (a condition "
             "vector over the first axis is expanded to [n, 1, ...] by `where`).",
         examples=[Example(lambda c, a, b: where(c > 0, a, b), [(2, 3), (2, 3), (2, 3)],
                           lambda c, a, b: np.where(c > 0, a, b), id="same"),
                   Example(lambda c, a, b: where(c > 0, a, b), [(2,), (2, 3), (2, 3)],
                           lambda c, a, b: np.where(c[:, None] > 0, a, b), id="rows")])


def _where_indices_infer(op):
    c = op.inputs[0]
    return [(_dtypes.int64, TensorShape([None, c.shape.ndims]) if c.shape.ndims is not None
             else TensorShape([None, None]))]


register("Where", infer=_where_indices_infer,
         ref=lambda op, c: np.argwhere(np.asarray(c)).astype(np.int64),
         differentiable=False, kind="other",
         doc="Coordinates of the true (non-zero) elements: int64 [num_true, rank].",
         examples=[Example(lambda c: where(c > 0), [(3, 4)],
                           lambda c: np.argwhere(c > 0), grad=False),
                   Example(lambda c: where(c), [(5,)], lambda c: np.argwhere(c), ("bool",),
                           "bool", grad=False, id="vector")])


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
        elif axis < 0:
            raise ValueError("a negative axis needs a tensor of known rank")
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


# -- Cast -----------------------------------------------------------------------------------------
def _cast_grad(op, g):
    x = op.inputs[0]
    if x.dtype.is_floating and op.outputs[0].dtype.is_floating:
        return [cast(g, x.dtype)]
    return [None]


register("Cast", infer=lambda op: [(op.attrs["DstT"], op.inputs[0].shape)],
         ref=lambda op, x: np.asarray(x).astype(op.attrs["DstT"].as_numpy_dtype),
         grad=_cast_grad, kind="elementwise",
         scalar="cast", doc="Convert to attr DstT (the result cast to DstT).",
         examples=[Example(lambda a: cast(a * 3.0, "int32"), [(2, 3)],
                           lambda a: (a * 3.0).astype(np.int32), grad=False, id="to_int"),
                   Example(lambda a: cast(a, "float64"), [(2, 3)], lambda a: a,
                           ("float32",), id="widen")])


def cast(x, dtype, name: Optional[str] = None) -> Tensor:
    """`tf.cast`: convert to `dtype` (float -> int truncates toward zero, as C does)."""
    dtype = _dtypes.as_dtype(dtype)
    x = convert_to_tensor(x)
    if x.dtype == dtype:
        return x
    return make_op("Cast", [x], {"DstT": dtype, "SrcT": x.dtype}, name=name or "Cast").outputs[0]


def to_float(x, name: str = "ToFloat") -> Tensor:
    return cast(x, _dtypes.float32, name=name)


def to_double(x, name: str = "ToDouble") -> Tensor:
    return cast(x, _dtypes.float64, name=name)


def to_int32(x, name: str = "ToInt32") -> Tensor:
    return cast(x, _dtypes.int32, name=name)


def to_int64(x, name: str = "ToInt64") -> Tensor:
    return cast(x, _dtypes.int64, name=name)


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


def maximum(x, y, name: Optional[str] = None) -> Tensor:
    """`tf.maximum` (op `Maximum`); the gradient goes to x where x >= y."""
    _tf_operand_order("Maximum", x, y)
    return binary_op("Maximum", x, y, name)


def minimum(x, y, name: Optional[str] = None) -> Tensor:
    """`tf.minimum` (op `Minimum`); the gradient goes to x where x <= y."""
    _tf_operand_order("Minimum", x, y)
    return binary_op("Minimum", x, y, name)


def squared_difference(x, y, name: Optional[str] = None) -> Tensor:
    """`tf.squared_difference`: (x - y) ** 2."""
    _tf_operand_order("SquaredDifference", x, y)
    return binary_op("SquaredDifference", x, y, name)


def equal(x, y, name: Optional[str] = None) -> Tensor:
    """`tf.equal`: elementwise x == y (bool)."""
    _tf_operand_order("Equal", x, y)
    return binary_op("Equal", x, y, name)


def not_equal(x, y, name: Optional[str] = None) -> Tensor:
    _tf_operand_order("NotEqual", x, y)
    return binary_op("NotEqual", x, y, name)


def less(x, y, name: Optional[str] = None) -> Tensor:
    _tf_operand_order("Less", x, y)
    return binary_op("Less", x, y, name)


def less_equal(x, y, name: Optional[str] = None) -> Tensor:
    _tf_operand_order("LessEqual", x, y)
    return binary_op("LessEqual", x, y, name)


def greater(x, y, name: Optional[str] = None) -> Tensor:
    _tf_operand_order("Greater", x, y)
    return binary_op("Greater", x, y, name)


def greater_equal(x, y, name: Optional[str] = None) -> Tensor:
    _tf_operand_order("GreaterEqual", x, y)
    return binary_op("GreaterEqual", x, y, name)


_CMP_FNS.update(Equal=equal, NotEqual=not_equal, Less=less, LessEqual=less_equal,
                Greater=greater, GreaterEqual=greater_equal)


def logical_and(x, y, name: Optional[str] = None) -> Tensor:
    return binary_op("LogicalAnd", x, y, name)


def logical_or(x, y, name: Optional[str] = None) -> Tensor:
    return binary_op("LogicalOr", x, y, name)


def logical_not(x, name: Optional[str] = None) -> Tensor:
    return unary_op("LogicalNot", x, name)


def logical_xor(x, y, name: str = "LogicalXor") -> Tensor:
    """`tf.logical_xor`, composed as TF1 does: (x | y) & !(x & y)."""
    with name_scope(name, "LogicalXor", [x, y]) as scope:
        x, y = convert_pair(x, y)
        return binary_op("LogicalAnd", logical_or(x, y), logical_not(logical_and(x, y)),
                         scope)


def _unary_fn(op_type: str, doc: str):
    def fn(x, name: Optional[str] = None) -> Tensor:
        return unary_op(op_type, x, name)
    fn.__doc__ = doc
    fn.__name__ = fn.__qualname__ = doc.split("`")[1].split(".")[-1]  # "`tf.exp` ..." -> exp
    return fn


negative = _unary_fn("Neg", "`tf.negative`: -x (op `Neg`).")
square = _unary_fn("Square", "`tf.square`: x * x (op `Square`).")
abs = _unary_fn("Abs", "`tf.abs`: |x| (op `Abs`).")  # noqa: A001
sign = _unary_fn("Sign", "`tf.sign`: -1, 0 or 1 (op `Sign`).")
sqrt = _unary_fn("Sqrt", "`tf.sqrt` (op `Sqrt`).")
rsqrt = _unary_fn("Rsqrt", "`tf.rsqrt`: 1 / sqrt(x) (op `Rsqrt`).")
reciprocal = _unary_fn("Reciprocal", "`tf.reciprocal`: 1 / x (op `Reciprocal`).")
exp = _unary_fn("Exp", "`tf.exp` (op `Exp`).")
log = _unary_fn("Log", "`tf.log`: natural logarithm (op `Log`).")
log1p = _unary_fn("Log1p", "`tf.log1p`: log(1 + x), accurate near 0 (op `Log1p`).")
expm1 = _unary_fn("Expm1", "`tf.expm1`: exp(x) - 1, accurate near 0 (op `Expm1`).")
sin = _unary_fn("Sin", "`tf.sin` (op `Sin`).")
cos = _unary_fn("Cos", "`tf.cos` (op `Cos`).")
tan = _unary_fn("Tan", "`tf.tan` (op `Tan`).")
tanh = _unary_fn("Tanh", "`tf.tanh` (op `Tanh`).")
sigmoid = _unary_fn("Sigmoid", "`tf.sigmoid`: 1 / (1 + exp(-x)) (op `Sigmoid`).")
softplus = _unary_fn("Softplus", "`tf.nn.softplus`: log(1 + exp(x)), stable (op `Softplus`).")
floor = _unary_fn("Floor", "`tf.floor` (op `Floor`).")
ceil = _unary_fn("Ceil", "`tf.ceil` (op `Ceil`).")
round = _unary_fn("Round", "`tf.round`: half to even, as TF (op `Round`).")  # noqa: A001
rint = _unary_fn("Rint", "`tf.rint`: half to even (op `Rint`).")
is_nan = _unary_fn("IsNan", "`tf.is_nan` (op `IsNan`).")
is_finite = _unary_fn("IsFinite", "`tf.is_finite` (op `IsFinite`).")
is_inf = _unary_fn("IsInf", "`tf.is_inf` (op `IsInf`).")
erf = _unary_fn("Erf", "`tf.erf`: the error function (op `Erf`).")
asin = _unary_fn("Asin", "`tf.asin` (op `Asin`).")
acos = _unary_fn("Acos", "`tf.acos` (op `Acos`).")
atan = _unary_fn("Atan", "`tf.atan` (op `Atan`).")
sinh = _unary_fn("Sinh", "`tf.sinh` (op `Sinh`).")
cosh = _unary_fn("Cosh", "`tf.cosh` (op `Cosh`).")
asinh = _unary_fn("Asinh", "`tf.asinh` (op `Asinh`).")
acosh = _unary_fn("Acosh", "`tf.acosh` (op `Acosh`).")
atanh = _unary_fn("Atanh", "`tf.atanh` (op `Atanh`).")


def atan2(y, x, name: Optional[str] = None) -> Tensor:
    """`tf.atan2`: the angle of (x, y), elementwise (op `Atan2`)."""
    _tf_operand_order("Atan2", y, x)
    return binary_op("Atan2", y, x, name)


def truncatediv(x, y, name: Optional[str] = None) -> Tensor:
    """`tf.truncatediv`: division rounded toward zero (op `TruncateDiv`)."""
    _tf_operand_order("TruncateDiv", x, y)
    return binary_op("TruncateDiv", x, y, name)


def truncatemod(x, y, name: Optional[str] = None) -> Tensor:
    """`tf.truncatemod`: remainder with the dividend's sign (op `TruncateMod`)."""
    _tf_operand_order("TruncateMod", x, y)
    return binary_op("TruncateMod", x, y, name)


def accumulate_n(inputs, shape=None, tensor_dtype=None, name: Optional[str] = None) -> Tensor:
    """`tf.accumulate_n`: the elementwise sum of `inputs` (an `AddN`)."""
    return add_n(inputs, name=name)


def log_sigmoid(x, name: Optional[str] = None) -> Tensor:
    """`tf.log_sigmoid`: -softplus(-x), stable for large |x|."""
    with name_scope(name, "LogSigmoid", [x]) as scope:
        x = convert_to_tensor(x, name="x")
        return make_op("Neg", [softplus(-x)], name=scope).outputs[0]


def clip_by_value(t, clip_value_min, clip_value_max, name: Optional[str] = None) -> Tensor:
    """`tf.clip_by_value`: Minimum then Maximum, so the gradient passes only inside the range."""
    with name_scope(name, "clip_by_value", [t, clip_value_min, clip_value_max]) as scope:
        t = convert_to_tensor(t, name="t")
        lo = convert_to_tensor(clip_value_min, dtype=t.dtype, name="clip_value_min")
        hi = convert_to_tensor(clip_value_max, dtype=t.dtype, name="clip_value_max")
        t_min = minimum(t, hi)
        out = make_op("Maximum", [t_min, lo], name=scope).outputs[0]
        if t.shape.ndims is not None and out.shape.ndims is not None \
                and out.shape.ndims > t.shape.ndims:
            raise ValueError(f"clip_by_value: the clip values {lo.shape}, {hi.shape} must not "
                             f"broadcast the tensor of shape {t.shape}")
        return out


def where(condition, x=None, y=None, name: Optional[str] = None) -> Tensor:
    """TF1 `tf.where`: with x and y, select elementwise (op `Select`; a condition vector
    picks rows of x/y); with neither, the int64 coordinates of the true elements (`Where`)."""
    if (x is None) != (y is None):
        raise ValueError("x and y must both be non-None or both be None.")
    if x is None:
        with name_scope(name, "Where", [condition]) as scope:
            c = convert_to_tensor(condition, name="condition")
            if not c.dtype.is_bool:
                c = not_equal(c, scalar_like(0, c))
            return make_op("Where", [c], name=scope).outputs[0]
    with name_scope(name, "Select", [condition, x, y]) as scope:
        c = convert_to_tensor(condition, name="condition")
        x, y = convert_pair(x, y)
        xr = x.shape.merge_with(y.shape).ndims if x.shape.is_compatible_with(y.shape) else None
        if c.shape.ndims == 1 and xr is not None and xr > 1:
            like = x if x.shape.ndims is not None else y
            c = broadcast_reduced(c, like, range(1, xr))
        return make_op("Select", [c, x, y], name=scope).outputs[0]


def where_v2(condition, x=None, y=None, name: Optional[str] = None) -> Tensor:
    """`tf.where_v2`: select with NumPy broadcasting of all three inputs (op `SelectV2`)."""
    if x is None and y is None:
        return where(condition, name=name)
    with name_scope(name, "SelectV2", [condition, x, y]) as scope:
        c = convert_to_tensor(condition, name="condition")
        x, y = convert_pair(x, y)
        return make_op("SelectV2", [c, x, y], name=scope).outputs[0]


# -- operator overloads on Tensor -----------------------------------------------------------------
def _matmul(a, b):
    """`a @ b`, named `matmul` as TF1 names it."""
    from jitflow.ops.linalg import matmul
    with name_scope(None, "matmul", [a, b]) as scope:
        a, b = convert_pair(a, b)
        return matmul(a, b, name=scope)


def _logical(op_type: str, scope: str):
    def fn(a, b):
        with name_scope(None, scope, [a, b]) as s:
            a, b = convert_pair(a, b)
            return make_op(op_type, [a, b], name=s).outputs[0]
    return fn


def _install_operators() -> None:
    """Python operators on Tensor, named as TF1 names them (`a + b` -> op `add`)."""
    ops = {
        "__add__": lambda a, b: binary_op("Add", a, b, None, "add"),
        "__radd__": lambda a, b: binary_op("Add", b, a, None, "add"),
        "__sub__": lambda a, b: binary_op("Sub", a, b, None, "sub"),
        "__rsub__": lambda a, b: binary_op("Sub", b, a, None, "sub"),
        "__mul__": lambda a, b: binary_op("Mul", a, b, None, "mul"),
        "__rmul__": lambda a, b: binary_op("Mul", b, a, None, "mul"),
        "__truediv__": lambda a, b: _truediv(a, b),
        "__rtruediv__": lambda a, b: _truediv(b, a),
        "__floordiv__": lambda a, b: binary_op("FloorDiv", a, b, None, "floordiv"),
        "__rfloordiv__": lambda a, b: binary_op("FloorDiv", b, a, None, "floordiv"),
        "__mod__": lambda a, b: binary_op("FloorMod", a, b, None, "mod"),
        "__rmod__": lambda a, b: binary_op("FloorMod", b, a, None, "mod"),
        "__pow__": lambda a, b: binary_op("Pow", a, b, None, "pow"),
        "__rpow__": lambda a, b: binary_op("Pow", b, a, None, "pow"),
        "__matmul__": lambda a, b: _matmul(a, b),
        "__rmatmul__": lambda a, b: _matmul(b, a),
        "__neg__": lambda a: unary_op("Neg", a),
        "__abs__": lambda a: unary_op("Abs", a),
        "__lt__": lambda a, b: binary_op("Less", a, b),
        "__le__": lambda a, b: binary_op("LessEqual", a, b),
        "__gt__": lambda a, b: binary_op("Greater", a, b),
        "__ge__": lambda a, b: binary_op("GreaterEqual", a, b),
        "__and__": _logical("LogicalAnd", "and"),
        "__rand__": lambda a, b: _logical("LogicalAnd", "and")(b, a),
        "__or__": _logical("LogicalOr", "or"),
        "__ror__": lambda a, b: _logical("LogicalOr", "or")(b, a),
        "__xor__": lambda a, b: logical_xor(a, b, name="xor"),
        "__rxor__": lambda a, b: logical_xor(b, a, name="xor"),
        "__invert__": lambda a: unary_op("LogicalNot", a),
    }
    for k, f in ops.items():
        setattr(Tensor, k, f)


_install_operators()
