"""Optimizers: trajectories against NumPy reimplementations of TF1's update formulas, slots,
the global step, var_list, errors, and the learning-rate schedules."""
from __future__ import annotations

import numpy as np
import pytest

import jitflow as tf

C = np.array([0.5, 1.5, -2.0], np.float32)
E = np.array([1.0, -0.5, 0.25], np.float32)
W0 = np.array([1.0, -2.0, 0.5], np.float32)
B0 = np.float32(0.75)


def _model(dtype=tf.float32):
    """loss = sum(C*w^2 + E*w) + 3*b^2: gradients 2*C*w + E and 6*b (computed in NumPy below)."""
    w = tf.Variable(W0.astype(dtype.as_numpy_dtype), name="w")
    b = tf.Variable(B0.astype(dtype.as_numpy_dtype), name="b")
    c, e = C.astype(dtype.as_numpy_dtype), E.astype(dtype.as_numpy_dtype)
    loss = tf.reduce_sum(w * w * c + w * e) + 3.0 * b * b
    return w, b, loss


def _np_grads(w, b):
    return 2 * C * w + E, np.float32(6) * b


# -- NumPy reimplementations of TF1's kernels (float32 throughout) ------------------------------
def np_sgd(lr):
    def step(p, g, s):
        return p - np.float32(lr) * g
    return step


def np_momentum(lr, mom, nesterov=False):
    lr, mom = np.float32(lr), np.float32(mom)

    def step(p, g, s):
        s["a"] = s.get("a", np.zeros_like(p)) * mom + g
        if nesterov:
            return p - lr * g - lr * mom * s["a"]
        return p - lr * s["a"]
    return step


def np_adam(lr, b1=0.9, b2=0.999, eps=1e-8):
    lr, b1, b2, eps = (np.float32(v) for v in (lr, b1, b2, eps))

    def step(p, g, s):
        t = s["t"] = s.get("t", 0) + 1
        b1p, b2p = b1 ** np.float32(t), b2 ** np.float32(t)
        lr_t = lr * np.sqrt(np.float32(1) - b2p) / (np.float32(1) - b1p)
        s["m"] = b1 * s.get("m", np.zeros_like(p)) + (np.float32(1) - b1) * g
        s["v"] = b2 * s.get("v", np.zeros_like(p)) + (np.float32(1) - b2) * g * g
        return p - lr_t * s["m"] / (np.sqrt(s["v"]) + eps)
    return step


def np_adagrad(lr, init=0.1):
    lr = np.float32(lr)

    def step(p, g, s):
        s["acc"] = s.get("acc", np.full_like(p, init)) + g * g
        return p - lr * g / np.sqrt(s["acc"])
    return step


def np_rmsprop(lr, decay=0.9, momentum=0.0, eps=1e-10, centered=False):
    lr, rho, mom, eps = (np.float32(v) for v in (lr, decay, momentum, eps))

    def step(p, g, s):
        s["ms"] = rho * s.get("ms", np.ones_like(p)) + (np.float32(1) - rho) * g * g
        denom = s["ms"]
        if centered:
            s["mg"] = rho * s.get("mg", np.zeros_like(p)) + (np.float32(1) - rho) * g
            denom = s["ms"] - s["mg"] * s["mg"]
        s["mom"] = mom * s.get("mom", np.zeros_like(p)) + lr * g / np.sqrt(denom + eps)
        return p - s["mom"]
    return step


def np_adadelta(lr, rho=0.95, eps=1e-8):
    lr, rho, eps = (np.float32(v) for v in (lr, rho, eps))

    def step(p, g, s):
        s["acc"] = rho * s.get("acc", np.zeros_like(p)) + (np.float32(1) - rho) * g * g
        upd = np.sqrt(s.get("upd", np.zeros_like(p)) + eps) / np.sqrt(s["acc"] + eps) * g
        s["upd"] = rho * s.get("upd", np.zeros_like(p)) + (np.float32(1) - rho) * upd * upd
        return p - lr * upd
    return step


