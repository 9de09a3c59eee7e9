"""`tf.losses`: TF1's loss functions, composed from math and nn ops.

Each loss is reduced by `compute_weighted_loss` (default `Reduction.SUM_BY_NONZERO_WEIGHTS`:
the weighted sum divided by the number of non-zero weights, which for weights=1.0 is the mean)
and added to the `LOSSES` collection. As in TF1, the regression losses convert their inputs to
float32 and the weighting is computed in float32, then cast back to the input's dtype.
"""
from __future__ import annotations


import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.core.graph import GraphKeys, Tensor, convert_to_tensor, get_default_graph, name_scope
from jitflow.ops.math.arithmetic import div_no_nan, multiply, subtract
from jitflow.ops.math.casting import cast
from jitflow.ops.math.common import add_n, broadcast_like, scalar_like, stop_gradient
from jitflow.ops.math.compare import equal, minimum, squared_difference, where_v2
from jitflow.ops.math.unary import abs, log
from jitflow.ops.nn.activations import relu
from jitflow.ops.nn.softmax_xent import (
    sigmoid_cross_entropy_with_logits, softmax_cross_entropy_with_logits_v2,
    sparse_softmax_cross_entropy_with_logits,
)
from jitflow.ops.reduce import _legacy, reduce_sum

__all__: list = []

NAMESPACES = {"losses": [
    "Reduction", "compute_weighted_loss", "absolute_difference", "mean_squared_error",
    "log_loss", "huber_loss", "sigmoid_cross_entropy", "softmax_cross_entropy",
    "sparse_softmax_cross_entropy", "hinge_loss", "cosine_distance", "add_loss", "get_losses",
    "get_regularization_losses",
    "get_regularization_loss", "get_total_loss",
]}


class Reduction:
    """How `compute_weighted_loss` reduces the weighted losses (TF1's names and values)."""

    NONE = "none"
    SUM = "weighted_sum"
    SUM_OVER_BATCH_SIZE = "weighted_sum_over_batch_size"
    MEAN = "weighted_mean"
    SUM_BY_NONZERO_WEIGHTS = "weighted_sum_by_nonzero_weights"
    SUM_OVER_NONZERO_WEIGHTS = SUM_BY_NONZERO_WEIGHTS

    @classmethod
    def all(cls) -> tuple:
        return (cls.NONE, cls.SUM, cls.MEAN, cls.SUM_OVER_BATCH_SIZE,
                cls.SUM_OVER_NONZERO_WEIGHTS, cls.SUM_BY_NONZERO_WEIGHTS)

    @classmethod
    def validate(cls, key) -> None:
        if key not in cls.all():
            raise ValueError(f"Invalid Reduction Key {key}.")


def _num_elements(losses: Tensor) -> Tensor:
    n = losses.shape.num_elements()
    if n is not None:
        return scalar_like(n, losses)
    from jitflow.ops.shape_ops import size
    return cast(size(losses), losses.dtype)


def _num_present(losses: Tensor, weights) -> Tensor:
    """The number of loss elements whose (broadcast) weight is not zero."""
    if isinstance(weights, (int, float)) and not isinstance(weights, bool) and weights != 0:
        return _num_elements(losses)
    with name_scope(None, "num_present", [losses, weights]) as scope:
        w = cast(convert_to_tensor(weights, name="weights"), _dtypes.float32)
        present = where_v2(equal(w, scalar_like(0, w)), scalar_like(0, w), scalar_like(1, w))
        present = broadcast_like(present, losses * w)
        return reduce_sum(present, name=scope)


