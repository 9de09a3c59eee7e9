"""`tf.contrib.layers`' layer functions with TF 1.15's signatures, defaults and names.

What sets them apart from `tf.layers`:
- activation `tf.nn.relu` by default for fully_connected and the convolutions; weights from
  `xavier_initializer()`, biases from zeros;
- variables named `weights` and `biases` (not kernel and bias), in a scope named after the
  function (`fully_connected`, `Conv`, `BatchNorm`, ... made unique: `Conv_1`), and all of
  them *model variables* (in MODEL_VARIABLES too) plus `variables_collections`;
- a `normalizer_fn` (e.g. `batch_norm`) replaces the biases; `outputs_collections` collects
  the result under the scope's name (slim's end points);
- every function takes part in `arg_scope`.

The dense and convolution math is jitflow's `tf.layers` (jitflow/lib/layers.py), built inside
the contrib scope; a custom getter on that scope renames kernel/bias and makes model variables,
as TF 1.15 does. Only channels-last data (NHWC) is supported, except by batch_norm.
"""
from __future__ import annotations

import functools
import inspect
import numbers
from typing import Callable, Optional

import jitflow as tf
from jitflow.contrib.framework.arg_scope import add_arg_scope
from jitflow.contrib.framework.variables import model_variable
from jitflow.contrib.layers import initializers
from jitflow.contrib.layers.utils import (collect_named_outputs, constant_value,
                                          get_variable_collections, smart_cond,
                                          two_element_tuple)
from jitflow.core.graph import GraphKeys
from jitflow.lib import layers as _core

__all__ = [
    "avg_pool2d", "batch_norm", "bias_add", "conv1d", "conv2d", "conv2d_transpose",
    "convolution", "convolution1d", "convolution2d", "convolution2d_transpose", "dropout",
    "elu", "embed_sequence", "flatten", "fully_connected", "layer_norm", "linear",
    "max_pool2d", "one_hot_encoding", "relu", "relu6", "repeat", "separable_conv2d",
    "separable_convolution2d", "softmax", "stack", "unit_norm",
]

DATA_FORMAT_NHWC = "NHWC"
DATA_FORMAT_NCHW = "NCHW"
_RENAME = {"kernel": "weights", "bias": "biases"}


# -- shared pieces --------------------------------------------------------------------------------
def _layer_getter(rename: Optional[dict] = None) -> Callable:
    """A custom getter for a contrib layer's variable scope: each variable becomes a model
    variable, `kernel` and `bias` (tf.layers' names) become `weights` and `biases`."""
    def getter(next_getter, name, shape=None, dtype=None, initializer=None, regularizer=None,
               trainable=None, collections=None, **_):
        short = name.rsplit("/", 1)[-1]
        if rename and short in rename:
            name = name[:len(name) - len(short)] + rename[short]
        return model_variable(name, shape=shape, dtype=dtype, initializer=initializer,
                              regularizer=regularizer,
                              trainable=True if trainable is None else trainable,
                              collections=collections, custom_getter=next_getter)
    return getter


def _add_to_collections(var, variables_collections, name: str) -> None:
    for key in get_variable_collections(variables_collections, name) or []:
        if var not in tf.get_collection(key):
            tf.add_to_collection(key, var)


def _build(layer: _core.Layer, inputs):
    """Build a tf.layers layer in the current (contrib) scope and apply it once."""
    layer.build(inputs.shape)
    layer.built = True
    return layer.call(inputs)


def _finish(outputs, normalizer_fn, normalizer_params, activation_fn):
    if normalizer_fn is not None:
        outputs = normalizer_fn(outputs, **(normalizer_params or {}))
    if activation_fn is not None:
        outputs = activation_fn(outputs)
    return outputs


def _apply(layer: _core.Layer, x, sc, variables_collections, outputs_collections,
           normalizer_fn, normalizer_params, activation_fn):
    """A weights layer's common end: build and apply it, file its weights and biases in
    `variables_collections`, normalize, activate, and collect the output under the scope."""
    out = _build(layer, x)
    _add_to_collections(layer.kernel, variables_collections, "weights")
    if layer.bias is not None:
        _add_to_collections(layer.bias, variables_collections, "biases")
    out = _finish(out, normalizer_fn, normalizer_params, activation_fn)
    return collect_named_outputs(outputs_collections, sc.name, out)


def _use_bias(normalizer_fn, biases_initializer) -> bool:
    return normalizer_fn is None and biases_initializer is not None


