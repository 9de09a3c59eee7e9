"""`tf.nn`: activations, softmax and cross-entropy, bias_add, moments, dropout, l2 ops.

Activations are elementwise ops with scalar expressions. Softmax, LogSoftmax and the two softmax
cross-entropy ops have kind "row": each output element depends on one whole row (the slice
along attr `axis`, normally the last), so a code generator emits one loop nest per row (max,
sum of exps, then the outputs). Their references subtract the row maximum, so large logits
give no overflow.
"""
from __future__ import annotations

import numbers
import os
from typing import Optional

import numpy as np

from jitflow import dtypes as _dtypes
from jitflow.compiler.ir import (X0, X1, Apply, Check, LibCall, Lit, Load, Loop, RangeCheck,
                                 RowOp, S, Value)
from jitflow.compiler.lower import Pending, Unsupported, const_dim, is_static, static_size
from jitflow.graph import Tensor, convert_to_tensor, make_op, name_scope
from jitflow.ops.math.arithmetic import add, multiply
from jitflow.ops.math.casting import cast
from jitflow.ops.math.common import (
    _FLOATS, _NUMERIC, broadcast_reduced, check_dtype, scalar_like, stop_gradient, unary_infer,
    unbroadcast,
)
from jitflow.ops.math.compare import (
    equal, greater, greater_equal, less, logical_and, maximum, minimum, squared_difference,
    where_v2,
)
from jitflow.ops.math.unary import abs, exp, floor, log1p, rsqrt, square
from jitflow.ops.reduce import _legacy, normalize_axis, reduce_mean, reduce_sum
from jitflow.ops.registry import Example, register
from jitflow.shapes import TensorShape, broadcast_static, shape_tf_str

__all__ = ["l2_loss"]

