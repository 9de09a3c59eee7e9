"""Maximum, Minimum and SquaredDifference; the comparisons (Equal ... GreaterEqual) and the
logical ops (LogicalAnd, LogicalOr, LogicalNot; `logical_xor` composed); the selects (Select:
TF1's `tf.where(c, x, y)`, SelectV2, and Where: the coordinates of true elements); and
`clip_by_value`.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.core import errors as _errors
from jitflow.compiler.lower import Unsupported
from jitflow.compiler.ir import X0, X1, S
from jitflow.core.graph import Tensor, convert_to_tensor, make_op, name_scope
from jitflow.ops.math.common import (
    _NUMERIC, _binary_examples, _binary_rule, _tf_operand_order, _unary_rule, binary_op,
    broadcast_reduced, convert_pair, scalar_like, unary_op, unbroadcast, zeros_like_of,
)
from jitflow.ops.registry import Example, register
from jitflow.core.shapes import TensorShape, broadcast_static, shape_tf_str

__all__ = [
    "maximum", "minimum", "squared_difference", "clip_by_value", "equal", "not_equal", "less",
    "less_equal", "greater", "greater_equal", "logical_and", "logical_or", "logical_not",
    "logical_xor", "where", "where_v2",
]

NAMESPACES = {
    "math": [
        "maximum", "minimum", "squared_difference", "equal", "not_equal", "less", "less_equal",
        "greater", "greater_equal", "logical_and", "logical_or", "logical_not", "logical_xor",
    ],
}


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


def _select_v1_grad(op, g):
    # Select's own row/scalar/elementwise rule (the condition's rank may be known only when
    # it runs): x and y have g's shape, so nothing is unbroadcast
    c = op.inputs[0]
    zero = zeros_like_of(g)
    return [None, make_op("Select", [c, g, zero], name="Select").outputs[0],
            make_op("Select", [c, zero, g], name="Select").outputs[0]]


def _select_v2_infer(op):
    c, x, y = op.inputs
    _select_dtypes(op)
    what = f" for '{op.name}' (op: '{op.type}')"
    shape = broadcast_static(broadcast_static(c.shape, x.shape, what), y.shape, what)
    return [(x.dtype, shape)]


def _select_dtypes(op) -> None:
    c, x, y = op.inputs
    if not c.dtype.is_bool:
        raise TypeError(f"Input 'condition' of '{op.type}' Op has type {c.dtype.name} that "
                        "does not match expected type of bool.")
    if x.dtype != y.dtype:
        raise TypeError(f"Input 'e' of '{op.type}' Op has type {y.dtype.name} that does not "
                        f"match type {x.dtype.name} of argument 't'.")


def _select_infer(op):
    c, x, y = op.inputs
    _select_dtypes(op)
    dtype = x.dtype
    if not x.shape.is_compatible_with(y.shape):
        what = (f"rank, but are {x.shape.ndims} and {y.shape.ndims}"
                if x.shape.ndims != y.shape.ndims else f"shape, but are {x.shape} and {y.shape}")
        raise ValueError(f"Shapes must be equal {what} for '{op.name}' (op: 'Select') with "
                         f"input shapes: {shape_tf_str(c.shape)}, {shape_tf_str(x.shape)}, "
                         f"{shape_tf_str(y.shape)}.")
    shape = x.shape.merge_with(y.shape)
    cr, r = c.shape.ndims, shape.ndims
    if cr == 0 or cr is None or r is None:
        return [(dtype, shape)]      # a scalar condition picks all of x or all of y
    if cr == 1 and r > 1:
        # a condition vector picks rows: its length is x's first dimension
        if not c.shape[:1].is_compatible_with(shape[:1]):
            raise ValueError(f"Dimensions must be equal, but are {c.shape[0]} and "
                             f"{shape[0]} for '{op.name}' (op: 'Select')")
        return [(dtype, TensorShape(c.shape[:1]).merge_with(shape[:1]).concatenate(
            shape[1:]))]
    if cr != r:
        raise ValueError(f"Shapes must be equal rank, but are {cr} and {r} for '{op.name}' "
                         "(op: 'Select')")
    if not c.shape.is_compatible_with(shape):
        raise ValueError(f"Shapes must be equal shape, but are {c.shape} and {shape} for "
                         f"'{op.name}' (op: 'Select')")
    return [(dtype, shape.merge_with(c.shape))]


def _where_ref(op, c, x, y):
    return np.where(c, x, y)


def _shape_str(a) -> str:
    return "[" + ",".join(str(d) for d in np.shape(a)) + "]"


def _select_ref(op, c, x, y):
    """TF1 Select at run time: x and y of one shape; c a scalar (all of x or all of y), a
    vector over x's first axis (x of rank >= 2: whole rows), or of x's shape. Checked here
    too, as the condition's rank may be unknown when the graph is built."""
    c, x, y = np.asarray(c), np.asarray(x), np.asarray(y)
    if x.shape != y.shape:
        raise _errors.InvalidArgumentError(
            None, op, f"'then' and 'else' must have the same size.  but are "
            f"{_shape_str(x)} and {_shape_str(y)}")
    if c.ndim == 0:
        return np.array(x if c else y, copy=True)
    if c.ndim == 1 and x.ndim >= 2:
        if c.shape[0] != x.shape[0]:
            raise _errors.InvalidArgumentError(
                None, op, f"Number of batches of 'then' must match size of 'cond', but saw: "
                f"{x.shape[0]} vs. {c.shape[0]}")
        return np.where(c.reshape(c.shape + (1,) * (x.ndim - 1)), x, y)
    if c.shape != x.shape:
        raise _errors.InvalidArgumentError(
            None, op, f"'then' and 'cond' must have the same size.  but are {_shape_str(x)} "
            f"vs. {_shape_str(c)}")
    return np.where(c, x, y)


