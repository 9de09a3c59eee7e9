"""`tf.train.Coordinator`: thread coordination for TF1 input loops (queue runners, the user's
own threads): a stop request every thread sees, the first error re-raised at `join`.
"""
from __future__ import annotations

import threading
import time
from typing import Optional

__all__ = ["Coordinator", "LooperThread"]


class Coordinator:
    """Lets threads ask each other to stop and reports the first exception at `join`."""

    def __init__(self, clean_stop_exception_types=None) -> None:
        if clean_stop_exception_types is None:
            from jitflow.core.errors import OutOfRangeError
            clean_stop_exception_types = (OutOfRangeError,)
        self._clean_stop_exception_types = tuple(clean_stop_exception_types)
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._exc_info = None
        self._registered_threads: set = set()

    def request_stop(self, ex=None) -> None:
        """Ask every thread to stop; `ex` (an exception or exc_info) is re-raised by `join`."""
        with self._lock:
            if ex is not None and self._exc_info is None:
                if isinstance(ex, tuple):
                    exc = ex[1]
                else:
                    exc = ex
                if not isinstance(exc, self._clean_stop_exception_types):
                    self._exc_info = ex if isinstance(ex, tuple) else (type(ex), ex,
                                                                       ex.__traceback__)
            self._stop_event.set()

    def clear_stop(self) -> None:
        with self._lock:
            self._exc_info = None
            self._stop_event.clear()

    def should_stop(self) -> bool:
        return self._stop_event.is_set()

    def wait_for_stop(self, timeout: Optional[float] = None) -> bool:
        return self._stop_event.wait(timeout)

    def stop_on_exception(self):
        """Context manager: an exception in the block requests a stop instead of propagating."""
        coord = self

        class _Ctx:
            def __enter__(self):
                return None

            def __exit__(self, exc_type, exc, tb):
                if exc_type is None:
                    return False
                coord.request_stop((exc_type, exc, tb))
                return True
        return _Ctx()

    def register_thread(self, thread) -> None:
        with self._lock:
            self._registered_threads.add(thread)

    def join(self, threads=None, stop_grace_period_secs: float = 120,
             ignore_live_threads: bool = False) -> None:
        """Wait for the threads after a stop request; re-raise a reported exception."""
        threads = set(threads or ()) | self._registered_threads
        while any(t.is_alive() for t in threads) and not self.wait_for_stop(1.0):
            pass
        deadline = time.monotonic() + stop_grace_period_secs
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        alive = [t.name for t in threads if t.is_alive()]
        if self._exc_info:
            exc = self._exc_info[1]
            raise exc.with_traceback(self._exc_info[2])
        if alive and not ignore_live_threads:
            raise RuntimeError(f"Coordinator stopped with threads still running: "
                               f"{' '.join(alive)}")

    @property
    def joined(self) -> bool:
        return False

    def raise_requested_exception(self) -> None:
        if self._exc_info:
            raise self._exc_info[1].with_traceback(self._exc_info[2])


class LooperThread(threading.Thread):
    """A thread calling `target(*args)` every `timer_interval_secs` until the coordinator stops."""

    def __init__(self, coord: Coordinator, timer_interval_secs, target=None, args=None,
                 kwargs=None) -> None:
        super().__init__(daemon=True)
        self._coord = coord
        self._interval = timer_interval_secs
        self._target_fn = target
        self._args = args or ()
        self._kwargs = kwargs or {}
        coord.register_thread(self)

    def run(self) -> None:
        with self._coord.stop_on_exception():
            while not self._coord.should_stop():
                if self._target_fn is not None:
                    self._target_fn(*self._args, **self._kwargs)
                if self._interval is None or self._coord.wait_for_stop(self._interval):
                    break
