"""`tf.reverse_sequence` (op `ReverseSequence`): reverse the first `seq_lengths[b]` entries of
each batch row along the sequence axis, copying the rest.

It runs through its NumPy reference (a gather by computed indices); its gradient is the same
reversal of the incoming gradient. Lengths below 0 or above the sequence dimension are
errors at run time, with TF1's messages.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from jitflow.core import errors
from jitflow.core.graph import Tensor, convert_to_tensor, make_op, name_scope
from jitflow.ops.registry import Example, register

__all__ = ["reverse_sequence"]


def _infer(op):
    x, lengths = op.inputs
    s, b = op.attrs["seq_dim"], op.attrs["batch_dim"]
    if not lengths.dtype.is_integer:
        raise TypeError(f"Input 'seq_lengths' of 'ReverseSequence' Op has type "
                        f"{lengths.dtype.name} that does not match expected type of int32 or "
                        "int64.")
    if lengths.shape.ndims not in (None, 1):
        raise ValueError(f"Shape must be rank 1 but is rank {lengths.shape.ndims} for "
                         f"'{op.name}' (op: 'ReverseSequence'): seq_lengths")
    r = x.shape.ndims
    if r is not None:
        if not (0 <= s < r and 0 <= b < r) or s == b:
            raise ValueError(f"Invalid seq_dim {s} and batch_dim {b} for an input of rank {r} "
                             f"in '{op.name}' (op: 'ReverseSequence')")
        xb = x.shape.as_list()[b]
        ln = lengths.shape.as_list()[0] if lengths.shape.ndims == 1 else None
        if xb is not None and ln is not None and xb != ln:
            raise ValueError(f"Dimension {b} in both shapes must be equal, but are {xb} and "
                             f"{ln} for '{op.name}' (op: 'ReverseSequence'): the batch "
                             "dimension and seq_lengths")
    return [(x.dtype, x.shape)]


def _ref(op, x, lengths):
    s, b = op.attrs["seq_dim"], op.attrs["batch_dim"]
    x = np.asarray(x)
    lengths = np.asarray(lengths).reshape(-1)
    if lengths.shape[0] != x.shape[b]:
        raise errors.InvalidArgumentError(
            None, op, f"Length of seq_lengths != input.dims({b}), ({lengths.shape[0]} vs. "
                      f"{x.shape[b]})\n\t [[node {op.name} (ReverseSequence)]]")
    n = x.shape[s]
    out = np.array(x, copy=True)
    for row, ln in enumerate(lengths):
        ln = int(ln)
        if ln < 0:
            raise errors.InvalidArgumentError(
                None, op, f"seq_lengths({row}) < 0\n\t [[node {op.name} (ReverseSequence)]]")
        if ln > n:
            raise errors.InvalidArgumentError(
                None, op, f"seq_lengths[{row}] > input.dims({s})\n\t [[node {op.name} "
                          "(ReverseSequence)]]")
        src = [slice(None)] * x.ndim
        dst = [slice(None)] * x.ndim
        src[b] = dst[b] = row
        src[s] = slice(ln - 1, None, -1) if ln > 0 else slice(0, 0)
        dst[s] = slice(0, ln)
        out[tuple(dst)] = x[tuple(src)]
    return out


def _grad(op, g):
    return [make_op("ReverseSequence", [g, op.inputs[1]], dict(op.attrs),
                    name="ReverseSequenceGrad").outputs[0], None]


def _example_expect(x):
    out = x.copy()
    for row, ln in enumerate([2, 0, 3]):
        out[row, :ln] = x[row, :ln][::-1]
    return out


register("ReverseSequence", infer=_infer, ref=_ref, grad=_grad, default_name="ReverseSequence",
         doc="Reverses the first seq_lengths[b] entries of each batch row along seq_dim.",
         examples=[Example(build=lambda x: reverse_sequence(x, [2, 0, 3], seq_axis=1),
                           inputs=[(3, 4, 2)], expect=_example_expect, id="rows")])


def reverse_sequence(input, seq_lengths, seq_axis: Optional[int] = None,  # noqa: A002
                     batch_axis: Optional[int] = None, name: Optional[str] = None,
                     seq_dim: Optional[int] = None, batch_dim: Optional[int] = None) -> Tensor:
    """`tf.reverse_sequence`: for each b, `out[b, :len[b]] = input[b, :len[b]][::-1]` along
    `seq_axis` (the rest copied); `batch_axis` defaults to 0, as in TF1."""
    if seq_dim is not None:
        if seq_axis is not None and seq_axis != seq_dim:
            raise ValueError("Cannot specify both 'seq_axis' and 'seq_dim'")
        seq_axis = seq_dim
    if batch_dim is not None:
        if batch_axis is not None and batch_axis != batch_dim:
            raise ValueError("Cannot specify both 'batch_axis' and 'batch_dim'")
        batch_axis = batch_dim
    if seq_axis is None:
        raise ValueError("reverse_sequence: seq_axis is required")
    batch_axis = 0 if batch_axis is None else int(batch_axis)
    with name_scope(name, "ReverseSequence", [input, seq_lengths]) as scope:
        x = convert_to_tensor(input, name="input")
        lengths = convert_to_tensor(seq_lengths, name="seq_lengths")
        r = x.shape.ndims
        s = int(seq_axis)
        if r is not None:
            s, batch_axis = s % r if -r <= s < r else s, \
                batch_axis % r if -r <= batch_axis < r else batch_axis
        return make_op("ReverseSequence", [x, lengths],
                       {"seq_dim": s, "batch_dim": batch_axis}, name=scope).outputs[0]