def _padding_arg(padding: str) -> str:
    p = str(padding).upper()
    if p not in ("SAME", "VALID"):
        raise ValueError(f"padding must be 'SAME' or 'VALID', got {padding!r}")
    return p


def _channels_last_only(data_format, what: str) -> None:
    if data_format is not None and data_format.startswith("NC"):
        raise NotImplementedError(f"{what}: data_format={data_format!r} is not supported by "
                                  "jitflow (channels-last only)")


def _rank_at_least(x, rank: int, layer: str) -> None:
    nd = x.shape.ndims
    if nd is None:
        raise ValueError(f"Inputs {x.name} of {layer} have undefined rank.")
    if nd < rank:
        raise ValueError(f"Input 0 of layer {layer} is incompatible with the layer: expected "
                         f"min_ndim={rank}, found ndim={nd}. Full shape received: {x.shape}")


def _rank_exactly(x, rank: int, layer: str) -> None:
    nd = x.shape.ndims
    if nd is not None and nd != rank:
        raise ValueError(f"Input 0 of layer {layer} is incompatible with the layer: expected "
                         f"ndim={rank}, found ndim={nd}. Full shape received: {x.shape}")


# -- fully connected ------------------------------------------------------------------------------
@add_arg_scope
def fully_connected(inputs, num_outputs: int, activation_fn=tf.nn.relu, normalizer_fn=None,
                    normalizer_params=None,
                    weights_initializer=initializers.xavier_initializer(),
                    weights_regularizer=None, biases_initializer=tf.zeros_initializer(),
                    biases_regularizer=None, reuse=None, variables_collections=None,
                    outputs_collections=None, trainable: bool = True, scope=None):
    """`activation_fn(inputs @ weights + biases)` with variables `<scope>/weights`
    [depth, num_outputs] and `<scope>/biases` (none with a normalizer_fn or
    `biases_initializer=None`); inputs of rank > 2 are contracted on their last axis."""
    if isinstance(num_outputs, bool) or not isinstance(num_outputs, numbers.Integral):
        raise ValueError(f"num_outputs type should be one of [<class 'int'>], got "
                         f"{type(num_outputs)}.")
    with tf.variable_scope(scope, "fully_connected", [inputs], reuse=reuse,
                           custom_getter=_layer_getter(_RENAME)) as sc:
        x = tf.convert_to_tensor(inputs)
        _rank_at_least(x, 2, sc.name)
        layer = _core.Dense(int(num_outputs), use_bias=_use_bias(normalizer_fn,
                                                                 biases_initializer),
                            kernel_initializer=weights_initializer,
                            bias_initializer=biases_initializer,
                            kernel_regularizer=weights_regularizer,
                            bias_regularizer=biases_regularizer, trainable=trainable,
                            dtype=x.dtype.base_dtype)
        return _apply(layer, x, sc, variables_collections, outputs_collections, normalizer_fn,
                      normalizer_params, activation_fn)


# `linear`, `relu`, ...: fully_connected with another activation (TF 1.15's partials)
linear = functools.partial(fully_connected, activation_fn=None)
relu = functools.partial(fully_connected, activation_fn=tf.nn.relu)
relu6 = functools.partial(fully_connected, activation_fn=tf.nn.relu6)
elu = functools.partial(fully_connected, activation_fn=tf.nn.elu)


