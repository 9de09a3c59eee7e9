"""tf.metrics: streaming (value, update_op) pairs over local variables, as TF1."""
from __future__ import annotations

import numpy as np
import pytest

import jitflow as tf

RNG = np.random.default_rng(3)
BATCHES = [(RNG.integers(0, 2, 6), RNG.integers(0, 2, 6), RNG.uniform(0, 1, 6).astype(np.float32),
            RNG.uniform(0.5, 2, 6).astype(np.float32)) for _ in range(3)]


def _program(t):
    labels = t.placeholder(t.int64, [None])
    preds = t.placeholder(t.int64, [None])
    scores = t.placeholder(t.float32, [None])
    w = t.placeholder(t.float32, [None])
    lf = t.cast(labels, t.float32)
    metrics = {
        "accuracy": t.metrics.accuracy(labels, preds),
        "accuracy_w": t.metrics.accuracy(labels, preds, weights=w),
        "mean": t.metrics.mean(scores),
        "mean_w": t.metrics.mean(scores, weights=w),
        "mse": t.metrics.mean_squared_error(lf, scores),
        "rmse": t.metrics.root_mean_squared_error(lf, scores),
        "mae": t.metrics.mean_absolute_error(lf, scores),
        "precision": t.metrics.precision(labels, preds),
        "recall": t.metrics.recall(labels, preds, weights=w),
        "tp": t.metrics.true_positives(labels, preds),
        "tn": t.metrics.true_negatives(labels, preds),
        "auc": t.metrics.auc(labels, scores),
        "auc_pr": t.metrics.auc(labels, scores, curve="PR", num_thresholds=50),
    }
    values = {k: v for k, (v, _) in metrics.items()}
    updates = {k: u for k, (_, u) in metrics.items()}
    out = []
    with t.Session() as sess:
        sess.run(t.local_variables_initializer())
        for lab, pre, sc, wt in BATCHES:
            feed = {labels: lab, preds: pre, scores: sc, w: wt}
            out.append((sess.run(updates, feed), sess.run(values)))
    return out


def test_accuracy_and_mean_by_hand(backend):
    labels = tf.placeholder(tf.int32, [None])
    preds = tf.placeholder(tf.int32, [None])
    acc, up = tf.metrics.accuracy(labels, preds)
    m, mup = tf.metrics.mean(tf.constant([1.0, 2.0, 6.0]), weights=[1.0, 0.0, 1.0])
    assert acc.name == "accuracy/value:0" and up.name == "accuracy/update_op:0"
    assert [v.op.name for v in tf.local_variables()] == [
        "accuracy/total", "accuracy/count", "mean/total", "mean/count"]
    assert tf.get_collection("metric_variables") == tf.local_variables()
    assert tf.global_variables() == [] and tf.trainable_variables() == []
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        assert sess.run(acc) == 0.0  # no data yet: 0, not nan
        assert sess.run(up, {labels: [1, 2, 3, 4], preds: [1, 2, 0, 0]}) == 0.5
        assert sess.run(up, {labels: [1, 1], preds: [1, 1]}) == pytest.approx(4 / 6)
        assert sess.run(acc) == pytest.approx(4 / 6)
        assert sess.run(mup) == 3.5 and sess.run(mup) == 3.5 and sess.run(m) == 3.5
        sess.run(tf.local_variables_initializer())
        assert sess.run(acc) == 0.0


def test_uninitialized_metric_fails(backend):
    acc, up = tf.metrics.accuracy(tf.constant([1]), tf.constant([1]))
    with tf.Session() as sess:
        with pytest.raises(tf.errors.FailedPreconditionError):
            sess.run(up)


def test_metric_collections(backend):
    v, u = tf.metrics.mean(tf.constant([2.0]), metrics_collections=["m"],
                           updates_collections=[tf.GraphKeys.UPDATE_OPS])
    assert tf.get_collection("m") == [v] and tf.get_collection(tf.GraphKeys.UPDATE_OPS) == [u]


def test_metrics_match_numpy(backend):
    got = _program(tf)
    lab = np.concatenate([b[0] for b in BATCHES])
    pre = np.concatenate([b[1] for b in BATCHES])
    sc = np.concatenate([b[2] for b in BATCHES])
    w = np.concatenate([b[3] for b in BATCHES])
    final = got[-1][1]
    assert final["accuracy"] == pytest.approx(np.mean(lab == pre))
    assert final["accuracy_w"] == pytest.approx(np.sum((lab == pre) * w) / w.sum(), rel=1e-6)
    assert final["mean_w"] == pytest.approx(np.sum(sc * w) / w.sum(), rel=1e-6)
    assert final["mse"] == pytest.approx(np.mean((sc - lab) ** 2), rel=1e-6)
    assert final["rmse"] == pytest.approx(np.sqrt(np.mean((sc - lab) ** 2)), rel=1e-6)
    tp = np.sum((lab == 1) & (pre == 1))
    assert final["precision"] == pytest.approx(tp / np.sum(pre == 1))
    assert final["tp"] == tp and final["tn"] == np.sum((lab == 0) & (pre == 0))
    # update_op returns the same value as reading value afterwards
    for upd, val in got:
        for k in upd:
            assert upd[k] == pytest.approx(val[k], rel=1e-6, abs=1e-7), k


def test_metrics_match_tensorflow(backend):
    t1 = pytest.importorskip("tensorflow.compat.v1")
    t1.disable_eager_execution()
    g = t1.Graph()
    with g.as_default():
        want = _program(t1)
    got = _program(tf)
    for (gu, gv), (wu, wv) in zip(got, want):
        for k in wv:
            assert gv[k] == pytest.approx(wv[k], rel=1e-5, abs=1e-6), k
            assert gu[k] == pytest.approx(wu[k], rel=1e-5, abs=1e-6), k
