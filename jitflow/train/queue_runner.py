"""`tf.train.QueueRunner`, `add_queue_runner` and `start_queue_runners`: threads that keep
running enqueue ops, as TF1's input pipelines do.

Each enqueue op gets a thread running it in a loop until the coordinator asks to stop. When an
enqueue raises OutOfRangeError or CancelledError (its input is exhausted, or its queue was
closed), the thread ends; the last one closes the queue, so consumers drain it and then get
OutOfRangeError. With a coordinator, one more thread waits for the stop request and closes the
queue with `cancel_pending_enqueues`, which ends enqueues blocked on a full queue: after
`coord.request_stop()`, `coord.join(threads)` returns promptly.
"""
from __future__ import annotations

import threading

from jitflow.core import errors
from jitflow.core.graph import GraphKeys, get_default_graph

__all__ = ["QueueRunner", "add_queue_runner", "start_queue_runners"]


class QueueRunner:
    """Runs `enqueue_ops` on threads for `queue`."""

    def __init__(self, queue=None, enqueue_ops=None, close_op=None, cancel_op=None,
                 queue_closed_exception_types=None, queue_runner_def=None,
                 import_scope=None) -> None:
        if queue_runner_def is not None:
            raise NotImplementedError("QueueRunner from a QueueRunnerDef is not supported")
        if queue is None or not enqueue_ops:
            raise ValueError("QueueRunner needs a queue and at least one enqueue op")
        self._queue = queue
        self._enqueue_ops = list(enqueue_ops)
        self._close_op = close_op if close_op is not None else queue.close()
        self._cancel_op = cancel_op if cancel_op is not None else \
            queue.close(cancel_pending_enqueues=True)
        self._closed_types = tuple(queue_closed_exception_types or
                                   (errors.OutOfRangeError, errors.CancelledError))
        self._lock = threading.Lock()
        self._runs: dict = {}
        self._exceptions_raised: list = []

    queue = property(lambda self: self._queue)
    enqueue_ops = property(lambda self: self._enqueue_ops)
    close_op = property(lambda self: self._close_op)
    cancel_op = property(lambda self: self._cancel_op)
    queue_closed_exception_types = property(lambda self: self._closed_types)
    exceptions_raised = property(lambda self: list(self._exceptions_raised))

    @property
    def name(self) -> str:
        return self._queue.name

    def _run(self, sess, enqueue_op, coord) -> None:
        decremented = False
        try:
            run = sess.make_callable(enqueue_op)
            while not (coord is not None and coord.should_stop()):
                try:
                    run()
                except self._closed_types:
                    with self._lock:
                        self._runs[sess] -= 1
                        decremented = True
                        last = self._runs[sess] == 0
                    if last:
                        try:
                            sess.run(self._close_op)
                        except (errors.OpError, RuntimeError):
                            pass  # the session may be closing
                    return
        except Exception as e:  # noqa: BLE001  (reported to the coordinator, as TF1)
            if coord is not None:
                coord.request_stop(e)
            else:
                with self._lock:
                    self._exceptions_raised.append(e)
                raise
        finally:
            if not decremented:
                with self._lock:
                    self._runs[sess] -= 1

    def _close_on_stop(self, sess, coord) -> None:
        coord.wait_for_stop()
        try:
            sess.run(self._cancel_op)
        except (errors.OpError, RuntimeError):
            pass

    def create_threads(self, sess, coord=None, daemon: bool = False,
                       start: bool = False) -> list:
        """The threads running this runner's enqueue ops in `sess` (none if they already
        run there), plus one closing the queue when `coord` stops."""
        with self._lock:
            if self._runs.get(sess, 0) > 0:
                return []
            self._runs[sess] = len(self._enqueue_ops)
            self._exceptions_raised = []
        threads = [threading.Thread(target=self._run, args=(sess, op, coord),
                                    name=f"QueueRunnerThread-{self.name}-{op.name}")
                   for op in self._enqueue_ops]
        if coord is not None:
            threads.append(threading.Thread(target=self._close_on_stop, args=(sess, coord),
                                            name=f"QueueRunnerThread-{self.name}-close_on_stop"))
        for t in threads:
            if coord is not None:
                coord.register_thread(t)
            t.daemon = daemon
            if start:
                t.start()
        return threads


def add_queue_runner(qr: QueueRunner, collection: str = GraphKeys.QUEUE_RUNNERS) -> None:
    """Add `qr` to the graph's queue runners (started by `start_queue_runners`)."""
    get_default_graph().add_to_collection(collection, qr)


def start_queue_runners(sess=None, coord=None, daemon: bool = True, start: bool = True,
                        collection: str = GraphKeys.QUEUE_RUNNERS) -> list:
    """Start the threads of every queue runner of the graph; returns them."""
    from jitflow.core.session import get_default_session
    if sess is None:
        sess = get_default_session()
        if sess is None:
            raise ValueError("Cannot start queue runners: No default session is registered. "
                             "Use `with sess.as_default()` or pass an explicit session to "
                             "tf.start_queue_runners(sess=sess)")
    threads = []
    for qr in sess.graph.get_collection(collection):
        threads.extend(qr.create_threads(sess, coord=coord, daemon=daemon, start=start))
    return threads