CASES = {
    "sgd": (lambda: tf.train.GradientDescentOptimizer(0.1), np_sgd(0.1)),
    "momentum": (lambda: tf.train.MomentumOptimizer(0.1, 0.9), np_momentum(0.1, 0.9)),
    "nesterov": (lambda: tf.train.MomentumOptimizer(0.1, 0.9, use_nesterov=True),
                 np_momentum(0.1, 0.9, nesterov=True)),
    "adam": (lambda: tf.train.AdamOptimizer(0.1), np_adam(0.1)),
    "adam_custom": (lambda: tf.train.AdamOptimizer(0.05, beta1=0.8, beta2=0.99, epsilon=1e-3),
                    np_adam(0.05, 0.8, 0.99, 1e-3)),
    "adagrad": (lambda: tf.train.AdagradOptimizer(0.1), np_adagrad(0.1)),
    "adagrad_init": (lambda: tf.train.AdagradOptimizer(0.2, initial_accumulator_value=0.5),
                     np_adagrad(0.2, 0.5)),
    "rmsprop": (lambda: tf.train.RMSPropOptimizer(0.01), np_rmsprop(0.01)),
    "rmsprop_centered_momentum": (
        lambda: tf.train.RMSPropOptimizer(0.01, decay=0.8, momentum=0.5, epsilon=1e-6,
                                          centered=True),
        np_rmsprop(0.01, 0.8, 0.5, 1e-6, centered=True)),
    "adadelta": (lambda: tf.train.AdadeltaOptimizer(1.0, rho=0.9, epsilon=1e-6),
                 np_adadelta(1.0, 0.9, 1e-6)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_trajectory_matches_tf1_formula(case, backend):
    make_opt, np_step = CASES[case]
    w, b, loss = _model()
    train_op = make_opt().minimize(loss)
    ws, bs = W0.copy(), B0.copy()
    sw, sb = {}, {}
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(4):
            gw, gb = _np_grads(ws, bs)
            ws, bs = np_step(ws, gw, sw), np_step(bs, gb, sb)
            sess.run(train_op)
            got_w, got_b = sess.run([w, b])
            np.testing.assert_allclose(got_w, ws, rtol=2e-6, atol=1e-6)
            np.testing.assert_allclose(got_b, bs, rtol=2e-6, atol=1e-6)
    assert got_w.dtype == np.float32


def test_float64_variables_and_tensor_learning_rate(backend):
    w, b, loss = _model(tf.float64)
    lr = tf.placeholder(tf.float32, [], name="lr")
    train_op = tf.train.GradientDescentOptimizer(lr).minimize(loss)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(train_op, {lr: 0.25})
        sess.run(train_op, {lr: 0.5})
        got = sess.run(w)
    ws = W0.astype(np.float64)
    for r in (0.25, 0.5):
        ws = ws - np.float64(np.float32(r)) * (2 * C.astype(np.float64) * ws + E)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, ws, rtol=1e-12)


# -- float64 variables: TF1 rounds Python-float hyper-parameters to float32 --------------------
X64 = np.random.default_rng(0).standard_normal((8, 3))
Y64 = X64 @ np.array([0.3, -0.7, 1.1]) + 0.1
W64 = np.array([0.1, 0.2, 0.3])


def _h(x: float) -> float:
    """A Python float as TF1 uses it on a float64 variable: converted to a float32 tensor,
    then cast to float64."""
    return float(np.float32(x))


def _np64_trajectory(kind: str, steps: int = 5) -> np.ndarray:
    """float64 NumPy versions of TF1's kernels with float32-rounded hyper-parameters (and, for
    Adam, float32 beta powers multiplied step by step)."""
    w = W64.copy()
    a, b, c = np.zeros(3), np.zeros(3), np.zeros(3)
    b1p, b2p = np.float32(0.9), np.float32(0.999)
    if kind == "adagrad":
        a = np.full(3, 0.1)        # the initial accumulator is made in float64 directly
    if kind == "rmsprop":
        a = np.ones(3)
    for _ in range(steps):
        g = 2 * X64.T @ (X64 @ w - Y64) / 8
        if kind == "sgd":
            w = w - _h(0.1) * g
        elif kind == "momentum":          # Nesterov
            a = a * _h(0.9) + g
            w = w - _h(0.1) * g - _h(0.1) * _h(0.9) * a
        elif kind == "adam":
            lr_t = _h(0.1) * np.sqrt(1 - float(b2p)) / (1 - float(b1p))
            a = a + (g - a) * (1 - _h(0.9))
            b = b + (g * g - b) * (1 - _h(0.999))
            w = w - lr_t * a / (np.sqrt(b) + _h(1e-8))
            b1p, b2p = b1p * np.float32(0.9), b2p * np.float32(0.999)
        elif kind == "rmsprop":           # centered, momentum 0.5
            a = _h(0.9) * a + (1 - _h(0.9)) * g * g
            b = _h(0.9) * b + (1 - _h(0.9)) * g
            c = _h(0.5) * c + _h(0.1) * g / np.sqrt(a - b * b + _h(1e-10))
            w = w - c
        elif kind == "adagrad":
            a = a + g * g
            w = w - _h(0.1) * g / np.sqrt(a)
    return w


def _make64(t, kind: str):
    return {"sgd": lambda: t.train.GradientDescentOptimizer(0.1),
            "momentum": lambda: t.train.MomentumOptimizer(0.1, 0.9, use_nesterov=True),
            "adam": lambda: t.train.AdamOptimizer(0.1),
            "rmsprop": lambda: t.train.RMSPropOptimizer(0.1, momentum=0.5, centered=True),
            "adagrad": lambda: t.train.AdagradOptimizer(0.1)}[kind]()


def _train64(t, kind: str, steps: int = 5):
    with t.Graph().as_default():
        w = t.Variable(W64, name="w")
        loss = t.reduce_mean((t.tensordot(t.constant(X64), w, 1) - Y64) ** 2)
        train = _make64(t, kind).minimize(loss)
        with t.Session() as sess:
            sess.run(t.global_variables_initializer())
            for _ in range(steps):
                sess.run(train)
            dtypes = {v.op.name: v.dtype.base_dtype.name for v in t.global_variables()}
            return sess.run(w), dtypes


KINDS64 = ["sgd", "momentum", "adam", "rmsprop", "adagrad"]


@pytest.mark.parametrize("kind", KINDS64)
def test_float64_model_uses_float32_rounded_hyper_parameters(kind):
    got, dtypes = _train64(tf, kind)
    assert got.dtype == np.float64 and dtypes["w"] == "float64"
    want = _np64_trajectory(kind)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    if kind == "sgd":   # reading lr as the float64 0.1 gives a trajectory > 1e-9 away
        exact = W64.copy()
        for _ in range(5):
            exact = exact - 0.1 * (2 * X64.T @ (X64 @ exact - Y64) / 8)
        assert not np.allclose(got, exact, rtol=1e-9, atol=0)


def test_adam_beta_powers_stay_float32_on_a_float64_model(tmp_path):
    with tf.Graph().as_default():
        w = tf.Variable(W64, name="w")
        opt = tf.train.AdamOptimizer(0.1)
        train = opt.minimize(tf.reduce_sum(w * w))
        b1p, b2p = opt._get_beta_accumulators()
        assert b1p.dtype.base_dtype == tf.float32 and b2p.dtype.base_dtype == tf.float32
        assert opt.get_slot(w, "m").dtype.base_dtype == tf.float64
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(train)
            sess.run(train)
            p1 = sess.run(b1p)
            path = tf.train.Saver().save(sess, str(tmp_path / "model"))
    assert p1.dtype == np.float32 and p1 == np.float32(0.9) ** 3
    assert dict(tf.train.list_variables(path))["beta1_power"] == []
    assert tf.train.load_variable(path, "beta1_power").dtype == np.float32
    assert tf.train.load_variable(path, "w/Adam").dtype == np.float64


@pytest.mark.parametrize("kind", KINDS64)
def test_float64_model_matches_tensorflow(kind):
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    tf1.disable_v2_behavior()
    got, dtypes = _train64(tf, kind)
    want, tf_dtypes = _train64(tf1, kind)
    assert dtypes == tf_dtypes
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)


