"""Exit check: a short CNN training program run many times in fresh processes, in jitflow's
default mode, counting the runs that do not exit cleanly and the distinct results.

    python benchmarks/exit_check.py [--runs 100] [--caches cold,warm] [--cold-numba]
                                    [--modes sync,quick,numba] [--steps 20] [--out FILE]

The program (a `tf.layers` CNN: conv 3x3x8, max pool, dense 32, dropout, dense 10, softmax
cross entropy, Adam; 20 steps of batch 16 on fixed random data, graph seed 0) prints its last
loss and a digest of its trained weights and ends while jitflow's compiler thread still has
optimized code to build (the child reports how many compiles were queued at its last line), so
the interpreter exits with that thread alive. Two ways, `--runs` each:

- `cold`: every run on an empty kernel cache (JITFLOW_CACHE_DIR). Numba's cache of the window
  routines (the convolution and pooling entry points, nnlib_c.py) is filled once by an
  unrecorded run and shared, since building them takes ~20 s a process on a loaded 2-core
  machine; `--cold-numba` empties it for every run as well.
- `warm`: every run on one cache that an unrecorded first run filled.

A run fails when it exits with a non-zero status or a signal, or prints no result. The results
(loss and weight digest) must be bit-identical across every run, cold and warm: the steps that
ran on quick code and those that ran on optimized code depend on the compiler's timing, and the
digits must not. `--modes` adds one run per named JITFLOW_COMPILE mode (default sync, quick,
numba), whose results must be the same bits too. Exit status 1 on any failed run or any second
result.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARK = "EXITCHECK "


def child(steps: int) -> dict:
    """The program: train, print the result, exit (compiles may still be queued)."""
    import hashlib

    import numpy as np

    import jitflow as tf
    from jitflow.backends.numba_cpu import background
    tf.set_random_seed(0)
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((64, 14, 14, 1)).astype(np.float32)
    ys = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 64)]
    x = tf.placeholder(tf.float32, [None, 14, 14, 1], name="x")
    y = tf.placeholder(tf.float32, [None, 10], name="y")
    h = tf.layers.conv2d(x, 8, 3, padding="same", activation=tf.nn.relu)
    h = tf.layers.max_pooling2d(h, 2, 2)
    h = tf.layers.dense(tf.layers.flatten(h), 32, activation=tf.nn.relu)
    h = tf.layers.dropout(h, 0.25, training=True)
    logits = tf.layers.dense(h, 10)
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits_v2(labels=y, logits=logits))
    train = tf.train.AdamOptimizer(1e-3).minimize(loss)
    sess = tf.Session()
    sess.run(tf.global_variables_initializer())
    value = None
    for i in range(steps):
        s = slice((i * 16) % 64, (i * 16) % 64 + 16)
        value, _ = sess.run([loss, train], {x: xs[s], y: ys[s]})
    weights = sess.run(tf.trainable_variables())
    digest = hashlib.sha256(b"".join(np.ascontiguousarray(w).tobytes()
                                     for w in weights)).hexdigest()[:16]
    return {"loss": float(value).hex(), "weights": digest, "pending": background.pending(),
            "mode": background.mode()}


def child_env(jitflow_cache: str, numba_cache: str, mode: str = None) -> dict:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", JITFLOW_CACHE_DIR=jitflow_cache,
               NUMBA_CACHE_DIR=numba_cache, PYTHONPATH=ROOT)
    env.pop("JITFLOW_COMPILE", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if mode is not None:
        env["JITFLOW_COMPILE"] = mode
    return env


def run_once(env: dict, steps: int, timeout: float, cwd: str) -> dict:
    """One fresh process: {"status": exit status (negative: killed by that signal),
    "result": the child's line or None, "tail": its last output lines on failure}."""
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--steps", str(steps)]
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout,
                           cwd=cwd)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "result": None, "tail": f"over {timeout:.0f} s",
                "wall": timeout}
    result = None
    for line in p.stdout.splitlines():
        if line.startswith(MARK):
            result = json.loads(line[len(MARK):])
    out = {"status": p.returncode, "result": result, "wall": time.perf_counter() - t0}
    if p.returncode or result is None:
        out["tail"] = " | ".join((p.stderr or p.stdout).strip().splitlines()[-4:])[:400]
    return out


def status_name(status) -> str:
    if status == "timeout":
        return "timeout"
    if isinstance(status, int) and status < 0:
        try:
            return signal.Signals(-status).name
        except ValueError:
            return f"signal {-status}"
    return f"exit {status}"


