"""`tf.contrib.layers.optimize_loss`: one call from a loss to a training op, with a learning
rate variable, optional decay, gradient noise, multipliers and clipping, and summaries."""
from __future__ import annotations

import numbers
from typing import Optional

import jitflow as tf
from jitflow.core.graph import GraphKeys, Tensor

__all__ = ["optimize_loss", "OPTIMIZER_CLS_NAMES", "OPTIMIZER_SUMMARIES"]

OPTIMIZER_CLS_NAMES = {
    "Adagrad": tf.train.AdagradOptimizer,
    "Adam": tf.train.AdamOptimizer,
    "Momentum": lambda learning_rate: tf.train.MomentumOptimizer(learning_rate, momentum=0.9),
    "RMSProp": tf.train.RMSPropOptimizer,
    "SGD": tf.train.GradientDescentOptimizer,
}
if hasattr(tf.train, "FtrlOptimizer"):
    OPTIMIZER_CLS_NAMES["Ftrl"] = tf.train.FtrlOptimizer

OPTIMIZER_SUMMARIES = ["learning_rate", "loss", "gradients", "gradient_norm",
                       "global_gradient_norm"]


def _make_optimizer(optimizer, lr, learning_rate):
    if isinstance(optimizer, str):
        if lr is None:
            raise ValueError(f"Learning rate is None, but should be specified if optimizer is "
                             f"string ({optimizer}).")
        if optimizer not in OPTIMIZER_CLS_NAMES:
            raise ValueError(f"Optimizer name should be one of "
                             f"[{', '.join(OPTIMIZER_CLS_NAMES)}], you provided {optimizer}.")
        return OPTIMIZER_CLS_NAMES[optimizer](learning_rate=lr)
    if isinstance(optimizer, type) and issubclass(optimizer, tf.train.Optimizer):
        if lr is None:
            raise ValueError(f"Learning rate is None, but should be specified if optimizer is "
                             f"class ({optimizer}).")
        return optimizer(learning_rate=lr)
    if isinstance(optimizer, tf.train.Optimizer):
        return optimizer
    if callable(optimizer):
        opt = optimizer(lr) if learning_rate is not None else optimizer()
        if not isinstance(opt, tf.train.Optimizer):
            raise ValueError(f"Unrecognized optimizer: function should return subclass of "
                             f"Optimizer. Got {opt}.")
        return opt
    raise ValueError(f"Unrecognized optimizer: should be string, subclass of Optimizer, "
                     f"instance of subclass of Optimizer or function with one argument. "
                     f"Got {optimizer}.")


def _scale(grads_and_vars, fn) -> list:
    return [(None if g is None else fn(g, v), v) for g, v in grads_and_vars]


