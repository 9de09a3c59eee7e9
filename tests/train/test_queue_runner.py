"""QueueRunner and start_queue_runners: threads that stop cleanly, close their queue when
their input ends, and report errors through the coordinator."""
from __future__ import annotations

import numpy as np
import pytest

import jitflow as tf
from jitflow.core import errors


def test_request_stop_then_join_ends_blocked_enqueues():
    """A runner blocked on a full queue (nobody dequeues) ends when the coordinator stops."""
    q = tf.FIFOQueue(2, tf.float32, shapes=[[]])
    tf.train.add_queue_runner(tf.train.QueueRunner(q, [q.enqueue(1.0)] * 2))
    with tf.Session() as sess:
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess=sess, coord=coord)
        assert len(threads) == 3  # two enqueue threads and the closer
        assert sess.run(q.dequeue()) == 1.0
        coord.request_stop()
        coord.join(threads, stop_grace_period_secs=60)
        assert not any(t.is_alive() for t in threads)


def test_runner_closes_its_queue_when_the_input_ends():
    v = tf.Variable(np.int64(0), trainable=False, collections=[tf.GraphKeys.LOCAL_VARIABLES])
    q = tf.FIFOQueue(10, tf.int64, shapes=[[]])
    qr = tf.train.QueueRunner(q, [q.enqueue(v.count_up_to(3))])
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        threads = qr.create_threads(sess, start=True)
        for t in threads:
            t.join(60)
        assert sess.run(q.dequeue_up_to(10)).tolist() == [0, 1, 2]
        with pytest.raises(errors.OutOfRangeError):
            sess.run(q.dequeue())
        assert qr.create_threads(sess) != []  # it ended, so it may run again


def test_errors_reach_the_coordinator():
    q = tf.FIFOQueue(2, tf.float32, shapes=[[]])
    bad = tf.placeholder(tf.float32, [])  # never fed: every enqueue fails
    qr = tf.train.QueueRunner(q, [q.enqueue(bad)])
    with tf.Session() as sess:
        coord = tf.train.Coordinator()
        threads = qr.create_threads(sess, coord=coord, start=True)
        with pytest.raises(errors.InvalidArgumentError, match="must feed a value"):
            coord.join(threads, stop_grace_period_secs=60)


def test_start_queue_runners_needs_a_session():
    with pytest.raises(ValueError, match="No default session"):
        tf.train.start_queue_runners()
