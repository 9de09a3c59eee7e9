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


def pin() -> dict[str, str]:
    """Set the single-thread variables (overriding inherited ones); returns what is in effect."""
    os.environ.update(THREAD_ENV)
    for k, v in QUIET_ENV.items():
        os.environ.setdefault(k, v)
    return {k: os.environ[k] for k in THREAD_ENV}
