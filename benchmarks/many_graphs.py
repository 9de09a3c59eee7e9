"""Many small graphs: build and run N random TF1 programs (the fuzzer's generator: a few to a
few dozen ops, some with gradients and train steps, each run about 5 times), as a
hyper-parameter sweep, a test suite or a notebook would, each peer in a fresh process with an
empty kernel cache.

    python benchmarks/many_graphs.py [-n 300] [--start 0] [--peers jitflow,jitflow-sync,tf1]

Prints the wall and CPU seconds per peer and the ratio to TensorFlow. jitflow's default mode
compiles in the background while runs use the reference interpreter; "jitflow-sync" waits
for every kernel (JITFLOW_COMPILE=sync).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from benchmarks import children  # noqa: E402
MARK = "MANY "


def child(peer: str, n: int, start: int) -> dict:
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from fuzz.generator import generate
    from fuzz.runner import run_program
    if peer.startswith("jitflow"):
        import jitflow as tfm
        backend = "numba"
    else:
        import tensorflow.compat.v1 as tfm
        tfm.disable_eager_execution()
        backend = None
    t0, c0 = time.perf_counter(), time.process_time()
    crashes = 0
    for seed in range(start, start + n):
        out = run_program(generate(seed), tfm, backend)
        crashes += out.crash is not None
    res = {"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0,
           "crashes": crashes}
    if peer.startswith("jitflow"):
        from jitflow.backends.numba_cpu import background
        from jitflow.backends.numba_cpu.kernels import STATS
        res.update({"compiles": STATS.get("compiles", 0),
                    "skipped": STATS.get("background_skipped", 0),
                    "still_pending": background.pending()})
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=300)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--peers", default="jitflow,jitflow-sync,tf1")
    ap.add_argument("--child")
    args = ap.parse_args(argv)
    if args.child:
        print(MARK + json.dumps(child(args.child, args.n, args.start)), flush=True)
        return 0
    from tqdm import tqdm
    rows = {}
    for peer in tqdm(args.peers.split(","), desc="many graphs", file=sys.stderr):
        cache = tempfile.mkdtemp(prefix="jitflow-many-")
        try:
            rows[peer] = children.run(
                children.script_cmd(__file__, "--child", peer, "-n", str(args.n), "--start",
                                    str(args.start)), children.peer_env(peer, cache), MARK)
        finally:
            shutil.rmtree(cache, ignore_errors=True)
    ref = rows.get("tf1", {}).get("wall")
    print(f"{args.n} random programs from seed {args.start}:")
    for peer, r in rows.items():
        if "error" in r:
            print(f"  {peer:14s} error: {r['error']}")
            continue
        ratio = f"  ({ref / r['wall']:.2f}x TF1's speed)" if ref else ""
        extra = {k: v for k, v in r.items() if k not in ("wall", "cpu", "process_wall")}
        print(f"  {peer:14s} {r['wall']:8.1f} s wall {r['cpu']:8.1f} s cpu{ratio}  {extra}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