def test_slot_names_and_collections():
    w, b, loss = _model()
    opt = tf.train.AdamOptimizer()
    opt.minimize(loss)
    assert opt.get_slot_names() == ["m", "v"]
    assert opt.get_slot(w, "m").name == "w/Adam:0"
    assert opt.get_slot(w, "v").name == "w/Adam_1:0"
    assert opt.get_slot(b, "m").name == "b/Adam:0"
    assert opt.get_slot(w, "nope") is None
    names = sorted(v.name for v in opt.variables())
    assert names == ["b/Adam:0", "b/Adam_1:0", "beta1_power:0", "beta2_power:0", "w/Adam:0",
                     "w/Adam_1:0"]
    global_names = {v.name for v in tf.global_variables()}
    trainable_names = {v.name for v in tf.trainable_variables()}
    assert set(names) <= global_names
    assert trainable_names == {"w:0", "b:0"}


def test_momentum_slot_name_and_initial_zeros(backend):
    w, b, loss = _model()
    opt = tf.train.MomentumOptimizer(0.1, 0.9)
    opt.minimize(loss)
    slot = opt.get_slot(w, "momentum")
    assert slot.name == "w/Momentum:0"
    assert slot not in tf.trainable_variables()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_array_equal(sess.run(slot), np.zeros(3, np.float32))


