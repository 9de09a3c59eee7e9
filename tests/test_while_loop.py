"""Real control flow: while loops with run-time trip counts, TensorArrays, nested loops and
conds, gradients through them (finite differences, both backends), TF parity."""
from __future__ import annotations

import numpy as np
import pytest

import jitflow as tf
from helpers import central_difference

RNG = np.random.default_rng(7)


def _fd_check(sess, loss, x, feed, value, rtol=1e-4, atol=1e-6):
    """tf.gradients(loss, x) against central differences of loss in x (float64 feeds)."""
    g, = tf.gradients(loss, [x])
    got = sess.run(g, {**feed, x: value})

    def f(v):
        return float(sess.run(loss, {**feed, x: v}))

    np.testing.assert_allclose(got, central_difference(f, value, eps=1e-6), rtol=rtol,
                               atol=atol)


def test_trip_count_from_a_fed_value(backend):
    n = tf.placeholder(tf.int32, [])
    x = tf.placeholder(tf.float32, [3])
    i, acc = tf.while_loop(lambda i, a: i < n, lambda i, a: (i + 1, a * x),
                           [tf.constant(0), tf.ones([3])])
    xv = np.array([1.0, 2.0, -1.5], np.float32)
    with tf.Session() as sess:
        for k in (0, 1, 5):
            iv, av = sess.run([i, acc], {n: k, x: xv})
            assert iv == k
            np.testing.assert_allclose(av, xv ** k, rtol=1e-6)


