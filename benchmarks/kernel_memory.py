"""Memory of a process that compiles many distinct graphs: build, run and drop each one.

    python benchmarks/kernel_memory.py [--graphs 2000] [--every 200] [--disk]

Each graph is a small random elementwise chain (different ops and constants, so a different
kernel); it is run once in its own session, which is then closed and dropped. Prints the
process's resident memory (VmRSS) every `--every` graphs, with the number of kernels the
in-memory cache holds. Without `--disk` the disk cache is off (JITFLOW_CACHE=0), so every
graph compiles. The in-memory cache is bounded by JITFLOW_MEMORY_CACHE_ENTRIES and
JITFLOW_MEMORY_CACHE_MB (see jitflow/backends/numba_cpu/cache.py).

`--wait` waits for the background compiler after each graph's first run and runs it again, so
that every graph ends up on its native kernel (compiled by the helper process, loaded here).

Measured (2-core VM shared with other work; numba 0.68):
- default mode (runs go to the references while kernels compile in the background, helper
  process, disk cache), `--graphs 2000 --every 250 --disk`: RSS 171 MB after 250 graphs and
  180 MB after 2000 (flat: a graph dropped before its kernel is ready is never compiled; 12
  kernels were built in all). The 130 MB over the first graph are Numba's import and set-up.
- default mode with `--wait` (every graph runs on its own native kernel, compiled by the helper
  process and loaded here), `--graphs 1000 --every 250 --disk --wait`: 266 MB after 250 graphs,
  308 MB after 1000: once the in-memory cache is full (256 kernels) each new kernel adds about
  56 KB (the machine code Numba's JIT engine keeps; the evicted kernel's objects are freed).
- JITFLOW_COMPILE=sync (every kernel compiled in this process), `--graphs 1000 --disk`: 179 MB
  -> 1843 MB, +1.6 MB per graph: Numba's JIT engine never releases machine code or LLVM
  modules, whatever jitflow's bounded in-memory cache evicts (its Python objects are freed).
- Before the bounded cache (sync, 2000 graphs): 178 MB -> 3674 MB.
"""
from __future__ import annotations

import argparse
import ctypes
import gc
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def rss_mb(trim: bool = False) -> float:
    """Resident memory of this process now, from /proc (ru_maxrss is only the peak); with
    `trim`, after asking glibc to return freed memory (jitflow raises its trim threshold)."""
    if trim:
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except OSError:
            pass
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def build_and_run(tf, np, i: int, wait: bool = False) -> None:
    """Graph number `i`: a chain of 2-7 elementwise ops with constants drawn from `i`."""
    rng = np.random.default_rng(i)
    tf.reset_default_graph()
    x = tf.placeholder(tf.float32, [None, 4], name="x")
    h = x
    for _ in range(int(rng.integers(2, 8))):
        c = float(np.round(rng.uniform(-3, 3), 3))
        kind = int(rng.integers(0, 7))
        if kind == 0:
            h = h * c
        elif kind == 1:
            h = h + c
        elif kind == 2:
            h = tf.tanh(h)
        elif kind == 3:
            h = tf.square(h) - c
        elif kind == 4:
            h = tf.maximum(h, c)
        elif kind == 5:
            h = tf.exp(-tf.abs(h))
        else:
            h = h / (1.0 + tf.abs(h))
    y = tf.reduce_sum(h, axis=1) if rng.integers(0, 2) else h
    xv = rng.standard_normal((3, 4)).astype(np.float32)
    with tf.Session() as sess:
        sess.run(y, {x: xv})
        if wait:
            from jitflow.backends.numba_cpu import background
            background.wait_idle(600)
            sess.run(y, {x: xv})


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--graphs", type=int, default=2000)
    p.add_argument("--every", type=int, default=200)
    p.add_argument("--disk", action="store_true", help="keep the disk cache on (a temp dir)")
    p.add_argument("--wait", action="store_true",
                   help="run each graph again once its kernel is ready (native runs)")
    args = p.parse_args(argv)
    tmp = tempfile.TemporaryDirectory(prefix="jitflow-mem-")
    if args.disk:
        os.environ["JITFLOW_CACHE_DIR"] = tmp.name
    else:
        os.environ["JITFLOW_CACHE"] = "0"
    import warnings

    import numpy as np

    import jitflow as tf
    from jitflow.backends.numba_cpu import cache
    warnings.simplefilter("ignore", RuntimeWarning)
    build_and_run(tf, np, 10 ** 9)   # Numba and the vecmath helpers warm: the baseline
    gc.collect()
    base = rss_mb()
    limits = cache.memory_limits() if hasattr(cache, "memory_limits") else None
    print(f"baseline {base:.0f} MB after one graph; in-memory cache limits {limits}")
    t0 = time.perf_counter()
    for i in range(args.graphs):
        build_and_run(tf, np, i, args.wait)
        if (i + 1) % args.every == 0:
            gc.collect()
            now, trimmed = rss_mb(), rss_mb(trim=True)
            print(f"{i + 1:6d} graphs  RSS {now:6.0f} MB (+{now - base:5.0f}), trimmed "
                  f"{trimmed:6.0f} MB (+{trimmed - base:5.0f})  cached kernels "
                  f"{len(cache._MEMORY):4d}  built {cache.STATS['modules_built']}  "
                  f"{time.perf_counter() - t0:5.0f} s", flush=True)
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
