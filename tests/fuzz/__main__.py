"""`python -m fuzz` (with tests/ on the path; `make fuzz N=...`): the differential fuzzer.

Generates random TF1 programs from consecutive seeds, checks each on the compiled backend
against the reference interpreter (and TensorFlow with --tf), with poisoned allocations, in
every compiled mode (--tiers: the first within the tolerance, the others bit for bit against
it), and prints a summary; every failure is shrunk and written to --out as a readable program.
"""
from __future__ import annotations

import argparse
import collections
import multiprocessing as mp
import os
import sys
import time

from fuzz.runner import worker_init, worker_one


def _kind(msg: str) -> str:
    first = msg.splitlines()[0]
    for word in ("crashed", "values differ", "dtype", "shape", "type", "None gradients",
                 "nondeterministic", "ran steps", "step"):
        if word in first:
            return ("TF " if first.startswith("TF") else "") + word
    return first[:60]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="fuzz", description=__doc__)
    ap.add_argument("-n", type=int, default=200, help="number of programs")
    ap.add_argument("--start", type=int, default=0, help="first seed")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--max-ops", type=int, default=12)
    ap.add_argument("--tf", action="store_true", help="also compare with TensorFlow")
    ap.add_argument("--no-shrink", action="store_true")
    ap.add_argument("--tiers", default="auto,quick,sync,numba",
                    help="JITFLOW_COMPILE modes to run, compared bit for bit")
    ap.add_argument("--out", default="fuzz-failures", help="folder for shrunk failures")
    a = ap.parse_args(argv)
    from tqdm import tqdm
    seeds = [(s, a.max_ops, not a.no_shrink) for s in range(a.start, a.start + a.n)]
    kinds = collections.Counter()
    outcomes = collections.Counter()
    fallbacks = 0
    failed = []
    t0 = time.time()
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.environ["PYTHONPATH"] = here + os.pathsep + os.environ.get("PYTHONPATH", "")
    ctx = mp.get_context("spawn")
    tiers = tuple(t for t in a.tiers.split(",") if t)
    with ctx.Pool(a.jobs, initializer=worker_init, initargs=(a.tf, tiers),
                  maxtasksperchild=200) as pool:
        bar = tqdm(pool.imap_unordered(worker_one, seeds), total=len(seeds), unit="graph")
        for seed, msg, small, stats in bar:
            if stats is not None:
                outcomes[stats[0]] += 1
                fallbacks += stats[1]
            if msg is None:
                continue
            kinds[_kind(msg)] += 1
            failed.append(seed)
            os.makedirs(a.out, exist_ok=True)
            with open(os.path.join(a.out, f"seed-{seed}.txt"), "w") as f:
                f.write(msg + "\n\nshrunk:\n" + small + "\n")
            bar.set_postfix(failed=len(failed))
    dt = time.time() - t0
    print(f"\nfuzz: {a.n} programs (seeds {a.start}..{a.start + a.n - 1}), "
          f"{len(failed)} failed, {dt:.0f} s")
    print("  reference outcomes: " + ", ".join(f"{c} {k}" for k, c in outcomes.most_common())
          + f"; {fallbacks} programs ran some shape class through references (no kernel)")
    print(f"  tiers compared bit for bit: {', '.join(tiers)}")
    for k, c in kinds.most_common():
        print(f"  {c:5d}  {k}")
    if failed:
        print(f"failing seeds: {sorted(failed)[:50]}; shrunk programs in {a.out}/")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
