"""Single-thread settings for every peer; `pin()` must run before numpy or any peer is imported.

Kept free of heavy imports so that `run.py` can call it first. The 2-core machines this suite
runs on make multi-threaded BLAS, OpenMP, TF and XLA slower and noisier (DESIGN.md §5), and one
thread per peer makes the comparison about code generation rather than thread pools.
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


def pin(n: int = 1) -> dict[str, str]:
    """Set the variables for `n` threads per peer (default one; overriding inherited ones);
    returns what is in effect."""
    env = thread_env(n)
    os.environ.update(env)
    for k, v in QUIET_ENV.items():
        os.environ.setdefault(k, v)
    return {k: os.environ[k] for k in env}
