"""Time the fused chain `sigmoid(x*w+b)*tanh(x) - exp(-x*x) + 0.5*x` three ways, one thread.

    .venv/bin/python benchmarks/vecmath_bench.py [--n 1000000] [--reps 60]

- vecmath: one njit loop calling jitflow.backends.numba_cpu.vecmath's helpers (vectorized);
- libm:    the same loop with `math.exp` / `math.tanh` (scalar libm calls);
- numpy:   the NumPy expression (temporaries and all).
Loops are compiled with the JIT's flags (error_model="numpy", fastmath={"contract"}) and write
into a preallocated output. Prints the median time of `reps` calls and the ratios, plus the
max error of each against a float64 (for float32) or long double (for float64) reference.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("NUMBA_NUM_THREADS", "1")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numba  # noqa: E402
import numpy as np  # noqa: E402

from jitflow.backends.numba_cpu import vecmath as vm  # noqa: E402


def make_loops(dt):
    """(vecmath loop, libm loop) for dtype `dt`."""
    sig, tanh, exp = vm.FUNCS[("sigmoid", dt)], vm.FUNCS[("tanh", dt)], vm.FUNCS[("exp", dt)]
    one, half = dt(1), dt(0.5)

    @numba.njit(**vm.JIT_OPTIONS)
    def fused_vm(x, w, b, out):
        for i in range(x.size):
            v = x[i]
            out[i] = sig(v * w + b) * tanh(v) - exp(-v * v) + half * v

    @numba.njit(**vm.JIT_OPTIONS)
    def fused_libm(x, w, b, out):
        for i in range(x.size):
            v = x[i]
            z = v * w + b
            e = math.exp(-abs(z))
            s = (one if z >= 0 else e) / (one + e)
            out[i] = s * math.tanh(v) - math.exp(-v * v) + half * v

    return fused_vm, fused_libm


def numpy_chain(x, w, b):
    z = x * w + b
    return 1 / (1 + np.exp(-z)) * np.tanh(x) - np.exp(-x * x) + x.dtype.type(0.5) * x


def reference(x, w, b):
    """The chain in long double: sigmoid as exp(-|z|) so nothing overflows."""
    xl = x.astype(np.longdouble)
    z = xl * np.longdouble(w) + np.longdouble(b)
    e = np.exp(-np.abs(z))
    s = np.where(z >= 0, 1, e) / (1 + e)
    return s * np.tanh(xl) - np.exp(-xl * xl) + xl / 2


def median_time(fn, reps: int) -> tuple:
    """(median wall seconds, median CPU seconds) per call; CPU time is the steadier of the two
    on a shared machine."""
    fn()
    wall, cpu = [], []
    for _ in range(reps):
        c0, t0 = time.process_time(), time.perf_counter()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return float(np.median(wall)), float(np.median(cpu))


def run(dt, n: int, reps: int) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(dt) * dt(3)
    w, b = dt(0.7), dt(-0.2)
    out = np.empty_like(x)
    fused_vm, fused_libm = make_loops(dt)
    t0 = time.perf_counter()
    fused_vm(x, w, b, out)
    c_vm = time.perf_counter() - t0
    t0 = time.perf_counter()
    fused_libm(x, w, b, out)
    c_libm = time.perf_counter() - t0

    ref = reference(x, w, b)
    errs = {}
    for name, f in (("vecmath", lambda: fused_vm(x, w, b, out) or out),
                    ("libm", lambda: fused_libm(x, w, b, out) or out),
                    ("numpy", lambda: numpy_chain(x, w, b))):
        errs[name] = float(np.max(np.abs(f().astype(np.longdouble) - ref)))
    t = {"vecmath": median_time(lambda: fused_vm(x, w, b, out), reps),
         "libm": median_time(lambda: fused_libm(x, w, b, out), reps),
         "numpy": median_time(lambda: numpy_chain(x, w, b), reps)}
    name = np.dtype(dt).name
    for j, kind in enumerate(("wall", "cpu")):
        v = {k: ts[j] for k, ts in t.items()}
        print(f"{name}, n={n}, {kind}: vecmath {v['vecmath'] * 1e3:.2f} ms, "
              f"libm {v['libm'] * 1e3:.2f} ms, numpy {v['numpy'] * 1e3:.2f} ms | "
              f"numpy/vecmath {v['numpy'] / v['vecmath']:.2f}x, "
              f"libm/vecmath {v['libm'] / v['vecmath']:.2f}x")
    print(f"    first call (compile): vecmath {c_vm:.2f} s, libm {c_libm:.2f} s")
    print("    max abs error: " + ", ".join(f"{k} {v:.2e}" for k, v in errs.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=60)
    ap.add_argument("--dtype", choices=("float32", "float64", "both"), default="both")
    args = ap.parse_args()
    print(f"numba {numba.__version__}, numpy {np.__version__}, one thread, "
          f"NUMBA_CPU_FEATURES={os.environ.get('NUMBA_CPU_FEATURES', '(default)')}")
    dts = {"float32": [np.float32], "float64": [np.float64],
           "both": [np.float32, np.float64]}[args.dtype]
    for dt in dts:
        run(dt, args.n, args.reps)


if __name__ == "__main__":
    main()
