"""More tf.nn: LRN, activations, pooling/convolution aliases, space_to_depth, moments
helpers, fused_batch_norm, log_poisson_loss, conv2d_backprop_filter, embedding_lookup_sparse."""
from __future__ import annotations

import numpy as np
import pytest

import jitflow as tf

RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 4, 4, 6)).astype(np.float32)
F = RNG.standard_normal((3, 3, 6, 2)).astype(np.float32)
X1 = RNG.standard_normal((2, 9, 3)).astype(np.float32)
F1 = RNG.standard_normal((3, 3, 4)).astype(np.float32)


def _build(t):
    x = t.constant(X)
    lrn = t.nn.lrn(x, 2, 1.0, 0.5, 0.75)
    outs = [lrn, t.gradients(t.reduce_sum(lrn * lrn), x)[0], t.nn.swish(x), t.nn.crelu(x),
            t.nn.relu_layer(t.ones([2, 3]), t.constant(np.arange(12.0, dtype=np.float32)
                                                     .reshape(3, 4) - 4), t.ones([4])),
            t.nn.max_pool2d(x, 2, 2, "SAME"), t.nn.avg_pool2d(x, 2, 2, "VALID"),
            t.nn.atrous_conv2d(x, t.constant(F), 2, "SAME"),
            t.nn.conv1d(t.constant(X1), t.constant(F1), 2, "SAME"), t.space_to_depth(x, 2),
            t.depth_to_space(t.space_to_depth(x, 2), 2),
            t.nn.depth_to_space(t.constant(np.arange(32.0).reshape(1, 2, 2, 8)), 2)]
    cnt, ms, vs, _ = t.nn.sufficient_statistics(x, [0, 1, 2], shift=0.5)
    outs += [cnt, ms, vs, *t.nn.normalize_moments(cnt, ms, vs, 0.5),
             *t.nn.weighted_moments(x, [1, 2], t.constant(RNG.uniform(0, 1, (2, 4, 4, 1))
                                                          .astype(np.float32)))]
    outs += list(t.nn.fused_batch_norm(x, t.ones([6]), t.zeros([6]))[:3])
    outs += [t.nn.log_poisson_loss(t.constant([0.0, 1, 3]), t.constant([0.5, -1, 2]),
                                   compute_full_loss=True),
             t.nn.conv2d_backprop_filter(x, [3, 3, 6, 2], t.constant(
                 RNG.standard_normal((2, 2, 2, 2)).astype(np.float32)), [1, 2, 2, 1], "SAME")]
    sp = t.SparseTensor([[0, 0], [0, 1], [2, 0]], t.constant([1, 3, 0], t.int64), [3, 2])
    spw = t.SparseTensor([[0, 0], [0, 1], [2, 0]], [0.5, 2.0, 1.0], [3, 2])
    emb = t.constant(RNG.standard_normal((4, 3)).astype(np.float32))
    outs += [t.nn.embedding_lookup_sparse(emb, sp, None, combiner="mean"),
             t.nn.embedding_lookup_sparse(emb, sp, spw, combiner="sqrtn"),
             t.nn.embedding_lookup_sparse(emb, sp, spw, combiner="sum")]
    return outs


def test_matches_tensorflow():
    tf_ref = pytest.importorskip("tensorflow.compat.v1")
    global RNG
    RNG = np.random.default_rng(5)
    g = tf_ref.Graph()
    with g.as_default():
        want = tf_ref.Session().run(_build(tf_ref))
    RNG = np.random.default_rng(5)
    with tf.Session() as sess:
        got = sess.run(_build(tf))
    for i, (w, h) in enumerate(zip(want, got)):
        np.testing.assert_allclose(h, w, rtol=1e-4, atol=1e-4, err_msg=str(i))
        assert np.asarray(h).dtype == np.asarray(w).dtype


def test_lrn_by_hand_and_backends_agree():
    x = np.arange(1, 5, dtype=np.float32).reshape(1, 1, 1, 4)
    y = tf.nn.local_response_normalization(x, depth_radius=1, bias=1.0, alpha=1.0, beta=1.0)
    res = {}
    for backend in ("interpreter", "numba"):
        with tf.Session(backend=backend) as sess:
            res[backend] = sess.run(y)
    sums = np.array([1 + 4, 1 + 4 + 9, 4 + 9 + 16, 9 + 16], np.float32)
    np.testing.assert_allclose(res["interpreter"][0, 0, 0], x[0, 0, 0] / (1 + sums),
                               rtol=1e-6)
    np.testing.assert_allclose(res["numba"], res["interpreter"], rtol=1e-6)


def test_space_to_depth_round_trip_and_errors():
    x = tf.constant(X)
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(tf.depth_to_space(tf.space_to_depth(x, 2), 2)),
                                      X)
    with pytest.raises(ValueError, match="divisible"):
        tf.space_to_depth(tf.zeros([1, 3, 4, 1]), 2)
