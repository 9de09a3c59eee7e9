"""Reductions: normalized attrs, legacy arguments, shapes with unknown dims, integer means,
argmax/argmin, logsumexp stability, and gradients (ties in max/min share the gradient)."""
from __future__ import annotations

import numpy as np
import pytest

import jitflow as tf
from test_math import check_gradient, run, symbolic_gradients


def test_attrs_are_normalized():
    x = tf.placeholder(tf.float32, [2, 3, 4])
    s = tf.reduce_sum(x, axis=[-1, 0, 2])
    assert s.op.type == "Sum"
    assert s.op.get_attr("axis") == (0, 2) and s.op.get_attr("keepdims") is False
    assert tf.reduce_mean(x).op.get_attr("axis") == (0, 1, 2)
    assert tf.reduce_max(x, 1, keepdims=True).op.get_attr("keepdims") is True
    assert tf.reduce_min(x, tf.constant([2, 1])).op.get_attr("axis") == (1, 2)
    assert tf.reduce_sum(x, np.int64(1)).op.get_attr("axis") == (1,)


def test_tf1_op_types():
    x = tf.placeholder(tf.float32, [2, 3])
    b = tf.placeholder(tf.bool, [2, 3])
    types = [tf.reduce_sum(x), tf.reduce_mean(x), tf.reduce_max(x), tf.reduce_min(x),
             tf.reduce_prod(x), tf.reduce_any(b), tf.reduce_all(b), tf.argmax(x, 1),
             tf.argmin(x, 1)]
    assert [t.op.type for t in types] == ["Sum", "Mean", "Max", "Min", "Prod", "Any", "All",
                                          "ArgMax", "ArgMin"]
    assert tf.math.reduce_sum is tf.reduce_sum and tf.math.argmax is tf.argmax
    assert tf.reduce_sum(x, name="total").op.name == "total"


def test_legacy_arguments(backend):
    x = tf.placeholder(tf.float32, [2, 3])
    v = np.arange(6, dtype=np.float32).reshape(2, 3)
    a = tf.reduce_sum(x, reduction_indices=[1], keep_dims=True)
    assert a.shape.as_list() == [2, 1]
    b = tf.reduce_mean(x, reduction_indices=0)
    c = tf.argmax(x, dimension=1)
    ga, gb, gc = run([a, b, c], {x: v}, backend)
    np.testing.assert_array_equal(ga, [[3], [12]])
    np.testing.assert_array_equal(gb, [1.5, 2.5, 3.5])
    assert gc.dtype == np.int64 and gc.tolist() == [2, 2]
    with pytest.raises(ValueError):
        tf.reduce_sum(x, axis=0, reduction_indices=0)
    with pytest.raises(ValueError):
        tf.reduce_sum(x, keepdims=True, keep_dims=True)
    with pytest.raises(ValueError):
        tf.argmax(x, axis=0, dimension=0)


def test_shapes_with_unknown_dims():
    x = tf.placeholder(tf.float32, [None, 3, None])
    assert tf.reduce_sum(x, 1).shape.as_list() == [None, None]
    assert tf.reduce_sum(x, [0, 2], keepdims=True).shape.as_list() == [1, 3, 1]
    assert tf.reduce_max(x).shape.as_list() == []
    assert tf.argmax(x, 2).shape.as_list() == [None, 3]
    u = tf.placeholder(tf.float32, None)
    assert tf.reduce_sum(u, 1).shape.ndims is None
    assert tf.reduce_sum(u).op.get_attr("axis") is None
    with pytest.raises(ValueError, match="Invalid reduction dimension"):
        tf.reduce_sum(x, 3)


def test_dtype_rules():
    with pytest.raises(TypeError):
        tf.reduce_sum(tf.placeholder(tf.bool, [2]))
    with pytest.raises(TypeError):
        tf.reduce_any(tf.placeholder(tf.float32, [2]))
    with pytest.raises(TypeError):
        tf.argmax(tf.placeholder(tf.float32, [2]), output_type=tf.float32)
    assert tf.argmin(tf.placeholder(tf.float32, [2]), output_type=tf.int32).dtype == tf.int32


