"""`tf.SparseTensor`, `tf.SparseTensorValue` and the sparse ops TF1 programs reach for.

A SparseTensor is three tensors: `indices` (int64 [N, rank]), `values` ([N]) and
`dense_shape` (int64 [rank]). Fetching one gives a `SparseTensorValue`; a `sparse_placeholder`
is fed with a `SparseTensorValue` or an `(indices, values, dense_shape)` tuple. The sparse ops
are host ops: their sizes are only known when they run.
"""
from __future__ import annotations

import collections
from typing import Optional

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.core import errors
from jitflow.core.graph import Tensor, convert_to_tensor, get_default_graph, make_op, name_scope
from jitflow.ops.registry import register
from jitflow.core.shapes import TensorShape, as_shape

__all__ = ["SparseTensor", "SparseTensorValue", "sparse_tensor_to_dense", "sparse_to_dense",
           "sparse_placeholder"]

NAMESPACES = {
    "sparse": [("SparseTensor", "SparseTensor"), ("to_dense", "sparse_tensor_to_dense"),
               ("placeholder", "sparse_placeholder"), ("sparse_to_dense", "sparse_to_dense")],
}

SparseTensorValue = collections.namedtuple("SparseTensorValue",
                                           ["indices", "values", "dense_shape"])


class SparseTensor:
    """A sparse tensor: the `values` at `indices` of a tensor of shape `dense_shape`."""

    def __init__(self, indices, values, dense_shape) -> None:
        with name_scope(None, "SparseTensor", [indices, values, dense_shape]):
            self._indices = convert_to_tensor(indices, dtype=_dtypes.int64
                                              if not isinstance(indices, Tensor) else None,
                                              name="indices")
            self._values = convert_to_tensor(values, name="values")
            self._dense_shape = convert_to_tensor(
                dense_shape, dtype=_dtypes.int64 if not isinstance(dense_shape, Tensor)
                else None, name="dense_shape")
        for t, what in ((self._indices, "indices"), (self._dense_shape, "dense_shape")):
            if t.dtype != _dtypes.int64:
                raise TypeError(f"SparseTensor {what} must be int64, got {t.dtype.name}")
        if self._values.shape.ndims not in (None, 1):
            raise ValueError(f"SparseTensor values must be a vector, got shape "
                             f"{self._values.shape}")

    @classmethod
    def from_value(cls, value) -> "SparseTensor":
        if isinstance(value, SparseTensor):
            return value
        return cls(*value)

    indices = property(lambda self: self._indices)
    values = property(lambda self: self._values)
    dense_shape = property(lambda self: self._dense_shape)
    dtype = property(lambda self: self._values.dtype)
    op = property(lambda self: self._values.op)
    graph = property(lambda self: self._values.graph)

    @property
    def shape(self) -> TensorShape:
        """The static dense shape (known where `dense_shape` is a constant)."""
        op = self._dense_shape.op
        if op.type == "Const":
            return TensorShape([int(d) for d in op.attrs["value"]])
        if op.type == "Placeholder" and op.attrs.get("_sparse_shape") is not None:
            return op.attrs["_sparse_shape"]
        n = self._dense_shape.shape.as_tuple()
        return TensorShape(None) if n is None or n[0] is None else TensorShape([None] * n[0])

    def get_shape(self) -> TensorShape:
        return self.shape

    def eval(self, feed_dict=None, session=None):
        from jitflow.core.graph import session_for
        return session_for(session, self.graph, "evaluate tensor").run(self, feed_dict)

    # the session maps a fetched SparseTensor to its parts and builds a SparseTensorValue
    def _fetch_parts(self):
        return [self._indices, self._values, self._dense_shape], SparseTensorValue

    # a SparseTensor key of feed_dict feeds its three parts
    def _feed_parts(self, value) -> list:
        if isinstance(value, SparseTensor):
            raise TypeError("The value of a feed cannot be a tf.SparseTensor object.")
        try:
            ind, val, shp = value
        except (TypeError, ValueError):
            raise TypeError(f"A SparseTensor is fed with a SparseTensorValue or an (indices, "
                            f"values, dense_shape) tuple, got {type(value).__name__}") from None
        return [(self._indices, ind), (self._values, val), (self._dense_shape, shp)]

    def __repr__(self) -> str:
        return (f"SparseTensor(indices={self._indices!r}, values={self._values!r}, "
                f"dense_shape={self._dense_shape!r})")


def sparse_placeholder(dtype, shape=None, name: Optional[str] = None) -> SparseTensor:
    """`tf.sparse_placeholder`: a SparseTensor whose three parts are fed."""
    dtype = _dtypes.as_dtype(dtype)
    shape = as_shape(shape)
    rank = shape.ndims
    g = get_default_graph()
    with name_scope(name, "sparse_placeholder") as scope:
        prefix = scope[:-1] if scope else "Placeholder"
        values = make_op("Placeholder", [], {"dtype": dtype, "shape": TensorShape([None])},
                         name=prefix + "/values", graph=g).outputs[0]
        indices = make_op("Placeholder", [], {"dtype": _dtypes.int64,
                                              "shape": TensorShape([None, rank])},
                          name=prefix + "/indices", graph=g).outputs[0]
        dshape = make_op("Placeholder", [], {"dtype": _dtypes.int64,
                                             "shape": TensorShape([rank]),
                                             "_sparse_shape": shape},
                         name=prefix + "/shape", graph=g).outputs[0]
    return SparseTensor(indices, values, dshape)


