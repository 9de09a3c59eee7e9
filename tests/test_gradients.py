"""tf.gradients: registry-generated finite-difference checks and hand-written cases."""
from __future__ import annotations

import importlib

import numpy as np
import pytest

import jitflow as tf
from helpers import build_example, central_difference, example_inputs
from jitflow.ops.registry import REGISTRY, all_op_defs, register


# -- generated from the registry: every example with grad=True, in float64 ----------------------
def _grad_dtype(ex):
    """The example's dtype spec with float inputs in float64, or None without float inputs."""
    specs = []
    for dt in ex.dtypes:
        spec = tuple(dt) if isinstance(dt, tuple) else (dt,) * len(ex.inputs)
        if any(np.dtype(d).kind == "f" for d in spec):
            specs.append(spec)
    if not specs:
        return None
    for spec in specs:
        if "float64" in spec:
            return spec
    return tuple("float64" if np.dtype(d).kind == "f" else d for d in specs[0])


def _grad_params():
    """Examples of differentiable, deterministic ops that have at least one float input."""
    for d in all_op_defs():
        if not d.differentiable or d.stateful or d.kind == "random":
            continue
        first = True
        for i, ex in enumerate(d.examples):
            if not ex.grad:
                continue
            spec = _grad_dtype(ex)
            if spec is None:
                continue
            if not first:
                _LATER.add(id(ex))
            first = False
            yield pytest.param(ex, spec, id=f"{d.type}-{ex.id or i}")


# examples after an op's first: on the compiled backend their gradients run on the quick code
# (compiled in milliseconds), the first example of each op on the optimized code (the registry
# tests and the fuzzer check every mode, Numba included, against the interpreter)
_LATER: set = set()


def _float_outputs(out) -> list:
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    return [t for t in outs if isinstance(t, tf.Tensor) and t.dtype.is_floating]


@pytest.mark.parametrize("ex,dtype", list(_grad_params()))
def test_gradient_matches_finite_differences(ex, dtype, backend, monkeypatch):
    """d sum(out * W) / d x from tf.gradients equals central differences (float64)."""
    if backend == "numba" and id(ex) in _LATER:
        monkeypatch.setenv("JITFLOW_COMPILE", "quick")
    arrays = example_inputs(ex, dtype, seed=1)
    phs, out = build_example(ex, arrays)
    outs = _float_outputs(out)
    assert outs, "an example marked grad=True must have a floating output"
    feed = dict(zip(phs, arrays))
    xs = [(i, p) for i, p in enumerate(phs) if p.dtype.is_floating]
    # The weights W must have the outputs' run-time shapes: one interpreter run finds them.
    with tf.Session(backend="interpreter") as sess:
        values = sess.run(outs, feed)
    rng = np.random.default_rng(2)
    weights = [rng.standard_normal(np.shape(v)).astype(np.asarray(v).dtype) for v in values]
    grads = tf.gradients(outs, [p for _, p in xs], grad_ys=[tf.constant(w) for w in weights])
    # One fetch list (outputs and gradients) so the backend compiles one signature.
    fetches = outs + [g for g in grads if g is not None]
    with tf.Session() as sess:
        def objective(ph, value) -> float:
            f = dict(feed)
            f[ph] = value
            vals = sess.run(fetches, f)[:len(outs)]
            return float(sum(np.sum(np.asarray(v, np.float64) * w)
                             for v, w in zip(vals, weights)))

        got_iter = iter(sess.run(fetches, feed)[len(outs):])
        for (i, ph), g in zip(xs, grads):
            fd = central_difference(lambda v, ph=ph: objective(ph, v), arrays[i], eps=1e-6)
            analytic = np.zeros_like(fd) if g is None else np.asarray(next(got_iter))
            assert analytic.shape == arrays[i].shape, (ph.name, analytic.shape)
            np.testing.assert_allclose(analytic, fd, rtol=1e-4, atol=1e-6,
                                       err_msg=f"gradient w.r.t. input {i}")


