"""A helper process that compiles kernels into the disk cache, so the user's process only loads.

Why a process: Numba's typing and lowering are Python and hold the GIL, and its thousands of
calls into LLVM each drop and retake it, so compiling on a thread of the user's process
slowed both the compile and the runs beside it (a small kernel took 2.3 s instead of 1 s next
to a busy loop of runs). In a helper process the compile has a core to itself, and the machine
code Numba never frees stays in the helper (restarted every `RESTART_AFTER` kernels) instead
of in the user's process, which loads each kernel from the disk cache (a few ms).

Protocol, one JSON object per line: the client (the compiler thread, see kernels.compile_job)
writes {"source": module text, "cache_dir": its kernel cache directory, "args": [[dtype str,
ndim, writeable], ...], "vars": [...]};
the helper loads the module through the kernel cache (cache.load_module: the same private
directory and file checks), compiles the kernel for those argument types, which writes
Numba's cache files, and answers {"ok": true} or {"ok": false, "error": text}. Used only when
the disk cache is on and usable; otherwise kernels compile on the thread.
"""
from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import threading
from typing import Optional

__all__ = ["compile_in_helper", "RESTART_AFTER", "shutdown"]

RESTART_AFTER = 200            # kernels per helper process (its memory only grows)
_STATE: dict = {"proc": None, "served": 0, "broken": False}
_LOCK = threading.Lock()


def _start() -> Optional[subprocess.Popen]:
    env = dict(os.environ, JITFLOW_COMPILE="sync")
    here = os.path.abspath(__file__)   # <root>/jitflow/backends/numba_cpu/compile_worker.py
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(here))))
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    try:
        return subprocess.Popen([sys.executable, "-m",
                                 "jitflow.backends.numba_cpu.compile_worker"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True, env=env)
    except OSError:
        return None


def shutdown() -> None:
    """Stop the helper (at exit, and before a restart) without waiting for the kernel it may
    be compiling: its work only fills the cache, and Numba writes cache files atomically."""
    proc = _STATE["proc"]
    _STATE["proc"] = None
    if proc is not None:
        try:
            proc.kill()
            proc.wait(timeout=5)
        except Exception:  # noqa: BLE001  (it is going away either way)
            pass


def compile_in_helper(source: str, kinds: tuple) -> Optional[bool]:
    """Have the helper compile `source`'s kernel for argument kinds ((dtype, ndim, writeable)
    for the inputs, then for the variables). True: compiled into the disk cache; False: the
    helper could not compile it; None: no helper (not started, or it died)."""
    with _LOCK:
        if _STATE["broken"]:
            return None
        if _STATE["proc"] is None or _STATE["served"] >= RESTART_AFTER:
            shutdown()
            _STATE["proc"] = _start()
            _STATE["served"] = 0
            if _STATE["proc"] is None:
                _STATE["broken"] = True
                return None
        proc = _STATE["proc"]
        from jitflow.backends.numba_cpu import cache
        req = {"source": source, "cache_dir": os.path.abspath(cache.cache_dir()),
               "args": [[d.str, n, w] for d, n, w in kinds[0]],
               "vars": [[d.str, n, w] for d, n, w in kinds[1]]}
        try:
            proc.stdin.write(json.dumps(req) + "\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
        except (OSError, ValueError):
            line = ""
        if not line:   # the helper died: compile on the thread from now on
            _STATE["proc"] = None
            _STATE["broken"] = True
            return None
        _STATE["served"] += 1
        return bool(json.loads(line).get("ok"))


atexit.register(shutdown)


def _after_fork_in_child() -> None:
    # the parent's helper and its pipes are the parent's: start our own when needed
    _STATE.update(proc=None, served=0)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _serve() -> None:
    import numpy as np

    from jitflow.backends.numba_cpu import cache, kernels as cpu
    for line in sys.stdin:
        try:
            req = json.loads(line)
            kinds = tuple([(np.dtype(d), int(n), bool(w)) for d, n, w in req[k]]
                          for k in ("args", "vars"))
            cpu.guard_vecmath_caches()
            os.environ["JITFLOW_CACHE_DIR"] = req["cache_dir"]   # where the client reads
            loaded = cache.load_module(req["source"])
            loaded.kernel.compile(cpu.numba_signature(kinds))
            resp = {"ok": True}
        except Exception as e:  # noqa: BLE001  (reported to the client, which compiles itself)
            resp = {"ok": False, "error": f"{type(e).__name__}: {str(e)[-300:]}"}
        sys.stdout.write(json.dumps(resp) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    _serve()
