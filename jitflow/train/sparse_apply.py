"""Sparse updates for gradients of gathers (embedding tables).

The gradient of `tf.gather(params, ids)` (and `embedding_lookup`) with respect to a variable
is a `GatherGrad` op: the output gradient summed into zeros shaped like the table. TF1 keeps it
as IndexedSlices and updates only the looked-up rows; here an optimizer that has a sparse
rule sees through the `GatherGrad` (`sparse_gradient`) and updates the rows in place with a
host op (`SparseApplyGradientDescent`), so a step over a 50,000-row table touches the batch's
rows instead of allocating, filling and applying a dense table-sized gradient.

The in-place write validates every index first, so a bad index changes nothing; it happens when
the op runs, after the reads of the table that the step's gradient depends on.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from jitflow import errors
from jitflow.graph import Tensor, make_op
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


def sparse_gradient(grad: Tensor, var) -> Optional[tuple]:
    """(values, indices) when `grad` is a sum of axis-0 gather gradients of `var`'s value,
    else None (the gradient is applied densely)."""
    parts = [grad]
    if grad.op.type in ("AddN", "Add", "AddV2"):
        parts = list(grad.op.inputs)
    values, indices = [], []
    for p in parts:
        op = p.op
        if op.type != "GatherGrad" or op.attrs.get("axis", 0) != 0 \
                or not _is_value_of(op.inputs[2], var):
            return None
        g, idx = op.inputs[0], op.inputs[1]
        if g.shape.ndims is None or idx.shape.ndims is None or var.shape.ndims is None:
            return None
        values.append(g)
        indices.append(idx)
    if len(values) == 1 and indices[0].shape.ndims == 1:
        return values[0], indices[0]
    from jitflow.ops.array import concat, reshape
    from jitflow.ops.math import cast
    from jitflow import dtypes as _dtypes
    row = var.shape.as_list()[1:]
    if None in row:
        return None
    values = [reshape(v, [-1] + row) for v in values]
    indices = [reshape(cast(i, _dtypes.int64) if i.dtype != _dtypes.int64 else i, [-1])
               for i in indices]
    if len(values) == 1:
        return values[0], indices[0]
    return concat(values, 0), concat(indices, 0)


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


def _sgd_ref(op, var_op, lr, values, indices, ctx):
    buf, idx = _rows(op, var_op, indices, ctx)
    upd = np.reshape(values, (idx.size,) + buf.shape[1:]) * np.asarray(lr, dtype=buf.dtype)
    np.subtract.at(buf, idx, upd.astype(buf.dtype, copy=False))
    return buf


def _sgd_infer(op):
    var, lr, values, indices = op.inputs
    if values.dtype != var.dtype:
        raise TypeError(f"gradient values ({values.dtype.name}) and variable "
                        f"({var.dtype.name}) of '{op.name}' must have the same dtype")
    if not indices.dtype.is_integer:
        raise TypeError(f"indices of '{op.name}' must be integers, got {indices.dtype.name}")
    return [(var.dtype, var.shape)]


register("SparseApplyGradientDescent", infer=_sgd_infer, ref=_sgd_ref, needs_ctx=True,
         stateful=True, differentiable=False, kind="host",
         doc="Inputs (var, lr, grad values, indices): var[indices] -= lr * values in place "
             "(duplicate indices add up).")


def apply_sparse_gradient_descent(var, lr: Tensor, values: Tensor, indices: Tensor):
    """The op updating the rows `indices` of `var` by -lr * values."""
    return make_op("SparseApplyGradientDescent", [var.op.outputs[0], lr, values, indices],
                   name="SparseApplyGradientDescent").outputs[0]
