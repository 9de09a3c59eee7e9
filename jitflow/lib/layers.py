"""`tf.layers`: TF1's layer functions (dense, conv2d, pooling, flatten, dropout, batch norm)
and their class forms.

Each layer owns a variable scope, named as TF1 names it: `dense`, `dense_1`, ... unique
within the enclosing variable scope, or `name`. Its variables are made with
`tf.get_variable` (`dense/kernel`, `dense/bias`), so `reuse=True` or a second call of the same
layer object shares them. Ops are created in the layer's name scope (`dense/MatMul`).
"""
from __future__ import annotations

import numbers
from typing import Callable, Optional

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.core.graph import GraphKeys, Tensor, convert_to_tensor, get_default_graph, name_scope
from jitflow.ops import _array_args, join as _join, shape_ops as _shape_ops
from jitflow.ops.identity import identity as _identity
from jitflow.ops.math import casting as _casting, common as _common, compare as _compare
from jitflow.ops.nn import basic as _basic, conv as _conv, pool as _pool
from jitflow.ops.compat_extra import InputSpec  # noqa: F401  (tf.layers.InputSpec)
from jitflow.ops.control_flow import cond
from jitflow.ops.init_ops import ones_initializer, zeros_initializer
from jitflow.ops.linalg import matmul, tensordot
from jitflow.ops.state import assign_sub
from jitflow.ops.variable_scope import get_variable, variable_scope
from jitflow.core.shapes import TensorShape

__all__ = [
    "dense", "conv1d", "conv2d", "max_pooling1d", "average_pooling1d", "max_pooling2d",
    "average_pooling2d", "flatten", "dropout", "batch_normalization", "Layer", "Dense",
    "Conv1D", "Conv2D", "MaxPooling1D", "AveragePooling1D", "MaxPooling2D", "AveragePooling2D",
    "Flatten", "Dropout", "BatchNormalization", "conv2d_transpose", "Conv2DTranspose",
    "InputSpec",
]


def _pair(v, what: str) -> tuple:
    if isinstance(v, numbers.Integral):
        return (int(v), int(v))
    v = tuple(int(x) for x in v)
    if len(v) != 2:
        raise ValueError(f"The `{what}` argument must be a tuple of 2 integers. Received: {v}")
    return v


def _padding(padding: str) -> str:
    p = str(padding).lower()
    if p not in ("valid", "same"):
        raise ValueError(f"The `padding` argument must be one of 'valid', 'same'. Received: "
                         f"{padding}")
    return p.upper()


def _channels_last(data_format: str) -> None:
    if data_format not in ("channels_last", None):
        raise ValueError(f"data_format {data_format!r} is not supported (only channels_last)")


def _is_python_bool(v) -> Optional[bool]:
    """The truth value of `training` if it is known at build time, else None."""
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, Tensor):
        s = _array_args.get_static_value(v)
        return None if s is None else bool(s)
    if hasattr(v, "_to_tensor"):
        return None
    return bool(v)


