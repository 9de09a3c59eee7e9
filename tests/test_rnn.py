"""Recurrent networks: static_rnn, dynamic_rnn and the bidirectional forms (jitflow/lib/rnn.py)
with the cells of jitflow/lib/rnn_cell.py: hand-computed steps, sequence lengths, gradients by
finite differences on both backends, and TF parity of variable names, outputs, states and
gradients given the same weights."""
from __future__ import annotations

import os

import numpy as np
import pytest

import jitflow as tf
from helpers import central_difference

RNG = np.random.default_rng(11)
rnn_cell = tf.nn.rnn_cell


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _lstm_step(x, c, h, k, b, forget_bias=1.0):
    z = np.concatenate([x, h], 1) @ k + b
    i, j, f, o = np.split(z, 4, 1)
    c = c * _sigmoid(f + forget_bias) + _sigmoid(i) * np.tanh(j)
    return c, np.tanh(c) * _sigmoid(o)


def _init(sess):
    sess.run(tf.global_variables_initializer())


# -- by hand ------------------------------------------------------------------------------------
def test_dynamic_rnn_lstm_matches_a_numpy_loop(backend):
    x = tf.placeholder(tf.float64, [None, None, 3])
    cell = rnn_cell.BasicLSTMCell(4)
    out, st = tf.nn.dynamic_rnn(cell, x, dtype=tf.float64)
    assert out.shape.as_list() == [None, None, 4]
    assert isinstance(st, rnn_cell.LSTMStateTuple)
    assert [v.name for v in tf.global_variables()] == ["rnn/basic_lstm_cell/kernel:0",
                                                       "rnn/basic_lstm_cell/bias:0"]
    xv = RNG.standard_normal((2, 6, 3))
    with tf.Session() as sess:
        _init(sess)
        k, b = sess.run(cell.variables)
        assert b.tolist() == [0.0] * 16
        limit = np.sqrt(6 / (7 + 16))  # glorot uniform
        assert np.abs(k).max() <= limit and np.abs(k).max() > limit / 2
        for steps in (6, 1):
            o, (c, h) = sess.run([out, st], {x: xv[:, :steps]})
            cw = hw = np.zeros((2, 4))
            for t in range(steps):
                cw, hw = _lstm_step(xv[:, t], cw, hw, k, b)
                np.testing.assert_allclose(o[:, t], hw, rtol=1e-10)
            np.testing.assert_allclose(c, cw, rtol=1e-10)
            np.testing.assert_allclose(h, hw, rtol=1e-10)


def test_sequence_length_zeroes_outputs_and_copies_the_state(backend):
    x = tf.placeholder(tf.float32, [3, 5, 2])
    lengths = tf.placeholder(tf.int32, [3])
    cell = rnn_cell.GRUCell(3)
    out, st = tf.nn.dynamic_rnn(cell, x, sequence_length=lengths, dtype=tf.float32)
    full, _ = tf.nn.dynamic_rnn(cell, x, dtype=tf.float32)   # the same cell: its variables
    xv = RNG.standard_normal((3, 5, 2)).astype(np.float32)
    with tf.Session() as sess:
        _init(sess)
        o, s, fo = sess.run([out, st, full], {x: xv, lengths: [2, 5, 0]})
    np.testing.assert_allclose(o[0, :2], fo[0, :2], rtol=1e-5)
    assert not o[0, 2:].any() and not o[2].any()
    np.testing.assert_allclose(o[1], fo[1], rtol=1e-5)
    np.testing.assert_allclose(s[0], fo[0, 1], rtol=1e-5)   # state at the row's last step
    np.testing.assert_allclose(s[1], fo[1, 4], rtol=1e-5)
    assert not s[2].any()                                   # length 0: the initial state


def test_time_major_and_initial_state(backend):
    x = tf.placeholder(tf.float64, [4, 2, 3])   # [time, batch, depth]
    h0 = tf.placeholder(tf.float64, [2, 5])
    cell = rnn_cell.BasicRNNCell(5, activation=tf.nn.relu)
    out, st = tf.nn.dynamic_rnn(cell, x, initial_state=h0, time_major=True)
    assert out.shape.as_list() == [4, 2, 5]
    xv, hv = RNG.standard_normal((4, 2, 3)), RNG.standard_normal((2, 5))
    with tf.Session() as sess:
        _init(sess)
        k, b = sess.run(cell.variables)
        o, s = sess.run([out, st], {x: xv, h0: hv})
    h = hv
    for t in range(4):
        h = np.maximum(np.concatenate([xv[t], h], 1) @ k + b, 0)
        np.testing.assert_allclose(o[t], h, rtol=1e-10)
    np.testing.assert_allclose(s, h, rtol=1e-10)


