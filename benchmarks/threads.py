"""Single-thread settings for every peer; `pin()` must run before numpy or any peer is imported.

Kept free of heavy imports so that `run.py` can call it first. The 2-core machines this suite
runs on make multi-threaded BLAS, OpenMP, TF and XLA slower and noisier (DESIGN.md §5), and one
thread per peer makes the comparison about code generation rather than thread pools. Besides
the variables, `pin()` holds the process to as many CPUs as threads, since some pools (XLA's)
heed no variable.
"""
from __future__ import annotations

import os

THREAD_ENV: dict[str, str] = {
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "NUMBA_NUM_THREADS": "1",
    "TF_NUM_INTRAOP_THREADS": "1",
    "TF_NUM_INTEROP_THREADS": "1",
    "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
}

QUIET_ENV: dict[str, str] = {
    "TF_CPP_MIN_LOG_LEVEL": "2",
    "JAX_PLATFORMS": "cpu",
}


def thread_env(n: int = 1) -> dict[str, str]:
    """The variables that give every peer `n` threads (jitflow's parallel kernels included)."""
    if n == 1:
        return dict(THREAD_ENV)
    env = {k: str(n) for k in THREAD_ENV if k != "XLA_FLAGS"}
    env["XLA_FLAGS"] = f"--xla_cpu_multi_thread_eigen=true intra_op_parallelism_threads={n}"
    env["JITFLOW_THREADS"] = str(n)
    return env


def pin_cpus(n: int) -> list:
    """Keep this process (and the processes it starts) on `n` of the CPUs it may use, the last
    ones; returns the CPUs it may use afterwards.

    The variables above do not hold JAX to one thread: XLA's CPU runtime runs large loops on
    its own thread pool whatever XLA_FLAGS says (a 1e7-element chain used 1.8 cores and took
    19 ms; held to one CPU, 31 ms). An affinity mask holds every peer's pools to `n` cores."""
    if not hasattr(os, "sched_setaffinity"):
        return []
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) > n >= 1:
        os.sched_setaffinity(0, cpus[-n:])
    return sorted(os.sched_getaffinity(0))


def pin(n: int = 1, cpus: bool = True) -> dict[str, str]:
    """Set the variables for `n` threads per peer (default one; overriding inherited ones) and,
    with `cpus`, keep the process on `n` CPUs (`pin_cpus`); returns the variables in effect."""
    env = thread_env(n)
    os.environ.update(env)
    for k, v in QUIET_ENV.items():
        os.environ.setdefault(k, v)
    if cpus:
        pin_cpus(n)
    return {k: os.environ[k] for k in env}
