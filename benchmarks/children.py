"""Running one benchmark peer in a fresh process: its environment, and its one result line.

Peers named `jitflow-sync`, `jitflow-quick` and `jitflow-numba` get that JITFLOW_COMPILE mode;
every other peer (`jitflow` included) gets jitflow's default mode (`auto`: quick code at once,
optimized code from the compiler thread), whatever the parent has. Children run with one BLAS
thread, TF's logging quiet and this checkout first on the path.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: peer name -> its JITFLOW_COMPILE (peers not named here run the default mode)
MODES = {"jitflow-sync": "sync", "jitflow-quick": "quick", "jitflow-numba": "numba"}


def peer_env(peer: str, cache_dir: str, **extra: str) -> dict:
    """The environment of a child running `peer` with the kernel cache in `cache_dir`."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", TF_CPP_MIN_LOG_LEVEL="3",
               JITFLOW_CACHE_DIR=cache_dir, PYTHONPATH=ROOT, **extra)
    env.pop("JITFLOW_COMPILE", None)
    mode = MODES.get(peer)
    if mode is not None:
        env["JITFLOW_COMPILE"] = mode
    return env


def run(cmd: list, env: dict, mark: str, timeout: Optional[float] = None) -> dict:
    """Run `cmd`; the JSON after `mark` on its stdout, with "process_wall" added, or
    {"error": the last lines of its output}."""
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"over {timeout:.0f} s"}
    wall = time.perf_counter() - t0
    for line in p.stdout.splitlines():
        if line.startswith(mark):
            return dict(json.loads(line[len(mark):]), process_wall=wall)
    tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
    return {"error": " | ".join(tail)[:300]}


def script_cmd(path: str, *args: str) -> list:
    return [sys.executable, os.path.abspath(path), *args]
