"""Session: default session/graph handling, fetch structures, feeds, make_callable, state."""
from __future__ import annotations

import collections
import threading
import warnings

import numpy as np
import pytest

import jitflow as tf

Pair = collections.namedtuple("Pair", ["first", "second"])


# -- default session and graph ---------------------------------------------------------------------
def test_with_session_makes_session_and_graph_default_and_closes(backend):
    g = tf.Graph()
    with g.as_default():
        c = tf.constant(2.0)
    assert tf.get_default_session() is None
    with tf.Session(graph=g) as sess:
        assert tf.get_default_session() is sess
        assert tf.get_default_graph() is g
        assert sess.graph is g
        assert c.eval() == 2.0
    assert tf.get_default_session() is None and tf.get_default_graph() is not g
    with pytest.raises(RuntimeError, match="closed Session"):
        sess.run(c)


def test_as_default_does_not_close(backend):
    c = tf.constant(1)
    sess = tf.Session()
    with sess.as_default():
        assert tf.get_default_session() is sess
        assert c.eval() == 1
    assert tf.get_default_session() is None
    assert sess.run(c) == 1
    sess.close()
    with pytest.raises(RuntimeError):
        sess.run(c)
    with pytest.raises(RuntimeError):
        sess.make_callable(c)


def test_nested_default_sessions(backend):
    c = tf.constant(1)
    s1, s2 = tf.Session(), tf.Session()
    with s1.as_default():
        with s2.as_default():
            assert tf.get_default_session() is s2
            assert c.eval() == 1
        assert tf.get_default_session() is s1
    s1.close()
    s2.close()


def test_default_session_is_per_thread(backend):
    seen = {}
    with tf.Session() as sess:
        t = threading.Thread(target=lambda: seen.setdefault("s", tf.get_default_session()))
        t.start()
        t.join()
        assert tf.get_default_session() is sess
    assert seen["s"] is None


def test_interactive_session(backend):
    c = tf.constant([1, 2])
    sess = tf.InteractiveSession()
    try:
        assert tf.get_default_session() is sess
        np.testing.assert_array_equal(c.eval(), [1, 2])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            other = tf.InteractiveSession()
        assert any("already active" in str(w.message) for w in caught)
        other.close()
        assert tf.get_default_session() is sess
    finally:
        sess.close()
    assert tf.get_default_session() is None


# -- fetches ---------------------------------------------------------------------------------------
def test_fetch_structures(backend):
    a = tf.constant(1.0, name="a")
    b = tf.constant([2, 3], name="b")
    op = tf.no_op(name="noop")
    fetches = {"list": [a, (b, op)], "pair": Pair(a, "b:0"),
               "ordered": collections.OrderedDict([("z", a), ("y", [b])]), "op": "noop",
               "nested": [[[a]]], "empty": []}
    with tf.Session() as sess:
        out = sess.run(fetches)
    assert set(out) == set(fetches)
    assert out["list"][0] == 1.0 and isinstance(out["list"], list)
    assert isinstance(out["list"][1], tuple) and out["list"][1][1] is None
    np.testing.assert_array_equal(out["list"][1][0], [2, 3])
    assert isinstance(out["pair"], Pair) and out["pair"].first == 1.0
    np.testing.assert_array_equal(out["pair"].second, [2, 3])
    assert isinstance(out["ordered"], collections.OrderedDict)
    assert list(out["ordered"]) == ["z", "y"]
    assert out["op"] is None and out["nested"] == [[[1.0]]] and out["empty"] == []


def test_fetch_single_elements_and_names(backend):
    c = tf.constant([[1, 2]], name="c")
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run("c:0"), [[1, 2]])
        assert sess.run("c") is None
        assert sess.run(c.op) is None
        assert sess.run([]) == []


def test_rank0_results_are_numpy_scalars_and_dtypes_kept(backend):
    f32 = tf.constant(1.5)
    i64 = tf.constant(3, dtype=tf.int64)
    b = tf.constant(True)
    arr = tf.constant([1.0], dtype=tf.float64)
    with tf.Session() as sess:
        vf, vi, vb, va = sess.run([f32, i64, b, arr])
    assert type(vf) is np.float32 and type(vi) is np.int64 and type(vb) is np.bool_
    assert isinstance(va, np.ndarray) and va.dtype == np.float64


