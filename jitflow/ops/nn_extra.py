"""More of `tf.nn` that classic TF1 programs use: local response normalization (AlexNet and
the CIFAR-10 tutorial), swish/crelu/relu_layer, pooling and convolution aliases, atrous and
1-D convolution, space_to_depth/depth_to_space, the moment helpers, fused_batch_norm,
log_poisson_loss, conv2d_backprop_filter and embedding_lookup_sparse.

All but `LRN` are compositions of existing ops (so they compile and differentiate as those
do); `LRN` has its reference and TF's gradient formula.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from jitflow import dtypes as _dtypes
from jitflow.graph import Tensor, convert_to_tensor, make_op, name_scope
from jitflow.ops.registry import Example, register

__all__ = ["space_to_depth", "depth_to_space"]

NAMESPACES = {
    "nn": ["lrn", "local_response_normalization", "swish", "silu", "crelu", "relu_layer",
           "max_pool2d", "avg_pool2d", "max_pool_v2", "avg_pool_v2", "atrous_conv2d",
           "conv1d", "convolution", "space_to_depth", "depth_to_space", "normalize_moments",
           "sufficient_statistics", "weighted_moments", "fused_batch_norm", "log_poisson_loss",
           "conv2d_backprop_filter", "embedding_lookup_sparse", "scale_regularization_loss",
           "compute_average_loss"],
    "math": [("log_poisson_loss", "log_poisson_loss")],
}


# -- local response normalization -----------------------------------------------------------------
def _lrn_sums(op, x):
    r = op.attrs["depth_radius"]
    sq = np.square(x.astype(np.float64))
    c = x.shape[-1]
    pad = np.pad(sq, [(0, 0)] * (x.ndim - 1) + [(r, r)])
    csum = np.concatenate([np.zeros(x.shape[:-1] + (1,)), np.cumsum(pad, axis=-1)], axis=-1)
    return csum[..., 2 * r + 1:2 * r + 1 + c] - csum[..., :c]


def _lrn_ref(op, x):
    a = op.attrs
    x = np.asarray(x)
    norm = a["bias"] + a["alpha"] * _lrn_sums(op, x)
    return (x / np.power(norm, a["beta"])).astype(x.dtype)


def _lrn_grad_ref(op, g, x, y):
    a = op.attrs
    x, g, y = (np.asarray(v, np.float64) for v in (x, g, y))
    r, alpha, beta = a["depth_radius"], a["alpha"], a["beta"]
    norm = a["bias"] + alpha * _lrn_sums(op, x)
    # dy_i/dx_j = delta_ij N_i^-beta - 2 alpha beta x_i x_j N_i^(-beta-1), j within radius
    t = g * x * np.power(norm, -beta - 1.0)
    c = x.shape[-1]
    pad = np.pad(t, [(0, 0)] * (x.ndim - 1) + [(r, r)])
    csum = np.concatenate([np.zeros(x.shape[:-1] + (1,)), np.cumsum(pad, axis=-1)], axis=-1)
    window = csum[..., 2 * r + 1:2 * r + 1 + c] - csum[..., :c]
    out = g * np.power(norm, -beta) - 2.0 * alpha * beta * x * window
    return out.astype(op.outputs[0].dtype.as_numpy_dtype)


def _lrn_infer(op):
    x = op.inputs[0]
    if x.shape.ndims not in (None, 4):
        raise ValueError(f"Shape must be rank 4 but is rank {x.shape.ndims} for '{op.name}' "
                         "(op: 'LRN')")
    if x.dtype.name not in ("float16", "float32", "float64"):
        raise TypeError(f"LRN needs a float input, got {x.dtype.name}")
    return [(x.dtype, x.shape)]


def _lrn_grad(op, g):
    return [make_op("LRNGrad", [g, op.inputs[0], op.outputs[0]], dict(op.attrs),
                    name="LRNGrad").outputs[0]]


def _np_lrn(x, r=2, bias=1.0, alpha=0.5, beta=0.75):
    out = np.zeros_like(x, dtype=np.float64)
    c = x.shape[-1]
    for k in range(c):
        lo, hi = max(0, k - r), min(c, k + r + 1)
        s = np.sum(np.square(x[..., lo:hi].astype(np.float64)), axis=-1)
        out[..., k] = x[..., k] / (bias + alpha * s) ** beta
    return out


register("LRN", infer=_lrn_infer, ref=_lrn_ref, grad=_lrn_grad, kind="other",
         doc="x / (bias + alpha * sum of squares over depth_radius channels)^beta.",
         examples=[Example(lambda x: lrn(x, 2, 1.0, 0.5, 0.75), [(2, 3, 2, 6)], _np_lrn)])
register("LRNGrad", infer=lambda op: [(op.inputs[1].dtype, op.inputs[1].shape)],
         ref=_lrn_grad_ref, differentiable=False, kind="other",
         doc="Inputs (output gradient, input, output): the gradient of LRN.")


def lrn(input, depth_radius: int = 5, bias: float = 1.0, alpha: float = 1.0,  # noqa: A002
        beta: float = 0.5, name: Optional[str] = None) -> Tensor:
    """`tf.nn.lrn` / `local_response_normalization`: each channel divided by
    (bias + alpha * the sum of squares of the channels within `depth_radius`)^beta."""
    with name_scope(name, "LRN", [input]) as scope:
        x = convert_to_tensor(input, name="input")
        attrs = {"depth_radius": int(depth_radius), "bias": float(bias),
                 "alpha": float(alpha), "beta": float(beta)}
        return make_op("LRN", [x], attrs, name=scope[:-1] if scope else "LRN").outputs[0]


local_response_normalization = lrn


# -- activations and small layers -----------------------------------------------------------------
def swish(features, beta: float = 1.0, name: Optional[str] = None) -> Tensor:
    """`tf.nn.swish` / `silu`: x * sigmoid(beta * x)."""
    from jitflow.ops.math.unary import sigmoid
    with name_scope(name, "swish", [features]):
        x = convert_to_tensor(features, name="features")
        return x * sigmoid(x * beta if beta != 1.0 else x)


silu = swish


def crelu(features, name: Optional[str] = None, axis: int = -1) -> Tensor:
    """`tf.nn.crelu`: relu of [x, -x] concatenated along `axis`."""
    from jitflow.ops.array import concat
    from jitflow.ops.nn.activations import relu
    with name_scope(name, "CRelu", [features]):
        x = convert_to_tensor(features, name="features")
        return relu(concat([x, -x], axis))


def relu_layer(x, weights, biases, name: Optional[str] = None) -> Tensor:
    """`tf.nn.relu_layer`: relu(x @ weights + biases)."""
    from jitflow.ops.nn.activations import relu
    from jitflow.ops.nn.basic import xw_plus_b
    with name_scope(name, "relu_layer", [x, weights, biases]):
        return relu(xw_plus_b(x, weights, biases))


def max_pool2d(input, ksize, strides, padding, data_format: str = "NHWC",  # noqa: A002
               name: Optional[str] = None) -> Tensor:
    """`tf.nn.max_pool2d`: `max_pool` of a 4-D input."""
    from jitflow.ops.nn.pool import max_pool
    return max_pool(input, ksize, strides, padding, data_format, name)


def avg_pool2d(input, ksize, strides, padding, data_format: str = "NHWC",  # noqa: A002
               name: Optional[str] = None) -> Tensor:
    """`tf.nn.avg_pool2d`: `avg_pool` of a 4-D input."""
    from jitflow.ops.nn.pool import avg_pool
    return avg_pool(input, ksize, strides, padding, data_format, name)


max_pool_v2 = max_pool2d
avg_pool_v2 = avg_pool2d


def atrous_conv2d(value, filters, rate: int, padding: str,
                  name: Optional[str] = None) -> Tensor:
    """`tf.nn.atrous_conv2d`: convolution with the filter taps `rate` pixels apart."""
    from jitflow.ops.nn.conv import conv2d
    if rate < 1:
        raise ValueError(f"rate {rate} cannot be less than one")
    return conv2d(value, filters, [1, 1, 1, 1], padding, dilations=[1, rate, rate, 1],
                  name=name or "atrous_conv2d")


def conv1d(value=None, filters=None, stride=None, padding=None, use_cudnn_on_gpu=None,
           data_format: str = "NWC", name: Optional[str] = None, input=None,  # noqa: A002
           dilations=None) -> Tensor:
    """`tf.nn.conv1d`: [batch, width, in] by [k, in, out], as a 2-D convolution of height 1
    (as TF does)."""
    from jitflow.ops.array import expand_dims, squeeze
    from jitflow.ops.nn.conv import conv2d
    from jitflow.ops.reduce import _legacy
    value = _legacy(value, input, "value", "input")
    if data_format not in ("NWC", "NHWC"):
        raise ValueError(f"data_format {data_format!r} is not supported (only NWC)")
    with name_scope(name, "conv1d", [value, filters]) as scope:
        x = expand_dims(convert_to_tensor(value, name="value"), 1)
        f = expand_dims(convert_to_tensor(filters, name="filters"), 0)
        d = 1 if dilations is None else int(np.reshape(dilations, -1)[-1] if np.ndim(
            dilations) else dilations)
        y = conv2d(x, f, [1, 1, int(stride), 1], padding, dilations=[1, 1, d, 1])
        return squeeze(y, [1], name=scope[:-1])


def convolution(input, filter=None, padding=None, strides=None,  # noqa: A002
                dilation_rate=None, name: Optional[str] = None, data_format=None,
                filters=None, dilations=None) -> Tensor:
    """`tf.nn.convolution` for 1-D and 2-D inputs (channels last)."""
    from jitflow.ops.nn.conv import conv2d
    from jitflow.ops.reduce import _legacy
    filter = _legacy(filter, filters, "filter", "filters")  # noqa: A001
    dilation_rate = _legacy(dilation_rate, dilations, "dilation_rate", "dilations")
    x = convert_to_tensor(input, name="input")
    r = x.shape.ndims
    if r == 3:
        return conv1d(x, filter, 1 if strides is None else int(np.reshape(strides, -1)[0]),
                      padding, dilations=None if dilation_rate is None
                      else int(np.reshape(dilation_rate, -1)[0]), name=name)
    if r != 4:
        raise NotImplementedError("convolution supports 1-D and 2-D inputs")
    s = [1, 1] if strides is None else list(np.broadcast_to(strides, 2))
    d = [1, 1] if dilation_rate is None else list(np.broadcast_to(dilation_rate, 2))
    return conv2d(x, filter, [1, *s, 1], padding, dilations=[1, *d, 1],
                  name=name or "convolution")


def space_to_depth(input, block_size: int, name: Optional[str] = None,  # noqa: A002
                   data_format: str = "NHWC") -> Tensor:
    """`tf.space_to_depth`: each block_size x block_size patch becomes channels."""
    from jitflow.ops.array import reshape, transpose
    b = int(block_size)
    with name_scope(name, "SpaceToDepth", [input]):
        x = convert_to_tensor(input, name="input")
        n, h, w, c = x.shape.as_tuple()
        if h is None or w is None or c is None:
            raise NotImplementedError("space_to_depth needs static height, width, channels")
        if h % b or w % b:
            raise ValueError(f"Image height {h} and width {w} must be divisible by "
                             f"block_size {b}")
        y = reshape(x, [-1, h // b, b, w // b, b, c])
        y = transpose(y, [0, 1, 3, 2, 4, 5])
        return reshape(y, [-1, h // b, w // b, b * b * c])


def depth_to_space(input, block_size: int, name: Optional[str] = None,  # noqa: A002
                   data_format: str = "NHWC") -> Tensor:
    """`tf.depth_to_space`: the inverse of `space_to_depth`."""
    from jitflow.ops.array import reshape, transpose
    b = int(block_size)
    with name_scope(name, "DepthToSpace", [input]):
        x = convert_to_tensor(input, name="input")
        n, h, w, c = x.shape.as_tuple()
        if h is None or w is None or c is None:
            raise NotImplementedError("depth_to_space needs static height, width, channels")
        if c % (b * b):
            raise ValueError(f"Input depth {c} must be divisible by block_size^2 = {b * b}")
        y = reshape(x, [-1, h, w, b, b, c // (b * b)])
        y = transpose(y, [0, 1, 3, 2, 4, 5])
        return reshape(y, [-1, h * b, w * b, c // (b * b)])


# -- moments and batch norm ------------------------------------------------------------------------
def sufficient_statistics(x, axes, shift=None, keep_dims=None, name: Optional[str] = None,
                          keepdims=None) -> tuple:
    """`tf.nn.sufficient_statistics`: (count, sum of x - shift, sum of squares, shift)."""
    from jitflow.ops.array import shape, gather
    from jitflow.ops.math.casting import cast
    from jitflow.ops.math.unary import square
    from jitflow.ops.reduce import _legacy, normalize_axis, reduce_prod, reduce_sum
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
    from jitflow.ops.math.unary import reciprocal, square
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
    from jitflow.ops.array import squeeze
    from jitflow.ops.math.arithmetic import div_no_nan
    from jitflow.ops.math.unary import square
    from jitflow.ops.reduce import _legacy, normalize_axis, reduce_sum
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
    from jitflow.ops.math.casting import cast
    from jitflow.ops.nn.basic import batch_normalization, moments
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
            from jitflow.ops.array import shape
            from jitflow.ops.reduce import reduce_prod
            nn_ = cast(reduce_prod(shape(x)[:3]), x.dtype)
            return y, m, v * nn_ / (nn_ - 1.0)
        if mean is None or variance is None:
            raise ValueError("fused_batch_norm: mean and variance are needed when not "
                             "training")
        return batch_normalization(x, mean, variance, offset, scale, epsilon), \
            convert_to_tensor(mean), convert_to_tensor(variance)


# -- losses ---------------------------------------------------------------------------------------
def log_poisson_loss(targets, log_input, compute_full_loss: bool = False,
                     name: Optional[str] = None) -> Tensor:
    """`tf.nn.log_poisson_loss`: exp(log_input) - targets * log_input (plus Stirling's
    approximation of log(targets!) where targets > 1 with `compute_full_loss`)."""
    from jitflow.ops.math.common import scalar_like
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
    from jitflow.ops.array import shape
    from jitflow.ops.math.casting import cast
    from jitflow.ops.reduce import reduce_sum
    loss = convert_to_tensor(per_example_loss)
    if sample_weight is not None:
        loss = loss * sample_weight
    n = global_batch_size if global_batch_size is not None else cast(shape(loss)[0],
                                                                     loss.dtype)
    return reduce_sum(loss) / n


# -- conv2d_backprop_filter and embedding_lookup_sparse --------------------------------------------
def conv2d_backprop_filter(input, filter_sizes, out_backprop, strides,  # noqa: A002
                           padding, use_cudnn_on_gpu: bool = True, data_format: str = "NHWC",
                           dilations=(1, 1, 1, 1), name: Optional[str] = None) -> Tensor:
    """`tf.nn.conv2d_backprop_filter`: the gradient of `conv2d` with respect to a filter of
    shape `filter_sizes` (known when the graph is built)."""
    from jitflow.ops.array import zeros
    from jitflow.ops.nn.window import _four, _padding
    if isinstance(filter_sizes, Tensor):
        if filter_sizes.op.type != "Const":
            raise NotImplementedError("conv2d_backprop_filter: filter_sizes must be static")
        filter_sizes = [int(v) for v in np.reshape(filter_sizes.op.attrs["value"], -1)]
    with name_scope(name, "Conv2DBackpropFilter", [input, out_backprop]) as scope:
        x = convert_to_tensor(input, name="input")
        g = convert_to_tensor(out_backprop, name="out_backprop")
        f = zeros([int(v) for v in filter_sizes], dtype=x.dtype)
        attrs = {"strides": _four(strides, "strides"), "padding": _padding(padding),
                 "dilations": _four(dilations, "dilations"), "data_format": "NHWC"}
        return make_op("Conv2DBackpropFilter", [x, f, g], attrs,
                       name=scope[:-1]).outputs[0]


def embedding_lookup_sparse(params, sp_ids, sp_weights, partition_strategy: str = "mod",
                            name: Optional[str] = None, combiner: Optional[str] = None,
                            max_norm=None) -> Tensor:
    """`tf.nn.embedding_lookup_sparse`: for each row of the SparseTensor `sp_ids`, the
    embeddings of its ids combined ("sum", "mean" (default) or "sqrtn"), weighted by
    `sp_weights` when given."""
    from jitflow.ops.array import expand_dims
    from jitflow.ops.math.arithmetic import div_no_nan
    from jitflow.ops.math.casting import cast
    from jitflow.ops.math.unary import sqrt, square
    from jitflow.ops.nn.embedding import embedding_lookup
    from jitflow.ops.segment import segment_sum
    combiner = combiner or "mean"
    if combiner not in ("sum", "mean", "sqrtn"):
        raise ValueError("combiner must be one of 'mean', 'sqrtn' or 'sum'")
    with name_scope(name, "embedding_lookup_sparse", [sp_ids]):
        rows = cast(sp_ids.indices[:, 0], _dtypes.int32)
        ids = sp_ids.values
        emb = embedding_lookup(params, ids, partition_strategy=partition_strategy,
                               max_norm=max_norm)
        if sp_weights is None:
            total = segment_sum(emb, rows)
            if combiner == "sum":
                return total
            ones = cast(ids * 0 + 1, emb.dtype)
            cnt = segment_sum(ones, rows)
            div = cnt if combiner == "mean" else sqrt(cnt)
            return div_no_nan(total, expand_dims(div, -1))  # an empty row stays 0
        w = cast(sp_weights.values, emb.dtype)
        total = segment_sum(emb * expand_dims(w, -1), rows)
        if combiner == "sum":
            return total
        wsum = segment_sum(w if combiner == "mean" else square(w), rows)
        div = wsum if combiner == "mean" else sqrt(wsum)
        return div_no_nan(total, expand_dims(div, -1))