NAMESPACES = {
    "nn": ["relu", "relu6", "leaky_relu", "elu", "selu", "softsign", "softmax", "log_softmax",
           "softmax_cross_entropy_with_logits", "softmax_cross_entropy_with_logits_v2",
           "sparse_softmax_cross_entropy_with_logits", "sigmoid_cross_entropy_with_logits",
           "l2_loss", "bias_add", "moments", "dropout", "l2_normalize", "xw_plus_b",
           "batch_normalization", "weighted_cross_entropy_with_logits", "zero_fraction",
           "top_k", "in_top_k", "embedding_lookup", "conv2d", "max_pool", "avg_pool",
           "depthwise_conv2d", "depthwise_conv2d_native", "separable_conv2d"],
    "math": ["l2_normalize", "softsign", "softmax", "log_softmax", "top_k", "in_top_k"],
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


# -- softmax and log-softmax ----------------------------------------------------------------------
def _np_shifted(x, axis):
    """(z, lse): the logits less their row max, and log(sum(exp(z))) along `axis`."""
    x = np.asarray(x)
    # `initial`: an empty row (a size-0 axis) has no max; its result is empty, as in TF
    m = np.max(x, axis=axis, keepdims=True, initial=-np.inf)
    z = x - np.where(np.isfinite(m), m, 0)
    return z, np.log(np.sum(np.exp(z), axis=axis, keepdims=True))


def _np_log_softmax(x, axis):
    z, lse = _np_shifted(x, axis)
    return z - lse


def _np_softmax(x, axis):
    x = np.asarray(x)
    m = np.max(x, axis=axis, keepdims=True, initial=-np.inf)
    e = np.exp(x - np.where(np.isfinite(m), m, 0))
    return e / np.sum(e, axis=axis, keepdims=True)


def _row_infer(op):
    x = op.inputs[0]
    check_dtype(op, x, _FLOATS, "logits")
    if x.shape.ndims == 0:
        raise ValueError(f"Shape must be at least rank 1 but is rank 0 for '{op.name}' "
                         f"(op: '{op.type}') with input shapes: [].")
    return [(x.dtype, x.shape)]


def _softmax_grad(op, g):
    y, axis = op.outputs[0], op.attrs["axis"]
    s = reduce_sum(g * y, axis, keepdims=True)
    return [(g - s) * y]


def _log_softmax_grad(op, g):
    y, axis = op.outputs[0], op.attrs["axis"]
    return [g - exp(y) * reduce_sum(g, axis, keepdims=True)]


def _row_examples(fn, npfn):
    return [Example(lambda a: fn(a), [(3, 4)], lambda a: npfn(a, -1), id="last"),
            Example(lambda a: fn(a, axis=0), [(3, 4)], lambda a: npfn(a, 0), id="axis0"),
            Example(lambda a: fn(a, dim=1), [(2, 3, 4)], lambda a: npfn(a, 1), id="dim")]


# -- lowering of the softmax family into the kernel IR --------------------------------------------
def _lower_row(how: str):
    """Softmax ("softmax"), LogSoftmax ("log_softmax") and the cross-entropies ("xent",
    "sparse_xent") as one `ir.RowOp` over the rows of their last axis; along another axis,
    rows of a transposed copy; over an axis of size 1, elementwise."""
    def lower(low, op, pos: int) -> None:
        if how in ("softmax", "log_softmax") and op.attrs["axis"] not in (
                -1, op.inputs[0].shape.ndims - 1):
            return _lower_row_inner_axis(low, op, pos, how)
        x = low.value(op.inputs[0], pos)
        if how in ("xent", "sparse_xent"):
            # no classes: TF raises (see _no_classes), so such runs are the reference's
            c = x.dims[-1]
            if is_static(c) and static_size(c) == 0:
                raise Unsupported("cross-entropy over no classes")
            low.check_in_range(1, c, const_dim(1 << 62), pos, "Must have at least one class")
        if x.ones[-1] and how == "sparse_xent":
            raise Unsupported("sparse xent over a unit axis")
        labels = None
        if how == "xent":
            labels = _dense_labels(low, op, pos, x)
            if x.ones[-1]:
                return _lower_row_unit(low, op, pos, how, x, labels)
        elif x.ones[-1]:
            return _lower_row_unit(low, op, pos, how, x, None)
        elif how == "sparse_xent":
            labels = low.value(op.inputs[1], pos)
            if labels.kind != "in" or labels.ones != x.ones[:-1]:
                raise Unsupported("sparse xent labels must be an input")
            for a, b in zip(labels.dims, x.dims[:-1]):
                if a != b:
                    low.checks.append(Check(a, b, pos, "Incompatible shapes"))
            low.checks.append(RangeCheck(labels, x.dims[-1], pos, "Received a label value "
                                         "outside the valid range"))
        outs = []
        for i, t in enumerate(op.outputs):
            loss = how in ("xent", "sparse_xent") and i == 0
            ones, dims = (x.ones[:-1], x.dims[:-1]) if loss else (x.ones, x.dims)
            if low.is_fed(t) or not low.uses.get(t, 0):
                outs.append(None)
                if not low.is_fed(t):  # only its shape may be asked for
                    low.set(t, Pending(Lit(0, t.dtype.name), t.dtype.name, ones, dims,
                                       frozenset(), pos, consumed=True))
                continue
            v = low.buf(t.dtype.name, ones, dims)
            outs.append(v)
            low.set(t, v)
        if any(o is not None for o in outs):
            low.emit(RowOp(how, outs, x, labels, pos))
    return lower


def _dense_labels(low, op, pos: int, x):
    """The labels of a dense cross-entropy: stored, of the logits' shape (checked)."""
    lab = low.value(op.inputs[1], pos)
    if lab.ones != x.ones:
        raise Unsupported("xent labels broadcast")
    for a, b in zip(lab.dims, x.dims):
        if a != b:
            low.checks.append(Check(a, b, pos, "Incompatible shapes"))
    return lab


def _lower_row_unit(low, op, pos: int, how: str, x, lab) -> None:
    """A softmax-family op over an axis of size 1 is elementwise: softmax is exp(x - x)
    (1, or NaN where x is not finite, as the row formula gives), log_softmax x - x, the
    cross-entropy loss labels * (x - x) + 0 and its backprop exp(x - x) - labels."""
    r, dt = x.rank, x.dtype
    reads = frozenset(v.var_op for v in (x, lab) if v is not None and v.kind == "var")
    drop = tuple(range(r - 1)) + (0,)   # loads of a row result: the unit axis is index 0
    for i, t in enumerate(op.outputs):
        loss = how == "xent" and i == 0
        ones, dims = (x.ones[:-1], x.dims[:-1]) if loss else (x.ones, x.dims)
        if low.is_fed(t) or not low.uses.get(t, 0):
            if not low.is_fed(t):
                low.set(t, Pending(Lit(0, dt), dt, ones, dims, frozenset(), pos, consumed=True))
            continue
        if how == "softmax":
            expr = Apply(S.exp(S.sub(X0, X0)), [Load(x)], dt, pos, True)
        elif how == "log_softmax":
            expr = Apply(S.sub(X0, X0), [Load(x)], dt, pos)
        elif loss:
            # TF's labels * (lse - z) summed from +0: here lse = 0 and z = x - x
            expr = Apply(S.add(S.mul(X0, S.sub(X1, X1)), 0.0), [Load(lab, drop), Load(x, drop)],
                         dt, pos)
        else:
            expr = Apply(S.sub(S.exp(S.sub(X1, X1)), X0), [Load(lab), Load(x)], dt, pos, True)
        low.place(t, Pending(expr, dt, ones, dims, reads, pos), pos)


def _lower_row_inner_axis(low, op, pos: int, how: str) -> None:
    """Softmax/LogSoftmax along an axis other than the last: rows of a transposed copy."""
    out = op.outputs[0]
    if low.is_fed(out):
        return
    src = low.stored(op.inputs[0], pos)
    r = src.rank
    a = op.attrs["axis"] % r
    perm = tuple(k for k in range(r) if k != a) + (a,)   # axis `a` last
    axes = [0] * r
    for j, k in enumerate(perm):
        axes[k] = j
    ones = tuple(src.ones[k] for k in perm)
    dims = tuple(src.dims[k] for k in perm)
    if ones[-1]:  # one element per row: 1 (log: 0), nan where x is not finite
        fn = S.add(S.sub(X0, X0), X1) if how == "softmax" else S.sub(X0, X0)
        expr = Apply(fn, [Load(src), Lit(1, src.dtype)], src.dtype, pos)
        low.place(out, Pending(expr, src.dtype, src.ones, src.dims, low.reads_of(src), pos),
                  pos)
        return
    xt = low.buf(src.dtype, ones, dims)
    low.emit(Loop(xt, Load(src, tuple(axes)), pos))
    yt = low.buf(out.dtype.name, ones, dims)
    low.emit(RowOp(how, [yt], xt, None, pos))
    # yt's dim j is the source's dim perm[j]: read it back in the source's axis order
    low.place(out, Pending(Load(yt, perm), yt.dtype, src.ones, src.dims, frozenset(), pos), pos)


def _row_lowerable(op) -> bool:
    r = op.inputs[0].shape.ndims
    if r is None or r < 1 or op.inputs[0].dtype.name not in _FLOATS:
        return False
    if op.type == "SparseSoftmaxCrossEntropyWithLogits":
        return True
    if op.type == "SoftmaxCrossEntropyWithLogits":
        return op.attrs.get("axis") in (r - 1, -1) and op.inputs[1].shape.ndims == r
    return -r <= op.attrs["axis"] < r


register("Softmax", infer=_row_infer, ref=lambda op, x: _np_softmax(x, op.attrs["axis"]),
         grad=_softmax_grad, kind="row", lower=_lower_row("softmax"), lowerable=_row_lowerable,
         doc="exp(x) / sum(exp(x)) along attr axis.",
         examples=_row_examples(lambda a, **k: softmax(a, **k),
                                lambda a, ax: np.exp(a) / np.exp(a).sum(ax, keepdims=True)))
register("LogSoftmax", infer=_row_infer,
         ref=lambda op, x: _np_log_softmax(x, op.attrs["axis"]), grad=_log_softmax_grad,
         kind="row", lower=_lower_row("log_softmax"), lowerable=_row_lowerable,
         doc="x - log(sum(exp(x))) along attr axis.",
         examples=_row_examples(lambda a, **k: log_softmax(a, **k),
                                lambda a, ax: a - np.log(np.exp(a).sum(ax, keepdims=True))))


def _row_op(op_type, logits, axis, name, dim):
    axis = _legacy(axis, dim, "axis", "dim")
    with name_scope(name, op_type, [logits]) as scope:
        x = convert_to_tensor(logits, name="logits")
        if axis not in (None, -1) and x.shape.ndims is None:
            # TF1 swaps the axis to the end, which needs the rank: it fails while building
            raise TypeError(f"{op_type} over axis {axis} needs logits of known rank; "
                            f"'{x.name}' has unknown rank")
        (a,) = normalize_axis(x, -1 if axis is None else axis, "softmax")
        return make_op(op_type, [x], {"axis": a}, name=scope).outputs[0]


def softmax(logits, axis=None, name: Optional[str] = None, dim=None) -> Tensor:
    """`tf.nn.softmax` along `axis` (default the last; legacy `dim`) (op `Softmax`)."""
    return _row_op("Softmax", logits, axis, name, dim)


def log_softmax(logits, axis=None, name: Optional[str] = None, dim=None) -> Tensor:
    """`tf.nn.log_softmax` along `axis` (default the last; legacy `dim`) (op `LogSoftmax`)."""
    return _row_op("LogSoftmax", logits, axis, name, dim)


# -- cross entropy --------------------------------------------------------------------------------
def _xent_infer(op):
    logits, labels = op.inputs
    check_dtype(op, logits, _FLOATS, "features")
    if labels.dtype != logits.dtype:
        raise TypeError(f"Input 'labels' of '{op.type}' Op has type {labels.dtype.name} that "
                        f"does not match type {logits.dtype.name} of argument 'features'.")
    shape = broadcast_static(logits.shape, labels.shape, f" for '{op.name}' (op: '{op.type}')")
    if shape.ndims is None and logits.shape.ndims is not None:
        # labels of unknown rank: TF's loss takes the logits' shape (its wrapper reshapes the
        # loss to them); only their 1s may broadcast to more (fuzz seed 23004303)
        shape = TensorShape([None if d == 1 else d for d in logits.shape.as_tuple()])
    if shape.ndims is not None and shape.ndims != logits.shape.ndims:
        raise ValueError(f"labels of shape {labels.shape} must not have a higher rank than "
                         f"logits of shape {logits.shape} for '{op.name}'")
    axis = op.attrs["axis"]
    loss = TensorShape(None) if shape.ndims is None else TensorShape(
        [d for i, d in enumerate(shape.as_tuple()) if i != axis])
    return [(logits.dtype, loss), (logits.dtype, shape)]


def _no_classes(logits, sparse: bool, axis: int = -1) -> None:
    """TF's errors for cross-entropies over a class axis of size 0. Its wrappers flatten the
    logits to [-1, classes] by Reshape's rule (the -1 taken from the input's non-zero dims),
    the sparse kernel then refuses zero classes, and the dense loss is reshaped back to the
    outer dims, which fails where one of them is 0 (fuzz seed 23001741)."""
    shape = np.shape(logits)
    if not shape or shape[axis] != 0 or (not sparse and len(shape) < 2):
        return
    rows = shape[0] if sparse and len(shape) == 2 else int(np.prod([d for d in shape if d]))
    if sparse:
        raise ValueError(f"Must have at least one class, but got logits shape [{rows},0]")
    if 0 in shape[:axis % len(shape)] + shape[axis % len(shape) + 1:]:
        raise ValueError(f"Input to reshape is a tensor with {rows} values, but the requested "
                         f"shape has 0")


def _xent_ref(op, logits, labels):
    axis = op.attrs["axis"]
    _no_classes(logits, False, axis)
    z, lse = _np_shifted(logits, axis)
    # TF's form, sum(labels * (lse - z)) accumulated from +0: a row whose terms are all zeros
    # gives +0, whatever the labels' signs
    loss = np.sum(labels * (lse - z), axis=axis, initial=0).astype(z.dtype, copy=False)
    return loss, np.exp(z - lse) - labels


def _xent_grad(op, g_loss, g_backprop=None):
    logits, labels = op.inputs
    if g_loss is None:
        return [None, None]
    axis = op.attrs["axis"]
    g = broadcast_reduced(g_loss, op.outputs[1], (axis,))
    g_logits = unbroadcast(g * op.outputs[1], logits)
    g_labels = unbroadcast(-g * log_softmax(logits, axis=axis), labels)
    return [g_logits, g_labels]


# labels of the v1 example: a constant (v1 gives labels no gradient), rows summing to 1
_V1_LABELS = np.linspace(0.1, 1.0, 30).reshape(2, 3, 5)
_V1_LABELS = _V1_LABELS / _V1_LABELS.sum(axis=-1, keepdims=True)


def _np_xent(labels, logits, axis=-1):
    logits = logits.astype(np.float64)
    lse = np.log(np.sum(np.exp(logits), axis=axis, keepdims=True))
    return -np.sum(labels * (logits - lse), axis=axis)


register("SoftmaxCrossEntropyWithLogits", infer=_xent_infer, ref=_xent_ref, grad=_xent_grad,
         kind="row", lower=_lower_row("xent"), lowerable=_row_lowerable,
         doc="Inputs (logits, labels); outputs the loss per row and its gradient "
             "softmax(logits) - labels (the `backprop` output).",
         examples=[Example(lambda lab, lg: softmax_cross_entropy_with_logits_v2(
                               labels=softmax(lab), logits=lg), [(3, 4), (3, 4)],
                           lambda lab, lg: _np_xent(_np_softmax(lab, -1), lg), id="v2"),
                   Example(lambda lab, lg: softmax_cross_entropy_with_logits_v2(
                               labels=softmax(lab, axis=0), logits=lg, axis=0), [(3, 4), (3, 4)],
                           lambda lab, lg: _np_xent(_np_softmax(lab, 0), lg, 0), id="axis0"),
                   Example(lambda lg: softmax_cross_entropy_with_logits(
                               labels=_V1_LABELS, logits=lg), [(2, 3, 5)],
                           lambda lg: _np_xent(_V1_LABELS, lg), id="v1_rank3")])


def _sparse_xent_infer(op):
    logits, labels = op.inputs
    check_dtype(op, logits, _FLOATS, "features")
    check_dtype(op, labels, ("int32", "int64"), "labels")
    lr, br = logits.shape.ndims, labels.shape.ndims
    if lr is not None and br is not None:
        if br != lr - 1:
            raise ValueError(f"Rank mismatch: Rank of labels (received {br}) should equal rank "
                             f"of logits minus 1 (received {lr}).")
        if not TensorShape(logits.shape.as_tuple()[:-1]).is_compatible_with(labels.shape):
            raise ValueError(f"Shapes {shape_tf_str(labels.shape)} and "
                             f"{shape_tf_str(logits.shape)} are incompatible for '{op.name}': "
                             f"labels must have the shape of logits without the last axis")
    loss = TensorShape(None) if lr is None else TensorShape(logits.shape.as_tuple()[:-1])
    if br is not None:
        loss = loss.merge_with(labels.shape)
    return [(logits.dtype, loss), (logits.dtype, logits.shape)]


def _sparse_xent_ref(op, logits, labels):
    logits, labels = np.asarray(logits), np.asarray(labels)
    _no_classes(logits, True)
    n = logits.shape[-1]
    bad = (labels < 0) | (labels >= n)
    if np.any(bad):
        v = labels[bad].flat[0]
        raise ValueError(f"Received a label value of {v} which is outside the valid range of "
                         f"[0, {n}).  Label values: {' '.join(map(str, labels.flat))}")
    z, lse = _np_shifted(logits, -1)
    picked = np.take_along_axis(z, labels[..., None].astype(np.intp), axis=-1)[..., 0]
    onehot = np.arange(n) == labels[..., None]
    return lse[..., 0] - picked, np.exp(z - lse) - onehot


def _sparse_xent_grad(op, g_loss, g_backprop=None):
    if g_loss is None:
        return [None, None]
    bp = op.outputs[1]
    rank = bp.shape.ndims
    return [broadcast_reduced(g_loss, bp, (-1,) if rank is None else (rank - 1,)) * bp, None]


_SPARSE_LABELS = np.array([0, 2, 1, 2], dtype=np.int32)


def _np_sparse_xent(logits, labels):
    logits = logits.astype(np.float64)
    lse = np.log(np.sum(np.exp(logits), axis=-1))
    return lse - np.take_along_axis(logits, labels[..., None], -1)[..., 0]


register("SparseSoftmaxCrossEntropyWithLogits", infer=_sparse_xent_infer, ref=_sparse_xent_ref,
         grad=_sparse_xent_grad, kind="row", lower=_lower_row("sparse_xent"),
         lowerable=_row_lowerable,
         doc="Inputs (logits, int labels); outputs the loss per row and softmax - onehot.",
         examples=[Example(lambda lg: sparse_softmax_cross_entropy_with_logits(
                               labels=_SPARSE_LABELS, logits=lg), [(4, 3)],
                           lambda lg: _np_sparse_xent(lg, _SPARSE_LABELS)),
                   Example(lambda lg: sparse_softmax_cross_entropy_with_logits(
                               labels=np.int64([[1, 0], [3, 2]]), logits=lg), [(2, 2, 4)],
                           lambda lg: _np_sparse_xent(lg, np.int64([[1, 0], [3, 2]])),
                           id="rank3")])


def softmax_cross_entropy_with_logits_v2(labels, logits, axis=None, name: Optional[str] = None,
                                         dim=None) -> Tensor:
    """`tf.nn.softmax_cross_entropy_with_logits_v2`: -sum(labels * log_softmax(logits)) along
    `axis`; differentiable with respect to both logits and labels. As in TF, the logits
    gradient is softmax(logits) - labels, exact when each row of labels sums to 1."""
    axis = _legacy(axis, dim, "axis", "dim")
    with name_scope(name, "softmax_cross_entropy_with_logits", [logits, labels]) as scope:
        logits = convert_to_tensor(logits, name="logits")
        labels = convert_to_tensor(labels, dtype=None if isinstance(labels, Tensor)
                                   else logits.dtype, name="labels")
        if labels.dtype != logits.dtype:
            labels = cast(labels, logits.dtype)  # TF casts the labels to the logits' dtype
        lr, br = logits.shape.ndims, labels.shape.ndims
        # same shapes (or ranks unknown when the graph is built): the op itself, along `axis`
        if lr is None or br is None or (lr == br
                                        and logits.shape.is_compatible_with(labels.shape)):
            (a,) = normalize_axis(logits, -1 if axis is None else axis, "softmax")
            op = make_op("SoftmaxCrossEntropyWithLogits", [logits, labels], {"axis": a},
                         name=scope)
            return op.outputs[0]
        return _xent_flattened(labels, logits, axis, scope)


def _xent_flattened(labels: Tensor, logits: Tensor, axis, scope: str) -> Tensor:
    """TF's rule for labels and logits of other shapes: both are flattened to
    [-1, classes] (classes along the last axis), the 2-D op broadcasts them, and the loss takes
    the shape of the logits without their last axis (labels [b, 1, c] with logits [b, c] run;
    an outer size that is neither equal nor 1 is an error)."""
    from jitflow.ops.array import reshape, shape as shape_of, strided_slice
    lr = logits.shape.ndims
    if axis is not None and axis != -1 and (lr is None or axis != lr - 1):
        raise ValueError(f"softmax_cross_entropy_with_logits: axis {axis} needs labels of the "
                         f"logits' shape {logits.shape}, got {labels.shape}")

    def flat(t: Tensor) -> Tensor:
        dims = t.shape.as_tuple()
        if dims is not None and len(dims) >= 1 and dims[-1] is not None:
            return reshape(t, [-1, dims[-1]])
        return reshape(t, stack_shape(t))

    def stack_shape(t: Tensor) -> Tensor:
        from jitflow.ops.array import concat
        last = strided_slice(shape_of(t), [-1], [0], [1], end_mask=1)
        return concat([np.array([-1], np.int32), last], 0)

    cost = make_op("SoftmaxCrossEntropyWithLogits", [flat(logits), flat(labels)],
                   {"axis": 1}, name="SoftmaxCrossEntropyWithLogits").outputs[0]
    dims = logits.shape.as_tuple()
    if dims is not None and sum(d is None for d in dims[:-1]) <= 1:
        return reshape(cost, [-1 if d is None else d for d in dims[:-1]], name=scope)
    out_shape = strided_slice(shape_of(logits), [0], [-1], [1], begin_mask=1)
    out = reshape(cost, out_shape, name=scope)
    if dims is not None:
        out.set_shape(dims[:-1])
    return out


def softmax_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None, dim=-1,
                                      name: Optional[str] = None, axis=None) -> Tensor:
    """`tf.nn.softmax_cross_entropy_with_logits` (TF1, deprecated form): as `_v2`, but no
    gradient flows into `labels`."""
    if _sentinel is not None:
        raise ValueError("Only call `softmax_cross_entropy_with_logits` with named arguments "
                         "(labels=..., logits=..., ...)")
    if labels is None or logits is None:
        raise ValueError("Both labels and logits must be provided.")
    axis = axis if axis is not None else dim
    with name_scope(name, "softmax_cross_entropy_with_logits_sg", [logits, labels]) as scope:
        logits = convert_to_tensor(logits, name="logits")
        labels = convert_to_tensor(labels, dtype=None if isinstance(labels, Tensor)
                                   else logits.dtype, name="labels")
        labels = stop_gradient(labels, name="labels_stop_gradient")
        return softmax_cross_entropy_with_logits_v2(labels, logits, axis=axis, name=scope)