def test_trip_count_from_data(backend):
    """Collatz steps: the loop stops on a value computed in the loop."""
    start = tf.placeholder(tf.int32, [])
    steps, _ = tf.while_loop(
        lambda s, v: v > 1,
        lambda s, v: (s + 1, tf.where(tf.equal(v % 2, 0), v // 2, 3 * v + 1)),
        [tf.constant(0), start])

    def collatz(v):
        s = 0
        while v > 1:
            v = v // 2 if v % 2 == 0 else 3 * v + 1
            s += 1
        return s

    with tf.Session() as sess:
        for v in (1, 6, 27):
            assert sess.run(steps, {start: v}) == collatz(v)


def test_trip_count_from_a_fed_shape(backend):
    x = tf.placeholder(tf.float32, [None, 2])
    n = tf.shape(x)[0]
    _, total = tf.while_loop(lambda i, s: i < n, lambda i, s: (i + 1, s + x[i]),
                             [tf.constant(0), tf.zeros([2])])
    with tf.Session() as sess:
        for rows in (1, 4, 9):
            xv = RNG.standard_normal((rows, 2)).astype(np.float32)
            np.testing.assert_allclose(sess.run(total, {x: xv}), xv.sum(0), rtol=1e-5)


def test_maximum_iterations_caps_a_data_dependent_loop(backend):
    m = tf.placeholder(tf.int32, [])
    r = tf.while_loop(lambda k: k < 1000, lambda k: k * 2, [tf.constant(1)],
                      maximum_iterations=m)
    with tf.Session() as sess:
        assert sess.run(r, {m: 3}) == 8
        assert sess.run(r, {m: 0}) == 1
        assert sess.run(r, {m: 50}) == 1024


def test_shape_invariants_let_a_loop_variable_grow(backend):
    n = tf.placeholder(tf.int32, [])
    i, v = tf.while_loop(lambda i, v: i < n, lambda i, v: (i + 1, tf.concat([v, v[-1:] + 1], 0)),
                         [tf.constant(0), tf.constant([0])],
                         shape_invariants=[tf.TensorShape([]), tf.TensorShape([None])])
    assert v.shape.as_list() == [None]
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(v, {n: 4}), [0, 1, 2, 3, 4])


def test_a_shape_change_without_an_invariant_is_rejected():
    with pytest.raises(ValueError, match="shape_invariants"):
        tf.while_loop(lambda v: tf.size(v) < 10, lambda v: tf.concat([v, v], 0),
                      [tf.constant([1])])
    with pytest.raises(TypeError, match="enters the loop with type int32"):
        tf.while_loop(lambda v: v < 3, lambda v: tf.cast(v, tf.float32), [tf.constant(0)])
    with pytest.raises(ValueError, match="boolean scalar"):
        tf.while_loop(lambda v: v, lambda v: v + 1, [tf.constant(0)])


def test_body_tensors_cannot_be_used_outside_the_loop():
    inside = []

    def body(i):
        inside.append(i * 2)
        return i + 1

    tf.while_loop(lambda i: i < 3, body, [tf.constant(0)])
    with tf.Session(backend="interpreter") as sess:
        with pytest.raises(tf.errors.InvalidArgumentError, match="only inside that body"):
            sess.run(inside[0])


def test_nested_loops_with_inner_trip_count_from_the_outer_loop(backend):
    n = tf.placeholder(tf.int32, [])

    def outer(i, total):
        _, t = tf.while_loop(lambda j, t: j < i, lambda j, t: (j + 1, t + tf.cast(j, tf.float32)),
                             [tf.constant(0), total])
        return i + 1, t

    _, total = tf.while_loop(lambda i, t: i < n, outer, [tf.constant(0), tf.constant(0.0)])
    with tf.Session() as sess:
        assert sess.run(total, {n: 5}) == sum(j for i in range(5) for j in range(i))


def test_loop_gradient_matches_finite_differences(backend):
    x = tf.placeholder(tf.float64, [3])
    w = tf.placeholder(tf.float64, [3, 3])
    n = tf.placeholder(tf.int32, [])
    _, h = tf.while_loop(lambda i, h: i < n,
                         lambda i, h: (i + 1, tf.tanh(tf.reshape(tf.matmul(h[None], w), [3]) + x)),
                         [tf.constant(0), tf.zeros([3], tf.float64)])
    loss = tf.reduce_sum(h * h)
    xv = RNG.standard_normal(3)
    wv = RNG.standard_normal((3, 3)) * 0.5
    with tf.Session() as sess:
        _fd_check(sess, loss, x, {w: wv, n: 4}, xv)
        _fd_check(sess, loss, w, {x: xv, n: 4}, wv)
        assert sess.run(tf.gradients(loss, [x])[0], {x: xv, w: wv, n: 0}).tolist() == [0, 0, 0]


def test_loop_gradient_reaches_a_variable_read_in_the_body(backend):
    """What an optimizer needs: d loss / d variable through the loop."""
    v = tf.Variable(np.array([0.5, -0.25]), dtype=tf.float64)
    n = tf.placeholder(tf.int32, [])
    _, acc = tf.while_loop(lambda i, a: i < n, lambda i, a: (i + 1, a * v + 1.0),
                           [tf.constant(0), tf.ones([2], tf.float64)])
    loss = tf.reduce_sum(acc)
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    g, = tf.gradients(loss, [v])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        vv = sess.run(v)
        # acc_3 = v^3 + v^2 + v + 1 -> d/dv = 3v^2 + 2v + 1
        np.testing.assert_allclose(sess.run(g, {n: 3}), 3 * vv ** 2 + 2 * vv + 1)
        sess.run(train, {n: 3})
        np.testing.assert_allclose(sess.run(v), vv - 0.1 * (3 * vv ** 2 + 2 * vv + 1))


def test_nested_loop_gradient(backend):
    x = tf.placeholder(tf.float64, [])

    def outer(i, a):
        _, b = tf.while_loop(lambda j, b: j < 2, lambda j, b: (j + 1, tf.sin(b) * x),
                             [tf.constant(0), a])
        return i + 1, b + x

    _, y = tf.while_loop(lambda i, a: i < 3, outer, [tf.constant(0), x])
    with tf.Session() as sess:
        _fd_check(sess, y, x, {}, np.float64(0.7))


def test_back_prop_false_stops_the_gradient():
    x = tf.placeholder(tf.float32, [])
    _, y = tf.while_loop(lambda i, a: i < 2, lambda i, a: (i + 1, a * x), [0, x],
                         back_prop=False)
    assert tf.gradients(y, [x]) == [None]


def test_gradient_through_cond_inside_a_loop(backend):
    x = tf.placeholder(tf.float64, [2])

    def body(i, a):
        return i + 1, tf.cond(tf.equal(i % 2, 0), lambda: a * x, lambda: tf.sin(a) + x)

    _, y = tf.while_loop(lambda i, a: i < 4, body, [tf.constant(0), tf.ones([2], tf.float64)])
    loss = tf.reduce_sum(y)
    with tf.Session() as sess:
        _fd_check(sess, loss, x, {}, np.array([0.3, -0.8]))


def _kernel_builds() -> int:
    """Kernels given code so far (on any path: LLVM or Numba, compiled or loaded)."""
    from jitflow.backends.numba_cpu import kernels as cpu
    return cpu.STATS.get("kernels", 0)


def test_body_is_compiled_once_whatever_the_trip_count():
    x = tf.placeholder(tf.float32, [4])
    n = tf.placeholder(tf.int32, [])
    _, y = tf.while_loop(lambda i, a: i < n, lambda i, a: (i + 1, tf.tanh(a * 0.5 + x)),
                         [tf.constant(0), x])
    xv = np.ones(4, np.float32)
    with tf.Session(backend="numba") as sess:
        before = _kernel_builds()
        sess.run(y, {x: xv, n: 3})
        assert _kernel_builds() > before        # the counters see the body's kernel
        before = _kernel_builds()
        for k in (10, 100, 7):
            r = sess.run(y, {x: xv, n: k})
        assert _kernel_builds() == before
    want = xv.copy()
    for _ in range(7):
        want = np.tanh(want * 0.5 + xv)
    np.testing.assert_allclose(r, want, rtol=1e-6)


# -- TensorArray -------------------------------------------------------------------------------
def test_tensor_array_write_read_stack_in_a_loop(backend):
    x = tf.placeholder(tf.float32, [None, 3])
    n = tf.shape(x)[0]
    ta = tf.TensorArray(tf.float32, size=n)
    xs = tf.TensorArray(tf.float32, size=n).unstack(x)
    _, out = tf.while_loop(lambda i, ta: i < n,
                           lambda i, ta: (i + 1, ta.write(i, xs.read(i) * tf.cast(i, tf.float32))),
                           [tf.constant(0), ta])
    stacked = out.stack()
    assert stacked.shape.as_list() == [None, 3]
    size = out.size()
    with tf.Session() as sess:
        xv = RNG.standard_normal((5, 3)).astype(np.float32)
        got, sz = sess.run([stacked, size], {x: xv})
        np.testing.assert_allclose(got, xv * np.arange(5)[:, None], rtol=1e-6)
        assert sz == 5


def test_tensor_array_dynamic_size_gather_scatter_concat_split(backend):
    ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
    _, ta = tf.while_loop(lambda i, ta: i < 4,
                          lambda i, ta: (i + 1, ta.write(i, tf.fill([2], tf.cast(i, tf.float32)))),
                          [tf.constant(0), ta])
    g = ta.gather([3, 0])
    sc = tf.TensorArray(tf.float32, size=3).scatter([2, 0], tf.constant([[1.0], [2.0]]))
    sc = sc.write(1, tf.constant([9.0]))
    sp = tf.TensorArray(tf.float32, size=2).split(tf.constant([1.0, 2.0, 3.0]), [1, 2])
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(g), [[3, 3], [0, 0]])
        np.testing.assert_array_equal(sess.run(ta.size()), 4)
        np.testing.assert_array_equal(sess.run(sc.stack()), [[2.0], [9.0], [1.0]])
        np.testing.assert_array_equal(sess.run(sp.concat()), [1.0, 2.0, 3.0])
        np.testing.assert_array_equal(sess.run(sp.read(1)), [2.0, 3.0])