def check(runs: int, caches: list, cold_numba: bool, modes: list, steps: int,
          timeout: float, progress: bool = True) -> dict:
    """Run everything; {"runs": {cache: [run, ...]}, "modes": {mode: run}}."""
    from tqdm import tqdm
    tmp = tempfile.mkdtemp(prefix="jitflow-exit-")
    out: dict = {"runs": {}, "modes": {}}
    try:
        shared_numba = os.path.join(tmp, "numba-shared")
        warm_cache = os.path.join(tmp, "warm")
        # the unrecorded runs: Numba's window routines for the cold runs, the warm cache
        run_once(child_env(warm_cache, shared_numba), steps, timeout, tmp)
        total = runs * len(caches) + len(modes)
        with tqdm(total=total, desc="exit check", file=sys.stderr, disable=not progress) as bar:
            for cache in caches:
                rs = out["runs"].setdefault(cache, [])
                for _ in range(runs):
                    if cache == "warm":
                        env = child_env(warm_cache, shared_numba)
                    else:
                        fresh = tempfile.mkdtemp(dir=tmp)
                        env = child_env(os.path.join(fresh, "jitflow"),
                                        os.path.join(fresh, "numba") if cold_numba
                                        else shared_numba)
                    r = run_once(env, steps, timeout, tmp)
                    rs.append(r)
                    if cache != "warm":
                        shutil.rmtree(fresh, ignore_errors=True)
                    if r["status"] or r["result"] is None:
                        bar.write(f"{cache}: {status_name(r['status'])}: {r.get('tail', '')}",
                                  file=sys.stderr)
                    bar.update(1)
            for mode in modes:
                fresh = tempfile.mkdtemp(dir=tmp)
                out["modes"][mode] = run_once(
                    child_env(os.path.join(fresh, "jitflow"), shared_numba, mode), steps,
                    timeout, tmp)
                bar.update(1)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def summarize(out: dict) -> tuple:
    """(markdown report, ok)."""
    results: collections.Counter = collections.Counter()
    lines = ["| runs | processes | clean exits | failures (status: count) | no result | "
             "compiles still queued at the last line | median wall |",
             "|---|---|---|---|---|---|---|"]
    ok = True
    for cache, rs in out["runs"].items():
        bad = collections.Counter(status_name(r["status"]) for r in rs if r["status"])
        missing = sum(1 for r in rs if r["result"] is None)
        queued = sum(1 for r in rs if r["result"] and r["result"]["pending"])
        walls = sorted(r["wall"] for r in rs)
        median = f"{walls[len(walls) // 2]:.2f} s" if walls else "-"
        for r in rs:
            if r["result"]:
                results[(r["result"]["loss"], r["result"]["weights"])] += 1
        ok = ok and not bad and not missing
        lines.append(f"| {cache} | {len(rs)} | {len(rs) - sum(bad.values())} | "
                     + (", ".join(f"{k}: {v}" for k, v in bad.items()) or "0")
                     + f" | {missing} | {queued} of {len(rs)} | {median} |")
    mode_lines = []
    for mode, r in out["modes"].items():
        res = r["result"]
        if r["status"] or res is None:
            ok = False
            mode_lines.append(f"| {mode} | {status_name(r['status'])} | | |")
            continue
        results[(res["loss"], res["weights"])] += 0   # listed, not counted as a run
        mode_lines.append(f"| {mode} | {status_name(r['status'])} | {res['loss']} | "
                          f"{res['weights']} |")
    lines += ["", f"Distinct results (loss as float.hex, weight digest) over every run: "
              f"{len(results)}", "", "| loss | weights sha256[:16] | runs |", "|---|---|---|"]
    lines += [f"| {loss} | {w} | {n} |" for (loss, w), n in results.most_common()]
    if mode_lines:
        lines += ["", "One run per JITFLOW_COMPILE mode (empty kernel cache):", "",
                  "| mode | status | loss | weights sha256[:16] |", "|---|---|---|---|"]
        lines += mode_lines
    ok = ok and len(results) == 1
    return "\n".join(lines) + "\n", ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--runs", type=int, default=100, help="processes per cache state")
    ap.add_argument("--caches", default="cold,warm")
    ap.add_argument("--cold-numba", action="store_true",
                    help="cold runs also start without Numba's window routines (slow)")
    ap.add_argument("--modes", default="sync,quick,numba",
                    help="one run per JITFLOW_COMPILE mode, same bits required ('' for none)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--timeout", type=float, default=300, help="seconds per process")
    ap.add_argument("--out", help="also write the report (markdown) to this file")
    args = ap.parse_args(argv)
    if args.child:
        print(MARK + json.dumps(child(args.steps)), flush=True)
        return 0
    caches = [c for c in args.caches.split(",") if c]
    for c in caches:
        if c not in ("cold", "warm"):
            ap.error(f"unknown cache state {c!r} (cold, warm)")
    modes = [m for m in args.modes.split(",") if m]
    t0 = time.time()
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    out = check(args.runs, caches, args.cold_numba, modes, args.steps, args.timeout)
    text, ok = summarize(out)
    head = ["## Exit check: a short CNN program in fresh processes, default mode", "",
            f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(t0))}",
            f"- machine: {os.cpu_count()} CPUs; load average at start {load}, at end "
            + ", ".join(f"{v:.2f}" for v in os.getloadavg()),
            f"- {args.steps} training steps a run; cold runs: empty kernel cache"
            + (", empty Numba cache" if args.cold_numba else
               ", Numba's window routines from a shared cache"),
            f"- verdict: {'PASS' if ok else 'FAIL'} (every exit clean, one result)", ""]
    report = "\n".join(head) + "\n" + text
    print(report)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            f.write(report)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