def sparse_softmax_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None,
                                             name: Optional[str] = None) -> Tensor:
    """`tf.nn.sparse_softmax_cross_entropy_with_logits`: labels are class indices (int32 or
    int64) of rank one less than logits; an index outside [0, classes) is an
    InvalidArgumentError when the graph runs."""
    if _sentinel is not None:
        raise ValueError("Only call `sparse_softmax_cross_entropy_with_logits` with named "
                         "arguments (labels=..., logits=..., ...)")
    if labels is None or logits is None:
        raise ValueError("Both labels and logits must be provided.")
    with name_scope(name, "SparseSoftmaxCrossEntropyWithLogits", [labels, logits]) as scope:
        labels = convert_to_tensor(labels, name="labels")
        logits = convert_to_tensor(logits, name="logits")
        op = make_op("SparseSoftmaxCrossEntropyWithLogits", [logits, labels], name=scope)
        return op.outputs[0]


def sigmoid_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None,
                                      name: Optional[str] = None) -> Tensor:
    """`tf.nn.sigmoid_cross_entropy_with_logits`: max(x, 0) - x * z + log(1 + exp(-|x|)),
    the form that neither overflows nor loses precision for large |x|."""
    if _sentinel is not None:
        raise ValueError("Only call `sigmoid_cross_entropy_with_logits` with named arguments "
                         "(labels=..., logits=..., ...)")
    if labels is None or logits is None:
        raise ValueError("Both labels and logits must be provided.")
    with name_scope(name, "logistic_loss", [logits, labels]) as scope:
        logits = convert_to_tensor(logits, name="logits")
        labels = convert_to_tensor(labels, dtype=None if isinstance(labels, Tensor)
                                   else logits.dtype, name="labels")
        if labels.dtype != logits.dtype:
            raise TypeError(f"labels ({labels.dtype.name}) and logits ({logits.dtype.name}) "
                            "must have the same dtype")
        if not logits.shape.is_compatible_with(labels.shape):
            raise ValueError(f"logits and labels must have the same shape ({logits.shape} vs "
                             f"{labels.shape})")
        zero = scalar_like(0, logits)
        cond = greater_equal(logits, zero)
        relu_logits = where_v2(cond, logits, zero)
        neg_abs_logits = where_v2(cond, -logits, logits)
        return add(relu_logits - logits * labels, log1p(exp(neg_abs_logits)), name=scope)


# -- l2_loss, bias_add ----------------------------------------------------------------------------
def _l2_infer(op):
    x = op.inputs[0]
    check_dtype(op, x, _FLOATS, "t")
    return [(x.dtype, TensorShape([]))]


register("L2Loss", infer=_l2_infer,
         ref=lambda op, x: np.asarray(np.sum(np.square(x)) / 2, dtype=np.asarray(x).dtype),
         grad=lambda op, g: [op.inputs[0] * g], kind="reduce",
         lower=lambda low, op, pos: low.reduce(op, pos, "l2", None, False),
         lowerable=lambda op: op.inputs[0].shape.ndims is not None, inline=True,
         doc="sum(x ** 2) / 2 over all elements.",
         examples=[Example(lambda a: l2_loss(a), [(3, 4)], lambda a: np.sum(a * a) / 2)])


def l2_loss(t, name: Optional[str] = None) -> Tensor:
    """`tf.nn.l2_loss`: sum(t ** 2) / 2 (op `L2Loss`)."""
    x = convert_to_tensor(t, name="t")
    return make_op("L2Loss", [x], name=name or "L2Loss").outputs[0]


def _bias_add_infer(op):
    value, bias = op.inputs
    if value.dtype != bias.dtype:
        raise TypeError(f"Input 'bias' of 'BiasAdd' Op has type {bias.dtype.name} that does "
                        f"not match type {value.dtype.name} of argument 'value'.")
    check_dtype(op, value, _NUMERIC, "value")
    shapes = f"{shape_tf_str(value.shape)}, {shape_tf_str(bias.shape)}"
    if value.shape.ndims is not None and value.shape.ndims < 2:
        raise ValueError(f"Shape must be at least rank 2 but is rank {value.shape.ndims} for "
                         f"'{op.name}' (op: 'BiasAdd') with input shapes: {shapes}.")
    if bias.shape.ndims is not None and bias.shape.ndims != 1:
        raise ValueError(f"Shape must be rank 1 but is rank {bias.shape.ndims} for "
                         f"'{op.name}' (op: 'BiasAdd') with input shapes: {shapes}.")
    shape = value.shape
    if shape.ndims is not None and bias.shape.ndims is not None:
        c, b = shape.as_tuple()[-1], bias.shape.as_tuple()[0]
        if c is not None and b is not None and c != b:
            raise ValueError(f"Dimensions must be equal, but are {c} and {b} for '{op.name}' "
                             f"(op: 'BiasAdd') with input shapes: {shapes}.")
        shape = TensorShape(shape.as_tuple()[:-1] + (c if c is not None else b,))
    return [(value.dtype, shape)]


register("BiasAdd", infer=_bias_add_infer, ref=lambda op, v, b: np.add(v, b),
         grad=lambda op, g: [g, unbroadcast(g, op.inputs[1])], kind="elementwise",
         scalar="add", doc="value + bias along the last axis (NHWC).",
         examples=[Example(lambda v, b: bias_add(v, b), [(3, 4), (4,)], np.add,
                           ("float32", "float64", "int32")),
                   Example(lambda v, b: bias_add(v, b), [(2, 3, 2, 4), (4,)], np.add,
                           id="nhwc")])


def bias_add(value, bias, data_format=None, name: Optional[str] = None) -> Tensor:
    """`tf.nn.bias_add`: add a rank-1 `bias` along the last axis of `value` (NHWC)."""
    if data_format not in (None, "NHWC", "N...C"):
        raise ValueError(f"data_format {data_format!r} is not supported (only NHWC)")
    with name_scope(name, "BiasAdd", [value, bias]) as scope:
        value = convert_to_tensor(value, name="input")
        bias = convert_to_tensor(bias, dtype=None if isinstance(bias, Tensor) else value.dtype,
                                 name="bias")
        return make_op("BiasAdd", [value, bias], {"data_format": "NHWC"},
                       name=scope).outputs[0]


def xw_plus_b(x, weights, biases, name: Optional[str] = None) -> Tensor:
    """`tf.nn.xw_plus_b`: matmul(x, weights) + biases."""
    from jitflow.ops.linalg import matmul
    with name_scope(name, "xw_plus_b", [x, weights, biases]) as scope:
        x = convert_to_tensor(x, name="x")
        mm = matmul(x, weights)
        return bias_add(mm, biases, name=scope)


# -- moments, l2_normalize, dropout ---------------------------------------------------------------
def moments(x, axes, shift=None, name: Optional[str] = None, keep_dims=None,
            keepdims=None):
    """`tf.nn.moments`: (mean, variance) of `x` over `axes`."""
    keep = bool(_legacy(keepdims, keep_dims, "keepdims", "keep_dims"))
    with name_scope(name, "moments", [x, axes]):
        y = convert_to_tensor(x, name="x")
        axis = normalize_axis(y, axes, "moments")
        mean = reduce_mean(y, axes, keepdims=keep, name="mean")
        full = mean if keep else broadcast_reduced(mean, y, axis)
        variance = reduce_mean(squared_difference(y, stop_gradient(full)), axes,
                               keepdims=keep, name="variance")
        return mean, variance


def l2_normalize(x, axis=None, epsilon: float = 1e-12, name: Optional[str] = None,
                 dim=None) -> Tensor:
    """`tf.nn.l2_normalize`: x / sqrt(max(sum(x ** 2, axis), epsilon))."""
    axis = _legacy(axis, dim, "axis", "dim")
    with name_scope(name, "l2_normalize", [x]) as scope:
        x = convert_to_tensor(x, name="x")
        square_sum = reduce_sum(square(x), axis, keepdims=True)
        x_inv_norm = rsqrt(maximum(square_sum, scalar_like(epsilon, x)))
        return multiply(x, x_inv_norm, name=scope)


def dropout(x, keep_prob=None, noise_shape=None, seed=None, name: Optional[str] = None,
            rate=None) -> Tensor:
    """`tf.nn.dropout` (TF1): x / keep_prob * floor(keep_prob + U[0, 1)), so each element (or
    each slice along the `noise_shape` broadcast) is kept with probability keep_prob."""
    if keep_prob is not None and rate is not None:
        raise ValueError("Cannot specify both 'keep_prob' and 'rate'.")
    if keep_prob is None and rate is None:
        raise ValueError("Either 'keep_prob' or 'rate' must be given.")
    with name_scope(name, "dropout", [x]) as scope:
        x = convert_to_tensor(x, name="x")
        if not x.dtype.is_floating:
            raise ValueError(f"x has to be a floating point tensor since it's going to be "
                             f"scaled. Got a {x.dtype.name} tensor instead.")
        if keep_prob is None:
            if isinstance(rate, numbers.Real) and not 0 <= rate < 1:
                raise ValueError(f"rate must be a scalar tensor or a float in the range [0, 1), "
                                 f"got {rate:g}")
            keep = (1 - rate) if isinstance(rate, numbers.Real) else \
                scalar_like(1, x) - convert_to_tensor(rate, dtype=x.dtype, name="rate")
        else:
            if isinstance(keep_prob, numbers.Real) and not 0 < keep_prob <= 1:
                raise ValueError(f"keep_prob must be a scalar tensor or a float in the range "
                                 f"(0, 1], got {keep_prob:g}")
            keep = keep_prob
        if isinstance(keep, numbers.Real) and keep == 1:
            return x
        keep = convert_to_tensor(keep, dtype=x.dtype, name="keep_prob")
        if noise_shape is None:
            if x.shape.is_fully_defined():
                noise_shape = x.shape.as_list()
            else:
                from jitflow.ops.array import shape as _shape
                noise_shape = _shape(x)
        from jitflow.ops.random import random_uniform
        random_tensor = keep + random_uniform(noise_shape, seed=seed, dtype=x.dtype)
        binary = floor(random_tensor)
        out = multiply(x / keep, binary, name=scope)
        out.set_shape(x.shape)  # keep_prob may be a placeholder of unknown shape, as in TF1
        return out




