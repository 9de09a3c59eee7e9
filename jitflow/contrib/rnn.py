"""`tf.contrib.rnn`: TF1's recurrent cells as tutorials import them.

The core cells and wrappers are `tf.nn.rnn_cell`'s (the same classes, as in TF 1.15):
BasicRNNCell, BasicLSTMCell, LSTMCell, GRUCell, MultiRNNCell, DropoutWrapper, ResidualWrapper,
DeviceWrapper, LSTMStateTuple, RNNCell, LayerRNNCell; with `static_rnn` and
`static_bidirectional_rnn`. Contrib's own pieces, with TF 1.15's variable names:

- `LayerNormBasicLSTMCell`: an LSTM with layer normalization of each gate and of the new cell
  state (`kernel`, no bias; `input|transform|forget|output|state/gamma,beta`) and recurrent
  dropout on the candidate;
- `LSTMBlockCell` (scope `lstm_cell`, `kernel`, `bias`, peepholes `w_i_diag`...),
  `GRUBlockCell` (`w_ru`, `b_ru`, `w_c`, `b_c`) and `GRUBlockCellV2` (`gates/kernel`, ...):
  TF's fused-kernel cells, computed with the same math as LSTMCell and GRUCell;
- `EmbeddingWrapper`, `InputProjectionWrapper`, `OutputProjectionWrapper`;
- `stack_bidirectional_rnn`, `stack_bidirectional_dynamic_rnn`, `transpose_batch_time`,
  `best_effort_input_batch_size`.
"""
from __future__ import annotations

import math
from typing import Callable, Optional

import jitflow as tf
from jitflow.contrib.layers.layers import layer_norm
from jitflow.lib.rnn import (_batch_size, _transpose_batch_time, bidirectional_dynamic_rnn,
                             static_bidirectional_rnn, static_rnn)
from jitflow.lib.rnn_cell import (BasicLSTMCell, BasicRNNCell, DeviceWrapper, DropoutWrapper,
                                  GRUCell, LayerRNNCell, LSTMCell, LSTMStateTuple, MultiRNNCell,
                                  ResidualWrapper, RNNCell, _last_dim, assert_like_rnncell,
                                  flatten)

__all__ = [
    "RNNCell", "LayerRNNCell", "BasicRNNCell", "BasicLSTMCell", "GRUCell", "LSTMCell",
    "LSTMStateTuple", "DropoutWrapper", "MultiRNNCell", "DeviceWrapper", "ResidualWrapper",
    "EmbeddingWrapper", "InputProjectionWrapper", "OutputProjectionWrapper",
    "LayerNormBasicLSTMCell", "LSTMBlockCell", "GRUBlockCell", "GRUBlockCellV2", "static_rnn",
    "static_bidirectional_rnn", "stack_bidirectional_rnn", "stack_bidirectional_dynamic_rnn",
    "transpose_batch_time", "best_effort_input_batch_size",
]


# -- contrib's cells ------------------------------------------------------------------------------
class LayerNormBasicLSTMCell(RNNCell):
    """A basic LSTM whose four gate pre-activations and new cell state are layer-normalized
    (Ba et al. 2016), with optional recurrent dropout on the candidate values (Semeniuta et
    al. 2016: `dropout_keep_prob`, a float or a scalar tensor).

    Variables, in the cell scope `layer_norm_basic_lstm_cell`: `kernel` [input + units,
    4 * units] (the gates i, j, f, o; a `bias` only with `layer_norm=False`), and `gamma`
    (initial `norm_gain`) and `beta` (initial `norm_shift`) of shape [units] in the sub-scopes
    `input`, `transform`, `forget`, `output` and `state`.
    """

    def __init__(self, num_units: int, forget_bias: float = 1.0, input_size=None,
                 activation: Callable = tf.tanh, layer_norm: bool = True,
                 norm_gain: float = 1.0, norm_shift: float = 0.0, dropout_keep_prob=1.0,
                 dropout_prob_seed=None, reuse=None) -> None:
        super().__init__(_reuse=reuse)
        self._num_units = int(num_units)
        self._activation = activation
        self._forget_bias = forget_bias
        self._keep_prob = dropout_keep_prob
        self._seed = dropout_prob_seed
        self._layer_norm = layer_norm
        self._norm_gain = norm_gain
        self._norm_shift = norm_shift

    @property
    def state_size(self):
        return LSTMStateTuple(self._num_units, self._num_units)

    @property
    def output_size(self):
        return self._num_units

    def _norm(self, x, scope: str, dtype):
        shape = x.shape[-1:]
        with tf.variable_scope(scope):
            tf.get_variable("gamma", shape=shape, dtype=dtype,
                            initializer=tf.constant_initializer(self._norm_gain))
            tf.get_variable("beta", shape=shape, dtype=dtype,
                            initializer=tf.constant_initializer(self._norm_shift))
        return layer_norm(x, reuse=True, scope=scope)

    def _linear(self, args):
        n = 4 * self._num_units
        kernel = tf.get_variable("kernel", [args.shape.as_list()[-1], n], dtype=args.dtype)
        out = tf.matmul(args, kernel)
        if not self._layer_norm:
            out = tf.nn.bias_add(out, tf.get_variable("bias", [n], dtype=args.dtype))
        return out

    def call(self, inputs, state):
        c, h = state
        args = tf.concat([inputs, h], 1)
        _last_dim(args.shape, self.name)
        i, j, f, o = tf.split(self._linear(args), num_or_size_splits=4, axis=1)
        dtype = args.dtype
        if self._layer_norm:
            i = self._norm(i, "input", dtype)
            j = self._norm(j, "transform", dtype)
            f = self._norm(f, "forget", dtype)
            o = self._norm(o, "output", dtype)
        g = self._activation(j)
        if not isinstance(self._keep_prob, float) or self._keep_prob < 1:
            g = tf.nn.dropout(g, self._keep_prob, seed=self._seed)
        new_c = c * tf.sigmoid(f + self._forget_bias) + tf.sigmoid(i) * g
        if self._layer_norm:
            new_c = self._norm(new_c, "state", dtype)
        new_h = self._activation(new_c) * tf.sigmoid(o)
        return new_h, LSTMStateTuple(new_c, new_h)