def compute_weighted_loss(losses, weights=1.0, scope=None,
                          loss_collection=GraphKeys.LOSSES,
                          reduction=Reduction.SUM_BY_NONZERO_WEIGHTS) -> Tensor:
    """`tf.losses.compute_weighted_loss`: weight `losses`, reduce them, add to the collection.

    `weights` must broadcast to the shape of `losses` (a scalar, or a tensor of the same rank
    with some dimensions 1)."""
    Reduction.validate(reduction)
    with name_scope(scope, "weighted_loss", [losses, weights]):
        losses = convert_to_tensor(losses, name="losses")
        input_dtype = losses.dtype
        losses = cast(losses, _dtypes.float32)
        w = cast(convert_to_tensor(weights, dtype=None if isinstance(weights, Tensor)
                                   else _dtypes.float32, name="weights"), _dtypes.float32)
        if w.shape.ndims is not None and losses.shape.ndims is not None \
                and w.shape.ndims > losses.shape.ndims:
            raise ValueError(f"weights of shape {w.shape} can not be broadcast to losses of "
                             f"shape {losses.shape}")
        weighted = multiply(losses, w)
        if losses.shape.ndims is not None and weighted.shape.ndims is not None \
                and not weighted.shape.is_compatible_with(losses.shape):
            raise ValueError(f"weights of shape {w.shape} can not be broadcast to losses of "
                             f"shape {losses.shape}")
        if reduction == Reduction.NONE:
            loss = weighted
        else:
            loss = reduce_sum(weighted)
            if reduction == Reduction.MEAN:
                loss = div_no_nan(loss, reduce_sum(broadcast_like(w, weighted)), name="value")
            elif reduction == Reduction.SUM_BY_NONZERO_WEIGHTS:
                loss = div_no_nan(loss, _num_present(losses, weights), name="value")
            elif reduction == Reduction.SUM_OVER_BATCH_SIZE:
                loss = div_no_nan(loss, _num_elements(losses), name="value")
        loss = cast(loss, input_dtype)
        add_loss(loss, loss_collection)
        return loss


def _regression_inputs(labels, predictions):
    predictions = cast(convert_to_tensor(predictions, name="predictions"), _dtypes.float32)
    labels = cast(convert_to_tensor(labels, name="labels"), _dtypes.float32)
    if not predictions.shape.is_compatible_with(labels.shape):
        raise ValueError(f"Shapes {predictions.shape} and {labels.shape} are incompatible")
    return labels, predictions


def _check_args(labels, predictions, what: str) -> None:
    if labels is None:
        raise ValueError("labels must not be None.")
    if predictions is None:
        raise ValueError(f"{what} must not be None.")


def absolute_difference(labels, predictions, weights=1.0, scope=None,
                        loss_collection=GraphKeys.LOSSES,
                        reduction=Reduction.SUM_BY_NONZERO_WEIGHTS) -> Tensor:
    """`tf.losses.absolute_difference`: weighted |predictions - labels|."""
    _check_args(labels, predictions, "predictions")
    with name_scope(scope, "absolute_difference", [predictions, labels, weights]) as s:
        labels, predictions = _regression_inputs(labels, predictions)
        losses = abs(subtract(predictions, labels))
        return compute_weighted_loss(losses, weights, s, loss_collection, reduction=reduction)


def mean_squared_error(labels, predictions, weights=1.0, scope=None,
                       loss_collection=GraphKeys.LOSSES,
                       reduction=Reduction.SUM_BY_NONZERO_WEIGHTS) -> Tensor:
    """`tf.losses.mean_squared_error`: weighted (predictions - labels) ** 2."""
    _check_args(labels, predictions, "predictions")
    with name_scope(scope, "mean_squared_error", [predictions, labels, weights]) as s:
        labels, predictions = _regression_inputs(labels, predictions)
        losses = squared_difference(predictions, labels)
        return compute_weighted_loss(losses, weights, s, loss_collection, reduction=reduction)


def log_loss(labels, predictions, weights=1.0, epsilon: float = 1e-7, scope=None,
             loss_collection=GraphKeys.LOSSES,
             reduction=Reduction.SUM_BY_NONZERO_WEIGHTS) -> Tensor:
    """`tf.losses.log_loss`: -labels * log(p + eps) - (1 - labels) * log(1 - p + eps)."""
    _check_args(labels, predictions, "predictions")
    with name_scope(scope, "log_loss", [predictions, labels, weights]) as s:
        labels, predictions = _regression_inputs(labels, predictions)
        eps = scalar_like(epsilon, predictions)
        one = scalar_like(1, predictions)
        losses = -multiply(labels, log(predictions + eps)) - multiply(
            one - labels, log(one - predictions + eps))
        return compute_weighted_loss(losses, weights, s, loss_collection, reduction=reduction)


