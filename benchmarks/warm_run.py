"""Warm per-run overhead of a tiny graph: `Session.run(y, {x: a})` and a `make_callable`
callable for y = x * 2 + 1 on a 10-element float32 feed, with the fast path's native entry
(JITFLOW_NATIVE_ENTRY=1, the default) and with its Python wrapper (=0), in the default compile
mode. Each setting runs in its own process (the variable is read when kernels are built).

    .venv/bin/python benchmarks/warm_run.py [--runs 100000] [--repeats 5]

Prints, per setting and caller, the microseconds per run: median and min over the repeats
(each repeat times `--runs` runs). Results are checked against NumPy before timing.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

_CHILD = r"""
import json, sys, time
import numpy as np
import jitflow as tf
runs, repeats = int(sys.argv[1]), int(sys.argv[2])
x = tf.placeholder(tf.float32, [None], name="x")
s = tf.placeholder(tf.float32, [], name="s")
y = x * 2.0 + 1.0
z = x * s + 1.0
a = np.arange(10, dtype=np.float32)
want = a * np.float32(2) + np.float32(1)
from jitflow.backends.numba_cpu import background, llvmjit
out = {}
with tf.Session() as sess:
    f = sess.make_callable(y, [x])
    for _ in range(3):
        assert sess.run(y, {x: a}).tobytes() == want.tobytes()
        assert f(a).tobytes() == want.tobytes()
        assert sess.run(z, {x: a, s: 2.0}).tobytes() == want.tobytes()
    background.wait_idle()
    feed, feed2 = {x: a}, {x: a, s: 2.0}
    cases = {"Session.run(y, {x: a})": lambda: sess.run(y, feed),
             "Session.run(z, {x: a, s: 2.0})": lambda: sess.run(z, feed2),
             "make_callable(y, [x])(a)": lambda: f(a)}
    for name, fn in cases.items():
        ts = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            for _ in range(runs):
                fn()
            ts.append((time.perf_counter() - t0) / runs * 1e6)
        out[name] = sorted(ts)
out["native_entries"] = llvmjit.STATS["native_entries"]
out["python_wrappers"] = llvmjit.STATS["python_wrappers"]
print(json.dumps(out))
"""


def measure(native: bool, runs: int, repeats: int) -> dict:
    """One child process's timings (us per run, sorted) with the native entry on or off."""
    env = dict(os.environ, JITFLOW_NATIVE_ENTRY="1" if native else "0",
               OPENBLAS_NUM_THREADS="1")
    env.pop("JITFLOW_COMPILE", None)     # the default mode
    res = subprocess.run([sys.executable, "-c", _CHILD, str(runs), str(repeats)], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    res = {n: measure(n, args.runs, args.repeats) for n in (True, False)}
    print(f"warm runs, {args.runs} per repeat, {args.repeats} repeats: us per run "
          "(median / min)")
    print(f"{'caller':34} {'native entry':>16} {'Python wrapper':>16} {'ratio':>7}")
    for name in [k for k in res[True] if isinstance(res[True][k], list)]:
        a, b = res[True][name], res[False][name]
        ma, mb = a[len(a) // 2], b[len(b) // 2]
        print(f"{name:34} {ma:7.2f} / {a[0]:6.2f} {mb:7.2f} / {b[0]:6.2f} {mb / ma:6.1f}x")
    print(f"kernels with a native entry: {res[True]['native_entries']} (on), "
          f"{res[False]['native_entries']} (off)")


if __name__ == "__main__":
    main()