# -- convolutions ---------------------------------------------------------------------------------
@add_arg_scope
def convolution(inputs, num_outputs: int, kernel_size, stride=1, padding: str = "SAME",
                data_format=None, rate=1, activation_fn=tf.nn.relu, normalizer_fn=None,
                normalizer_params=None, weights_initializer=initializers.xavier_initializer(),
                weights_regularizer=None, biases_initializer=tf.zeros_initializer(),
                biases_regularizer=None, reuse=None, variables_collections=None,
                outputs_collections=None, trainable: bool = True, scope=None, conv_dims=None):
    """An N-D convolution (N = 1 or 2 from the rank of `inputs`) with `weights`
    [*kernel_size, in, num_outputs] and `biases`, then the normalizer and activation; scope
    `Conv`. `stride` and `rate` (dilation) are an int or one per spatial axis."""
    if data_format not in (None, "NWC", "NCW", "NHWC", "NCHW", "NDHWC", "NCDHW"):
        raise ValueError(f"Invalid data_format: {data_format!r}")
    _channels_last_only(data_format, "convolution")
    with tf.variable_scope(scope, "Conv", [inputs], reuse=reuse,
                           custom_getter=_layer_getter(_RENAME)) as sc:
        x = tf.convert_to_tensor(inputs)
        rank = x.shape.ndims
        if conv_dims is not None and rank is not None and rank != conv_dims + 2:
            raise ValueError(f"Convolution expects input with rank {conv_dims + 2}, got "
                             f"{rank} (inputs {x.name}, shape {x.shape})")
        if rank == 3:
            layer_class = _core.Conv1D
        elif rank == 4:
            layer_class = _core.Conv2D
        elif rank == 5:
            raise NotImplementedError("3-D convolutions are not supported by jitflow")
        else:
            raise ValueError(f"Convolution not supported for input with rank {rank} "
                             f"(inputs {x.name}, shape {x.shape})")
        layer = layer_class(int(num_outputs), kernel_size, strides=stride,
                            padding=_padding_arg(padding), dilation_rate=rate,
                            use_bias=_use_bias(normalizer_fn, biases_initializer),
                            kernel_initializer=weights_initializer,
                            bias_initializer=biases_initializer,
                            kernel_regularizer=weights_regularizer,
                            bias_regularizer=biases_regularizer, trainable=trainable,
                            dtype=x.dtype.base_dtype)
        return _apply(layer, x, sc, variables_collections, outputs_collections, normalizer_fn,
                      normalizer_params, activation_fn)


def _fixed_rank(conv_dims: int, name: str) -> Callable:
    """`convolution` for inputs of one rank (TF 1.15's convolution1d / convolution2d)."""
    def conv(inputs, num_outputs, kernel_size, *args, **kwargs):
        return convolution(inputs, num_outputs, kernel_size, *args, conv_dims=conv_dims,
                           **kwargs)
    params = [p for p in inspect.signature(convolution).parameters.values()
              if p.name != "conv_dims"]
    conv.__signature__ = inspect.Signature(params)
    conv.__name__ = conv.__qualname__ = name
    conv.__doc__ = f"`convolution` for inputs of rank {conv_dims + 2} (scope `Conv`)."
    return add_arg_scope(conv)


convolution1d = _fixed_rank(1, "convolution1d")
convolution2d = _fixed_rank(2, "convolution2d")
conv1d = convolution1d
conv2d = convolution2d


@add_arg_scope
def convolution2d_transpose(inputs, num_outputs: int, kernel_size, stride=1,
                            padding: str = "SAME", data_format: str = DATA_FORMAT_NHWC,
                            activation_fn=tf.nn.relu, normalizer_fn=None,
                            normalizer_params=None,
                            weights_initializer=initializers.xavier_initializer(),
                            weights_regularizer=None,
                            biases_initializer=tf.zeros_initializer(), biases_regularizer=None,
                            reuse=None, variables_collections=None, outputs_collections=None,
                            trainable: bool = True, scope=None):
    """A transposed 2-D convolution (weights [kh, kw, num_outputs, in]) that grows the spatial
    size by `stride`; scope `Conv2d_transpose`."""
    if data_format not in (DATA_FORMAT_NCHW, DATA_FORMAT_NHWC):
        raise ValueError("data_format has to be either NCHW or NHWC.")
    _channels_last_only(data_format, "convolution2d_transpose")
    with tf.variable_scope(scope, "Conv2d_transpose", [inputs], reuse=reuse,
                           custom_getter=_layer_getter(_RENAME)) as sc:
        x = tf.convert_to_tensor(inputs)
        layer = _core.Conv2DTranspose(int(num_outputs), kernel_size, strides=stride,
                                      padding=_padding_arg(padding),
                                      use_bias=_use_bias(normalizer_fn, biases_initializer),
                                      kernel_initializer=weights_initializer,
                                      bias_initializer=biases_initializer,
                                      kernel_regularizer=weights_regularizer,
                                      bias_regularizer=biases_regularizer, trainable=trainable,
                                      dtype=x.dtype.base_dtype)
        return _apply(layer, x, sc, variables_collections, outputs_collections, normalizer_fn,
                      normalizer_params, activation_fn)


conv2d_transpose = convolution2d_transpose


