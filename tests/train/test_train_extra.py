"""jitflow/train/extra.py (proximal optimizers, hooks, checkpoint helpers, ClusterSpec,
VocabInfo) and tf.losses.mean_pairwise_squared_error: hand-computed values, then TensorFlow's
(skipped without it)."""
from __future__ import annotations

import os

import numpy as np
import pytest

import jitflow as tf

W0 = np.array([0.5, 0.12, 2.0], np.float32)
G = np.array([1.0, 1.0, -2.0], np.float32)


def _steps(t, opt_fn, steps=2):
    with t.Graph().as_default():
        w = t.Variable(W0)
        loss = t.reduce_sum(w * t.constant(G))   # gradient G
        train = opt_fn(t).minimize(loss)
        with t.Session() as sess:
            sess.run(t.global_variables_initializer())
            for _ in range(steps):
                sess.run(train)
            return sess.run(w)


def test_proximal_gradient_descent_by_hand():
    got = _steps(tf, lambda t: t.train.ProximalGradientDescentOptimizer(
        0.1, l1_regularization_strength=0.5, l2_regularization_strength=1.0), steps=1)
    prox = W0 - 0.1 * G
    want = np.sign(prox) * np.maximum(np.abs(prox) - 0.05, 0) / 1.1
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert got[1] == 0.0   # prox 0.02 is within lr * l1 = 0.05 of zero: thresholded away
    plain = _steps(tf, lambda t: t.train.ProximalGradientDescentOptimizer(0.1), steps=1)
    np.testing.assert_allclose(plain, W0 - 0.1 * G, rtol=1e-6)


def test_proximal_adagrad_by_hand():
    got = _steps(tf, lambda t: t.train.ProximalAdagradOptimizer(0.1, 0.1, 0.0, 0.5), steps=1)
    acc = 0.1 + G * G
    lr = 0.1 / np.sqrt(acc)
    np.testing.assert_allclose(got, (W0 - lr * G) / (1 + lr * 0.5), rtol=1e-6)
    with pytest.raises(ValueError, match="initial_accumulator_value must be positive"):
        tf.train.ProximalAdagradOptimizer(0.1, 0.0)


def test_proximal_optimizers_match_tensorflow():
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    tf1.disable_v2_behavior()
    for make in (lambda t: t.train.ProximalGradientDescentOptimizer(0.1, 0.3, 0.2),
                 lambda t: t.train.ProximalAdagradOptimizer(0.2, 0.1, 0.05, 0.1)):
        np.testing.assert_allclose(_steps(tf, make, 3), _steps(tf1, make, 3), rtol=1e-5,
                                   atol=1e-7)


def test_feed_fn_and_step_counter_hooks(tmp_path):
    with tf.Graph().as_default():
        gs = tf.train.get_or_create_global_step()
        x = tf.placeholder(tf.float32, [])
        total = tf.Variable(0.0)
        step = tf.group(tf.assign_add(total, x), tf.assign_add(gs, 1))
        counter = tf.train.StepCounterHook(every_n_steps=2, output_dir=str(tmp_path))
        feeds = iter([1.0, 2.0, 3.0, 4.0, 5.0, 100.0])   # the last for the run of `total`
        hooks = [tf.train.FeedFnHook(lambda: {x: next(feeds)}), counter]
        with tf.train.MonitoredSession(hooks=hooks) as sess:
            for _ in range(5):
                sess.run(step)
            assert sess.run(total) == 15.0
    # the first run starts the clock; then every second step logs a rate (which step the
    # fetched global step shows, before or after the run's increment, is the backend's)
    steps = [s for s, _ in counter.rates]
    assert len(steps) == 2 and steps[1] - steps[0] == 2
    assert all(r > 0 for _, r in counter.rates)
    events = [f for f in os.listdir(tmp_path) if f.startswith("events.out.tfevents")]
    assert events
    tags = [v.tag for e in tf.train.summary_iterator(str(tmp_path / events[0]))
            for v in e.summary.value]
    assert tags.count("global_step/sec") == 2
    with pytest.raises(ValueError):
        tf.train.StepCounterHook(every_n_steps=None, every_n_secs=None)


