"""Linear algebra: matmul shapes, errors and transposes, batch matmul broadcasting, integer
matmul, tensordot, norm, and their gradients."""
from __future__ import annotations

import numpy as np
import pytest

import jitflow as tf
from test_math import check_gradient, run


def test_matmul_shape_error_has_tf1_message():
    a = tf.placeholder(tf.float32, [2, 3])
    b = tf.placeholder(tf.float32, [4, 5])
    with pytest.raises(ValueError) as e:
        tf.matmul(a, b)
    assert str(e.value) == ("Dimensions must be equal, but are 3 and 4 for 'MatMul' (op: "
                            "'MatMul') with input shapes: [2,3], [4,5].")
    with pytest.raises(ValueError, match="rank"):
        tf.matmul(tf.placeholder(tf.float32, [3]), b)
    with pytest.raises(TypeError):
        tf.matmul(a, tf.placeholder(tf.float64, [3, 2]))
    with pytest.raises(TypeError):
        tf.matmul(tf.placeholder(tf.bool, [2, 2]), tf.placeholder(tf.bool, [2, 2]))


def test_matmul_static_shapes():
    a = tf.placeholder(tf.float32, [None, 3])
    w = tf.placeholder(tf.float32, [3, 7])
    assert tf.matmul(a, w).shape.as_list() == [None, 7]
    assert tf.matmul(w, a, transpose_a=True, transpose_b=True).shape.as_list() == [7, None]
    assert tf.matmul(a, tf.placeholder(tf.float32, [None, None])).shape.as_list() == [None, None]
    mm = tf.matmul(a, w)
    assert mm.op.type == "MatMul" and mm.op.name.startswith("MatMul")
    assert mm.op.get_attr("transpose_a") is False
    assert tf.linalg.matmul is tf.matmul
    b = tf.matmul(tf.placeholder(tf.float32, [5, 1, 2, 3]), tf.placeholder(tf.float32, [4, 3, 6]))
    assert b.op.type == "BatchMatMulV2" and b.shape.as_list() == [5, 4, 2, 6]
    with pytest.raises(ValueError):
        tf.matmul(tf.placeholder(tf.float32, [2, 2, 3]), tf.placeholder(tf.float32, [3, 3, 4]))
    with pytest.raises(ValueError):
        tf.matmul(a, w, transpose_a=True, adjoint_a=True)


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_matmul_transposes(backend, ta, tb):
    rng = np.random.default_rng(0)
    av = rng.standard_normal((3, 2) if ta else (2, 3)).astype(np.float32)
    bv = rng.standard_normal((4, 3) if tb else (3, 4)).astype(np.float32)
    a = tf.placeholder(tf.float32, av.shape)
    b = tf.placeholder(tf.float32, bv.shape)
    got = run(tf.matmul(a, b, transpose_a=ta, transpose_b=tb), {a: av, b: bv}, backend)
    want = (av.T if ta else av).astype(np.float64) @ (bv.T if tb else bv)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert got.dtype == np.float32


def test_integer_matmul(backend):
    a = tf.constant([[1, 2], [3, 4]])
    b = tf.constant([[5, -6], [7, 8]])
    got = run(a @ b, backend=backend)
    assert got.dtype == np.int32
    assert got.tolist() == [[1 * 5 + 2 * 7, -6 + 16], [15 + 28, -18 + 32]]


def test_matmul_with_python_operand():
    a = tf.placeholder(tf.float64, [2, 2])
    out = a @ [[1.0], [2.0]]
    assert out.dtype == tf.float64 and out.shape.as_list() == [2, 1]
    np.testing.assert_allclose(run(out, {a: [[1, 2], [3, 4]]}), [[5], [11]])


