"""`tf.nn.static_rnn`, `dynamic_rnn` and their bidirectional forms: a cell over a sequence.

`static_rnn` unrolls the cell over a Python list of inputs (one copy of the step per time
step). `dynamic_rnn` is one `tf.while_loop` over a TensorArray of time slices, as TF1 builds
it: the step is built (and compiled) once, whatever the number of steps, and the number of
steps is the fed sequence length. With `sequence_length`, steps past a row's length give zero
outputs and copy the state through, so the final state is each row's state at its own last
step; the loop stops at the longest length.

Variables are made by the cell in the variable scope `scope or "rnn"` (`rnn/basic_lstm_cell/
kernel`), and `bidirectional_rnn/fw/...`, `bidirectional_rnn/bw/...` for the bidirectional
forms, as TF1 names them.
"""
from __future__ import annotations

from typing import Optional

from jitflow.core import dtypes as _dtypes
from jitflow.core.graph import Tensor, convert_to_tensor, name_scope
from jitflow.ops import (
    join as _join, shape_ops as _shape_ops, sources as _sources, tile_pad as _tile_pad,
)
from jitflow.ops.identity import identity as _identity
from jitflow.ops.math import casting as _casting, compare as _compare
from jitflow.ops.control_flow import while_loop
from jitflow.ops.sequence_ops import reverse_sequence
from jitflow.ops.tensor_array import TensorArray
from jitflow.ops.variable_scope import variable_scope
from jitflow.core.shapes import TensorShape
from jitflow.core.structure import flatten, is_nested, pack_sequence_as
from jitflow.lib.rnn_cell import (assert_like_rnncell, assert_same_structure, concat_shape,
                                  map_structure)

__all__ = ["static_rnn", "static_bidirectional_rnn", "dynamic_rnn",
           "bidirectional_dynamic_rnn"]


def _transpose_batch_time(x: Tensor) -> Tensor:
    """[batch, time, ...] <-> [time, batch, ...] (rank < 2 unchanged)."""
    r = x.shape.ndims
    if r is None:
        raise ValueError(f"The rank of the RNN input {x.name} must be known")
    if r < 2:
        return x
    return _shape_ops.transpose(x, [1, 0] + list(range(2, r)))


def _infer_state_dtype(explicit, state):
    if explicit is not None:
        return _dtypes.as_dtype(explicit)
    leaves = flatten(state)
    if not leaves:
        raise ValueError(f"Unable to infer dtype from empty state={state}.")
    dts = [t.dtype for t in leaves]
    if any(d != dts[0] for d in dts):
        raise ValueError(f"State has tensors of different inferred_dtypes. Unable to infer a "
                         f"single representative dtype. Dtypes received: {dts}")
    return dts[0]


def _initial_state(cell, initial_state, batch_size, dtype):
    if initial_state is not None:
        return initial_state
    if not dtype:
        raise ValueError("If there is no initial_state, you must give a dtype.")
    if getattr(cell, "get_initial_state", None) is not None:
        return cell.get_initial_state(inputs=None, batch_size=batch_size, dtype=dtype)
    return cell.zero_state(batch_size, dtype)


def _lengths(sequence_length, what: str) -> Tensor:
    ln = _casting.cast(sequence_length, _dtypes.int32)
    if ln.shape.ndims not in (None, 1):
        raise ValueError(f"{what}: sequence_length must be a vector of length batch_size, but "
                         f"saw shape: {ln.shape}")
    return _identity(ln, name="sequence_length")


def _select_step(time, lengths, zero_output, state, new_output, new_state):
    """Rows whose length is reached keep `zero_output` and the old `state` (TF1's copy
    through); the others take the new values."""
    assert_same_structure(zero_output, new_output)
    assert_same_structure(state, new_state)
    done = _compare.greater_equal(time, lengths)

    def pick(old, new):
        if new.shape.ndims == 0:
            return new
        out = _compare.where(done, old, new)
        out.set_shape(old.shape)
        return out
    out = map_structure(pick, zero_output, new_output)
    st = map_structure(pick, state, new_state)
    return out, st