class Layer:
    """Base of the class forms: one variable scope, created on the first call, reused after."""

    _base_name = "layer"

    def __init__(self, trainable: bool = True, name: Optional[str] = None, dtype=None,
                 _reuse=None, **kwargs) -> None:
        self.trainable = trainable
        self._given_name = name
        self.name = name
        self.dtype = None if dtype is None else _dtypes.as_dtype(dtype)
        self._reuse = _reuse
        self._scope = None
        self.built = False
        self._variables: list = []
        self._updates: list = []

    def _get_variable(self, name: str, **kwargs):
        v = get_variable(name, trainable=self.trainable and kwargs.pop("trainable", True),
                         **kwargs)
        if v not in self._variables:
            self._variables.append(v)
        return v

    @property
    def variables(self) -> list:
        return list(self._variables)

    @property
    def weights(self) -> list:
        return self.variables

    @property
    def trainable_variables(self) -> list:
        trainable = get_default_graph().get_collection(GraphKeys.TRAINABLE_VARIABLES)
        return [v for v in self._variables if v in trainable]

    trainable_weights = trainable_variables

    @property
    def non_trainable_variables(self) -> list:
        return [v for v in self._variables if v not in self.trainable_variables]

    non_trainable_weights = non_trainable_variables

    @property
    def updates(self) -> list:
        return list(self._updates)

    def build(self, input_shape) -> None:
        self.built = True

    def call(self, inputs, **kwargs):
        return inputs

    def __call__(self, inputs, *args, **kwargs):
        if self._scope is None:
            with variable_scope(self._given_name, default_name=self._base_name,
                                reuse=self._reuse, values=[inputs]) as scope:
                self._scope = scope
                self.name = scope.name.split("/")[-1]
                x = convert_to_tensor(inputs)
                self.build(x.shape)
                self.built = True
                return self.call(x, *args, **kwargs)
        with variable_scope(self._scope, reuse=True, values=[inputs]):
            return self.call(convert_to_tensor(inputs), *args, **kwargs)

    apply = __call__


def _activate(activation: Optional[Callable], x: Tensor) -> Tensor:
    return x if activation is None else activation(x)


class Dense(Layer):
    """`tf.layers.Dense`: activation(inputs @ kernel + bias)."""

    _base_name = "dense"

    def __init__(self, units: int, activation=None, use_bias: bool = True,
                 kernel_initializer=None, bias_initializer=zeros_initializer(),
                 kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 kernel_constraint=None, bias_constraint=None, trainable: bool = True,
                 name: Optional[str] = None, **kwargs) -> None:
        super().__init__(trainable=trainable, name=name, **kwargs)
        self.units = int(units)
        if self.units <= 0:
            raise ValueError(f"Received an invalid value for `units`, expected a positive "
                             f"integer, got {units}.")
        self.activation = activation
        self.use_bias = use_bias
        self.kernel_initializer = kernel_initializer
        self.bias_initializer = bias_initializer
        self.kernel_regularizer = kernel_regularizer
        self.bias_regularizer = bias_regularizer
        self.activity_regularizer = activity_regularizer
        self.kernel_constraint = kernel_constraint
        self.bias_constraint = bias_constraint

    def build(self, input_shape) -> None:
        last = input_shape[-1] if input_shape.ndims else None
        last = getattr(last, "value", last)
        if last is None:
            raise ValueError("The last dimension of the inputs to `Dense` should be defined. "
                             "Found `None`.")
        dtype = self.dtype or _dtypes.float32
        self.kernel = self._get_variable("kernel", shape=[int(last), self.units], dtype=dtype,
                                         initializer=self.kernel_initializer,
                                         regularizer=self.kernel_regularizer,
                                         constraint=self.kernel_constraint)
        self.bias = None
        if self.use_bias:
            self.bias = self._get_variable("bias", shape=[self.units], dtype=dtype,
                                           initializer=self.bias_initializer,
                                           regularizer=self.bias_regularizer,
                                           constraint=self.bias_constraint)
        self.built = True

    def call(self, inputs):
        if self.dtype is None and inputs.dtype != self.kernel.dtype:
            inputs = _casting.cast(inputs, self.kernel.dtype)
        rank = inputs.shape.ndims
        if rank is not None and rank > 2:
            out = tensordot(inputs, self.kernel, [[rank - 1], [0]])
        else:
            out = matmul(inputs, self.kernel)
        if self.bias is not None:
            out = _basic.bias_add(out, self.bias)
        out = _activate(self.activation, out)
        if self.activity_regularizer is not None:
            loss = self.activity_regularizer(out)
            if loss is not None:
                get_default_graph().add_to_collection(GraphKeys.REGULARIZATION_LOSSES, loss)
        return out