def test_integer_mean_stays_integer_and_truncates(backend):
    x = tf.placeholder(tf.int32, [2, 3])
    m = tf.reduce_mean(x, axis=1)
    assert m.dtype == tf.int32
    got = run(m, {x: [[1, 2, 2], [-1, -2, -2]]}, backend)
    assert got.dtype == np.int32 and got.tolist() == [1, -1]  # 5/3 and -5/3 truncate


@pytest.mark.parametrize("shape,want", [((2, 0), []), ((0, 0), []), ((0, 3), [0, 0, 0])])
def test_integer_mean_of_no_elements(backend, shape, want):
    """No output element: an empty result (nothing is divided); outputs over no elements:
    0 on every backend (TF's own kernel divides by zero there)."""
    x = tf.placeholder(tf.int32, [None, None])
    got = run(tf.reduce_mean(x, axis=0), {x: np.zeros(shape, np.int32)}, backend)
    assert got.dtype == np.int32 and got.tolist() == want


def test_unknown_rank_input_runs(backend):
    u = tf.placeholder(tf.float32, None)
    v = np.arange(6, dtype=np.float32).reshape(2, 3)
    s, m = run([tf.reduce_sum(u), tf.reduce_mean(u, 0)], {u: v}, backend)
    assert s == 15.0
    np.testing.assert_array_equal(m, [1.5, 2.5, 3.5])


def test_any_all_count_nonzero(backend):
    b = tf.placeholder(tf.bool, [2, 3])
    x = tf.placeholder(tf.float32, [2, 3])
    bv = np.array([[True, False, True], [False, False, False]])
    xv = np.array([[0, 1.5, 0], [2, 3, 0]], np.float32)
    any_, all_, nz, nz0 = run([tf.reduce_any(b, 1), tf.reduce_all(b, 0),
                               tf.count_nonzero(x), tf.count_nonzero(x, 0, dtype=tf.int32)],
                              {b: bv, x: xv}, backend)
    assert any_.tolist() == [True, False] and all_.tolist() == [False, False, False]
    assert nz == 3 and nz.dtype == np.int64
    assert nz0.tolist() == [1, 2, 0] and nz0.dtype == np.int32


def test_argmax_first_of_ties_and_axis_default(backend):
    x = tf.placeholder(tf.float32, [2, 3])
    v = np.array([[1, 5, 5], [7, 7, 0]], np.float32)
    a1, a0, n1 = run([tf.argmax(x, 1), tf.argmax(x), tf.argmin(x, -1)], {x: v}, backend)
    assert a1.tolist() == [1, 0]
    assert a0.tolist() == [1, 1, 0]
    assert n1.tolist() == [0, 2]


def test_logsumexp_is_stable_for_large_inputs(backend):
    x = tf.placeholder(tf.float32, [2, 3])
    v = np.array([[1000, 1000, 999], [-1000, -1001, -1e30]], np.float32)
    out, keep = run([tf.reduce_logsumexp(x, 1), tf.reduce_logsumexp(x, 1, keepdims=True)],
                    {x: v}, backend)
    want = [1000 + np.log(2 + np.exp(-1.0)), -1000 + np.log(1 + np.exp(-1.0))]
    np.testing.assert_allclose(out, want, rtol=1e-6)
    assert keep.shape == (2, 1)
    inf = tf.placeholder(tf.float32, [2])
    np.testing.assert_array_equal(run(tf.reduce_logsumexp(inf), {inf: [-np.inf, -np.inf]},
                                      backend), -np.inf)


def test_variance_and_std(backend):
    x = tf.placeholder(tf.float64, [3, 4])
    v = np.random.default_rng(0).standard_normal((3, 4))
    var, std = run([tf.math.reduce_variance(x, 1), tf.math.reduce_std(x)], {x: v}, backend)
    np.testing.assert_allclose(var, np.var(v, axis=1))
    np.testing.assert_allclose(std, np.std(v))