# -- static -----------------------------------------------------------------------------------
def static_rnn(cell, inputs, initial_state=None, dtype=None, sequence_length=None,
               scope=None):
    """`tf.nn.static_rnn`: the cell unrolled over a list of [batch, input] tensors.

    Returns (outputs, final state): a list with one output per input and the last state (with
    `sequence_length`, each row's state at its own last step, and zero outputs past it).
    """
    assert_like_rnncell("cell", cell)
    if not is_nested(inputs):
        raise TypeError("inputs must be a sequence")
    if not inputs:
        raise ValueError("inputs must not be empty")
    outputs = []
    with variable_scope(scope or "rnn") as varscope:
        first = inputs[0]
        while is_nested(first):
            first = first[0]
        first = convert_to_tensor(first)
        if first.shape.ndims != 1:
            for x in flatten(inputs[0]):
                shape = convert_to_tensor(x).shape
                if shape.ndims is not None and shape.ndims < 2:
                    raise ValueError(f"Input {x} must have rank at least 2")
                if shape.ndims is not None and any(d is None for d in shape.as_list()[1:]):
                    raise ValueError(f"Input size (dimension 1 of input {x.name}) must be "
                                     "accessible via shape inference, but saw value None.")
        fixed = first.shape.as_list()[0] if first.shape.ndims else None
        batch_size = fixed if fixed is not None else _shape_ops.shape(first)[0]
        state = _initial_state(cell, initial_state, batch_size, dtype)
        if sequence_length is not None:
            lengths = _lengths(convert_to_tensor(sequence_length, name="sequence_length"),
                               "static_rnn")
            sdt = _infer_state_dtype(dtype, state)
            zero_output = map_structure(
                lambda s: _zeros_output(batch_size, fixed, s, sdt), cell.output_size)
        for time, x in enumerate(inputs):
            if time > 0:
                varscope.reuse_variables()
            output, new_state = cell(x, state)
            if sequence_length is not None:
                output, new_state = _select_step(time, lengths, zero_output, state, output,
                                                 new_state)
            state = new_state
            outputs.append(output)
        return outputs, state


def _zeros_output(batch_size, fixed, size, dtype) -> Tensor:
    z = _sources.zeros(concat_shape(batch_size, size), dtype=dtype)
    z.set_shape(concat_shape(fixed, size, static=True))
    return z


def _reverse_seq(input_seq: list, lengths) -> list:
    """A list of time steps reversed, each row only up to its length."""
    if lengths is None:
        return list(reversed(input_seq))
    flat_steps = [flatten(x) for x in input_seq]
    columns = []
    for k in range(len(flat_steps[0])):
        seq = [convert_to_tensor(step[k]) for step in flat_steps]
        rev = _join.unstack(reverse_sequence(_join.stack(seq), lengths, seq_axis=0,
                                             batch_axis=1))
        for r, x in zip(rev, seq):
            r.set_shape(x.shape)
        columns.append(rev)
    return [pack_sequence_as(x, [col[t] for col in columns]) for t, x in enumerate(input_seq)]


