"""tf.cond, tf.case, tf.while_loop, tf.Assert and the tf.debugging.assert_* family."""
from __future__ import annotations

import collections

import numpy as np
import pytest

import jitflow as tf

X = np.array([[1.0, -2.0, 3.0], [0.5, 4.0, -1.0]], dtype=np.float32)


def test_cond_selects_taken_branch(backend):
    p = tf.placeholder(tf.bool, [])
    x = tf.placeholder(tf.float32, [None, 3])
    y = tf.cond(p, lambda: x * 2.0, lambda: x - 1.0)
    assert y.op.name == "cond/Merge" and y.shape.as_list() == [None, 3]
    with tf.Session() as sess:
        np.testing.assert_allclose(sess.run(y, {p: True, x: X}), X * 2)
        np.testing.assert_allclose(sess.run(y, {p: False, x: X}), X - 1)


def test_cond_nested_structures_and_strict(backend):
    p = tf.placeholder(tf.bool, [])
    x = tf.constant(X)
    Pair = collections.namedtuple("Pair", "a b")
    out = tf.cond(p, lambda: {"s": Pair(x, x + 1.0), "t": [x * 3.0]},
                  lambda: {"s": Pair(x * 0.0, x), "t": [x]})
    single = tf.cond(p, lambda: [x], lambda: [x + 1.0])
    kept = tf.cond(p, lambda: [x], lambda: [x + 1.0], strict=True)
    assert isinstance(out["s"], Pair) and isinstance(single, tf.Tensor)
    assert isinstance(kept, list) and len(kept) == 1
    with tf.Session() as sess:
        r = sess.run(out, {p: False})
        np.testing.assert_allclose(r["s"].a, 0 * X)
        np.testing.assert_allclose(r["s"].b, X)
        np.testing.assert_allclose(r["t"][0], X)
        np.testing.assert_allclose(sess.run(single, {p: False}), X + 1)
        np.testing.assert_allclose(sess.run(out["t"][0], {p: True}), 3 * X)


def test_cond_branches_of_different_shapes(backend):
    p = tf.placeholder(tf.bool, [])
    y = tf.cond(p, lambda: tf.constant([1.0, 2.0]), lambda: tf.constant([5.0, 6.0, 7.0]))
    assert y.op.type == "If" and y.shape.as_list() == [None]
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(y, {p: True}), [1.0, 2.0])
        np.testing.assert_array_equal(sess.run(y, {p: False}), [5.0, 6.0, 7.0])


def test_cond_gradient_goes_to_taken_branch(backend):
    p = tf.placeholder(tf.bool, [])
    w = tf.Variable(X)
    loss = tf.reduce_sum(tf.cond(p, lambda: w * w, lambda: 3.0 * w))
    g, = tf.gradients(loss, [w])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_allclose(sess.run(g, {p: True}), 2 * X)
        np.testing.assert_allclose(sess.run(g, {p: False}), np.full_like(X, 3.0))


def test_cond_with_random_branch_runs(backend):
    """Dropout under an is_training flag: random ops are allowed in a branch."""
    training = tf.placeholder_with_default(False, [])
    x = tf.ones([4, 5])
    y = tf.cond(training, lambda: tf.nn.dropout(x, keep_prob=0.5), lambda: x)
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(y), np.ones((4, 5), np.float32))
        v = sess.run(y, {training: True})
        assert set(np.unique(v)) <= {0.0, 2.0}


def test_cond_runs_side_effects_of_the_taken_branch_only(backend):
    v = tf.Variable(1.0)
    p = tf.placeholder(tf.bool, [])
    y = tf.cond(p, lambda: tf.assign_add(v, 2.0), lambda: tf.identity(v) * 10.0)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert sess.run(y, {p: False}) == 10.0 and sess.run(v) == 1.0
        assert sess.run(y, {p: True}) == 3.0 and sess.run(v) == 3.0
        assert sess.run(y, {p: False}) == 30.0 and sess.run(v) == 3.0