# -- hand-written cases --------------------------------------------------------------------------
def test_broadcasting_sums_over_broadcast_axes(backend):
    x = tf.placeholder(tf.float32, [3, 1])
    y = tf.placeholder(tf.float32, [4])
    gx, gy = tf.gradients(x + y, [x, y])
    assert gx.shape.as_list() == [3, 1] and gy.shape.as_list() == [4]
    with tf.Session() as sess:
        vx, vy = sess.run([gx, gy], {x: np.ones((3, 1)), y: np.ones(4)})
    np.testing.assert_array_equal(vx, np.full((3, 1), 4.0, np.float32))
    np.testing.assert_array_equal(vy, np.full(4, 3.0, np.float32))


def test_tensor_used_twice_sums_contributions(backend):
    x = tf.placeholder(tf.float64, [2])
    y = x * x + 3.0 * x
    (g,) = tf.gradients(y, x)
    assert any(op.type == "AddN" for op in tf.get_default_graph().get_operations())
    xv = np.array([1.5, -2.0])
    with tf.Session() as sess:
        np.testing.assert_allclose(sess.run(g, {x: xv}), 2 * xv + 3.0)


def test_unconnected_x_gets_none():
    x = tf.placeholder(tf.float32, [2])
    z = tf.placeholder(tf.float32, [2])
    y = x * 2.0
    assert tf.gradients(y, [x, z])[1] is None
    assert tf.gradients(y, z) == [None]


def test_unconnected_gradients_zero(backend):
    x = tf.placeholder(tf.float32, [2])
    z = tf.placeholder(tf.float32, [3])
    gx, gz = tf.gradients(x * 2.0, [x, z], unconnected_gradients="zero")
    assert gz.shape.as_list() == [3]
    with tf.Session() as sess:
        vx, vz = sess.run([gx, gz], {x: [1.0, 2.0], z: [1.0, 2.0, 3.0]})
    np.testing.assert_array_equal(vz, np.zeros(3, np.float32))
    np.testing.assert_array_equal(vx, [2.0, 2.0])
    with pytest.raises(ValueError):
        tf.gradients(x * 2.0, x, unconnected_gradients="sometimes")


def test_stop_gradient_op_blocks_flow(backend):
    x = tf.placeholder(tf.float32, [])
    y = x * x + tf.stop_gradient(x * x)
    (g,) = tf.gradients(y, x)
    with tf.Session() as sess:
        assert sess.run(g, {x: 3.0}) == pytest.approx(6.0)
    assert tf.gradients(tf.stop_gradient(x), x) == [None]


def test_stop_gradients_argument(backend):
    x = tf.placeholder(tf.float32, [])
    a = x * 2.0
    b = a * x          # db/dx = 4x with a live, 2x with a held constant
    g_all, = tf.gradients(b, x)
    g_stop, = tf.gradients(b, x, stop_gradients=[a])
    with tf.Session() as sess:
        assert sess.run(g_all, {x: 3.0}) == pytest.approx(12.0)
        assert sess.run(g_stop, {x: 3.0}) == pytest.approx(6.0)


def test_relu_and_relu6_gradients_mask_by_their_fed_output(backend):
    """TF's ReluGrad and Relu6Grad take the op's output: where that output is fed, the fed
    values choose which gradients pass, not the input (fuzz seed 23000018, against TF)."""
    x = tf.placeholder(tf.float32, [4])
    r, r6 = tf.nn.relu(x), tf.nn.relu6(x)
    g, g6 = tf.gradients(tf.reduce_sum(r * 3.0), x)[0], tf.gradients(tf.reduce_sum(r6 * 3.0), x)[0]
    xv = np.float32([1.0, 2.0, -1.0, 7.0])
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(g, {x: xv}), [3, 3, 0, 3])
        np.testing.assert_array_equal(sess.run(g6, {x: xv}), [3, 3, 0, 0])
        fed = np.float32([-1.0, 2.0, 5.0, 6.0])
        np.testing.assert_array_equal(sess.run(g, {x: xv, r: fed}), [0, 3, 3, 3])
        np.testing.assert_array_equal(sess.run(g6, {x: xv, r6: fed}), [0, 3, 3, 0])