def test_tensor_array_errors(backend):
    ta = tf.TensorArray(tf.float32, size=2)
    with pytest.raises(TypeError, match="TensorArray dtype is float32"):
        ta.write(0, tf.constant(1))
    w = ta.write(0, 1.0)
    with pytest.raises(ValueError, match="Inconsistent shapes"):
        w.write(1, tf.constant([1.0, 2.0]))
    with tf.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError, match="not resizeable"):
            sess.run(w.write(5, 2.0).flow)
        with pytest.raises(tf.errors.InvalidArgumentError, match="already been written"):
            sess.run(w.write(0, 2.0).flow)
        with pytest.raises(tf.errors.InvalidArgumentError, match="not yet been written"):
            sess.run(w.read(1))
    with pytest.raises(ValueError, match="Size must be provided"):
        tf.TensorArray(tf.float32)


def test_tensor_array_gradients(backend):
    """Gradients through unstack -> read in a loop -> write -> stack (dynamic_rnn's path)."""
    x = tf.placeholder(tf.float64, [4, 2])
    w = tf.placeholder(tf.float64, [2])
    xs = tf.TensorArray(tf.float64, size=4).unstack(x)

    def body(i, h, out):
        h = tf.tanh(h * w + xs.read(i))
        return i + 1, h, out.write(i, h * h)

    _, h, out = tf.while_loop(lambda i, *_: i < 4, body,
                              [tf.constant(0), tf.zeros([2], tf.float64),
                               tf.TensorArray(tf.float64, size=4)])
    loss = tf.reduce_sum(out.stack() * np.arange(8.0).reshape(4, 2)) + tf.reduce_sum(h)
    xv = RNG.standard_normal((4, 2))
    wv = RNG.standard_normal(2)
    with tf.Session() as sess:
        _fd_check(sess, loss, x, {w: wv}, xv)
        _fd_check(sess, loss, w, {x: xv}, wv)


