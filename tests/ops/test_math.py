"""Elementwise math: TF1 names, operators, shape and dtype rules, integer semantics, numerical
edge cases, templates against references, and gradient rules against central differences.

`check_gradient` (also used by the other op-family tests) differentiates with the registry's
gradient rules only, walking the graph in reverse creation order, so each rule is tested on
its own terms.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import jitflow as tf
from jitflow.ops.registry import all_op_defs
from helpers import build_example, example_inputs
from test_registry import EXAMPLES

# where the ops this file checks are defined: the modules of the math and nn packages, reduce
# and linalg
MY_PACKAGES = {"jitflow.ops.math", "jitflow.ops.nn"}
MY_MODULES = {"jitflow.ops.reduce", "jitflow.ops.linalg"}


def _mine(fn) -> bool:
    mod = getattr(fn, "__module__", "")
    return mod in MY_MODULES or mod.rpartition(".")[0] in MY_PACKAGES


# -- gradient checking helpers --------------------------------------------------------------------
def symbolic_gradients(y, xs, seed):
    """d sum(seed * y) / d xs, built from each op's registered gradient rule."""
    ops = y.graph.get_operations()
    ops = ops[:ops.index(y.op) + 1]
    grads = {y: [tf.constant(np.asarray(seed, dtype=y.dtype.as_numpy_dtype))]}
    for op in reversed(ops):
        outs = [grads.get(t) for t in op.outputs]
        if all(o is None for o in outs) or not op.op_def.differentiable:
            continue
        gs = [None if o is None else (o[0] if len(o) == 1 else tf.add_n(o)) for o in outs]
        for t, g in zip(op.inputs, op.op_def.grad(op, *gs)):
            if g is not None:
                grads.setdefault(t, []).append(g)
    out = []
    for x in xs:
        g = grads.get(x)
        out.append(None if g is None else (g[0] if len(g) == 1 else tf.add_n(g)))
    return out


def check_gradient(fn, arrays, backend="interpreter", eps=1e-6, rtol=1e-5, atol=1e-7,
                   seed=0, no_grad=()):
    """Compare the symbolic gradient of sum(w * fn(*xs)) with central differences (float64).

    Inputs listed in `no_grad` (e.g. a select condition) must get no gradient at all."""
    arrays = [np.asarray(a, dtype=np.float64) for a in arrays]
    phs = [tf.placeholder(tf.float64, a.shape) for a in arrays]
    y = fn(*phs)
    rng = np.random.default_rng(seed)
    with tf.Session(backend="interpreter") as sess:
        y0 = sess.run(y, dict(zip(phs, arrays)))
    w = rng.uniform(0.5, 1.5, size=np.shape(y0))
    grads = symbolic_gradients(y, phs, w)
    wanted = [g for g in grads if g is not None]
    with tf.Session(backend=backend) as sess:
        got = sess.run(wanted, dict(zip(phs, arrays)))
        got_iter = iter(got)
        got = [None if g is None else next(got_iter) for g in grads]

    def loss(vals):
        with tf.Session(backend="interpreter") as s:
            return float(np.sum(w * s.run(y, dict(zip(phs, vals)))))
    for i, a in enumerate(arrays):
        if i in no_grad:
            assert got[i] is None, f"input {i} should get no gradient"
            continue
        num = np.zeros_like(a)
        for idx in np.ndindex(a.shape):
            hi = [v.copy() for v in arrays]
            lo = [v.copy() for v in arrays]
            hi[i][idx] += eps
            lo[i][idx] -= eps
            num[idx] = (loss(hi) - loss(lo)) / (2 * eps)
        assert got[i] is not None, f"no gradient for input {i}"
        assert np.shape(got[i]) == a.shape, (np.shape(got[i]), a.shape)
        np.testing.assert_allclose(got[i], num, rtol=rtol, atol=atol,
                                   err_msg=f"gradient of input {i}")
    return got


def run(fetches, feed=None, backend=None):
    with tf.Session(backend=backend) as sess:
        return sess.run(fetches, feed)


