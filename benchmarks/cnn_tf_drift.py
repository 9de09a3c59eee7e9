"""How far the LeNet-style CNN's training drifts from TensorFlow's over a number of Adam steps.

    python benchmarks/cnn_tf_drift.py [--batch 32] [--steps 30] [--seeds 1,2,3,4]

The model and data are the benchmark's (`benchmarks/model_cases.py`); each seed draws the
batches the three runs share. jitflow's numba backend (under whatever JITFLOW_WINOGRAD says),
jitflow's interpreter and TF's compat.v1 session train from the same start. One line per
seed: the largest difference of the per-step losses relative to TF's largest loss, and of the
final parameters relative to each tensor's largest TF value (the worst tensor). Training
amplifies any rounding difference (Adam's step is about lr * sign(g) where a gradient is near
0, and a max-pool whose window holds near-equal values can route its gradient elsewhere), so
these figures compare backends' drift, not their per-op rounding.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def train(mod, session, d: dict, steps: int, seed: int):
    """(losses, final parameters) of `steps` Adam steps on batches drawn from `seed`."""
    from benchmarks.model_cases import _cnn_build
    from benchmarks.peers import GraphAPI
    graph = mod.Graph()
    with graph.as_default():
        X, Y, params, loss, step = _cnn_build(GraphAPI(mod, session), d)(mod)
        sess = session(graph)
        sess.run(mod.global_variables_initializer())
        rng = np.random.default_rng(seed)
        batch = d["X"].shape[0]
        losses = []
        for _ in range(steps):
            xb = rng.random(d["X"].shape, dtype=np.float32)
            yb = d["Y"][rng.permutation(batch)]
            losses.append(sess.run([step, loss], {X: xb, Y: yb})[1])
        out = np.array(losses, np.float64), sess.run(params)
        sess.close()
    return out


def drift(run, ref) -> tuple:
    (la, pa), (lb, pb) = run, ref
    loss = float(np.abs(la - lb).max() / np.abs(lb).max())
    par = max(float(np.abs(a.astype(np.float64) - b).max() / max(np.abs(b).max(), 1e-30))
              for a, b in zip(pa, pb))
    return loss, par


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--seeds", default="1,2,3,4")
    args = ap.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow.compat.v1 as t1

    import jitflow
    from benchmarks.model_cases import cnn_data
    t1.disable_eager_execution()
    d = cnn_data(args.batch)(np.random.default_rng(0))
    mode = os.environ.get("JITFLOW_WINOGRAD", "1 (default)")
    print(f"batch {args.batch}, {args.steps} Adam steps, JITFLOW_WINOGRAD={mode}")
    for seed in (int(s) for s in args.seeds.split(",")):
        runs = {name: train(mod, session, d, args.steps, seed) for name, mod, session in (
            ("numba", jitflow, lambda g: jitflow.Session(graph=g, backend="numba")),
            ("interpreter", jitflow, lambda g: jitflow.Session(graph=g, backend="interpreter")),
            ("tf", t1, lambda g: t1.Session(graph=g)))}
        cells = []
        for a, b in (("numba", "tf"), ("interpreter", "tf"), ("numba", "interpreter")):
            loss, par = drift(runs[a], runs[b])
            cells.append(f"{a} vs {b}: loss {loss:.1e}, parameters {par:.1e}")
        print(f"seed {seed}: " + "; ".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