@add_arg_scope
def separable_convolution2d(inputs, num_outputs, kernel_size, depth_multiplier: int = 1,
                            stride=1, padding: str = "SAME",
                            data_format: str = DATA_FORMAT_NHWC, rate=1,
                            activation_fn=tf.nn.relu, normalizer_fn=None,
                            normalizer_params=None,
                            weights_initializer=initializers.xavier_initializer(),
                            pointwise_initializer=None, weights_regularizer=None,
                            biases_initializer=tf.zeros_initializer(), biases_regularizer=None,
                            reuse=None, variables_collections=None, outputs_collections=None,
                            trainable: bool = True, scope=None):
    """A depthwise convolution (`depthwise_weights` [kh, kw, in, depth_multiplier]) followed,
    unless `num_outputs` is None, by a 1x1 convolution (`pointwise_weights`
    [1, 1, in * depth_multiplier, num_outputs]); scope `SeparableConv2d`."""
    if data_format not in (DATA_FORMAT_NCHW, DATA_FORMAT_NHWC):
        raise ValueError("data_format has to be either NCHW or NHWC.")
    _channels_last_only(data_format, "separable_convolution2d")
    with tf.variable_scope(scope, "SeparableConv2d", [inputs], reuse=reuse) as sc:
        x = tf.convert_to_tensor(inputs)
        _rank_exactly(x, 4, sc.name)
        cin = x.shape.as_list()[-1]
        if cin is None:
            raise ValueError(f"The channel dimension of the inputs {x.name} should be defined. "
                             "Found `None`.")
        dtype = x.dtype.base_dtype
        kh, kw = two_element_tuple(kernel_size)
        sh, sw = two_element_tuple(stride)
        rh, rw = two_element_tuple(rate)
        weights_coll = get_variable_collections(variables_collections, "weights")
        depthwise = model_variable("depthwise_weights", shape=[kh, kw, cin, depth_multiplier],
                                   dtype=dtype, initializer=weights_initializer,
                                   regularizer=weights_regularizer, trainable=trainable,
                                   collections=weights_coll)
        strides = [1, sh, sw, 1]
        dil = None if (rh, rw) == (1, 1) else [rh, rw]
        if num_outputs is not None:
            pointwise = model_variable(
                "pointwise_weights", shape=[1, 1, cin * depth_multiplier, num_outputs],
                dtype=dtype, initializer=pointwise_initializer or weights_initializer,
                regularizer=weights_regularizer, trainable=trainable, collections=weights_coll)
            out = tf.nn.separable_conv2d(x, depthwise, pointwise, strides,
                                         _padding_arg(padding), rate=dil)
        else:
            num_outputs = cin * depth_multiplier
            out = tf.nn.depthwise_conv2d(x, depthwise, strides, _padding_arg(padding),
                                         rate=dil)
        if _use_bias(normalizer_fn, biases_initializer):
            biases = model_variable(
                "biases", shape=[num_outputs], dtype=dtype, initializer=biases_initializer,
                regularizer=biases_regularizer, trainable=trainable,
                collections=get_variable_collections(variables_collections, "biases"))
            out = tf.nn.bias_add(out, biases)
        out = _finish(out, normalizer_fn, normalizer_params, activation_fn)
        return collect_named_outputs(outputs_collections, sc.name, out)


separable_conv2d = separable_convolution2d


# -- pooling, flatten, dropout, one-hot -----------------------------------------------------------
def _pool2d(op, default_scope: str, inputs, kernel_size, stride, padding, data_format,
            outputs_collections, scope):
    if data_format not in (DATA_FORMAT_NCHW, DATA_FORMAT_NHWC):
        raise ValueError("data_format has to be either NCHW or NHWC.")
    _channels_last_only(data_format, default_scope)
    with tf.name_scope(scope, default_scope, [inputs]) as sc:
        x = tf.convert_to_tensor(inputs)
        _rank_exactly(x, 4, default_scope)
        kh, kw = two_element_tuple(kernel_size)
        sh, sw = two_element_tuple(stride)
        out = op(x, [1, kh, kw, 1], [1, sh, sw, 1], _padding_arg(padding))
        return collect_named_outputs(outputs_collections, sc, out)


@add_arg_scope
def max_pool2d(inputs, kernel_size, stride=2, padding: str = "VALID",
               data_format: str = DATA_FORMAT_NHWC, outputs_collections=None, scope=None):
    """2-D max pooling over NHWC inputs (kernel_size and stride: an int or [h, w]); name scope
    `MaxPool2D`."""
    return _pool2d(tf.nn.max_pool, "MaxPool2D", inputs, kernel_size, stride, padding,
                   data_format, outputs_collections, scope)