def _lower_select(low, op, pos: int) -> None:
    """Select compiles as the elementwise select where its operands need no broadcasting but
    a scalar condition's (known only now when the condition's rank was unknown); a condition
    vector over rows of a higher-rank x, or mismatched shapes (an error), run the reference."""
    c, x, y = (low.expr(t, shape_only=True) for t in op.inputs)
    if x.ones != y.ones:
        raise Unsupported("Select of differently shaped then/else")
    if c.ones and c.ones != x.ones:
        raise Unsupported("Select with a condition of another shape class than then/else")
    low.elementwise(op, pos)


register("SelectV2", infer=_select_v2_infer, ref=_where_ref, grad=_select_grad,
         kind="elementwise", scalar="select",
         examples=[Example(lambda c, a, b: where_v2(c > 0, a, b), [(2, 3), (2, 3), (3,)],
                           lambda c, a, b: np.where(c > 0, a, b), id="bcast"),
                   Example(lambda c, a, b: where_v2(c > 0, a, b), [(2, 1), (1, 3), ()],
                           lambda c, a, b: np.where(c > 0, a, b), id="outer")])
register("Select", infer=_select_infer, ref=_select_ref, grad=_select_v1_grad,
         kind="elementwise", scalar="select", lower=_lower_select,
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


def _where_indices_ref(op, c):
    c = np.asarray(c)
    if c.ndim == 0:
        # TF's kernel takes rank >= 1 only (a condition of unknown rank fed a scalar)
        raise _errors.InvalidArgumentError(
            None, op, "WhereOp: Unhandled input dimensions: 0 (the condition must have rank "
            ">= 1)")
    return np.argwhere(c).astype(np.int64)


register("Where", infer=_where_indices_infer, ref=_where_indices_ref,
         differentiable=False, kind="other",
         doc="Coordinates of the true (non-zero) elements: int64 [num_true, rank].",
         examples=[Example(lambda c: where(c > 0), [(3, 4)],
                           lambda c: np.argwhere(c > 0), grad=False),
                   Example(lambda c: where(c), [(5,)], lambda c: np.argwhere(c), ("bool",),
                           "bool", grad=False, id="vector")])


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
            if not c.shape.is_compatible_with(like.shape[:1]):
                raise ValueError(f"Dimensions must be equal, but are {c.shape[0]} and "
                                 f"{like.shape[0]} for '{scope}Select' (op: 'Select'): the "
                                 f"condition {c.name} picks rows of {like.name}")
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