def batch_normalization(x, mean, variance, offset, scale, variance_epsilon,
                        name: Optional[str] = None) -> Tensor:
    """`tf.nn.batch_normalization`: (x - mean) * scale / sqrt(variance + eps) + offset, with
    `offset` and `scale` optional (None)."""
    with name_scope(name, "batchnorm", [x, mean, variance, scale, offset]) as scope:
        x = convert_to_tensor(x, name="x")
        inv = rsqrt(variance + scalar_like(variance_epsilon, x))
        if scale is not None:
            inv = inv * scale
        shift = (offset - mean * inv) if offset is not None else -mean * inv
        return add(x * inv, shift, name=scope)


def weighted_cross_entropy_with_logits(labels=None, logits=None, pos_weight=None,
                                       name: Optional[str] = None, targets=None) -> Tensor:
    """`tf.nn.weighted_cross_entropy_with_logits`: sigmoid cross-entropy whose positive term
    is weighted by `pos_weight`, in the stable form
    (1 - z) * x + (1 + (q - 1) * z) * (log(1 + exp(-|x|)) + max(-x, 0))."""
    labels = _legacy(labels, targets, "labels", "targets")
    if labels is None or logits is None or pos_weight is None:
        raise ValueError("labels, logits and pos_weight must be given")
    with name_scope(name, "logistic_loss", [logits, labels]) as scope:
        logits = convert_to_tensor(logits, name="logits")
        labels = convert_to_tensor(labels, dtype=None if isinstance(labels, Tensor)
                                   else logits.dtype, name="targets")
        if not logits.shape.is_compatible_with(labels.shape):
            raise ValueError(f"logits and targets must have the same shape ({logits.shape} vs "
                             f"{labels.shape})")
        one = scalar_like(1, logits)
        log_weight = one + (pos_weight - one) * labels
        return add((one - labels) * logits,
                   log_weight * (log1p(exp(-abs(logits))) + relu(-logits)), name=scope)


def zero_fraction(value, name: Optional[str] = None) -> Tensor:
    """`tf.nn.zero_fraction`: the fraction of elements of `value` that are zero (float32)."""
    with name_scope(name, "zero_fraction", [value]) as scope:
        value = convert_to_tensor(value, name="value")
        zero = scalar_like(False if value.dtype.is_bool else 0, value)
        is_zero = cast(equal(value, zero), _dtypes.float32)
        return reduce_mean(is_zero, name=scope)


def _no_second_order(op):
    raise NotImplementedError(f"jitflow has no gradient for {op.type} (a second derivative "
                              f"through '{op.name}')")


# -- top_k, in_top_k, embedding_lookup ------------------------------------------------------------
def _top_k_infer(op):
    x = op.inputs[0]
    check_dtype(op, x, _NUMERIC, "input")
    k = op.attrs["k"]
    if x.shape.ndims == 0:
        raise ValueError(f"Shape must be at least rank 1 but is rank 0 for '{op.name}' "
                         f"(op: 'TopKV2')")
    if x.shape.ndims is None:
        return [(x.dtype, TensorShape(None)), (_dtypes.int32, TensorShape(None))]
    last = x.shape.as_tuple()[-1]
    if last is not None and last < k:
        raise ValueError(f"input must have at least k={k} columns, got {last} for "
                         f"'{op.name}' (op: 'TopKV2')")
    shape = TensorShape(x.shape.as_tuple()[:-1] + (k,))
    return [(x.dtype, shape), (_dtypes.int32, shape)]


def _top_k_ref(op, x):
    x = np.asarray(x)
    k = op.attrs["k"]
    if x.shape[-1] < k:
        raise ValueError(f"input must have at least k={k} columns, got {x.shape[-1]}")
    key = -x.astype(np.float64) if x.dtype.kind != "f" else -x
    idx = np.argsort(key, axis=-1, kind="stable")[..., :k]  # ties: the lower index first
    return np.take_along_axis(x, idx, axis=-1), idx.astype(np.int32)


def _top_k_grad(op, g_values, g_indices=None):
    if g_values is None:
        return [None]
    x, idx = op.inputs[0], op.outputs[1]
    return [make_op("TopKGrad", [g_values, idx, x], name="TopKGrad").outputs[0]]


def _top_k_grad_ref(op, g, idx, x):
    out = np.zeros(np.shape(x), dtype=np.asarray(g).dtype)
    np.put_along_axis(out, np.asarray(idx, dtype=np.intp), g, axis=-1)
    return out


register("TopKV2", infer=_top_k_infer, ref=_top_k_ref, grad=_top_k_grad, kind="row",
         doc="The k largest entries of each row (attr k) and their int32 indices; equal "
             "values keep their order.",
         examples=[Example(lambda a: top_k(a, 2)[0], [(3, 5)],
                           lambda a: -np.sort(-a, axis=-1)[:, :2], id="values"),
                   Example(lambda a: top_k(a, 3)[1], [(2, 6)],
                           lambda a: np.argsort(-a.astype(np.float64), -1,
                                                kind="stable")[:, :3],
                           ("float32", "int32"), grad=False, id="indices")])
register("TopKGrad", infer=lambda op: [(op.inputs[0].dtype, op.inputs[2].shape)],
         ref=_top_k_grad_ref, grad=lambda op, h: _no_second_order(op), kind="other",
         doc="Inputs (g, indices, x): zeros shaped like x with g placed at the indices along "
             "the last axis (the gradient of TopKV2).",
         examples=[Example(lambda g, x: make_op("TopKGrad", [g, top_k(x, 2)[1], x]).outputs[0],
                           [(2, 2), (2, 4)],
                           lambda g, x: _np_put_top2(g, x), grad=False)])


def _np_put_top2(g, x):
    out = np.zeros(x.shape)
    for i in range(x.shape[0]):
        order = sorted(range(x.shape[1]), key=lambda j: (-x[i, j], j))[:2]
        for slot, j in enumerate(order):
            out[i, j] = g[i, slot]
    return out


def top_k(input, k: int = 1, sorted: bool = True, name: Optional[str] = None):  # noqa: A002
    """`tf.nn.top_k`: (values, indices) of the `k` largest entries along the last axis."""
    if isinstance(k, Tensor):
        if k.op.type != "Const":
            raise NotImplementedError("top_k: k must be known when the graph is built")
        k = int(k.op.attrs["value"])
    if int(k) < 0:
        raise ValueError(f"Need k >= 0, got {k}")
    x = convert_to_tensor(input, name="input")
    op = make_op("TopKV2", [x], {"k": int(k), "sorted": bool(sorted)}, name=name or "TopKV2")
    return op.outputs[0], op.outputs[1]


def _in_top_k_infer(op):
    pred, targets = op.inputs
    check_dtype(op, pred, ("float32",), "predictions")
    check_dtype(op, targets, ("int32", "int64"), "targets")
    if pred.shape.ndims not in (None, 2):
        raise ValueError(f"Shape must be rank 2 but is rank {pred.shape.ndims} for "
                         f"'{op.name}' (op: 'InTopKV2')")
    if targets.shape.ndims not in (None, 1):
        raise ValueError(f"Shape must be rank 1 but is rank {targets.shape.ndims} for "
                         f"'{op.name}' (op: 'InTopKV2')")
    batch = pred.shape[0].value if pred.shape.ndims else None
    shape = TensorShape([batch]).merge_with(targets.shape) if targets.shape.ndims else \
        TensorShape([batch])
    return [(_dtypes.bool_, shape)]


def _in_top_k_ref(op, pred, targets):
    pred, targets = np.asarray(pred), np.asarray(targets)
    n = pred.shape[1]
    if np.any((targets < 0) | (targets >= n)):
        raise ValueError(f"targets must be in [0, {n}), got {targets.tolist()}")
    t = pred[np.arange(len(targets)), targets]
    better = np.sum(pred > t[:, None], axis=1)
    return np.isfinite(t) & (better < op.attrs["k"])


register("InTopKV2", infer=_in_top_k_infer, ref=_in_top_k_ref, differentiable=False,
         kind="row", doc="Whether each target's prediction is among the k largest of its row "
                         "(ties count in its favour; non-finite predictions never are).",
         examples=[Example(lambda p: in_top_k(p, _IN_TOP_K_TARGETS, 2), [(3, 4)],
                           lambda p: np.array([p[i, t] >= np.sort(p[i])[-2] for i, t in
                                               enumerate(_IN_TOP_K_TARGETS)]),
                           ("float32",), grad=False)])
_IN_TOP_K_TARGETS = np.array([0, 3, 1], dtype=np.int32)


def in_top_k(predictions, targets, k: int, name: Optional[str] = None) -> Tensor:
    """`tf.nn.in_top_k`: bool per row, true when predictions[i, targets[i]] is among the `k`
    largest of row i (the usual TF1 accuracy op)."""
    with name_scope(name, "in_top_k", [predictions, targets]) as scope:
        p = convert_to_tensor(predictions, name="predictions")
        t = convert_to_tensor(targets, name="targets")
        return make_op("InTopKV2", [p, t], {"k": int(k)}, name=scope).outputs[0]


def embedding_lookup(params, ids, partition_strategy: str = "mod", name: Optional[str] = None,
                     validate_indices: bool = True, max_norm=None) -> Tensor:
    """`tf.nn.embedding_lookup`: rows of `params` at `ids` (a gather on axis 0), rescaled to
    l2 norm at most `max_norm` when given. A list of params is one table split in shards by
    `partition_strategy` ("mod": id i is row i // n of shard i % n; "div": contiguous
    blocks, the first shards one row longer)."""
    from jitflow.ops.array import gather
    if isinstance(params, (list, tuple)):
        if not params:
            raise ValueError("Need at least one param")
        if partition_strategy not in ("mod", "div"):
            raise ValueError(f"Unrecognized partition strategy: {partition_strategy}")
        if len(params) == 1:
            params = params[0]
    with name_scope(name, "embedding_lookup", [params, ids]) as scope:
        if isinstance(params, (list, tuple)):
            rows = _sharded_lookup(list(params), ids, partition_strategy,
                                   None if max_norm is not None else scope)
        else:
            rows = gather(params, ids, name=None if max_norm is not None else scope)
        if max_norm is None:
            return rows
        from jitflow.ops.linalg import clip_by_norm
        r = rows.shape.ndims
        if r is None:
            raise ValueError("embedding_lookup with max_norm needs params of known rank")
        return clip_by_norm(rows, max_norm, axes=list(range(_ids_rank(ids), r)), name=scope)


