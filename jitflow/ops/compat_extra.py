"""Small TF1 names classic programs reach for: sparse-dense products and sums,
`uniform_unit_scaling_initializer`, `op_scope`, `tf.layers.InputSpec` and
`tf.train.basic_train_loop`.
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.core.graph import Tensor, convert_to_tensor, name_scope

__all__ = ["sparse_tensor_dense_matmul", "sparse_reduce_sum", "uniform_unit_scaling_initializer",
           "op_scope"]

NAMESPACES = {
    "sparse": [("sparse_dense_matmul", "sparse_tensor_dense_matmul"),
               ("reduce_sum", "sparse_reduce_sum")],
    "initializers": [("uniform_unit_scaling", "uniform_unit_scaling_initializer")],
}


# -- sparse x dense -------------------------------------------------------------------------------
def sparse_tensor_dense_matmul(sp_a, b, adjoint_a: bool = False, adjoint_b: bool = False,
                               name: Optional[str] = None) -> Tensor:
    """`tf.sparse_tensor_dense_matmul`: SparseTensor [m, k] times dense [k, n] (gathers of b's
    rows scaled by the values and summed per output row, so it compiles and differentiates
    in `b` and the values)."""
    from jitflow.ops.scatter import unsorted_segment_sum
    from jitflow.ops.shape_ops import expand_dims, transpose
    from jitflow.ops.slicing import gather
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