class Conv2D(Layer):
    """`tf.layers.Conv2D`: 2-D convolution over NHWC inputs, kernel [kh, kw, in, filters]."""

    _base_name = "conv2d"

    def __init__(self, filters: int, kernel_size, strides=(1, 1), padding: str = "valid",
                 data_format: str = "channels_last", dilation_rate=(1, 1), activation=None,
                 use_bias: bool = True, kernel_initializer=None,
                 bias_initializer=zeros_initializer(), kernel_regularizer=None,
                 bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
                 bias_constraint=None, trainable: bool = True, name: Optional[str] = None,
                 **kwargs) -> None:
        super().__init__(trainable=trainable, name=name, **kwargs)
        _channels_last(data_format)
        self.filters = int(filters)
        self.kernel_size = _pair(kernel_size, "kernel_size")
        self.strides = _pair(strides, "strides")
        self.padding = _padding(padding)
        self.dilation_rate = _pair(dilation_rate, "dilation_rate")
        self.activation = activation
        self.use_bias = use_bias
        self.kernel_initializer = kernel_initializer
        self.bias_initializer = bias_initializer
        self.kernel_regularizer = kernel_regularizer
        self.bias_regularizer = bias_regularizer
        self.kernel_constraint = kernel_constraint
        self.bias_constraint = bias_constraint

    def build(self, input_shape) -> None:
        if input_shape.ndims != 4:
            raise ValueError(f"Input 0 of layer conv2d is incompatible with the layer: expected "
                             f"ndim=4, found ndim={input_shape.ndims}. Full shape received: "
                             f"{input_shape}")
        self._build_weights(input_shape)

    def _kernel_shape(self, cin: int) -> list:
        return [*self.kernel_size, cin, self.filters]

    def _build_weights(self, input_shape) -> None:
        """The kernel (shape from `_kernel_shape`) and the bias, for a rank-checked input."""
        cin = input_shape.as_list()[-1]
        if cin is None:
            raise ValueError("The channel dimension of the inputs should be defined. Found "
                             "`None`.")
        dtype = self.dtype or _dtypes.float32
        self.kernel = self._get_variable(
            "kernel", shape=self._kernel_shape(cin), dtype=dtype,
            initializer=self.kernel_initializer, regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint)
        self.bias = None
        if self.use_bias:
            self.bias = self._get_variable("bias", shape=[self.filters], dtype=dtype,
                                           initializer=self.bias_initializer,
                                           regularizer=self.bias_regularizer,
                                           constraint=self.bias_constraint)
        self.built = True

    def call(self, inputs):
        out = _conv.conv2d(inputs, self.kernel, strides=[1, *self.strides, 1],
                           padding=self.padding, dilations=[1, *self.dilation_rate, 1])
        if self.bias is not None:
            out = _basic.bias_add(out, self.bias)
        return _activate(self.activation, out)


class Conv1D(Conv2D):
    """`tf.layers.Conv1D`: 1-D convolution over [batch, width, channels], kernel
    [k, in, filters] (computed as a 2-D convolution over a height of 1, as TF1 does)."""

    _base_name = "conv1d"

    def __init__(self, filters: int, kernel_size, strides=1, padding: str = "valid",
                 data_format: str = "channels_last", dilation_rate=1, **kwargs) -> None:
        k, st, d = (_one(v, n) for v, n in ((kernel_size, "kernel_size"), (strides, "strides"),
                                            (dilation_rate, "dilation_rate")))
        super().__init__(filters, (1, k), strides=(1, st), padding=padding,
                         data_format=data_format, dilation_rate=(1, d), **kwargs)

    def build(self, input_shape) -> None:
        if input_shape.ndims != 3:
            raise ValueError(f"Input 0 of layer conv1d is incompatible with the layer: expected "
                             f"ndim=3, found ndim={input_shape.ndims}. Full shape received: "
                             f"{input_shape}")
        full = self.kernel_size
        self.kernel_size = full[1:]
        try:
            super().build(TensorShape([input_shape[0], 1] + input_shape.as_list()[1:]))
        finally:
            self.kernel_size = full

    def call(self, inputs):
        x = _shape_ops.expand_dims(inputs, 1)
        kernel = _shape_ops.expand_dims(self.kernel, 0)
        out = _conv.conv2d(x, kernel, strides=[1, *self.strides, 1], padding=self.padding,
                           dilations=[1, *self.dilation_rate, 1])
        out = _shape_ops.squeeze(out, [1])
        if self.bias is not None:
            out = _basic.bias_add(out, self.bias)
        return _activate(self.activation, out)