@add_arg_scope
def avg_pool2d(inputs, kernel_size, stride=2, padding: str = "VALID",
               data_format: str = DATA_FORMAT_NHWC, outputs_collections=None, scope=None):
    """2-D average pooling over NHWC inputs; name scope `AvgPool2D`."""
    return _pool2d(tf.nn.avg_pool, "AvgPool2D", inputs, kernel_size, stride, padding,
                   data_format, outputs_collections, scope)


@add_arg_scope
def flatten(inputs, outputs_collections=None, scope=None):
    """[batch, ...] -> [batch, k], keeping the batch axis; name scope `Flatten`."""
    with tf.name_scope(scope, "Flatten", [inputs]) as sc:
        x = tf.convert_to_tensor(inputs)
        if x.shape.ndims is None:
            raise ValueError(f"Inputs {x.name} to flatten have undefined rank.")
        out = _core.Flatten().call(x)
        return collect_named_outputs(outputs_collections, sc, out)


@add_arg_scope
def dropout(inputs, keep_prob=0.5, noise_shape=None, is_training=True,
            outputs_collections=None, scope=None, seed=None):
    """Each element kept with probability `keep_prob` (a float or a scalar tensor) and scaled
    by 1 / keep_prob while `is_training` (a Python bool or a bool tensor); the inputs
    unchanged otherwise. Scope `Dropout`."""
    with tf.variable_scope(scope, "Dropout", [inputs], custom_getter=_layer_getter()) as sc:
        x = tf.convert_to_tensor(inputs)
        out = smart_cond(is_training,
                         lambda: tf.nn.dropout(x, keep_prob=keep_prob, noise_shape=noise_shape,
                                               seed=seed),
                         lambda: tf.identity(x))
        return collect_named_outputs(outputs_collections, sc.name, out)


@add_arg_scope
def one_hot_encoding(labels, num_classes: int, on_value=1.0, off_value=0.0,
                     outputs_collections=None, scope=None):
    """`tf.one_hot(labels, num_classes)` (float32 with the default values); name scope
    `OneHotEncoding`."""
    with tf.name_scope(scope, "OneHotEncoding", [labels, num_classes]) as sc:
        labels = tf.convert_to_tensor(labels)
        if labels.dtype == tf.int32:
            labels = tf.to_int64(labels)
        out = tf.one_hot(labels, num_classes, on_value=on_value, off_value=off_value)
        return collect_named_outputs(outputs_collections, sc, out)