# -- names and namespaces -------------------------------------------------------------------------
def test_operators_make_tf1_op_types_and_names():
    a = tf.placeholder(tf.float32, [2, 2], name="a")
    b = tf.placeholder(tf.float32, [2, 2], name="b")
    p = tf.placeholder(tf.bool, [2], name="p")
    q = tf.placeholder(tf.bool, [2], name="q")
    cases = [(a + b, "Add", "add"), (a - b, "Sub", "sub"), (a * b, "Mul", "mul"),
             (a / b, "RealDiv", "truediv"), (a // b, "FloorDiv", "floordiv"),
             (a % b, "FloorMod", "mod"), (a ** b, "Pow", "pow"), (a @ b, "MatMul", "matmul"),
             (-a, "Neg", "Neg"), (abs(a), "Abs", "Abs"), (a < b, "Less", "Less"),
             (a <= b, "LessEqual", "LessEqual"), (a > b, "Greater", "Greater"),
             (a >= b, "GreaterEqual", "GreaterEqual"), (p & q, "LogicalAnd", "and"),
             (p | q, "LogicalOr", "or"), (~p, "LogicalNot", "LogicalNot"),
             (p ^ q, "LogicalAnd", "xor")]
    for t, op_type, name in cases:
        assert t.op.type == op_type, (name, t.op.type)
        assert t.op.name == name, (op_type, t.op.name)


def test_reflected_operators_put_the_python_value_first(backend):
    x = tf.placeholder(tf.float32, [3])
    v = np.array([1.0, 2.0, 4.0], np.float32)
    got = run([2 - x, 2 / x, 2 ** x, 7 // x, 7 % x, 3 + x, 3 * x], {x: v}, backend)
    want = [2 - v, 2 / v, 2.0 ** v, np.array([7.0, 3.0, 1.0]), np.array([0.0, 1.0, 3.0]),
            3 + v, 3 * v]
    for g, w in zip(got, want):
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, w, rtol=1e-6)
    r = 2 - x
    assert r.op.inputs[1] is x and r.op.inputs[0].op.name == r.op.name + "/x"


def test_equality_operators_stay_identity():
    a = tf.constant(1.0)
    b = tf.constant(1.0)
    assert (a == b) is False and (a == a) is True
    assert len({a, b}) == 2


def test_function_names_and_namespaces():
    x = tf.placeholder(tf.float32, [2])
    assert tf.add(x, x).op.name == "Add"
    assert tf.exp(x).op.type == "Exp" and tf.exp(x).op.name == "Exp_1"
    assert tf.pow(x, x).op.type == "Pow"
    assert tf.mod(x, x).op.type == "FloorMod"
    assert tf.floordiv(x, x).op.type == "FloorDiv"
    assert tf.add_n([x, x, x]).op.type == "AddN"
    assert tf.math.exp is tf.exp and tf.math.add is tf.add and tf.math.floormod is tf.floormod
    assert tf.nn.sigmoid is tf.sigmoid and tf.nn.tanh is tf.tanh
    assert tf.nn.softplus is tf.math.softplus
    assert tf.where(x > 0, x, x).op.type == "Select"
    assert tf.where_v2(x > 0, x, 0.0).op.type == "SelectV2"
    assert tf.stop_gradient(x).op.type == "StopGradient"
    assert tf.subtract(x, x, name="d").op.name == "d"


# -- shapes and dtypes ----------------------------------------------------------------------------
def test_broadcast_shape_inference_with_unknown_dims():
    a = tf.placeholder(tf.float32, [None, 3])
    assert (a + tf.placeholder(tf.float32, [4, 1, 3])).shape.as_list() == [4, None, 3]
    assert (tf.placeholder(tf.float32, [None, 1]) * tf.placeholder(tf.float32, [1, 5])
            ).shape.as_list() == [None, 5]
    assert (a + 1.0).shape.as_list() == [None, 3]
    assert (a < tf.placeholder(tf.float32, [None, None])).shape.as_list() == [None, 3]
    assert (a + tf.placeholder(tf.float32, None)).shape.ndims is None
    with pytest.raises(ValueError, match="Dimensions must be equal, but are 3 and 4"):
        a + tf.placeholder(tf.float32, [4])


def test_dtype_mismatch_is_a_type_error():
    f32 = tf.placeholder(tf.float32, [2])
    f64 = tf.placeholder(tf.float64, [2])
    i32 = tf.placeholder(tf.int32, [2])
    with pytest.raises(TypeError):
        f32 + f64
    with pytest.raises(TypeError):
        tf.maximum(f32, i32)
    with pytest.raises(TypeError):
        tf.exp(i32)
    with pytest.raises(TypeError):
        tf.logical_and(f32, f32)
    with pytest.raises(TypeError):
        tf.less(i32, 2.5)
    with pytest.raises(TypeError):
        tf.add_n([f32, f64])
    with pytest.raises(TypeError):
        tf.where(f32, f32, f32)


def test_comparison_and_logic_outputs_are_bool(backend):
    x = tf.placeholder(tf.int32, [4])
    v = np.array([-2, 0, 1, 5], np.int32)
    lt, eq, ne, both = run([x < 1, tf.equal(x, 0), tf.not_equal(x, 0),
                            tf.logical_xor(x > 0, x > 2)], {x: v}, backend)
    assert lt.dtype == np.bool_
    assert lt.tolist() == [True, True, False, False]
    assert eq.tolist() == [False, True, False, False]
    assert ne.tolist() == [True, False, True, True]
    assert both.tolist() == [False, False, True, False]


# -- integer semantics ----------------------------------------------------------------------------
def test_int_floordiv_and_mod_follow_python(backend):
    xs = [-7, -7, 7, 7, -1, 0, 9]
    ys = [2, -2, 2, -2, 3, 4, -4]
    x = tf.placeholder(tf.int32, [7])
    y = tf.placeholder(tf.int32, [7])
    q, r, div = run([x // y, x % y, tf.div(x, y)], {x: np.int32(xs), y: np.int32(ys)}, backend)
    assert q.dtype == np.int32 and r.dtype == np.int32
    assert q.tolist() == [a // b for a, b in zip(xs, ys)]
    assert r.tolist() == [a % b for a, b in zip(xs, ys)]
    assert div.tolist() == q.tolist()


def test_float_floordiv_and_mod_follow_python(backend):
    xs = [-7.5, 7.5, -1.0, 5.0]
    ys = [2.0, -2.0, 3.0, 2.5]
    x = tf.placeholder(tf.float64, [4])
    y = tf.placeholder(tf.float64, [4])
    q, r = run([x // y, x % y], {x: np.array(xs), y: np.array(ys)}, backend)
    assert q.tolist() == [a // b for a, b in zip(xs, ys)]
    np.testing.assert_allclose(r, [a % b for a, b in zip(xs, ys)])


def test_int_truediv_casts_to_float():
    i32 = tf.placeholder(tf.int32, [2])
    assert (i32 / i32).dtype == tf.float64
    assert tf.divide(tf.placeholder(tf.int16, [2]), 2).dtype == tf.float32
    assert (i32 // i32).dtype == tf.int32


def test_round_is_half_to_even(backend):
    x = tf.placeholder(tf.float32, [6])
    got = run(tf.round(x), {x: np.float32([0.5, 1.5, 2.5, -0.5, -1.5, 2.6])}, backend)
    assert got.tolist() == [0.0, 2.0, 2.0, -0.0, -2.0, 3.0]


# -- select, where, clip, add_n -------------------------------------------------------------------
def test_where_with_a_condition_vector_selects_rows(backend):
    c = tf.placeholder(tf.bool, [3])
    x = tf.placeholder(tf.float32, [3, 2])
    y = tf.placeholder(tf.float32, [3, 2])
    xv = np.arange(6, dtype=np.float32).reshape(3, 2)
    yv = -xv
    got = run(tf.where(c, x, y), {c: [True, False, True], x: xv, y: yv}, backend)
    np.testing.assert_array_equal(got, [[0, 1], [-2, -3], [4, 5]])
    with pytest.raises(ValueError):
        tf.where(tf.placeholder(tf.bool, [3, 2]), x, tf.placeholder(tf.float32, [2]))


def test_where_with_one_argument_returns_coordinates(backend):
    c = tf.placeholder(tf.bool, [2, 3])
    w = tf.where(c)
    assert w.dtype == tf.int64 and w.shape.as_list() == [None, 2]
    got = run(w, {c: [[True, False, True], [False, False, True]]}, backend)
    assert got.dtype == np.int64
    assert got.tolist() == [[0, 0], [0, 2], [1, 2]]
    with pytest.raises(ValueError):
        tf.where(c, x=tf.constant(1.0))


def test_where_v2_broadcasts_everything(backend):
    c = tf.placeholder(tf.bool, [2, 1])
    x = tf.placeholder(tf.float32, [1, 3])
    out = tf.where_v2(c, x, 0.0)
    assert out.shape.as_list() == [2, 3]
    got = run(out, {c: [[True], [False]], x: [[1, 2, 3]]}, backend)
    np.testing.assert_array_equal(got, [[1, 2, 3], [0, 0, 0]])


def test_clip_by_value_values_and_gradient(backend):
    x = tf.placeholder(tf.float64, [5])
    v = np.array([-3.0, -0.5, 0.2, 0.9, 4.0])
    got = run(tf.clip_by_value(x, -1.0, 1.0), {x: v}, backend)
    np.testing.assert_array_equal(got, np.clip(v, -1, 1))
    g = check_gradient(lambda t: tf.clip_by_value(t, -1.0, 1.0), [v], backend)
    np.testing.assert_array_equal(g[0] != 0, [False, True, True, True, False])


def test_add_n_sums_and_checks(backend):
    xs = [tf.placeholder(tf.float32, [None, 2]) for _ in range(3)]
    s = tf.add_n(xs)
    assert s.shape.as_list() == [None, 2]
    vals = [np.full((1, 2), i + 1, np.float32) for i in range(3)]
    np.testing.assert_array_equal(run(s, dict(zip(xs, vals)), backend), [[6, 6]])
    with pytest.raises(ValueError):
        tf.add_n([])
    with pytest.raises(ValueError):
        tf.add_n([xs[0], tf.placeholder(tf.float32, [3])])
    g = check_gradient(lambda a, b, c: tf.add_n([a, b, c]),
                       [np.ones((2, 2)), np.ones((2, 2)), np.ones((2, 2))], backend)
    assert len(g) == 3


def test_stop_gradient_blocks_the_gradient():
    x = tf.placeholder(tf.float64, [2])
    y = tf.stop_gradient(x * 2.0) + x
    assert not y.op.inputs[0].op.op_def.differentiable
    (g,) = symbolic_gradients(y, [x], np.ones(2))
    np.testing.assert_array_equal(run(g, {x: [1.0, 2.0]}), [1.0, 1.0])


# -- numerical edge cases -------------------------------------------------------------------------
def test_sigmoid_softplus_log_sigmoid_extremes(backend):
    x = tf.placeholder(tf.float32, [5])
    v = np.float32([-1000, -80, 0, 80, 1000])
    sig, sp, ls = run([tf.sigmoid(x), tf.nn.softplus(x), tf.log_sigmoid(x)], {x: v}, backend)
    for r in (sig, sp, ls):
        assert np.all(np.isfinite(r)) and r.dtype == np.float32
    np.testing.assert_allclose(sig, [0, math.exp(-80), 0.5, 1, 1], rtol=1e-6, atol=0)
    np.testing.assert_allclose(sp, [0, math.exp(-80), math.log(2), 80, 1000], rtol=1e-6)
    np.testing.assert_allclose(ls, [-1000, -80, -math.log(2), -math.exp(-80), 0], rtol=1e-6)


def test_div_no_nan_and_is_nan(backend):
    x = tf.placeholder(tf.float64, [3])
    y = tf.placeholder(tf.float64, [3])
    q, nan = run([tf.div_no_nan(x, y), tf.is_nan(x / y)], {x: [1.0, 0.0, 3.0],
                                                            y: [0.0, 0.0, 2.0]}, backend)
    assert q.tolist() == [0.0, 0.0, 1.5]
    assert nan.tolist() == [False, True, False]


# -- scalar expressions agree with references ------------------------------------------------
def _template_cases():
    seen = set()
    for op_type, _, ex in EXAMPLES:
        if op_type in seen:
            continue
        od = [o for o in all_op_defs() if o.type == op_type][0]
        if od.kind != "elementwise" or not _mine(od.ref):
            continue
        seen.add(op_type)
        for dt in ex.dtypes:
            yield pytest.param(op_type, ex, dt, id=f"{op_type}-{dt}")


@pytest.mark.parametrize("op_type,ex,dtype", list(_template_cases()))
def test_scalar_expression_matches_reference(op_type, ex, dtype, monkeypatch):
    """Each elementwise op's scalar expression, compiled alone from its loop form (the quick
    LLVM code: no other op of the example fused with it), computes what its NumPy reference
    computes on the values the example gives it."""
    monkeypatch.setenv("JITFLOW_COMPILE", "quick")
    arrays = example_inputs(ex, dtype)
    phs, out = build_example(ex, arrays)
    ops = [op for op in tf.get_default_graph().get_operations() if op.type == op_type]
    assert ops, f"the example of {op_type} builds no {op_type} op"
    op = ops[-1]
    with tf.Session(backend="interpreter") as sess:
        vals = sess.run([list(op.inputs), op.outputs[0]], dict(zip(phs, arrays)))
    ins, ref = vals
    with tf.Session(backend="numba") as sess, np.errstate(all="ignore"):
        # the op's inputs are fed: the kernel holds this one op
        got = sess.run(op.outputs[0], dict(zip(op.inputs, ins)))
        (kernel,) = [k for k in sess.inspect(op.outputs[0], dict(zip(op.inputs, ins)))
                     .split("def kernel")[1:]]
    assert f"# {op.name}" in kernel or ".copy()" in kernel   # (identity-like: a copy)
    if np.asarray(ref).dtype.kind == "f":
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
    else:
        np.testing.assert_array_equal(got, ref)


def test_float_constants_in_scalar_expressions_are_typed():
    """A bare float literal would promote float32 arithmetic to float64 in compiled code: every
    constant of a float32 op's printed loop (the Numba source) is typed."""
    import re
    x = tf.placeholder(tf.float32, [2])
    ys = [tf.sigmoid(x), tf.rsqrt(x), tf.nn.softplus(x), tf.nn.leaky_relu(x), tf.nn.selu(x),
          tf.reciprocal(x), tf.div_no_nan(x, x), tf.nn.relu6(x), tf.nn.elu(x)]
    with tf.Session() as sess:
        src = sess.inspect(ys, {x: np.ones(2, np.float32)})
    body = [line.split("  # ")[0] for line in src.splitlines() if re.match(r"\s+t\d+ = ", line)]
    assert len(body) >= len(ys)
    for line in body:
        bare = re.sub(r"np\.float32\([^)]*\)", "", line.split(" = ", 1)[1])
        bare = re.sub(r"\b[a-z]\w*\[\w+\]|\b[a-z_]+\d*\b", "", bare)   # names, indexing
        assert not re.search(r"\d+\.\d*", bare), line


# -- gradient rules -------------------------------------------------------------------------------
_RNG = np.random.default_rng(1)


def _r(*shape, lo=None, hi=None):
    if lo is not None:
        return _RNG.uniform(lo, hi, size=shape)
    return _RNG.standard_normal(shape)


GRAD_CASES = [
    ("add_bcast", lambda a, b: a + b, [_r(2, 3), _r(3)]),
    ("sub_bcast", lambda a, b: a - b, [_r(2, 1), _r(1, 3)]),
    ("mul_bcast", lambda a, b: a * b, [_r(2, 3), _r(2, 1)]),
    ("div_bcast", lambda a, b: a / b, [_r(2, 3), _r(3, lo=0.5, hi=2)]),
    ("pow", lambda a, b: tf.pow(a, b), [_r(2, 3, lo=0.5, hi=2), _r(2, 3)]),
    ("pow_neg_base", lambda a: a ** 3.0, [_r(4)]),
    ("maximum", lambda a, b: tf.maximum(a, b), [_r(2, 3), _r(3)]),
    ("minimum", lambda a, b: tf.minimum(a, b), [_r(2, 3), _r(2, 1)]),
    ("sqdiff", lambda a, b: tf.squared_difference(a, b), [_r(2, 3), _r(3)]),
    ("floormod", lambda a, b: tf.mod(a, b), [_r(4, lo=0.1, hi=0.9), _r(4, lo=1.1, hi=2)]),
    ("div_no_nan", lambda a, b: tf.div_no_nan(a, b), [_r(3), _r(3, lo=0.5, hi=2)]),
    ("abs", lambda a: tf.abs(a), [_r(5, lo=0.2, hi=1) * np.array([1, -1, 1, -1, 1])]),
    ("sqrt", lambda a: tf.sqrt(a), [_r(4, lo=0.5, hi=2)]),
    ("rsqrt", lambda a: tf.rsqrt(a), [_r(4, lo=0.5, hi=2)]),
    ("reciprocal", lambda a: tf.reciprocal(a), [_r(4, lo=0.5, hi=2)]),
    ("exp_log", lambda a: tf.log(tf.exp(a) + 1.0), [_r(4)]),
    ("log1p_expm1", lambda a: tf.log1p(a) * tf.expm1(a), [_r(4, lo=-0.5, hi=0.5)]),
    ("trig", lambda a: tf.sin(a) + tf.cos(a) * tf.tan(a), [_r(4, lo=-1, hi=1)]),
    ("tanh_sigmoid", lambda a: tf.tanh(a) * tf.sigmoid(a), [_r(4)]),
    ("softplus", lambda a: tf.nn.softplus(a), [_r(4)]),
    ("log_sigmoid", lambda a: tf.log_sigmoid(a), [_r(4)]),
    ("square_neg", lambda a: -tf.square(a), [_r(4)]),
    ("select", lambda c, a, b: tf.where(c > 0, a, b), [_r(2, 3), _r(2, 3), _r(2, 3)]),
    ("select_rows", lambda c, a, b: tf.where(c > 0, a, b), [_r(2), _r(2, 3), _r(2, 3)]),
    ("select_v2", lambda c, a, b: tf.where_v2(c > 0, a, b), [_r(2, 3), _r(3), _r(2, 1)]),
    ("cast", lambda a: tf.cast(a, tf.float32) * tf.constant(3.0), [np.array([0.5, -1.25])]),
    ("inverse_trig", lambda a: tf.asin(a) + tf.acos(a) * tf.atan(a) + tf.atanh(a),
     [_r(4, lo=-0.8, hi=0.8)]),
    ("hyperbolic", lambda a: tf.sinh(a) * tf.cosh(a) + tf.asinh(a), [_r(4)]),
    ("acosh", lambda a: tf.acosh(a), [_r(4, lo=1.2, hi=3)]),
    ("atan2", lambda a, b: tf.atan2(a, b), [_r(2, 3), _r(3, lo=0.5, hi=2)]),
]


@pytest.mark.parametrize("fn,arrays", [pytest.param(f, a, id=n) for n, f, a in GRAD_CASES])
def test_gradient_rules_match_central_differences(fn, arrays):
    phs = [tf.placeholder(tf.float64, np.shape(a)) for a in arrays]
    out = fn(*phs)
    eps = 2.0 ** -12 if out.dtype == tf.float32 else 1e-6  # float32: steps it represents exactly
    ops = tf.get_default_graph().get_operations()
    no_grad = (0,) if any(op.type.startswith("Select") for op in ops) else ()
    tf.reset_default_graph()
    check_gradient(fn, arrays, eps=eps, rtol=1e-4, atol=1e-6, no_grad=no_grad)


def test_sign_floor_have_zero_or_no_gradient():
    x = tf.placeholder(tf.float64, [3])
    g_sign, = symbolic_gradients(tf.sign(x), [x], np.ones(3))
    np.testing.assert_array_equal(run(g_sign, {x: [1.0, -2.0, 0.0]}), [0.0, 0.0, 0.0])
    assert symbolic_gradients(tf.floor(x), [x], np.ones(3)) == [None]
    assert symbolic_gradients(tf.cast(x > 0, tf.float64), [x], np.ones(3)) == [None]


def test_erf_values_and_gradient(backend):
    x = tf.placeholder(tf.float64, [4])
    v = np.array([-2.0, -0.3, 0.0, 1.1])
    np.testing.assert_allclose(run(tf.erf(x), {x: v}, backend), [math.erf(a) for a in v],
                               rtol=1e-12)
    check_gradient(tf.erf, [v])


def test_public_functions_carry_their_tf_names():
    assert tf.exp.__name__ == "exp" and tf.math.is_nan.__name__ == "is_nan"


def test_cumsum_and_cumprod(backend):
    x = tf.placeholder(tf.int32, [2, 3])
    v = np.int32([[1, 2, 3], [4, 5, 6]])
    outs = [tf.cumsum(x, 1), tf.cumsum(x, 1, exclusive=True), tf.cumsum(x, 0, reverse=True),
            tf.cumprod(x, -1, exclusive=True, reverse=True)]
    got = run(outs, {x: v}, backend)
    assert got[0].tolist() == [[1, 3, 6], [4, 9, 15]]
    assert got[1].tolist() == [[0, 1, 3], [0, 4, 9]]
    assert got[2].tolist() == [[5, 7, 9], [4, 5, 6]]
    assert got[3].tolist() == [[6, 3, 1], [30, 6, 1]]
    assert all(g.dtype == np.int32 for g in got)
    check_gradient(lambda a: tf.cumsum(a, 1, exclusive=True, reverse=True),
                   [np.random.default_rng(0).standard_normal((2, 3))])
    check_gradient(lambda a: tf.cumprod(a, 0), [np.array([[1.5, -2.0], [0.5, 3.0]])])
    with pytest.raises(ValueError):
        tf.cumsum(x, 2)


def test_integer_division_by_zero_is_a_run_time_error():
    x = tf.placeholder(tf.int32, [2])
    for t in (x // tf.constant([1, 0]), x % tf.constant([0, 2])):
        with pytest.raises(tf.errors.InvalidArgumentError, match="division by zero"):
            run(t, {x: [3, 4]}, "interpreter")
    f = tf.placeholder(tf.float32, [2])
    got = run(f // tf.constant([1.0, 0.0]), {f: [3.0, 4.0]}, "interpreter")
    assert got.tolist() == [3.0, np.inf]


def test_truncated_division_follows_c(backend):
    xs, ys = [-7, 7, -7, 7, 0], [2, 2, -2, -2, 3]
    x = tf.placeholder(tf.int32, [5])
    y = tf.placeholder(tf.int32, [5])
    q, r = run([tf.truncatediv(x, y), tf.truncatemod(x, y)], {x: xs, y: ys}, backend)
    assert q.tolist() == [int(a / b) for a, b in zip(xs, ys)]
    assert r.tolist() == [math.fmod(a, b) for a, b in zip(xs, ys)]
    f = tf.placeholder(tf.float64, [2])
    assert run(tf.truncatediv(f, 2.0), {f: [-3.5, 3.5]}, backend).tolist() == [-1.0, 1.0]
    assert tf.accumulate_n([x, y]).op.type == "AddN"
