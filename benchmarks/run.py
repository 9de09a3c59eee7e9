"""jitflow against its peers: `python benchmarks/run.py [--quick]` (or `make bench[-quick]`).

Writes benchmarks/results/latest.md (plus a timestamped copy), latest.json (every raw figure)
and latest.png (the speedups). Threads are pinned to one per peer before anything is imported,
and the process is held to one CPU; `--threads 2` gives every peer two (TF and XLA intra-op
pools, BLAS, jitflow's parallel kernels) and two CPUs. The report's "CPU use" table shows how
many cores each peer kept busy while it was timed.
"""
from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks import threads  # noqa: E402  (no heavy imports: safe before pinning)


def _early_threads(argv) -> int:
    """--threads N, read before anything heavy is imported (thread pools size themselves then)."""
    for i, a in enumerate(argv):
        if a == "--threads" and i + 1 < len(argv):
            return int(argv[i + 1])
        if a.startswith("--threads="):
            return int(a.split("=", 1)[1])
    return 1


threads.pin(_early_threads(sys.argv[1:]), cpus="--no-affinity" not in sys.argv[1:])
# warm figures must time native code: runs wait for their kernels instead of running on the
# references while the compiler thread works (compile_scaling.py measures both modes)
os.environ.setdefault("JITFLOW_COMPILE", "sync")

import argparse  # noqa: E402
import shutil  # noqa: E402
import time  # noqa: E402

from benchmarks import cases as cases_mod  # noqa: E402
from benchmarks import harness, report  # noqa: E402
from benchmarks.peers import make_peers  # noqa: E402

RESULTS = os.path.join(ROOT, "benchmarks", "results")


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="Benchmark jitflow against NumPy, TF1 and JAX.")
    ap.add_argument("--quick", action="store_true",
                    help="fewer repetitions (about 2 minutes on 2 cores)")
    ap.add_argument("--tiny", action="store_true", help="tiny sizes, 1-2 repetitions (smoke)")
    ap.add_argument("--peers", help="comma-separated peer names (default: all)")
    ap.add_argument("--groups", help="comma-separated case groups: seeds, chain, reduce, mlp, "
                                     "linreg, cnn, rnn, compile (default: all)")
    ap.add_argument("--threads", type=int, default=1,
                    help="threads per peer (default 1; read before the peers are imported)")
    ap.add_argument("--no-affinity", action="store_true",
                    help="leave the process on every CPU it may use (by default it is held to "
                         "as many CPUs as --threads, since XLA's thread pool heeds no variable)")
    ap.add_argument("--out", default=RESULTS, help="output directory")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    mode = "tiny" if args.tiny else "quick" if args.quick else "full"
    budget = {"full": harness.FULL, "quick": harness.QUICK, "tiny": harness.TINY}[mode]
    peer_names = args.peers.split(",") if args.peers else None
    if peer_names is not None and "numpy" not in peer_names:
        peer_names.append("numpy")  # the reference every result is checked against
    groups = args.groups.split(",") if args.groups else None
    cases = cases_mod.build_cases("tiny" if args.tiny else "full", groups)
    peers = make_peers(peer_names)
    facts = report.machine_facts()
    facts["mode"] = mode
    facts["date"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    print(f"jitflow benchmarks ({mode}): {len(cases)} cases x {len(peers)} peers; "
          + ", ".join(f"{k}={v}" for k, v in facts["thread_env"].items()), file=sys.stderr)
    results = harness.run_suite(cases, peers, budget,
                                progress=lambda line: print(line, file=sys.stderr, flush=True))
    os.makedirs(args.out, exist_ok=True)
    md = report.to_markdown(results, facts)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    latest = os.path.join(args.out, "latest.md")
    with open(latest, "w") as f:
        f.write(md)
    shutil.copyfile(latest, os.path.join(args.out, f"bench-{stamp}.md"))
    with open(os.path.join(args.out, "latest.json"), "w") as f:
        f.write(report.to_json(results, facts))
    chart = report.write_chart(results, os.path.join(args.out, "latest.png"))
    print(md)
    for line in report.target_summary(results):
        print(line, file=sys.stderr)
    print(f"wrote {latest}, latest.json" + (", latest.png" if chart else ""), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