# -- normalization --------------------------------------------------------------------------------
@add_arg_scope
def batch_norm(inputs, decay: float = 0.999, center: bool = True, scale: bool = False,
               epsilon: float = 0.001, activation_fn=None, param_initializers=None,
               param_regularizers=None, updates_collections=GraphKeys.UPDATE_OPS,
               is_training=True, reuse=None, variables_collections=None,
               outputs_collections=None, trainable: bool = True, batch_weights=None,
               fused=None, data_format: str = DATA_FORMAT_NHWC,
               zero_debias_moving_mean: bool = False, scope=None, renorm: bool = False,
               renorm_clipping=None, renorm_decay: float = 0.99, adjustment=None):
    """Batch normalization over all axes but the channels (last for NHWC, 1 for NCHW), with
    TF 1.15 contrib's defaults: decay 0.999, beta but no gamma (`scale=False`), epsilon 1e-3.

    Variables `BatchNorm/beta`, `BatchNorm/gamma` (with `scale`), `BatchNorm/moving_mean` and
    `BatchNorm/moving_variance` (not trainable). While `is_training` (a Python bool or a bool
    tensor) the batch moments normalize and the moving averages move by
    `moving -= (moving - batch) * (1 - decay)`; the update ops go to `updates_collections`
    (run them with the train op), or, with `updates_collections=None`, run with the output.
    For rank-2 and rank-4 inputs TF uses its fused kernel unless `fused=False`: the moving
    variance then tracks the unbiased batch variance (n / (n - 1)) and epsilon is at least
    1.001e-5, as here.
    """
    if data_format not in (DATA_FORMAT_NCHW, DATA_FORMAT_NHWC):
        raise ValueError("data_format has to be either NCHW or NHWC.")
    for unsupported, what in ((batch_weights is not None, "batch_weights"),
                              (renorm, "renorm"), (adjustment is not None, "adjustment"),
                              (zero_debias_moving_mean, "zero_debias_moving_mean")):
        if unsupported:
            raise NotImplementedError(f"batch_norm: {what} is not supported by jitflow")
    with tf.variable_scope(scope, "BatchNorm", [inputs], reuse=reuse,
                           custom_getter=_layer_getter()) as sc:
        x = tf.convert_to_tensor(inputs)
        rank = x.shape.ndims
        if rank is None:
            raise ValueError(f"Inputs {x.name} has undefined rank.")
        if rank < 2:
            raise ValueError(f"Inputs {x.name} of batch_norm must have rank >= 2, got shape "
                             f"{x.shape}")
        axis = 1 if data_format == DATA_FORMAT_NCHW else rank - 1
        channels = x.shape.as_list()[axis]
        if channels is None:
            raise ValueError(f"Inputs {x.name} has undefined channels dimension (axis {axis} "
                             f"of shape {x.shape}).")
        dtype = x.dtype.base_dtype
        inits = param_initializers or {}
        regs = param_regularizers or {}
        # TF 1.15 takes its legacy fused path (beta made before gamma) for rank-2 inputs and
        # for custom update collections, the tf.layers path (gamma first) otherwise
        legacy = updates_collections != GraphKeys.UPDATE_OPS or (fused is not False
                                                                  and rank == 2)

        def param(name, default_init, trainable_p=trainable, regularizer=None):
            v = tf.get_variable(name, shape=[channels], dtype=dtype,
                                initializer=inits.get(name, default_init),
                                regularizer=regularizer, trainable=trainable_p)
            _add_to_collections(v, variables_collections, name)
            return v
        beta = gamma = None
        for which in (("beta", "gamma") if legacy else ("gamma", "beta")):
            if which == "beta" and center:
                beta = param("beta", tf.zeros_initializer(), regularizer=regs.get("beta"))
            if which == "gamma" and scale:
                gamma = param("gamma", tf.ones_initializer(), regularizer=regs.get("gamma"))
        moving_mean = param("moving_mean", tf.zeros_initializer(), trainable_p=False)
        moving_variance = param("moving_variance", tf.ones_initializer(), trainable_p=False)

        fused_kernel = fused is not False and rank in (2, 4)
        if fused_kernel:
            epsilon = max(epsilon, 1.001e-5)
        training = constant_value(is_training)
        if training is not None:
            training = bool(training)   # NumPy bools and 0/1 too
        if training is False:
            mean, variance = moving_mean, moving_variance
            updates = []
        else:
            axes = [a for a in range(rank) if a != axis]
            batch_mean, batch_var = tf.nn.moments(x, axes)
            target_var = batch_var
            if fused_kernel:
                n = tf.cast(tf.size(x), dtype) / float(channels)
                target_var = batch_var * n / tf.maximum(n - 1.0, 1.0)
            # 1 - decay in Python when decay is a number, as TF's assign_moving_average
            rate = tf.constant(1.0 - decay, dtype) if isinstance(decay, numbers.Real) else \
                tf.cast(1.0 - tf.convert_to_tensor(decay), dtype)
            if training is None:
                flag = tf.convert_to_tensor(is_training, dtype=tf.bool)
                rate = tf.where(flag, rate, tf.zeros_like(rate))
            with tf.name_scope("AssignMovingAvg"):
                upd_mean = tf.assign_sub(moving_mean, (moving_mean - batch_mean) * rate)
            with tf.name_scope("AssignMovingAvg_1"):
                upd_var = tf.assign_sub(moving_variance, (moving_variance - target_var) * rate)
            updates = [upd_mean, upd_var]
            mean, variance = smart_cond(
                is_training, lambda: (batch_mean, batch_var),
                lambda: (tf.identity(moving_mean), tf.identity(moving_variance)))
            if updates_collections is not None:
                for u in updates:
                    tf.add_to_collections(updates_collections, u)
        if axis != rank - 1:
            shape = [1] * rank
            shape[axis] = channels
            mean, variance = tf.reshape(mean, shape), tf.reshape(variance, shape)
            beta = None if beta is None else tf.reshape(beta, shape)
            gamma = None if gamma is None else tf.reshape(gamma, shape)
        out = tf.nn.batch_normalization(x, mean, variance, beta, gamma, epsilon)
        if updates and updates_collections is None:
            with tf.control_dependencies(updates):
                out = tf.identity(out)
        out.set_shape(x.shape)
        if activation_fn is not None:
            out = activation_fn(out)
        return collect_named_outputs(outputs_collections, sc.name, out)


