"""Unary elementwise math: Neg, Square, Abs, Sign, Sqrt, Rsqrt, Reciprocal, Exp, Log, Log1p,
Expm1, the trigonometric and hyperbolic functions and their inverses, Sigmoid, Softplus, Erf,
Floor, Ceil, Round, Rint, IsNan, IsFinite, IsInf; the gradient ops SqrtGrad, RsqrtGrad and
ReciprocalGrad; Atan2 (the two-argument arctangent); and their functions (`tf.exp` ...).
"""
from __future__ import annotations

from typing import Optional

import math

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.compiler.ir import X0, X1, S
from jitflow.core.graph import Tensor, convert_to_tensor, make_op, name_scope
from jitflow.ops.math.common import (
    _FLOATS, _NUMERIC, _binary_examples, _binary_rule, _tf_operand_order, _unary_rule,
    binary_op, scalar_like, unary_op, unbroadcast, zeros_like_of,
)
from jitflow.ops.registry import Example, register

__all__ = [
    "negative", "square", "abs", "sign", "sqrt", "rsqrt", "reciprocal", "exp", "log", "log1p",
    "expm1", "sin", "cos", "tan", "tanh", "sigmoid", "log_sigmoid", "floor", "ceil", "round",
    "rint", "is_nan", "is_finite", "is_inf", "erf", "asin", "acos", "atan", "sinh", "cosh", "asinh",
    "acosh", "atanh", "atan2",
]

NAMESPACES = {
    "math": [
        "negative", "square", "abs", "sign", "sqrt", "rsqrt", "reciprocal", "exp", "log", "log1p",
        "expm1", "sin", "cos", "tan", "tanh", "sigmoid", "log_sigmoid", "floor", "ceil", "round",
        "rint", "is_nan", "is_finite", "is_inf", "softplus", "erf", "asin", "acos", "atan", "sinh",
        "cosh", "asinh", "acosh", "atanh", "atan2",
    ],
    "nn": [
        "sigmoid", "tanh", "softplus",
    ],
}


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


def _neg_ex():
    return [Example(lambda a: -a, [(2, 3)], np.negative, ("float32", "float64", "int32"))]


register("Neg", infer=_unary_rule(_NUMERIC), ref=lambda op, x: np.negative(x),
         grad=lambda op, g: [-g], kind="elementwise", scalar="neg", examples=_neg_ex())
register("Square", infer=_unary_rule(_NUMERIC), ref=lambda op, x: np.square(x),
         grad=lambda op, g: [g * (op.inputs[0] * scalar_like(2, op.inputs[0]))],
         kind="elementwise", scalar=S.mul(X0, X0),
         examples=[Example(lambda a: square(a), [(2, 3)], np.square,
                           ("float32", "float64", "int32"))])


def _atan2_grad(op, g):
    y, x = op.inputs
    d = g / (x * x + y * y)
    return [unbroadcast(d * x, y), unbroadcast(-d * y, x)]


register("Atan2", infer=_binary_rule(_FLOATS), ref=lambda op, y, x: np.arctan2(y, x),
         grad=_atan2_grad, kind="elementwise", scalar="atan2",
         doc="The angle of the point (x, y): arctan(y / x) in the right quadrant.",
         examples=_binary_examples(lambda a, b: atan2(a, b), np.arctan2, ("float32", "float64"),
                                   "nonzero"))


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


def log_sigmoid(x, name: Optional[str] = None) -> Tensor:
    """`tf.log_sigmoid`: -softplus(-x), stable for large |x|."""
    with name_scope(name, "LogSigmoid", [x]) as scope:
        x = convert_to_tensor(x, name="x")
        return make_op("Neg", [softplus(-x)], name=scope).outputs[0]
