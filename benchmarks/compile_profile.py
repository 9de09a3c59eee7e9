"""Where cold compile time goes: one cold compile per graph, broken down by phase (CPU s).

    OPENBLAS_NUM_THREADS=1 python benchmarks/compile_profile.py [--cases fwd50,train50,rnn,cnn]
                                                               [--json out.json] [--top 8]

Each case runs in a fresh process with JITFLOW_COMPILE=sync and an empty JITFLOW_CACHE_DIR,
builds its graph, and times the first `Session.run` (after one warm-up run of the variable
initializer, which compiles nothing but warms Numba's own start-up). Phases are *exclusive*
CPU seconds (a nested phase is not counted in its parent):

- ``jitflow``: our lowering and source generation (`driver.generate_segment`);
- ``frontend``: Numba's untyped passes (bytecode analysis, IR generation, inlining, rewrites);
- ``typing``: Numba's type inference (`nopython_type_inference`), which includes resolving
  the overloads each call needs (typing `np.empty`, helper signatures, ...);
- ``typed``: Numba's other typed passes (legalisation, rewrites, parfors);
- ``lowering``: Numba's lowering to LLVM IR (the `native_lowering` pass without LLVM's work);
- ``llvm_fn``: LLVM IR parsing and per-function optimisation (`add_ir_module`);
- ``llvm_module``: LLVM's module optimisation (cheap and full pipelines);
- ``llvm_codegen``: machine code generation (`finalize_object`);
- ``cache``: Numba's disk cache writes (pickling the overload and its object code);
- ``rest``: everything else in the run (planning, the driver, the run itself).

`functions` counts Numba type-inference runs (one per function compiled: kernels, `njit`
helpers, and the implementations of `np.*` overloads Numba compiles internally); `by function`
lists the most frequent names.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARK = "PROFILE "
PHASES = ("jitflow", "frontend", "typing", "typed", "lowering", "llvm_fn", "llvm_module",
          "llvm_codegen", "cache", "rest")


class Clock:
    """Exclusive CPU time per phase: time is charged to the innermost open phase."""

    def __init__(self) -> None:
        self.stack = ["rest"]
        self.details = [None]
        self.total = collections.Counter()
        self.detail = collections.Counter()
        self.last = time.process_time()

    def _charge(self) -> None:
        now = time.process_time()
        self.total[self.stack[-1]] += now - self.last
        if self.details[-1]:
            self.detail[self.details[-1]] += now - self.last
        self.last = now

    def push(self, phase: str, detail: str = None) -> None:
        self._charge()
        self.stack.append(phase)
        self.details.append(detail or phase)

    def pop(self) -> None:
        self._charge()
        self.stack.pop()
        self.details.pop()

    def wrap(self, owner, name: str, phase: str) -> None:
        fn = getattr(owner, name)
        clock = self

        def timed(*a, **k):
            clock.push(phase)
            try:
                return fn(*a, **k)
            finally:
                clock.pop()

        setattr(owner, name, timed)


_UNTYPED_AFTER = "nopython_type_inference"
_LOWER = ("native_lowering", "nopython_backend", "object_mode_backend")


def install(clock: Clock, names: collections.Counter) -> None:
    from numba.core import caching, codegen, event

    from jitflow.backends.numba_cpu import kernels as driver

    clock.wrap(driver, "generate_segment", "jitflow")
    clock.wrap(codegen.CPUCodeLibrary, "add_ir_module", "llvm_fn")
    clock.wrap(codegen.CPUCodeLibrary, "_optimize_final_module", "llvm_module")
    clock.wrap(codegen.JITCodeLibrary, "_finalize_specific", "llvm_codegen")
    clock.wrap(caching.Cache, "save_overload", "cache")

    typed_seen: list = []   # per open pipeline: whether type inference ran already

    class Passes(event.Listener):
        def on_start(self, ev):
            name = ev.data["name"].split(" [")[0]
            q = ev.data["qualname"]
            if name == "translate_bytecode":
                typed_seen.append(False)
            if name == _UNTYPED_AFTER:
                names[q] += 1
                if typed_seen:
                    typed_seen[-1] = True
                phase = "typing"
            elif name in _LOWER:
                phase = "lowering"
            elif typed_seen and typed_seen[-1]:
                phase = "typed"
            else:
                phase = "frontend"
            clock.push(phase, "pass " + name)

        def on_end(self, ev):
            clock.pop()
            name = ev.data["name"].split(" [")[0]
            if name == "nopython_backend" and typed_seen:
                typed_seen.pop()

    event.register("numba:run_pass", Passes())


# -- the graphs ---------------------------------------------------------------------------------
def build(case: str):
    """(session, fetch, feed) of one case, variables initialised."""
    import numpy as np

    import jitflow as tf
    if case.startswith(("fwd", "train")):
        from benchmarks import compile_scaling as cs
        train = case.startswith("train")
        n = int(case[5:] if train else case[3:])
        steps = cs.program(n)
        xv, wv = cs._data(steps)
        x = tf.placeholder(tf.float32, [None, cs.WIDTH], name="x")
        ws = [tf.Variable(w, name=f"w{k}") for k, w in enumerate(wv)]
        loss = cs.forward(tf, x, ws, steps, True)
        fetch = [loss, tf.train.AdamOptimizer(1e-3).minimize(loss)] if train else loss
        feed = {x: xv}
    elif case == "rnn":   # the graph of benchmarks/rnn_first_step.py
        from benchmarks.rnn_first_step import build
        loss, train, feed = build(tf, np)
        fetch = [loss, train]
    elif case == "cnn":   # as benchmarks/model_cases.py, batch 32
        from benchmarks import model_cases as mc
        d = mc.cnn_data(32)(np.random.default_rng(0))

        class Api:
            xent = staticmethod(tf.nn.softmax_cross_entropy_with_logits_v2)

        X, Y, _params, loss, train = mc._cnn_build(Api, d)(tf)
        fetch = [loss, train]
        feed = {X: d["X"], Y: d["Y"]}
    else:
        raise SystemExit(f"unknown case {case}")
    sess = tf.Session()
    sess.run(tf.global_variables_initializer())
    return sess, fetch, feed


def child(case: str) -> dict:
    c0 = time.process_time()
    import jitflow  # noqa: F401
    from jitflow.backends.numba_cpu import cache as jcache
    c_import = time.process_time() - c0
    sess, fetch, feed = build(case)
    clock = Clock()
    names: collections.Counter = collections.Counter()
    install(clock, names)
    n_ops = len(sess.graph.get_operations())
    before = dict(jcache.STATS)
    clock.total.clear()
    clock.last = time.process_time()
    t0, c1 = time.perf_counter(), time.process_time()
    sess.run(fetch, feed)
    clock._charge()
    cpu, wall = time.process_time() - c1, time.perf_counter() - t0
    stats = {k: v - before.get(k, 0) for k, v in jcache.STATS.items()}
    return {"case": case, "graph_ops": n_ops, "import_cpu": c_import, "first_cpu": cpu,
            "first_wall": wall, "phases": {p: clock.total.get(p, 0.0) for p in PHASES},
            "functions": sum(names.values()), "distinct": len(names),
            "kernels_compiled": stats.get("compiles", 0),
            "modules_built": stats.get("modules_built", 0),
            "memory_hits": stats.get("memory_hits", 0),
            "by_function": names.most_common(),
            "detail": sorted(clock.detail.items(), key=lambda kv: -kv[1])}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child")
    ap.add_argument("--cases", default="fwd50,train50,rnn,cnn")
    ap.add_argument("--json")
    ap.add_argument("--top", type=int, default=8)
    args = ap.parse_args(argv)
    if args.child:
        print(MARK + json.dumps(child(args.child)), flush=True)
        return 0
    rows = []
    for case in args.cases.split(","):
        with tempfile.TemporaryDirectory(prefix="jitflow-profile-") as d:
            env = dict(os.environ, JITFLOW_COMPILE="sync", JITFLOW_CACHE_DIR=d,
                       NUMBA_CACHE_DIR=os.path.join(d, "numba"), OPENBLAS_NUM_THREADS="1",
                       PYTHONPATH=ROOT)
            p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", case],
                               env=env, capture_output=True, text=True)
        line = [x for x in p.stdout.splitlines() if x.startswith(MARK)]
        if not line:
            print(f"{case}: failed\n{p.stderr[-2000:]}", file=sys.stderr)
            continue
        r = json.loads(line[0][len(MARK):])
        rows.append(r)
        print(f"{case}: {r['first_cpu']:.2f} cpu s, {r['functions']} functions typed "
              f"({r['distinct']} distinct), {r['kernels_compiled']} kernels; top: "
              + ", ".join(f"{n} x{k}" for n, k in r["by_function"][:args.top]), file=sys.stderr)
    print("| graph | ops | first run CPU s | " + " | ".join(PHASES)
          + " | functions typed (distinct) | kernels |")
    print("|---|---|---|" + "---|" * len(PHASES) + "---|---|")
    for r in rows:
        print(f"| {r['case']} | {r['graph_ops']} | {r['first_cpu']:.2f} | "
              + " | ".join(f"{r['phases'][p]:.2f}" for p in PHASES)
              + f" | {r['functions']} ({r['distinct']}) | {r['kernels_compiled']} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
