"""Allocator tuning for kernels that hand back large arrays.

Every run returns fresh arrays (a fetched value never aliases a buffer jitflow reuses). With
glibc's defaults, an allocation above the dynamic mmap threshold (at most 32 MiB) is a fresh
`mmap` each call, so a 1e7-element float32 result costs ten thousand page faults per run: on
the fused chain at 1e7 elements that was 33 ms of a 14 ms computation. Raising the mmap and
trim thresholds lets glibc recycle those blocks from its heap instead.

The change is process-wide, so it is made once, when the compiled backend is first used, only
on glibc, and never when the user already tuned malloc (`MALLOC_MMAP_THRESHOLD_`,
`MALLOC_TRIM_THRESHOLD_`, `GLIBC_TUNABLES`). `JITFLOW_MALLOC_TUNE=0` turns it off.
"""
from __future__ import annotations

import ctypes
import os
import sys
from jitflow.runtime import config

__all__ = ["tune_allocator", "THRESHOLD"]

THRESHOLD = 256 << 20  # blocks up to 256 MiB come from (and return to) the heap
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_state: list = []  # [applied: bool] once decided


def tune_allocator() -> bool:
    """Raise glibc's mmap/trim thresholds once per process; True if it was done."""
    if _state:
        return _state[0]
    applied = False
    env = os.environ
    user_tuned = any(k in env for k in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_",
                                        "GLIBC_TUNABLES"))
    if config.get("JITFLOW_MALLOC_TUNE") and not user_tuned \
            and sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL("libc.so.6")
            if not hasattr(libc, "gnu_get_libc_version"):  # glibc only
                raise AttributeError("not glibc")
            applied = bool(libc.mallopt(_M_MMAP_THRESHOLD, THRESHOLD)) and bool(
                libc.mallopt(_M_TRIM_THRESHOLD, THRESHOLD))
        except (OSError, AttributeError):
            applied = False
    _state.append(applied)
    return applied
