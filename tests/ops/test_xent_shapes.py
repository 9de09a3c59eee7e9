"""softmax_cross_entropy_with_logits(_v2) with labels of another shape than the logits, as TF:
both are flattened to [-1, classes] and the 2-D op broadcasts them."""
from __future__ import annotations

import numpy as np
import pytest

import jitflow as tf

RNG = np.random.default_rng(0)
LOGITS = RNG.standard_normal((2, 3)).astype(np.float32)
LABELS = {
    "higher_rank": np.abs(RNG.standard_normal((2, 1, 3))).astype(np.float32),
    "vector": np.array([0.2, 0.3, 0.5], np.float32),
    "leading_one": np.abs(RNG.standard_normal((1, 2, 3))).astype(np.float32),
    "int_onehot": np.array([[0, 1, 0], [1, 0, 0]], np.int32),
}


def _np_xent(labels, logits):
    lab = np.asarray(labels, np.float64).reshape(-1, logits.shape[-1])
    lg = logits.astype(np.float64).reshape(-1, logits.shape[-1])
    lse = np.log(np.exp(lg).sum(-1, keepdims=True))
    return -(lab * (lg - lse)).sum(-1).reshape(logits.shape[:-1]) if lab.shape[0] != 1 \
        else -(lab * (lg - lse)).sum(-1)


@pytest.mark.parametrize("case", sorted(LABELS))
def test_values_match_numpy(backend, case):
    y = tf.nn.softmax_cross_entropy_with_logits_v2(labels=LABELS[case], logits=LOGITS)
    assert y.shape.as_list() == [2]
    with tf.Session() as sess:
        got = sess.run(y)
    np.testing.assert_allclose(got, _np_xent(LABELS[case], LOGITS), rtol=1e-5)


def test_gradient_of_higher_rank_labels_by_finite_differences():
    lg = tf.placeholder(tf.float64, [2, 3])
    rows = LABELS["higher_rank"].astype(np.float64)
    lab = tf.constant(rows / rows.sum(-1, keepdims=True))  # TF's gradient assumes rows sum to 1
    loss = tf.reduce_sum(tf.nn.softmax_cross_entropy_with_logits_v2(labels=lab, logits=lg)
                         * tf.constant([1.0, 2.0], tf.float64))
    g = tf.gradients(loss, lg)[0]
    x = LOGITS.astype(np.float64)
    with tf.Session(backend="interpreter") as sess:
        got = sess.run(g, {lg: x})
        num = np.zeros_like(x)
        for idx in np.ndindex(x.shape):
            d = x.copy()
            d[idx] += 1e-6
            up = sess.run(loss, {lg: d})
            d[idx] -= 2e-6
            num[idx] = (up - sess.run(loss, {lg: d})) / 2e-6
    np.testing.assert_allclose(got, num, rtol=1e-6, atol=1e-7)


def test_run_time_shapes_and_errors():
    p = tf.placeholder(tf.float32, [None, None, 3])
    y = tf.nn.softmax_cross_entropy_with_logits_v2(labels=p, logits=LOGITS)
    assert y.shape.as_list() == [2]
    with tf.Session() as sess:
        np.testing.assert_allclose(sess.run(y, {p: LABELS["higher_rank"]}),
                                   _np_xent(LABELS["higher_rank"], LOGITS), rtol=1e-5)
        with pytest.raises(tf.errors.InvalidArgumentError):
            sess.run(y, {p: np.ones((4, 2, 3), np.float32)})
    with pytest.raises(ValueError):
        tf.nn.softmax_cross_entropy_with_logits_v2(labels=np.ones((4, 2, 3), np.float32),
                                                   logits=LOGITS)


def test_v1_flattens_too_and_gives_labels_no_gradient():
    lab = tf.constant(LABELS["higher_rank"])
    lg = tf.constant(LOGITS)
    y = tf.nn.softmax_cross_entropy_with_logits(labels=lab, logits=lg)
    assert tf.gradients(y, lab)[0] is None
    with tf.Session() as sess:
        np.testing.assert_allclose(sess.run(y), _np_xent(LABELS["higher_rank"], LOGITS),
                                   rtol=1e-5)


@pytest.mark.parametrize("case", sorted(LABELS))
def test_parity_with_tensorflow(case):
    tf_ref = pytest.importorskip("tensorflow.compat.v1")
    g = tf_ref.Graph()
    with g.as_default():
        want = tf_ref.Session().run(tf_ref.nn.softmax_cross_entropy_with_logits_v2(
            labels=LABELS[case], logits=LOGITS))
    with tf.Session() as sess:
        got = sess.run(tf.nn.softmax_cross_entropy_with_logits_v2(labels=LABELS[case],
                                                                  logits=LOGITS))
    np.testing.assert_allclose(got, want, rtol=1e-5)
