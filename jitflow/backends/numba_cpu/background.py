"""The compiler thread: kernels' optimized code (and Numba's parallel variants) is compiled off
the run path, one job at a time, while runs use the code they have.

`JITFLOW_COMPILE` picks the mode (config.py):
- `auto` (the default): a new kernel's first run compiles its quick code (milliseconds) and
  queues its optimized code here; runs switch to the optimized code once it is ready. Every
  tier gives the same bits, so the switch never shows in a result.
- `sync`: a new kernel's first run compiles its optimized code and waits (deterministic
  timing: benchmarks, tests).
- `quick`: quick code only.
- `numba`: Numba kernels (printed from the same loop form), compiled on the run path.
The older names `background` and `thread` mean `auto`, `tier1` means `quick`.

llvmlite lets one thread at a time into LLVM (a process-wide lock), so a compile here would
make the run path's own compiles wait: while the run path compiles (`foreground()`), and for
FOREGROUND_GRACE seconds after, no job starts here; a job already started finishes first.

On one CPU (the process's affinity) the compiler thread would take the run's own CPU, so an
optimized compile queued with its estimated cost starts only once the program has run (outside
its run-path compiles) as long as all compiling so far plus all queued would take (rent or
buy); with two or more CPUs jobs start at once.

At interpreter exit the queue is dropped and the job being compiled is waited for: a process
that ended while LLVM compiled on this thread could crash in LLVM after its last line.
"""
from __future__ import annotations

import contextlib
import os
import queue
import sys
import threading
import time
from typing import Callable

from jitflow.runtime import config

__all__ = ["mode", "submit", "wait_idle", "pending", "foreground"]

_QUEUE: "queue.Queue" = queue.Queue()
_LOCK = threading.Lock()
_STATE = {"thread": None, "pending": 0, "short": False, "current": None, "closing": False}
_IDLE = threading.Condition(_LOCK)
SWITCH_INTERVAL = 1e-4   # seconds: sys.setswitchinterval while the compiler thread works
#: seconds after the run path's last compile before the compiler thread starts a job (a first
#: run compiles its kernels one after another, with runs of earlier kernels in between)
FOREGROUND_GRACE = 0.05
_FG = {"depth": 0, "last": -1.0, "since": 0.0, "busy": 0.0}


@contextlib.contextmanager
def foreground():
    """The run path compiles: the compiler thread starts no job until this ends (and
    FOREGROUND_GRACE seconds have passed)."""
    with _LOCK:
        _FG["depth"] += 1
        if _FG["depth"] == 1:
            _FG["since"] = time.monotonic()
    try:
        yield
    finally:
        with _IDLE:
            _FG["depth"] -= 1
            _FG["last"] = time.monotonic()
            if not _FG["depth"]:
                _FG["busy"] += _FG["last"] - _FG["since"]
            _IDLE.notify_all()


def _wait_for_foreground() -> None:
    """(compiler thread) Wait until the run path has not compiled for FOREGROUND_GRACE s."""
    with _IDLE:
        while not _STATE["closing"]:
            if _FG["depth"]:
                _IDLE.wait(1.0)
                continue
            left = _FG["last"] + FOREGROUND_GRACE - time.monotonic()
            if left <= 0:
                return
            _IDLE.wait(left)


_ALIASES = {"background": "auto", "thread": "auto", "tier1": "quick"}


def mode() -> str:
    """"auto", "sync", "quick" or "numba" (JITFLOW_COMPILE)."""
    m = config.get("JITFLOW_COMPILE")
    return _ALIASES.get(m, m)


class _Rented:
    """A job with its estimated compile time (seconds of CPU), for the one-CPU rule."""

    def __init__(self, job: Callable[[], None], cost: float) -> None:
        self.job, self.cost = job, cost

    def __call__(self) -> None:
        self.job()