def test_slots_are_named_in_the_variable_scope_of_the_update():
    """TF1 (checked with TF 2.21 compat.v1): slots made under `variable_scope("outer")` are
    `outer/w/Momentum`; a name scope alone leaves them `w/Adam`."""
    w, b, loss = _model()
    with tf.variable_scope("outer"):
        with tf.name_scope("ns"):
            tf.train.MomentumOptimizer(0.1, 0.9).minimize(loss, var_list=[w])
    with tf.name_scope("only_ns"):
        adam = tf.train.AdamOptimizer(0.1)
        adam.minimize(loss, var_list=[w])
    names = {v.op.name for v in tf.global_variables()}
    assert {"outer/w/Momentum", "w/Adam", "w/Adam_1"} <= names
    assert adam.get_slot(w, "m").op.name == "w/Adam"


def test_rmsprop_slots_named_in_tf1_order():
    w, b, loss = _model()
    opt = tf.train.RMSPropOptimizer(0.01, centered=True)
    opt.minimize(loss)
    assert opt.get_slot(w, "rms").name == "w/RMSProp:0"
    assert opt.get_slot(w, "mg").name == "w/RMSProp_1:0"
    assert opt.get_slot(w, "momentum").name == "w/RMSProp_2:0"


def test_variable_update_consumes_slot_assign_output():
    """The slot's new value feeds the variable's update: the order is a data dependency."""
    w, b, loss = _model()
    opt = tf.train.MomentumOptimizer(0.1, 0.9)
    opt.minimize(loss)
    slot_op = opt.get_slot(w, "momentum").op
    ops = tf.get_default_graph().get_operations()
    update = [op for op in ops if op.type == "AssignSub" and op.inputs[0].op is w.op]
    assert len(update) == 1
    stack, seen, found = [update[0]], set(), False
    while stack:
        op = stack.pop()
        if op in seen:
            continue
        seen.add(op)
        if op.type == "Assign" and op.inputs[0].op is slot_op:
            found = True
        stack.extend(t.op for t in op.inputs)
    assert found


def test_global_step_increments_after_updates(backend):
    w, b, loss = _model()
    gs = tf.train.get_or_create_global_step()
    assert gs.dtype == tf.int64 and gs.name == "global_step:0"
    assert tf.train.get_or_create_global_step() is gs
    assert tf.train.get_global_step() is gs
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=gs)
    assert isinstance(train_op, tf.Operation)
    assert train_op in tf.get_collection(tf.GraphKeys.TRAIN_OP)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(3):
            sess.run(train_op)
        assert tf.train.global_step(sess, gs) == 3
        np.testing.assert_allclose(sess.run(w), _sgd_ref(3), rtol=1e-6)


