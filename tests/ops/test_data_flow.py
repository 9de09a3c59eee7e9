"""Queues: FIFO order, shapes, closing, blocking across threads, random and padding queues,
count_up_to."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import jitflow as tf
from jitflow.core import errors


def test_fifo_queue_basics(backend):
    q = tf.FIFOQueue(3, [tf.int32, tf.float32], shapes=[[], [2]])
    enq = q.enqueue_many([[1, 2, 3], np.ones((3, 2), np.float32)])
    deq, dm, size, close = q.dequeue(), q.dequeue_many(2), q.size(), q.close()
    assert dm[0].shape.as_list() == [2] and dm[1].shape.as_list() == [2, 2]
    assert deq[1].shape.as_list() == [2]
    with tf.Session() as sess:
        sess.run(enq)
        assert sess.run(size) == 3
        a, b = sess.run(deq)
        assert a == 1 and b.tolist() == [1.0, 1.0] and b.dtype == np.float32
        got = sess.run(dm)
        assert got[0].tolist() == [2, 3] and got[1].shape == (2, 2)
        sess.run(close)
        assert sess.run(q.is_closed())
        with pytest.raises(errors.OutOfRangeError,
                           match="'fifo_queue' is closed and has insufficient elements "
                                 r"\(requested 1, current size 0\)"):
            sess.run(deq)
        with pytest.raises(errors.CancelledError, match="'fifo_queue' is closed"):
            sess.run(enq)


def test_single_component_and_named_queues(backend):
    q = tf.FIFOQueue(4, tf.float32)
    one = q.dequeue()
    assert isinstance(one, tf.Tensor)
    named = tf.FIFOQueue(4, [tf.int32, tf.string], names=["n", "s"], shapes=[[], []])
    put = named.enqueue({"n": 5, "s": "five"})
    get = named.dequeue()
    with tf.Session() as sess:
        sess.run(q.enqueue(2.5))
        assert sess.run(one) == 2.5
        sess.run(put)
        assert sess.run(get) == {"n": 5, "s": b"five"}
    with pytest.raises(ValueError, match="do not match names"):
        named.enqueue({"n": 1})
    with pytest.raises(ValueError, match="incompatible"):
        tf.FIFOQueue(2, tf.float32, shapes=[[2]]).enqueue([[1.0, 2.0, 3.0]])


def test_dequeue_up_to_gives_the_last_partial_batch(backend):
    q = tf.FIFOQueue(10, tf.int64, shapes=[[]])
    up = q.dequeue_up_to(4)
    assert up.shape.as_list() == [None]
    with tf.Session() as sess:
        sess.run(q.enqueue_many([np.arange(6)]))
        sess.run(q.close())
        assert sess.run(up).tolist() == [0, 1, 2, 3]
        assert sess.run(up).tolist() == [4, 5]
        with pytest.raises(errors.OutOfRangeError):
            sess.run(up)


def test_blocking_dequeue_waits_for_another_thread():
    """A dequeue in one thread waits (without holding the session) until another thread's run
    enqueues; no sleeps: the order is forced by the queue itself."""
    q = tf.FIFOQueue(1, tf.int32, shapes=[[]])
    x = tf.placeholder(tf.int32, [])
    enq, deq = q.enqueue(x), q.dequeue()
    with tf.Session() as sess:
        out = []
        reader = threading.Thread(target=lambda: out.extend(sess.run(deq) for _ in range(5)))
        reader.start()
        for i in range(5):
            sess.run(enq, {x: i})   # blocks while the capacity-1 queue is full
        reader.join(60)
        assert not reader.is_alive() and out == [0, 1, 2, 3, 4]


def _queue_of(sess, q):
    return sess._resources[("queue", q.name)]


def _until(cond) -> None:
    """Poll a condition of another thread's progress (never a timed assumption)."""
    import time
    for _ in range(6000):
        if cond():
            return
        time.sleep(0.01)
    raise AssertionError("the other thread never got there")