# -- gradients ------------------------------------------------------------------------------------
_RNG = np.random.default_rng(3)
_X = _RNG.standard_normal((2, 3, 4))

GRAD_CASES = [
    ("sum_all", lambda x: tf.reduce_sum(x)),
    ("sum_ax1", lambda x: tf.reduce_sum(x, 1)),
    ("sum_keep", lambda x: tf.reduce_sum(x, [0, 2], keepdims=True)),
    ("mean_ax02", lambda x: tf.reduce_mean(x, [0, 2])),
    ("mean_all", lambda x: tf.reduce_mean(x)),
    ("max_ax2", lambda x: tf.reduce_max(x, 2)),
    ("min_keep", lambda x: tf.reduce_min(x, 0, keepdims=True)),
    ("prod_ax1", lambda x: tf.reduce_prod(x, 1)),
    ("logsumexp", lambda x: tf.reduce_logsumexp(x, -1)),
    ("logsumexp_all", lambda x: tf.reduce_logsumexp(x)),
    ("variance", lambda x: tf.math.reduce_variance(x, 1)),
]


@pytest.mark.parametrize("fn", [pytest.param(f, id=n) for n, f in GRAD_CASES])
def test_gradients_match_central_differences(fn):
    check_gradient(fn, [_X], rtol=1e-4, atol=1e-6)


def test_mean_gradient_with_unknown_dims(backend):
    x = tf.placeholder(tf.float64, [None, 4])
    (g,) = symbolic_gradients(tf.reduce_mean(x, 0), [x], np.ones(4))
    got = run(g, {x: np.ones((5, 4))}, backend)
    np.testing.assert_allclose(got, np.full((5, 4), 0.2))


def test_max_gradient_is_shared_among_ties(backend):
    x = tf.placeholder(tf.float64, [2, 3])
    (g,) = symbolic_gradients(tf.reduce_max(x, 1), [x], np.array([1.0, 3.0]))
    got = run(g, {x: [[2.0, 2.0, 1.0], [5.0, 5.0, 5.0]]}, backend)
    np.testing.assert_allclose(got, [[0.5, 0.5, 0], [1, 1, 1]])


def test_prod_gradient_with_zeros(backend):
    x = tf.placeholder(tf.float64, [2, 3])
    (g,) = symbolic_gradients(tf.reduce_prod(x, 1), [x], np.ones(2))
    got = run(g, {x: [[2.0, 0.0, 3.0], [0.0, 0.0, 4.0]]}, backend)
    np.testing.assert_allclose(got, [[0, 6, 0], [0, 0, 0]])


def test_axes_computed_at_build_time_are_folded(backend):
    x = tf.placeholder(tf.float32, [2, 3, 4])
    s = tf.reduce_sum(x, axis=tf.range(1, tf.rank(x)))
    assert s.op.get_attr("axis") == (1, 2)
    v = np.ones((2, 3, 4), np.float32)
    assert run(s, {x: v}, backend).tolist() == [12.0, 12.0]
    with pytest.raises(NotImplementedError):
        tf.reduce_sum(x, axis=tf.placeholder(tf.int32, [1]))


def test_negative_axes_on_unknown_rank(backend):
    u = tf.placeholder(tf.float64)
    v = np.arange(24, dtype=np.float64).reshape(2, 3, 4) / 10
    outs = [tf.reduce_sum(u, [-1, 0]), tf.reduce_max(u, -2, keepdims=True),
            tf.reduce_prod(u, -1)]
    assert outs[0].op.get_attr("axis") == (-1, 0)
    got = run(outs, {u: v}, backend)
    np.testing.assert_allclose(got[0], v.sum(axis=(0, 2)))
    np.testing.assert_allclose(got[1], v.max(axis=1, keepdims=True))
    np.testing.assert_allclose(got[2], v.prod(axis=-1))
    (g,) = symbolic_gradients(outs[2], [u], np.ones((2, 3)))
    want = np.stack([np.prod(np.delete(v, j, axis=-1), axis=-1) for j in range(4)], -1)
    np.testing.assert_allclose(run(g, {u: v}, backend), want)
