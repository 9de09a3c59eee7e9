"""The warm path: the generated runners behind `Session.run` and `make_callable` keep every
TF1 semantic of the general path (feed conversion and checks, errors, fetch structures,
variables, closed sessions) while calling the kernel's native entry point directly."""
from __future__ import annotations

import collections
import gc
import weakref

import numpy as np
import pytest

import jitflow as tf
from helpers import assert_same_result
from jitflow.core import errors


def seeds():
    a = tf.placeholder(tf.float32, [], name="a")
    b = tf.placeholder(tf.float32, [], name="b")
    return a, b, (a * b) / (a + b)


def warm(run, *args, times=3):
    """Call `run(*args)` a few times (the first calls take the general path); last result."""
    for _ in range(times):
        out = run(*args)
    return out


@pytest.mark.parametrize("mode", ["auto", "numba"])
def test_warm_runs_use_the_native_entry_point_not_the_dispatcher(mode, monkeypatch):
    """Warm runs call the kernel's code directly: the LLVM path's entry, or the Numba
    overload's native entry point (no dispatcher typing)."""
    monkeypatch.setenv("JITFLOW_COMPILE", mode)
    a, b, res = seeds()
    with tf.Session() as sess:
        out = warm(sess.run, res, {a: 15.0, b: 5.0})
        assert type(out) is np.float32 and out == np.float32(3.75)
        spec = next(iter(sess._specs.values()))
        assert spec.fast is not None
        (entry,) = spec.executable._fast.entries.values()
        ep = entry[0]
        (c,) = spec.executable.exact.values()
        if mode == "numba":
            assert ep is not c.fn and ep in [o.entry_point for o in c.fn.overloads.values()]
        else:
            assert c.fn is None and ep is c.run and c.level == "opt"
        f = sess.make_callable(res, [a, b])
        assert warm(f, 2.0, 6.0) == np.float32(1.5)
        assert isinstance(f(1.0, 1.0), np.float32)


@pytest.mark.parametrize("value", [2, 2.0, np.float32(2), np.float64(2.0), np.array(2.0),
                                   np.array(2.0, np.float32), [2.0], np.array([[2.0]])[0, 0],
                                   np.broadcast_to(np.float32(2), ())])
def test_every_kind_of_scalar_feed_is_converted_as_tf1_does(value):
    a, b, res = seeds()
    with tf.Session() as sess:
        f = sess.make_callable(res, [a, b])
        for _ in range(3):
            if isinstance(value, list):
                with pytest.raises(ValueError, match=r"Cannot feed value of shape \(1,\) for "
                                   r"Tensor 'a:0', which has shape '\(\)'"):
                    sess.run(res, {a: value, b: 2.0})
                with pytest.raises(ValueError, match="Cannot feed value of shape"):
                    f(value, 2.0)
                continue
            r = sess.run(res, {a: value, b: 2.0})
            assert type(r) is np.float32 and r == np.float32(1.0)
            assert type(f(value, 2.0)) is np.float32 and f(value, 2.0) == np.float32(1.0)


def test_bad_feeds_get_tf1_errors_after_the_path_is_warm():
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    y = tf.reduce_sum(x * 2.0, axis=1)
    with tf.Session() as sess:
        f = sess.make_callable(y, [x])
        good = np.ones((2, 3), np.float32)
        warm(sess.run, y, {x: good})
        warm(f, good)
        for bad in (np.ones((2, 4), np.float32), np.ones(3, np.float32), [1.0, 2.0, 3.0]):
            with pytest.raises(ValueError, match=r"Cannot feed value of shape \(\d.*\) for "
                               r"Tensor 'x:0', which has shape '\(\?, 3\)'"):
                sess.run(y, {x: bad})
            with pytest.raises(ValueError, match="Cannot feed value of shape"):
                f(bad)
        with pytest.raises(ValueError, match="Cannot feed value 'abc' for Tensor 'x:0'"):
            f("abc")
        with pytest.raises(TypeError, match="cannot be a tf.Tensor"):
            f(x)
        with pytest.raises(TypeError, match="callable expects 1 feed values, got 2"):
            f(good, good)
        np.testing.assert_array_equal(f(good), [6.0, 6.0])