def _one(v, what: str) -> int:
    if isinstance(v, numbers.Integral):
        return int(v)
    v = tuple(int(x) for x in v)
    if len(v) != 1:
        raise ValueError(f"The `{what}` argument must be a tuple of 1 integer. Received: {v}")
    return v[0]


class _Pooling2D(Layer):
    _op: Callable = None

    def __init__(self, pool_size, strides, padding: str = "valid",
                 data_format: str = "channels_last", name: Optional[str] = None,
                 **kwargs) -> None:
        super().__init__(name=name, **kwargs)
        _channels_last(data_format)
        self.pool_size = _pair(pool_size, "pool_size")
        self.strides = _pair(strides, "strides")
        self.padding = _padding(padding)

    def call(self, inputs):
        return type(self)._op(inputs, ksize=[1, *self.pool_size, 1],
                              strides=[1, *self.strides, 1], padding=self.padding)


class MaxPooling2D(_Pooling2D):
    """`tf.layers.MaxPooling2D`."""

    _base_name = "max_pooling2d"
    _op = staticmethod(_pool.max_pool)


class AveragePooling2D(_Pooling2D):
    """`tf.layers.AveragePooling2D`."""

    _base_name = "average_pooling2d"
    _op = staticmethod(_pool.avg_pool)


class _Pooling1D(_Pooling2D):
    def __init__(self, pool_size, strides, padding: str = "valid",
                 data_format: str = "channels_last", name: Optional[str] = None,
                 **kwargs) -> None:
        super().__init__((1, _one(pool_size, "pool_size")), (1, _one(strides, "strides")),
                         padding, data_format, name=name, **kwargs)

    def call(self, inputs):
        return _shape_ops.squeeze(super().call(_shape_ops.expand_dims(inputs, 1)), [1])


class MaxPooling1D(_Pooling1D):
    """`tf.layers.MaxPooling1D`: over [batch, width, channels]."""

    _base_name = "max_pooling1d"
    _op = staticmethod(_pool.max_pool)


class AveragePooling1D(_Pooling1D):
    """`tf.layers.AveragePooling1D`: over [batch, width, channels]."""

    _base_name = "average_pooling1d"
    _op = staticmethod(_pool.avg_pool)


class Flatten(Layer):
    """`tf.layers.Flatten`: [batch, ...] -> [batch, prod(...)]."""

    _base_name = "flatten"

    def __init__(self, data_format: str = "channels_last", name: Optional[str] = None,
                 **kwargs) -> None:
        super().__init__(name=name, **kwargs)
        _channels_last(data_format)

    def call(self, inputs):
        dims = inputs.shape.as_list() if inputs.shape.ndims is not None else None
        if dims is not None and all(d is not None for d in dims[1:]):
            return _shape_ops.reshape(inputs, [-1, int(np.prod(dims[1:], dtype=np.int64))])
        if dims is not None and dims[0] is not None:
            return _shape_ops.reshape(inputs, [dims[0], -1])
        batch = _shape_ops.shape(inputs)[0]
        return _shape_ops.reshape(inputs, _join.stack([batch, -1]))


class Dropout(Layer):
    """`tf.layers.Dropout`: drops units with probability `rate` when `training` is true."""

    _base_name = "dropout"

    def __init__(self, rate: float = 0.5, noise_shape=None, seed=None,
                 name: Optional[str] = None, **kwargs) -> None:
        super().__init__(name=name, **kwargs)
        self.rate = rate
        self.noise_shape = noise_shape
        self.seed = seed

    def call(self, inputs, training=False):
        def drop():
            return _basic.dropout(inputs, noise_shape=self.noise_shape, seed=self.seed,
                                  rate=self.rate)

        def keep():
            return _identity(inputs)
        known = _is_python_bool(training)
        if known is not None:
            return drop() if known else keep()
        return cond(convert_to_tensor(training, dtype=_dtypes.bool_), drop, keep)