def test_untaken_branch_errors_and_asserts_do_not_run(backend):
    p = tf.placeholder(tf.bool, [])
    x = tf.constant([1.0, 2.0, 3.0])
    i = tf.placeholder(tf.int32, [])

    def checked():
        with tf.control_dependencies([tf.Assert(False, ["never in the untaken branch"])]):
            return tf.identity(x)

    y = tf.cond(p, lambda: tf.gather(x, i), lambda: x[0])
    z = tf.cond(p, checked, lambda: x * 2.0)
    with tf.Session() as sess:
        assert sess.run(y, {p: False, i: 99}) == 1.0
        with pytest.raises(tf.errors.InvalidArgumentError):
            sess.run(y, {p: True, i: 99})
        np.testing.assert_array_equal(sess.run(z, {p: False}), [2.0, 4.0, 6.0])
        with pytest.raises(tf.errors.InvalidArgumentError, match="never in the untaken"):
            sess.run(z, {p: True})


def test_cond_gradient_of_untaken_log_of_zero_is_not_nan(backend):
    """Gradients reach only the taken branch (a select would give 0 * inf = NaN)."""
    x = tf.placeholder(tf.float32, [])
    y = tf.cond(x > 0, lambda: tf.log(x), lambda: x * 3.0)
    g, = tf.gradients(y, [x])
    with tf.Session() as sess:
        assert sess.run(g, {x: 0.0}) == 3.0
        assert sess.run(g, {x: 2.0}) == 0.5


def test_cond_outer_control_dependencies_run_once(backend):
    v = tf.Variable(0.0)
    p = tf.placeholder(tf.bool, [])
    bump = tf.assign_add(v, 1.0)
    with tf.control_dependencies([bump]):
        y = tf.cond(p, lambda: v.read_value() * 1.0, lambda: v.read_value() * -1.0)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert sess.run(y, {p: True}) == 1.0
        assert sess.run(y, {p: False}) == -2.0
        assert sess.run(v) == 2.0


def test_cond_returning_operations(backend):
    v = tf.Variable(0.0)
    p = tf.placeholder(tf.bool, [])
    op = tf.cond(p, lambda: tf.assign(v, 5.0).op, lambda: tf.assign(v, -5.0).op)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(op, {p: True})
        assert sess.run(v) == 5.0
        sess.run(op, {p: False})
        assert sess.run(v) == -5.0


def test_cond_argument_errors():
    x = tf.constant(1.0)
    p = tf.placeholder(tf.bool, [])
    with pytest.raises(TypeError, match="Python bool"):
        tf.cond(True, lambda: x, lambda: x)
    with pytest.raises(TypeError, match="callable"):
        tf.cond(p, x, lambda: x)
    with pytest.raises(ValueError, match="same type"):
        tf.cond(p, lambda: x, lambda: tf.constant(1))
    with pytest.raises(ValueError, match="structure"):
        tf.cond(p, lambda: (x, x), lambda: x)
    with pytest.raises(ValueError, match="rank 0"):
        tf.cond(tf.placeholder(tf.bool, [2]), lambda: x, lambda: x)
    with pytest.raises(ValueError, match="at least one result"):
        tf.cond(p, lambda: None, lambda: None)


def test_cond_fn1_fn2_legacy_names(backend):
    p = tf.placeholder(tf.bool, [])
    y = tf.cond(p, fn1=lambda: tf.constant(1), fn2=lambda: tf.constant(2))
    with tf.Session() as sess:
        assert sess.run(y, {p: True}) == 1 and sess.run(y, {p: False}) == 2


def test_case_first_true_predicate_wins(backend):
    x = tf.placeholder(tf.int32, [])
    y = tf.case([(tf.less(x, 0), lambda: tf.constant(-1)),
                 (tf.equal(x, 0), lambda: tf.constant(0))],
                default=lambda: tf.constant(1))
    with tf.Session() as sess:
        assert [sess.run(y, {x: v}) for v in (-5, 0, 7)] == [-1, 0, 1]