def test_conversions_and_layouts_the_kernel_cannot_take_directly():
    x = tf.placeholder(tf.float32, [None], name="x")
    y = x * 3.0 + 1.0
    base = np.arange(12, dtype=np.float64)
    with tf.Session() as sess:
        for value in (base[::2], base[::2].astype(np.float32), [1, 2, 3],
                      np.arange(4, dtype=np.float32)[::-1], base.astype(np.float32)):
            ro = np.array(value, np.float32)
            ro.setflags(write=False)
            for v in (value, ro):
                want = np.asarray(v, np.float32) * np.float32(3) + np.float32(1)
                got = warm(sess.run, y, {x: v})
                assert got.dtype == np.float32
                np.testing.assert_array_equal(got, want)


def test_fetch_structures_and_fed_fetches_match_the_interpreter():
    Pair = collections.namedtuple("Pair", "s d")
    x = tf.placeholder(tf.float32, [None], name="x")
    k = tf.placeholder(tf.float64, [], name="k")
    s = tf.reduce_sum(x)
    d = x * 2.0
    fetches = [{"pair": Pair(s, d), "k": k, "t": (s, [d, s.op])},
               collections.OrderedDict([("x", x), ("s", s)]), s, d.op]
    feed = {x: np.arange(4, dtype=np.float32), k: 1.5}
    out = {}
    for name in ("interpreter", "numba"):
        with tf.Session(backend=name) as sess:
            out[name] = [warm(sess.run, fetches, feed)]
            out[name].append(warm(sess.make_callable(fetches, [x, k]), feed[x], 1.5))
    assert_same_result(out["numba"], out["interpreter"], 1e-6, 1e-6, "warm")
    r = out["numba"][0]
    assert type(r[0]["pair"]) is Pair and type(r[1]) is collections.OrderedDict
    assert type(r[0]["k"]) is np.float64 and r[0]["k"] == 1.5
    assert r[3] is None and r[0]["t"][1][1] is None


def test_variables_training_and_replaced_buffers():
    x = tf.placeholder(tf.float32, [None], name="x")
    w = tf.Variable(np.float32(1.0), name="w")
    loss = tf.reduce_mean(tf.square(w * x - 2.0 * x))
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    xs = np.arange(1, 4, dtype=np.float32)
    res = {}
    for name in ("interpreter", "numba"):
        with tf.Session(backend=name) as sess:
            f = sess.make_callable([train, loss, w], [x])
            with pytest.raises(errors.FailedPreconditionError):
                f(xs)
            with pytest.raises(errors.FailedPreconditionError):
                sess.run(train, {x: xs})
            sess.run(tf.global_variables_initializer())
            seen = [sess.run([train, loss], {x: xs})[1] for _ in range(4)]
            seen += [f(xs)[1] for _ in range(3)]
            w.load(1.0, sess)  # a new buffer: the warm path must see it
            seen += [sess.run([train, loss], {x: xs})[1] for _ in range(3)]
            sess.run(tf.global_variables_initializer())
            seen += [f(xs)[1] for _ in range(3)]
            wv = f(xs[:2])[2]
            assert type(wv) is np.float32
            res[name] = seen + [wv]
    assert_same_result(res["numba"], res["interpreter"], 1e-6, 1e-6, "training")


def test_fetched_variables_never_alias_and_sessions_keep_their_own_values():
    v = tf.Variable(np.zeros(3, np.float32), name="v")
    x = tf.placeholder(tf.float32, [3], name="x")
    step = tf.assign_add(v, x)
    s1, s2 = tf.Session(), tf.Session()
    for s in (s1, s2):
        s.run(v.initializer)
    ones = np.ones(3, np.float32)
    for _ in range(3):
        got = s1.run([step, v], {x: ones})[1]
    got[:] = 100.0
    np.testing.assert_array_equal(s1.run(v), [3, 3, 3])
    np.testing.assert_array_equal(s2.run(v), [0, 0, 0])
    f = s2.make_callable(v)
    a = warm(f)
    a[:] = 7.0
    np.testing.assert_array_equal(f(), [0, 0, 0])


def test_closed_sessions_raise_on_the_warm_path():
    a, b, res = seeds()
    sess = tf.Session()
    f = sess.make_callable(res, [a, b])
    warm(f, 1.0, 2.0)
    warm(sess.run, res, {a: 1.0, b: 2.0})
    sess.close()
    with pytest.raises(RuntimeError, match="closed Session"):
        f(1.0, 2.0)
    with pytest.raises(RuntimeError, match="closed Session"):
        sess.run(res, {a: 1.0, b: 2.0})