def static_bidirectional_rnn(cell_fw, cell_bw, inputs, initial_state_fw=None,
                             initial_state_bw=None, dtype=None, sequence_length=None,
                             scope=None):
    """`tf.nn.static_bidirectional_rnn`: returns (outputs, output_state_fw, output_state_bw),
    each output the forward and backward outputs concatenated on axis 1."""
    assert_like_rnncell("cell_fw", cell_fw)
    assert_like_rnncell("cell_bw", cell_bw)
    if not is_nested(inputs):
        raise TypeError("inputs must be a sequence")
    if not inputs:
        raise ValueError("inputs must not be empty")
    with variable_scope(scope or "bidirectional_rnn"):
        with variable_scope("fw") as fw_scope:
            out_fw, state_fw = static_rnn(cell_fw, inputs, initial_state_fw, dtype,
                                          sequence_length, scope=fw_scope)
        with variable_scope("bw") as bw_scope:
            rev = _reverse_seq(inputs, sequence_length)
            tmp, state_bw = static_rnn(cell_bw, rev, initial_state_bw, dtype,
                                       sequence_length, scope=bw_scope)
    out_bw = _reverse_seq(tmp, sequence_length)
    outputs = [pack_sequence_as(fw, [_join.concat([a, b], 1) for a, b in
                                     zip(flatten(fw), flatten(bw))])
               for fw, bw in zip(out_fw, out_bw)]
    return outputs, state_fw, state_bw


# -- dynamic ----------------------------------------------------------------------------------
def dynamic_rnn(cell, inputs, sequence_length=None, initial_state=None, dtype=None,
                parallel_iterations: Optional[int] = None, swap_memory: bool = False,
                time_major: bool = False, scope=None):
    """`tf.nn.dynamic_rnn`: the cell run by a while loop over the time axis of `inputs`
    ([batch, time, depth], or [time, batch, depth] with `time_major`).

    Returns (outputs, final state); outputs are [batch, time, output_size] (time-major with
    `time_major`). `parallel_iterations` and `swap_memory` are accepted.
    """
    assert_like_rnncell("cell", cell)
    with variable_scope(scope or "rnn"):
        flat = [convert_to_tensor(x) for x in flatten(inputs)]
        if not time_major:
            flat = [_transpose_batch_time(x) for x in flat]
        lengths = None
        if sequence_length is not None:
            lengths = _lengths(convert_to_tensor(sequence_length), "dynamic_rnn")
        batch_size = _batch_size(flat)
        state = _initial_state(cell, initial_state, batch_size, dtype)
        tm_inputs = pack_sequence_as(inputs, flat)
        outputs, final_state = _dynamic_rnn_loop(cell, tm_inputs, state, lengths, dtype,
                                                 parallel_iterations or 32)
        if not time_major:
            outputs = map_structure(_transpose_batch_time, outputs)
        return outputs, final_state


def _batch_size(flat: list):
    """The static batch size (dim 1 of time-major inputs) if known, else a tensor."""
    for x in flat:
        r = x.shape.ndims
        if r is None:
            continue
        if r < 2:
            raise ValueError(f"Input tensor should have rank >= 2. Received input={x.name} of "
                             f"rank {r}")
        b = x.shape.as_list()[1]
        if b is not None:
            return b
    return _shape_ops.shape(flat[0])[1]


