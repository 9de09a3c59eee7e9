"""Variable initializers (TF1's `init_ops`): callables `init(shape, dtype, partition_info)`
returning a tensor, used by `tf.get_variable(initializer=...)` and `tf.Variable(init(...))`.

`glorot_uniform_initializer` is the default of `tf.get_variable` for floating variables, as in
TF1; integer and bool variables default to zeros.
"""
from __future__ import annotations

import math

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.core.graph import Tensor, make_op, name_scope
from jitflow.ops.sources import _constant_array, constant, ones, zeros
from jitflow.ops.random import _seed_attrs, random_normal, random_uniform, truncated_normal
from jitflow.ops.registry import Example, register
from jitflow.core.shapes import TensorShape

__all__ = [
    "Initializer", "zeros_initializer", "ones_initializer", "constant_initializer",
    "random_normal_initializer", "random_uniform_initializer", "truncated_normal_initializer",
    "glorot_uniform_initializer", "glorot_normal_initializer", "variance_scaling_initializer",
    "orthogonal_initializer", "identity_initializer",
]
NAMESPACES = {"initializers": [
    ("zeros", "zeros_initializer"), ("ones", "ones_initializer"),
    ("constant", "constant_initializer"), ("random_normal", "random_normal_initializer"),
    ("random_uniform", "random_uniform_initializer"),
    ("truncated_normal", "truncated_normal_initializer"),
    ("glorot_uniform", "glorot_uniform_initializer"),
    ("glorot_normal", "glorot_normal_initializer"),
    ("variance_scaling", "variance_scaling_initializer"),
    ("orthogonal", "orthogonal_initializer"), ("identity", "identity_initializer"),
    ("he_normal", "he_normal"), ("he_uniform", "he_uniform"),
    ("lecun_normal", "lecun_normal"), ("lecun_uniform", "lecun_uniform"),
]}


def _shape_list(shape) -> list:
    if isinstance(shape, TensorShape):
        return shape.as_list()
    if isinstance(shape, (int, np.integer)):
        return [int(shape)]
    return [int(d) for d in shape]


class Initializer:
    """Base class: `init(shape, dtype=None, partition_info=None) -> Tensor`."""

    dtype: _dtypes.DType = _dtypes.float32

    def __call__(self, shape, dtype=None, partition_info=None) -> Tensor:
        raise NotImplementedError

    def get_config(self) -> dict:
        return {}

    @classmethod
    def from_config(cls, config: dict) -> "Initializer":
        return cls(**config)

    def _dtype(self, dtype) -> _dtypes.DType:
        return _dtypes.as_dtype(self.dtype if dtype is None else dtype)


class zeros_initializer(Initializer):  # noqa: N801  (TF1 spelling)
    """Initializes to 0."""

    def __init__(self, dtype=_dtypes.float32) -> None:
        self.dtype = _dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None) -> Tensor:
        return zeros(_shape_list(shape), self._dtype(dtype))

    def get_config(self) -> dict:
        return {"dtype": self.dtype.name}


class ones_initializer(Initializer):  # noqa: N801
    """Initializes to 1."""

    def __init__(self, dtype=_dtypes.float32) -> None:
        self.dtype = _dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None) -> Tensor:
        return ones(_shape_list(shape), self._dtype(dtype))

    def get_config(self) -> dict:
        return {"dtype": self.dtype.name}


class constant_initializer(Initializer):  # noqa: N801
    """Initializes to `value` (a scalar fills; a list is reshaped, or padded with its last
    element as `tf.constant` does; `verify_shape=True` demands the exact shape)."""

    def __init__(self, value=0, dtype=_dtypes.float32, verify_shape: bool = False) -> None:
        if isinstance(value, Tensor):
            raise TypeError("Invalid type for initial value: a tf.Tensor; expected a Python "
                            "scalar, list or NumPy array")
        self.value = value
        self.dtype = _dtypes.as_dtype(dtype)
        self.verify_shape = verify_shape

    def __call__(self, shape, dtype=None, partition_info=None, verify_shape=None) -> Tensor:
        verify = self.verify_shape if verify_shape is None else verify_shape
        arr = _constant_array(self.value, self._dtype(dtype), _shape_list(shape), verify)
        return constant(arr, dtype=arr.dtype)

    def get_config(self) -> dict:
        return {"value": self.value, "dtype": self.dtype.name,
                "verify_shape": self.verify_shape}