def test_asinh_and_acosh_gradients_read_their_output(backend):
    """TF's AsinhGrad and AcoshGrad are g / cosh(y) and g / sinh(y) of the output y."""
    x = tf.placeholder(tf.float32, [2])
    a, c = tf.asinh(x), tf.acosh(x)
    ga, gc = tf.gradients(tf.reduce_sum(a), x)[0], tf.gradients(tf.reduce_sum(c), x)[0]
    xv, fed = np.float32([1.5, 2.5]), np.float32([0.5, 2.0])
    with tf.Session() as sess:
        np.testing.assert_allclose(sess.run(ga, {x: xv}), 1 / np.sqrt(xv * xv + 1), rtol=1e-6)
        np.testing.assert_allclose(sess.run(gc, {x: xv}), 1 / np.sqrt(xv * xv - 1), rtol=1e-6)
        np.testing.assert_allclose(sess.run(ga, {x: xv, a: fed}), 1 / np.cosh(fed), rtol=1e-6)
        np.testing.assert_allclose(sess.run(gc, {x: xv, c: fed}), 1 / np.sinh(fed), rtol=1e-6)


def test_grad_ys_weights_the_output(backend):
    x = tf.placeholder(tf.float32, [3])
    y = x * x
    w = np.array([1.0, -2.0, 0.5], np.float32)
    (g,) = tf.gradients(y, x, grad_ys=tf.constant(w))
    xv = np.array([1.0, 2.0, 3.0], np.float32)
    with tf.Session() as sess:
        np.testing.assert_allclose(sess.run(g, {x: xv}), 2 * xv * w)


def test_grad_ys_length_must_match():
    x = tf.placeholder(tf.float32, [])
    with pytest.raises(ValueError):
        tf.gradients([x * 2.0, x * 3.0], x, grad_ys=[tf.constant(1.0)])


def test_list_of_ys_is_summed(backend):
    x = tf.placeholder(tf.float32, [])
    (g,) = tf.gradients([x * 2.0, x * x], x)
    with tf.Session() as sess:
        assert sess.run(g, {x: 5.0}) == pytest.approx(12.0)


def test_integer_input_gets_none(backend):
    n = tf.placeholder(tf.int32, [2])
    x = tf.placeholder(tf.float32, [2])
    y = x * tf.cast(n, tf.float32)
    gn, gx = tf.gradients(y, [n, x])
    assert gn is None
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(gx, {n: [2, 3], x: [1.0, 1.0]}), [2.0, 3.0])


def test_integer_y_gives_none_for_float_x():
    x = tf.placeholder(tf.float32, [2])
    assert tf.gradients(tf.cast(x, tf.int32) * 2, x) == [None]


def test_non_differentiable_op_stops_flow():
    x = tf.placeholder(tf.float32, [2])
    y = tf.cast(tf.greater(x, 0.0), tf.float32)
    assert tf.gradients(y, x) == [None]


def test_op_without_rule_on_path_raises_lookup_error():
    register("TestNoGradOp", infer=lambda op: [(op.inputs[0].dtype, op.inputs[0].shape)],
             ref=lambda op, x: x, differentiable=True)
    try:
        x = tf.placeholder(tf.float32, [2])
        y = tf.get_default_graph().create_op("TestNoGradOp", [x * 2.0], name="foo").outputs[0]
        with pytest.raises(LookupError, match=r"No gradient defined for operation 'foo' "
                                              r"\(op type: TestNoGradOp\)"):
            tf.gradients(y, x)
        # off the path between xs and ys it is never asked for its rule
        z = tf.placeholder(tf.float32, [2])
        assert tf.gradients(y + z, z)[0] is not None
    finally:
        del REGISTRY["TestNoGradOp"]


