"""The small `tf.nn` ops: L2Loss (`l2_loss`), BiasAdd (`bias_add`, `xw_plus_b`,
`relu_layer`), and compositions of other ops: `moments` and its helpers
(`sufficient_statistics`, `normalize_moments`, `weighted_moments`), `l2_normalize`,
`batch_normalization`, `fused_batch_norm`, `dropout`, `zero_fraction`, and the small losses
`log_poisson_loss`, `scale_regularization_loss`, `compute_average_loss`.
"""
from __future__ import annotations

import numbers
from typing import Optional

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.core.graph import Tensor, convert_to_tensor, make_op, name_scope
from jitflow.ops.math.arithmetic import add, multiply
from jitflow.ops.math.casting import cast
from jitflow.ops.math.common import (
    _FLOATS, _NUMERIC, broadcast_reduced, check_dtype, scalar_like, stop_gradient, unbroadcast,
)
from jitflow.ops.math.compare import equal, maximum, squared_difference
from jitflow.ops.math.unary import floor, rsqrt, square
from jitflow.ops.reduce import _legacy, normalize_axis, reduce_mean, reduce_sum
from jitflow.ops.registry import Example, register
from jitflow.core.shapes import TensorShape, shape_tf_str

__all__ = [
    "l2_loss",
]

NAMESPACES = {
    "nn": [
        "l2_loss", "bias_add", "moments", "dropout", "l2_normalize", "xw_plus_b",
        "batch_normalization", "zero_fraction", "relu_layer", "normalize_moments",
        "sufficient_statistics", "weighted_moments", "fused_batch_norm", "log_poisson_loss",
        "scale_regularization_loss", "compute_average_loss",
    ],
    "math": [
        "l2_normalize", "log_poisson_loss",
    ],
}


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
                from jitflow.ops.shape_ops import shape as _shape
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


def zero_fraction(value, name: Optional[str] = None) -> Tensor:
    """`tf.nn.zero_fraction`: the fraction of elements of `value` that are zero (float32)."""
    with name_scope(name, "zero_fraction", [value]) as scope:
        value = convert_to_tensor(value, name="value")
        zero = scalar_like(False if value.dtype.is_bool else 0, value)
        is_zero = cast(equal(value, zero), _dtypes.float32)
        return reduce_mean(is_zero, name=scope)


# -- relu_layer, moment helpers, fused_batch_norm, small losses (compositions) --------------------
def relu_layer(x, weights, biases, name: Optional[str] = None) -> Tensor:
    """`tf.nn.relu_layer`: relu(x @ weights + biases)."""
    from jitflow.ops.nn.activations import relu
    with name_scope(name, "relu_layer", [x, weights, biases]):
        return relu(xw_plus_b(x, weights, biases))


def sufficient_statistics(x, axes, shift=None, keep_dims=None, name: Optional[str] = None,
                          keepdims=None) -> tuple:
    """`tf.nn.sufficient_statistics`: (count, sum of x - shift, sum of squares, shift)."""
    from jitflow.ops.shape_ops import shape
    from jitflow.ops.slicing import gather
    from jitflow.ops.reduce import reduce_prod
    keep = bool(_legacy(keepdims, keep_dims, "keepdims", "keep_dims"))
    with name_scope(name, "sufficient_statistics", [x, shift]):
        x = convert_to_tensor(x, name="x")
        axes_t = normalize_axis(x, axes, "sufficient_statistics")
        dims = x.shape.as_tuple()
        if dims is not None and all(dims[a] is not None for a in axes_t):
            count = convert_to_tensor(np.asarray(np.prod([dims[a] for a in axes_t]),
                                                 dtype=x.dtype.as_numpy_dtype), name="count")
        else:
            count = cast(reduce_prod(gather(shape(x), list(axes_t))), x.dtype, name="count")
        y = x if shift is None else x - shift
        m_ss = reduce_sum(y, axes_t, keepdims=keep, name="mean_ss")
        v_ss = reduce_sum(square(y), axes_t, keepdims=keep, name="var_ss")
        return count, m_ss, v_ss, shift


def normalize_moments(counts, mean_ss, variance_ss, shift, name: Optional[str] = None) -> tuple:
    """`tf.nn.normalize_moments`: (mean, variance) from sufficient statistics."""
    from jitflow.ops.math.unary import reciprocal
    with name_scope(name, "normalize", [counts, mean_ss, variance_ss, shift]):
        div = reciprocal(convert_to_tensor(counts), name="divisor")
        shifted_mean = mean_ss * div
        mean = shifted_mean + shift if shift is not None else shifted_mean
        variance = variance_ss * div - square(shifted_mean)
        return mean, variance


