"""Matrix ops: values and gradients against TensorFlow, and identities by hand."""
from __future__ import annotations

import numpy as np
import pytest

import jitflow as tf

RNG = np.random.default_rng(0)
A = RNG.standard_normal((2, 3, 3)) + 3 * np.eye(3)
S = A @ np.swapaxes(A, -1, -2)
B = RNG.standard_normal((2, 3, 2))


def _build(t):
    a, s, b = t.constant(A), t.constant(S), t.constant(B)
    outs = [t.matrix_inverse(a), t.matrix_determinant(a), t.linalg.slogdet(a)[1],
            t.cholesky(s), t.matrix_solve(a, b), t.matrix_solve(a, b, adjoint=True),
            t.matrix_triangular_solve(t.matrix_band_part(a, -1, 0), b),
            t.linalg.cholesky_solve(t.cholesky(s), b), t.einsum("bij,bjk->bik", a, b),
            t.einsum("bij->bj", a), t.matrix_diag(b[..., 0]), t.matrix_diag_part(a),
            t.matrix_set_diag(a, b[..., 0]), t.matrix_band_part(a, 0, 1), t.trace(a),
            t.diag(b[0]), t.diag_part(t.diag(b[0])), t.linalg.logdet(s)]
    loss = t.add_n([t.reduce_sum(o * o) for o in outs[:10] + outs[12:15] + outs[17:]])
    return outs + t.gradients(loss, [a, s, b])


def test_matches_tensorflow():
    tf_ref = pytest.importorskip("tensorflow.compat.v1")
    g = tf_ref.Graph()
    with g.as_default():
        want = tf_ref.Session().run(_build(tf_ref))
    with tf.Session() as sess:
        got = sess.run(_build(tf))
    for w, h in zip(want, got):
        np.testing.assert_allclose(h, w, rtol=1e-6, atol=1e-8)
        assert h.dtype == w.dtype


def test_identities(backend):
    a = tf.constant(A)
    with tf.Session() as sess:
        inv, det, sol, (e, v), (s, u, vv), (q, r) = sess.run([
            tf.matrix_inverse(a), tf.matrix_determinant(a), tf.matrix_solve(a, B),
            tf.self_adjoint_eig(tf.constant(S)), tf.svd(a), tf.qr(a)])
    np.testing.assert_allclose(A @ inv, np.broadcast_to(np.eye(3), A.shape), atol=1e-10)
    np.testing.assert_allclose(det, np.linalg.det(A))
    np.testing.assert_allclose(A @ sol, B, atol=1e-10)
    np.testing.assert_allclose(S @ v, v * e[:, None, :], atol=1e-8)
    np.testing.assert_allclose(u @ (s[..., None] * np.swapaxes(vv, -1, -2)), A, atol=1e-10)
    np.testing.assert_allclose(q @ r, A, atol=1e-10)
    with pytest.raises(tf.errors.InvalidArgumentError):
        with tf.Session() as sess:
            sess.run(tf.cholesky(tf.constant(-np.eye(2))))


EIG_MATS = [np.array([[2.0, 1.0], [1.0, 2.0]]), np.diag([3.0, 1.0, 2.0]),
            np.array([[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 5.0]])]


def test_self_adjoint_eig_by_hand():
    x = tf.placeholder(tf.float64, [None, None])
    e, v = tf.linalg.eigh(x)
    with tf.Session() as sess:
        got = [sess.run([e, v], {x: m}) for m in EIG_MATS]
    r = 1 / np.sqrt(2)
    want_w = [[1, 3], [1, 2, 3], [-1, 3, 5]]
    # the eigenvectors (rows here) up to sign: (1, -1)/sqrt2, (1, 1)/sqrt2; e2, e3, e1; ...
    want_v = [[[r, -r], [r, r]], np.eye(3)[[1, 2, 0]],
              [[r, -r, 0], [r, r, 0], [0, 0, 1]]]
    for (w, vec), ww, wv in zip(got, want_w, want_v):
        np.testing.assert_allclose(w, ww, atol=1e-12)
        np.testing.assert_allclose(np.abs(vec), np.abs(np.array(wv).T), atol=1e-12)


def _eig_check(m, w, v, tol):
    np.testing.assert_allclose((v * w[..., None, :]) @ np.swapaxes(v, -1, -2), m, atol=tol)
    np.testing.assert_allclose(np.swapaxes(v, -1, -2) @ v,
                               np.broadcast_to(np.eye(m.shape[-1]), m.shape), atol=tol)


def test_self_adjoint_eig_matches_tensorflow_up_to_sign():
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    rng = np.random.default_rng(5)
    mats = [rng.standard_normal((4, n, n)) for n in (2, 3, 6)]
    mats = [(a + np.swapaxes(a, -1, -2)) / 2 for a in mats] + [m[None] for m in EIG_MATS]
    for m in mats:
        for dt, tol in ((np.float64, 1e-10), (np.float32, 2e-5)):
            results = []
            for t in (tf, tf1):
                with t.Graph().as_default():
                    with t.Session() as sess:
                        results.append(sess.run(t.self_adjoint_eig(t.constant(m.astype(dt)))))
            (w, v), (tw, tv) = results
            assert w.dtype == tw.dtype == v.dtype == dt
            np.testing.assert_allclose(w, tw, atol=tol)
            _eig_check(m, w, v, tol * 10)
            # same columns up to their signs (the eigenvalues here are distinct)
            overlap = np.abs(np.swapaxes(v, -1, -2) @ tv)
            np.testing.assert_allclose(overlap, np.broadcast_to(np.eye(m.shape[-1]), m.shape),
                                       atol=tol * 100)


def test_einsum_gradient_by_finite_differences():
    x = tf.placeholder(tf.float64, [2, 3])
    y = tf.placeholder(tf.float64, [3, 4])
    loss = tf.reduce_sum(tf.einsum("ij,jk->ik", x, y) ** 2) + tf.reduce_sum(
        tf.einsum("ij->i", x) ** 3)
    g = tf.gradients(loss, [x, y])
    vals = {x: RNG.standard_normal((2, 3)), y: RNG.standard_normal((3, 4))}
    with tf.Session(backend="interpreter") as sess:
        got = sess.run(g, vals)
        for t, gv in zip((x, y), got):
            num = np.zeros_like(vals[t])
            for idx in np.ndindex(num.shape):
                d = {k: v.copy() for k, v in vals.items()}
                d[t][idx] += 1e-6
                up = sess.run(loss, d)
                d[t][idx] -= 2e-6
                num[idx] = (up - sess.run(loss, d)) / 2e-6
            np.testing.assert_allclose(gv, num, rtol=1e-5, atol=1e-6)
