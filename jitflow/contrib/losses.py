"""`tf.contrib.losses` (also `slim.losses`): TF1's first loss functions, predecessors of
`tf.losses`, with their own argument order (predictions or logits first).

Each reduces as `tf.losses` does by default (the weighted sum over the number of non-zero
weights) and adds the result to the LOSSES collection, except `hinge_loss`, which, as in
TF 1.15, returns the unreduced per-element losses and collects nothing.
"""
from __future__ import annotations

from typing import Optional

import jitflow as tf

__all__ = ["absolute_difference", "add_loss", "compute_weighted_loss", "cosine_distance",
           "get_losses", "get_regularization_losses", "get_total_loss", "hinge_loss",
           "log_loss", "mean_squared_error", "sigmoid_cross_entropy", "softmax_cross_entropy",
           "sparse_softmax_cross_entropy"]

add_loss = tf.losses.add_loss
get_losses = tf.losses.get_losses
get_regularization_losses = tf.losses.get_regularization_losses


def get_total_loss(add_regularization_losses: bool = True, name: str = "total_loss"):
    """The sum of the LOSSES collection (and of REGULARIZATION_LOSSES)."""
    return tf.losses.get_total_loss(add_regularization_losses, name=name)


def compute_weighted_loss(losses, weights=1.0, scope: Optional[str] = None):
    return tf.losses.compute_weighted_loss(losses, weights, scope=scope)


def absolute_difference(predictions, labels=None, weights=1.0, scope: Optional[str] = None):
    return tf.losses.absolute_difference(labels, predictions, weights, scope=scope)


def cosine_distance(predictions, labels=None, axis=None, weights=1.0,
                    scope: Optional[str] = None, dim=None):
    return tf.losses.cosine_distance(labels, predictions, axis=axis, weights=weights,
                                     scope=scope, dim=dim)


def log_loss(predictions, labels=None, weights=1.0, epsilon: float = 1e-7,
             scope: Optional[str] = None):
    return tf.losses.log_loss(labels, predictions, weights, epsilon=epsilon, scope=scope)


def mean_squared_error(predictions, labels=None, weights=1.0, scope: Optional[str] = None):
    return tf.losses.mean_squared_error(labels, predictions, weights, scope=scope)


def sigmoid_cross_entropy(logits, multi_class_labels, weights=1.0, label_smoothing=0,
                          scope: Optional[str] = None):
    return tf.losses.sigmoid_cross_entropy(multi_class_labels, logits, weights,
                                           label_smoothing=label_smoothing, scope=scope)


def softmax_cross_entropy(logits, onehot_labels, weights=1.0, label_smoothing=0,
                          scope: Optional[str] = None):
    return tf.losses.softmax_cross_entropy(onehot_labels, logits, weights,
                                           label_smoothing=label_smoothing, scope=scope)


def sparse_softmax_cross_entropy(logits, labels, weights=1.0, scope: Optional[str] = None):
    return tf.losses.sparse_softmax_cross_entropy(labels, logits, weights, scope=scope)


def hinge_loss(logits, labels=None, scope: Optional[str] = None):
    """max(0, 1 - (2 * labels - 1) * logits) per element (labels 0 or 1), not reduced."""
    with tf.name_scope(scope, "hinge_loss", [logits, labels]):
        logits = tf.convert_to_tensor(logits)
        labels = tf.cast(tf.convert_to_tensor(labels), tf.float32)
        if not logits.shape.is_compatible_with(labels.shape):
            raise ValueError(f"Shapes {logits.shape} and {labels.shape} are incompatible "
                             f"(logits {logits.name}, labels {labels.name})")
        ones = tf.ones_like(labels)
        return tf.nn.relu(ones - (2 * labels - ones) * logits)

