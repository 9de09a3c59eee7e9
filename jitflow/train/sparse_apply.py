"""Sparse updates for gradients of gathers (embedding tables).

The gradient of `tf.gather(params, ids)` (and `embedding_lookup`) with respect to a variable
is a `GatherGrad` op: the output gradient summed into zeros shaped like the table. TF1 keeps it
as IndexedSlices and updates only the looked-up rows; here an optimizer that has a sparse
rule sees through the `GatherGrad` (`sparse_gradient`) and updates the rows in place with a
host op (`SparseApplyGradientDescent`), so a step over a 50,000-row table touches the batch's
rows instead of allocating, filling and applying a dense table-sized gradient.

Small tables (under `SPARSE_MIN_ELEMENTS`) keep the dense update, which fuses into the step's
single kernel. The in-place write validates every index first, so a bad index changes nothing;
it happens when the op runs, after the reads of the table that the step's gradient depends on.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from jitflow.core import errors
from jitflow.core.graph import Tensor, make_op
from jitflow.ops.registry import register

__all__ = ["sparse_gradient", "apply_sparse_gradient_descent"]


def _is_value_of(t: Tensor, var) -> bool:
    """Whether `t` is `var`'s value: its VariableV2 output or an Identity snapshot of it."""
    while True:
        if t.op is var.op:
            return True
        if t.op.type == "Identity" and t.op.inputs:
            t = t.op.inputs[0]
            continue
        return False


# Tables smaller than this many elements keep the dense update: one fused kernel for the whole
# step beats a host op there; above it, touching only the batch's rows wins by far (a 50,000 x
# 128 table: benchmarks/embedding_step.py).
SPARSE_MIN_ELEMENTS = 1 << 16


def sparse_gradient(grad: Tensor, var) -> Optional[tuple]:
    """([values...], [indices...]) when `grad` is a sum of axis-0 gather gradients of `var`'s
    value (one pair per gather) and the table is large, else None (applied densely)."""
    n = var.shape.num_elements() if var.shape.is_fully_defined() else None
    if n is not None and n < SPARSE_MIN_ELEMENTS:
        return None
    parts = [grad]
    if grad.op.type in ("AddN", "Add", "AddV2"):
        parts = list(grad.op.inputs)
    values, indices = [], []
    for p in parts:
        op = p.op
        if op.type != "GatherGrad" or op.attrs.get("axis", 0) != 0 \
                or not _is_value_of(op.inputs[2], var):
            return None
        values.append(op.inputs[0])
        indices.append(op.inputs[1])
    return values, indices


def _rows(op, var_op, indices, ctx) -> tuple:
    """The table buffer to update in place (this run's pending copy if it has one) and the
    flat indices, checked against its size."""
    buf = ctx.pending.get(var_op)
    if buf is None:
        buf = ctx.read_var(var_op)
    idx = np.asarray(indices).reshape(-1)
    bad = (idx < 0) | (idx >= buf.shape[0])
    if np.any(bad):
        i = int(np.argmax(bad))
        raise errors.InvalidArgumentError(
            None, op, f"indices[{i}] = {int(idx[i])} is not in [0, {buf.shape[0]})\n\t "
                      f"[[node {op.name} ({op.type})]]")
    return buf, idx


def _sgd_ref(op, var_op, lr, *parts, ctx):
    n = op.attrs["n"]
    idx = np.concatenate([np.reshape(i, -1) for i in parts[n:]])
    buf, idx = _rows(op, var_op, idx, ctx)
    upd = np.concatenate([np.reshape(v, (-1,) + buf.shape[1:]) for v in parts[:n]])
    if upd.shape[0] != idx.size:
        raise errors.InvalidArgumentError(
            None, op, f"gradient rows ({upd.shape[0]}) and indices ({idx.size}) of '{op.name}' "
                      "do not match")
    rows, sums = _rows_summed(idx, upd)
    buf[rows] -= (sums * np.asarray(lr, dtype=buf.dtype)).astype(buf.dtype, copy=False)
    return buf


def _rows_summed(idx: np.ndarray, upd: np.ndarray) -> tuple:
    """(distinct indices, the sum of the update rows of each): duplicates (a word twice in a
    batch) add up, with vectorized sorting instead of ufunc.at's element loop."""
    order = np.argsort(idx, kind="stable")
    sorted_idx = idx[order]
    starts = np.flatnonzero(np.r_[True, sorted_idx[1:] != sorted_idx[:-1]])
    if starts.size == idx.size:
        return idx, upd
    return sorted_idx[starts], np.add.reduceat(upd[order], starts, axis=0)


def _sgd_infer(op):
    var, lr = op.inputs[:2]
    n = op.attrs["n"]
    for v in op.inputs[2:2 + n]:
        if v.dtype != var.dtype:
            raise TypeError(f"gradient values ({v.dtype.name}) and variable "
                            f"({var.dtype.name}) of '{op.name}' must have the same dtype")
    for i in op.inputs[2 + n:]:
        if not i.dtype.is_integer:
            raise TypeError(f"indices of '{op.name}' must be integers, got {i.dtype.name}")
    return [(var.dtype, var.shape)]


register("SparseApplyGradientDescent", infer=_sgd_infer, ref=_sgd_ref, needs_ctx=True,
         stateful=True, differentiable=False, kind="host",
         doc="Inputs (var, lr, n gradient values, n indices): var[indices] -= lr * values in "
             "place (duplicate indices add up).")


def apply_sparse_gradient_descent(var, lr: Tensor, values: list, indices: list):
    """The op updating the rows `indices` of `var` by -lr * values (lists: one pair per
    gather of the variable)."""
    return make_op("SparseApplyGradientDescent",
                   [var.op.outputs[0], lr] + list(values) + list(indices), {"n": len(values)},
                   name="SparseApplyGradientDescent").outputs[0]