def test_static_rnn_shares_one_set_of_variables(backend):
    xs = [tf.placeholder(tf.float64, [None, 2]) for _ in range(3)]
    cell = rnn_cell.BasicLSTMCell(3, state_is_tuple=False)
    outs, st = tf.nn.static_rnn(cell, xs, dtype=tf.float64)
    assert len(outs) == 3 and st.shape.as_list() == [None, 6]
    assert len(tf.trainable_variables()) == 2
    vals = [RNG.standard_normal((2, 2)) for _ in range(3)]
    with tf.Session() as sess:
        _init(sess)
        k, b = sess.run(cell.variables)
        got = sess.run(outs + [st], dict(zip(xs, vals)))
    c = h = np.zeros((2, 3))
    for t in range(3):
        c, h = _lstm_step(vals[t], c, h, k, b)
        np.testing.assert_allclose(got[t], h, rtol=1e-10)
    np.testing.assert_allclose(got[3], np.concatenate([c, h], 1), rtol=1e-10)


def test_bidirectional_dynamic_rnn_reverses_each_row_to_its_length(backend):
    x = tf.placeholder(tf.float64, [2, 4, 1])
    lengths = tf.placeholder(tf.int64, [2])
    fw, bw = rnn_cell.BasicRNNCell(2), rnn_cell.BasicRNNCell(2)
    (of, ob), (sf, sb) = tf.nn.bidirectional_dynamic_rnn(fw, bw, x, sequence_length=lengths,
                                                         dtype=tf.float64)
    names = sorted(v.name for v in tf.global_variables())
    assert names == ["bidirectional_rnn/bw/basic_rnn_cell/bias:0",
                     "bidirectional_rnn/bw/basic_rnn_cell/kernel:0",
                     "bidirectional_rnn/fw/basic_rnn_cell/bias:0",
                     "bidirectional_rnn/fw/basic_rnn_cell/kernel:0"]
    xv = RNG.standard_normal((2, 4, 1))
    with tf.Session() as sess:
        _init(sess)
        kb, bb = sess.run(bw.variables)
        o_b, s_b = sess.run([ob, sb], {x: xv, lengths: [3, 4]})
    for row, n in enumerate([3, 4]):
        h = np.zeros(2)
        want = np.zeros((4, 2))
        for t in reversed(range(n)):
            h = np.tanh(np.concatenate([xv[row, t], h]) @ kb + bb)
            want[t] = h
        np.testing.assert_allclose(o_b[row], want, rtol=1e-10)
        np.testing.assert_allclose(s_b[row], h, rtol=1e-10)


def test_multi_rnn_cell_dropout_and_residual_wrappers(backend):
    tf.set_random_seed(1)   # the same initial weights in both sessions below
    x = tf.placeholder(tf.float32, [None, 6, 4])
    keep = tf.placeholder_with_default(1.0, [])
    cells = [rnn_cell.DropoutWrapper(rnn_cell.LSTMCell(4), output_keep_prob=keep, seed=5),
             rnn_cell.ResidualWrapper(rnn_cell.GRUCell(4))]
    multi = rnn_cell.MultiRNNCell(cells)
    assert multi.state_size == (rnn_cell.LSTMStateTuple(4, 4), 4)
    out, st = tf.nn.dynamic_rnn(multi, x, dtype=tf.float32)
    assert sorted(v.name for v in tf.global_variables()) == [
        "rnn/multi_rnn_cell/cell_0/lstm_cell/bias:0",
        "rnn/multi_rnn_cell/cell_0/lstm_cell/kernel:0",
        "rnn/multi_rnn_cell/cell_1/gru_cell/candidate/bias:0",
        "rnn/multi_rnn_cell/cell_1/gru_cell/candidate/kernel:0",
        "rnn/multi_rnn_cell/cell_1/gru_cell/gates/bias:0",
        "rnn/multi_rnn_cell/cell_1/gru_cell/gates/kernel:0"]
    assert len(multi.trainable_variables) == 6
    xv = RNG.standard_normal((3, 6, 4)).astype(np.float32)
    runs = []
    for _ in range(2):
        with tf.Session() as sess:
            _init(sess)
            runs.append([sess.run(out, {x: xv, keep: k}) for k in (1.0, 0.5, 0.5)])
    base, dropped, again = runs[0]
    assert not np.allclose(base, dropped)
    assert not np.allclose(dropped, again)      # a new mask every run (and every step)
    # seeded: a new session draws the same masks
    for a, b in zip(runs[0], runs[1]):
        np.testing.assert_array_equal(a, b)