@add_arg_scope
def layer_norm(inputs, center: bool = True, scale: bool = True, activation_fn=None, reuse=None,
               variables_collections=None, outputs_collections=None, trainable: bool = True,
               begin_norm_axis: int = 1, begin_params_axis: int = -1, scope=None):
    """Layer normalization: moments over axes begin_norm_axis..R-1 of each example, then
    `beta` and `gamma` of shape inputs.shape[begin_params_axis:]; variance epsilon 1e-12
    (1e-3 for float16). Scope `LayerNorm`."""
    with tf.variable_scope(scope, "LayerNorm", [inputs], reuse=reuse) as sc:
        x = tf.convert_to_tensor(inputs)
        rank = x.shape.ndims
        if rank is None:
            raise ValueError(f"Inputs {x.name} has undefined rank.")
        dtype = x.dtype.base_dtype
        if begin_norm_axis < 0:
            begin_norm_axis = rank + begin_norm_axis
        if begin_params_axis >= rank or begin_norm_axis >= rank:
            raise ValueError(f"begin_params_axis ({begin_params_axis}) and begin_norm_axis "
                             f"({begin_norm_axis}) must be < rank(inputs) ({rank})")
        params_shape = x.shape[begin_params_axis:]
        if not params_shape.is_fully_defined():
            raise ValueError(f"Inputs {x.name}: shape(inputs)[{begin_params_axis}:] is not "
                             f"fully defined: {x.shape}")
        beta = gamma = None
        if center:
            beta = model_variable("beta", shape=params_shape.as_list(), dtype=dtype,
                                  initializer=tf.zeros_initializer(), trainable=trainable,
                                  collections=get_variable_collections(variables_collections,
                                                                       "beta"))
        if scale:
            gamma = model_variable("gamma", shape=params_shape.as_list(), dtype=dtype,
                                   initializer=tf.ones_initializer(), trainable=trainable,
                                   collections=get_variable_collections(variables_collections,
                                                                        "gamma"))
        mean, variance = tf.nn.moments(x, list(range(begin_norm_axis, rank)), keep_dims=True)
        eps = 1e-3 if dtype == tf.float16 else 1e-12
        out = tf.nn.batch_normalization(x, mean, variance, beta, gamma, eps)
        out.set_shape(x.shape)
        if activation_fn is not None:
            out = activation_fn(out)
        return collect_named_outputs(outputs_collections, sc.name, out)


@add_arg_scope
def bias_add(inputs, activation_fn=None, initializer=tf.zeros_initializer(), regularizer=None,
             reuse=None, variables_collections=None, outputs_collections=None,
             trainable: bool = True, data_format: str = DATA_FORMAT_NHWC, scope=None):
    """`inputs + biases` with a `biases` variable of the channel size; scope `BiasAdd`."""
    if data_format not in (DATA_FORMAT_NCHW, DATA_FORMAT_NHWC):
        raise ValueError("data_format has to be either NCHW or NHWC.")
    _channels_last_only(data_format, "bias_add")
    with tf.variable_scope(scope, "BiasAdd", [inputs], reuse=reuse) as sc:
        x = tf.convert_to_tensor(inputs)
        if x.shape.ndims is None:
            raise ValueError("Dims of shape must be known but is None")
        channels = x.shape.as_list()[-1]
        if channels is None:
            raise ValueError(f"`C` dimension must be known but is None (inputs {x.name}, "
                             f"shape {x.shape})")
        biases = model_variable("biases", shape=[channels], dtype=x.dtype.base_dtype,
                                initializer=initializer, regularizer=regularizer,
                                trainable=trainable,
                                collections=get_variable_collections(variables_collections,
                                                                     "biases"))
        out = tf.nn.bias_add(x, biases)
        if activation_fn is not None:
            out = activation_fn(out)
        return collect_named_outputs(outputs_collections, sc.name, out)


# -- small functions ------------------------------------------------------------------------------
def softmax(logits, scope=None):
    """Softmax over the last axis of logits of any rank >= 2."""
    with tf.variable_scope(scope, "softmax", [logits]):
        logits = tf.convert_to_tensor(logits)
        _rank_at_least(logits, 2, "softmax")
        n = logits.shape.as_list()[-1]
        if n is None:
            raise ValueError(f"The last dimension of logits {logits.name} must be known, got "
                             f"shape {logits.shape}")
        probs = tf.reshape(tf.nn.softmax(tf.reshape(logits, [-1, n])), tf.shape(logits))
        probs.set_shape(logits.shape)
        return probs


