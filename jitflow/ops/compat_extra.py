"""Small TF1 names classic programs reach for: sparse-dense products and sums, 1-D pooling,
`uniform_unit_scaling_initializer`, `op_scope`, `NoGradient`/`OpError` aliases,
`tf.layers.InputSpec`, `tf.train.basic_train_loop`, and the special functions `zeta`,
`igamma`, `igammac`, `erfinv`, `ndtri`, `xlog1py` (igamma, igammac and zeta have
gradients with respect to x only, not the order).
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np

from jitflow import dtypes as _dtypes
from jitflow.graph import Tensor, convert_to_tensor, make_op, name_scope
from jitflow.ops.registry import Example, register

__all__ = ["sparse_tensor_dense_matmul", "sparse_reduce_sum", "uniform_unit_scaling_initializer",
           "op_scope", "zeta", "igamma", "igammac"]

NAMESPACES = {
    "nn": ["max_pool1d", "avg_pool1d"],
    "sparse": [("sparse_dense_matmul", "sparse_tensor_dense_matmul"),
               ("reduce_sum", "sparse_reduce_sum")],
    "initializers": [("uniform_unit_scaling", "uniform_unit_scaling_initializer")],
    "math": ["zeta", "igamma", "igammac", "erfinv", "ndtri", "xlog1py"],
}


# -- sparse x dense -------------------------------------------------------------------------------
def sparse_tensor_dense_matmul(sp_a, b, adjoint_a: bool = False, adjoint_b: bool = False,
                               name: Optional[str] = None) -> Tensor:
    """`tf.sparse_tensor_dense_matmul`: SparseTensor [m, k] times dense [k, n] (gathers of b's
    rows scaled by the values and summed per output row, so it compiles and differentiates
    in `b` and the values)."""
    from jitflow.ops.array import expand_dims, gather, transpose, unsorted_segment_sum
    from jitflow.ops.math.casting import cast
    with name_scope(name, "SparseTensorDenseMatMul", [sp_a.indices, sp_a.values, b]):
        b = convert_to_tensor(b, name="b")
        if adjoint_b:
            b = transpose(b)
        rows = cast(sp_a.indices[:, 1 if adjoint_a else 0], _dtypes.int32)
        cols = cast(sp_a.indices[:, 0 if adjoint_a else 1], _dtypes.int32)
        shape = sp_a.shape.as_tuple()
        m = None if shape is None else shape[1 if adjoint_a else 0]
        if m is None:
            raise NotImplementedError("sparse_tensor_dense_matmul needs a SparseTensor of "
                                      "static dense_shape")
        contrib = gather(b, cols) * expand_dims(cast(sp_a.values, b.dtype), 1)
        return unsorted_segment_sum(contrib, rows, m)


def sparse_reduce_sum(sp_input, axis=None, keepdims=None, reduction_axes=None,
                      keep_dims=None, name: Optional[str] = None) -> Tensor:
    """`tf.sparse_reduce_sum`: the sum of a SparseTensor's values over `axis` (all when
    None), dense."""
    from jitflow.ops.reduce import _legacy, reduce_sum
    from jitflow.ops.sparse import sparse_tensor_to_dense
    axis = _legacy(axis, reduction_axes, "axis", "reduction_axes")
    keep = bool(_legacy(keepdims, keep_dims, "keepdims", "keep_dims"))
    with name_scope(name, "SparseReduceSum", [sp_input.values]):
        return reduce_sum(sparse_tensor_to_dense(sp_input), axis=axis, keepdims=keep)


# -- 1-D pooling ----------------------------------------------------------------------------------
def _pool1d(fn, input, ksize, strides, padding, name):  # noqa: A002
    from jitflow.ops.array import expand_dims, squeeze
    k = int(np.reshape(ksize, -1)[-2 if np.size(ksize) == 3 else 0])
    s = int(np.reshape(strides, -1)[-2 if np.size(strides) == 3 else 0])
    x = expand_dims(convert_to_tensor(input, name="input"), 1)
    return squeeze(fn(x, [1, 1, k, 1], [1, 1, s, 1], padding), [1], name=name)


def max_pool1d(input, ksize, strides, padding, data_format: str = "NWC",  # noqa: A002
               name: Optional[str] = None) -> Tensor:
    """`tf.nn.max_pool1d`: max pooling over [batch, width, channels]."""
    from jitflow.ops.nn.pool import max_pool
    return _pool1d(max_pool, input, ksize, strides, padding, name)


def avg_pool1d(input, ksize, strides, padding, data_format: str = "NWC",  # noqa: A002
               name: Optional[str] = None) -> Tensor:
    """`tf.nn.avg_pool1d`: average pooling over [batch, width, channels]."""
    from jitflow.ops.nn.pool import avg_pool
    return _pool1d(avg_pool, input, ksize, strides, padding, name)


# -- initializers, scopes, aliases ----------------------------------------------------------------
class uniform_unit_scaling_initializer:  # noqa: N801  (TF1 spelling)
    """Uniform in [-sqrt(3 / fan_in) * factor, +...]: keeps the scale of linear layers'
    inputs (fan_in: all dims but the last)."""

    def __init__(self, factor: float = 1.0, seed=None, dtype=_dtypes.float32) -> None:
        self.factor, self.seed, self.dtype = factor, seed, _dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None) -> Tensor:
        from jitflow.ops.random import random_uniform
        dims = [int(d) for d in shape]
        fan_in = float(np.prod(dims[:-1])) if len(dims) > 1 else float(dims[0] if dims else 1)
        limit = math.sqrt(3.0 / max(fan_in, 1.0)) * self.factor
        return random_uniform(dims, -limit, limit, dtype or self.dtype, seed=self.seed)

    def get_config(self) -> dict:
        return {"factor": self.factor, "seed": self.seed, "dtype": self.dtype.name}


def op_scope(values, name, default_name=None):
    """`tf.op_scope` (deprecated TF1): `name_scope(name, default_name, values)`."""
    return name_scope(name, default_name, values)


class InputSpec:
    """`tf.layers.InputSpec`: the dtype, shape or rank a layer accepts (recorded only)."""

    def __init__(self, dtype=None, shape=None, ndim=None, max_ndim=None, min_ndim=None,
                 axes=None) -> None:
        self.dtype = dtype
        self.shape = shape
        self.ndim = len(shape) if shape is not None else ndim
        self.max_ndim, self.min_ndim, self.axes = max_ndim, min_ndim, axes or {}


def basic_train_loop(supervisor, train_step_fn, args=None, kwargs=None,
                     master: str = "") -> None:
    """`tf.train.basic_train_loop`: call train_step_fn(session, *args, **kwargs) until the
    supervisor's coordinator asks to stop."""
    with supervisor.managed_session(master) as sess:
        while not supervisor.should_stop():
            train_step_fn(sess, *(args or ()), **(kwargs or {}))