def optimize_loss(loss, global_step, learning_rate, optimizer, gradient_noise_scale=None,
                  gradient_multipliers: Optional[dict] = None, clip_gradients=None,
                  learning_rate_decay_fn=None, update_ops=None, variables=None,
                  name: Optional[str] = None, summaries=None,
                  colocate_gradients_with_ops: bool = False,
                  increment_global_step: bool = True) -> Tensor:
    """A tensor that, when run, applies one optimizer step and returns the loss.

    `optimizer`: a name from OPTIMIZER_CLS_NAMES ('SGD', 'Adam', ...), an Optimizer class or
    instance, or a function of the learning rate returning one. A float `learning_rate`
    becomes the non-trainable variable `<name or OptimizeLoss>/learning_rate`. The UPDATE_OPS
    collection (or `update_ops`) runs before the loss. `clip_gradients`: a float (clip by
    global norm) or a function of the (gradient, variable) list. `summaries` default to loss,
    learning rate and global gradient norm.
    """
    loss = tf.convert_to_tensor(loss)
    if loss.shape.ndims not in (None, 0):
        raise ValueError(f"loss {loss.name} must be a scalar, got shape {loss.shape}")
    if global_step is None:
        global_step = tf.train.get_global_step()
    else:
        tf.train.assert_global_step(global_step)
    with tf.variable_scope(name, "OptimizeLoss", [loss, global_step]):
        if update_ops is None:
            update_ops = list(dict.fromkeys(tf.get_collection(GraphKeys.UPDATE_OPS)))
        if update_ops:
            with tf.control_dependencies(list(update_ops)):
                loss = tf.identity(loss)
        lr = None
        if learning_rate is not None:
            if isinstance(learning_rate, Tensor) and learning_rate.shape.ndims == 0:
                lr = learning_rate
            elif isinstance(learning_rate, numbers.Real) and \
                    not isinstance(learning_rate, numbers.Integral):
                if learning_rate < 0.0:
                    raise ValueError(f"Invalid learning_rate {learning_rate}.")
                lr = tf.get_variable("learning_rate", [], trainable=False,
                                     initializer=tf.constant_initializer(learning_rate))
            else:
                raise ValueError(f"Learning rate should be 0d Tensor or float. Got "
                                 f"{learning_rate} of type {type(learning_rate)}")
        if summaries is None:
            summaries = ["loss", "learning_rate", "global_gradient_norm"]
        for s in summaries:
            if s not in OPTIMIZER_SUMMARIES:
                raise ValueError(f"Summaries should be one of [{', '.join(OPTIMIZER_SUMMARIES)}]"
                                 f", you provided {s}.")
        if learning_rate is not None and learning_rate_decay_fn is not None:
            if global_step is None:
                raise ValueError("global_step is required for learning_rate_decay_fn.")
            lr = learning_rate_decay_fn(lr, global_step)
            if "learning_rate" in summaries:
                tf.summary.scalar("learning_rate", lr)
        opt = _make_optimizer(optimizer, lr, learning_rate)
        if variables is None:
            variables = tf.trainable_variables()
        grads = opt.compute_gradients(loss, variables,
                                      colocate_gradients_with_ops=colocate_gradients_with_ops)
        if gradient_noise_scale is not None:
            grads = _scale(grads, lambda g, v: g + tf.truncated_normal(tf.shape(g))
                           * gradient_noise_scale)
        if gradient_multipliers is not None:
            def multiply(g, v):
                key = v if v in gradient_multipliers else v.name
                if key not in gradient_multipliers:
                    return g
                return g * tf.cast(gradient_multipliers[key], g.dtype)
            grads = _scale(grads, multiply)
            if not grads:
                raise ValueError("Empty list of (gradient, var) pairs encountered. This is most "
                                 "likely to be caused by an improper value of "
                                 "gradient_multipliers.")
        present = [g for g, _ in grads if g is not None]
        norms = "global_gradient_norm" in summaries or "gradient_norm" in summaries
        if norms:
            tf.summary.scalar("global_norm/gradient_norm", tf.global_norm(present))
        if isinstance(clip_gradients, float):
            gs, vs = zip(*grads)
            clipped, _ = tf.clip_by_global_norm(list(gs), clip_gradients)
            grads = list(zip(clipped, vs))
        elif callable(clip_gradients):
            grads = clip_gradients(grads)
        elif clip_gradients is not None:
            raise ValueError(f"Unknown type {type(clip_gradients)} for clip_gradients")
        if "loss" in summaries:
            tf.summary.scalar("loss", loss)
        for g, v in grads:
            if g is None:
                continue
            var_name = v.name.replace(":", "_")
            if "gradients" in summaries:
                tf.summary.histogram(f"gradients/{var_name}", g)
            if "gradient_norm" in summaries:
                tf.summary.scalar(f"gradient_norm/{var_name}", tf.global_norm([g]))
        if clip_gradients is not None and norms:
            tf.summary.scalar("global_norm/clipped_gradient_norm",
                              tf.global_norm([g for g, _ in grads if g is not None]))
        step = opt.apply_gradients(grads, global_step=global_step if increment_global_step
                                   else None, name="train")
        with tf.control_dependencies([step]):
            return tf.identity(loss)
