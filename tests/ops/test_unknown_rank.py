"""Ops fed through placeholders of unknown rank (`shape=None`): the rank is known only when
the graph runs, so the run-time rules (TF1's `Select` rows, reduction axes in range, ...) must
be applied then, on every backend and compile mode. Hand-computed values, then TF parity
(skipped without TensorFlow)."""
from __future__ import annotations

import numpy as np
import pytest

import jitflow as tf
from jitflow.core import errors
from tests.helpers import check_backends_agree, compile_mode

C2 = np.array([[True, False, True], [False, True, True]])
X = np.arange(6, dtype=np.float32).reshape(2, 3)
X3 = np.arange(9, dtype=np.float32).reshape(3, 3)


def _unknown(dtype=tf.float32):
    return tf.placeholder(dtype, None)


# -- tf.where(cond): coordinates ----------------------------------------------------------------
def test_where_coordinates_of_unknown_rank_condition(backend):
    c = _unknown(tf.bool)
    w = tf.where(c)
    assert w.dtype == tf.int64 and w.shape.as_list() == [None, None]
    with tf.Session() as sess:
        got2 = sess.run(w, {c: C2})
        got1 = sess.run(w, {c: np.array([False, True, False, True])})
        got0 = sess.run(w, {c: np.zeros((2, 0), bool)})
    np.testing.assert_array_equal(got2, [[0, 0], [0, 2], [1, 1], [1, 2]])
    assert got2.dtype == np.int64
    np.testing.assert_array_equal(got1, [[1], [3]])
    assert got0.shape == (0, 2)


def test_where_coordinates_of_a_fed_scalar_is_an_error(backend):
    c = _unknown(tf.bool)
    with tf.Session() as sess:
        with pytest.raises(errors.InvalidArgumentError, match="input dimensions: 0"):
            sess.run(tf.where(c), {c: np.array(True)})


def test_where_coordinates_of_unknown_rank_numbers(backend):
    x = _unknown()
    with tf.Session() as sess:
        got = sess.run(tf.where(x), {x: np.array([[0, 1.5], [-2, 0]], np.float32)})
    np.testing.assert_array_equal(got, [[0, 1], [1, 0]])


# -- tf.where(cond, x, y): TF1 Select -----------------------------------------------------------
@pytest.mark.parametrize("known_xy", [False, True])
def test_select_condition_of_unknown_rank(backend, known_xy):
    c = _unknown(tf.bool)
    x = tf.placeholder(tf.float32, [None, 3] if known_xy else None)
    y = tf.placeholder(tf.float32, [None, 3] if known_xy else None)
    s = tf.where(c, x, y)
    with tf.Session() as sess:
        same = sess.run(s, {c: C2, x: X, y: -X})
        rows = sess.run(s, {c: np.array([True, False]), x: X, y: -X})
        scal = sess.run(s, {c: np.array(False), x: X, y: -X})
    np.testing.assert_array_equal(same, [[0, -1, 2], [-3, 4, 5]])
    np.testing.assert_array_equal(rows, [[0, 1, 2], [-3, -4, -5]])   # whole rows
    np.testing.assert_array_equal(scal, -X)
    assert same.dtype == np.float32


def test_select_rows_of_a_square_matrix_not_columns(backend):
    # a condition vector picks rows even where broadcasting it would pick columns
    c, x = _unknown(tf.bool), _unknown()
    with tf.Session() as sess:
        got = sess.run(tf.where(c, x, -x), {c: np.array([True, False, True]), x: X3})
        vec = sess.run(tf.where(c, x, -x), {c: np.array([True, False, True]), x: X3[0]})
    np.testing.assert_array_equal(got, [[0, 1, 2], [-3, -4, -5], [6, 7, 8]])
    np.testing.assert_array_equal(vec, [0, -1, 2])


def test_select_vector_condition_and_unknown_rank_values(backend):
    c, x = tf.placeholder(tf.bool, [None]), _unknown()
    with tf.Session() as sess:
        got = sess.run(tf.where(c, x, -x), {c: np.array([False, True, True]), x: X3})
    np.testing.assert_array_equal(got, [[0, -1, -2], [3, 4, 5], [6, 7, 8]])


@pytest.mark.parametrize("cond,xv,yv,match", [
    (C2, X[0], -X[0], "'then' and 'cond' must have the same size"),     # no broadcasting
    (np.array([True, False, True]), X, -X, "must match size of 'cond'"),
    (C2[0], X, -X[:, :1], "'then' and 'else' must have the same size"),
    (C2[:, :1], X, -X, "'then' and 'cond' must have the same size"),
])
def test_select_shape_errors_at_run_time(backend, cond, xv, yv, match):
    c, x, y = _unknown(tf.bool), _unknown(), _unknown()
    with tf.Session() as sess:
        with pytest.raises(errors.InvalidArgumentError, match=match):
            sess.run(tf.where(c, x, y), {c: cond, x: xv, y: yv})


