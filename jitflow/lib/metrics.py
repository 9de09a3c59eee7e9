"""`tf.metrics`: streaming metrics. Each returns `(value, update_op)`.

The running totals are local variables (collections LOCAL_VARIABLES and METRIC_VARIABLES),
initialized by `tf.local_variables_initializer()`. Running `update_op` adds one batch and
returns the updated metric; `value` reads the metric without changing it. Names follow TF1:
`accuracy/total`, `accuracy/count`, `accuracy/update_op`.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.core.graph import GraphKeys, Tensor, convert_to_tensor, get_default_graph
from jitflow.ops import shape_ops as _shape_ops, sources as _sources
from jitflow.ops.identity import identity as _identity
from jitflow.ops.math import (
    arithmetic as _arithmetic, casting as _casting, common as _common, compare as _compare,
    unary as _unary,
)
from jitflow.ops.reduce import reduce_sum
from jitflow.ops.state import Variable, assign_add
from jitflow.ops.variable_scope import variable_scope

__all__ = [
    "mean", "accuracy", "mean_squared_error", "root_mean_squared_error", "mean_absolute_error",
    "true_positives", "false_positives", "false_negatives", "true_negatives", "precision",
    "recall", "auc",
]

METRIC_VARIABLES = "metric_variables"


def _metric_variable(shape, name: str) -> Variable:
    """A float32 zeros variable in LOCAL_VARIABLES and METRIC_VARIABLES (not trainable)."""
    return Variable(lambda: _sources.zeros(shape, _dtypes.float32), trainable=False,
                    collections=[GraphKeys.LOCAL_VARIABLES, METRIC_VARIABLES], name=name)


def _add_to(collections, value) -> None:
    if collections:
        get_default_graph().add_to_collections(collections, value)


def _weights_like(weights, values: Tensor) -> Tensor:
    """`weights` (None: ones) as float32, broadcast to the shape of `values`."""
    if weights is None:
        return _sources.ones_like(values)
    w = _casting.cast(convert_to_tensor(weights), _dtypes.float32)
    return _arithmetic.multiply(w, _sources.ones_like(values))


def _safe_div(num: Tensor, den: Tensor, name: str) -> Tensor:
    return _arithmetic.div_no_nan(num, den, name=name)


def mean(values, weights=None, metrics_collections=None, updates_collections=None,
         name: Optional[str] = None):
    """`tf.metrics.mean`: the (weighted) mean of all values seen; (value, update_op)."""
    with variable_scope(name, "mean", (values, weights)):
        values = _casting.cast(convert_to_tensor(values), _dtypes.float32)
        total = _metric_variable([], "total")
        count = _metric_variable([], "count")
        if weights is None:
            num_values = _casting.cast(_shape_ops.size(values), _dtypes.float32)
            batch_total = reduce_sum(values)
        else:
            w = _weights_like(weights, values)
            batch_total = reduce_sum(values * w)
            num_values = reduce_sum(w)
        update_total = assign_add(total, batch_total)
        update_count = assign_add(count, num_values)
        value = _safe_div(total, count, "value")
        update_op = _safe_div(update_total, update_count, "update_op")
    _add_to(metrics_collections, value)
    _add_to(updates_collections, update_op)
    return value, update_op


def _labels_predictions(labels, predictions):
    labels = convert_to_tensor(labels)
    predictions = convert_to_tensor(predictions)
    if predictions.dtype != labels.dtype:
        predictions = _casting.cast(predictions, labels.dtype)
    if not predictions.shape.is_compatible_with(labels.shape):
        raise ValueError(f"Shapes {predictions.shape} and {labels.shape} are incompatible")
    return labels, predictions


def accuracy(labels, predictions, weights=None, metrics_collections=None,
             updates_collections=None, name: Optional[str] = None):
    """`tf.metrics.accuracy`: how often `predictions` equals `labels`."""
    labels, predictions = _labels_predictions(labels, predictions)
    is_correct = _casting.cast(_compare.equal(predictions, labels), _dtypes.float32)
    return mean(is_correct, weights, metrics_collections, updates_collections,
                name or "accuracy")


def mean_squared_error(labels, predictions, weights=None, metrics_collections=None,
                       updates_collections=None, name: Optional[str] = None):
    """`tf.metrics.mean_squared_error`: the running mean of (predictions - labels)^2."""
    labels, predictions = _labels_predictions(labels, predictions)
    sq = _compare.squared_difference(predictions, labels)
    return mean(sq, weights, metrics_collections, updates_collections,
                name or "mean_squared_error")


def mean_absolute_error(labels, predictions, weights=None, metrics_collections=None,
                        updates_collections=None, name: Optional[str] = None):
    """`tf.metrics.mean_absolute_error`: the running mean of |predictions - labels|."""
    labels, predictions = _labels_predictions(labels, predictions)
    err = _unary.abs(predictions - labels)
    return mean(err, weights, metrics_collections, updates_collections,
                name or "mean_absolute_error")


def root_mean_squared_error(labels, predictions, weights=None, metrics_collections=None,
                            updates_collections=None, name: Optional[str] = None):
    """`tf.metrics.root_mean_squared_error`: sqrt of the running mean squared error."""
    mse, update_mse = mean_squared_error(labels, predictions, weights, None, None,
                                         name or "root_mean_squared_error")
    value = _unary.sqrt(mse)
    update_op = _unary.sqrt(update_mse)
    _add_to(metrics_collections, value)
    _add_to(updates_collections, update_op)
    return value, update_op


# -- confusion counts -----------------------------------------------------------------------------
def _as_bool(t) -> Tensor:
    t = convert_to_tensor(t)
    return t if t.dtype.is_bool else _casting.cast(t, _dtypes.bool_)


def _count_condition(cond: Tensor, weights, metrics_collections, updates_collections):
    count = _metric_variable([], "count")
    values = _casting.cast(cond, _dtypes.float32)
    if weights is not None:
        values = values * _weights_like(weights, values)
    value = _identity(count)
    update_op = assign_add(count, reduce_sum(values))
    _add_to(metrics_collections, value)
    _add_to(updates_collections, update_op)
    return value, update_op


def _confusion(kind: str, default: str):
    want_label, want_pred = {"tp": (True, True), "fp": (False, True), "fn": (True, False),
                             "tn": (False, False)}[kind]

    def metric(labels, predictions, weights=None, metrics_collections=None,
               updates_collections=None, name: Optional[str] = None):
        with variable_scope(name, default, (predictions, labels, weights)):
            lab, pred = _as_bool(labels), _as_bool(predictions)
            lab = lab if want_label else _compare.logical_not(lab)
            pred = pred if want_pred else _compare.logical_not(pred)
            return _count_condition(_compare.logical_and(lab, pred), weights,
                                    metrics_collections, updates_collections)
    metric.__name__ = default
    metric.__doc__ = f"`tf.metrics.{default}`: the running (weighted) count of {kind}."
    return metric


true_positives = _confusion("tp", "true_positives")
false_positives = _confusion("fp", "false_positives")
false_negatives = _confusion("fn", "false_negatives")
true_negatives = _confusion("tn", "true_negatives")


def _ratio(a: Tensor, b: Tensor, name: str) -> Tensor:
    """a / (a + b), 0 where a + b is 0 (TF1's precision/recall)."""
    den = a + b
    return _compare.where(_compare.greater(den, _common.scalar_like(0, den)),
                          _arithmetic.truediv(a, den), _sources.zeros_like(den), name=name)


def _precision_recall(labels, predictions, weights, metrics_collections, updates_collections,
                      name, default, other):
    with variable_scope(name, default, (predictions, labels, weights)):
        tp, tp_up = true_positives(labels, predictions, weights)
        o, o_up = other(labels, predictions, weights)
        value = _ratio(tp, o, "value")
        update_op = _ratio(tp_up, o_up, "update_op")
    _add_to(metrics_collections, value)
    _add_to(updates_collections, update_op)
    return value, update_op


def precision(labels, predictions, weights=None, metrics_collections=None,
              updates_collections=None, name: Optional[str] = None):
    """`tf.metrics.precision`: tp / (tp + fp) over everything seen (0 when undefined)."""
    return _precision_recall(labels, predictions, weights, metrics_collections,
                             updates_collections, name, "precision", false_positives)


def recall(labels, predictions, weights=None, metrics_collections=None,
           updates_collections=None, name: Optional[str] = None):
    """`tf.metrics.recall`: tp / (tp + fn) over everything seen (0 when undefined)."""
    return _precision_recall(labels, predictions, weights, metrics_collections,
                             updates_collections, name, "recall", false_negatives)


def auc(labels, predictions, weights=None, num_thresholds: int = 200, metrics_collections=None,
        updates_collections=None, curve: str = "ROC", name: Optional[str] = None,
        summation_method: str = "trapezoidal", thresholds=None):
    """`tf.metrics.auc`: area under the ROC or PR curve by the trapezoidal rule over
    `num_thresholds` thresholds in [0, 1] (TF1's approximation)."""
    if curve not in ("ROC", "PR"):
        raise ValueError(f"curve must be either ROC or PR, {curve} unknown")
    if summation_method != "trapezoidal":
        raise NotImplementedError("tf.metrics.auc: only summation_method='trapezoidal' is "
                                  "supported")
    eps = 1e-7
    if thresholds is None:
        inner = [(i + 1) * 1.0 / (num_thresholds - 1) for i in range(num_thresholds - 2)]
        thresholds = [0.0 - eps] + inner + [1.0 + eps]
    else:
        thresholds = [0.0 - eps] + list(thresholds) + [1.0 + eps]
    n_t = len(thresholds)
    with variable_scope(name, "auc", (labels, predictions, weights)):
        pred = _shape_ops.reshape(_casting.cast(convert_to_tensor(predictions), _dtypes.float32),
                                  [1, -1])
        lab = _shape_ops.reshape(_as_bool(labels), [1, -1])
        thr = _sources.constant(np.array(thresholds, np.float32).reshape(n_t, 1))
        pos = _compare.greater(pred, thr)  # [thresholds, examples]
        lab_t = _compare.logical_and(lab, _sources.ones_like(pos))
        w = None
        if weights is not None:
            w = _shape_ops.reshape(_casting.cast(convert_to_tensor(weights), _dtypes.float32),
                                   [1, -1])
        counts, updates = {}, {}
        for key, lv, pv in (("true_positives", True, True), ("false_negatives", True, False),
                            ("true_negatives", False, False), ("false_positives", False, True)):
            var = _metric_variable([n_t], key)
            hit = _compare.logical_and(lab_t if lv else _compare.logical_not(lab_t),
                                       pos if pv else _compare.logical_not(pos))
            amount = _casting.cast(hit, _dtypes.float32)
            if w is not None:
                amount = amount * w
            counts[key] = var
            updates[key] = assign_add(var, reduce_sum(amount, axis=1))

        def area(c, name_):
            tp, fn = c["true_positives"], c["false_negatives"]
            tn, fp = c["true_negatives"], c["false_positives"]
            e = _common.scalar_like(eps, tp)
            rec = _arithmetic.truediv(tp + e, tp + fn + e)
            if curve == "ROC":
                x = _arithmetic.truediv(fp, fp + tn + e)
                y = rec
            else:
                x = rec
                y = _arithmetic.truediv(tp + e, tp + fp + e)
            half = _common.scalar_like(0.5, tp)
            return reduce_sum((x[:n_t - 1] - x[1:]) * (y[:n_t - 1] + y[1:]) * half, name=name_)
        value = area({k: _identity(v) for k, v in counts.items()}, "value")
        update_op = area(updates, "update_op")
    _add_to(metrics_collections, value)
    _add_to(updates_collections, update_op)
    return value, update_op
