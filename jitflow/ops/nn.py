"""`tf.nn`: activations, softmax and cross-entropy, bias_add, moments, dropout, l2 ops.

Activations are elementwise ops with templates. Softmax, LogSoftmax and the two softmax
cross-entropy ops have kind "row": each output element depends on one whole row (the slice
along attr `axis`, normally the last), so a code generator emits one loop nest per row (max,
sum of exps, then the outputs). Their references subtract the row maximum, so large logits
give no overflow.
"""
from __future__ import annotations

import numbers
from typing import Optional

import numpy as np

from jitflow import dtypes as _dtypes
from jitflow.graph import Tensor, convert_to_tensor, make_op, name_scope
from jitflow.ops.math import (
    _FLOATS, _NUMERIC, _typed, abs, add, broadcast_reduced, cast, check_dtype, equal, exp, floor,
    greater, greater_equal, less, log1p, logical_and, maximum, multiply, rsqrt, scalar_like, square,
    squared_difference, stop_gradient, unary_infer, unbroadcast, where_v2,
)
from jitflow.ops.reduce import _legacy, normalize_axis, reduce_mean, reduce_sum
from jitflow.ops.registry import Example, register
from jitflow.shapes import TensorShape, broadcast_static, shape_tf_str

__all__ = ["l2_loss"]