def test_checkpoint_file_helpers_and_listener(tmp_path):
    class Listener(tf.train.CheckpointSaverListener):
        def __init__(self):
            self.saved = []

        def after_save(self, session, global_step_value):
            self.saved.append(global_step_value)

    listener = Listener()
    with tf.Graph().as_default():
        gs = tf.train.get_or_create_global_step()
        inc = tf.assign_add(gs, 1)
        hook = tf.train.CheckpointSaverHook(str(tmp_path), save_steps=1000,
                                            listeners=[listener])
        with tf.train.MonitoredSession(hooks=[hook]) as sess:
            sess.run(inc)
    assert listener.saved == [0, 1]
    prefixes = [str(tmp_path / "model.ckpt-0"), str(tmp_path / "model.ckpt-1"),
                str(tmp_path / "none")]
    times = tf.train.get_checkpoint_mtimes(prefixes)
    assert len(times) == 2 and all(t > 0 for t in times)
    it = tf.train.checkpoints_iterator(str(tmp_path), timeout=0.3)
    assert next(it) == str(tmp_path / "model.ckpt-1")
    with pytest.raises(StopIteration):   # no newer checkpoint within the timeout
        next(it)
    tf.train.remove_checkpoint(prefixes[0])
    assert not any(f.startswith("model.ckpt-0.") for f in os.listdir(tmp_path))
    assert tf.train.checkpoint_exists(prefixes[1])
    with pytest.raises(NotImplementedError):
        tf.train.SessionCreator().create_session()


def test_cluster_spec_and_vocab_info():
    c = tf.train.ClusterSpec({"ps": ["a:1", "b:2"], "worker": {1: "c:3", 3: "d:4"}})
    assert sorted(c.jobs) == ["ps", "worker"]
    assert c.num_tasks("worker") == 2 and c.task_indices("worker") == [1, 3]
    assert c.task_address("ps", 1) == "b:2"
    assert c.job_tasks("worker") == [None, "c:3", None, "d:4"]
    assert c.as_dict() == {"ps": ["a:1", "b:2"], "worker": {1: "c:3", 3: "d:4"}}
    assert tf.train.ClusterSpec(c) == c and bool(c) and not tf.train.ClusterSpec({})
    with pytest.raises(ValueError, match="No such job"):
        c.num_tasks("chief")
    with pytest.raises(TypeError):
        tf.train.ClusterSpec(["a"])
    v = tf.train.VocabInfo("new.txt", 10, 1, "old.txt")
    assert (v.old_vocab_size, v.backup_initializer, v.axis) == (-1, None, 0)
    with pytest.raises(ValueError, match="axis"):
        tf.train.VocabInfo("n", 1, 0, "o", axis=2)


def test_cluster_spec_matches_tensorflow():
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    spec = {"ps": ["a:1", "b:2"], "worker": {1: "c:3", 3: "d:4"}}
    ours, theirs = tf.train.ClusterSpec(spec), tf1.train.ClusterSpec(spec)
    assert ours.as_dict() == theirs.as_dict()
    assert ours.job_tasks("worker") == theirs.job_tasks("worker")
    assert ours.task_indices("worker") == theirs.task_indices("worker")


# -- mean_pairwise_squared_error ----------------------------------------------------------------
LABELS = np.array([[1.0, 2.0, 4.0], [0.0, 0.0, 1.0]], np.float32)
PREDS = np.array([[1.5, 2.0, 3.0], [0.0, 1.0, 1.0]], np.float32)


def test_mean_pairwise_squared_error_by_hand():
    want = 0.0
    for lab, pre in zip(LABELS, PREDS):
        pairs = [((pre[i] - pre[j]) - (lab[i] - lab[j])) ** 2
                 for i in range(3) for j in range(3) if i != j]
        want += np.mean(pairs)
    with tf.Graph().as_default():
        loss = tf.losses.mean_pairwise_squared_error(LABELS, PREDS)
        assert loss in tf.losses.get_losses()
        got = tf.Session().run(loss)
        with pytest.raises(ValueError, match="at least 2-D"):
            tf.losses.mean_pairwise_squared_error([1.0, 2.0], [1.0, 2.0])
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_mean_pairwise_squared_error_matches_tensorflow():
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    tf1.disable_v2_behavior()
    out = []
    for t in (tf, tf1):
        with t.Graph().as_default():
            losses = [t.losses.mean_pairwise_squared_error(LABELS, PREDS),
                      t.losses.mean_pairwise_squared_error(LABELS, PREDS, weights=2.5),
                      t.losses.mean_pairwise_squared_error(
                          LABELS, PREDS, weights=t.constant([[0.0], [3.0]]))]
            with t.Session() as sess:
                out.append(sess.run(losses))
    np.testing.assert_allclose(out[0], out[1], rtol=1e-6)
