"""nce_loss, sampled_softmax_loss and sharded embedding_lookup: values and gradients against
TensorFlow with the same sampled classes, and the training step compiled natively."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import jitflow as tf
from pipeline_helpers import native_steps

RNG = np.random.default_rng(0)
V, D, B = 20, 4, 5
W = RNG.standard_normal((V, D)).astype(np.float32)
BIAS = RNG.standard_normal(V).astype(np.float32)
X = RNG.standard_normal((B, D)).astype(np.float32)


def _shards(t, a, strategy):
    if strategy == "div":
        return [t.constant(a[:7]), t.constant(a[7:14]), t.constant(a[14:])]
    return [t.constant(a[i::3]) for i in range(3)]


def _losses(t, num_true, rah, strategy):
    rng = np.random.default_rng(num_true)
    lab = rng.integers(0, V, (B, num_true)).astype(np.int64)
    sampled = np.array([3, 0, lab[0, 0], 7], np.int64)
    te = rng.uniform(0.1, 0.9, (B, num_true)).astype(np.float32)
    se = rng.uniform(0.1, 0.9, 4).astype(np.float32)
    ws, bs, x = _shards(t, W, strategy), _shards(t, BIAS, strategy), t.constant(X)
    sv = (t.constant(sampled), t.constant(te), t.constant(se))
    l1 = t.nn.nce_loss(ws, bs, t.constant(lab), x, 4, V, num_true=num_true, sampled_values=sv,
                       remove_accidental_hits=rah, partition_strategy=strategy)
    l2 = t.nn.sampled_softmax_loss(t.constant(W), t.constant(BIAS), t.constant(lab), x, 4, V,
                                   num_true=num_true, sampled_values=sv,
                                   remove_accidental_hits=rah)
    grads = t.gradients(t.reduce_sum(l1) + 2.0 * t.reduce_sum(l2), ws + [x])
    return [l1, l2] + [t.convert_to_tensor(g) for g in grads]


CASES = [(n, r, s) for n in (1, 2) for r in (False, True) for s in ("mod", "div")]


@pytest.mark.parametrize("num_true,rah,strategy", CASES)
def test_matches_tensorflow(num_true, rah, strategy):
    tf_ref = pytest.importorskip("tensorflow.compat.v1")
    g = tf_ref.Graph()
    with g.as_default():
        want = tf_ref.Session().run(_losses(tf_ref, num_true, rah, strategy))
    for backend in ("interpreter", "numba"):
        tf.reset_default_graph()
        with tf.Session(backend=backend) as sess:
            got = sess.run(_losses(tf, num_true, rah, strategy))
        for w, h in zip(want, got):
            np.testing.assert_allclose(h, w, rtol=2e-5, atol=2e-5)


# both strategies and both accidental-hit settings (the TensorFlow test above runs all CASES)
@pytest.mark.parametrize("num_true,rah,strategy", [(1, False, "div"), (1, True, "mod")])
def test_backends_agree(num_true, rah, strategy):
    res = {}
    for backend in ("interpreter", "numba"):
        tf.reset_default_graph()
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            with tf.Session(backend=backend) as sess:
                res[backend] = sess.run(_losses(tf, num_true, rah, strategy))
    for a, b in zip(res["numba"], res["interpreter"]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_nce_by_hand():
    """One example, one sampled class, no corrections: the logistic losses of the logits."""
    w = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]], np.float32)
    b = np.array([0.5, -0.5, 0.0], np.float32)
    x = np.array([[2.0, 1.0]], np.float32)
    sv = (tf.constant([2], tf.int64), tf.constant([[1.0]]), tf.constant([1.0]))
    loss = tf.nn.nce_loss(w, b, tf.constant([[1]], tf.int64), x, 1, 3, sampled_values=sv)
    true_logit = 0 * 2 + 2 * 1 - 0.5
    samp_logit = 2 + 1 + 0.0

    def softplus(z):
        return np.log1p(np.exp(z))
    with tf.Session() as sess:
        got = sess.run(loss)
    np.testing.assert_allclose(got, [softplus(-true_logit) + softplus(samp_logit)], rtol=1e-6)


def test_embedding_lookup_sharded_matches_one_table(backend):
    ids = tf.placeholder(tf.int32, [None, 2])
    want = W[[[0, 5], [19, 7], [13, 14]]]
    for strategy in ("mod", "div"):
        e = tf.nn.embedding_lookup(_shards(tf, W, strategy), ids, partition_strategy=strategy)
        assert e.shape.as_list() == [None, 2, D]
        with tf.Session() as sess:
            np.testing.assert_array_equal(sess.run(e, {ids: [[0, 5], [19, 7], [13, 14]]}),
                                          want)


def test_word2vec_step_compiles_and_learns():
    """A skip-gram step with nce_loss: the sampler runs on the host, the step is one kernel,
    the large embedding tables are updated in place row by row, and the loss falls."""
    vocab, dim, batch = 600, 128, 16
    rng = np.random.default_rng(1)
    tf.set_random_seed(1)
    x = tf.placeholder(tf.int32, [batch])
    y = tf.placeholder(tf.int64, [batch, 1])
    emb = tf.Variable(tf.random_uniform([vocab, dim], -1.0, 1.0))
    w = tf.Variable(tf.truncated_normal([vocab, dim], stddev=0.1))
    b = tf.Variable(tf.zeros([vocab]))
    loss = tf.reduce_mean(tf.nn.nce_loss(w, b, y, tf.nn.embedding_lookup(emb, x), 8, vocab))
    train = tf.train.GradientDescentOptimizer(1.0).minimize(loss)
    assert any(op.type == "SparseApplyGradientDescent" for op in tf.get_default_graph()
               .get_operations())
    xs = rng.integers(0, 40, batch).astype(np.int32)
    ys = ((xs + 1) % 40)[:, None].astype(np.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with tf.Session(backend="numba") as sess:
            sess.run(tf.global_variables_initializer())
            # each evaluation draws new negatives: average a few
            first = np.mean([sess.run(loss, {x: xs, y: ys}) for _ in range(10)])
            for _ in range(100):
                sess.run(train, {x: xs, y: ys})
            last = np.mean([sess.run(loss, {x: xs, y: ys}) for _ in range(10)])
            steps = native_steps(sess, train)
    assert last < 0.5 * first
    kinds = [k for k, _ in steps]
    assert kinds.count("native") == 1, steps
    assert ("host", "LogUniformCandidateSampler") in steps
    assert ("host", "SparseApplyGradientDescent") in steps