NAMESPACES = {
    "nn": ["relu", "relu6", "leaky_relu", "elu", "selu", "softsign", "softmax", "log_softmax",
           "softmax_cross_entropy_with_logits", "softmax_cross_entropy_with_logits_v2",
           "sparse_softmax_cross_entropy_with_logits", "sigmoid_cross_entropy_with_logits",
           "l2_loss", "bias_add", "moments", "dropout", "l2_normalize", "xw_plus_b",
           "batch_normalization", "weighted_cross_entropy_with_logits", "zero_fraction"],
    "math": ["l2_normalize", "softsign", "softmax", "log_softmax"],
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
def _relu_grad(op, g):
    # g * (x > 0), as TF's ReluGrad: a nan in g stays nan even where x <= 0
    x = op.inputs[0]
    return [g * cast(greater(x, scalar_like(0, x)), g.dtype)]


def _relu6_grad(op, g):
    x = op.inputs[0]
    inside = logical_and(greater(x, scalar_like(0, x)), less(x, scalar_like(6, x)))
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


def _leaky_template(op) -> str:
    alpha = repr(float(op.attrs["alpha"]))
    return "({0} if {0} > 0 else " + _typed(alpha) + " * {0})"


_SCALE, _SA = _typed(repr(_SELU_SCALE)), _typed(repr(_SELU_SCALE * _SELU_ALPHA))
register("Relu", infer=_act_infer(_NUMERIC), ref=lambda op, x: np.maximum(x, 0).astype(x.dtype),
         grad=_relu_grad, kind="elementwise", template="np.maximum({0}, " + _typed("0") + ")",
         examples=_act_example(lambda a: relu(a), lambda a: np.maximum(a, 0),
                               ("float32", "float64", "int32")))
register("Relu6", infer=_act_infer(_NUMERIC),
         ref=lambda op, x: np.minimum(np.maximum(x, 0), 6).astype(x.dtype), grad=_relu6_grad,
         kind="elementwise",
         template="np.minimum(np.maximum({0}, " + _typed("0") + "), " + _typed("6") + ")",
         examples=[Example(lambda a: relu6(a * 4.0), [(2, 5)],
                           lambda a: np.clip(a * 4.0, 0, 6), domain=(0.1, 1.4), id="range"),
                   Example(lambda a: relu6(a), [(2, 5)], lambda a: np.clip(a, 0, 6),
                           ("int32",), "int", grad=False, id="int")])
register("LeakyRelu", infer=_act_infer(_FLOATS),
         ref=lambda op, x: np.where(x > 0, x, x * op.attrs["alpha"]).astype(x.dtype),
         grad=_leaky_grad, kind="elementwise", template=_leaky_template,
         examples=_act_example(lambda a: leaky_relu(a), lambda a: np.where(a > 0, a, 0.2 * a))
         + [Example(lambda a: leaky_relu(a, alpha=0.5), [(3,)],
                    lambda a: np.where(a > 0, a, 0.5 * a), domain="nonzero", id="alpha")])
register("Elu", infer=_act_infer(_FLOATS),
         ref=lambda op, x: np.where(x > 0, x, np.expm1(np.minimum(x, 0))).astype(x.dtype),
         grad=_elu_grad, kind="elementwise",
         template="({0} if {0} > 0 else math.expm1({0}))",
         examples=_act_example(lambda a: elu(a), lambda a: np.where(a > 0, a, np.exp(a) - 1)))
register("Selu", infer=_act_infer(_FLOATS),
         ref=lambda op, x: np.where(x > 0, _SELU_SCALE * x, _SELU_SCALE * _SELU_ALPHA
                                    * np.expm1(np.minimum(x, 0))).astype(x.dtype),
         grad=_selu_grad, kind="elementwise",
         template=f"({_SCALE} * {{0}} if {{0}} > 0 else {_SA} * math.expm1({{0}}))",
         examples=_act_example(lambda a: selu(a), lambda a: np.where(
             a > 0, 1.0507009873554805 * a, 1.0507009873554805 * 1.6732632423543772
             * (np.exp(a) - 1))))
register("Softsign", infer=_act_infer(_FLOATS), ref=lambda op, x: x / (1 + np.abs(x)),
         grad=_softsign_grad, kind="elementwise",
         template="({0} / (" + _typed("1") + " + abs({0})))",
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


# -- softmax and log-softmax ---------------------------------------------------------------------
def _np_log_softmax(x, axis):
    x = np.asarray(x)
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    z = x - m
    return z - np.log(np.sum(np.exp(z), axis=axis, keepdims=True))


def _np_softmax(x, axis):
    x = np.asarray(x)
    m = np.max(x, axis=axis, keepdims=True)
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


register("Softmax", infer=_row_infer, ref=lambda op, x: _np_softmax(x, op.attrs["axis"]),
         grad=_softmax_grad, kind="row", doc="exp(x) / sum(exp(x)) along attr axis.",
         examples=_row_examples(lambda a, **k: softmax(a, **k),
                                lambda a, ax: np.exp(a) / np.exp(a).sum(ax, keepdims=True)))
register("LogSoftmax", infer=_row_infer,
         ref=lambda op, x: _np_log_softmax(x, op.attrs["axis"]), grad=_log_softmax_grad,
         kind="row", doc="x - log(sum(exp(x))) along attr axis.",
         examples=_row_examples(lambda a, **k: log_softmax(a, **k),
                                lambda a, ax: a - np.log(np.exp(a).sum(ax, keepdims=True))))


def _row_op(op_type, logits, axis, name, dim):
    axis = _legacy(axis, dim, "axis", "dim")
    with name_scope(name, op_type, [logits]) as scope:
        x = convert_to_tensor(logits, name="logits")
        (a,) = normalize_axis(x, -1 if axis is None else axis, "softmax")
        return make_op(op_type, [x], {"axis": a}, name=scope).outputs[0]


def softmax(logits, axis=None, name: Optional[str] = None, dim=None) -> Tensor:
    """`tf.nn.softmax` along `axis` (default the last; legacy `dim`) (op `Softmax`)."""
    return _row_op("Softmax", logits, axis, name, dim)


def log_softmax(logits, axis=None, name: Optional[str] = None, dim=None) -> Tensor:
    """`tf.nn.log_softmax` along `axis` (default the last; legacy `dim`) (op `LogSoftmax`)."""
    return _row_op("LogSoftmax", logits, axis, name, dim)


# -- cross entropy -------------------------------------------------------------------------------
def _xent_infer(op):
    logits, labels = op.inputs
    check_dtype(op, logits, _FLOATS, "features")
    if labels.dtype != logits.dtype:
        raise TypeError(f"Input 'labels' of '{op.type}' Op has type {labels.dtype.name} that "
                        f"does not match type {logits.dtype.name} of argument 'features'.")
    shape = broadcast_static(logits.shape, labels.shape, f" for '{op.name}' (op: '{op.type}')")
    if shape.ndims is not None and shape.ndims != logits.shape.ndims:
        raise ValueError(f"labels of shape {labels.shape} must not have a higher rank than "
                         f"logits of shape {logits.shape} for '{op.name}'")
    axis = op.attrs["axis"]
    loss = TensorShape(None) if shape.ndims is None else TensorShape(
        [d for i, d in enumerate(shape.as_tuple()) if i != axis])
    return [(logits.dtype, loss), (logits.dtype, shape)]


def _xent_ref(op, logits, labels):
    axis = op.attrs["axis"]
    lsm = _np_log_softmax(logits, axis)
    loss = -np.sum(labels * lsm, axis=axis)
    return loss, np.exp(lsm) - labels


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
         kind="row",
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
    n = logits.shape[-1]
    bad = (labels < 0) | (labels >= n)
    if np.any(bad):
        v = labels[bad].flat[0]
        raise ValueError(f"Received a label value of {v} which is outside the valid range of "
                         f"[0, {n}).  Label values: {' '.join(map(str, labels.flat))}")
    lsm = _np_log_softmax(logits, -1)
    picked = np.take_along_axis(lsm, labels[..., None].astype(np.intp), axis=-1)[..., 0]
    onehot = np.arange(n) == labels[..., None]
    return -picked, np.exp(lsm) - onehot


def _sparse_xent_grad(op, g_loss, g_backprop=None):
    if g_loss is None:
        return [None, None]
    bp = op.outputs[1]
    rank = bp.shape.ndims
    if rank is None:
        raise ValueError("the gradient of SparseSoftmaxCrossEntropyWithLogits needs logits "
                         "of known rank")
    return [broadcast_reduced(g_loss, bp, (rank - 1,)) * bp, None]


_SPARSE_LABELS = np.array([0, 2, 1, 2], dtype=np.int32)


def _np_sparse_xent(logits, labels):
    logits = logits.astype(np.float64)
    lse = np.log(np.sum(np.exp(logits), axis=-1))
    return lse - np.take_along_axis(logits, labels[..., None], -1)[..., 0]


register("SparseSoftmaxCrossEntropyWithLogits", infer=_sparse_xent_infer, ref=_sparse_xent_ref,
         grad=_sparse_xent_grad, kind="row",
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
        (a,) = normalize_axis(logits, -1 if axis is None else axis, "softmax")
        op = make_op("SoftmaxCrossEntropyWithLogits", [logits, labels], {"axis": a},
                     name=scope)
        return op.outputs[0]


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


# -- l2_loss, bias_add -----------------------------------------------------------------------------
def _l2_infer(op):
    x = op.inputs[0]
    check_dtype(op, x, _FLOATS, "t")
    return [(x.dtype, TensorShape([]))]


register("L2Loss", infer=_l2_infer,
         ref=lambda op, x: np.asarray(np.sum(np.square(x)) / 2, dtype=np.asarray(x).dtype),
         grad=lambda op, g: [op.inputs[0] * g], kind="reduce",
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
         template="({0} + {1})", doc="value + bias along the last axis (NHWC).",
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


# -- moments, l2_normalize, dropout --------------------------------------------------------------
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
        return multiply(x / keep, binary, name=scope)




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