def _sgd_ref(n):
    ws = W0.copy()
    for _ in range(n):
        ws = ws - np.float32(0.1) * (2 * C * ws + E)
    return ws


def test_create_global_step_twice_raises():
    tf.train.create_global_step()
    with pytest.raises(ValueError, match="already exists"):
        tf.train.create_global_step()
    assert tf.train.get_global_step() in tf.global_variables()
    assert tf.train.get_global_step() not in tf.trainable_variables()


def test_get_global_step_is_none_without_one():
    assert tf.train.get_global_step() is None


def test_minimize_with_var_list_updates_only_those(backend):
    w, b, loss = _model()
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, var_list=[w])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(train_op)
        sess.run(train_op)
        got_w, got_b = sess.run([w, b])
    np.testing.assert_allclose(got_w, _sgd_ref(2), rtol=1e-6)
    assert got_b == B0


def test_no_gradients_raises_value_error():
    w, b, loss = _model()
    other = tf.Variable(1.0, name="other")
    with pytest.raises(ValueError, match="No gradients provided for any variable"):
        tf.train.GradientDescentOptimizer(0.1).minimize(loss, var_list=[other])
    with pytest.raises(ValueError, match="No gradients provided for any variable"):
        tf.train.GradientDescentOptimizer(0.1).apply_gradients([(None, w)])


def test_compute_and_apply_gradients(backend):
    w, b, loss = _model()
    opt = tf.train.GradientDescentOptimizer(0.1)
    gvs = opt.compute_gradients(loss)
    assert [v for _, v in gvs] == [w, b]
    gvs = [(g * 0.5, v) for g, v in gvs]
    train_op = opt.apply_gradients(gvs)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(train_op)
        got = sess.run(w)
    np.testing.assert_allclose(got, W0 - np.float32(0.05) * (2 * C * W0 + E), rtol=1e-6)


def test_integer_loss_is_rejected():
    v = tf.Variable(1.0)
    with pytest.raises(ValueError, match="Invalid type"):
        tf.train.GradientDescentOptimizer(0.1).compute_gradients(tf.constant(3), var_list=[v])


def test_adagrad_rejects_nonpositive_accumulator():
    with pytest.raises(ValueError):
        tf.train.AdagradOptimizer(0.1, initial_accumulator_value=0.0)


def test_adam_beta_powers_advance_each_step(backend):
    w, b, loss = _model()
    opt = tf.train.AdamOptimizer(0.1, beta1=0.5, beta2=0.25)
    train_op = opt.minimize(loss)
    b1p, b2p = opt._get_beta_accumulators()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(3):
            sess.run(train_op)
        assert sess.run(b1p) == pytest.approx(0.5 ** 4)
        assert sess.run(b2p) == pytest.approx(0.25 ** 4)


# -- learning-rate schedules -------------------------------------------------------------------
def _at_steps(lr, step_var, steps, sess):
    out = []
    for s in steps:
        step_var.load(s, sess)
        out.append(sess.run(lr))
    return np.array(out)