def test_batch_matmul_broadcasts_batch_dims(backend):
    rng = np.random.default_rng(1)
    av = rng.standard_normal((2, 1, 3, 4))
    bv = rng.standard_normal((5, 4, 2))
    a = tf.placeholder(tf.float64, av.shape)
    b = tf.placeholder(tf.float64, bv.shape)
    got = run(tf.matmul(a, b), {a: av, b: bv}, backend)
    want = np.einsum("xyij,zjk->xzik", av, bv)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_tensordot(backend):
    rng = np.random.default_rng(2)
    av, bv = rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 3, 5))
    a = tf.placeholder(tf.float64, av.shape)
    b = tf.placeholder(tf.float64, bv.shape)
    t = tf.tensordot(a, b, [[1, 2], [1, 0]])
    assert t.shape.as_list() == [2, 5]
    got = run(t, {a: av, b: bv}, backend)
    np.testing.assert_allclose(got, np.einsum("ijk,kjl->il", av, bv), rtol=1e-12)
    with pytest.raises(ValueError):
        tf.tensordot(a, b, [[0], [0]])


def test_tensordot_of_unknown_rank(backend):
    u = tf.placeholder(tf.float64, None, name="u")
    b = tf.placeholder(tf.float64, [3, 2], name="b")
    uv = np.arange(12.0).reshape(2, 2, 3)
    bv = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, -1.0]])
    cases = [tf.tensordot(u, b, 1), tf.tensordot(u, b, [[-1], [0]]),
             tf.tensordot(b, u, [[0], [2]]), tf.tensordot(u, b, [[2, 1], [0, 1]]),
             tf.tensordot(u, u, 0)]
    for t in cases:
        assert t.shape.ndims is None
    r1, r2, r3, full, outer = run(cases, {u: uv, b: bv}, backend)
    # by hand: out[i, j, k] = sum_l u[i, j, l] * b[l, k]; u[0, 1] = [3, 4, 5]
    assert r1[0, 1].tolist() == [3 + 5, 8 - 5]
    np.testing.assert_array_equal(r2, r1)
    np.testing.assert_array_equal(r3, np.transpose(r1, (2, 0, 1)))
    # full[i] = sum_{l, j} u[i, j, l] * b[l, j]: u[1] = [[6, 7, 8], [9, 10, 11]]
    assert full.tolist()[1] == 6 + 8 + 2 * 10 - 11
    assert outer.shape == (2, 2, 3, 2, 2, 3) and outer[1, 0, 2, 0, 1, 1] == 8 * 4
    gu, gb = tf.gradients(tf.reduce_sum(cases[0]), [u, b])
    gu_v, gb_v = run([gu, gb], {u: uv, b: bv}, backend)
    np.testing.assert_array_equal(gu_v, np.broadcast_to(bv.sum(1), uv.shape))
    np.testing.assert_array_equal(gb_v, np.broadcast_to(uv.sum((0, 1))[:, None], (3, 2)))
    with pytest.raises(tf.errors.InvalidArgumentError, match="Matrix size-incompatible"):
        run(cases[0], {u: uv[..., :2], b: bv}, backend)
    with pytest.raises(ValueError, match="must be at least 0"):
        tf.tensordot(u, b, -1)
    with pytest.raises(ValueError, match="integer or have length 2"):
        tf.tensordot(u, b, [[1]])
    with pytest.raises(ValueError, match="Different number of contraction axes"):
        tf.tensordot(u, b, [[1, 2], [0]])


def test_tensordot_axes_forms_names_and_errors():
    a = tf.placeholder(tf.float32, [2, 3], name="a")
    b = tf.placeholder(tf.float32, [3, 4], name="b")
    assert tf.tensordot(a, b, 1).name == "Tensordot/MatMul:0"
    assert tf.tensordot(a, b, [[1], [0]]).name == "Tensordot_1/MatMul:0"
    t = tf.tensordot(a, b, 0)
    assert t.name == "Tensordot_2:0" and t.shape.as_list() == [2, 3, 3, 4]
    assert tf.tensordot(a, b, tf.constant([[1], [0]])).shape.as_list() == [2, 4]
    assert tf.tensordot(a, b, np.array([[-1], [0]])).shape.as_list() == [2, 4]
    assert tf.tensordot(tf.placeholder(tf.float32, [None, 3]), b, 1).name == "Tensordot_5:0"
    with pytest.raises(ValueError, match="must not be larger than the number of dimensions"):
        tf.tensordot(a, b, 3)
    with pytest.raises(IndexError):
        tf.tensordot(a, b, [[1], [2]])
    with pytest.raises(TypeError):
        tf.tensordot(a, tf.placeholder(tf.float64, [3]), 1)
    n = tf.placeholder(tf.int32, [2, 1])
    t = tf.tensordot(a, b, n)
    assert t.shape.ndims is None
    with tf.Session() as sess:
        got = sess.run(t, {a: np.ones((2, 3)), b: np.ones((3, 4)), n: [[1], [0]]})
    np.testing.assert_array_equal(got, np.full((2, 4), 3.0))


