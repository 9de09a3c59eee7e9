"""`slim.learning`: `create_train_op` with slim's gradient options (per-variable multipliers,
clipping each gradient by its own norm), and those two gradient transforms."""
from __future__ import annotations

from typing import Optional

import jitflow as tf
from jitflow.contrib.training import create_train_op as _create_train_op

__all__ = ["create_train_op", "clip_gradient_norms", "multiply_gradients"]


def clip_gradient_norms(gradients_to_variables, max_norm: float) -> list:
    """Each gradient clipped to L2 norm `max_norm` on its own (not a global clip)."""
    return [(None if g is None else tf.clip_by_norm(g, max_norm), v)
            for g, v in gradients_to_variables]


def multiply_gradients(grads_and_vars, gradient_multipliers: dict) -> list:
    """Gradients of the variables in `gradient_multipliers` (keyed by variable or by op name)
    scaled by their multiplier."""
    if not isinstance(grads_and_vars, list):
        raise ValueError("`grads_and_vars` must be a list.")
    if not gradient_multipliers:
        raise ValueError("`gradient_multipliers` is empty.")
    out = []
    for g, v in grads_and_vars:
        key = v if v in gradient_multipliers else v.op.name
        if g is not None and key in gradient_multipliers:
            g = g * tf.constant(gradient_multipliers[key], dtype=g.dtype.base_dtype)
        out.append((g, v))
    return out


def create_train_op(total_loss, optimizer, global_step="_USE_GLOBAL_STEP", update_ops=None,
                    variables_to_train=None, clip_gradient_norm: float = 0,
                    summarize_gradients: bool = False, gate_gradients=1,
                    aggregation_method=None, colocate_gradients_with_ops: bool = False,
                    gradient_multipliers: Optional[dict] = None, check_numerics: bool = True):
    """`tf.contrib.training.create_train_op` with the gradients multiplied by
    `gradient_multipliers` and each clipped to `clip_gradient_norm` (when > 0)."""
    def transform(grads):
        if gradient_multipliers:
            with tf.name_scope("multiply_grads"):
                grads = multiply_gradients(grads, gradient_multipliers)
        if clip_gradient_norm > 0:
            with tf.name_scope("clip_grads"):
                grads = clip_gradient_norms(grads, clip_gradient_norm)
        return grads
    return _create_train_op(total_loss, optimizer, global_step=global_step,
                            update_ops=update_ops, variables_to_train=variables_to_train,
                            transform_grads_fn=transform,
                            summarize_gradients=summarize_gradients,
                            gate_gradients=gate_gradients,
                            aggregation_method=aggregation_method,
                            colocate_gradients_with_ops=colocate_gradients_with_ops,
                            check_numerics=check_numerics)


def __getattr__(name: str):
    if name == "train":
        raise AttributeError("slim.learning.train (the Supervisor training loop) is not "
                             "available in jitflow: run the train op in a Session or "
                             "MonitoredTrainingSession")
    raise AttributeError(f"module 'jitflow.contrib.slim.learning' has no attribute {name!r}")