def huber_loss(labels, predictions, weights=1.0, delta: float = 1.0, scope=None,
               loss_collection=GraphKeys.LOSSES,
               reduction=Reduction.SUM_BY_NONZERO_WEIGHTS) -> Tensor:
    """`tf.losses.huber_loss`: 0.5 * e ** 2 for |e| <= delta, else delta * (|e| - delta / 2)."""
    _check_args(labels, predictions, "predictions")
    with name_scope(scope, "huber_loss", [predictions, labels, weights]) as s:
        labels, predictions = _regression_inputs(labels, predictions)
        abs_error = abs(subtract(predictions, labels))
        quadratic = minimum(abs_error, scalar_like(delta, abs_error))
        linear = subtract(abs_error, quadratic)
        losses = scalar_like(0.5, quadratic) * (quadratic * quadratic) + \
            scalar_like(delta, linear) * linear
        return compute_weighted_loss(losses, weights, s, loss_collection, reduction=reduction)


def sigmoid_cross_entropy(multi_class_labels, logits, weights=1.0, label_smoothing: float = 0,
                          scope=None, loss_collection=GraphKeys.LOSSES,
                          reduction=Reduction.SUM_BY_NONZERO_WEIGHTS) -> Tensor:
    """`tf.losses.sigmoid_cross_entropy`: weighted sigmoid cross-entropy; labels smoothed
    toward 1/2 by `label_smoothing`."""
    _check_args(multi_class_labels, logits, "logits")
    with name_scope(scope, "sigmoid_cross_entropy_loss",
                    [logits, multi_class_labels, weights]) as s:
        logits = convert_to_tensor(logits, name="logits")
        labels = cast(convert_to_tensor(multi_class_labels, name="labels"), logits.dtype)
        if not logits.shape.is_compatible_with(labels.shape):
            raise ValueError(f"Shapes {logits.shape} and {labels.shape} are incompatible")
        if label_smoothing > 0:
            labels = labels * scalar_like(1 - label_smoothing, labels) + \
                scalar_like(0.5 * label_smoothing, labels)
        losses = sigmoid_cross_entropy_with_logits(labels=labels, logits=logits,
                                                   name="xentropy")
        return compute_weighted_loss(losses, weights, s, loss_collection, reduction=reduction)


def softmax_cross_entropy(onehot_labels, logits, weights=1.0, label_smoothing: float = 0,
                          scope=None, loss_collection=GraphKeys.LOSSES,
                          reduction=Reduction.SUM_BY_NONZERO_WEIGHTS) -> Tensor:
    """`tf.losses.softmax_cross_entropy`: weighted softmax cross-entropy per row; labels
    smoothed toward 1/num_classes by `label_smoothing`; no gradient flows into the labels."""
    _check_args(onehot_labels, logits, "logits")
    with name_scope(scope, "softmax_cross_entropy_loss", [logits, onehot_labels, weights]) as s:
        logits = convert_to_tensor(logits, name="logits")
        labels = cast(convert_to_tensor(onehot_labels, name="onehot_labels"), logits.dtype)
        if not logits.shape.is_compatible_with(labels.shape):
            raise ValueError(f"Shapes {logits.shape} and {labels.shape} are incompatible")
        if label_smoothing > 0:
            n = labels.shape.as_tuple()[-1] if labels.shape.ndims else None
            if n is None:
                from jitflow.ops.shape_ops import shape
                num_classes = cast(shape(labels)[-1], logits.dtype)
            else:
                num_classes = scalar_like(n, labels)
            labels = labels * scalar_like(1 - label_smoothing, labels) + \
                scalar_like(label_smoothing, labels) / num_classes
        losses = softmax_cross_entropy_with_logits_v2(labels=stop_gradient(labels),
                                                      logits=logits, name="xentropy")
        return compute_weighted_loss(losses, weights, s, loss_collection, reduction=reduction)


