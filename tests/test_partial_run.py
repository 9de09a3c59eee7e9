"""`Session.partial_run_setup` / `Session.partial_run`: TF1's semantics (each declared feed fed
once, each declared fetch fetched once, each op run once per handle) and its errors."""
from __future__ import annotations

import numpy as np
import pytest

import jitflow as tf


def _graph(t):
    """a, b, c -> r1 = a + b, r2 = r1 * c; a counter `v` and its increment; neg = -a (`t`:
    jitflow or tf.compat.v1)."""
    a = t.placeholder(t.float32, shape=[], name="a")
    b = t.placeholder(t.float32, shape=[], name="b")
    c = t.placeholder(t.float32, shape=[], name="c")
    r1 = t.add(a, b, name="r1")
    r2 = t.multiply(r1, c, name="r2")
    v = t.Variable(0.0, name="v")
    inc = t.assign_add(v, 1.0, name="inc")
    return a, b, c, r1, r2, v, inc, t.negative(a, name="neg")


def test_partial_run_feeds_and_fetches_in_steps(backend):
    a, b, c, r1, r2, v, inc, neg = _graph(tf)
    with tf.Session() as sess:
        h = sess.partial_run_setup([r1, r2], [a, b, c])
        assert isinstance(h, str)
        assert sess.partial_run(h, r1, feed_dict={a: 1, b: 2}) == 3.0
        assert sess.partial_run(h, r2, feed_dict={c: 3}) == 9.0
        # all fetches done: the handle is gone
        with pytest.raises(tf.errors.InvalidArgumentError, match="Must run 'setup'"):
            sess.partial_run(h, r2)
        # structures, names, two handles at once
        h1 = sess.partial_run_setup([r1], [a, b])
        h2 = sess.partial_run_setup({"x": r1}, a)
        assert sess.partial_run(h2, [], {a: 5}) == []
        assert sess.partial_run(h1, {"r": "r1:0"}, {"a:0": 1, "b:0": 2}) == {"r": 3.0}
        with pytest.raises(tf.errors.InvalidArgumentError):   # b is not declared for h2
            sess.partial_run(h2, r1, {b: 2})
        h = sess.partial_run_setup([r1, r2], [a, b, c])
        assert sess.partial_run(h, [r1, r2], {a: 1, b: 2, c: 3}) == [3.0, 9.0]


def test_partial_run_errors(backend):
    a, b, c, r1, r2, v, inc, neg = _graph(tf)
    err = tf.errors.InvalidArgumentError
    with tf.Session() as sess:
        sess.run(v.initializer)
        h = sess.partial_run_setup([r1, r2], [a, b, c])
        with pytest.raises(err, match="Fetch c:0 can't be computed from the feeds that have "
                                      "been fed so far"):
            sess.partial_run(h, r2, feed_dict={a: 1, b: 2})
        assert sess.partial_run(h, r1, feed_dict={a: 1, b: 2}) == 3.0   # nothing was spent
        with pytest.raises(err, match="The fetch r1:0 has already been fetched"):
            sess.partial_run(h, r1)
        with pytest.raises(err, match="The feed a:0 has already been fed"):
            sess.partial_run(h, r2, feed_dict={a: 5, c: 3})
        with pytest.raises(err, match="The feed k:0 was not specified in partial_run_setup"):
            sess.partial_run(h, r2, feed_dict={tf.constant(1.0, name="k"): 1.0})
        with pytest.raises(err, match="The fetch inc:0 was not specified in partial_run_setup"):
            sess.partial_run(h, inc)
        with pytest.raises(ValueError, match=r"Cannot feed value of shape \(2,\)"):
            sess.partial_run(h, r2, feed_dict={c: [1.0, 2.0]})
        assert sess.partial_run(h, r2, feed_dict={c: 3}) == 9.0
        with pytest.raises(err, match="Must run 'setup'"):
            sess.partial_run("no such handle", r1)
        with pytest.raises(err, match="a:0 is both fed and fetched"):
            sess.partial_run_setup([r1, a], [a, b])
        with pytest.raises(TypeError):
            sess.partial_run_setup([3], [a])
        with pytest.raises(TypeError):
            sess.partial_run_setup(None, [a])
        h = sess.partial_run_setup([r1, inc], [a, b])
        with pytest.raises(RuntimeError, match="requires empty `target_list`"):
            sess.partial_run(h, inc.op)
        with pytest.raises(TypeError):
            sess.partial_run(h, None)
    with pytest.raises(RuntimeError, match="closed Session"):
        sess.partial_run_setup([r1], [a])
    with pytest.raises(RuntimeError, match="closed Session"):
        sess.partial_run(h, r1)