def test_case_exclusive_checks_at_run_time(backend):
    x = tf.placeholder(tf.int32, [])
    y = tf.case([(x > 0, lambda: tf.constant(1)), (x > 1, lambda: tf.constant(2))],
                default=lambda: tf.constant(0), exclusive=True)
    with tf.Session() as sess:
        assert sess.run(y, {x: 1}) == 1
        with pytest.raises(tf.errors.InvalidArgumentError):
            sess.run(y, {x: 5})


def test_while_loop_with_static_trip_count(backend):
    x = tf.placeholder(tf.float32, [3])
    i, acc = tf.while_loop(lambda i, a: i < 4, lambda i, a: (i + 1, a * x),
                           [tf.constant(0), tf.ones([3])])
    one = tf.while_loop(lambda k: k < 10, lambda k: k + 3, [tf.constant(1)])
    xv = np.array([1.0, 2.0, -1.0], np.float32)
    with tf.Session() as sess:
        iv, av = sess.run([i, acc], {x: xv})
        assert iv == 4
        np.testing.assert_allclose(av, xv ** 4)
        assert sess.run(one) == 10


def test_while_loop_maximum_iterations(backend):
    r = tf.while_loop(lambda k: k < 100, lambda k: k * 2, [tf.constant(1)],
                      maximum_iterations=5)
    with tf.Session() as sess:
        assert sess.run(r) == 32


def test_assert_raises_only_when_false(backend):
    x = tf.placeholder(tf.float32, [None])
    check = tf.Assert(tf.reduce_all(x > 0), ["x must be positive", x])
    with tf.control_dependencies([check]):
        y = tf.identity(x * 2.0)
    with tf.Session() as sess:
        np.testing.assert_allclose(sess.run(y, {x: [1.0, 2.0]}), [2.0, 4.0])
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match=r"assertion failed: \[x must be positive\] \[1 -2\]"):
            sess.run(y, {x: [1.0, -2.0]})


@pytest.mark.parametrize("fn,args,ok", [
    (tf.debugging.assert_equal, ([1, 2], [1, 2]), True),
    (tf.debugging.assert_equal, ([1, 2], [1, 3]), False),
    (tf.assert_less, ([1, 2], [2, 3]), True),
    (tf.assert_less, ([1, 3], [2, 3]), False),
    (tf.assert_greater_equal, ([2, 3], [2, 3]), True),
    (tf.assert_positive, ([1.0, 0.5],), True),
    (tf.assert_positive, ([1.0, 0.0],), False),
    (tf.assert_non_negative, ([0.0, 2.0],), True),
    (tf.assert_negative, ([-1.0, 2.0],), False),
])
def test_assert_family(fn, args, ok, backend):
    op = fn(*[tf.constant(a) for a in args])
    with tf.Session() as sess:
        if ok:
            assert sess.run(op) is None
        else:
            with pytest.raises(tf.errors.InvalidArgumentError, match="did not hold"):
                sess.run(op)


def test_assert_rank_is_checked_at_build_time():
    x = tf.constant(X)
    tf.assert_rank(x, 2)
    with pytest.raises(ValueError, match="must have rank 1"):
        tf.assert_rank(x, 1)


def test_cond_matches_tensorflow():
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    tf1.disable_eager_execution()

    def program(t):
        p = t.placeholder(t.bool, [])
        x = t.placeholder(t.float32, [None, 3])
        w = t.Variable(t.constant(X[0]))
        y = t.cond(p, lambda: t.nn.relu(x * w), lambda: t.tanh(x - w))
        loss = t.reduce_sum(y * y)
        g = t.gradients(loss, [w])[0]
        with t.Session() as sess:
            sess.run(t.global_variables_initializer())
            return [sess.run([y, g], {p: b, x: X}) for b in (True, False)]

    g = tf1.Graph()
    with g.as_default():
        want = program(tf1)
    got = program(tf)
    for (gy, gg), (wy, wg) in zip(got, want):
        np.testing.assert_allclose(gy, wy, rtol=1e-6)
        np.testing.assert_allclose(gg, wg, rtol=1e-5, atol=1e-6)