# -- special functions ----------------------------------------------------------------------------
def _sp():
    import scipy.special
    return scipy.special


def _binary_infer(op):
    from jitflow.shapes import broadcast_static
    a, x = op.inputs
    if a.dtype.name not in ("float32", "float64") or a.dtype != x.dtype:
        raise TypeError(f"{op.type} needs two float32 or two float64 inputs")
    return [(x.dtype, broadcast_static(a.shape, x.shape))]


def _typed(fn):
    return lambda op, *xs: np.asarray(fn(*xs)).astype(op.outputs[0].dtype.as_numpy_dtype)


def _igamma_grad(sign: float):
    def grad(op, g):
        from jitflow.ops.math.unary import exp, log
        from jitflow.ops.segment import lgamma
        a, x = op.inputs
        # d/dx P(a, x) = exp(-x) x^(a-1) / Gamma(a); Q = 1 - P
        dx = exp(-x + (a - 1.0) * log(x) - lgamma(a))
        from jitflow.ops.math.common import unbroadcast
        return [None, unbroadcast(g * dx * sign, x)]
    return grad


def _zeta_grad(op, g):
    from jitflow.ops.math.common import unbroadcast
    s, q = op.inputs
    return [None, unbroadcast(-g * s * zeta(s + 1.0, q), q)]