def test_select_gradient_with_row_condition_of_unknown_rank(backend):
    c, x = _unknown(tf.bool), _unknown()
    loss = tf.reduce_sum(tf.where(c, x * 2.0, x * 3.0))
    g, = tf.gradients(loss, [x])
    with tf.Session() as sess:
        got = sess.run(g, {c: np.array([True, False, False]), x: X3})
    np.testing.assert_array_equal(got, [[2, 2, 2], [3, 3, 3], [3, 3, 3]])


def test_where_v2_broadcasts_unknown_ranks(backend):
    c, x, y = _unknown(tf.bool), _unknown(), _unknown()
    s = tf.where_v2(c, x, y)
    with tf.Session() as sess:
        cols = sess.run(s, {c: np.array([True, False, True]), x: X, y: -X})
        outer = sess.run(s, {c: np.array([[True], [False]]), x: X[0], y: np.float32(7)})
        with pytest.raises(errors.InvalidArgumentError):
            sess.run(s, {c: np.array([True, False]), x: X, y: -X})
    np.testing.assert_array_equal(cols, [[0, -1, 2], [3, -4, 5]])
    np.testing.assert_array_equal(outer, [[0, 1, 2], [7, 7, 7]])


@pytest.mark.parametrize("mode", ["auto", "numba", "quick"])
def test_where_unknown_rank_agrees_in_every_compile_mode(mode):
    c, x = _unknown(tf.bool), _unknown()
    sel, sel2, coords = tf.where(c, x, x * 2.0), tf.where_v2(c, x, 1.0), tf.where(c)
    with compile_mode(mode):
        same = check_backends_agree([sel, sel2, coords], {c: C2, x: X})
        rows = check_backends_agree([sel, coords], {c: C2[:, 0], x: X})
        scal = check_backends_agree([sel, sel2], {c: np.array(False), x: X})
    np.testing.assert_array_equal(same[0], [[0, 2, 2], [6, 4, 5]])
    np.testing.assert_array_equal(same[1], [[0, 1, 2], [1, 4, 5]])
    np.testing.assert_array_equal(same[2], [[0, 0], [0, 2], [1, 1], [1, 2]])
    np.testing.assert_array_equal(rows[0], [[0, 1, 2], [6, 8, 10]])
    np.testing.assert_array_equal(rows[1], [[0]])
    np.testing.assert_array_equal(scal[0], X * 2)
    np.testing.assert_array_equal(scal[1], np.ones((2, 3)))


# -- other ops with an input of unknown rank ---------------------------------------------------
def test_reduction_axis_out_of_range_is_an_error_when_run(backend):
    x = _unknown()
    s = tf.reduce_sum(x, axis=2)
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(s, {x: np.ones((2, 3, 4), np.float32)}),
                                      np.full((2, 3), 4.0))
        with pytest.raises(errors.InvalidArgumentError):
            sess.run(s, {x: X})


def test_cumsum_negative_axis_of_unknown_rank(backend):
    x = _unknown()
    with tf.Session() as sess:
        got = sess.run(tf.cumsum(x, axis=-1), {x: X})
        rev = sess.run(tf.cumsum(x, axis=-1, exclusive=True, reverse=True),
                       {x: np.array([1, 2, 3], np.float32)})
    np.testing.assert_array_equal(got, [[0, 1, 3], [3, 7, 12]])
    np.testing.assert_array_equal(rev, [5, 3, 0])


def test_sort_and_argsort_last_axis_of_unknown_rank(backend):
    x = _unknown()
    v = np.array([[3, 1, 2], [0, -1, 5]], np.float32)
    with tf.Session() as sess:
        got = sess.run(tf.sort(x), {x: v})
        desc = sess.run(tf.sort(x, direction="DESCENDING"), {x: v[0]})
        idx = sess.run(tf.argsort(x), {x: v})
    np.testing.assert_array_equal(got, [[1, 2, 3], [-1, 0, 5]])
    np.testing.assert_array_equal(desc, [3, 2, 1])
    np.testing.assert_array_equal(idx, [[1, 2, 0], [1, 0, 2]])
    with pytest.raises(ValueError, match="known rank"):
        tf.sort(x, axis=0)


def test_top_k_returns_named_values_and_indices():
    vals, idx = tf.nn.top_k(tf.constant([1.0, 5.0, 3.0]), 2)
    pair = tf.nn.top_k(tf.constant([1.0, 5.0, 3.0]), 2)
    assert pair.values is not None and pair.indices.dtype == tf.int32
    with tf.Session() as sess:
        got = sess.run(pair)
    np.testing.assert_array_equal(got[0], [5, 3])
    np.testing.assert_array_equal(got[1], [1, 2])
    assert vals.dtype == tf.float32 and idx.dtype == tf.int32


# -- TF parity --------------------------------------------------------------------------------
A3 = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 7
V = np.array([3, -1, 2], np.float32)