class LSTMBlockCell(LSTMCell):
    """`tf.contrib.rnn.LSTMBlockCell`: TF's fused LSTM kernel as a cell. The same math as
    LSTMCell (gates i, j, f, o; forget_bias added at run time; optional peepholes and cell
    clipping, `cell_clip` None or <= 0 meaning none), variables `lstm_cell/kernel`, `bias`,
    `w_i_diag`, `w_f_diag`, `w_o_diag`; the state is always an LSTMStateTuple."""

    def __init__(self, num_units: int, forget_bias: float = 1.0, cell_clip=None,
                 use_peephole: bool = False, dtype=None, reuse=None,
                 name: str = "lstm_cell") -> None:
        clip = None if cell_clip is None or cell_clip <= 0 else cell_clip
        super().__init__(num_units, use_peepholes=use_peephole, cell_clip=clip,
                         forget_bias=forget_bias, state_is_tuple=True, reuse=reuse, name=name,
                         dtype=dtype)


class GRUBlockCellV2(GRUCell):
    """`tf.contrib.rnn.GRUBlockCellV2`: TF's fused GRU kernel as a cell; GRUCell's math and
    variable names (`gru_cell/gates/kernel`, `gates/bias` ones, `candidate/kernel`,
    `candidate/bias` zeros). `cell_size` is the deprecated name of `num_units`."""

    def __init__(self, num_units: Optional[int] = None, cell_size: Optional[int] = None,
                 reuse=None, name: str = "gru_cell") -> None:
        if num_units is None:
            if cell_size is None:
                raise ValueError("num_units must not be None.")
            num_units = cell_size
        super().__init__(num_units, reuse=reuse, name=name)


class GRUBlockCell(GRUBlockCellV2):
    """`tf.contrib.rnn.GRUBlockCell`: GRUBlockCellV2 with the older variable names `w_ru`
    [input + units, 2 * units], `b_ru` (ones), `w_c` and `b_c` (zeros)."""

    def build(self, input_shape) -> None:
        depth = _last_dim(input_shape, self.name)
        n = self._num_units
        self._gate_kernel = self.add_weight("w_ru", shape=[depth + n, 2 * n])
        self._gate_bias = self.add_weight("b_ru", shape=[2 * n],
                                          initializer=tf.constant_initializer(1.0))
        self._candidate_kernel = self.add_weight("w_c", shape=[depth + n, n])
        self._candidate_bias = self.add_weight("b_c", shape=[n],
                                               initializer=tf.constant_initializer(0.0))
        self.built = True


# -- the wrappers that stayed in contrib ----------------------------------------------------------
class _ContribWrapper(RNNCell):
    """A cell around `cell` that owns a variable scope (`<snake_case class name>`) in which
    the wrapped cell is called."""

    def __init__(self, cell, reuse=None) -> None:
        super().__init__(_reuse=reuse)
        assert_like_rnncell("cell", cell)
        self._cell = cell

    @property
    def state_size(self):
        return self._cell.state_size

    @property
    def output_size(self):
        return self._cell.output_size

    def zero_state(self, batch_size, dtype):
        with tf.name_scope(type(self).__name__ + "ZeroState"):
            return self._cell.zero_state(batch_size, dtype)