def unit_norm(inputs, dim: int, epsilon: float = 1e-7, scope=None):
    """inputs / sqrt(epsilon + sum(inputs ** 2 over `dim`))."""
    with tf.variable_scope(scope, "UnitNorm", [inputs]):
        x = tf.convert_to_tensor(inputs)
        rank = x.shape.ndims
        if rank is None:
            raise ValueError("The input rank must be known.")
        if dim < 0 or dim >= rank:
            raise ValueError("dim must be positive but smaller than the input rank.")
        lengths = tf.sqrt(epsilon + tf.reduce_sum(tf.square(x), dim, keepdims=True))
        return tf.div(x, lengths)


def _layer_name(layer, fallback: str) -> str:
    if hasattr(layer, "__name__"):
        return layer.__name__
    if hasattr(layer, "func") and hasattr(layer.func, "__name__"):
        return layer.func.__name__   # a functools.partial
    return fallback


def repeat(inputs, repetitions: int, layer: Callable, *args, **kwargs):
    """`layer` applied `repetitions` times with the same arguments, in scopes
    `<scope>/<scope>_1`, `<scope>/<scope>_2`, ... (scope defaults to the layer's name)."""
    scope = kwargs.pop("scope", None)
    with tf.variable_scope(scope, "Repeat", [inputs]):
        outputs = tf.convert_to_tensor(inputs)
        scope = scope or _layer_name(layer, "repeat")
        for i in range(repetitions):
            kwargs["scope"] = f"{scope}_{i + 1}"
            outputs = layer(outputs, *args, **kwargs)
        return outputs


def stack(inputs, layer: Callable, stack_args, **kwargs):
    """`layer` applied once per entry of `stack_args` (its positional arguments), in scopes
    `<scope>/<scope>_1`, `<scope>/<scope>_2`, ..."""
    scope = kwargs.pop("scope", None)
    if not isinstance(stack_args, (list, tuple)):
        raise ValueError("stack_args need to be a list or tuple")
    with tf.variable_scope(scope, "Stack", [inputs]):
        outputs = tf.convert_to_tensor(inputs)
        scope = scope or _layer_name(layer, "stack")
        for i, layer_args in enumerate(stack_args):
            kwargs["scope"] = f"{scope}_{i + 1}"
            if not isinstance(layer_args, (list, tuple)):
                layer_args = [layer_args]
            outputs = layer(outputs, *layer_args, **kwargs)
        return outputs


# -- embeddings -----------------------------------------------------------------------------------
def embedding_lookup_unique(params, ids, name: Optional[str] = None):
    """`embedding_lookup` that gathers each distinct id once."""
    with tf.name_scope(name, "EmbeddingLookupUnique", [params, ids]):
        ids = tf.convert_to_tensor(ids)
        flat = tf.reshape(ids, [-1])
        unique_ids, idx = tf.unique(flat)
        rows = tf.gather(tf.gather(params, unique_ids), idx)
        out = tf.reshape(rows, tf.concat([tf.shape(ids), tf.shape(rows)[1:]], 0))
        out.set_shape(ids.shape.concatenate(rows.shape[1:]))
        return out


def embed_sequence(ids, vocab_size: Optional[int] = None, embed_dim: Optional[int] = None,
                   unique: bool = False, initializer=None, regularizer=None,
                   trainable: bool = True, scope=None, reuse=None):
    """[batch, length] symbol ids -> [batch, length, embed_dim] rows of the model variable
    `EmbedSequence/embeddings` [vocab_size, embed_dim] (initializer: the scope's, else
    glorot_uniform)."""
    if not (reuse or (vocab_size and embed_dim)):
        raise ValueError(f"Must specify vocab size and embedding dimension when not reusing. "
                         f"Got vocab_size={vocab_size} and embed_dim={embed_dim}")
    with tf.variable_scope(scope, "EmbedSequence", [ids], reuse=reuse):
        shape = [vocab_size, embed_dim]
        if (reuse and vocab_size is None) or embed_dim is None:
            shape = None
        embeddings = model_variable("embeddings", shape=shape, initializer=initializer,
                                    regularizer=regularizer, trainable=trainable)
        if unique:
            return embedding_lookup_unique(embeddings, ids)
        return tf.nn.embedding_lookup(embeddings, ids)
