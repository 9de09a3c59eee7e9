"""MonitoredTrainingSession, hooks, Scaffold and Coordinator."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import jitflow as tf


def _model():
    x = tf.placeholder(tf.float32, [None], name="x")
    w = tf.Variable(0.0, name="w")
    loss = tf.reduce_mean(tf.square(w * x - 2.0 * x))
    gs = tf.train.get_or_create_global_step()
    train_op = tf.train.GradientDescentOptimizer(0.05).minimize(loss, global_step=gs)
    return x, w, loss, gs, train_op


FEED_X = np.array([1.0, 2.0, 3.0], np.float32)


def _sgd_w(steps: int, w: float = 0.0) -> float:
    """NumPy: w after `steps` steps of d/dw mean((w x - 2 x)^2) = 2 (w - 2) mean(x^2)."""
    w = np.float32(w)
    mx2 = np.float32(np.mean(FEED_X ** 2))
    for _ in range(steps):
        w = w - np.float32(0.05) * (np.float32(2) * (w - np.float32(2)) * mx2)
    return float(w)


def test_stop_at_step_and_checkpoint_resume(tmp_path, backend):
    x, w, loss, gs, train_op = _model()
    with tf.train.MonitoredTrainingSession(
            checkpoint_dir=str(tmp_path), save_checkpoint_steps=2,
            hooks=[tf.train.StopAtStepHook(num_steps=5)]) as sess:
        runs = 0
        while not sess.should_stop():
            sess.run(train_op, {x: FEED_X})
            runs += 1
        w1 = sess.run(w)
    assert runs == 5
    assert w1 == pytest.approx(_sgd_w(5), rel=1e-6)
    assert tf.train.latest_checkpoint(str(tmp_path)) == str(tmp_path / "model.ckpt-5")
    for step in (0, 2, 4, 5):
        assert tf.train.checkpoint_exists(str(tmp_path / f"model.ckpt-{step}"))
    assert not tf.train.checkpoint_exists(str(tmp_path / "model.ckpt-3"))

    # a new program restores from the checkpoint directory and continues to step 8
    tf.reset_default_graph()
    x, w, loss, gs, train_op = _model()
    with tf.train.MonitoredTrainingSession(
            checkpoint_dir=str(tmp_path), save_checkpoint_steps=100,
            hooks=[tf.train.StopAtStepHook(last_step=8)]) as sess:
        assert sess.run(gs) == 5
        assert sess.run(w) == pytest.approx(w1)
        while not sess.should_stop():
            sess.run(train_op, {x: FEED_X})
        assert sess.run(gs) == 8
        assert sess.run(w) == pytest.approx(_sgd_w(8), rel=1e-5)
    assert tf.train.latest_checkpoint(str(tmp_path)) == str(tmp_path / "model.ckpt-8")


def test_monitored_session_finalizes_graph_and_initializes():
    x, w, loss, gs, train_op = _model()
    with tf.train.MonitoredTrainingSession() as sess:
        assert sess.run(w) == 0.0
        assert tf.get_default_graph().finalized
        with pytest.raises(RuntimeError):
            tf.constant(1.0)


def test_logging_and_final_ops_hooks(capsys):
    x, w, loss, gs, train_op = _model()
    log = tf.train.LoggingTensorHook({"step": gs}, every_n_iter=2)
    final = tf.train.FinalOpsHook(w)
    with tf.train.MonitoredTrainingSession(hooks=[log, final]) as sess:
        for _ in range(5):
            sess.run(train_op, {x: FEED_X})
    assert len(log.logged) == 3  # iterations 0, 2, 4
    assert all(line.startswith("step = ") for line in log.logged)
    assert "step = " in capsys.readouterr().out
    assert final.final_ops_values == pytest.approx(_sgd_w(5), rel=1e-6)


def test_custom_hook_sees_fetches_and_can_stop():
    x, w, loss, gs, train_op = _model()

    class LossRecorder(tf.train.SessionRunHook):
        def __init__(self):
            self.losses = []
            self.calls = []

        def begin(self):
            self.calls.append("begin")

        def after_create_session(self, session, coord):
            self.calls.append("after_create_session")

        def before_run(self, run_context):
            return tf.train.SessionRunArgs(loss)

        def after_run(self, run_context, run_values):
            self.losses.append(run_values.results)
            if len(self.losses) == 3:
                run_context.request_stop()

        def end(self, session):
            self.calls.append("end")

    hook = LossRecorder()
    with tf.train.MonitoredTrainingSession(hooks=[hook]) as sess:
        while not sess.should_stop():
            out = sess.run(train_op, {x: FEED_X})
            assert out is None  # the caller's fetch structure is kept
    assert len(hook.losses) == 3
    assert hook.losses[0] > hook.losses[-1]
    assert hook.calls == ["begin", "after_create_session", "end"]


def test_nan_tensor_hook_raises():
    v = tf.Variable(1.0)
    tf.train.get_or_create_global_step()
    bad = v * np.float32(np.nan)
    with pytest.raises(tf.train.NanLossDuringTrainingError):
        with tf.train.MonitoredTrainingSession(hooks=[tf.train.NanTensorHook(bad)]) as sess:
            sess.run(v)


def test_stop_at_step_hook_needs_global_step():
    tf.Variable(1.0)
    with pytest.raises(RuntimeError, match="Global step"):
        tf.train.MonitoredTrainingSession(hooks=[tf.train.StopAtStepHook(num_steps=1)])
    with pytest.raises(ValueError):
        tf.train.StopAtStepHook()


def test_coordinator_stops_threads_and_reraises():
    coord = tf.train.Coordinator()
    seen = []

    def worker(i):
        with coord.stop_on_exception():
            while not coord.should_stop():
                seen.append(i)
                if i == 1 and len(seen) > 3:
                    raise ValueError("boom")
                coord.wait_for_stop(0.001)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    with pytest.raises(ValueError, match="boom"):
        coord.join(threads, stop_grace_period_secs=5)
    assert coord.should_stop()
    assert not any(t.is_alive() for t in threads)
    with tf.Session() as sess:  # no queue runners in the graph: no threads
        assert tf.train.start_queue_runners(sess=sess, coord=coord) == []


def test_coordinator_clean_stop_exception_is_not_reraised():
    coord = tf.train.Coordinator()
    coord.request_stop(tf.errors.OutOfRangeError(None, None, "end of data"))
    coord.join([])
    assert coord.should_stop()