def test_tensordot_unknown_rank_matches_tensorflow():
    tf_ref = pytest.importorskip("tensorflow.compat.v1")
    rng = np.random.default_rng(3)
    uv, bv = rng.standard_normal((2, 5, 3)), rng.standard_normal((3, 4))

    def build(t):
        u = t.placeholder(t.float64, None, name="u")
        b = t.placeholder(t.float64, [3, 4], name="b")
        outs = [t.tensordot(u, b, 1), t.tensordot(u, b, [[-1], [0]]),
                t.tensordot(t.transpose(b), u, [[1], [2]]), t.tensordot(u, u, 0),
                t.tensordot(b, b, t.constant([[0], [0]]))]
        outs += t.gradients(t.reduce_sum(outs[0] * outs[0]), [u, b])
        return outs, {u: uv, b: bv}

    with tf_ref.Graph().as_default():
        outs, feed = build(tf_ref)
        names = [(o.name, o.shape.ndims) for o in outs[:5]]
        want = tf_ref.Session().run(outs, feed)
    outs, feed = build(tf)
    assert [(o.name, o.shape.ndims) for o in outs[:5]] == names
    with tf.Session() as sess:
        got = sess.run(outs, feed)
    for w, h in zip(want, got):
        np.testing.assert_allclose(h, w, rtol=1e-12, atol=1e-12)


def test_norm(backend):
    x = tf.placeholder(tf.float64, [2, 3])
    v = np.array([[3.0, -4.0, 0.0], [1.0, 2.0, -2.0]])
    e, rows, one, inf = run([tf.norm(x), tf.norm(x, axis=1, keepdims=True),
                             tf.norm(x, ord=1, axis=1), tf.norm(x, ord=np.inf, axis=1)],
                            {x: v}, backend)
    np.testing.assert_allclose(e, np.sqrt(34.0))
    np.testing.assert_allclose(rows, [[5.0], [3.0]])
    np.testing.assert_allclose(one, [7.0, 5.0])
    np.testing.assert_allclose(inf, [4.0, 2.0])
    p3 = run(tf.norm(x, ord=3, axis=1), {x: v}, backend)
    np.testing.assert_allclose(p3, [(27 + 64) ** (1 / 3), (1 + 8 + 8) ** (1 / 3)])
    with pytest.raises(ValueError):
        tf.norm(x, ord="nuclear")
    with pytest.raises(ValueError):
        tf.norm(x, ord=-1)


_RNG = np.random.default_rng(4)


@pytest.mark.parametrize("ta,tb", [(False, False), (False, True), (True, False), (True, True)])
def test_matmul_gradients(ta, tb):
    a = _RNG.standard_normal((3, 2) if ta else (2, 3))
    b = _RNG.standard_normal((4, 3) if tb else (3, 4))
    check_gradient(lambda x, y: tf.matmul(x, y, transpose_a=ta, transpose_b=tb), [a, b])


def test_batch_matmul_gradient_sums_broadcast_batches():
    a = _RNG.standard_normal((2, 1, 2, 3))
    b = _RNG.standard_normal((3, 3, 2))
    check_gradient(lambda x, y: tf.matmul(x, y), [a, b])
    check_gradient(lambda x, y: tf.matmul(x, y, transpose_a=True, transpose_b=True),
                   [_RNG.standard_normal((2, 3, 2)), _RNG.standard_normal((2, 4, 3))])


