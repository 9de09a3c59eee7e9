"""Memory of a process that compiles many distinct graphs: build, run and drop each one.

    python benchmarks/kernel_memory.py [--graphs 2000] [--every 200] [--disk]

Each graph is a small random elementwise chain (different ops and constants, so a different
kernel); it is run once in its own session, which is then closed and dropped. Prints the
process's resident memory (VmRSS) every `--every` graphs, with the number of kernels the
in-memory cache holds. Without `--disk` the disk cache is off (JITFLOW_CACHE=0), so every
graph compiles. The in-memory cache is bounded by JITFLOW_MEMORY_CACHE_ENTRIES and
JITFLOW_MEMORY_CACHE_MB (see jitflow/compiler/cache.py).

Measured (2-core VM shared with a fuzzer; numba 0.68, `--graphs 2000 --every 200`): before the
bounded cache RSS went 178 MB -> 3674 MB (+1.75 MB per graph, every kernel kept); with it (256
entries) 178 MB -> 3211 MB (+1.52 MB per graph). Evicted kernels' Python objects are freed
(about 120 bytes per byte of kernel source); what remains is the machine code and LLVM modules
Numba's JIT engine never releases. Kernels loaded from the disk cache cost about 0.33 MB each.
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


def build_and_run(tf, np, i: int) -> None:
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


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--graphs", type=int, default=2000)
    p.add_argument("--every", type=int, default=200)
    p.add_argument("--disk", action="store_true", help="keep the disk cache on (a temp dir)")
    args = p.parse_args(argv)
    tmp = tempfile.TemporaryDirectory(prefix="jitflow-mem-")
    if args.disk:
        os.environ["JITFLOW_CACHE_DIR"] = tmp.name
    else:
        os.environ["JITFLOW_CACHE"] = "0"
    import warnings

    import numpy as np

    import jitflow as tf
    from jitflow.compiler import cache
    warnings.simplefilter("ignore", RuntimeWarning)
    build_and_run(tf, np, 10 ** 9)   # Numba and the vecmath helpers warm: the baseline
    gc.collect()
    base = rss_mb()
    limits = cache.memory_limits() if hasattr(cache, "memory_limits") else None
    print(f"baseline {base:.0f} MB after one graph; in-memory cache limits {limits}")
    t0 = time.perf_counter()
    for i in range(args.graphs):
        build_and_run(tf, np, i)
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