PARITY = {
    "where1": (lambda t, p: t.where(p > 0), [A3, V, X]),
    "select_rows": (lambda t, p: t.where(t.reduce_sum(p, axis=-1) > 3, p, -p), [A3, X]),
    "select_scalar": (lambda t, p: t.where(t.reduce_sum(p) > 0, p, p * 2), [A3, V]),
    "where_v2": (lambda t, p: t.where_v2(p > 0, p, t.constant(0.0)), [A3, V]),
    "sum_axis2": (lambda t, p: t.reduce_sum(p, axis=2), [A3, X]),
    "mean_axes": (lambda t, p: t.reduce_mean(p, axis=[0, -1]), [A3, X]),
    "concat": (lambda t, p: t.concat([p, p * 2], -1), [A3, V]),
    "stack": (lambda t, p: t.stack([p, p], axis=-1), [X, V]),
    "reshape": (lambda t, p: t.reshape(p, [-1, 2]), [A3, X]),
    "transpose": (lambda t, p: t.transpose(p), [A3, V, np.float32(1)]),
    "squeeze": (lambda t, p: t.squeeze(p), [A3[:1], X[:, :1]]),
    "expand_dims": (lambda t, p: t.expand_dims(p, -1), [X, np.float32(1)]),
    "gather": (lambda t, p: t.gather(p, [2, 0], axis=1), [A3, X]),
    "tile": (lambda t, p: t.tile(p, [2, 1]), [X, A3]),
    "pad": (lambda t, p: t.pad(p, [[1, 0], [0, 2]]), [X, A3]),
    "slice": (lambda t, p: t.slice(p, [0, 1], [-1, 2]), [X, A3]),
    "boolean_mask": (lambda t, p: t.boolean_mask(p, p > 0), [A3, V]),
    "argmax": (lambda t, p: t.argmax(p, -1), [A3, V]),
    "one_hot": (lambda t, p: t.one_hot(t.cast(p, t.int32), 3), [V, X]),
    "cast": (lambda t, p: t.cast(p, t.int32), [A3, np.float32(2.7)]),
    "cumsum": (lambda t, p: t.cumsum(p, axis=-1), [A3, V]),
    "sort": (lambda t, p: t.sort(p), [X, V]),
    "top_k": (lambda t, p: t.nn.top_k(p, 2).values, [A3, V]),
}


def _run(t, build, feed, **session_kw):
    """("ok", value) or ("error", exception class name) of `build` on a placeholder of
    unknown rank fed `feed`, in library `t` (jitflow or TF)."""
    g = t.Graph()
    with g.as_default():
        p = t.placeholder(t.float32, None)
        try:
            out = build(t, p)
            with t.Session(**session_kw) as sess:
                return "ok", sess.run(out, {p: feed})
        except Exception as e:  # noqa: BLE001 - the class is what is compared
            return "error", type(e).__name__


@pytest.mark.parametrize("name", sorted(PARITY))
def test_unknown_rank_matches_tensorflow(name):
    tf_ref = pytest.importorskip("tensorflow.compat.v1")
    build, feeds = PARITY[name]
    for feed in feeds:
        want = _run(tf_ref, build, feed)
        for be in ("interpreter", "numba"):
            got = _run(tf, build, feed, backend=be)
            assert got[0] == want[0], (name, feed.shape, be, got, want)
            if want[0] == "error":
                assert got[1] == want[1], (name, feed.shape, be)
                continue
            assert got[1].dtype == want[1].dtype and got[1].shape == want[1].shape
            np.testing.assert_allclose(got[1], want[1], rtol=1e-6)


def test_select_static_scalar_and_row_conditions_build(backend):
    """A scalar condition with x of rank 3 is valid TF1 (found by the widened fuzzer); a
    condition vector must match x's first dimension; other shapes must equal x's."""
    x = tf.placeholder(tf.float32, [2, None, 3])
    s = tf.where(tf.constant(False), x, -x)
    assert s.shape.as_list() == [2, None, 3]
    g, = tf.gradients(tf.reduce_sum(s * 2.0), [x])
    rows = tf.where(tf.constant([True, False]), x, -x)
    with pytest.raises(ValueError, match="Dimensions must be equal"):
        tf.where(tf.placeholder(tf.bool, [5]), x, -x)
    with pytest.raises(ValueError, match="equal rank"):
        tf.where(tf.placeholder(tf.bool, [2, 3]), x, -x)
    xv = np.arange(6, dtype=np.float32).reshape(2, 1, 3)
    with tf.Session() as sess:
        got_s, got_g, got_r = sess.run([s, g, rows], {x: xv})
    np.testing.assert_array_equal(got_s, -xv)
    np.testing.assert_array_equal(got_g, np.full((2, 1, 3), -2.0))
    np.testing.assert_array_equal(got_r, [[[0, 1, 2]], [[-3, -4, -5]]])
