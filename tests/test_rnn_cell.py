"""The recurrent cells (jitflow/lib/rnn_cell.py): sizes, zero states, variable scopes and names
under manual unrolling, custom cells, wrappers, and one step of every cell against TF given
the same weights."""
from __future__ import annotations

import os

import numpy as np
import pytest

import jitflow as tf

rnn_cell = tf.nn.rnn_cell
RNG = np.random.default_rng(5)


def test_the_namespace_is_tf1s():
    assert tf.compat.v1.nn.rnn_cell is rnn_cell
    for name in ("RNNCell", "BasicRNNCell", "BasicLSTMCell", "LSTMCell", "GRUCell",
                 "MultiRNNCell", "DropoutWrapper", "ResidualWrapper", "DeviceWrapper",
                 "LSTMStateTuple"):
        assert hasattr(rnn_cell, name)
    for name in ("static_rnn", "static_bidirectional_rnn", "dynamic_rnn",
                 "bidirectional_dynamic_rnn"):
        assert callable(getattr(tf.nn, name))


def test_sizes_and_zero_states():
    lstm = rnn_cell.LSTMCell(6, num_proj=3)
    assert lstm.state_size == (6, 3) and lstm.output_size == 3
    assert rnn_cell.BasicLSTMCell(4, state_is_tuple=False).state_size == 8
    multi = rnn_cell.MultiRNNCell([rnn_cell.GRUCell(2), lstm])
    assert multi.state_size == (2, rnn_cell.LSTMStateTuple(6, 3)) and multi.output_size == 3
    b = tf.placeholder(tf.int32, [])
    z = multi.zero_state(b, tf.float64)
    assert isinstance(z[1], rnn_cell.LSTMStateTuple) and z[1].dtype == tf.float64
    assert z[0].shape.as_list() == [None, 2] and z[1].h.shape.as_list() == [None, 3]
    fixed = rnn_cell.BasicRNNCell(5).zero_state(4, tf.float32)
    assert fixed.shape.as_list() == [4, 5] and fixed.op.name.startswith("BasicRNNCellZeroState")
    with tf.Session() as sess:
        got = sess.run(z, {b: 3})
    assert got[0].shape == (3, 2) and got[1].c.shape == (3, 6) and not got[1].h.any()


def test_manual_unrolling_with_reuse_names_variables_as_tf1():
    """The PTB-tutorial loop: cells called step by step in one variable scope."""
    cell = rnn_cell.MultiRNNCell([rnn_cell.BasicLSTMCell(4) for _ in range(2)])
    x = tf.placeholder(tf.float32, [3, 5, 2])
    state = cell.zero_state(3, tf.float32)
    outs = []
    with tf.variable_scope("RNN"):
        for t in range(5):
            if t > 0:
                tf.get_variable_scope().reuse_variables()
            out, state = cell(x[:, t, :], state)
            outs.append(out)
    assert [v.name for v in tf.global_variables()] == [
        "RNN/multi_rnn_cell/cell_0/basic_lstm_cell/kernel:0",
        "RNN/multi_rnn_cell/cell_0/basic_lstm_cell/bias:0",
        "RNN/multi_rnn_cell/cell_1/basic_lstm_cell/kernel:0",
        "RNN/multi_rnn_cell/cell_1/basic_lstm_cell/bias:0"]
    assert len(cell.trainable_variables) == 4


def test_second_cell_in_a_scope_gets_a_unique_name_and_reuse_shares():
    x = tf.placeholder(tf.float32, [2, 3])
    h = tf.zeros([2, 4])
    with tf.variable_scope("m"):
        rnn_cell.GRUCell(4)(x, h)
        rnn_cell.GRUCell(4)(x, h)
    with tf.variable_scope("m", reuse=True):
        rnn_cell.GRUCell(4)(x, h)           # a new cell object finds gru_cell's variables
    names = [v.name for v in tf.global_variables()]
    assert names[:2] == ["m/gru_cell/gates/kernel:0", "m/gru_cell/gates/bias:0"]
    assert names[4:6] == ["m/gru_cell_1/gates/kernel:0", "m/gru_cell_1/gates/bias:0"]
    assert len(names) == 8


class MinimalRNN(rnn_cell.RNNCell):
    """A user cell in the TF1 style: `call` and `build` with add_variable."""

    def __init__(self, units):
        super().__init__()
        self._units = units

    @property
    def state_size(self):
        return self._units

    @property
    def output_size(self):
        return self._units

    def build(self, input_shape):
        self.w = self.add_variable("w", [input_shape[-1] + self._units, self._units])
        self.built = True

    def call(self, inputs, state):
        h = tf.tanh(tf.matmul(tf.concat([inputs, state], 1), self.w))
        return h, h


class OldStyleCell(rnn_cell.RNNCell):
    """A user cell overriding __call__ with get_variable, as early TF1 code did."""

    @property
    def state_size(self):
        return 3

    @property
    def output_size(self):
        return 3

    def __call__(self, inputs, state, scope=None):
        with tf.variable_scope(scope or "old_cell"):
            w = tf.get_variable("w", [inputs.shape[1] + 3, 3], dtype=inputs.dtype,
                                initializer=tf.constant_initializer(0.1))
            h = tf.nn.relu(tf.matmul(tf.concat([inputs, state], 1), w))
        return h, h