# -- gradients --------------------------------------------------------------------------------
def _fd_check(sess, loss, var_or_ph, feed, value, rtol=1e-5, atol=1e-7):
    g, = tf.gradients(loss, [var_or_ph])
    got = sess.run(g, {**feed, var_or_ph: value})

    def f(v):
        return float(sess.run(loss, {**feed, var_or_ph: v}))
    np.testing.assert_allclose(got, central_difference(f, value, eps=1e-6), rtol=rtol,
                               atol=atol)


@pytest.mark.parametrize("kind", ["lstm", "gru", "peephole_proj"])
def test_dynamic_rnn_gradients_match_finite_differences(kind, backend):
    x = tf.placeholder(tf.float64, [2, None, 3])
    lengths = tf.placeholder(tf.int32, [2])
    cell = {"lstm": lambda: rnn_cell.BasicLSTMCell(3),
            "gru": lambda: rnn_cell.GRUCell(3),
            "peephole_proj": lambda: rnn_cell.LSTMCell(3, use_peepholes=True, num_proj=2,
                                                       cell_clip=0.8, proj_clip=0.5)}[kind]()
    out, st = tf.nn.dynamic_rnn(cell, x, sequence_length=lengths, dtype=tf.float64)
    weights = np.linspace(-1, 1, 2 * 4 * cell.output_size).reshape(2, 4, -1)
    loss = tf.reduce_sum(out * weights) + tf.reduce_sum(tf.square(tf.concat(_leaves(st), 1)))
    xv = RNG.standard_normal((2, 4, 3))
    feed = {lengths: [4, 2]}
    with tf.Session() as sess:
        _init(sess)
        _fd_check(sess, loss, x, feed, xv)
        kernel = [v for v in cell.variables if v.name.endswith("/kernel:0")][0]
        kv = sess.run(kernel)
        _fd_check(sess, loss, kernel, {**feed, x: xv}, kv)


def test_training_an_lstm_with_dynamic_rnn_lowers_the_loss(backend):
    """Learn the sum of a sequence's signs (a classic many-to-one toy task)."""
    tf.set_random_seed(3)
    x = tf.placeholder(tf.float32, [None, 8, 1])
    y = tf.placeholder(tf.float32, [None, 1])
    out, st = tf.nn.dynamic_rnn(rnn_cell.BasicLSTMCell(8), x, dtype=tf.float32)
    pred = tf.layers.dense(st.h, 1)
    loss = tf.reduce_mean(tf.square(pred - y))
    train = tf.train.AdamOptimizer(0.03).minimize(loss)
    rng = np.random.default_rng(0)
    xv = rng.choice([-1.0, 1.0], size=(64, 8, 1)).astype(np.float32)
    yv = xv.sum(1) / 8
    with tf.Session() as sess:
        _init(sess)
        first = sess.run(loss, {x: xv, y: yv})
        for _ in range(60):
            sess.run(train, {x: xv, y: yv})
        last = sess.run(loss, {x: xv, y: yv})
    assert last < first * 0.2