def test_register_gradient_for_new_op_type_and_override(backend):
    grad_mod = importlib.import_module("jitflow.core.gradients")
    register("TestSquareNoRule", infer=lambda op: [(op.inputs[0].dtype, op.inputs[0].shape)],
             ref=lambda op, x: x * x, differentiable=True)
    try:
        @tf.RegisterGradient("TestSquareNoRule")
        def _square_grad(op, g):
            return [g * 2.0 * op.inputs[0]]

        @tf.RegisterGradient("TestTimesTen")
        def _times_ten(op, g):
            return [g * 10.0]

        with pytest.raises(KeyError):
            tf.RegisterGradient("TestTimesTen")(_times_ten)
        x = tf.placeholder(tf.float32, [])
        y = tf.get_default_graph().create_op("TestSquareNoRule", [x]).outputs[0]
        (g,) = tf.gradients(y, x)
        ident = tf.identity(x)
        ident.op.attrs["_gradient_op_type"] = "TestTimesTen"  # what gradient_override_map sets
        (g10,) = tf.gradients(ident, x)
        with tf.Session() as sess:
            assert sess.run(g, {x: 3.0}) == pytest.approx(6.0)
            assert sess.run(g10, {x: 3.0}) == pytest.approx(10.0)
    finally:
        del REGISTRY["TestSquareNoRule"]
        grad_mod._USER_GRADIENTS.pop("TestSquareNoRule", None)
        grad_mod._USER_GRADIENTS.pop("TestTimesTen", None)


def test_rule_returning_wrong_shape_raises():
    register("TestBadShapeGrad", infer=lambda op: [(op.inputs[0].dtype, op.inputs[0].shape)],
             ref=lambda op, x: x,
             grad=lambda op, g: [tf.constant(np.ones((5,), np.float32))])
    try:
        x = tf.placeholder(tf.float32, [2])
        y = tf.get_default_graph().create_op("TestBadShapeGrad", [x]).outputs[0]
        with pytest.raises(ValueError, match=r"Incompatible shapes.*Input index: 0"):
            tf.gradients(y, x)
    finally:
        del REGISTRY["TestBadShapeGrad"]


def test_not_differentiable_declaration():
    grad_mod = importlib.import_module("jitflow.core.gradients")
    register("TestNotDiff", infer=lambda op: [(op.inputs[0].dtype, op.inputs[0].shape)],
             ref=lambda op, x: x, differentiable=True)
    try:
        tf.NotDifferentiable("TestNotDiff")
        x = tf.placeholder(tf.float32, [])
        y = tf.get_default_graph().create_op("TestNotDiff", [x]).outputs[0]
        assert tf.gradients(y, x) == [None]
    finally:
        del REGISTRY["TestNotDiff"]
        grad_mod._USER_GRADIENTS.pop("TestNotDiff", None)


def test_variable_gradient_flows_through_every_read(backend):
    w = tf.Variable(2.0, name="w")
    y = w * w + 3.0 * w.read_value()
    (g,) = tf.gradients(y, w)
    (g_ref,) = tf.gradients(y, w._ref())
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert sess.run(g) == pytest.approx(7.0)
        assert sess.run(g_ref) == pytest.approx(7.0)


def test_gradient_ops_live_in_gradients_scope():
    x = tf.placeholder(tf.float32, [], name="x")
    y = tf.multiply(x, x, name="sq")
    (g,) = tf.gradients(y, x)
    assert g.op.name.startswith("gradients/")
    names = [op.name for op in tf.get_default_graph().get_operations()]
    assert any(n.startswith("gradients/sq_grad/") for n in names)


