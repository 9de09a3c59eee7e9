"""TopKV2 (`tf.nn.top_k`: the k largest entries of each row and their indices), its gradient
TopKGrad, and InTopKV2 (`tf.nn.in_top_k`, the usual TF1 accuracy op).
"""
from __future__ import annotations

import collections
from typing import Optional

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.core.graph import Tensor, convert_to_tensor, make_op, name_scope
from jitflow.ops.math.common import _NUMERIC, check_dtype
from jitflow.ops.reduce import _no_second_order
from jitflow.ops.registry import Example, register
from jitflow.core.shapes import TensorShape

__all__: list = []

NAMESPACES = {
    "nn": [
        "top_k", "in_top_k",
    ],
    "math": [
        "top_k", "in_top_k",
    ],
}


# -- top_k, in_top_k, embedding_lookup ------------------------------------------------------------
def _top_k_infer(op):
    x = op.inputs[0]
    check_dtype(op, x, _NUMERIC, "input")
    k = op.attrs["k"]
    if x.shape.ndims == 0:
        raise ValueError(f"Shape must be at least rank 1 but is rank 0 for '{op.name}' "
                         f"(op: 'TopKV2')")
    if x.shape.ndims is None:
        return [(x.dtype, TensorShape(None)), (_dtypes.int32, TensorShape(None))]
    last = x.shape.as_tuple()[-1]
    if last is not None and last < k:
        raise ValueError(f"input must have at least k={k} columns, got {last} for "
                         f"'{op.name}' (op: 'TopKV2')")
    shape = TensorShape(x.shape.as_tuple()[:-1] + (k,))
    return [(x.dtype, shape), (_dtypes.int32, shape)]


def _top_k_ref(op, x):
    x = np.asarray(x)
    k = op.attrs["k"]
    if x.shape[-1] < k:
        raise ValueError(f"input must have at least k={k} columns, got {x.shape[-1]}")
    key = -x.astype(np.float64) if x.dtype.kind != "f" else -x
    idx = np.argsort(key, axis=-1, kind="stable")[..., :k]  # ties: the lower index first
    return np.take_along_axis(x, idx, axis=-1), idx.astype(np.int32)


def _top_k_grad(op, g_values, g_indices=None):
    if g_values is None:
        return [None]
    x, idx = op.inputs[0], op.outputs[1]
    return [make_op("TopKGrad", [g_values, idx, x], name="TopKGrad").outputs[0]]


def _top_k_grad_ref(op, g, idx, x):
    out = np.zeros(np.shape(x), dtype=np.asarray(g).dtype)
    np.put_along_axis(out, np.asarray(idx, dtype=np.intp), g, axis=-1)
    return out


register("TopKV2", infer=_top_k_infer, ref=_top_k_ref, grad=_top_k_grad, kind="row",
         doc="The k largest entries of each row (attr k) and their int32 indices; equal "
             "values keep their order.",
         examples=[Example(lambda a: top_k(a, 2)[0], [(3, 5)],
                           lambda a: -np.sort(-a, axis=-1)[:, :2], id="values"),
                   Example(lambda a: top_k(a, 3)[1], [(2, 6)],
                           lambda a: np.argsort(-a.astype(np.float64), -1,
                                                kind="stable")[:, :3],
                           ("float32", "int32"), grad=False, id="indices")])
register("TopKGrad", infer=lambda op: [(op.inputs[0].dtype, op.inputs[2].shape)],
         ref=_top_k_grad_ref, grad=lambda op, h: _no_second_order(op), kind="other",
         doc="Inputs (g, indices, x): zeros shaped like x with g placed at the indices along "
             "the last axis (the gradient of TopKV2).",
         examples=[Example(lambda g, x: make_op("TopKGrad", [g, top_k(x, 2)[1], x]).outputs[0],
                           [(2, 2), (2, 4)],
                           lambda g, x: _np_put_top2(g, x), grad=False)])


def _np_put_top2(g, x):
    out = np.zeros(x.shape)
    for i in range(x.shape[0]):
        order = sorted(range(x.shape[1]), key=lambda j: (-x[i, j], j))[:2]
        for slot, j in enumerate(order):
            out[i, j] = g[i, slot]
    return out


# TF's result type: a namedtuple of the op's two outputs (`r.values`, `r.indices`, or unpacked);
# Session.run of it gives the same namedtuple of arrays.
TopKV2 = collections.namedtuple("TopKV2", ["values", "indices"])


def top_k(input, k: int = 1, sorted: bool = True, name: Optional[str] = None):  # noqa: A002
    """`tf.nn.top_k`: `TopKV2(values, indices)` of the `k` largest entries along the last axis."""
    if isinstance(k, Tensor):
        if k.op.type != "Const":
            raise NotImplementedError("top_k: k must be known when the graph is built")
        k = int(k.op.attrs["value"])
    if int(k) < 0:
        raise ValueError(f"Need k >= 0, got {k}")
    x = convert_to_tensor(input, name="input")
    op = make_op("TopKV2", [x], {"k": int(k), "sorted": bool(sorted)}, name=name or "TopKV2")
    return TopKV2(*op.outputs)


def _in_top_k_infer(op):
    pred, targets = op.inputs
    check_dtype(op, pred, ("float32",), "predictions")
    check_dtype(op, targets, ("int32", "int64"), "targets")
    if pred.shape.ndims not in (None, 2):
        raise ValueError(f"Shape must be rank 2 but is rank {pred.shape.ndims} for "
                         f"'{op.name}' (op: 'InTopKV2')")
    if targets.shape.ndims not in (None, 1):
        raise ValueError(f"Shape must be rank 1 but is rank {targets.shape.ndims} for "
                         f"'{op.name}' (op: 'InTopKV2')")
    batch = pred.shape[0].value if pred.shape.ndims else None
    shape = TensorShape([batch]).merge_with(targets.shape) if targets.shape.ndims else \
        TensorShape([batch])
    return [(_dtypes.bool_, shape)]


def _in_top_k_ref(op, pred, targets):
    pred, targets = np.asarray(pred), np.asarray(targets)
    n = pred.shape[1]
    if np.any((targets < 0) | (targets >= n)):
        raise ValueError(f"targets must be in [0, {n}), got {targets.tolist()}")
    t = pred[np.arange(len(targets)), targets]
    better = np.sum(pred > t[:, None], axis=1)
    return np.isfinite(t) & (better < op.attrs["k"])


register("InTopKV2", infer=_in_top_k_infer, ref=_in_top_k_ref, differentiable=False,
         kind="row", doc="Whether each target's prediction is among the k largest of its row "
                         "(ties count in its favour; non-finite predictions never are).",
         examples=[Example(lambda p: in_top_k(p, _IN_TOP_K_TARGETS, 2), [(3, 4)],
                           lambda p: np.array([p[i, t] >= np.sort(p[i])[-2] for i, t in
                                               enumerate(_IN_TOP_K_TARGETS)]),
                           ("float32",), grad=False)])
_IN_TOP_K_TARGETS = np.array([0, 3, 1], dtype=np.int32)


def in_top_k(predictions, targets, k: int, name: Optional[str] = None) -> Tensor:
    """`tf.nn.in_top_k`: bool per row, true when predictions[i, targets[i]] is among the `k`
    largest of row i (the usual TF1 accuracy op)."""
    with name_scope(name, "in_top_k", [predictions, targets]) as scope:
        p = convert_to_tensor(predictions, name="predictions")
        t = convert_to_tensor(targets, name="targets")
        return make_op("InTopKV2", [p, t], {"k": int(k)}, name=scope).outputs[0]