def test_custom_cells_run_in_dynamic_rnn(backend):
    x = tf.placeholder(tf.float64, [2, 4, 3])
    out1, _ = tf.nn.dynamic_rnn(MinimalRNN(3), x, dtype=tf.float64)
    out2, st2 = tf.nn.dynamic_rnn(OldStyleCell(), x, dtype=tf.float64, scope="old")
    assert [v.name for v in tf.global_variables()] == ["rnn/minimal_rnn/w:0",
                                                       "old/old_cell/w:0"]
    xv = RNG.standard_normal((2, 4, 3))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        w = sess.run(tf.global_variables()[0])
        o1, o2, s2 = sess.run([out1, out2, st2], {x: xv})
    h, h2 = np.zeros((2, 3)), np.zeros((2, 3))
    for t in range(4):
        h = np.tanh(np.concatenate([xv[:, t], h], 1) @ w)
        h2 = np.maximum(np.concatenate([xv[:, t], h2], 1) @ np.full((6, 3), 0.1), 0)
    np.testing.assert_allclose(o1[:, -1], h, rtol=1e-10)
    np.testing.assert_allclose(s2, h2, rtol=1e-10)
    np.testing.assert_allclose(o2[:, -1], h2, rtol=1e-10)


def test_wrapper_checks():
    with pytest.raises(ValueError, match="between 0 and 1"):
        rnn_cell.DropoutWrapper(rnn_cell.GRUCell(2), output_keep_prob=1.5)
    with pytest.raises(TypeError, match="is not an RNNCell"):
        rnn_cell.DropoutWrapper(object())
    with pytest.raises(ValueError, match="dtype must be provided"):
        rnn_cell.DropoutWrapper(rnn_cell.GRUCell(2), variational_recurrent=True)
    with pytest.raises(ValueError, match="at least one cell"):
        rnn_cell.MultiRNNCell([])
    with pytest.raises(TypeError, match="Inconsistent"):
        _ = rnn_cell.LSTMStateTuple(tf.zeros([1]), tf.zeros([1], tf.float64)).dtype


def test_variational_dropout_uses_one_mask_per_run(backend):
    """variational_recurrent: the same output mask at every step of a run."""
    x = tf.placeholder(tf.float32, [4, 6, 3])
    cell = rnn_cell.DropoutWrapper(rnn_cell.BasicRNNCell(8),
                                   output_keep_prob=0.5, variational_recurrent=True,
                                   dtype=tf.float32, seed=1)
    out, _ = tf.nn.dynamic_rnn(cell, x, dtype=tf.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        o = sess.run(out, {x: np.abs(RNG.standard_normal((4, 6, 3))).astype(np.float32) + 1})
    zero = o == 0
    assert zero.any() and not zero.all()
    # the mask has shape [1, units]: the same units are dropped in every row and step
    assert (zero == zero[:1, :1]).all()


# -- one step of every cell against TensorFlow ---------------------------------------------------
def _tf1():
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    tf1.disable_eager_execution()
    try:
        assert tf1.nn.rnn_cell.BasicLSTMCell is not None
    except (AttributeError, ImportError):
        pytest.skip("TensorFlow's legacy RNN cells need the tf-keras package")
    return tf1


def _step(t, make, xv, weights=None):
    x = t.placeholder(t.float64, xv.shape)
    cell = make(t)
    state = cell.zero_state(xv.shape[0], t.float64)
    state = _map(lambda s: s + 0.3, state)
    out, new = cell(x, state)
    leaves = _leaves(new)
    with t.Session() as sess:
        sess.run(t.global_variables_initializer())
        if weights is not None:
            for v in t.global_variables():
                v.load(weights[v.op.name], sess)
        w = {v.op.name: sess.run(v) for v in t.global_variables()}
        return w, sess.run([out] + leaves, {x: xv})


def _leaves(s):
    return [y for x in s for y in _leaves(x)] if isinstance(s, (tuple, list)) else [s]


def _map(fn, s):
    if isinstance(s, tuple) and hasattr(s, "_fields"):
        return type(s)(*[_map(fn, x) for x in s])
    if isinstance(s, (tuple, list)):
        return type(s)(_map(fn, x) for x in s)
    return fn(s)


CELLS = {
    "basic_rnn": lambda t: t.nn.rnn_cell.BasicRNNCell(3, activation=t.nn.relu),
    "gru": lambda t: t.nn.rnn_cell.GRUCell(3, activation=t.nn.relu),
    "basic_lstm_concat": lambda t: t.nn.rnn_cell.BasicLSTMCell(3, forget_bias=0.3,
                                                               state_is_tuple=False),
    "lstm_peephole_clip_proj": lambda t: t.nn.rnn_cell.LSTMCell(
        4, use_peepholes=True, cell_clip=0.5, num_proj=2, proj_clip=0.2, forget_bias=2.0,
        initializer=t.random_uniform_initializer(-0.8, 0.8, seed=3)),
    "lstm_concat_state": lambda t: t.nn.rnn_cell.LSTMCell(3, state_is_tuple=False,
                                                          activation=t.nn.relu),
    "multi_residual": lambda t: t.nn.rnn_cell.MultiRNNCell(
        [t.nn.rnn_cell.ResidualWrapper(t.nn.rnn_cell.GRUCell(2)),
         t.nn.rnn_cell.BasicLSTMCell(2)]),
}


@pytest.mark.parametrize("kind", sorted(CELLS))
def test_one_step_matches_tensorflow(kind):
    tf1 = _tf1()
    xv = RNG.standard_normal((3, 2))
    g = tf1.Graph()
    with g.as_default():
        weights, want = _step(tf1, CELLS[kind], xv)
    got_w, got = _step(tf, CELLS[kind], xv, weights)
    assert sorted(got_w) == sorted(weights)
    for name, w in weights.items():
        assert got_w[name].shape == w.shape
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