def test_an_lstm_training_step_runs_on_kernels_compiled_once():
    """dynamic_rnn's step (forward and backward) is compiled once whatever the number of
    steps and batch size, and nothing of it falls back to the references."""
    import warnings
    from jitflow.backends.numba_cpu import kernels as cpu
    from jitflow.backends.numba_cpu.executable import Executable
    from jitflow.compiler.program import Segment
    x = tf.placeholder(tf.float32, [None, None, 3])
    lengths = tf.placeholder(tf.int32, [None])
    _, st = tf.nn.dynamic_rnn(rnn_cell.BasicLSTMCell(8), x, sequence_length=lengths,
                              dtype=tf.float32)
    loss = tf.reduce_sum(tf.square(st.h))
    train = tf.train.AdamOptimizer(0.01).minimize(loss)

    def feed(batch, steps):
        return {x: RNG.standard_normal((batch, steps, 3)).astype(np.float32),
                lengths: np.full(batch, steps, np.int32)}

    def builds():   # kernels given code (LLVM or Numba, compiled or loaded)
        return cpu.STATS.get("kernels", 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)   # any fallback warning fails
        with tf.Session(backend="numba") as sess:
            sess.run(tf.global_variables_initializer())
            sess.run([train, loss], feed(4, 3))
            before = builds()
            for batch, steps in ((4, 30), (7, 11), (2, 50)):
                sess.run([train, loss], feed(batch, steps))
            assert builds() == before
            bodies = list(sess._store.subplans.values())
    assert len(bodies) == 2                                  # the forward and backward step
    for ex in bodies:
        assert isinstance(ex, Executable)
        native = [s for s in ex.steps if isinstance(s, Segment)]
        assert len(native) == 1                              # one native call per iteration
        assert all(s.op_def.kind == "host" for s in ex.steps if not isinstance(s, Segment))
        assert ex._lean not in (None, False)                 # run by run_body


def test_errors_name_the_problem():
    x = tf.placeholder(tf.float32, [None, 5, 3])
    with pytest.raises(ValueError, match="must give a dtype"):
        tf.nn.dynamic_rnn(rnn_cell.BasicRNNCell(2), x)
    with pytest.raises(TypeError, match="is not an RNNCell"):
        tf.nn.dynamic_rnn(object(), x, dtype=tf.float32)
    with pytest.raises(ValueError, match="must be accessible via shape inference"):
        tf.nn.dynamic_rnn(rnn_cell.BasicRNNCell(2), tf.placeholder(tf.float32, [2, 5, None]),
                          dtype=tf.float32)
    with pytest.raises(ValueError, match="only supports floating point"):
        tf.nn.dynamic_rnn(rnn_cell.BasicRNNCell(2), tf.placeholder(tf.int32, [2, 5, 3]),
                          dtype=tf.int32)
    with pytest.raises(ValueError, match="expected ndim=2, found ndim=3"):
        rnn_cell.BasicRNNCell(2)(x, tf.zeros([2, 2]))
    with pytest.raises(TypeError, match="inputs must be a sequence"):
        tf.nn.static_rnn(rnn_cell.BasicRNNCell(2), x, dtype=tf.float32)
    with pytest.raises(ValueError, match="already exists"):
        tf.nn.dynamic_rnn(rnn_cell.BasicRNNCell(2), x, dtype=tf.float32)
        tf.nn.dynamic_rnn(rnn_cell.BasicRNNCell(2), x, dtype=tf.float32)


# -- TensorFlow parity --------------------------------------------------------------------------
def _tf1():
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    tf1.disable_eager_execution()
    try:
        assert tf1.nn.rnn_cell.BasicLSTMCell is not None
    except (AttributeError, ImportError):
        pytest.skip("TensorFlow's legacy RNN cells need the tf-keras package")
    return tf1


def _cells(t, kind: str):
    c = t.nn.rnn_cell
    if kind == "basic_lstm":
        return c.BasicLSTMCell(5, forget_bias=0.5)
    if kind == "lstm_full":
        return c.LSTMCell(5, use_peepholes=True, cell_clip=1.5, num_proj=3, proj_clip=0.7)
    if kind == "gru":
        return c.GRUCell(4)
    if kind == "basic_rnn":
        return c.BasicRNNCell(4)
    if kind == "multi":
        return c.MultiRNNCell([c.BasicLSTMCell(4), c.ResidualWrapper(c.GRUCell(4)),
                               c.LSTMCell(4, num_proj=2)])
    raise ValueError(kind)


