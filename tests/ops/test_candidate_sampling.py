"""Candidate samplers and compute_accidental_hits: distributions, TF's expected-count formula,
seeding, the learned sampler's counts."""
from __future__ import annotations

import numpy as np
import pytest

import jitflow as tf
from jitflow.core import errors
from jitflow.ops.candidate_sampling import _LogUniform, expected_count

LABELS = np.array([[1], [5], [5]], np.int64)


def _draw(build, runs=1, seed=7):
    tf.reset_default_graph()
    tf.set_random_seed(seed)
    out = build(tf.constant(LABELS))
    with tf.Session() as sess:
        return [sess.run(out) for _ in range(runs)]


def test_log_uniform_unique_sample_and_counts(backend):
    (s, t, e), = _draw(lambda lab: tf.nn.log_uniform_candidate_sampler(lab, 1, 8, True, 50))
    assert s.dtype == np.int64 and s.shape == (8,) and len(set(s.tolist())) == 8
    assert t.shape == (3, 1) and t.dtype == np.float32 and e.shape == (8,)
    assert np.all((s >= 0) & (s < 50))
    p = _LogUniform(50).prob(s)
    # one tries count explains every expected count: 1 - (1 - p)^tries (or p * 8 if no repeat)
    tries = [np.log1p(-ei) / np.log1p(-pi) for ei, pi in zip(e.astype(np.float64), p)]
    if not np.allclose(e, p * 8, rtol=1e-5):
        assert np.ptp(tries) < 1e-2 * np.mean(tries) and np.mean(tries) > 8
    pt = _LogUniform(50).prob(LABELS)
    np.testing.assert_allclose(t, expected_count(pt, 8, round(float(np.mean(tries))))
                               if not np.allclose(e, p * 8, rtol=1e-5) else pt * 8, rtol=1e-3)


def test_log_uniform_frequencies_follow_the_distribution():
    (s, _, _), = _draw(lambda lab: tf.nn.log_uniform_candidate_sampler(lab, 1, 20000, False,
                                                                       10))
    freq = np.bincount(s, minlength=10) / s.size
    np.testing.assert_allclose(freq, _LogUniform(10).prob(np.arange(10)), atol=0.015)


def test_uniform_and_fixed_unigram(backend):
    (s, t, e), = _draw(lambda lab: tf.nn.uniform_candidate_sampler(lab, 1, 6, False, 50))
    np.testing.assert_allclose(e, 6 / 50) and np.testing.assert_allclose(t, 6 / 50)
    (s, t, e), = _draw(lambda lab: tf.nn.fixed_unigram_candidate_sampler(
        lab, 1, 4000, False, 6, unigrams=[1, 2, 3, 4, 5, 6], distortion=0.5,
        num_reserved_ids=0))
    w = np.sqrt(np.arange(1, 7))
    np.testing.assert_allclose(e, w[s] / w.sum() * 4000, rtol=1e-5)
    np.testing.assert_allclose(np.bincount(s, minlength=6) / 4000, w / w.sum(), atol=0.03)
    (s, _, _), = _draw(lambda lab: tf.nn.fixed_unigram_candidate_sampler(
        lab, 1, 50, False, 8, unigrams=[1] * 6, num_reserved_ids=2))
    assert s.min() >= 2


def test_learned_unigram_learns_the_true_classes(backend):
    runs = _draw(lambda lab: tf.nn.learned_unigram_candidate_sampler(lab, 1, 4, True, 10),
                 runs=2)
    (s0, t0, _), (s1, t1, _) = runs
    # first run: all 10 classes weigh 1; then class 1 weighs 2 and class 5 weighs 3
    p0 = np.full(10, 0.1)
    w1 = np.ones(10)
    w1[1] += 1
    w1[5] += 2
    p1 = w1 / w1.sum()
    ratio0 = t0[:, 0] / p0[LABELS[:, 0]]
    ratio1 = t1[:, 0]
    assert np.allclose(ratio0, ratio0[0])  # one distribution for every row
    assert ratio1[1] > ratio1[0]  # class 5 now more likely than class 1
    assert np.isclose(p1[5] / p1[1], 1.5)


def test_seeded_samplers_repeat_per_session():
    a = _draw(lambda lab: tf.nn.log_uniform_candidate_sampler(lab, 1, 5, True, 100), seed=3)
    b = _draw(lambda lab: tf.nn.log_uniform_candidate_sampler(lab, 1, 5, True, 100), seed=3)
    np.testing.assert_array_equal(a[0][0], b[0][0])


def test_errors():
    with pytest.raises(TypeError, match="int64"):
        tf.nn.uniform_candidate_sampler(tf.constant([[1]], tf.int32), 1, 2, True, 5)
    s = tf.nn.uniform_candidate_sampler(tf.constant(LABELS), 1, 9, True, 5)
    with pytest.raises(errors.InvalidArgumentError, match="range is too small"):
        with tf.Session() as sess:
            sess.run(s)


def test_all_candidate_sampler_and_accidental_hits(backend):
    s, t, e = tf.nn.all_candidate_sampler(tf.constant(LABELS), 1, 4, True)
    hits = tf.nn.compute_accidental_hits(tf.constant(LABELS), tf.constant([5, 2, 1, 5],
                                                                          tf.int64), 1)
    with tf.Session() as sess:
        (s, t, e), (i, ids, w) = sess.run([(s, t, e), hits])
    assert s.tolist() == [0, 1, 2, 3] and np.all(t == 1) and np.all(e == 1)
    assert i.tolist() == [0, 1, 1, 2, 2] and ids.tolist() == [2, 0, 3, 0, 3]
    assert i.dtype == np.int32 and ids.dtype == np.int64
    assert np.all(w == np.float32(-np.finfo(np.float32).max))


def test_expected_count_formula_matches_tensorflow():
    """TF's sampler with unique=False reports p * num_sampled: our probability of each drawn
    class gives the same expected counts."""
    tf_ref = pytest.importorskip("tensorflow.compat.v1")
    g = tf_ref.Graph()
    with g.as_default():
        s, t, e = tf_ref.Session().run(tf_ref.nn.log_uniform_candidate_sampler(
            LABELS, 1, 16, False, 1000, seed=1))
    dist = _LogUniform(1000)
    np.testing.assert_allclose(e, expected_count(dist.prob(s), 16, 16), rtol=1e-5)
    np.testing.assert_allclose(t, expected_count(dist.prob(LABELS), 16, 16), rtol=1e-5)