class random_normal_initializer(Initializer):  # noqa: N801
    """Normal values with the given mean and stddev."""

    def __init__(self, mean=0.0, stddev=1.0, seed=None, dtype=_dtypes.float32) -> None:
        self.mean, self.stddev, self.seed = mean, stddev, seed
        self.dtype = _dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None) -> Tensor:
        return random_normal(_shape_list(shape), self.mean, self.stddev, self._dtype(dtype),
                             seed=self.seed)

    def get_config(self) -> dict:
        return {"mean": self.mean, "stddev": self.stddev, "seed": self.seed,
                "dtype": self.dtype.name}


class random_uniform_initializer(Initializer):  # noqa: N801
    """Uniform values in [minval, maxval)."""

    def __init__(self, minval=0, maxval=None, seed=None, dtype=_dtypes.float32) -> None:
        self.minval, self.maxval, self.seed = minval, maxval, seed
        self.dtype = _dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None) -> Tensor:
        return random_uniform(_shape_list(shape), self.minval, self.maxval, self._dtype(dtype),
                              seed=self.seed)

    def get_config(self) -> dict:
        return {"minval": self.minval, "maxval": self.maxval, "seed": self.seed,
                "dtype": self.dtype.name}


class truncated_normal_initializer(Initializer):  # noqa: N801
    """Normal values, redrawn when more than two stddevs from the mean."""

    def __init__(self, mean=0.0, stddev=1.0, seed=None, dtype=_dtypes.float32) -> None:
        self.mean, self.stddev, self.seed = mean, stddev, seed
        self.dtype = _dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None) -> Tensor:
        return truncated_normal(_shape_list(shape), self.mean, self.stddev,
                                self._dtype(dtype), seed=self.seed)

    def get_config(self) -> dict:
        return {"mean": self.mean, "stddev": self.stddev, "seed": self.seed,
                "dtype": self.dtype.name}


def _fans(shape: list) -> tuple:
    """(fan_in, fan_out) as TF1 computes them (conv kernels: receptive field times channels)."""
    if len(shape) < 1:
        return 1.0, 1.0
    if len(shape) == 1:
        return float(shape[0]), float(shape[0])
    if len(shape) == 2:
        return float(shape[0]), float(shape[1])
    receptive = float(np.prod(shape[:-2]))
    return shape[-2] * receptive, shape[-1] * receptive


# stddev of a standard normal truncated to [-2, 2]
_TRUNC_STD = 0.87962566103423978


class variance_scaling_initializer(Initializer):  # noqa: N801
    """Values with variance `scale / n`, n = fan_in, fan_out or their mean (`mode`).

    `distribution`: "truncated_normal" (also the legacy "normal"), "untruncated_normal" or
    "uniform" (limit sqrt(3 * scale / n)).
    """

    def __init__(self, scale: float = 1.0, mode: str = "fan_in",
                 distribution: str = "truncated_normal", seed=None,
                 dtype=_dtypes.float32) -> None:
        if scale <= 0.0:
            raise ValueError("`scale` must be positive float.")
        if mode not in ("fan_in", "fan_out", "fan_avg"):
            raise ValueError(f"Invalid `mode` argument: {mode}")
        distribution = distribution.lower()
        if distribution not in ("normal", "uniform", "truncated_normal",
                                "untruncated_normal"):
            raise ValueError(f"Invalid `distribution` argument: {distribution}")
        self.scale, self.mode, self.distribution, self.seed = scale, mode, distribution, seed
        self.dtype = _dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None) -> Tensor:
        shape = _shape_list(shape)
        dtype = self._dtype(dtype)
        fan_in, fan_out = _fans(shape)
        n = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2.0}
        scale = self.scale / max(1.0, n[self.mode])
        if self.distribution in ("normal", "truncated_normal"):
            return truncated_normal(shape, 0.0, math.sqrt(scale) / _TRUNC_STD, dtype,
                                    seed=self.seed)
        if self.distribution == "untruncated_normal":
            return random_normal(shape, 0.0, math.sqrt(scale), dtype, seed=self.seed)
        limit = math.sqrt(3.0 * scale)
        return random_uniform(shape, -limit, limit, dtype, seed=self.seed)

    def get_config(self) -> dict:
        return {"scale": self.scale, "mode": self.mode, "distribution": self.distribution,
                "seed": self.seed, "dtype": self.dtype.name}


