"""`tf.contrib.layers`' weight initializers, with TF 1.15 contrib's own formulas (which differ
from `tf.variance_scaling_initializer`'s):

- fan_in = shape[-2] and fan_out = shape[-1], both times the product of shape[:-2] (a conv
  kernel's receptive field); a 1-D shape uses shape[-1] for both, a scalar 1 (no max(1, n));
- n = fan_in ('FAN_IN'), fan_out ('FAN_OUT') or their mean ('FAN_AVG');
- uniform: U(-sqrt(3 * factor / n), +sqrt(3 * factor / n));
- otherwise a normal truncated at two standard deviations with stddev sqrt(1.3 * factor / n)
  (1.3 makes up, roughly, for the variance the truncation removes).

`xavier_initializer()` is factor 1, 'FAN_AVG', uniform: U(+-sqrt(6 / (fan_in + fan_out))),
the same distribution as `tf.glorot_uniform_initializer`.
"""
from __future__ import annotations

import math

import jitflow as tf
from jitflow.core import dtypes as _dtypes
from jitflow.ops.init_ops import Initializer

__all__ = ["xavier_initializer", "xavier_initializer_conv2d", "variance_scaling_initializer"]

_MODES = ("FAN_IN", "FAN_OUT", "FAN_AVG")


def _float_dtype(dtype) -> _dtypes.DType:
    dtype = _dtypes.as_dtype(dtype)
    if not dtype.is_floating:
        raise TypeError(f"Cannot create initializer for non-floating point type "
                        f"{dtype.name}.")
    return dtype


def contrib_fans(shape) -> tuple:
    """(fan_in, fan_out) as TF 1.15's contrib initializers count them."""
    shape = [int(d) for d in shape]
    if not shape:
        return 1.0, 1.0
    fan_in = float(shape[-2]) if len(shape) > 1 else float(shape[-1])
    fan_out = float(shape[-1])
    for d in shape[:-2]:
        fan_in *= d
        fan_out *= d
    return fan_in, fan_out


class _ContribVarianceScaling(Initializer):
    """The initializer `variance_scaling_initializer` returns: `init(shape, dtype=None,
    partition_info=None)`."""

    def __init__(self, factor: float, mode: str, uniform: bool, seed, dtype) -> None:
        self.factor, self.mode, self.uniform, self.seed = float(factor), mode, uniform, seed
        self.dtype = dtype

    def scale(self, shape) -> float:
        """The uniform limit or the truncated normal's stddev for `shape`."""
        fan_in, fan_out = contrib_fans(shape)
        n = {"FAN_IN": fan_in, "FAN_OUT": fan_out, "FAN_AVG": (fan_in + fan_out) / 2.0}
        n = n[self.mode]
        return math.sqrt((3.0 if self.uniform else 1.3) * self.factor / n)

    def __call__(self, shape, dtype=None, partition_info=None):
        dtype = _float_dtype(self.dtype if dtype is None else dtype)
        shape = tf.TensorShape(shape).as_list()
        s = self.scale(shape)
        if self.uniform:
            return tf.random_uniform(shape, -s, s, dtype, seed=self.seed)
        return tf.truncated_normal(shape, 0.0, s, dtype, seed=self.seed)

    def get_config(self) -> dict:
        return {"factor": self.factor, "mode": self.mode, "uniform": self.uniform,
                "seed": self.seed, "dtype": self.dtype.name}

    def __repr__(self) -> str:
        kind = "uniform" if self.uniform else "truncated_normal"
        return (f"<contrib variance_scaling_initializer factor={self.factor:g} "
                f"mode={self.mode} {kind}>")


def variance_scaling_initializer(factor: float = 2.0, mode: str = "FAN_IN",
                                 uniform: bool = False, seed=None,
                                 dtype=tf.float32) -> Initializer:
    """`tf.contrib.layers.variance_scaling_initializer`: values with variance about
    factor / n (the defaults give He et al.'s initialization for ReLU layers). TypeError for a
    non-floating dtype or a mode other than 'FAN_IN', 'FAN_OUT', 'FAN_AVG'."""
    dtype = _float_dtype(dtype)
    if mode not in _MODES:
        raise TypeError(f"Unknown mode {mode} [FAN_IN, FAN_OUT, FAN_AVG]")
    return _ContribVarianceScaling(factor, mode, uniform, seed, dtype)


def xavier_initializer(uniform: bool = True, seed=None, dtype=tf.float32) -> Initializer:
    """`tf.contrib.layers.xavier_initializer`: Glorot & Bengio's initialization, uniform in
    +-sqrt(6 / (fan_in + fan_out)) (or a truncated normal with stddev
    sqrt(1.3 * 2 / (fan_in + fan_out)) when `uniform=False`)."""
    return variance_scaling_initializer(factor=1.0, mode="FAN_AVG", uniform=uniform, seed=seed,
                                        dtype=dtype)


xavier_initializer_conv2d = xavier_initializer