def test_float16_scalar_result(backend):
    f16 = tf.constant(1.5, dtype=tf.float16)
    with tf.Session() as sess:
        v = sess.run(f16)
    assert type(v) is np.float16 and v == 1.5


def test_duplicate_fetches_are_computed_once(backend):
    v = tf.Variable(0.0)
    inc = v.assign_add(1.0)
    with tf.Session() as sess:
        sess.run(v.initializer)
        a, b, c = sess.run([inc, inc, {"again": inc}])
        assert a == b == c["again"] == 1.0
        assert sess.run(v) == 1.0


# -- feeds -----------------------------------------------------------------------------------------
def test_feed_converts_to_the_placeholder_dtype(backend):
    x = tf.placeholder(tf.float32, [None])
    i = tf.placeholder(tf.int32, [])
    with tf.Session() as sess:
        out = sess.run(x * 2.0, {x: [1, 2]})
        vi = sess.run(i + 1, {i: np.int64(4)})
    assert out.dtype == np.float32 and vi == 5 and type(vi) is np.int32


def test_feed_by_name_string(backend):
    x = tf.placeholder(tf.float32, [2], name="x")
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(x + 1.0, {"x:0": [1.0, 2.0]}), [2.0, 3.0])


def test_feeding_any_tensor_skips_its_producers(backend):
    v = tf.Variable(0.0)
    inc = v.assign_add(1.0)
    doubled = inc * 2.0
    with tf.Session() as sess:
        sess.run(v.initializer)
        assert sess.run(doubled, {inc: 10.0}) == 20.0
        assert sess.run(v) == 0.0  # the assign_add never ran
        a, fed = sess.run([doubled, inc], {inc: 3.0})
        assert (a, fed) == (6.0, 3.0)
        assert sess.run(v) == 0.0


def test_fed_tensor_is_returned_as_fed(backend):
    c = tf.constant([1.0, 2.0])
    y = c + 1.0
    with tf.Session() as sess:
        vc, vy = sess.run([c, y], {c: [5.0, 6.0]})
    np.testing.assert_array_equal(vc, [5.0, 6.0])
    np.testing.assert_array_equal(vy, [6.0, 7.0])


def test_feed_shape_and_value_checks(backend):
    x = tf.placeholder(tf.float32, [None, 2], name="x")
    with tf.Session() as sess:
        with pytest.raises(ValueError, match=r"Cannot feed value of shape \(3,\) for Tensor "
                                             r"'x:0', which has shape '\(\?, 2\)'"):
            sess.run(x, {x: [1.0, 2.0, 3.0]})
        with pytest.raises(ValueError):
            sess.run(x, {x: [["a", "b"]]})
        with pytest.raises(TypeError):
            sess.run(x, {x: tf.constant([[1.0, 2.0]])})
        np.testing.assert_array_equal(sess.run(x, {x: np.zeros((0, 2))}).shape, (0, 2))


def test_unfed_placeholder_that_is_not_needed_is_fine(backend):
    x = tf.placeholder(tf.float32)
    c = tf.constant(1.0)
    _ = x + c
    with tf.Session() as sess:
        assert sess.run(c) == 1.0


# -- make_callable ---------------------------------------------------------------------------------
def test_make_callable(backend):
    x = tf.placeholder(tf.float32, [None])
    y = tf.placeholder(tf.float32, [])
    v = tf.Variable(0.0)
    step = v.assign_add(y)
    with tf.Session() as sess:
        sess.run(v.initializer)
        f = sess.make_callable({"sum": x * y, "ops": [step.op]}, [x, y])
        out = f([1.0, 2.0], 3.0)
        np.testing.assert_array_equal(out["sum"], [3.0, 6.0])
        assert out["ops"] == [None]
        f([1.0], 1.0)
        assert sess.run(v) == 4.0
        g = sess.make_callable(x * 2.0, [x])
        np.testing.assert_array_equal(g(np.arange(3.0)), [0.0, 2.0, 4.0])
        with pytest.raises(TypeError):
            g()
        no_feed = sess.make_callable(v)
        assert no_feed() == 4.0