def _sharded_lookup(params: list, ids, strategy: str, name) -> Tensor:
    """Rows of a table split in shards: each shard is gathered at the ids it owns (others
    clipped into range) and the rows selected by owner, so the lookup and its gradient stay
    dense gathers and selects that compile, without a partition/stitch on the host."""
    from jitflow.ops.array import expand_dims, gather, shape as shape_of
    from jitflow.ops.math.common import add_n
    ps = [convert_to_tensor(p, name="params") for p in params]
    ids = convert_to_tensor(ids, name="ids")
    n = len(ps)
    sizes = [p.shape.as_tuple()[0] if p.shape.ndims else None for p in ps]
    sizes = [scalar_like(s, ids) if s is not None else cast(shape_of(p)[0], ids.dtype)
             for s, p in zip(sizes, ps)]
    one = scalar_like(1, ids)
    if strategy == "mod":
        owner = ids % scalar_like(n, ids)
        local = ids // scalar_like(n, ids)
    else:
        total = add_n(sizes) if n > 1 else sizes[0]
        per = total // scalar_like(n, ids)
        extras = total % scalar_like(n, ids)
        owner = maximum(ids // (per + one), (ids - extras) // per)
        first = cast(less(owner, extras), ids.dtype)
        local = first * (ids % (per + one)) + (one - first) * ((ids - extras) % per)
    rank = ps[0].shape.ndims
    if rank is None:
        raise ValueError("embedding_lookup over several shards needs params of known rank")
    out = None
    for i, (p, size) in enumerate(zip(ps, sizes)):
        safe = maximum(scalar_like(0, ids), minimum(local, size - one))
        rows = gather(p, safe)
        mine = equal(owner, scalar_like(i, ids))
        for _ in range(rank - 1):
            mine = expand_dims(mine, -1)
        out = where_v2(mine, rows, scalar_like(0, rows) if out is None else out,
                       name=name if i == n - 1 else None)
    return out


def _ids_rank(ids) -> int:
    """The rank of `ids` (a tensor or a Python/NumPy value)."""
    return ids.shape.ndims if isinstance(ids, Tensor) else np.ndim(ids)


# -- convolution and pooling (NHWC) ---------------------------------------------------------------
def _four(v, what: str) -> tuple:
    """A TF1 strides/ksize/dilations argument as 4 ints (an int or 2 ints mean H and W)."""
    v = [int(a) for a in ([v] if isinstance(v, (int, np.integer)) else v)]
    if len(v) == 1:
        v = [1, v[0], v[0], 1]
    elif len(v) == 2:
        v = [1, v[0], v[1], 1]
    if len(v) != 4 or v[0] != 1 or v[3] != 1:
        raise ValueError(f"{what} must be 1, 2 or 4 ints with 1 for the batch and channel "
                         f"dimensions (NHWC), got {v}")
    return tuple(v)


def _out_size(n, k, stride, dilation, padding):
    """(output size, padding before) of one spatial dimension, as TF computes them."""
    if n is None:
        return None, None
    ek = (k - 1) * dilation + 1
    if padding == "SAME":
        out = -(-n // stride)
        total = max((out - 1) * stride + ek - n, 0)
        return out, total // 2
    return max(-(-(n - ek + 1) // stride), 0), 0


def _padding(padding) -> str:
    p = padding.decode() if isinstance(padding, bytes) else str(padding)
    if p not in ("SAME", "VALID"):
        raise ValueError(f"padding must be 'SAME' or 'VALID', got {padding!r}")
    return p


def _window_shape(op, x_shape, kh, kw):
    """The NHW output dims of a window op with attrs strides, padding, dilations."""
    _, sh, sw, _ = op.attrs["strides"]
    _, dh, dw, _ = op.attrs.get("dilations", (1, 1, 1, 1))
    dims = x_shape.as_tuple() if x_shape.ndims is not None else (None,) * 4
    if op.attrs["padding"] == "VALID":
        for n, k, d in ((dims[1], kh, dh), (dims[2], kw, dw)):
            ek = None if k is None else (k - 1) * d + 1
            if n is not None and ek is not None and n < ek:
                raise ValueError(f"Negative dimension size caused by subtracting {ek} from {n} "
                                 f"for '{op.name}' (op: '{op.type}') with input shapes: "
                                 f"{shape_tf_str(x_shape)}.")
    oh, _ = _out_size(dims[1], kh, sh, dh, op.attrs["padding"])
    ow, _ = _out_size(dims[2], kw, sw, dw, op.attrs["padding"])
    return dims[0], oh, ow


def _padded(op, x, kh, kw, value=0.0):
    """x padded for SAME (with `value`), and the output size."""
    _, sh, sw, _ = op.attrs["strides"]
    _, dh, dw, _ = op.attrs.get("dilations", (1, 1, 1, 1))
    n, h, w, c = x.shape
    oh, ph = _out_size(h, kh, sh, dh, op.attrs["padding"])
    ow, pw = _out_size(w, kw, sw, dw, op.attrs["padding"])
    need_h = (oh - 1) * sh + (kh - 1) * dh + 1 if oh > 0 else 0
    need_w = (ow - 1) * sw + (kw - 1) * dw + 1 if ow > 0 else 0
    pad = ((0, 0), (ph, max(need_h - h - ph, 0)), (pw, max(need_w - w - pw, 0)), (0, 0))
    return np.pad(x, pad, constant_values=value), oh, ow, ph, pw


def _taps(op, kh, kw, oh, ow):
    """For each kernel tap (i, j): the strided slices of the padded input it reads."""
    _, sh, sw, _ = op.attrs["strides"]
    _, dh, dw, _ = op.attrs.get("dilations", (1, 1, 1, 1))
    for i in range(kh):
        for j in range(kw):
            yield i, j, (slice(None), slice(i * dh, i * dh + (oh - 1) * sh + 1, sh),
                         slice(j * dw, j * dw + (ow - 1) * sw + 1, sw), slice(None))


def _conv_infer(op):
    x, f = op.inputs
    if x.dtype != f.dtype:
        raise TypeError(f"Input 'filter' of 'Conv2D' Op has type {f.dtype.name} that does not "
                        f"match type {x.dtype.name} of argument 'input'.")
    check_dtype(op, x, _FLOATS, "input")
    for t, what in ((x, "input"), (f, "filter")):
        if t.shape.ndims not in (None, 4):
            raise ValueError(f"Shape must be rank 4 but is rank {t.shape.ndims} for "
                             f"'{op.name}' (op: 'Conv2D') ({what})")
    fd = f.shape.as_tuple() if f.shape.ndims is not None else (None,) * 4
    xd = x.shape.as_tuple() if x.shape.ndims is not None else (None,) * 4
    if xd[3] is not None and fd[2] is not None and xd[3] != fd[2]:
        raise ValueError(f"Dimensions must be equal, but are {xd[3]} and {fd[2]} for "
                         f"'{op.name}' (op: 'Conv2D') with input shapes: "
                         f"{shape_tf_str(x.shape)}, {shape_tf_str(f.shape)}.")
    if fd[0] is None or fd[1] is None:
        return [(x.dtype, TensorShape([xd[0], None, None, fd[3]]))]
    n, oh, ow = _window_shape(op, x.shape, fd[0], fd[1])
    return [(x.dtype, TensorShape([n, oh, ow, fd[3]]))]


def _im2col(op, xp, kh, kw, oh, ow):
    """Patches of the padded input: [n, oh, ow, kh * kw * c], taps in (i, j) order."""
    cols = np.stack([xp[sl] for _, _, sl in _taps(op, kh, kw, oh, ow)], axis=3)
    return cols.reshape(cols.shape[:3] + (-1,))


def _conv_ref(op, x, f):
    x, f = np.asarray(x), np.asarray(f)
    kh, kw, _, o = f.shape
    xp, oh, ow, _, _ = _padded(op, x, kh, kw)
    if oh == 0 or ow == 0:
        return np.zeros((x.shape[0], oh, ow, o), dtype=np.result_type(x, f))
    cols = _im2col(op, xp, kh, kw, oh, ow)
    return (cols.reshape(-1, cols.shape[-1]) @ f.reshape(-1, o)).reshape(cols.shape[:3] + (o,))


def _conv_input_grad_ref(op, x, f, g):
    x, f, g = np.asarray(x), np.asarray(f), np.asarray(g)
    kh, kw, c, o = f.shape
    xp, oh, ow, ph, pw = _padded(op, x, kh, kw)
    dxp = np.zeros_like(xp)
    if g.size:
        dcols = (g.reshape(-1, o) @ f.reshape(-1, o).T).reshape(g.shape[:3] + (kh, kw, c))
        for i, j, sl in _taps(op, kh, kw, oh, ow):
            dxp[sl] += dcols[:, :, :, i, j, :]
    return dxp[:, ph:ph + x.shape[1], pw:pw + x.shape[2], :]


def _conv_filter_grad_ref(op, x, f, g):
    x, f, g = np.asarray(x), np.asarray(f), np.asarray(g)
    kh, kw, c, o = f.shape
    xp, oh, ow, _, _ = _padded(op, x, kh, kw)
    if g.size == 0:
        return np.zeros_like(f)
    cols = _im2col(op, xp, kh, kw, oh, ow)
    df = cols.reshape(-1, cols.shape[-1]).T @ g.reshape(-1, o)
    return df.reshape(f.shape).astype(f.dtype, copy=False)


def _conv_grad(op, g):
    x, f = op.inputs
    attrs = dict(op.attrs)
    dx = make_op("Conv2DBackpropInput", [x, f, g], attrs, name="Conv2DBackpropInput")
    df = make_op("Conv2DBackpropFilter", [x, f, g], attrs, name="Conv2DBackpropFilter")
    return [dx.outputs[0], df.outputs[0]]


def _np_conv_direct(x, f, stride, padding):
    """An independent, loop-by-loop NHWC convolution for the examples."""
    n, h, w, c = x.shape
    kh, kw, _, o = f.shape
    if padding == "SAME":
        oh, ow = -(-h // stride), -(-w // stride)
        ph = max((oh - 1) * stride + kh - h, 0) // 2
        pw = max((ow - 1) * stride + kw - w, 0) // 2
    else:
        oh, ow, ph, pw = (h - kh) // stride + 1, (w - kw) // stride + 1, 0, 0
    out = np.zeros((n, oh, ow, o))
    for b in range(n):
        for y in range(oh):
            for z in range(ow):
                for i in range(kh):
                    for j in range(kw):
                        r, q = y * stride + i - ph, z * stride + j - pw
                        if 0 <= r < h and 0 <= q < w:
                            out[b, y, z] += x[b, r, q] @ f[i, j]
    return out


# -- lowering of window ops into the kernel IR --------------------------------------------------
# Each convolution and pooling op (and gradient) becomes one `ir.LibCall`: a call of a library
# routine (each backend has its window library) on stored operands, writing outputs the kernel
# allocates. Output sizes are symbolic dims ("window", n, k, stride, dilation, same) -- ceil(n /
# stride) for SAME, the number of whole windows for VALID -- so a new batch or image size
# reuses the same code; sizes the static shapes know are used as constants. The ops consuming
# the outputs (bias, activation) fuse into one loop over them as usual.
def _window_dim(n, k, stride: int, dilation: int, same: bool):
    """The symbolic output size of one spatial axis (n, k: dims)."""
    if n == 1 and k == 1 and stride == 1:
        return 1
    return ("window", n, k, stride, dilation, same)


def _win_stored(low, t, pos: int):
    v = low.stored(t, pos)
    if v.rank != 4:
        raise Unsupported("window op operands must be rank-4 arrays")
    return v


def _win_geometry(op) -> tuple:
    _, sh, sw, _ = op.attrs["strides"]
    _, dh, dw, _ = op.attrs.get("dilations", (1, 1, 1, 1))
    return int(sh), int(sw), int(dh), int(dw), op.attrs["padding"] == "SAME"


def _win_params(op) -> tuple:
    sh, sw, dh, dw, same = _win_geometry(op)
    return sh, sw, dh, dw, int(same)


def _win_out(low, op, ones: tuple, dims: tuple):
    t = op.outputs[0]
    ones, dims = low.refine(t, ones, dims)
    v = low.buf(t.dtype.name, ones, dims)
    low.set(t, v)
    return v


#: at least this many channels in and out for the Winograd routines (nnlib._WINO_MIN_CHANNELS)
WINOGRAD_MIN_CHANNELS = 16
#: 5x5 filters: at most this many channels summed (nnlib._WINO5_MAX_CHANNELS; the forward
#: sums the input channels, the input gradient the output channels)
WINOGRAD5_MAX_CHANNELS = 128


def winograd_candidate(op, filter_tensor) -> bool:
    """Whether a (non-depthwise) convolution's static attributes allow nnlib's Winograd path:
    a square 3x3 or 5x5 filter, unit strides and dilations, at least WINOGRAD_MIN_CHANNELS
    channels in and out. Such ops call the `_w` routines, which check again on the real arrays
    (batch size included) and otherwise run im2col; other ops call the plain routines, so their
    kernels never compile the Winograd code.

    JITFLOW_WINOGRAD: "1" (default; "fast" is the same) 3x3 filters on F(2,3), which rounds like
    im2col, and 5x5 filters on F(2,5) where at most WINOGRAD5_MAX_CHANNELS channels are summed
    (2.8x fewer products; float32 rounding up to ~15 ulps of the output's scale, within the
    differential fuzzer's tolerance, where im2col's is 2-7); "3x3" 3x3 filters only; "0" none.
    Kernels are cached by their source, so settings never share one."""
    mode = os.environ.get("JITFLOW_WINOGRAD", "1").strip().lower()
    if mode == "0":
        return False
    sizes = (3,) if mode == "3x3" else (3, 5)
    sh, sw, dh, dw, _ = _win_geometry(op)
    dims = filter_tensor.shape.as_list() if filter_tensor.shape.ndims == 4 else [None] * 4
    kh, kw, cin, cout = dims
    return (kh == kw and kh in sizes and (sh, sw, dh, dw) == (1, 1, 1, 1)
            and cin is not None and cout is not None
            and (kh == 3 or min(cin, cout) <= WINOGRAD5_MAX_CHANNELS)
            and min(cin, cout) >= WINOGRAD_MIN_CHANNELS)


def _lower_conv(low, op, pos: int) -> None:
    """Conv2D and DepthwiseConv2dNative: `conv2d` / `depthwise_conv2d` of the window library."""
    depthwise = op.type == "DepthwiseConv2dNative"
    x = _win_stored(low, op.inputs[0], pos)
    f = _win_stored(low, op.inputs[1], pos)
    if low.is_fed(op.outputs[0]):
        return
    sh, sw, dh, dw, same = _win_geometry(op)
    low.check_equal(x.dims[3], f.dims[2], pos, "input depth must equal the filter's "
                    "in_channels")
    oh = _window_dim(x.dims[1], f.dims[0], sh, dh, same)
    ow = _window_dim(x.dims[2], f.dims[1], sw, dw, same)
    if depthwise:
        ch = x.dims[3] if f.dims[3] == 1 else ("arith", "*", x.dims[3], f.dims[3])
    else:
        ch = f.dims[3]
    dims = (x.dims[0], oh, ow, ch)
    ones = (x.ones[0], oh == 1, ow == 1, ch == 1)
    out = _win_out(low, op, ones, dims)
    fn = "depthwise_conv2d" if depthwise else "conv2d"
    if not depthwise and winograd_candidate(op, op.inputs[1]):
        fn = "conv2d_w"
    low.emit(LibCall(fn, [x, f], [out], (sh, sw, dh, dw, int(same)), pos))


def _check_conv_grad_dims(low, op, x_dims, f, g, pos: int, depthwise: bool) -> None:
    """The output gradient must have the forward op's output shape (else the interpreter
    reports the error)."""
    sh, sw, dh, dw, same = _win_geometry(op)
    want = (x_dims[0], _window_dim(x_dims[1], f.dims[0], sh, dh, same),
            _window_dim(x_dims[2], f.dims[1], sw, dw, same),
            ("arith", "*", x_dims[3], f.dims[3]) if depthwise and f.dims[3] != 1
            else x_dims[3] if depthwise else f.dims[3])
    for a, b in zip(g.dims, want):
        low.check_equal(a, b, pos, "out_backprop does not have the convolution's output shape")
    low.check_equal(x_dims[3], f.dims[2], pos, "input depth must equal the filter's "
                    "in_channels")


def _lower_conv_input_grad(low, op, pos: int) -> None:
    """Inputs (x, filter, g): the gradient with respect to x (x gives only its shape)."""
    depthwise = op.type == "DepthwiseConv2dNativeBackpropInput"
    _, _, x_ones, x_dims, _ = low.expr(op.inputs[0], shape_only=True)
    f = _win_stored(low, op.inputs[1], pos)
    g = _win_stored(low, op.inputs[2], pos)
    if low.is_fed(op.outputs[0]):
        return
    if len(x_dims) != 4:
        raise Unsupported("window op operands must be rank-4 arrays")
    _check_conv_grad_dims(low, op, x_dims, f, g, pos, depthwise)
    out = _win_out(low, op, x_ones, x_dims)
    fn = "depthwise_input_grad" if depthwise else "conv2d_input_grad"
    if not depthwise and winograd_candidate(op, op.inputs[1]):
        fn = "conv2d_input_grad_w"
    low.emit(LibCall(fn, [f, g], [out], _win_params(op), pos))


def _lower_conv_filter_grad(low, op, pos: int) -> None:
    """Inputs (x, filter, g): the gradient with respect to the filter (its shape only)."""
    depthwise = op.type == "DepthwiseConv2dNativeBackpropFilter"
    x = _win_stored(low, op.inputs[0], pos)
    _, _, f_ones, f_dims, _ = low.expr(op.inputs[1], shape_only=True)
    g = _win_stored(low, op.inputs[2], pos)
    if low.is_fed(op.outputs[0]):
        return
    if len(f_dims) != 4:
        raise Unsupported("window op operands must be rank-4 arrays")
    fv = Value("buf", -1, x.dtype, f_ones, f_dims, "")
    _check_conv_grad_dims(low, op, x.dims, fv, g, pos, depthwise)
    out = _win_out(low, op, f_ones, f_dims)
    fn = "depthwise_filter_grad" if depthwise else "conv2d_filter_grad"
    if not depthwise and winograd_candidate(op, op.inputs[1]):
        fn = "conv2d_filter_grad_w"
    low.emit(LibCall(fn, [x, g], [out], _win_params(op), pos))


def _pool_geometry(op) -> tuple:
    _, kh, kw, _ = op.attrs["ksize"]
    _, sh, sw, _ = op.attrs["strides"]
    return int(kh), int(kw), int(sh), int(sw), op.attrs["padding"] == "SAME"


def _pool_dims(x_dims, op) -> tuple:
    kh, kw, sh, sw, same = _pool_geometry(op)
    k_h = 1 if kh == 1 else ("const", kh)
    k_w = 1 if kw == 1 else ("const", kw)
    return (x_dims[0], _window_dim(x_dims[1], k_h, sh, 1, same),
            _window_dim(x_dims[2], k_w, sw, 1, same), x_dims[3])


def _pool_params(op) -> tuple:
    kh, kw, sh, sw, same = _pool_geometry(op)
    return kh, kw, sh, sw, int(same)


def _lower_pool(low, op, pos: int) -> None:
    """MaxPool and AvgPool: `max_pool` / `avg_pool` of the window library."""
    x = _win_stored(low, op.inputs[0], pos)
    if low.is_fed(op.outputs[0]):
        return
    dims = _pool_dims(x.dims, op)
    out = _win_out(low, op, tuple(d == 1 for d in dims), dims)
    fn = "max_pool" if op.type == "MaxPool" else "avg_pool"
    low.emit(LibCall(fn, [x], [out], _pool_params(op), pos))


def _check_pool_grad(low, op, x_dims, g, pos: int) -> None:
    for a, b in zip(g.dims, _pool_dims(x_dims, op)):
        low.check_equal(a, b, pos, "the gradient does not have the pooling output's shape")


def _lower_max_pool_grad(low, op, pos: int) -> None:
    x = _win_stored(low, op.inputs[0], pos)
    y = _win_stored(low, op.inputs[1], pos)
    g = _win_stored(low, op.inputs[2], pos)
    if low.is_fed(op.outputs[0]):
        return
    _check_pool_grad(low, op, x.dims, g, pos)
    _check_pool_grad(low, op, x.dims, y, pos)
    out = _win_out(low, op, x.ones, x.dims)
    low.emit(LibCall("max_pool_grad", [x, y, g], [out], _pool_params(op), pos))


def _lower_avg_pool_grad(low, op, pos: int) -> None:
    _, _, x_ones, x_dims, _ = low.expr(op.inputs[0], shape_only=True)
    g = _win_stored(low, op.inputs[1], pos)
    if low.is_fed(op.outputs[0]):
        return
    if len(x_dims) != 4:
        raise Unsupported("window op operands must be rank-4 arrays")
    _check_pool_grad(low, op, x_dims, g, pos)
    out = _win_out(low, op, x_ones, x_dims)
    low.emit(LibCall("avg_pool_grad", [g], [out], _pool_params(op), pos))


def _window_lowerable(op) -> bool:
    """NHWC, SAME or VALID, rank-4 float operands."""
    return (op.attrs.get("data_format", "NHWC") in ("NHWC", None)
            and op.attrs.get("padding") in ("SAME", "VALID")
            and all(t.shape.ndims == 4 and t.dtype.name in ("float32", "float64")
                    for t in list(op.inputs) + list(op.outputs)))


register("Conv2D", infer=_conv_infer, ref=_conv_ref, grad=_conv_grad, kind="other",
         lower=_lower_conv, lowerable=_window_lowerable,
         doc="2-D convolution, NHWC input and HWIO filter; attrs strides, padding, dilations.",
         examples=[Example(lambda x, f: conv2d(x, f, [1, 1, 1, 1], "SAME"),
                           [(2, 5, 4, 3), (3, 2, 3, 2)],
                           lambda x, f: _np_conv_direct(x, f, 1, "SAME"), id="same"),
                   Example(lambda x, f: conv2d(x, f, [1, 2, 2, 1], "VALID"),
                           [(1, 5, 6, 2), (2, 3, 2, 3)],
                           lambda x, f: _np_conv_direct(x, f, 2, "VALID"), id="valid_s2"),
                   Example(lambda x, f: conv2d(x, f, 2, "SAME"), [(1, 5, 5, 1), (3, 3, 1, 2)],
                           lambda x, f: _np_conv_direct(x, f, 2, "SAME"), id="same_s2")])


def _np_vjp(fn, args, which: int, g):
    """g^T J for a function linear in args[which], J built column by column from `fn`."""
    base = [np.asarray(a, dtype=np.float64) for a in args]
    x = base[which]
    out = np.zeros(x.shape)
    for idx in np.ndindex(x.shape):
        unit = np.zeros(x.shape)
        unit[idx] = 1.0
        call = list(base)
        call[which] = unit
        out[idx] = np.sum(fn(*call) * g)
    return out


def _conv_backprop_example(which: int, stride: int, padding: str):
    def build(x, f, g):
        op_type = "Conv2DBackpropInput" if which == 0 else "Conv2DBackpropFilter"
        attrs = {"strides": (1, stride, stride, 1), "padding": padding,
                 "dilations": (1, 1, 1, 1), "data_format": "NHWC"}
        return make_op(op_type, [x, f, g], attrs).outputs[0]
    out_hw = (3, 2) if padding == "SAME" else (2, 1)
    return Example(build, [(1, 5, 4, 2), (2, 3, 2, 3), (1,) + out_hw + (3,)],
                   lambda x, f, g: _np_vjp(lambda a, b: _np_conv_direct(a, b, stride, padding),
                                           [x, f], which, g),
                   id=f"{padding.lower()}_s{stride}")


def _conv_input_grad_grad(op, h):
    """Conv2DBackpropInput is linear in the filter and in g."""
    x, f, g = op.inputs
    attrs = dict(op.attrs)
    return [None,
            make_op("Conv2DBackpropFilter", [h, f, g], attrs, name="Conv2DBackpropFilter"
                    ).outputs[0],
            make_op("Conv2D", [h, f], attrs, name="Conv2D").outputs[0]]


def _conv_filter_grad_grad(op, h):
    """Conv2DBackpropFilter is linear in the input and in g."""
    x, f, g = op.inputs
    attrs = dict(op.attrs)
    return [make_op("Conv2DBackpropInput", [x, h, g], attrs, name="Conv2DBackpropInput"
                    ).outputs[0],
            None,
            make_op("Conv2D", [x, h], attrs, name="Conv2D").outputs[0]]


for _t, _r, _w, _gg in (("Conv2DBackpropInput", _conv_input_grad_ref, 0, _conv_input_grad_grad),
                        ("Conv2DBackpropFilter", _conv_filter_grad_ref, 1,
                         _conv_filter_grad_grad)):
    register(_t, infer=(lambda op, w=_w: [(op.inputs[0].dtype, op.inputs[w].shape)]), ref=_r,
             grad=_gg, kind="other", shape_only=(_w,), lowerable=_window_lowerable,
             lower=_lower_conv_input_grad if _w == 0 else _lower_conv_filter_grad,
             doc="Inputs (input, filter, output gradient): the gradient of Conv2D with respect "
                 "to " + ("its input." if _w == 0 else "its filter."),
             examples=[_conv_backprop_example(_w, 2, "SAME"),
                       _conv_backprop_example(_w, 2, "VALID")])


def conv2d(input, filter=None, strides=None, padding=None, use_cudnn_on_gpu: bool = True,
           data_format: str = "NHWC", dilations=(1, 1, 1, 1), name: Optional[str] = None,
           filters=None) -> Tensor:
    """`tf.nn.conv2d`: NHWC input [batch, h, w, in], filter [kh, kw, in, out] (op `Conv2D`)."""
    filter = _legacy(filter, filters, "filter", "filters")
    if filter is None or strides is None or padding is None:
        raise ValueError("conv2d needs filter, strides and padding")
    if data_format == "NCHW":
        strides, dilations = _nchw_four(strides, "strides"), _nchw_four(dilations, "dilations")
    with name_scope(name, "Conv2D", [input, filter]) as scope:
        x = convert_to_tensor(input, name="input")
        f = convert_to_tensor(filter, dtype=None if isinstance(filter, Tensor) else x.dtype,
                              name="filter")
        x, back = _to_nhwc(x, data_format)
        attrs = {"strides": _four(strides, "strides"), "padding": _padding(padding),
                 "dilations": _four(dilations, "dilations"), "data_format": "NHWC"}
        if attrs["dilations"] != (1, 1, 1, 1) and attrs["strides"] != (1, 1, 1, 1):
            raise ValueError("conv2d: strides > 1 with dilations > 1 is not supported (as TF)")
        return back(make_op("Conv2D", [x, f], attrs, name=scope).outputs[0])


def _pool_infer(op):
    x = op.inputs[0]
    check_dtype(op, x, _FLOATS, "value")
    if x.shape.ndims not in (None, 4):
        raise ValueError(f"Shape must be rank 4 but is rank {x.shape.ndims} for '{op.name}' "
                         f"(op: '{op.type}')")
    _, kh, kw, _ = op.attrs["ksize"]
    n, oh, ow = _window_shape(op, x.shape, kh, kw)
    c = x.shape.as_tuple()[3] if x.shape.ndims is not None else None
    return [(x.dtype, TensorShape([n, oh, ow, c]))]


def _max_pool_ref(op, x):
    x = np.asarray(x)
    _, kh, kw, _ = op.attrs["ksize"]
    xp, oh, ow, _, _ = _padded(op, x, kh, kw, -np.inf)
    out = np.full((x.shape[0], oh, ow, x.shape[3]), -np.inf, dtype=x.dtype)
    for _, _, sl in _taps(op, kh, kw, oh, ow):
        np.maximum(out, xp[sl], out=out)
    return out


def _max_pool_grad_ref(op, x, y, g):
    """Each output's gradient goes to the first maximal element of its window."""
    x, y, g = np.asarray(x), np.asarray(y), np.asarray(g)
    _, kh, kw, _ = op.attrs["ksize"]
    xp, oh, ow, ph, pw = _padded(op, x, kh, kw, -np.inf)
    dxp = np.zeros(xp.shape, dtype=g.dtype)
    taken = np.zeros(y.shape, dtype=bool)
    for _, _, sl in _taps(op, kh, kw, oh, ow):
        hit = (xp[sl] == y) & ~taken
        dxp[sl] += np.where(hit, g, 0)
        taken |= hit
    return dxp[:, ph:ph + x.shape[1], pw:pw + x.shape[2], :]


def _avg_counts(op, x_shape, kh, kw):
    ones = np.ones((1,) + tuple(x_shape[1:3]) + (1,))
    op_pad, oh, ow, _, _ = _padded(op, ones, kh, kw)
    cnt = np.zeros((1, oh, ow, 1))
    for _, _, sl in _taps(op, kh, kw, oh, ow):
        cnt += op_pad[sl]
    return cnt


def _avg_pool_ref(op, x):
    """The mean over each window's elements inside the input (padding is not counted)."""
    x = np.asarray(x)
    _, kh, kw, _ = op.attrs["ksize"]
    xp, oh, ow, _, _ = _padded(op, x, kh, kw)
    total = np.zeros((x.shape[0], oh, ow, x.shape[3]), dtype=np.float64)
    for _, _, sl in _taps(op, kh, kw, oh, ow):
        total += xp[sl]
    return (total / _avg_counts(op, x.shape, kh, kw)).astype(x.dtype)


def _avg_pool_grad_ref(op, x, g):
    x, g = np.asarray(x), np.asarray(g)
    _, kh, kw, _ = op.attrs["ksize"]
    xp, oh, ow, ph, pw = _padded(op, x, kh, kw)
    share = g / _avg_counts(op, x.shape, kh, kw)
    dxp = np.zeros(xp.shape, dtype=np.float64)
    for _, _, sl in _taps(op, kh, kw, oh, ow):
        dxp[sl] += share
    return dxp[:, ph:ph + x.shape[1], pw:pw + x.shape[2], :].astype(g.dtype)


def _np_pool_direct(x, k, stride, padding, reduce):
    n, h, w, c = x.shape
    if padding == "SAME":
        oh, ow = -(-h // stride), -(-w // stride)
        ph = max((oh - 1) * stride + k - h, 0) // 2
        pw = max((ow - 1) * stride + k - w, 0) // 2
    else:
        oh, ow, ph, pw = (h - k) // stride + 1, (w - k) // stride + 1, 0, 0
    out = np.zeros((n, oh, ow, c))
    for y in range(oh):
        for z in range(ow):
            r0, q0 = y * stride - ph, z * stride - pw
            win = x[:, max(r0, 0):r0 + k, max(q0, 0):q0 + k, :]
            out[:, y, z, :] = reduce(win, axis=(1, 2))
    return out


register("MaxPool", infer=_pool_infer, ref=_max_pool_ref,
         grad=lambda op, g: [make_op("MaxPoolGrad", [op.inputs[0], op.outputs[0], g],
                                     dict(op.attrs), name="MaxPoolGrad").outputs[0]],
         kind="other", lower=_lower_pool, lowerable=_window_lowerable,
         doc="Max over windows (attrs ksize, strides, padding), NHWC.",
         examples=[Example(lambda x: max_pool(x, [1, 2, 2, 1], [1, 2, 2, 1], "VALID"),
                           [(2, 4, 5, 3)], lambda x: _np_pool_direct(x, 2, 2, "VALID", np.max),
                           id="valid"),
                   Example(lambda x: max_pool(x, 3, 2, "SAME"), [(1, 5, 4, 2)],
                           lambda x: _np_pool_direct(x, 3, 2, "SAME", np.max), id="same")])


def _np_max_pool_grad(x, g, k, stride):
    """VALID max pooling's gradient by looping over windows (first maximum wins)."""
    out = np.zeros(x.shape)
    for b in range(x.shape[0]):
        for c in range(x.shape[3]):
            for y in range(g.shape[1]):
                for z in range(g.shape[2]):
                    win = x[b, y * stride:y * stride + k, z * stride:z * stride + k, c]
                    i, j = np.unravel_index(np.argmax(win), win.shape)
                    out[b, y * stride + i, z * stride + j, c] += g[b, y, z, c]
    return out


register("MaxPoolGrad",
         infer=lambda op: [(op.inputs[2].dtype, op.inputs[0].shape)],
         ref=_max_pool_grad_ref, grad=lambda op, h: _no_second_order(op), kind="other",
         lower=_lower_max_pool_grad, lowerable=_window_lowerable,
         doc="Inputs (input, output, output gradient) of MaxPool: the input gradient.",
         examples=[Example(lambda x, g: make_op("MaxPoolGrad", [x, max_pool(x, 2, 1, "VALID"), g],
                                                dict(max_pool(x, 2, 1, "VALID").op.attrs)
                                                ).outputs[0],
                           [(1, 4, 3, 2), (1, 3, 2, 2)],
                           lambda x, g: _np_max_pool_grad(x, g, 2, 1), grad=False)])
register("AvgPool", infer=_pool_infer, ref=_avg_pool_ref,
         grad=lambda op, g: [make_op("AvgPoolGrad", [op.inputs[0], g], dict(op.attrs),
                                     name="AvgPoolGrad").outputs[0]],
         kind="other", lower=_lower_pool, lowerable=_window_lowerable,
         doc="Mean over windows, padding excluded (attrs ksize, strides, "
                           "padding), NHWC.",
         examples=[Example(lambda x: avg_pool(x, [1, 2, 2, 1], [1, 2, 2, 1], "VALID"),
                           [(2, 4, 5, 3)], lambda x: _np_pool_direct(x, 2, 2, "VALID", np.mean),
                           id="valid"),
                   Example(lambda x: avg_pool(x, 3, 2, "SAME"), [(1, 5, 4, 2)],
                           lambda x: _np_pool_direct(x, 3, 2, "SAME", np.mean), id="same")])
register("AvgPoolGrad", infer=lambda op: [(op.inputs[1].dtype, op.inputs[0].shape)],
         ref=_avg_pool_grad_ref, kind="other", lower=_lower_avg_pool_grad,
         lowerable=_window_lowerable, shape_only=(0,),
         grad=lambda op, h: [None, make_op("AvgPool", [h], dict(op.attrs),
                                           name="AvgPool").outputs[0]],
         doc="Inputs (input, output gradient) of AvgPool: the input gradient.",
         examples=[Example(lambda x, g: make_op("AvgPoolGrad", [x, g], dict(
                               avg_pool(x, 3, 2, "SAME").op.attrs)).outputs[0],
                           [(1, 5, 4, 2), (1, 3, 2, 2)],
                           lambda x, g: _np_vjp(lambda a: _np_pool_direct(a, 3, 2, "SAME",
                                                                          np.mean), [x], 0, g))])


def _pool(op_type, value, ksize, strides, padding, data_format, name, default):
    if data_format == "NCHW":
        ksize, strides = _nchw_four(ksize, "ksize"), _nchw_four(strides, "strides")
    with name_scope(name, default, [value]) as scope:
        x = convert_to_tensor(value, name="input")
        x, back = _to_nhwc(x, data_format)
        attrs = {"ksize": _four(ksize, "ksize"), "strides": _four(strides, "strides"),
                 "padding": _padding(padding), "data_format": "NHWC"}
        return back(make_op(op_type, [x], attrs, name=scope).outputs[0])


def max_pool(value, ksize, strides, padding, data_format: str = "NHWC",
             name: Optional[str] = None, input=None) -> Tensor:
    """`tf.nn.max_pool`: the maximum over each ksize window (op `MaxPool`)."""
    value = _legacy(value, input, "value", "input")
    return _pool("MaxPool", value, ksize, strides, padding, data_format, name, "MaxPool")


def avg_pool(value, ksize, strides, padding, data_format: str = "NHWC",
             name: Optional[str] = None, input=None) -> Tensor:
    """`tf.nn.avg_pool`: the mean over each ksize window, padding not counted (op `AvgPool`)."""
    value = _legacy(value, input, "value", "input")
    return _pool("AvgPool", value, ksize, strides, padding, data_format, name, "AvgPool")


# -- depthwise convolution ------------------------------------------------------------------------
def _depthwise_infer(op):
    x, f = op.inputs
    if x.dtype != f.dtype:
        raise TypeError(f"Input 'filter' of '{op.type}' Op has type {f.dtype.name} that does "
                        f"not match type {x.dtype.name} of argument 'input'.")
    check_dtype(op, x, _FLOATS, "input")
    for t, what in ((x, "input"), (f, "filter")):
        if t.shape.ndims not in (None, 4):
            raise ValueError(f"Shape must be rank 4 but is rank {t.shape.ndims} for "
                             f"'{op.name}' (op: '{op.type}') ({what})")
    fd = f.shape.as_tuple() if f.shape.ndims is not None else (None,) * 4
    xd = x.shape.as_tuple() if x.shape.ndims is not None else (None,) * 4
    if xd[3] is not None and fd[2] is not None and xd[3] != fd[2]:
        raise ValueError(f"Dimensions must be equal, but are {xd[3]} and {fd[2]} for "
                         f"'{op.name}' (op: '{op.type}') with input shapes: "
                         f"{shape_tf_str(x.shape)}, {shape_tf_str(f.shape)}.")
    c = xd[3] if xd[3] is not None else fd[2]
    out_c = None if c is None or fd[3] is None else c * fd[3]
    if fd[0] is None or fd[1] is None:
        return [(x.dtype, TensorShape([xd[0], None, None, out_c]))]
    n, oh, ow = _window_shape(op, x.shape, fd[0], fd[1])
    return [(x.dtype, TensorShape([n, oh, ow, out_c]))]


def _depthwise_cols(op, x, f):
    """Patches [n, oh, ow, kh * kw, c] of the padded input, and the padding geometry."""
    kh, kw, c, _ = f.shape
    xp, oh, ow, ph, pw = _padded(op, x, kh, kw)
    if oh == 0 or ow == 0:
        return np.zeros((x.shape[0], oh, ow, kh * kw, c), x.dtype), xp, oh, ow, ph, pw
    cols = _im2col(op, xp, kh, kw, oh, ow)
    return cols.reshape(cols.shape[:3] + (kh * kw, c)), xp, oh, ow, ph, pw


def _depthwise_ref(op, x, f):
    x, f = np.asarray(x), np.asarray(f)
    kh, kw, c, m = f.shape
    cols, *_ = _depthwise_cols(op, x, f)
    out = np.einsum("nyztc,tcq->nyzcq", cols, f.reshape(kh * kw, c, m))
    return out.reshape(out.shape[:3] + (c * m,)).astype(x.dtype, copy=False)


def _depthwise_input_grad_ref(op, x, f, g):
    x, f, g = np.asarray(x), np.asarray(f), np.asarray(g)
    kh, kw, c, m = f.shape
    xp, oh, ow, ph, pw = _padded(op, x, kh, kw)
    dxp = np.zeros_like(xp)
    if g.size:
        gq = g.reshape(g.shape[:3] + (c, m))
        dcols = np.einsum("nyzcq,tcq->nyztc", gq, f.reshape(kh * kw, c, m))
        dcols = dcols.reshape(g.shape[:3] + (kh, kw, c))
        for i, j, sl in _taps(op, kh, kw, oh, ow):
            dxp[sl] += dcols[:, :, :, i, j, :]
    return dxp[:, ph:ph + x.shape[1], pw:pw + x.shape[2], :]


def _depthwise_filter_grad_ref(op, x, f, g):
    x, f, g = np.asarray(x), np.asarray(f), np.asarray(g)
    kh, kw, c, m = f.shape
    cols, *_ = _depthwise_cols(op, x, f)
    if g.size == 0:
        return np.zeros_like(f)
    gq = g.reshape(g.shape[:3] + (c, m))
    df = np.einsum("nyztc,nyzcq->tcq", cols, gq)
    return df.reshape(f.shape).astype(f.dtype, copy=False)


def _depthwise_grad(op, g):
    x, f = op.inputs
    attrs = dict(op.attrs)
    dx = make_op("DepthwiseConv2dNativeBackpropInput", [x, f, g], attrs,
                 name="DepthwiseConv2dNativeBackpropInput")
    df = make_op("DepthwiseConv2dNativeBackpropFilter", [x, f, g], attrs,
                 name="DepthwiseConv2dNativeBackpropFilter")
    return [dx.outputs[0], df.outputs[0]]


def _np_depthwise_direct(x, f, stride, padding):
    """An independent loop-by-loop depthwise convolution for the examples."""
    c, m = f.shape[2], f.shape[3]
    outs = [_np_conv_direct(x[..., k:k + 1], f[:, :, k:k + 1, q:q + 1], stride, padding)
            for k in range(c) for q in range(m)]
    return np.concatenate(outs, axis=3)


def _depthwise_example(stride: int, padding: str, id_: str):
    return Example(lambda x, f: depthwise_conv2d(x, f, [1, stride, stride, 1], padding),
                   [(2, 5, 4, 3), (3, 2, 3, 2)],
                   lambda x, f: _np_depthwise_direct(x, f, stride, padding), id=id_)


def _depthwise_backprop_example(which: int, stride: int, padding: str):
    def build(x, f, g):
        op_type = ("DepthwiseConv2dNativeBackpropInput" if which == 0
                   else "DepthwiseConv2dNativeBackpropFilter")
        attrs = {"strides": (1, stride, stride, 1), "padding": padding,
                 "dilations": (1, 1, 1, 1), "data_format": "NHWC"}
        return make_op(op_type, [x, f, g], attrs).outputs[0]
    out_hw = tuple(_out_size(n, k, stride, 1, padding)[0] for n, k in ((5, 2), (4, 3)))
    return Example(build, [(1, 5, 4, 2), (2, 3, 2, 3), (1,) + out_hw + (6,)],
                   lambda x, f, g: _np_vjp(lambda a, b: _np_depthwise_direct(a, b, stride,
                                                                             padding),
                                           [x, f], which, g),
                   id=f"{padding.lower()}_s{stride}")


register("DepthwiseConv2dNative", infer=_depthwise_infer, ref=_depthwise_ref,
         grad=_depthwise_grad, kind="other", lower=_lower_conv, lowerable=_window_lowerable,
         doc="Depthwise 2-D convolution, NHWC input [n, h, w, c] and filter [kh, kw, c, mult]: "
             "output channel c * mult + q is input channel c convolved with filter[:, :, c, q].",
         examples=[_depthwise_example(1, "SAME", "same"),
                   _depthwise_example(2, "VALID", "valid_s2")])


def _depthwise_input_grad_grad(op, h):
    x, f, g = op.inputs
    attrs = dict(op.attrs)
    return [None,
            make_op("DepthwiseConv2dNativeBackpropFilter", [h, f, g], attrs,
                    name="DepthwiseConv2dNativeBackpropFilter").outputs[0],
            make_op("DepthwiseConv2dNative", [h, f], attrs,
                    name="DepthwiseConv2dNative").outputs[0]]


def _depthwise_filter_grad_grad(op, h):
    x, f, g = op.inputs
    attrs = dict(op.attrs)
    return [make_op("DepthwiseConv2dNativeBackpropInput", [x, h, g], attrs,
                    name="DepthwiseConv2dNativeBackpropInput").outputs[0],
            None,
            make_op("DepthwiseConv2dNative", [x, h], attrs,
                    name="DepthwiseConv2dNative").outputs[0]]


for _t, _r, _w, _gg in (("DepthwiseConv2dNativeBackpropInput", _depthwise_input_grad_ref, 0,
                         _depthwise_input_grad_grad),
                        ("DepthwiseConv2dNativeBackpropFilter", _depthwise_filter_grad_ref, 1,
                         _depthwise_filter_grad_grad)):
    register(_t, infer=(lambda op, w=_w: [(op.inputs[0].dtype, op.inputs[w].shape)]), ref=_r,
             grad=_gg, kind="other", shape_only=(_w,), lowerable=_window_lowerable,
             lower=_lower_conv_input_grad if _w == 0 else _lower_conv_filter_grad,
             doc="Inputs (input, filter, output gradient): the gradient of "
                 "DepthwiseConv2dNative with respect to "
                 + ("its input." if _w == 0 else "its filter."),
             examples=[_depthwise_backprop_example(_w, 2, "SAME"),
                       _depthwise_backprop_example(_w, 1, "VALID")])


def depthwise_conv2d(input, filter, strides, padding, rate=None, name: Optional[str] = None,
                     data_format: Optional[str] = None, dilations=None) -> Tensor:
    """`tf.nn.depthwise_conv2d`: each input channel convolved with its own `mult` filters
    (filter [kh, kw, in, mult], output channels in * mult; op `DepthwiseConv2dNative`)."""
    rate = dilations if rate is None else rate
    with name_scope(name, "depthwise", [input, filter]) as scope:
        x = convert_to_tensor(input, name="input")
        f = convert_to_tensor(filter, dtype=None if isinstance(filter, Tensor) else x.dtype,
                              name="filter")
        x, back = _to_nhwc(x, data_format)
        dil = (1, 1, 1, 1) if rate is None else _four(rate, "rate")
        attrs = {"strides": _four(strides, "strides"), "padding": _padding(padding),
                 "dilations": dil, "data_format": "NHWC"}
        if dil != (1, 1, 1, 1) and attrs["strides"] != (1, 1, 1, 1):
            raise ValueError("depthwise_conv2d: strides > 1 with rate > 1 is not supported "
                             "(as TF)")
        if (dil != (1, 1, 1, 1) and attrs["padding"] == "SAME"
                and not f.shape.is_fully_defined()):
            # TF pads a dilated SAME convolution by the filter's static size, and raises
            # ValueError at graph construction where that size is unknown
            raise ValueError(f"depthwise_conv2d with rate {list(dil[1:3])} and SAME padding "
                             f"needs the filter's full static shape; filter {f.name} has shape "
                             f"{f.shape}")
        return back(make_op("DepthwiseConv2dNative", [x, f], attrs, name=scope).outputs[0])


def separable_conv2d(input, depthwise_filter, pointwise_filter, strides, padding, rate=None,
                     name: Optional[str] = None, data_format: Optional[str] = None,
                     dilations=None) -> Tensor:
    """`tf.nn.separable_conv2d`: a depthwise convolution, then a 1x1 convolution mixing the
    channels (pointwise filter [1, 1, in * mult, out])."""
    with name_scope(name, "separable_conv2d", [input, depthwise_filter, pointwise_filter]):
        x = convert_to_tensor(input, name="input")
        x, back = _to_nhwc(x, data_format)
        dw = depthwise_conv2d(x, depthwise_filter, strides, padding, rate=rate,
                              dilations=dilations, name="depthwise")
        return back(conv2d(dw, pointwise_filter, [1, 1, 1, 1], "VALID", name="pointwise"))


def _to_nhwc(x: Tensor, data_format: Optional[str]):
    """(x as NHWC, a function taking an NHWC result back to `data_format`): NCHW is computed
    by transposing around the NHWC op (the transposes compile into the kernels' indexing)."""
    fmt = data_format.decode() if isinstance(data_format, bytes) else data_format
    if fmt in (None, "NHWC"):
        return x, lambda t: t
    if fmt != "NCHW":
        raise ValueError(f"data_format must be 'NHWC' or 'NCHW', got {data_format!r}")
    from jitflow.ops.array import transpose
    return (transpose(x, [0, 2, 3, 1], name="to_NHWC"),
            lambda t: transpose(t, [0, 3, 1, 2], name="to_NCHW"))


def _nchw_four(v, what: str) -> tuple:
    """An NCHW strides/ksize argument (4 ints [1, 1, h, w]) as NHWC."""
    if isinstance(v, (int, np.integer)) or len(v) != 4:
        return v
    v = [int(a) for a in v]
    if v[0] != 1 or v[1] != 1:
        raise ValueError(f"{what} must have 1 for the batch and channel dimensions (NCHW), "
                         f"got {v}")
    return [1, v[2], v[3], 1]


def depthwise_conv2d_native(input, filter, strides, padding, data_format: str = "NHWC",
                            dilations=(1, 1, 1, 1), name: Optional[str] = None) -> Tensor:
    """`tf.nn.depthwise_conv2d_native`: the op itself, with TF's argument order."""
    return depthwise_conv2d(input, filter, strides, padding, name=name,
                            data_format=data_format, dilations=dilations)