def _dynamic_rnn_loop(cell, inputs, initial_state, lengths, dtype, parallel_iterations: int):
    state = initial_state
    flat_in = flatten(inputs)
    flat_out_size = flatten(cell.output_size)
    time_steps = _shape_ops.shape(flat_in[0])[0]
    batch_size = _batch_size(flat_in)
    shapes = []
    for x in flat_in:
        s = x.shape
        if s.ndims is None or s.ndims < 3:
            raise ValueError(f"Shape {s} must have rank at least 3 (time, batch, depth) for "
                             f"the dynamic_rnn input {x.name}")
        if any(d is None for d in s.as_list()[2:]):
            raise ValueError(f"Input size (depth of inputs) must be accessible via shape "
                             f"inference, but saw value None for input={x.name}.")
        shapes.append(s)
    const_t, const_b = shapes[0].as_list()[:2]
    for x, s in zip(flat_in, shapes):
        t, b = s.as_list()[:2]
        if t != const_t:
            raise ValueError(f"Time steps is not the same for all the elements in the input in "
                             f"a batch: {t} for input={x.name}, {const_t} for the first.")
        if b != const_b:
            raise ValueError(f"Batch_size is not the same for all the elements in the input: "
                             f"{b} for input={x.name}, {const_b} for the first.")
    out_dtype = _infer_state_dtype(dtype, state)
    zero_output = pack_sequence_as(cell.output_size, [
        _zeros_output(batch_size, const_b, s, out_dtype) for s in flat_out_size])
    if lengths is not None:
        from jitflow.ops.reduce import reduce_max
        max_len = reduce_max(lengths)
        loop_bound = _compare.minimum(time_steps, _compare.maximum(1, max_len))
    else:
        loop_bound = time_steps
    time = _sources.constant(0, dtype=_dtypes.int32, name="time")
    with name_scope("dynamic_rnn") as base:
        pass
    out_tas = tuple(
        TensorArray(out_dtype, size=time_steps,
                    element_shape=TensorShape(concat_shape(const_b, s, static=True)),
                    tensor_array_name=f"{base}output_{k}")
        for k, s in enumerate(flat_out_size))
    in_tas = tuple(
        TensorArray(x.dtype, size=time_steps, element_shape=x.shape.as_list()[1:],
                    tensor_array_name=f"{base}input_{k}").unstack(x)
        for k, x in enumerate(flat_in))

    def step(t, out_ta, st):
        xs = [ta.read(t) for ta in in_tas]
        for x, s in zip(xs, shapes):
            x.set_shape(s.as_list()[1:])
        x_t = pack_sequence_as(inputs, xs)
        output, new_state = cell(x_t, st)
        if lengths is not None:
            output, new_state = _select_step(t, lengths, zero_output, st, output, new_state)
        outs = flatten(output)
        return t + 1, tuple(ta.write(t, o) for ta, o in zip(out_ta, outs)), new_state

    _, final_tas, final_state = while_loop(
        lambda t, *_: t < loop_bound, step, (time, out_tas, state),
        parallel_iterations=parallel_iterations, maximum_iterations=time_steps)
    outs = []
    for ta, s in zip(final_tas, flat_out_size):
        o = ta.stack()
        o.set_shape([const_t] + concat_shape(const_b, s, static=True))
        outs.append(o)
    return pack_sequence_as(cell.output_size, outs), final_state


def bidirectional_dynamic_rnn(cell_fw, cell_bw, inputs, sequence_length=None,
                              initial_state_fw=None, initial_state_bw=None, dtype=None,
                              parallel_iterations: Optional[int] = None,
                              swap_memory: bool = False, time_major: bool = False, scope=None):
    """`tf.nn.bidirectional_dynamic_rnn`: returns ((output_fw, output_bw), (state_fw,
    state_bw)); the backward cell reads each row reversed up to its length, and its outputs
    are reversed back."""
    assert_like_rnncell("cell_fw", cell_fw)
    assert_like_rnncell("cell_bw", cell_bw)
    time_axis, batch_axis = (0, 1) if time_major else (1, 0)

    def reverse(x):
        x = convert_to_tensor(x)
        if sequence_length is not None:
            return reverse_sequence(x, sequence_length, seq_axis=time_axis,
                                    batch_axis=batch_axis)
        return _tile_pad.reverse(x, axis=[time_axis])

    with variable_scope(scope or "bidirectional_rnn"):
        with variable_scope("fw") as fw_scope:
            out_fw, state_fw = dynamic_rnn(cell_fw, inputs, sequence_length, initial_state_fw,
                                           dtype, parallel_iterations, swap_memory, time_major,
                                           scope=fw_scope)
        with variable_scope("bw") as bw_scope:
            rev = map_structure(reverse, inputs)
            tmp, state_bw = dynamic_rnn(cell_bw, rev, sequence_length, initial_state_bw, dtype,
                                        parallel_iterations, swap_memory, time_major,
                                        scope=bw_scope)
    out_bw = reverse(tmp) if not is_nested(tmp) else map_structure(reverse, tmp)
    return (out_fw, out_bw), (state_fw, state_bw)