def _functional(t):
    x = t.constant(np.arange(6.0, dtype=np.float32).reshape(3, 2))
    v = t.constant([1.0, 2.0, 3.0, 4.0])
    return [t.map_fn(lambda r: r * 2.0 + 1.0, x),
            t.map_fn(lambda p: (p[0] + p[1], p[0] * p[1]), (x, x + 1.0),
                     dtype=(t.float32, t.float32)),
            t.scan(lambda a, r: a + r, x),
            t.scan(lambda a, r: a * 2.0 + r, x, initializer=t.ones([2]), reverse=True),
            t.foldl(lambda a, r: a * r, v),
            t.foldr(lambda a, r: a - r, v, initializer=t.constant(10.0))]


def test_functional_ops_by_hand(backend):
    with tf.Session() as sess:
        m, (s_, p_), sc, scr, fl, fr = sess.run(_functional(tf))
    x = np.arange(6.0).reshape(3, 2)
    np.testing.assert_allclose(m, x * 2 + 1)
    np.testing.assert_allclose(s_, 2 * x + 1)
    np.testing.assert_allclose(p_, x * (x + 1))
    np.testing.assert_allclose(sc, np.cumsum(x, axis=0))
    want, a = np.zeros_like(x), np.ones(2)
    for i in (2, 1, 0):
        a = a * 2 + x[i]
        want[i] = a
    np.testing.assert_allclose(scr, want)
    assert fl == 24.0 and fr == 10.0 - 4 - 3 - 2 - 1


def test_functional_ops_match_tensorflow():
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    tf1.disable_eager_execution()
    g = tf1.Graph()
    with g.as_default(), tf1.Session() as sess:
        want = sess.run(_functional(tf1))
    with tf.Session() as sess:
        got = sess.run(_functional(tf))
    for a, b in zip(_flat(got), _flat(want)):
        np.testing.assert_allclose(a, b)


def _flat(x):
    if isinstance(x, (list, tuple)):
        return [y for e in x for y in _flat(e)]
    return [x]


def test_loops_and_map_fn_run_side_effects_each_iteration(backend):
    v = tf.Variable(0.0)
    n = tf.placeholder(tf.int32, [])
    i = tf.while_loop(lambda i: i < n, lambda i: tf.tuple([i + 1],
                                                         control_inputs=[tf.assign_add(v, 1.0)])[0],
                      [tf.constant(0)])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert sess.run(i, {n: 4}) == 4 and sess.run(v) == 4.0
        assert sess.run(i, {n: 0}) == 0 and sess.run(v) == 4.0


def test_variables_created_in_a_branch_are_allowed(backend):
    p = tf.placeholder(tf.bool, [])
    y = tf.cond(p, lambda: tf.get_variable("w", initializer=tf.constant(3.0)) * 2.0,
                lambda: tf.constant(1.0))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert sess.run(y, {p: True}) == 6.0 and sess.run(y, {p: False}) == 1.0


def test_py_func_in_a_branch_runs_only_when_taken(backend):
    p = tf.placeholder(tf.bool, [])
    x = tf.constant([1.0, 2.0])
    calls = []

    def neg(a):
        calls.append(1)
        return np.negative(a)

    y = tf.cond(p, lambda: tf.py_func(neg, [x], tf.float32), lambda: x)
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(y, {p: False}), [1.0, 2.0])
        assert not calls
        np.testing.assert_array_equal(sess.run(y, {p: True}), [-1.0, -2.0])
        assert len(calls) == 1