def weighted_moments(x, axes, frequency_weights, name: Optional[str] = None,
                     keep_dims=None, keepdims=None) -> tuple:
    """`tf.nn.weighted_moments`: the mean and variance of `x` weighted by
    `frequency_weights` (broadcast against x) over `axes`."""
    from jitflow.ops.shape_ops import squeeze
    from jitflow.ops.math.arithmetic import div_no_nan
    keep = bool(_legacy(keepdims, keep_dims, "keepdims", "keep_dims"))
    with name_scope(name, "weighted_moments", [x, frequency_weights, axes]):
        x = convert_to_tensor(x, name="x")
        w = convert_to_tensor(frequency_weights, dtype=x.dtype
                              if not isinstance(frequency_weights, Tensor) else None)
        ax = normalize_axis(x, axes, "weighted_moments")
        wx = reduce_sum(w * x, ax, keepdims=True)
        total = reduce_sum(w + x * 0, ax, keepdims=True)
        mean = div_no_nan(wx, total)
        var = div_no_nan(reduce_sum(w * square(x - mean), ax, keepdims=True), total)
        if not keep:
            mean, var = squeeze(mean, list(ax)), squeeze(var, list(ax))
        return mean, var


def fused_batch_norm(x, scale, offset, mean=None, variance=None, epsilon: float = 0.001,
                     data_format: str = "NHWC", is_training: bool = True,
                     name: Optional[str] = None, exponential_avg_factor: float = 1.0) -> tuple:
    """`tf.nn.fused_batch_norm`: (y, batch mean, batch variance) when training (variance
    with Bessel's correction, as TF returns it), or (y, mean, variance) with the given
    statistics."""
    if data_format != "NHWC":
        raise ValueError("fused_batch_norm: only NHWC is supported")
    with name_scope(name, "FusedBatchNorm", [x, scale, offset]):
        x = convert_to_tensor(x, name="x")
        if is_training:
            m, v = moments(x, [0, 1, 2])
            y = batch_normalization(x, m, v, offset, scale, epsilon)
            dims = x.shape.as_tuple()
            n = np.prod(dims[:3]) if None not in dims[:3] else None
            if n is not None:
                corr = float(n) / max(float(n) - 1.0, 1.0)
                return y, m, v * corr
            from jitflow.ops.shape_ops import shape
            from jitflow.ops.reduce import reduce_prod
            nn_ = cast(reduce_prod(shape(x)[:3]), x.dtype)
            return y, m, v * nn_ / (nn_ - 1.0)
        if mean is None or variance is None:
            raise ValueError("fused_batch_norm: mean and variance are needed when not "
                             "training")
        return batch_normalization(x, mean, variance, offset, scale, epsilon), \
            convert_to_tensor(mean), convert_to_tensor(variance)


def log_poisson_loss(targets, log_input, compute_full_loss: bool = False,
                     name: Optional[str] = None) -> Tensor:
    """`tf.nn.log_poisson_loss`: exp(log_input) - targets * log_input (plus Stirling's
    approximation of log(targets!) where targets > 1 with `compute_full_loss`)."""
    from jitflow.ops.math.compare import greater, where_v2
    from jitflow.ops.math.unary import exp, log
    with name_scope(name, "log_poisson_loss", [targets, log_input]):
        li = convert_to_tensor(log_input, name="log_input")
        t = convert_to_tensor(targets, dtype=li.dtype if not isinstance(targets, Tensor)
                              else None, name="targets")
        result = exp(li) - li * t
        if compute_full_loss:
            half_log_2pi = scalar_like(0.5 * np.log(2 * np.pi), t)
            stirling = t * log(t) - t + 0.5 * log(t) + half_log_2pi
            result = result + where_v2(greater(t, scalar_like(1, t)), stirling,
                                       t * scalar_like(0, t))
        return result


def scale_regularization_loss(regularization_loss) -> Tensor:
    """`tf.nn.scale_regularization_loss`: the loss itself (one replica)."""
    return convert_to_tensor(regularization_loss)


def compute_average_loss(per_example_loss, sample_weight=None,
                         global_batch_size=None) -> Tensor:
    """`tf.nn.compute_average_loss`: sum(per_example_loss * weight) / batch size."""
    from jitflow.ops.shape_ops import shape
    loss = convert_to_tensor(per_example_loss)
    if sample_weight is not None:
        loss = loss * sample_weight
    n = global_batch_size if global_batch_size is not None else cast(shape(loss)[0],
                                                                     loss.dtype)
    return reduce_sum(loss) / n