def sparse_softmax_cross_entropy(labels, logits, weights=1.0, scope=None,
                                 loss_collection=GraphKeys.LOSSES,
                                 reduction=Reduction.SUM_BY_NONZERO_WEIGHTS) -> Tensor:
    """`tf.losses.sparse_softmax_cross_entropy`: weighted cross-entropy with class indices."""
    _check_args(labels, logits, "logits")
    with name_scope(scope, "sparse_softmax_cross_entropy_loss", [logits, labels, weights]) as s:
        losses = sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits,
                                                          name="xentropy")
        return compute_weighted_loss(losses, weights, s, loss_collection, reduction=reduction)


def hinge_loss(labels, logits, weights=1.0, scope=None, loss_collection=GraphKeys.LOSSES,
               reduction=Reduction.SUM_BY_NONZERO_WEIGHTS) -> Tensor:
    """`tf.losses.hinge_loss`: max(0, 1 - (2 * labels - 1) * logits), labels in {0, 1}."""
    _check_args(labels, logits, "logits")
    with name_scope(scope, "hinge_loss", [logits, labels, weights]) as s:
        logits = cast(convert_to_tensor(logits, name="logits"), _dtypes.float32)
        labels = cast(convert_to_tensor(labels, name="labels"), _dtypes.float32)
        if not logits.shape.is_compatible_with(labels.shape):
            raise ValueError(f"Shapes {logits.shape} and {labels.shape} are incompatible")
        one = scalar_like(1, logits)
        signs = scalar_like(2, labels) * labels - one
        losses = relu(one - signs * logits)
        return compute_weighted_loss(losses, weights, s, loss_collection, reduction=reduction)


def cosine_distance(labels, predictions, axis=None, weights=1.0, scope=None,
                    loss_collection=GraphKeys.LOSSES,
                    reduction=Reduction.SUM_BY_NONZERO_WEIGHTS, dim=None) -> Tensor:
    """`tf.losses.cosine_distance`: 1 - sum(labels * predictions, axis) for unit-normalized
    inputs (the reduced axis is kept with size 1)."""
    axis = _legacy(axis, dim, "axis", "dim")
    if axis is None:
        raise ValueError("You must specify 'axis'.")
    _check_args(labels, predictions, "predictions")
    with name_scope(scope, "cosine_distance_loss", [predictions, labels, weights]) as s:
        labels, predictions = _regression_inputs(labels, predictions)
        radial = multiply(predictions, labels)
        losses = scalar_like(1, radial) - reduce_sum(radial, axis, keepdims=True)
        return compute_weighted_loss(losses, weights, s, loss_collection, reduction=reduction)


# -- the loss collections -------------------------------------------------------------------------
def add_loss(loss, loss_collection=GraphKeys.LOSSES) -> None:
    """`tf.losses.add_loss`: add `loss` to `loss_collection` (None: add nowhere)."""
    if loss_collection:
        get_default_graph().add_to_collection(loss_collection, loss)


def get_losses(scope=None, loss_collection=GraphKeys.LOSSES) -> list:
    """`tf.losses.get_losses`: the losses in `loss_collection` (names matching `scope`)."""
    return get_default_graph().get_collection(loss_collection, scope)


def get_regularization_losses(scope=None) -> list:
    """`tf.losses.get_regularization_losses`."""
    return get_default_graph().get_collection(GraphKeys.REGULARIZATION_LOSSES, scope)


def get_regularization_loss(scope=None, name: str = "total_regularization_loss") -> Tensor:
    """`tf.losses.get_regularization_loss`: their sum, or 0.0 when there are none."""
    losses = get_regularization_losses(scope)
    if losses:
        return add_n(losses, name=name)
    return convert_to_tensor(np.float32(0.0), name=name)


def get_total_loss(add_regularization_losses: bool = True, name: str = "total_loss",
                   scope=None) -> Tensor:
    """`tf.losses.get_total_loss`: the sum of the collected losses (and regularization
    losses); a ValueError when there are none, as in TF1."""
    losses = get_losses(scope=scope)
    if add_regularization_losses:
        losses = losses + get_regularization_losses(scope=scope)
    if not losses:
        raise ValueError("No losses found: tf.losses.get_total_loss needs at least one loss "
                         "in the LOSSES (or REGULARIZATION_LOSSES) collection.")
    return add_n(losses, name=name)