def test_map_fn_scan_and_folds_over_a_fed_length(backend):
    x = tf.placeholder(tf.float32, [None, 2])
    m = tf.map_fn(lambda r: r * 2.0 + 1.0, x)
    pair = tf.map_fn(lambda r: (r[0] + r[1], r[0] * r[1]), (x, x + 1.0),
                     dtype=(tf.float32, tf.float32))
    sc = tf.scan(lambda a, r: a * 0.5 + r, x, reverse=True)
    sc0 = tf.scan(lambda a, r: a + r, x, initializer=tf.ones([2]))
    fl = tf.foldl(lambda a, r: a * r, x)
    fr = tf.foldr(lambda a, r: a - r, x, initializer=tf.zeros([2]))
    xv = RNG.standard_normal((40, 2)).astype(np.float32)
    with tf.Session() as sess:
        rm, (p0, p1), rsc, rsc0, rfl, rfr = sess.run([m, pair, sc, sc0, fl, fr], {x: xv})
    np.testing.assert_allclose(rm, xv * 2 + 1, rtol=1e-6)
    np.testing.assert_allclose(p0, 2 * xv + 1, rtol=1e-6)
    np.testing.assert_allclose(p1, xv * (xv + 1), rtol=1e-6)
    want, a = np.zeros_like(xv), None
    for i in range(39, -1, -1):
        a = xv[i] if a is None else a * 0.5 + xv[i]
        want[i] = a
    np.testing.assert_allclose(rsc, want, rtol=1e-5)
    np.testing.assert_allclose(rsc0, 1 + np.cumsum(xv, 0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(rfl, np.prod(xv, 0), rtol=1e-4)
    np.testing.assert_allclose(rfr, -xv.sum(0), rtol=1e-5, atol=1e-5)


# -- TensorFlow parity ---------------------------------------------------------------------------
def _rnn_program(t, xv, wv, n):
    x = t.placeholder(t.float32, [None, 3])
    w = t.Variable(wv)
    steps = t.shape(x)[0]
    xs = t.TensorArray(t.float32, size=steps).unstack(x)

    def body(i, h, out):
        h = t.tanh(t.matmul(h, w) + xs.read(i)[None])
        return i + 1, h, out.write(i, h[0])

    _, h, out = t.while_loop(lambda i, h, o: i < t.minimum(steps, n), body,
                             [t.constant(0), t.zeros([1, 3]),
                              t.TensorArray(t.float32, size=steps)])
    loss = t.reduce_sum(out.stack() ** 2) + t.reduce_sum(h)
    c = t.cond(loss > 1.0, lambda: t.sqrt(loss), lambda: loss * 2.0)
    gw, gx = t.gradients(c, [w, x])
    with t.Session() as sess:
        sess.run(t.global_variables_initializer())
        return sess.run([out.stack(), c, gw, gx], {x: xv})


def test_loops_tensor_arrays_and_cond_match_tensorflow():
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    tf1.disable_eager_execution()
    xv = RNG.standard_normal((5, 3)).astype(np.float32)
    wv = (RNG.standard_normal((3, 3)) * 0.5).astype(np.float32)
    g = tf1.Graph()
    with g.as_default():
        want = _rnn_program(tf1, xv, wv, 5)
    got = _rnn_program(tf, xv, wv, 5)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


# -- gradients read the forward pass's values (nothing in the body runs again) ---------------------
def test_loop_gradient_uses_the_forward_dropout_masks(backend):
    """A random op in the body draws once per iteration; the gradient sees the same draws (a
    backward pass that recomputed the body would draw new masks)."""
    x = tf.placeholder(tf.float64, [300])

    def body(i, a):
        return i + 1, a + tf.nn.dropout(x, keep_prob=0.5) * tf.cast(i + 1, tf.float64)

    _, y = tf.while_loop(lambda i, a: i < 3, body, [tf.constant(0), tf.zeros([300], tf.float64)])
    g, = tf.gradients(tf.reduce_sum(y), [x])
    with tf.Session() as sess:
        yv, gv = sess.run([y, g], {x: np.ones(300)})
    # y = sum_k (k + 1) * mask_k * x / 0.5 is linear in x: at x = 1, dy/dx = y
    np.testing.assert_allclose(gv, yv)
    assert 0 < np.count_nonzero(yv) < 300


def test_loop_gradient_does_not_run_stateful_body_ops_again(backend):
    c = tf.Variable(0.0, dtype=tf.float64)
    a0 = tf.placeholder(tf.float64, [])

    def body(i, a):
        return i + 1, a * tf.assign_add(c, 1.0)

    _, y = tf.while_loop(lambda i, a: i < 3, body, [tf.constant(0), a0])
    g, = tf.gradients(y, [a0])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        yv, gv = sess.run([y, g], {a0: 2.0})
        assert sess.run(c) == 3.0          # the counter moved once per iteration
    assert yv == 2.0 * 6.0 and gv == 6.0   # (c+1)(c+2)(c+3) with c = 0


def test_result_has_the_structure_the_body_returns(backend):
    """As TF1: a tuple body on list loop_vars gives a tuple; a one-tensor result is unpacked
    (also inside a one-element list of a namedtuple: that is two tensors, kept as a list)."""
    import collections
    pair = collections.namedtuple("pair", "a b")
    x = tf.placeholder(tf.float32, [2])
    r1 = tf.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * 2.0), [0, x])
    r2 = tf.while_loop(lambda p: p.a < 2, lambda p: [pair(p.a + 1, p.b + 1.0)],
                       [pair(tf.constant(0), x)])
    r3 = tf.while_loop(lambda v: tf.reduce_sum(v) < 10.0, lambda v: [v * 2.0], [x])
    assert isinstance(r1, tuple) and isinstance(r2, list) and isinstance(r2[0], pair)
    assert isinstance(r3, tf.Tensor)
    with tf.Session() as sess:
        a, b, c = sess.run([r1, r2, r3], {x: [1.0, 2.0]})
    assert a[0] == 3 and a[1].tolist() == [8.0, 16.0]
    assert b[0].a == 2 and b[0].b.tolist() == [3.0, 4.0]
    assert c.tolist() == [4.0, 8.0]