# -- SparseToDense --------------------------------------------------------------------------------
def _std_infer(op):
    idx, shape, values, default = op.inputs
    if default.shape.ndims not in (None, 0):
        raise ValueError(f"default_value must be a scalar for '{op.name}', got shape "
                         f"{default.shape}")
    if values.dtype != default.dtype:
        raise TypeError(f"default_value ({default.dtype.name}) and values "
                        f"({values.dtype.name}) of '{op.name}' must have the same dtype")
    static = op.attrs.get("static_shape")
    if static is not None:
        out = TensorShape(static)
    else:
        n = shape.shape.as_tuple()
        out = TensorShape(None) if n is None or not n or n[0] is None \
            else TensorShape([None] * n[0])
    return [(values.dtype, out)]


def _std_ref(op, idx, shape, values, default):
    idx = np.asarray(idx, dtype=np.int64)
    shape = tuple(int(d) for d in np.reshape(shape, -1))
    if idx.ndim < 2:
        idx = idx.reshape(-1, 1) if len(shape) == 1 or idx.ndim == 0 else idx.reshape(1, -1)
    out = np.full(shape, default, dtype=op.outputs[0].dtype.as_numpy_dtype)
    n = idx.shape[0]
    vals = np.broadcast_to(np.asarray(values, dtype=out.dtype), (n,))
    if n == 0:
        return out
    if idx.shape[1] != len(shape):
        raise errors.InvalidArgumentError(
            None, op, f"sparse_indices should have {len(shape)} columns (the rank of "
                      f"output_shape), got {idx.shape[1]}\n\t [[node {op.name}]]")
    bad = np.any((idx < 0) | (idx >= np.asarray(shape, np.int64)), axis=1)
    if np.any(bad):
        i = int(np.argmax(bad))
        raise errors.InvalidArgumentError(
            None, op, f"indices[{i}] = [{','.join(map(str, idx[i]))}] is out of bounds: need "
                      f"0 <= index < [{','.join(map(str, shape))}]\n\t [[node {op.name}]]")
    out[tuple(idx.T)] = vals
    return out


def _std_grad(op, g):
    from jitflow.ops.slicing import gather_nd
    idx = op.inputs[0]
    from jitflow.ops.shape_ops import reshape
    from jitflow.ops.math.casting import cast
    rank_idx = idx.shape.ndims
    if rank_idx == 2:
        picked = gather_nd(g, idx)
    else:
        picked = gather_nd(g, reshape(cast(idx, _dtypes.int64), [-1, 1]))
    return [None, None, picked, None]


register("SparseToDense", infer=_std_infer, ref=_std_ref, grad=_std_grad, kind="host",
         doc="Inputs (sparse_indices, output_shape, sparse_values, default_value): a dense "
             "tensor with the values at the indices and the default elsewhere.")


def sparse_to_dense(sparse_indices, output_shape, sparse_values, default_value=0,
                    validate_indices: bool = True, name: Optional[str] = None) -> Tensor:
    """`tf.sparse_to_dense`: a dense tensor of `output_shape`, `sparse_values` at
    `sparse_indices` and `default_value` elsewhere."""
    with name_scope(name, "SparseToDense", [sparse_indices, output_shape, sparse_values]):
        idx = convert_to_tensor(sparse_indices, name="sparse_indices")
        shp = convert_to_tensor(output_shape, name="output_shape")
        vals = convert_to_tensor(sparse_values, name="sparse_values")
        default = convert_to_tensor(default_value, dtype=vals.dtype, name="default_value")
        static = None
        if shp.op.type == "Const":
            static = [int(d) for d in np.reshape(shp.op.attrs["value"], -1)]
        return make_op("SparseToDense", [idx, shp, vals, default], {"static_shape": static},
                       name=name or "SparseToDense").outputs[0]


def sparse_tensor_to_dense(sp_input, default_value=None, validate_indices: bool = True,
                           name: Optional[str] = None) -> Tensor:
    """`tf.sparse.to_dense` / `tf.sparse_tensor_to_dense`."""
    sp = SparseTensor.from_value(sp_input)
    if default_value is None:
        default_value = b"" if sp.dtype == _dtypes.string else 0
    with name_scope(name, "SparseToDense", [sp.indices, sp.values, sp.dense_shape]):
        default = convert_to_tensor(default_value, dtype=sp.dtype, name="default_value")
        static = sp.shape.as_tuple()
        static = list(static) if static is not None and None not in static else None
        op = make_op("SparseToDense", [sp.indices, sp.dense_shape, sp.values, default],
                     {"static_shape": static}, name=name or "SparseToDense")
        out = op.outputs[0]
        if static is None and sp.shape.ndims is not None:
            out.set_shape(sp.shape)
        return out