def _linear(x, output_size: int):
    """x @ kernel + bias with `kernel` [depth, output_size] (the scope's or the default
    initializer) and `bias` zeros, in the current variable scope."""
    depth = _last_dim(x.shape, "linear")
    kernel = tf.get_variable("kernel", [depth, output_size], dtype=x.dtype)
    bias = tf.get_variable("bias", [output_size], dtype=x.dtype,
                           initializer=tf.constant_initializer(0.0, dtype=x.dtype))
    return tf.nn.bias_add(tf.matmul(x, kernel), bias)


class EmbeddingWrapper(_ContribWrapper):
    """Embeds integer inputs before the cell: a variable `embedding` [embedding_classes,
    embedding_size] (uniform in +-sqrt(3) unless `initializer` or the scope's initializer) in
    the scope `embedding_wrapper`."""

    def __init__(self, cell, embedding_classes: int, embedding_size: int, initializer=None,
                 reuse=None) -> None:
        super().__init__(cell, reuse=reuse)
        if embedding_classes <= 0 or embedding_size <= 0:
            raise ValueError(f"Both embedding_classes and embedding_size must be > 0: "
                             f"{embedding_classes}, {embedding_size}.")
        self._embedding_classes = int(embedding_classes)
        self._embedding_size = int(embedding_size)
        self._initializer = initializer

    def call(self, inputs, state):
        initializer = self._initializer or tf.get_variable_scope().initializer
        if initializer is None:
            s3 = math.sqrt(3)   # U(-sqrt(3), sqrt(3)) has variance 1
            initializer = tf.random_uniform_initializer(-s3, s3)
        dtype = flatten(state)[0].dtype
        embedding = tf.get_variable("embedding",
                                    [self._embedding_classes, self._embedding_size],
                                    initializer=initializer, dtype=dtype)
        embedded = tf.nn.embedding_lookup(embedding, tf.reshape(inputs, [-1]))
        return self._cell(embedded, state)


class InputProjectionWrapper(_ContribWrapper):
    """Projects the inputs to `num_proj` (`kernel`, `bias` in the scope
    `input_projection_wrapper`, then the optional `activation`) before the cell."""

    def __init__(self, cell, num_proj: int, activation: Optional[Callable] = None,
                 input_size=None, reuse=None) -> None:
        super().__init__(cell, reuse=reuse)
        self._num_proj = int(num_proj)
        self._activation = activation

    def call(self, inputs, state):
        projected = _linear(inputs, self._num_proj)
        if self._activation:
            projected = self._activation(projected)
        return self._cell(projected, state)


class OutputProjectionWrapper(_ContribWrapper):
    """Projects the cell's output to `output_size` (`kernel`, `bias` in the scope
    `output_projection_wrapper`, then the optional `activation`); the state is the cell's."""

    def __init__(self, cell, output_size: int, activation: Optional[Callable] = None,
                 reuse=None) -> None:
        super().__init__(cell, reuse=reuse)
        if output_size < 1:
            raise ValueError(f"Parameter output_size must be > 0: {output_size}.")
        self._output_size = int(output_size)
        self._activation = activation

    @property
    def output_size(self):
        return self._output_size

    def call(self, inputs, state):
        output, new_state = self._cell(inputs, state)
        projected = _linear(output, self._output_size)
        if self._activation:
            projected = self._activation(projected)
        return projected, new_state


# -- running cells --------------------------------------------------------------------------------
def transpose_batch_time(x):
    """[batch, time, ...] <-> [time, batch, ...]."""
    return _transpose_batch_time(tf.convert_to_tensor(x))


def best_effort_input_batch_size(flat_input):
    """The batch size of time-major inputs: static when known, else a tensor."""
    return _batch_size([tf.convert_to_tensor(x) for x in flat_input])


def _check_stack(cells_fw, cells_bw, initial_states_fw, initial_states_bw) -> None:
    if not cells_fw:
        raise ValueError("Must specify at least one fw cell for BidirectionalRNN.")
    if not cells_bw:
        raise ValueError("Must specify at least one bw cell for BidirectionalRNN.")
    if not isinstance(cells_fw, list):
        raise ValueError("cells_fw must be a list of RNNCells (one per layer).")
    if not isinstance(cells_bw, list):
        raise ValueError("cells_bw must be a list of RNNCells (one per layer).")
    if len(cells_fw) != len(cells_bw):
        raise ValueError("Forward and Backward cells must have the same depth.")
    for states, what in ((initial_states_fw, "fw"), (initial_states_bw, "bw")):
        if states is not None and (not isinstance(states, list)
                                   or len(states) != len(cells_fw)):
            raise ValueError(f"initial_states_{what} must be a list of state tensors (one per "
                             "layer).")


