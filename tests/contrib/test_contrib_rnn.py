"""tf.contrib.rnn: the core cells are tf.nn.rnn_cell's; contrib's own cells and wrappers have
TF 1.15's variable names and are checked step by step against NumPy."""
from __future__ import annotations

import numpy as np
import pytest

import jitflow as tf

R = tf.contrib.rnn
RNG = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def _interpreter_unless_asked(request, monkeypatch):
    if "backend" not in request.fixturenames:
        monkeypatch.setenv("JITFLOW_BACKEND", "interpreter")


def _sig(v):
    return 1 / (1 + np.exp(-v))


def _ln(v, gain, shift):
    m, var = v.mean(1, keepdims=True), v.var(1, keepdims=True)
    return (v - m) / np.sqrt(var + 1e-12) * gain + shift


def _values(sess) -> dict:
    return {v.op.name: sess.run(v) for v in tf.global_variables()}


def test_core_cells_are_tf_nn_rnn_cell_classes():
    for name in ("BasicRNNCell", "BasicLSTMCell", "LSTMCell", "GRUCell", "MultiRNNCell",
                 "DropoutWrapper", "ResidualWrapper", "DeviceWrapper", "LSTMStateTuple",
                 "RNNCell"):
        assert getattr(R, name) is getattr(tf.nn.rnn_cell, name)
    assert R.static_rnn is tf.nn.static_rnn
    assert R.static_bidirectional_rnn is tf.nn.static_bidirectional_rnn