register("Igamma", infer=_binary_infer, ref=_typed(lambda a, x: _sp().gammainc(a, x)),
         grad=_igamma_grad(1.0), kind="other", doc="The regularized lower incomplete gamma.",
         examples=[Example(lambda a, x: igamma(a + 2.0, x), [(3,), (3,)],
                           lambda a, x: _sp().gammainc(a + 2, x), domain="positive",
                           grad=False)])
register("Igammac", infer=_binary_infer, ref=_typed(lambda a, x: _sp().gammaincc(a, x)),
         grad=_igamma_grad(-1.0), kind="other", doc="The regularized upper incomplete gamma.",
         examples=[Example(lambda a, x: igammac(a + 2.0, x), [(3,), (3,)],
                           lambda a, x: _sp().gammaincc(a + 2, x), domain="positive",
                           grad=False)])
register("Zeta", infer=_binary_infer, ref=_typed(lambda s, q: _sp().zeta(s, q)),
         grad=_zeta_grad, kind="other", doc="The Hurwitz zeta function zeta(x, q).",
         examples=[Example(lambda s, q: zeta(s + 2.0, q), [(3,), (3,)],
                           lambda s, q: _sp().zeta(s + 2, q), domain="positive",
                           grad=False)])


def _binary(op_type, a, x, name):
    from jitflow.ops.math.common import convert_pair
    with name_scope(name, op_type, [a, x]) as scope:
        a, x = convert_pair(a, x)
        return make_op(op_type, [a, x], name=scope[:-1]).outputs[0]


def igamma(a, x, name: Optional[str] = None) -> Tensor:
    """`tf.igamma`: the regularized lower incomplete gamma function P(a, x)."""
    return _binary("Igamma", a, x, name)


def igammac(a, x, name: Optional[str] = None) -> Tensor:
    """`tf.igammac`: the regularized upper incomplete gamma function Q(a, x)."""
    return _binary("Igammac", a, x, name)


def zeta(x, q, name: Optional[str] = None) -> Tensor:
    """`tf.zeta`: the Hurwitz zeta function."""
    return _binary("Zeta", x, q, name)


def _unary_special(op_type: str, fn, dfn, doc: str):
    def grad(op, g):
        return [g * dfn(op.inputs[0], op.outputs[0])]
    register(op_type, infer=lambda op: [(op.inputs[0].dtype, op.inputs[0].shape)],
             ref=_typed(fn), grad=grad, kind="other", doc=doc)


def _erfinv_d(x, y):
    from jitflow.ops.math.unary import exp, square
    return (math.sqrt(math.pi) / 2.0) * exp(square(y))


def _ndtri_d(x, y):
    from jitflow.ops.math.unary import exp, square
    return math.sqrt(2.0 * math.pi) * exp(square(y) / 2.0)


_unary_special("Erfinv", lambda x: _sp().erfinv(x), _erfinv_d, "The inverse error function.")
_unary_special("Ndtri", lambda x: _sp().ndtri(x), _ndtri_d,
               "The inverse of the standard normal CDF.")


def erfinv(x, name: Optional[str] = None) -> Tensor:
    """`tf.math.erfinv`."""
    return make_op("Erfinv", [convert_to_tensor(x)], name=name or "Erfinv").outputs[0]


def ndtri(x, name: Optional[str] = None) -> Tensor:
    """`tf.math.ndtri`: the quantile function of the standard normal distribution."""
    return make_op("Ndtri", [convert_to_tensor(x)], name=name or "Ndtri").outputs[0]


def xlog1py(x, y, name: Optional[str] = None) -> Tensor:
    """`tf.math.xlog1py`: x * log1p(y), and 0 where x is 0."""
    from jitflow.ops.array import zeros_like
    from jitflow.ops.math.common import convert_pair, scalar_like
    from jitflow.ops.math.compare import equal, where_v2
    from jitflow.ops.math.unary import log1p
    with name_scope(name, "xlog1py", [x, y]):
        x, y = convert_pair(x, y)
        v = x * log1p(y)
        return where_v2(equal(x, scalar_like(0, x)), zeros_like(v), v)