# -- state and evolving graphs ---------------------------------------------------------------------
def test_ops_added_after_the_session_started(backend):
    x = tf.placeholder(tf.float32, [None])
    w = tf.Variable(0.0)
    loss = tf.reduce_mean(tf.square(x - w))
    train = w.assign_sub(0.5 * tf.gradients(loss, [w])[0])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(50):
            sess.run(train, {x: [1.0, 3.0]})
        accuracy = tf.abs(w - 2.0)  # a new op after training
        assert sess.run(accuracy) < 1e-4
        later = tf.Variable(5.0)
        sess.run(later.initializer)
        assert sess.run(later + w) == pytest.approx(7.0, abs=1e-4)


def test_two_sessions_on_one_graph_have_their_own_variables(backend):
    v = tf.Variable(1.0)
    with tf.Session() as s1, tf.Session() as s2:
        s1.run(v.initializer)
        with pytest.raises(tf.errors.FailedPreconditionError):
            s2.run(v)
        s2.run(v.initializer)
        s1.run(v.assign(7.0))
        assert (s1.run(v), s2.run(v)) == (7.0, 1.0)


def test_session_on_an_explicit_graph(backend):
    g = tf.Graph()
    with g.as_default():
        a = tf.constant(3)
    b = tf.constant(4)
    with tf.Session(graph=g) as sess:
        assert sess.run(a) == 3
        with pytest.raises(ValueError):   # TF1: a fetch of another graph is a ValueError,
            sess.run(b)
        with pytest.raises(TypeError):    # a feed key of another graph a TypeError
            sess.run(a, {b: 1})


def test_repeated_runs_reuse_and_stay_correct(backend):
    x = tf.placeholder(tf.float32, [None])
    y = tf.reduce_sum(x * x)
    with tf.Session() as sess:
        for n in (1, 3, 5):
            v = np.arange(n, dtype=np.float32)
            assert sess.run(y, {x: v}) == pytest.approx(float((v * v).sum()))


def test_finalized_graph_still_runs_but_accepts_no_new_ops(backend):
    c = tf.constant(1.0)
    g = tf.get_default_graph()
    with tf.Session() as sess:
        g.finalize()
        assert sess.run(c) == 1.0
        with pytest.raises(RuntimeError):
            tf.constant(2.0)


def test_control_dependency_on_a_fed_placeholder_is_satisfied_by_the_feed(backend):
    p = tf.placeholder(tf.float32, [], name="p")
    x = tf.placeholder(tf.float32, [], name="x")
    with tf.control_dependencies([p.op]):
        y = x * 2.0
    with tf.Session() as sess:
        assert sess.run(y, {x: 3.0, p: 1.0}) == 6.0
        with pytest.raises(tf.errors.InvalidArgumentError, match="'p'"):
            sess.run(y, {x: 3.0})


def test_summary_protos_are_top_level_names():
    assert tf.Summary is tf.summary.Summary
    s = tf.Summary(value=[tf.Summary.Value(tag="loss", simple_value=0.5)])
    assert s.value[0].tag == "loss"


def test_a_nested_tuple_of_tensors_is_a_feed_key(backend):
    """As TF1: feeding a state tuple (an LSTMStateTuple, a tuple of them) with a value of the
    same structure feeds each tensor its part."""
    c, h = tf.placeholder(tf.float32, [2]), tf.placeholder(tf.float32, [2])
    state = (tf.nn.rnn_cell.LSTMStateTuple(c, h), tf.placeholder(tf.float32, []))
    total = tf.reduce_sum(c) * 10.0 + tf.reduce_sum(h) + state[1]
    value = (tf.nn.rnn_cell.LSTMStateTuple(np.ones(2), np.full(2, 2.0)), 0.5)
    with tf.Session() as sess:
        assert sess.run(total, {state: value}) == 24.5
        assert sess.run(total, {state: value}) == 24.5
        assert sess.run(total, {state[0]: value[0], state[1]: 1.5}) == 25.5
        with pytest.raises(ValueError, match="same structure"):
            sess.run(total, {state: (1.0, 2.0)})