def test_layer_norm_basic_lstm_cell_step_by_hand(backend):
    xv = RNG.standard_normal((3, 4)).astype(np.float32)
    cv, hv = (RNG.standard_normal((3, 5)).astype(np.float32) for _ in range(2))
    cell = R.LayerNormBasicLSTMCell(5, forget_bias=0.5, norm_gain=1.5, norm_shift=0.2)
    out, st = cell(tf.constant(xv), R.LSTMStateTuple(tf.constant(cv), tf.constant(hv)))
    names = [v.op.name for v in tf.global_variables()]
    assert names[0] == "layer_norm_basic_lstm_cell/kernel"
    assert names[1:] == [f"layer_norm_basic_lstm_cell/{s}/{p}" for s in
                         ("input", "transform", "forget", "output", "state")
                         for p in ("gamma", "beta")]
    assert tf.global_variables()[0].shape == (9, 20)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        w = _values(sess)
        o, c, h = sess.run([out, st.c, st.h])
    np.testing.assert_allclose(w["layer_norm_basic_lstm_cell/state/gamma"], 1.5)
    np.testing.assert_allclose(w["layer_norm_basic_lstm_cell/input/beta"], 0.2)
    z = np.concatenate([xv, hv], 1) @ w["layer_norm_basic_lstm_cell/kernel"]
    i, j, f, og = (_ln(p, 1.5, 0.2) for p in np.split(z, 4, axis=1))
    new_c = _ln(cv * _sig(f + 0.5) + _sig(i) * np.tanh(j), 1.5, 0.2)
    new_h = np.tanh(new_c) * _sig(og)
    np.testing.assert_allclose(c, new_c, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(h, new_h, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(o, h)


def test_layer_norm_basic_lstm_cell_without_norm_and_with_dropout():
    x = tf.constant(RNG.standard_normal((50, 4)).astype(np.float32))
    keep = tf.placeholder_with_default(0.5, [])
    plain = R.LayerNormBasicLSTMCell(3, layer_norm=False)
    drop = R.LayerNormBasicLSTMCell(40, dropout_keep_prob=keep, dropout_prob_seed=3)
    outs, _ = tf.nn.static_rnn(plain, [x, x], dtype=tf.float32)
    d_out, d_state = drop(x, drop.zero_state(50, tf.float32))
    names = [v.op.name for v in tf.global_variables()]
    assert names[:2] == ["rnn/layer_norm_basic_lstm_cell/kernel",
                         "rnn/layer_norm_basic_lstm_cell/bias"]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        c_drop = sess.run(d_state.c)
        c_keep = sess.run(d_state.c, {keep: 1.0})
        assert sess.run(outs[1]).shape == (50, 3)
    # recurrent dropout on the candidate changes the new cell state; keep 1 switches it off
    assert not np.allclose(c_drop, c_keep)


def test_lstm_block_cell_is_lstm_math_with_block_names():
    xv = RNG.standard_normal((2, 3)).astype(np.float32)
    cv, hv = (RNG.standard_normal((2, 4)).astype(np.float32) for _ in range(2))
    cell = R.LSTMBlockCell(4, forget_bias=0.3, cell_clip=0.6, use_peephole=True)
    out, st = cell(tf.constant(xv), R.LSTMStateTuple(tf.constant(cv), tf.constant(hv)))
    assert sorted(v.op.name for v in tf.global_variables()) == [
        "lstm_cell/bias", "lstm_cell/kernel", "lstm_cell/w_f_diag", "lstm_cell/w_i_diag",
        "lstm_cell/w_o_diag"]
    assert R.LSTMBlockCell(4).state_size == (4, 4)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        w = {k.split("/")[-1]: v for k, v in _values(sess).items()}
        c, h = sess.run([st.c, st.h])
    z = np.concatenate([xv, hv], 1) @ w["kernel"] + w["bias"]
    i, j, f, o = np.split(z, 4, axis=1)
    new_c = (_sig(f + 0.3 + cv * w["w_f_diag"]) * cv
             + _sig(i + cv * w["w_i_diag"]) * np.tanh(j))
    new_c = np.clip(new_c, -0.6, 0.6)
    new_h = _sig(o + new_c * w["w_o_diag"]) * np.tanh(new_c)
    np.testing.assert_allclose(c, new_c, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(h, new_h, rtol=1e-5, atol=1e-6)


def test_gru_block_cell_step_by_hand():
    xv = RNG.standard_normal((2, 3)).astype(np.float32)
    hv = RNG.standard_normal((2, 4)).astype(np.float32)
    out, new = R.GRUBlockCell(cell_size=4)(tf.constant(xv), tf.constant(hv))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        w = {k.split("/")[-1]: v for k, v in _values(sess).items()}
        got = sess.run(out)
    np.testing.assert_array_equal(w["b_ru"], 1.0)
    np.testing.assert_array_equal(w["b_c"], 0.0)
    r, u = np.split(_sig(np.concatenate([xv, hv], 1) @ w["w_ru"] + w["b_ru"]), 2, axis=1)
    cand = np.tanh(np.concatenate([xv, r * hv], 1) @ w["w_c"] + w["b_c"])
    np.testing.assert_allclose(got, u * hv + (1 - u) * cand, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="num_units"):
        R.GRUBlockCell()


def test_projection_and_embedding_wrappers_by_hand():
    xs = [tf.constant(RNG.standard_normal((2, 3)).astype(np.float32)) for _ in range(2)]
    outp = R.OutputProjectionWrapper(R.BasicRNNCell(4), 2, activation=tf.nn.relu)
    inp = R.InputProjectionWrapper(R.BasicRNNCell(4), 5)
    o_out, o_state = tf.nn.static_rnn(outp, xs, dtype=tf.float32, scope="o")
    i_out, _ = tf.nn.static_rnn(inp, xs, dtype=tf.float32, scope="i")
    ids = tf.constant([3, 0])
    emb = R.EmbeddingWrapper(R.BasicRNNCell(2), embedding_classes=6, embedding_size=3)
    e_out, _ = emb(ids, emb.zero_state(2, tf.float32), scope="e")
    assert outp.output_size == 2 and inp.output_size == 4
    names = [v.op.name for v in tf.global_variables()]
    assert names == [
        "o/output_projection_wrapper/basic_rnn_cell/kernel",
        "o/output_projection_wrapper/basic_rnn_cell/bias",
        "o/output_projection_wrapper/kernel", "o/output_projection_wrapper/bias",
        "i/input_projection_wrapper/kernel", "i/input_projection_wrapper/bias",
        "i/input_projection_wrapper/basic_rnn_cell/kernel",
        "i/input_projection_wrapper/basic_rnn_cell/bias",
        "e/embedding", "e/basic_rnn_cell/kernel", "e/basic_rnn_cell/bias"]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        w = _values(sess)
        xv = sess.run(xs)
        o1, s1, i1, e1 = sess.run([o_out[1], o_state, i_out[0], e_out])
    p = "o/output_projection_wrapper/"
    h = np.zeros((2, 4))
    for x in xv:
        h = np.tanh(np.concatenate([x, h], 1) @ w[p + "basic_rnn_cell/kernel"]
                    + w[p + "basic_rnn_cell/bias"])
    np.testing.assert_allclose(s1, h, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(o1, np.maximum(h @ w[p + "kernel"] + w[p + "bias"], 0),
                               rtol=1e-5, atol=1e-6)
    p = "i/input_projection_wrapper/"
    proj = xv[0] @ w[p + "kernel"] + w[p + "bias"]
    want = np.tanh(np.concatenate([proj, np.zeros((2, 4))], 1) @ w[p + "basic_rnn_cell/kernel"])
    np.testing.assert_allclose(i1, want, rtol=1e-5, atol=1e-6)
    table = w["e/embedding"]
    assert np.abs(table).max() <= np.sqrt(3)
    want = np.tanh(np.concatenate([table[[3, 0]], np.zeros((2, 2))], 1)
                   @ w["e/basic_rnn_cell/kernel"])
    np.testing.assert_allclose(e1, want, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="output_size must be > 0"):
        R.OutputProjectionWrapper(R.BasicRNNCell(2), 0)
    with pytest.raises(TypeError, match="not an RNNCell"):
        R.InputProjectionWrapper("cell", 2)


def test_stacked_bidirectional_rnns_static_and_dynamic_agree():
    steps = [RNG.standard_normal((2, 3)).astype(np.float32) for _ in range(4)]
    xs = [tf.constant(s) for s in steps]
    seq = tf.constant(np.stack(steps, 1))
    lengths = tf.constant([4, 2])

    def cells(n):
        return [R.GRUCell(n), R.GRUCell(n)]
    st_out, st_fw, st_bw = R.stack_bidirectional_rnn(cells(3), cells(3), xs, dtype=tf.float32,
                                                     sequence_length=lengths)
    dy_out, dy_fw, dy_bw = R.stack_bidirectional_dynamic_rnn(
        cells(3), cells(3), seq, dtype=tf.float32, sequence_length=lengths, scope="dyn")
    assert len(st_out) == 4 and st_out[0].shape.as_list() == [2, 6]
    assert dy_out.shape.as_list() == [2, 4, 6] and len(st_fw) == len(dy_bw) == 2
    static = [v for v in tf.global_variables() if v.op.name.startswith("stack_")]
    assert static[0].op.name == \
        "stack_bidirectional_rnn/cell_0/bidirectional_rnn/fw/gru_cell/gates/kernel"
    assert static[-1].op.name == \
        "stack_bidirectional_rnn/cell_1/bidirectional_rnn/bw/gru_cell/candidate/bias"
    assert static[-4].shape == (9, 6)      # layer 2 reads 3 + 3 features, plus its 3 units
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for v in tf.global_variables():
            if v.op.name.startswith("dyn/"):
                twin = "stack_bidirectional_rnn/" + v.op.name[len("dyn/"):]
                v.load(sess.run(twin + ":0"), sess)
        a, b, fa, fb = sess.run([st_out, dy_out, st_fw[1], dy_fw[1]])
    np.testing.assert_allclose(np.stack(a, 1), b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(fa, fb, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(b[1, 2:], 0.0)   # past the second row's length
    with pytest.raises(ValueError, match="same depth"):
        R.stack_bidirectional_rnn(cells(2), [R.GRUCell(2)], xs, dtype=tf.float32)
    with pytest.raises(ValueError, match="list of RNNCells"):
        R.stack_bidirectional_rnn(R.GRUCell(2), [R.GRUCell(2)], xs, dtype=tf.float32)
    with pytest.raises(ValueError, match="initial_states_fw"):
        R.stack_bidirectional_rnn(cells(2), cells(2), xs, initial_states_fw=[None])


def test_transpose_batch_time_and_best_effort_batch_size():
    x = tf.placeholder(tf.float32, [5, 3, 2])
    t = R.transpose_batch_time(x)
    assert t.shape.as_list() == [3, 5, 2]
    assert R.best_effort_input_batch_size([x]) == 3
    dyn = R.best_effort_input_batch_size([tf.placeholder(tf.float32, [5, None, 2])])
    with tf.Session() as sess:
        assert sess.run(dyn, {"Placeholder_1:0": np.zeros((5, 7, 2))}) == 7