def test_exponential_decay_staircase_and_smooth(backend):
    gs = tf.train.get_or_create_global_step()
    stair = tf.train.exponential_decay(0.1, gs, decay_steps=10, decay_rate=0.5, staircase=True)
    smooth = tf.train.exponential_decay(0.1, gs, 10, 0.5)
    steps = [0, 5, 9, 10, 15, 20, 35]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got_stair = _at_steps(stair, gs, steps, sess)
        got_smooth = _at_steps(smooth, gs, steps, sess)
    want_stair = [0.1 * 0.5 ** (s // 10) for s in steps]
    want_smooth = [0.1 * 0.5 ** (s / 10) for s in steps]
    np.testing.assert_allclose(got_stair, want_stair, rtol=1e-6)
    np.testing.assert_allclose(got_smooth, want_smooth, rtol=1e-6)
    assert got_stair.dtype == np.float32


def test_piecewise_constant_values_are_exact(backend):
    gs = tf.train.get_or_create_global_step()
    lr = tf.train.piecewise_constant(gs, [np.int64(10), np.int64(20)], [0.1, 0.01, 0.001])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got = _at_steps(lr, gs, [0, 10, 11, 20, 21, 100], sess)
    want = np.array([0.1, 0.1, 0.01, 0.01, 0.001, 0.001], np.float32)
    np.testing.assert_array_equal(got, want)


def test_inverse_time_and_polynomial_decay(backend):
    gs = tf.train.get_or_create_global_step()
    inv = tf.train.inverse_time_decay(1.0, gs, 5, 0.5, staircase=True)
    poly = tf.train.polynomial_decay(0.1, gs, 10, end_learning_rate=0.01, power=2.0)
    cyc = tf.train.polynomial_decay(0.1, gs, 10, end_learning_rate=0.01, cycle=True)
    steps = [0, 3, 5, 10, 12, 25]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got_inv = _at_steps(inv, gs, steps, sess)
        got_poly = _at_steps(poly, gs, steps, sess)
        got_cyc = _at_steps(cyc, gs, steps, sess)
    np.testing.assert_allclose(got_inv, [1.0 / (1 + 0.5 * (s // 5)) for s in steps], rtol=1e-6)
    np.testing.assert_allclose(
        got_poly, [0.09 * (1 - min(s, 10) / 10) ** 2 + 0.01 for s in steps], rtol=1e-5)

    def cyc_ref(s):
        ds = 10 * max(np.ceil(s / 10), 1)
        return 0.09 * (1 - s / ds) + 0.01
    np.testing.assert_allclose(got_cyc, [cyc_ref(s) for s in steps], rtol=1e-5)


def test_decayed_learning_rate_drives_an_optimizer(backend):
    w, b, loss = _model()
    gs = tf.train.get_or_create_global_step()
    lr = tf.train.exponential_decay(0.1, gs, 1, 0.5, staircase=True)
    train_op = tf.train.GradientDescentOptimizer(lr).minimize(loss, global_step=gs)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(train_op)
        sess.run(train_op)
        got = sess.run(w)
    ws = W0.copy()
    for r in (0.1, 0.05):
        ws = ws - np.float32(r) * (2 * C * ws + E)
    np.testing.assert_allclose(got, ws, rtol=1e-6)


def test_cosine_decay(backend):
    gs = tf.train.get_or_create_global_step()
    lr = tf.train.cosine_decay(0.2, gs, 10, alpha=0.1)
    steps = [0, 2, 5, 10, 15]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got = _at_steps(lr, gs, steps, sess)
    want = [0.2 * (0.9 * 0.5 * (1 + np.cos(np.pi * min(s, 10) / 10)) + 0.1) for s in steps]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


# -- ExponentialMovingAverage ------------------------------------------------------------------
def test_exponential_moving_average_tracks_values(backend):
    w = tf.Variable([1.0, 2.0], name="w")
    ema = tf.train.ExponentialMovingAverage(0.9)
    update = ema.apply([w])
    shadow = ema.average(w)
    assert shadow.name == "w/ExponentialMovingAverage:0"
    assert ema.average_name(w) == "w/ExponentialMovingAverage"
    assert shadow not in tf.trainable_variables() and shadow in tf.global_variables()
    assert w in tf.moving_average_variables()
    expected = np.array([1.0, 2.0], np.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_array_equal(sess.run(shadow), expected)  # starts at w's value
        for target in ([3.0, 0.0], [5.0, -1.0]):
            sess.run(tf.assign(w, target))
            sess.run(update)
            expected = expected - np.float32(0.1) * (expected - np.float32(target))
            np.testing.assert_allclose(sess.run(shadow), expected, rtol=1e-6)


def test_exponential_moving_average_num_updates_caps_decay(backend):
    w = tf.Variable(0.0, name="w")
    step = tf.Variable(0, name="step", trainable=False)
    ema = tf.train.ExponentialMovingAverage(0.999, num_updates=step)
    update = ema.apply([w])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(tf.assign(w, 10.0))
        sess.run(update)  # decay = min(0.999, 1/10) = 0.1
        assert sess.run(ema.average(w)) == pytest.approx(9.0)


def test_exponential_moving_average_variables_to_restore():
    w = tf.Variable(1.0, name="w")
    other = tf.Variable(2.0, name="other", trainable=False)
    ema = tf.train.ExponentialMovingAverage(0.9)
    ema.apply([w])
    mapping = ema.variables_to_restore()
    assert mapping["w/ExponentialMovingAverage"] is w
    assert mapping["other"] is other
    assert "w" not in mapping


def test_user_optimizer_subclass_with_tensor_and_initializer_slots(backend):
    """The subclass protocol TF1 optimizers use: _create_slots, _apply_dense, get_slot."""

    class SignDescent(tf.train.Optimizer):
        def __init__(self, lr):
            super().__init__(False, "SignDescent")
            self._lr = lr

        def _create_slots(self, var_list):
            for v in var_list:
                self._get_or_make_slot(v, tf.constant(np.full(v.shape.as_list(), 2.0,
                                                              np.float32)), "scale", self._name)
                self._get_or_make_slot_with_initializer(
                    v, tf.ones_initializer(), v.shape, v.dtype, "count", self._name)

        def _apply_dense(self, grad, var):
            count = tf.assign_add(self.get_slot(var, "count"), tf.ones_like(grad))
            step = self._lr * self.get_slot(var, "scale") * tf.sign(grad) + count * 0.0
            return tf.assign_sub(var, step)

    w, b, loss = _model()
    opt = SignDescent(0.1)
    train_op = opt.minimize(loss)
    assert opt.get_slot(w, "scale").name == "w/SignDescent:0"
    assert opt.get_slot(w, "count").name == "w/SignDescent_1:0"
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(train_op)
        got_w, count = sess.run([w, opt.get_slot(w, "count")])
    np.testing.assert_allclose(got_w, W0 - np.float32(0.2) * np.sign(2 * C * W0 + E), rtol=1e-6)
    np.testing.assert_array_equal(count, np.full(3, 2.0, np.float32))


def test_clip_by_global_norm_between_compute_and_apply(backend):
    w, b, loss = _model()
    opt = tf.train.GradientDescentOptimizer(0.1)
    grads, variables = zip(*opt.compute_gradients(loss))
    clipped, norm = tf.clip_by_global_norm(list(grads), 1.0)
    train_op = opt.apply_gradients(zip(clipped, variables))
    gw, gb = _np_grads(W0, B0)
    total = np.sqrt(np.sum(gw ** 2) + gb ** 2)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got_norm = sess.run(norm)
        sess.run(train_op)
        got_w = sess.run(w)
    assert got_norm == pytest.approx(total, rel=1e-6)
    np.testing.assert_allclose(got_w, W0 - np.float32(0.1) * gw / total, rtol=1e-5)


def test_applied_gradients_names_what_an_update_op_applies():
    from jitflow.train.optimizer import applied_gradients
    x = tf.placeholder(tf.float32, [None], name="x")
    w = tf.Variable(1.0, name="w")
    b = tf.Variable(0.0, name="b")
    unused = tf.Variable(2.0, name="unused")
    loss = tf.reduce_mean(tf.square(w * x + b))
    opt = tf.train.GradientDescentOptimizer(0.1)
    pairs = opt.compute_gradients(loss, var_list=[w, b, unused])
    train = opt.apply_gradients(pairs, global_step=tf.train.get_or_create_global_step())
    applied = applied_gradients(train)
    assert [v for _, v in applied] == [w, b]          # not the variable without a gradient
    assert [g for g, _ in applied] == [g for g, v in pairs if g is not None]
    assert applied_gradients(loss.op) is None
    # fed with these gradients, the op is the step run on data
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        grads = sess.run([g for g, _ in applied], {x: [1.0, 2.0]})
        sess.run(train, {g: v for (g, _), v in zip(applied, grads)})
        assert sess.run(w) == pytest.approx(1.0 - 0.1 * 5.0)   # d/dw mean((w x)^2) = 5 at w=1