def test_tensordot_and_norm_gradients():
    check_gradient(lambda x, y: tf.tensordot(x, y, [[0, 2], [2, 1]]),
                   [_RNG.standard_normal((2, 3, 4)), _RNG.standard_normal((5, 4, 2))])
    check_gradient(lambda x, y: tf.tensordot(x, y, 1),
                   [_RNG.standard_normal((2, 3)), _RNG.standard_normal((3, 2))])
    check_gradient(lambda x: tf.norm(x, axis=1), [_RNG.standard_normal((2, 3))])


def test_clip_by_norm(backend):
    t = tf.placeholder(tf.float64, [2, 2])
    v = np.array([[3.0, 4.0], [0.3, 0.4]])
    whole, rows, zero = run([tf.clip_by_norm(t, 1.0), tf.clip_by_norm(t, 1.0, axes=[1]),
                             tf.clip_by_norm(tf.zeros([2], tf.float64), 1.0)], {t: v}, backend)
    np.testing.assert_allclose(whole, v / np.linalg.norm(v))
    np.testing.assert_allclose(rows, [[0.6, 0.8], [0.3, 0.4]])
    assert zero.tolist() == [0.0, 0.0]
    check_gradient(lambda x: tf.clip_by_norm(x, 1.0), [v])


def test_global_norm_and_clip_by_global_norm(backend):
    a = tf.placeholder(tf.float32, [2])
    b = tf.placeholder(tf.float32, [1, 2])
    av, bv = np.float32([3, 0]), np.float32([[0, 4]])
    clipped, norm = tf.clip_by_global_norm([a, None, b], 2.5)
    assert clipped[1] is None
    got_a, got_b, got_norm, gn = run([clipped[0], clipped[2], norm, tf.global_norm([a, b])],
                                     {a: av, b: bv}, backend)
    assert got_norm == gn == 5.0
    np.testing.assert_allclose(got_a, av / 2)
    np.testing.assert_allclose(got_b, bv / 2)
    small, _ = tf.clip_by_global_norm([a], 10.0)
    np.testing.assert_allclose(run(small[0], {a: av}, backend), av)
    with pytest.raises(TypeError):
        tf.clip_by_global_norm(a, 1.0)


def test_clip_by_average_norm(backend):
    t = tf.placeholder(tf.float64, [4])
    v = np.array([3.0, 4.0, 0.0, 0.0])  # l2norm 5, average norm 5 / 4
    got = run(tf.clip_by_average_norm(t, 0.5), {t: v}, backend)
    np.testing.assert_allclose(got, v * 0.5 * 4 / 5)
    np.testing.assert_allclose(run(tf.clip_by_average_norm(t, 2.0), {t: v}, backend), v)


def _sparse_clip(t):
    s = t.IndexedSlices(t.constant([[3.0, 0.0], [0.0, 4.0]]), t.constant([2, 0]),
                        t.constant([3, 2]))
    d = t.constant([0.0, 0.0, 0.0])
    out, norm = t.clip_by_global_norm([s, None, d], 2.5)
    return out, norm, t.global_norm([s, d])


def test_clip_by_global_norm_keeps_indexed_slices(backend):
    (s, none, d), norm, gn = _sparse_clip(tf)
    assert isinstance(s, tf.IndexedSlices) and none is None
    got = run([s.values, s.indices, s.dense_shape, norm, gn, d], {}, backend)
    np.testing.assert_allclose(got[0], [[1.5, 0.0], [0.0, 2.0]])   # scaled by 2.5 / 5
    np.testing.assert_array_equal(got[1], [2, 0])
    np.testing.assert_array_equal(got[2], [3, 2])
    assert got[3] == got[4] == 5.0
    np.testing.assert_array_equal(got[5], [0, 0, 0])


def test_clip_by_global_norm_of_indexed_slices_matches_tensorflow():
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    tf1.disable_eager_execution()
    g = tf1.Graph()
    with g.as_default():
        (s, _, d), norm, gn = _sparse_clip(tf1)
        assert isinstance(s, tf1.IndexedSlices)
        with tf1.Session() as sess:
            want = sess.run([s.values, s.indices, norm, gn, d])
    (s, _, d), norm, gn = _sparse_clip(tf)
    with tf.Session() as sess:
        got = sess.run([s.values, s.indices, norm, gn, d])
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-6)
        assert np.asarray(a).dtype == np.asarray(b).dtype