def test_closing_the_session_cancels_a_blocked_dequeue():
    q = tf.FIFOQueue(2, tf.int32, shapes=[[]])
    deq = q.dequeue()
    sess = tf.Session()
    sess.run(q.size())  # the queue exists in this session
    errs = []

    def wait():
        try:
            sess.run(deq)
        except errors.CancelledError as e:
            errs.append(e)
    t = threading.Thread(target=wait)
    t.start()
    _until(lambda: _queue_of(sess, q).waiting == 1)
    sess.close()
    t.join(60)
    assert not t.is_alive() and len(errs) == 1
    assert "Session has been closed" in str(errs[0])


def test_close_with_cancel_fails_blocked_enqueues():
    q = tf.FIFOQueue(1, tf.int32, shapes=[[]])
    enq = q.enqueue(1)
    with tf.Session() as sess:
        sess.run(enq)
        errs = []

        def put():
            try:
                sess.run(enq)
            except errors.CancelledError as e:
                errs.append(e)
        t = threading.Thread(target=put)
        t.start()
        _until(lambda: _queue_of(sess, q).waiting == 1)
        sess.run(q.close(cancel_pending_enqueues=True))
        t.join(60)
        assert not t.is_alive() and len(errs) == 1
        assert sess.run(q.dequeue()) == 1  # what was queued before the close is still there


def test_random_shuffle_queue(backend):
    tf.set_random_seed(4)
    q = tf.RandomShuffleQueue(20, 5, tf.int64, shapes=[[]], seed=2)
    with tf.Session() as sess:
        sess.run(q.enqueue_many([np.arange(20)]))
        got = sess.run(q.dequeue_many(15)).tolist()
        assert got != sorted(got) and len(set(got)) == 15
        sess.run(q.close())
        got += sess.run(q.dequeue_up_to(10)).tolist()   # min_after_dequeue ends at close
    assert sorted(got) == list(range(20))
    with pytest.raises(ValueError, match="min_after_dequeue"):
        tf.RandomShuffleQueue(5, 5, tf.int32)


def test_padding_fifo_queue(backend):
    q = tf.PaddingFIFOQueue(5, [tf.int32], shapes=[[None]])
    x = tf.placeholder(tf.int32, [None])
    with tf.Session() as sess:
        for v in ([1], [2, 2, 2], [3, 3]):
            sess.run(q.enqueue([x]), {x: v})
        assert sess.run(q.dequeue_many(3)).tolist() == [[1, 0, 0], [2, 2, 2], [3, 3, 0]]
    with pytest.raises(ValueError, match="known rank"):
        tf.PaddingFIFOQueue(2, [tf.int32], shapes=[None])


def test_count_up_to(backend):
    v = tf.Variable(np.int64(0), trainable=False)
    c = v.count_up_to(2)
    c2 = tf.count_up_to(v, 2)
    assert c.dtype == tf.int64
    with tf.Session() as sess:
        sess.run(v.initializer)
        assert [sess.run(c), sess.run(c2)] == [0, 1]
        with pytest.raises(errors.OutOfRangeError, match="Reached limit of 2"):
            sess.run(c)
        assert sess.run(v) == 2


def test_queue_parity_with_tensorflow():
    tf_ref = pytest.importorskip("tensorflow.compat.v1")

    def build(t):
        q = t.FIFOQueue(10, [t.float32, t.int32], shapes=[[2], []])
        return q.enqueue_many([np.arange(8, dtype=np.float32).reshape(4, 2), [1, 2, 3, 4]]), \
            q.dequeue_many(3), q.size()
    g = tf_ref.Graph()
    with g.as_default(), tf_ref.Session() as s:
        enq, dm, sz = build(tf_ref)
        s.run(enq)
        want = s.run(dm) + [s.run(sz)]
    with tf.Session() as s:
        enq, dm, sz = build(tf)
        s.run(enq)
        got = s.run(dm) + [s.run(sz)]
    for w, h in zip(want, got):
        np.testing.assert_array_equal(h, w)
        assert np.asarray(h).dtype == np.asarray(w).dtype