class glorot_uniform_initializer(variance_scaling_initializer):  # noqa: N801
    """Xavier uniform: limit sqrt(6 / (fan_in + fan_out)). The get_variable default."""

    def __init__(self, seed=None, dtype=_dtypes.float32) -> None:
        super().__init__(1.0, "fan_avg", "uniform", seed, dtype)

    def get_config(self) -> dict:
        return {"seed": self.seed, "dtype": self.dtype.name}


class glorot_normal_initializer(variance_scaling_initializer):  # noqa: N801
    """Xavier normal: truncated normal with stddev sqrt(2 / (fan_in + fan_out))."""

    def __init__(self, seed=None, dtype=_dtypes.float32) -> None:
        super().__init__(1.0, "fan_avg", "truncated_normal", seed, dtype)

    def get_config(self) -> dict:
        return {"seed": self.seed, "dtype": self.dtype.name}


def he_normal(seed=None) -> Initializer:
    """He normal: variance 2 / fan_in."""
    return variance_scaling_initializer(2.0, "fan_in", "truncated_normal", seed)


def he_uniform(seed=None) -> Initializer:
    """He uniform: limit sqrt(6 / fan_in)."""
    return variance_scaling_initializer(2.0, "fan_in", "uniform", seed)


def lecun_normal(seed=None) -> Initializer:
    """LeCun normal: variance 1 / fan_in."""
    return variance_scaling_initializer(1.0, "fan_in", "truncated_normal", seed)


def lecun_uniform(seed=None) -> Initializer:
    """LeCun uniform: limit sqrt(3 / fan_in)."""
    return variance_scaling_initializer(1.0, "fan_in", "uniform", seed)


def _orthogonal_ref(op, ctx):
    shape = op.attrs["shape"]
    rows = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
    cols = shape[-1]
    a = ctx.rng(op).standard_normal((max(rows, cols), min(rows, cols)))
    q, r = np.linalg.qr(a)
    q = q * np.where(np.diag(r) < 0, -1.0, 1.0)  # a uniform draw over orthogonal matrices
    if rows < cols:
        q = q.T
    out = op.attrs["gain"] * q[:rows, :cols]
    return out.reshape(shape).astype(op.attrs["dtype"].as_numpy_dtype)


register("RandomOrthogonal",
         infer=lambda op: [(op.attrs["dtype"], TensorShape(op.attrs["shape"]))],
         ref=_orthogonal_ref, needs_ctx=True, stateful=True, differentiable=False,
         kind="random",
         examples=[Example(build=lambda: orthogonal_initializer(seed=1)([3, 4]), inputs=[],
                           dtypes=((),))],
         doc="A random (semi-)orthogonal matrix: the rows, or columns, are orthonormal.")


class orthogonal_initializer(Initializer):  # noqa: N801
    """A random orthogonal matrix (the shape is flattened to 2-D [prod(shape[:-1]), n])."""

    def __init__(self, gain: float = 1.0, seed=None, dtype=_dtypes.float32) -> None:
        self.gain, self.seed = gain, seed
        self.dtype = _dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None) -> Tensor:
        shape = _shape_list(shape)
        if len(shape) < 2:
            raise ValueError("The tensor to initialize must be at least two-dimensional")
        attrs = {"shape": tuple(shape), "dtype": self._dtype(dtype), "gain": float(self.gain),
                 **_seed_attrs(self.seed)}
        return make_op("RandomOrthogonal", [], attrs, name="orthogonal").outputs[0]

    def get_config(self) -> dict:
        return {"gain": self.gain, "seed": self.seed, "dtype": self.dtype.name}


class identity_initializer(Initializer):  # noqa: N801
    """`gain` times the identity matrix (2-D shapes only)."""

    def __init__(self, gain: float = 1.0, dtype=_dtypes.float32) -> None:
        self.gain = gain
        self.dtype = _dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None) -> Tensor:
        shape = _shape_list(shape)
        if len(shape) != 2:
            raise ValueError("Identity matrix initializer can only be used for 2D matrices.")
        dtype = self._dtype(dtype)
        with name_scope(None, "identity_initializer"):
            return constant(self.gain * np.eye(*shape), dtype=dtype)

    def get_config(self) -> dict:
        return {"gain": self.gain, "dtype": self.dtype.name}


def _as_initializer(init):
    """Accept a class (instantiated, as TF1 does) or any callable."""
    if isinstance(init, type):
        return init()
    return init