def test_each_op_runs_once_per_handle(backend):
    x = tf.placeholder(tf.float32, [], name="x")
    y = tf.placeholder(tf.float32, [], name="y")
    noise = tf.random_uniform([], seed=3)          # read by both fetches
    first = tf.add(noise, x, name="first")
    second = tf.add(noise, y, name="second")
    v = tf.Variable(0.0, name="v")
    counted = tf.add(tf.assign_add(v, 1.0), 0.0, name="counted")
    last = tf.add(counted, y, name="last")
    with tf.Session() as sess:
        sess.run(v.initializer)
        h = sess.partial_run_setup([first, second, counted, last], [x, y])
        f = sess.partial_run(h, first, {x: 10.0})
        s = sess.partial_run(h, second, {y: 20.0})
        # the same draw in both fetches (the draw ran once)
        assert s - 20.0 == pytest.approx(f - 10.0)
        assert sess.partial_run(h, counted) == 1.0
        assert sess.partial_run(h, last) == 21.0
        assert sess.run(v) == 1.0       # the increment ran once


def test_declared_targets_run_once_in_the_first_call_that_can(backend):
    a, b, c, r1, r2, v, inc, neg = _graph(tf)
    with tf.Session() as sess:
        sess.run(v.initializer)
        h = sess.partial_run_setup([r1, inc.op], [a, b])
        assert sess.partial_run(h, [], {a: 1}) == []
        assert sess.run(v) == 1.0
        assert sess.partial_run(h, r1, {b: 2}) == 3.0
        assert sess.run(v) == 1.0


def test_partial_run_fetch_of_a_fed_tensor_returns_its_value(backend):
    a, b, c, r1, r2, v, inc, neg = _graph(tf)
    with tf.Session() as sess:
        h = sess.partial_run_setup([r1], [a, b])
        assert sess.partial_run(h, a, {a: 1.5}) == 1.5
        with pytest.raises(tf.errors.InvalidArgumentError, match="Fetch b:0 can't be computed"):
            sess.partial_run(h, b)
        assert sess.partial_run(h, r1, {b: 2}) == 3.5


def test_partial_run_matches_tensorflow():
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    tf1.disable_eager_execution()

    def script(t, sess, ops):
        a, b, c, r1, r2, v, inc, neg = ops
        out = []

        def attempt(f):
            try:
                out.append(np.asarray(f()).tolist())
            except Exception as e:  # noqa: BLE001  (the class and message are compared)
                msg = str(e).split("\n")
                out.append((type(e).__name__, [m for m in msg if "fetch" in m or "feed" in m
                                               or "Fetch" in m or "setup" in m][:1]))

        sess.run(v.initializer)
        h = sess.partial_run_setup([r1, r2], [a, b, c])
        attempt(lambda: sess.partial_run(h, r1, feed_dict={a: 1, b: 2}))
        attempt(lambda: sess.partial_run(h, r1))
        attempt(lambda: sess.partial_run(h, r2, feed_dict={a: 5, c: 3}))
        attempt(lambda: sess.partial_run(h, r2, feed_dict={c: 3}))
        attempt(lambda: sess.partial_run(h, r2))
        h = sess.partial_run_setup([r1, r2], [a, b, c])
        attempt(lambda: sess.partial_run(h, r2, feed_dict={a: 1}))
        attempt(lambda: sess.partial_run(h, neg, feed_dict={b: 2}))
        attempt(lambda: sess.partial_run(h, [r1], feed_dict={b: 2}))
        return out

    with tf1.Graph().as_default():
        ops = _graph(tf1)
        with tf1.Session() as sess:
            theirs = script(tf1, sess, ops)
    ops = _graph(tf)
    with tf.Session() as sess:
        ours = script(tf, sess, ops)
    assert ours == theirs
