"""The learning-rate schedules added for TF1 parity."""
from __future__ import annotations

import numpy as np
import pytest

import jitflow as tf

STEPS = (0, 3, 10, 17, 35, 80)


def _build(t, step):
    return [t.train.cosine_decay_restarts(0.1, step, 10),
            t.train.cosine_decay_restarts(0.1, step, 10, t_mul=1.0, m_mul=0.5, alpha=0.1),
            t.train.linear_cosine_decay(0.1, step, 30, num_periods=2, alpha=0.1),
            t.train.piecewise_constant_decay(step, [5, 20], [1.0, 0.5, 0.1])]


def _values(t, sess, outs, step):
    return [[float(sess.run(o, {step: k})) for k in STEPS] for o in outs]


def test_schedules_by_hand():
    step = tf.placeholder(tf.int64, [])
    outs = _build(tf, step)
    with tf.Session() as sess:
        v = _values(tf, sess, outs, step)
    # restarts: period 10, then 20 (t_mul=2); step 10 starts the second period at the top
    assert v[0][0] == pytest.approx(0.1) and v[0][2] == pytest.approx(0.1)
    assert v[0][1] == pytest.approx(0.1 * 0.5 * (1 + np.cos(np.pi * 0.3)), rel=1e-5)
    assert v[3] == pytest.approx([1.0, 1.0, 0.5, 0.5, 0.1, 0.1])


def test_parity_with_tensorflow():
    tf_ref = pytest.importorskip("tensorflow.compat.v1")
    g = tf_ref.Graph()
    with g.as_default():
        step = tf_ref.placeholder(tf_ref.int64, [])
        outs = _build(tf_ref, step)
        with tf_ref.Session() as sess:
            want = _values(tf_ref, sess, outs, step)
    step = tf.placeholder(tf.int64, [])
    outs = _build(tf, step)
    with tf.Session() as sess:
        got = _values(tf, sess, outs, step)
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_noisy_linear_cosine_decay_is_noisy_around_the_linear_one():
    step = tf.placeholder(tf.int64, [])
    tf.set_random_seed(0)
    noisy = tf.train.noisy_linear_cosine_decay(0.1, step, 30, initial_variance=0.01)
    with tf.Session() as sess:
        vals = [sess.run(noisy, {step: 5}) for _ in range(50)]
    assert np.std(vals) > 0