def test_20000_op_chain_has_no_recursion_error():
    """10,000 multiplications by a constant (20,000 ops) differentiate and evaluate."""
    x = tf.placeholder(tf.float64, [])
    y = x
    c = 1.0 + 2.0 ** -13  # exact in float32 and float64
    for _ in range(10000):
        y = y * c
    assert len(tf.get_default_graph().get_operations()) >= 20000
    (g,) = tf.gradients(y, x)
    with tf.Session(backend="interpreter") as sess:
        assert sess.run(g, {x: 1.0}) == pytest.approx(c ** 10000, rel=1e-9)


def test_x_that_is_also_y_gets_grad_ys():
    x = tf.placeholder(tf.float32, [2])
    (g,) = tf.gradients(x, x)
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(g, {x: [3.0, 4.0]}), [1.0, 1.0])


def test_gradient_wrt_intermediate_tensor(backend):
    x = tf.placeholder(tf.float32, [])
    h = x * 3.0
    y = h * h
    gh, gx = tf.gradients(y, [h, x])
    with tf.Session() as sess:
        vh, vx = sess.run([gh, gx], {x: 2.0})
    assert vh == pytest.approx(12.0) and vx == pytest.approx(36.0)


def test_second_derivative(backend):
    x = tf.placeholder(tf.float64, [])
    y = x * x * x
    (g,) = tf.gradients(y, x)
    (g2,) = tf.gradients(g, x)
    with tf.Session() as sess:
        assert sess.run(g2, {x: 2.0}) == pytest.approx(12.0)


def test_hessians_of_quadratic_form(backend):
    if not (hasattr(tf, "stack") and hasattr(tf, "reshape") and hasattr(tf, "reduce_sum")):
        pytest.xfail("tf.stack / tf.reshape / tf.reduce_sum not available")
    a = np.array([[2.0, 1.0], [0.5, 3.0]])
    x = tf.placeholder(tf.float64, [2])
    y = tf.reduce_sum(x * tf.reduce_sum(tf.constant(a) * x, axis=1))  # x^T A x
    (h,) = tf.hessians(y, x)
    assert h.shape.as_list() == [2, 2]
    with tf.Session() as sess:
        np.testing.assert_allclose(sess.run(h, {x: [1.0, -1.0]}), a + a.T)


def test_sqrt_rsqrt_reciprocal_gradients_are_zero_where_the_incoming_gradient_is(backend):
    """TF's SqrtGrad, RsqrtGrad and ReciprocalGrad kernels give 0 wherever the incoming gradient
    is 0, even where y is 0, inf or nan (0 * inf would be nan): an empty slice of sqrt(x) of a
    negative x has gradient 0, not nan. Elsewhere: 0.5/sqrt(x), -0.5*x^-1.5, -1/x^2."""
    x = tf.placeholder(tf.float32, [4])
    xv = np.array([-1.0, 0.0, 4.0, 0.25], np.float32)
    w = tf.constant(np.array([1.0, 0.0, 2.0, 1.0], np.float32))
    ys = [tf.sqrt(x), tf.rsqrt(x), tf.reciprocal(x)]
    grads = [tf.gradients(tf.reduce_sum(y * w), x)[0] for y in ys]
    empty = tf.gradients(tf.reduce_sum(tf.sqrt(x)[1:1]), x)[0]
    with tf.Session() as sess:
        gs, ge = sess.run([grads, empty], {x: xv})
    with np.errstate(all="ignore"):
        want = [np.where(w_ == 0, 0, w_ * f) for w_, f in
                [(np.array([1, 0, 2, 1], np.float32), 0.5 / np.sqrt(xv)),
                 (np.array([1, 0, 2, 1], np.float32), -0.5 * xv ** -1.5),
                 (np.array([1, 0, 2, 1], np.float32), -1 / xv ** 2)]]
    for g, e in zip(gs, want):
        np.testing.assert_allclose(g, e, rtol=1e-6)
    np.testing.assert_array_equal(ge, np.zeros(4, np.float32))
    assert grads[0].op.type == "SqrtGrad" and grads[0].op.name.endswith("Sqrt_grad/SqrtGrad")
