"""`tf.contrib.layers`' regularizers: functions `reg(weights) -> scalar penalty` for the
`weights_regularizer` of a layer (the penalty lands in REGULARIZATION_LOSSES) or for
`apply_regularization`.

l2_regularizer(scale)(w) = scale * sum(w ** 2) / 2 (`tf.nn.l2_loss`), l1_regularizer(scale)(w)
= scale * sum(|w|). A scale of 0 gives a regularizer that returns None (no penalty); an integer
or negative scale is a ValueError, as in TF 1.15.
"""
from __future__ import annotations

import numbers
from typing import Callable, Optional

import jitflow as tf
from jitflow.core.graph import GraphKeys

__all__ = ["l1_regularizer", "l2_regularizer", "l1_l2_regularizer", "sum_regularizer",
           "apply_regularization"]


def _check_scale(scale, what: str = "scale") -> bool:
    """Validate a regularizer's scale; False when it is a Python 0 (the regularizer is off)."""
    if isinstance(scale, numbers.Integral):
        raise ValueError(f"{what} cannot be an integer: {scale}")
    if isinstance(scale, numbers.Real):
        if scale < 0.0:
            raise ValueError(f"Setting a scale less than 0 on a regularizer: {scale:g}.")
        if scale == 0.0:
            return False
    return True


def _none(_weights):
    return None


def l1_regularizer(scale, scope: Optional[str] = None) -> Callable:
    """A function `l1(weights)` = scale * sum(|weights|)."""
    if not _check_scale(scale):
        return _none

    def l1(weights, name: Optional[str] = None):
        with tf.name_scope(scope, "l1_regularizer", [weights]) as name:
            s = tf.convert_to_tensor(scale, dtype=weights.dtype.base_dtype, name="scale")
            return tf.multiply(s, tf.reduce_sum(tf.abs(weights)), name=name)
    return l1


def l2_regularizer(scale, scope: Optional[str] = None) -> Callable:
    """A function `l2(weights)` = scale * sum(weights ** 2) / 2."""
    if not _check_scale(scale):
        return _none

    def l2(weights):
        with tf.name_scope(scope, "l2_regularizer", [weights]) as name:
            s = tf.convert_to_tensor(scale, dtype=weights.dtype.base_dtype, name="scale")
            return tf.multiply(s, tf.nn.l2_loss(weights), name=name)
    return l2


def l1_l2_regularizer(scale_l1: float = 1.0, scale_l2: float = 1.0,
                      scope: Optional[str] = None) -> Callable:
    """The sum of an L1 and an L2 regularizer (just one of them when the other scale is 0)."""
    if isinstance(scale_l1, numbers.Integral):
        raise ValueError(f"scale_l1 cannot be an integer: {scale_l1}")
    if isinstance(scale_l2, numbers.Integral):
        raise ValueError(f"scale_l2 cannot be an integer: {scale_l2}")
    scope = scope or "l1_l2_regularizer"
    if isinstance(scale_l1, numbers.Real) and scale_l1 == 0.0:
        return l2_regularizer(scale_l2, scope)
    if isinstance(scale_l2, numbers.Real) and scale_l2 == 0.0:
        return l1_regularizer(scale_l1, scope)
    return sum_regularizer([l1_regularizer(scale_l1), l2_regularizer(scale_l2)], scope=scope)


def sum_regularizer(regularizer_list, scope: Optional[str] = None) -> Optional[Callable]:
    """A regularizer adding the penalties of `regularizer_list` (None entries dropped; None
    when the list is then empty)."""
    regs = [r for r in regularizer_list if r is not None]
    if not regs:
        return None

    def sum_reg(weights):
        with tf.name_scope(scope, "sum_regularizer", [weights]) as name:
            parts = [p for p in (r(weights) for r in regs) if p is not None]
            return tf.add_n(parts, name=name) if parts else None
    return sum_reg


def apply_regularization(regularizer: Callable, weights_list=None):
    """The summed penalty of `regularizer` over `weights_list` (default: the WEIGHTS
    collection), also added to REGULARIZATION_LOSSES. ValueError when there are no weights or
    a penalty is not a scalar."""
    if not weights_list:
        weights_list = tf.get_collection(GraphKeys.WEIGHTS)
    if not weights_list:
        raise ValueError("No weights to regularize.")
    with tf.name_scope("get_regularization_penalty", values=weights_list) as scope:
        penalties = []
        for w in weights_list:
            p = regularizer(w)
            p = tf.constant(0.0) if p is None else p
            if p.get_shape().ndims != 0:
                raise ValueError(f"regularizer must return a scalar Tensor instead of a Tensor "
                                 f"with rank {p.get_shape().ndims}.")
            penalties.append(p)
        total = tf.add_n(penalties, name=scope)
        tf.add_to_collection(GraphKeys.REGULARIZATION_LOSSES, total)
        return total