def cpus() -> int:
    """CPUs this process may run on (its affinity; a pinned benchmark or a 1-CPU container)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):   # pragma: no cover  (not Linux)
        return os.cpu_count() or 1


#: the one-CPU rule's account: when the first priced job was queued (and the run path's
#: compile time by then), compile seconds spent, and the cost of the priced jobs still queued
_RENT = {"start": None, "fg0": 0.0, "spent": 0.0, "queued": 0.0}


def _rent_paid() -> float:
    """Seconds the program has run (not compiled on its run path) since the first priced job."""
    fg = _FG["busy"] + (time.monotonic() - _FG["since"] if _FG["depth"] else 0.0)
    return time.monotonic() - _RENT["start"] - (fg - _RENT["fg0"])


def _wait_for_rent(cost: float) -> bool:
    """(compiler thread) With one CPU the compiler thread takes the run's own CPU. Rent or
    buy: the queued optimized compiles start only once the program has run (outside its own
    compiles) as long as all compiling so far plus every priced job queued would take, so a
    program that ends sooner never pays for code it would not have used long enough, and one
    that goes on gets its optimized code at most that long later. With more CPUs a job starts
    at once. False when the interpreter exits meanwhile."""
    if cost <= 0:
        return True
    with _IDLE:
        while not _STATE["closing"]:
            if cpus() > 1 or _rent_paid() >= _RENT["spent"] + _RENT["queued"]:
                _RENT["spent"] += cost
                _RENT["queued"] -= cost
                return True
            _IDLE.wait(0.05)
        _RENT["queued"] -= cost
    return False


def submit(job: Callable[[], None], cost: float = 0.0) -> None:
    """Run `job()` on the worker thread (started on first use). Jobs run one at a time, in
    submission order; a job reports its own errors. `cost`: the job's estimated CPU seconds
    (on one CPU priced jobs wait for the program to have run long enough: _wait_for_rent). Once the
    interpreter exits, nothing."""
    cost = getattr(job, "cost", cost)
    if cost > 0 and not isinstance(job, _Rented):
        job = _Rented(job, cost)
    with _LOCK:
        if _STATE["closing"]:
            return
        if cost > 0:
            if _RENT["start"] is None:
                _RENT["start"], _RENT["fg0"] = time.monotonic(), _FG["busy"]
            _RENT["queued"] += cost
        _STATE["pending"] += 1
        if _STATE["thread"] is None or not _STATE["thread"].is_alive():
            t = threading.Thread(target=_worker, name="jitflow-compiler", daemon=True)
            _STATE["thread"] = t
            t.start()
    _QUEUE.put(job)


def pending() -> int:
    """Jobs submitted and not finished."""
    return _STATE["pending"]


def wait_idle(timeout: float = None) -> bool:
    """Block until every submitted job has finished (True), or `timeout` seconds passed."""
    deadline = None if timeout is None else time.monotonic() + timeout
    with _IDLE:
        while _STATE["pending"]:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            _IDLE.wait(left)
    return True


def _shutdown() -> None:
    """At interpreter exit (before Python joins threads and tears itself down): drop the jobs
    not started, and wait for the one being compiled to finish. A process that exits while
    LLVM compiles on this thread can otherwise crash inside LLVM after the program's last line
    (SIGSEGV, or an LLVM assertion)."""
    with _LOCK:
        _STATE["closing"] = True
        while True:
            try:
                _QUEUE.get_nowait()
            except queue.Empty:
                break
            _STATE["pending"] -= 1
        _IDLE.notify_all()
    wait_idle()


def _register_shutdown() -> None:
    # threading's exit hooks run before non-daemon threads are joined and before atexit
    # handlers, while the interpreter is whole (Python 3.9+)
    hook = getattr(threading, "_register_atexit", None)
    if hook is not None:
        hook(_shutdown)
    else:  # pragma: no cover
        import atexit
        atexit.register(_shutdown)


_register_shutdown()


def _worker() -> None:
    while True:
        job = _QUEUE.get()
        with _LOCK:
            _STATE["current"] = job   # (a fork while it waits resubmits it in the child)
        _wait_for_foreground()
        if not _wait_for_rent(getattr(job, "cost", 0.0)):
            with _LOCK:
                job = _STATE["current"] = _nothing
        # Numba's lowering calls into LLVM thousands of times per kernel, each call dropping
        # the GIL; getting it back waits for the main thread's switch interval (5 ms by
        # default), which made a kernel compile 10x slower beside a busy main thread. A short
        # interval while jobs are pending keeps that wait small.
        with _LOCK:
            if not _STATE["short"]:
                short_switches(True)
                _STATE["short"] = True
        try:
            job()
        except BaseException:  # noqa: BLE001  (a job reports its own errors; keep serving)
            pass
        finally:
            with _IDLE:
                _STATE["current"] = None
                _STATE["pending"] -= 1
                if not _STATE["pending"] and _STATE["short"]:
                    _STATE["short"] = False
                    short_switches(False)
                _IDLE.notify_all()


def _nothing() -> None:
    """A job dropped at exit."""


_SWITCH = {"users": 0, "interval": None}
_SWITCH_LOCK = threading.Lock()


def short_switches(on: bool) -> None:
    """Count one more (on) or one fewer user of a short GIL switch interval: a thread that
    compiles beside a busy main thread (this module's worker, nnlib_c's builder). The
    process's own interval comes back when the last one leaves."""
    with _SWITCH_LOCK:
        if on:
            if not _SWITCH["users"]:
                _SWITCH["interval"] = sys.getswitchinterval()
                sys.setswitchinterval(min(_SWITCH["interval"], SWITCH_INTERVAL))
            _SWITCH["users"] += 1
        elif _SWITCH["users"]:
            _SWITCH["users"] -= 1
            if not _SWITCH["users"]:
                sys.setswitchinterval(_SWITCH["interval"])
                _SWITCH["interval"] = None


# -- fork ----------------------------------------------------------------------------------------
# A process forked while the compiler thread works would inherit Numba's compile lock held by
# a thread that does not exist in the child, and jobs nobody will run. Around a fork: wait for
# the current compile to finish (Numba's lock, then ours: the order the worker takes them in),
# and in the child start over with the jobs that were waiting, on a new thread when needed.
def _numba_lock():
    if "numba.core.compiler_lock" not in sys.modules:
        return None
    return getattr(sys.modules["numba.core.compiler_lock"].global_compiler_lock, "_lock", None)


_HELD: list = []


def _before_fork() -> None:
    lock = _numba_lock()
    if lock is not None:
        lock.acquire()
    _LOCK.acquire()
    _HELD[:] = [lock]


def _after_fork_in_parent() -> None:
    lock = _HELD.pop() if _HELD else None
    _LOCK.release()
    if lock is not None:
        lock.release()


def _after_fork_in_child() -> None:
    global _QUEUE, _SWITCH_LOCK
    _SWITCH_LOCK = threading.Lock()
    lock = _HELD.pop() if _HELD else None
    jobs = ([_STATE["current"]] if _STATE["current"] is not None else []) + list(_QUEUE.queue)
    _QUEUE = queue.Queue()
    _STATE.update(thread=None, pending=0, current=None)
    _RENT["queued"] = 0.0   # the jobs below count themselves again
    if _SWITCH["users"]:   # the threads that asked for it are gone
        sys.setswitchinterval(_SWITCH["interval"])
        _SWITCH.update(users=0, interval=None)
    _STATE["short"] = False
    _LOCK.release()
    if lock is not None:
        lock.release()
    for job in jobs:
        submit(job)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                        after_in_child=_after_fork_in_child)