def test_a_kernel_check_failing_on_the_warm_path_gives_the_tf1_error():
    x = tf.placeholder(tf.float32, [None], name="x")
    y = tf.placeholder(tf.float32, [None], name="y")
    z = x + y
    with tf.Session() as sess:
        f = sess.make_callable(z, [x, y])
        warm(f, np.ones(3, np.float32), np.ones(3, np.float32))
        with pytest.raises(errors.InvalidArgumentError):
            f(np.ones(3, np.float32), np.ones(4, np.float32))
        np.testing.assert_array_equal(f(np.ones(2, np.float32), np.ones(2, np.float32)), [2, 2])


def test_the_generated_runner_does_not_keep_its_session_alive():
    a, b, res = seeds()
    sess = tf.Session()
    warm(sess.run, res, {a: 1.0, b: 2.0})
    ref = weakref.ref(sess)
    gc.collect()
    gc.disable()
    try:
        del sess
        assert ref() is None
    finally:
        gc.enable()


def test_rank0_results_of_every_dtype_are_numpy_scalars_of_that_dtype():
    f = tf.placeholder(tf.float32, [], name="f")
    d = tf.placeholder(tf.float64, [], name="d")
    i = tf.placeholder(tf.int32, [], name="i")
    q = tf.placeholder(tf.int64, [], name="q")
    fetches = [f * 2.0, d / 3.0, i * 3, q - 5, f > 1.0, tf.reduce_sum(d * np.ones(2)),
               f * np.float32(np.inf), -f * 0.0]
    feed = {f: 1.5, d: 2.0, i: 7, q: 2 ** 40}
    out = {}
    for name in ("interpreter", "numba"):
        with tf.Session(backend=name) as sess:
            out[name] = warm(sess.run, fetches, feed)
            fast = [s.fast for s in sess._specs.values()]
        assert (fast[0] is None) == (name == "interpreter")
    assert_same_result(out["numba"], out["interpreter"], 0, 0, "scalars")
    got = out["numba"]
    assert [type(v) for v in got] == [np.float32, np.float64, np.int32, np.int64, np.bool_,
                                      np.float64, np.float32, np.float32]
    assert got[3] == 2 ** 40 - 5 and np.isinf(got[6]) and np.signbit(got[7])


def test_new_sizes_of_none_dims_share_the_entry_and_size_one_gets_its_own():
    x = tf.placeholder(tf.float32, [None, 2], name="x")
    y = tf.placeholder(tf.float32, [None, None], name="y")
    z = x * y
    with tf.Session() as sess:
        f = sess.make_callable(z, [x, y])
        for n in (3, 3, 5, 7):
            a, b = np.full((n, 2), 2, np.float32), np.full((n, 2), 3, np.float32)
            np.testing.assert_array_equal(f(a, b), a * b)
        entries = f.spec.executable._fast.entries
        assert len(entries) == 1
        for n, m in ((1, 2), (1, 2), (4, 1), (4, 1)):
            a, b = np.full((n, 2), 2, np.float32), np.full((n, m), 3, np.float32)
            np.testing.assert_array_equal(f(a, b), a * b)
        assert len(entries) == 3


def test_runs_with_the_same_fetches_and_other_feeds_take_their_own_signature():
    a, b, res = seeds()
    c = tf.placeholder_with_default(np.float32(4.0), [], name="c")
    out = res * c
    with tf.Session() as sess:
        for _ in range(3):
            assert sess.run(out, {a: 1.0, b: 1.0}) == np.float32(2.0)
            assert sess.run(out, {"a:0": 3.0, b: 1.0}) == np.float32(3.0)
            assert sess.run(out, {a: 1.0, b: 1.0, c: 1.0}) == np.float32(0.5)
            assert sess.run(out, {a: 1.0, c: 2.0, b: 1.0}) == np.float32(1.0)
            with pytest.raises(errors.InvalidArgumentError):
                sess.run(out, {a: 1.0, c: 2.0})
            assert sess.run(out, {res: 2.0}) == np.float32(8.0)