class BatchNormalization(Layer):
    """`tf.layers.BatchNormalization`: batch statistics when training (moving averages
    updated by ops in UPDATE_OPS), moving averages otherwise."""

    _base_name = "batch_normalization"

    def __init__(self, axis=-1, momentum: float = 0.99, epsilon: float = 1e-3,
                 center: bool = True, scale: bool = True,
                 beta_initializer=zeros_initializer(), gamma_initializer=ones_initializer(),
                 moving_mean_initializer=zeros_initializer(),
                 moving_variance_initializer=ones_initializer(), beta_regularizer=None,
                 gamma_regularizer=None, beta_constraint=None, gamma_constraint=None,
                 renorm: bool = False, renorm_clipping=None, renorm_momentum: float = 0.99,
                 fused=None, trainable: bool = True, virtual_batch_size=None, adjustment=None,
                 name: Optional[str] = None, **kwargs) -> None:
        super().__init__(trainable=trainable, name=name, **kwargs)
        if renorm or virtual_batch_size is not None or adjustment is not None:
            raise NotImplementedError("batch_normalization: renorm, virtual_batch_size and "
                                      "adjustment are not supported")
        self.axis = axis
        self.momentum = momentum
        self.epsilon = epsilon
        self.center = center
        self.scale = scale
        self.inits = (beta_initializer, gamma_initializer, moving_mean_initializer,
                      moving_variance_initializer)
        self.regularizers = (beta_regularizer, gamma_regularizer)
        self.constraints = (beta_constraint, gamma_constraint)
        self.fused = fused

    def build(self, input_shape) -> None:
        rank = input_shape.ndims
        if rank is None:
            raise ValueError("Input has undefined rank.")
        axes = [self.axis] if isinstance(self.axis, numbers.Integral) else list(self.axis)
        self._axes = sorted(a % rank for a in axes)
        dims = input_shape.as_list()
        param_shape = [dims[a] for a in self._axes]
        if any(d is None for d in param_shape):
            raise ValueError(f"Input has undefined `axis` dimension. Input shape: {input_shape}")
        self._rank = rank
        # TF1 uses the fused kernel for 4-D inputs normalized over the channel axis; its moving
        # variance then tracks the unbiased (n / (n - 1)) batch variance.
        self._fused = (rank == 4 and self._axes in ([3], [1])) if self.fused is None \
            else bool(self.fused)
        if self._fused:
            self.epsilon = max(self.epsilon, 1.001e-5)  # the fused kernel's lower bound
        dtype = self.dtype or _dtypes.float32
        beta_i, gamma_i, mean_i, var_i = self.inits
        self.gamma = self.beta = None
        if self.scale:
            self.gamma = self._get_variable("gamma", shape=param_shape, dtype=dtype,
                                            initializer=gamma_i,
                                            regularizer=self.regularizers[1],
                                            constraint=self.constraints[1])
        if self.center:
            self.beta = self._get_variable("beta", shape=param_shape, dtype=dtype,
                                           initializer=beta_i, regularizer=self.regularizers[0],
                                           constraint=self.constraints[0])
        self.moving_mean = self._get_variable("moving_mean", shape=param_shape, dtype=dtype,
                                              initializer=mean_i, trainable=False)
        self.moving_variance = self._get_variable("moving_variance", shape=param_shape,
                                                  dtype=dtype, initializer=var_i,
                                                  trainable=False)
        self.built = True

    def _broadcast(self, t):
        """A per-channel parameter reshaped to broadcast against the inputs."""
        if t is None or self._axes == [self._rank - 1]:
            return t
        dims = [1] * self._rank
        for a, d in zip(self._axes, t.shape.as_list()):
            dims[a] = d
        return _shape_ops.reshape(t, dims)

    def call(self, inputs, training=False):
        reduce_axes = [a for a in range(self._rank) if a not in self._axes]
        known = _is_python_bool(training)
        b = self._broadcast

        def normalize(mean, var):
            return _basic.batch_normalization(inputs, b(mean), b(var), b(self.beta), b(self.gamma),
                                              self.epsilon)
        if known is False:
            return normalize(self.moving_mean, self.moving_variance)
        mean, var = _basic.moments(inputs, reduce_axes)
        if known is None:
            flag = convert_to_tensor(training, dtype=_dtypes.bool_)
            out = cond(flag, lambda: normalize(mean, var),
                       lambda: normalize(self.moving_mean, self.moving_variance))
        else:
            out = normalize(mean, var)
        update_var = var
        if self._fused:
            n = _casting.cast(_shape_ops.size(inputs) // _shape_ops.size(mean), inputs.dtype)
            update_var = var * n / _compare.maximum(n - _common.scalar_like(1, var),
                                                    _common.scalar_like(1, var))
        decay = _common.scalar_like(1.0 - self.momentum, mean)
        if known is None:
            decay = _compare.where_v2(flag, decay, _common.scalar_like(0, mean))
        with name_scope("AssignMovingAvg"):
            upd_mean = assign_sub(self.moving_mean, (self.moving_mean - mean) * decay)
        with name_scope("AssignMovingAvg_1"):
            upd_var = assign_sub(self.moving_variance,
                                 (self.moving_variance - update_var) * decay)
        for u in (upd_mean, upd_var):
            self._updates.append(u)
            get_default_graph().add_to_collection(GraphKeys.UPDATE_OPS, u)
        return out


# -- function forms -------------------------------------------------------------------------------
def dense(inputs, units: int, activation=None, use_bias: bool = True, kernel_initializer=None,
          bias_initializer=zeros_initializer(), kernel_regularizer=None, bias_regularizer=None,
          activity_regularizer=None, kernel_constraint=None, bias_constraint=None,
          trainable: bool = True, name: Optional[str] = None, reuse=None) -> Tensor:
    """`tf.layers.dense`: a densely connected layer (variables `<name>/kernel`, `<name>/bias`;
    the kernel defaults to glorot_uniform, the bias to zeros)."""
    layer = Dense(units, activation=activation, use_bias=use_bias,
                  kernel_initializer=kernel_initializer, bias_initializer=bias_initializer,
                  kernel_regularizer=kernel_regularizer, bias_regularizer=bias_regularizer,
                  activity_regularizer=activity_regularizer,
                  kernel_constraint=kernel_constraint, bias_constraint=bias_constraint,
                  trainable=trainable, name=name, dtype=_input_dtype(inputs), _reuse=reuse)
    return layer(inputs)


def _input_dtype(inputs):
    dt = getattr(inputs, "dtype", None)
    return dt.base_dtype if isinstance(dt, _dtypes.DType) and dt.is_floating else None


def conv2d(inputs, filters: int, kernel_size, strides=(1, 1), padding: str = "valid",
           data_format: str = "channels_last", dilation_rate=(1, 1), activation=None,
           use_bias: bool = True, kernel_initializer=None, bias_initializer=zeros_initializer(),
           kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
           kernel_constraint=None, bias_constraint=None, trainable: bool = True,
           name: Optional[str] = None, reuse=None) -> Tensor:
    """`tf.layers.conv2d`: 2-D convolution (NHWC) plus bias and activation."""
    layer = Conv2D(filters, kernel_size, strides=strides, padding=padding,
                   data_format=data_format, dilation_rate=dilation_rate, activation=activation,
                   use_bias=use_bias, kernel_initializer=kernel_initializer,
                   bias_initializer=bias_initializer, kernel_regularizer=kernel_regularizer,
                   bias_regularizer=bias_regularizer, kernel_constraint=kernel_constraint,
                   bias_constraint=bias_constraint, trainable=trainable, name=name,
                   dtype=_input_dtype(inputs), _reuse=reuse)
    return layer(inputs)


def conv1d(inputs, filters: int, kernel_size, strides=1, padding: str = "valid",
           data_format: str = "channels_last", dilation_rate=1, activation=None,
           use_bias: bool = True, kernel_initializer=None, bias_initializer=zeros_initializer(),
           kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
           kernel_constraint=None, bias_constraint=None, trainable: bool = True,
           name: Optional[str] = None, reuse=None) -> Tensor:
    """`tf.layers.conv1d`: 1-D convolution over [batch, width, channels]."""
    layer = Conv1D(filters, kernel_size, strides=strides, padding=padding,
                   data_format=data_format, dilation_rate=dilation_rate, activation=activation,
                   use_bias=use_bias, kernel_initializer=kernel_initializer,
                   bias_initializer=bias_initializer, kernel_regularizer=kernel_regularizer,
                   bias_regularizer=bias_regularizer, kernel_constraint=kernel_constraint,
                   bias_constraint=bias_constraint, trainable=trainable, name=name,
                   dtype=_input_dtype(inputs), _reuse=reuse)
    return layer(inputs)


def max_pooling1d(inputs, pool_size, strides, padding: str = "valid",
                  data_format: str = "channels_last", name: Optional[str] = None) -> Tensor:
    """`tf.layers.max_pooling1d`."""
    return MaxPooling1D(pool_size, strides, padding, data_format, name=name)(inputs)


def average_pooling1d(inputs, pool_size, strides, padding: str = "valid",
                      data_format: str = "channels_last", name: Optional[str] = None) -> Tensor:
    """`tf.layers.average_pooling1d`."""
    return AveragePooling1D(pool_size, strides, padding, data_format, name=name)(inputs)


def max_pooling2d(inputs, pool_size, strides, padding: str = "valid",
                  data_format: str = "channels_last", name: Optional[str] = None) -> Tensor:
    """`tf.layers.max_pooling2d`."""
    return MaxPooling2D(pool_size, strides, padding, data_format, name=name)(inputs)


def average_pooling2d(inputs, pool_size, strides, padding: str = "valid",
                      data_format: str = "channels_last", name: Optional[str] = None) -> Tensor:
    """`tf.layers.average_pooling2d`."""
    return AveragePooling2D(pool_size, strides, padding, data_format, name=name)(inputs)


def flatten(inputs, name: Optional[str] = None, data_format: str = "channels_last") -> Tensor:
    """`tf.layers.flatten`: keep the batch axis, flatten the rest."""
    return Flatten(data_format=data_format, name=name)(inputs)


def dropout(inputs, rate: float = 0.5, noise_shape=None, seed=None, training=False,
            name: Optional[str] = None) -> Tensor:
    """`tf.layers.dropout`: `training` may be a Python bool or a bool tensor (then tf.cond)."""
    return Dropout(rate, noise_shape=noise_shape, seed=seed, name=name)(inputs,
                                                                        training=training)


def batch_normalization(inputs, axis=-1, momentum: float = 0.99, epsilon: float = 1e-3,
                        center: bool = True, scale: bool = True,
                        beta_initializer=zeros_initializer(),
                        gamma_initializer=ones_initializer(),
                        moving_mean_initializer=zeros_initializer(),
                        moving_variance_initializer=ones_initializer(), beta_regularizer=None,
                        gamma_regularizer=None, beta_constraint=None, gamma_constraint=None,
                        training=False, trainable: bool = True, name: Optional[str] = None,
                        reuse=None, renorm: bool = False, renorm_clipping=None,
                        renorm_momentum: float = 0.99, fused=None, virtual_batch_size=None,
                        adjustment=None) -> Tensor:
    """`tf.layers.batch_normalization`: with `training`, normalize by the batch moments and put
    the moving-average updates in `tf.GraphKeys.UPDATE_OPS` (run them with the train op)."""
    layer = BatchNormalization(
        axis=axis, momentum=momentum, epsilon=epsilon, center=center, scale=scale,
        beta_initializer=beta_initializer, gamma_initializer=gamma_initializer,
        moving_mean_initializer=moving_mean_initializer,
        moving_variance_initializer=moving_variance_initializer,
        beta_regularizer=beta_regularizer, gamma_regularizer=gamma_regularizer,
        beta_constraint=beta_constraint, gamma_constraint=gamma_constraint, renorm=renorm,
        renorm_clipping=renorm_clipping, renorm_momentum=renorm_momentum, fused=fused,
        trainable=trainable, virtual_batch_size=virtual_batch_size, adjustment=adjustment,
        name=name, dtype=_input_dtype(inputs), _reuse=reuse)
    return layer(inputs, training=training)


# -- transposed convolution -----------------------------------------------------------------------
def _deconv_length(n, k: int, padding: str, stride: int, dilation: int):
    """The output length of a transposed convolution along one axis (TF's rule)."""
    if n is None:
        return None
    k = k + (k - 1) * (dilation - 1)
    if padding == "VALID":
        return n * stride + max(k - stride, 0)
    return n * stride


class Conv2DTranspose(Conv2D):
    """`tf.layers.Conv2DTranspose`: the transpose of a 2-D convolution (NHWC), kernel
    [kh, kw, filters, in]; the output is `strides` times larger (plus the kernel overhang for
    'valid')."""

    _base_name = "conv2d_transpose"

    def build(self, input_shape) -> None:
        if input_shape.ndims != 4:
            raise ValueError(f"Inputs should have rank 4. Received input shape: {input_shape}")
        self._build_weights(input_shape)

    def _kernel_shape(self, cin: int) -> list:
        return [*self.kernel_size, self.filters, cin]

    def call(self, inputs):
        from jitflow.ops.nn.conv_transpose import conv2d_transpose as _conv_t
        dims = inputs.shape.as_list()
        dyn = _shape_ops.shape(inputs)
        sizes = []
        for i, (k, s, d) in enumerate(zip(self.kernel_size, self.strides, self.dilation_rate)):
            n = _deconv_length(dims[1 + i], k, self.padding, s, d)
            if n is None:
                n = dyn[1 + i] * s
                if self.padding == "VALID":
                    n = n + max(k + (k - 1) * (d - 1) - s, 0)
            sizes.append(n)
        batch = dims[0] if dims[0] is not None else dyn[0]
        out_shape = _join.stack([batch, sizes[0], sizes[1], self.filters])
        out = _conv_t(inputs, self.kernel, out_shape, strides=[1, *self.strides, 1],
                      padding=self.padding, dilations=[1, *self.dilation_rate, 1])
        out.set_shape([dims[0], *(n if isinstance(n, int) else None for n in sizes),
                       self.filters])
        if self.bias is not None:
            out = _basic.bias_add(out, self.bias)
        return _activate(self.activation, out)


def conv2d_transpose(inputs, filters: int, kernel_size, strides=(1, 1), padding: str = "valid",
                     data_format: str = "channels_last", activation=None, use_bias: bool = True,
                     kernel_initializer=None, bias_initializer=zeros_initializer(),
                     kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                     kernel_constraint=None, bias_constraint=None, trainable: bool = True,
                     name: Optional[str] = None, reuse=None) -> Tensor:
    """`tf.layers.conv2d_transpose`: a transposed 2-D convolution plus bias and activation."""
    layer = Conv2DTranspose(filters, kernel_size, strides=strides, padding=padding,
                            data_format=data_format, activation=activation, use_bias=use_bias,
                            kernel_initializer=kernel_initializer,
                            bias_initializer=bias_initializer,
                            kernel_regularizer=kernel_regularizer,
                            bias_regularizer=bias_regularizer,
                            kernel_constraint=kernel_constraint, bias_constraint=bias_constraint,
                            trainable=trainable, name=name, dtype=_input_dtype(inputs),
                            _reuse=reuse)
    return layer(inputs)
