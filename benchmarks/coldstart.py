"""Compile-time cases: the first MLP training step in a fresh process, cold and with a warm cache.

Run as a child (`python -m benchmarks.coldstart --peer jitflow --batch 64`), it imports the
peer, builds the MLP step, runs it once and prints one line `COLDSTART {json}` with the times
measured from its first statement (so `import jitflow` counts), then runs one step at twice the
batch size, which must not recompile. The parent side (`compile_cases`) starts these children
with `JITFLOW_CACHE_DIR` and `NUMBA_CACHE_DIR` pointing at a fresh temporary directory: empty
for "cold", filled by one earlier child for "cached". Children write and use Python bytecode
(`__pycache__`) even where the parent's environment turns that off: "cold" means an empty kernel
cache, not a never-imported package.
"""
from __future__ import annotations

import time

T0 = time.perf_counter()

import argparse  # noqa: E402
import atexit  # noqa: E402
import functools  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARK = "COLDSTART "
COLD_PEERS = ("numpy", "jitflow", "jitflow-interp", "tf1", "jax")
CACHING_PEERS = ("jitflow",)  # peers with an on-disk kernel cache this suite fills
# The "cached" row runs only where a disk cache (or no compiler) makes it differ from "cold";
# NumPy is there as the reference every result is checked against.
CACHED_PEERS = ("numpy", "jitflow", "jitflow-interp")
_warm_dirs: dict = {}  # peer -> a cache directory a cold child filled (reused by "cached")


def _new_cache_dir() -> str:
    path = tempfile.mkdtemp(prefix="jitflow-bench-")
    atexit.register(shutil.rmtree, path, True)
    return path


def child(peer_name: str, batch: int, dims: tuple) -> dict:
    """Time import, build and first step of the MLP case on one peer, in this process."""
    import numpy as np

    from benchmarks import cases, peers
    from benchmarks.harness import Unavailable

    peer = peers.make_peers([peer_name])[0]
    try:
        peer.context()
        t_import = time.perf_counter() - T0
        case = cases.mlp_case(batch, dims)
        runner = peer.runner(case, case.make_data(np.random.default_rng(0)))
    except Unavailable as e:
        return {"unavailable": str(e)}
    t_built = time.perf_counter() - T0
    loss = float(np.asarray(runner.step()))
    t_first = time.perf_counter() - T0
    other = cases.mlp_data(2 * batch, dims)(np.random.default_rng(1))
    t = time.perf_counter()
    runner.call(other["X"], other["Y"])
    rebatch = time.perf_counter() - t
    runner.close()
    return {"loss": loss, "import_s": t_import, "build_s": t_built - t_import,
            "first_step_s": t_first - t_built, "total_s": t_first, "rebatch_s": rebatch}


def _files(path: str) -> set:
    return {os.path.join(d, f) for d, _, names in os.walk(path) for f in names}


def run_child(peer: str, batch: int, dims: tuple, cache_dir: str, timeout: float = 600) -> dict:
    """Start one child with its caches in `cache_dir`; returns its figures plus `wall_s` and
    `new_cache_files` (files the child added to the cache: 0 when everything was a hit)."""
    from benchmarks.harness import Unavailable

    env = dict(os.environ, JITFLOW_CACHE_DIR=cache_dir, NUMBA_CACHE_DIR=cache_dir)
    # An installed package imports from bytecode; with PYTHONDONTWRITEBYTECODE set (as some
    # sandboxes do) every child would recompile jitflow's sources (~0.14 s) on import.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH")) if p)
    cmd = [sys.executable, "-m", "benchmarks.coldstart", "--peer", peer, "--batch", str(batch),
           "--dims", ",".join(map(str, dims))]
    before = _files(cache_dir)
    t = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)
    wall = time.perf_counter() - t
    new_files = len(_files(cache_dir) - before)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(MARK)]
    if proc.returncode != 0 or not lines:
        err = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"child exited {proc.returncode}: {err}")
    out = json.loads(lines[-1][len(MARK):])
    if "unavailable" in out:
        raise Unavailable(out["unavailable"])
    out["wall_s"] = wall
    out["new_cache_files"] = new_files
    return out


def _cold_runner(peer: str, cached: bool, batch: int, dims: tuple, ctx, data):
    """A Runner timing `budget.processes` fresh children (each with its own cache dir)."""
    import numpy as np

    from benchmarks.harness import Runner, Timing

    def timed(budget):
        runs = []
        for _ in range(max(1, budget.processes)):
            if not cached:
                cache = _new_cache_dir()
                _warm_dirs[peer] = cache
            else:
                cache = _warm_dirs.get(peer)
                if cache is None:
                    cache = _warm_dirs[peer] = _new_cache_dir()
                    if peer in CACHING_PEERS:
                        run_child(peer, batch, dims, cache)  # fill the cache
            runs.append(run_child(peer, batch, dims, cache))
        extra = {k: float(np.median([r[k] for r in runs]))
                 for k in ("import_s", "build_s", "first_step_s", "rebatch_s", "wall_s",
                           "new_cache_files")}
        return Timing([r["total_s"] for r in runs], len(runs)), runs[0]["loss"], extra

    return Runner(timed=timed)


def compile_cases(batch: int = 64, dims: tuple = (784, 128, 10)) -> list:
    """The two compile-time rows: time to the first MLP step result in a fresh process."""
    from benchmarks.cases import MLP_NEEDS
    from benchmarks.harness import Case

    def impls(cached: bool) -> dict:
        return {p: functools.partial(_cold_runner, p, cached, batch, dims)
                for p in (CACHED_PEERS if cached else COLD_PEERS)}

    common = dict(group="compile", make_data=lambda rng: {}, rtol=1e-3, atol=1e-5,
                  needs=MLP_NEEDS, params={"batch": batch, "dims": dims})
    return [
        Case("compile/cold", f"first MLP step (b{batch}) in a new process, empty cache",
             impls=impls(False), **common),
        Case("compile/cached", f"first MLP step (b{batch}) in a new process, kernels on disk",
             impls=impls(True), **common),
    ]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--peer", required=True)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--dims", default="784,128,10")
    args = ap.parse_args(argv)
    dims = tuple(int(v) for v in args.dims.split(","))
    print(MARK + json.dumps(child(args.peer, args.batch, dims)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