def test_while_loop_bound_from_a_static_shape(backend):
    x = tf.placeholder(tf.float32, [4, 2])
    i, total = tf.while_loop(lambda i, s: i < tf.shape(x)[0],
                             lambda i, s: (i + 1, s + x[i]), [tf.constant(0), tf.zeros([2])])
    xv = np.arange(8.0, dtype=np.float32).reshape(4, 2)
    with tf.Session() as sess:
        iv, tv = sess.run([i, total], {x: xv})
    assert iv == 4
    np.testing.assert_allclose(tv, xv.sum(axis=0))


def test_cond_gradient_uses_the_taken_branch_dropout_mask(backend):
    """`tf.layers.dropout(training=placeholder)` is a cond: its gradient must see the mask the
    forward pass drew, not a new one."""
    x = tf.placeholder(tf.float64, [400])
    training = tf.placeholder(tf.bool, [])
    y = tf.layers.dropout(x, 0.5, training=training)
    g, = tf.gradients(tf.reduce_sum(y * y), [x])
    xv = np.linspace(0.5, 1.5, 400)
    with tf.Session() as sess:
        yv, gv = sess.run([y, g], {x: xv, training: True})
        assert 100 < np.count_nonzero(yv) < 300
        np.testing.assert_allclose(gv, 2 * yv * np.where(yv != 0, 2.0, 0.0))
        yv, gv = sess.run([y, g], {x: xv, training: False})
        np.testing.assert_allclose(gv, 2 * xv)


def _case_outputs(t, x, default: bool, exclusive: bool):
    pairs = [(t.equal(x, 1), lambda: t.constant(10)), (t.greater(x, 0), lambda: t.constant(20)),
             (t.equal(x, 3), lambda: t.constant(30))]
    return t.case(pairs, default=(lambda: t.constant(-1)) if default else None,
                  exclusive=exclusive)


def _case_table(t, sess_kw=None):
    """case's result (or error class) for x = 0..3 in each default/exclusive combination."""
    out = {}
    g = t.Graph()
    with g.as_default():
        x = t.placeholder(t.int32, [])
        ys = {(d, e): _case_outputs(t, x, d, e) for d in (True, False) for e in (False, True)}
        with t.Session(**(sess_kw or {})) as sess:
            for k, y in ys.items():
                row = []
                for v in range(4):
                    try:
                        row.append(int(sess.run(y, {x: v})))
                    except t.errors.InvalidArgumentError:
                        row.append("error")
                out[k] = row
    return out


# TF1: without a default the last fn is the default, checked to have a true predicate; the
# exclusive check covers the other predicates (x=3: x > 0 and x == 3 both hold, no error)
CASE_TABLE = {(True, False): [-1, 10, 20, 20], (True, True): [-1, "error", 20, "error"],
              (False, False): ["error", 10, 20, 20], (False, True): ["error", "error", 20, 20]}


def test_case_default_and_exclusive_as_tf1(backend):
    assert _case_table(tf) == CASE_TABLE


def test_case_without_default_needs_a_true_predicate(backend):
    x = tf.placeholder(tf.int32, [])
    y = tf.case([(x > 0, lambda: x * 2)])
    with tf.Session() as sess:
        assert sess.run(y, {x: 4}) == 8
        with pytest.raises(tf.errors.InvalidArgumentError, match="None of conditions"):
            sess.run(y, {x: -4})


def test_case_rejects_python_and_non_bool_predicates():
    with pytest.raises(TypeError, match="pred must be a Tensor, got: True"):
        tf.case([(True, lambda: tf.constant(1))], default=lambda: tf.constant(2))
    with pytest.raises(TypeError, match="of type bool"):
        tf.case([(tf.constant(1), lambda: tf.constant(1))], default=lambda: tf.constant(2))
    with pytest.raises(TypeError, match="list, tuple, or dict"):
        tf.case(tf.constant(True), default=lambda: tf.constant(2))


def test_case_matches_tensorflow():
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    tf1.disable_eager_execution()
    want = _case_table(tf1)
    assert want == CASE_TABLE
    for be in ("interpreter", "numba"):
        assert _case_table(tf, {"backend": be}) == want