def _program(t, kind: str, mode: str, xv, lengths, weights=None):
    """Build and run one RNN program in module `t`; returns (variable names and shapes,
    results). With `weights` (name -> value) the variables take those values."""
    batch, steps, depth = xv.shape
    x = t.placeholder(t.float32, [None, steps, depth], name="x")
    ln = t.placeholder(t.int32, [None], name="lengths")
    seq = None if lengths is None else ln
    if mode == "dynamic":
        out, st = t.nn.dynamic_rnn(_cells(t, kind), x, sequence_length=seq, dtype=t.float32)
        outs = [out]
    elif mode == "bidirectional":
        (of, ob), st = t.nn.bidirectional_dynamic_rnn(_cells(t, kind), _cells(t, kind), x,
                                                      sequence_length=seq, dtype=t.float32)
        outs = [of, ob]
    elif mode == "static":
        o, st = t.nn.static_rnn(_cells(t, kind), t.unstack(x, steps, 1), sequence_length=seq,
                                dtype=t.float32)
        outs = [t.stack(o, 1)]
    elif mode == "static_bidirectional":
        o, sf, sb = t.nn.static_bidirectional_rnn(_cells(t, kind), _cells(t, kind),
                                                  t.unstack(x, steps, 1), sequence_length=seq,
                                                  dtype=t.float32)
        outs, st = [t.stack(o, 1)], (sf, sb)
    else:
        raise ValueError(mode)
    flat_st = [s for s in _leaves(st)]
    loss = sum(t.reduce_sum(o * o) for o in outs) + sum(t.reduce_sum(s) for s in flat_st)
    vs = t.global_variables()
    grads = t.gradients(loss, vs + [x])
    feed = {x: xv}
    if lengths is not None:
        feed[ln] = lengths
    with t.Session() as sess:
        sess.run(t.global_variables_initializer())
        if weights is not None:
            for v in vs:
                v.load(weights[v.name], sess)
        init = {v.name: sess.run(v) for v in vs}
        res = sess.run(outs + flat_st + grads, feed)
    return [(v.name, tuple(v.shape.as_list())) for v in vs], init, res


def _leaves(s):
    if isinstance(s, (list, tuple)):
        return [y for x in s for y in _leaves(x)]
    return [s]


PARITY = [("basic_lstm", "dynamic", True), ("lstm_full", "dynamic", True),
          ("gru", "dynamic", False), ("multi", "dynamic", True),
          ("basic_rnn", "bidirectional", True), ("basic_lstm", "bidirectional", False),
          ("basic_lstm", "static", True), ("gru", "static_bidirectional", True)]


@pytest.mark.parametrize("kind,mode,with_lengths", PARITY)
def test_matches_tensorflow_names_outputs_states_and_gradients(kind, mode, with_lengths):
    tf1 = _tf1()
    xv = RNG.standard_normal((3, 5, 2)).astype(np.float32)
    lengths = np.array([5, 2, 3], np.int32) if with_lengths else None
    g = tf1.Graph()
    with g.as_default():
        want_vars, weights, want = _program(tf1, kind, mode, xv, lengths)
    got_vars, init, got = _program(tf, kind, mode, xv, lengths, weights)
    assert got_vars == want_vars
    assert len(got) == len(want)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5)


def test_initial_values_follow_tensorflow_initializers():
    """Biases are TF's exactly (zeros; a GRU's gate bias ones); kernels are glorot-uniform of
    the same shapes (each within the limit and spread over it)."""
    tf1 = _tf1()
    xv = np.zeros((2, 3, 4), np.float32)
    for kind in ("gru", "lstm_full"):
        g = tf1.Graph()
        with g.as_default():
            _, want, _ = _program(tf1, kind, "dynamic", xv, None)
        tf.reset_default_graph()
        tf.set_random_seed(1)   # deterministic draws
        _, got, _ = _program(tf, kind, "dynamic", xv, None)
        assert sorted(got) == sorted(want)
        for name, w in want.items():
            v = got[name]
            assert v.shape == w.shape and v.dtype == w.dtype
            if "bias" in name:
                np.testing.assert_array_equal(v, w)
            else:
                fan = (w.shape[0] + w.shape[-1]) if w.ndim == 2 else 2 * w.shape[0]
                limit = np.sqrt(6 / fan)
                assert np.abs(v).max() <= limit
                if v.size >= 64:   # spread over the range (a few values may all be small)
                    assert np.abs(v).max() > limit * 0.8