def stack_bidirectional_rnn(cells_fw, cells_bw, inputs, initial_states_fw=None,
                            initial_states_bw=None, dtype=None, sequence_length=None,
                            scope=None):
    """Bidirectional layers stacked: layer k (`stack_bidirectional_rnn/cell_<k>`) reads the
    concatenated forward and backward outputs of layer k-1. Returns (outputs, final forward
    states, final backward states), one state per layer."""
    _check_stack(cells_fw, cells_bw, initial_states_fw, initial_states_bw)
    states_fw, states_bw = [], []
    layer = inputs
    with tf.variable_scope(scope or "stack_bidirectional_rnn"):
        for k, (cell_fw, cell_bw) in enumerate(zip(cells_fw, cells_bw)):
            init_fw = initial_states_fw[k] if initial_states_fw else None
            init_bw = initial_states_bw[k] if initial_states_bw else None
            with tf.variable_scope(f"cell_{k}"):
                layer, s_fw, s_bw = static_bidirectional_rnn(
                    cell_fw, cell_bw, layer, initial_state_fw=init_fw,
                    initial_state_bw=init_bw, sequence_length=sequence_length, dtype=dtype)
            states_fw.append(s_fw)
            states_bw.append(s_bw)
    return layer, tuple(states_fw), tuple(states_bw)


def stack_bidirectional_dynamic_rnn(cells_fw, cells_bw, inputs, initial_states_fw=None,
                                    initial_states_bw=None, dtype=None, sequence_length=None,
                                    parallel_iterations=None, time_major: bool = False,
                                    scope=None, swap_memory: bool = False):
    """`stack_bidirectional_rnn` over [batch, time, depth] tensors with `dynamic_rnn`: each
    layer's input is the previous layer's forward and backward outputs concatenated on the
    last axis. Returns (outputs, final forward states, final backward states)."""
    _check_stack(cells_fw, cells_bw, initial_states_fw, initial_states_bw)
    states_fw, states_bw = [], []
    layer = inputs
    with tf.variable_scope(scope or "stack_bidirectional_rnn"):
        for k, (cell_fw, cell_bw) in enumerate(zip(cells_fw, cells_bw)):
            init_fw = initial_states_fw[k] if initial_states_fw else None
            init_bw = initial_states_bw[k] if initial_states_bw else None
            with tf.variable_scope(f"cell_{k}"):
                (out_fw, out_bw), (s_fw, s_bw) = bidirectional_dynamic_rnn(
                    cell_fw, cell_bw, layer, initial_state_fw=init_fw,
                    initial_state_bw=init_bw, sequence_length=sequence_length,
                    parallel_iterations=parallel_iterations, dtype=dtype,
                    swap_memory=swap_memory, time_major=time_major)
                layer = tf.concat([out_fw, out_bw], 2)
            states_fw.append(s_fw)
            states_bw.append(s_bw)
    return layer, tuple(states_fw), tuple(states_bw)


_MISSING = {n: "not implemented" for n in (
    "static_state_saving_rnn", "FusedRNNCell", "FusedRNNCellAdaptor", "TimeReversedFusedRNN",
    "LSTMBlockFusedCell", "LSTMBlockWrapper", "CoupledInputForgetGateLSTMCell",
    "TimeFreqLSTMCell", "GridLSTMCell", "BidirectionalGridLSTMCell", "NASCell", "UGRNNCell",
    "IntersectionRNNCell", "PhasedLSTMCell", "ConvLSTMCell", "Conv1DLSTMCell",
    "Conv2DLSTMCell", "Conv3DLSTMCell", "HighwayWrapper", "GLSTMCell", "IndRNNCell",
    "IndyGRUCell", "IndyLSTMCell", "AttentionCellWrapper", "CompiledWrapper",
    "LayerNormLSTMCell", "SRUCell", "WeightNormLSTMCell", "MinimalRNNCell", "CFNCell")}


def __getattr__(name: str):
    if name in _MISSING:
        raise AttributeError(f"tf.contrib.rnn.{name} is not available in jitflow: "
                             f"{_MISSING[name]}")
    raise AttributeError(f"module 'jitflow.contrib.rnn' has no attribute {name!r}")
