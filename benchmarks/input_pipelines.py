"""Input-pipeline and sampled-loss workloads, jitflow against TensorFlow's `compat.v1`:

- `w2v`: a skip-gram training step, `nce_loss` with 64 sampled classes, batch 128, on a
  50,000 x 128 embedding table and output table, plain SGD (TF updates the gathered rows as
  IndexedSlices; jitflow updates them in place);
- `pipeline`: `tf.data` from_tensor_slices -> shuffle -> batch(64) -> repeat feeding a
  linear-regression step through `get_next` (1,000 rows x 16 features).

    OPENBLAS_NUM_THREADS=1 python benchmarks/input_pipelines.py [--rounds 3] [--steps 200]

Each peer (jitflow numba with JITFLOW_COMPILE=sync, jitflow interpreter, TensorFlow) runs in
its own child process, one after the other, `--rounds` times interleaved; the report gives the
median time per step of each and the ratios against TensorFlow measured in the same run, and
is written to benchmarks/results/input_pipelines.md.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

MARK = "RESULT "
PEERS = ("jitflow-sync", "jitflow-interpreter", "tensorflow")


def _import(peer: str):
    if peer == "tensorflow":
        import tensorflow.compat.v1 as tf
        tf.disable_v2_behavior()
        return tf
    import jitflow as tf
    return tf


def w2v(tf, peer: str, steps: int) -> dict:
    import numpy as np
    vocab, dim, batch, sampled = 50000, 128, 128, 64
    rng = np.random.default_rng(0)
    tf.set_random_seed(1)
    x = tf.placeholder(tf.int32, [batch])
    y = tf.placeholder(tf.int64, [batch, 1])
    emb = tf.Variable(tf.random_uniform([vocab, dim], -1.0, 1.0))
    w = tf.Variable(tf.truncated_normal([vocab, dim], stddev=dim ** -0.5))
    b = tf.Variable(tf.zeros([vocab]))
    loss = tf.reduce_mean(tf.nn.nce_loss(w, b, y, tf.nn.embedding_lookup(emb, x), sampled,
                                         vocab))
    train = tf.train.GradientDescentOptimizer(1.0).minimize(loss)
    feeds = [{x: rng.integers(0, vocab, batch).astype(np.int32),
              y: rng.integers(0, vocab, (batch, 1))} for _ in range(16)]
    backend = {"backend": "interpreter"} if peer == "jitflow-interpreter" else {}
    with tf.Session(**backend) as sess:
        sess.run(tf.global_variables_initializer())
        t0 = time.perf_counter()
        sess.run(train, feeds[0])
        first = time.perf_counter() - t0
        for i in range(10):
            sess.run(train, feeds[i % 16])
        t0 = time.perf_counter()
        for i in range(steps):
            sess.run(train, feeds[i % 16])
        per = (time.perf_counter() - t0) / steps
        final = float(sess.run(loss, feeds[0]))
    return {"first_s": first, "step_ms": per * 1e3, "loss": final}


def pipeline(tf, peer: str, steps: int) -> dict:
    import numpy as np
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((1000, 16)).astype(np.float32)
    ys = (xs @ rng.standard_normal((16, 1)).astype(np.float32) + 0.5).astype(np.float32)
    ds = tf.data.Dataset.from_tensor_slices((xs, ys)).shuffle(1000, seed=1).batch(64).repeat()
    x, y = tf.data.make_one_shot_iterator(ds).get_next()
    w = tf.Variable(tf.zeros([16, 1]))
    b = tf.Variable(0.0)
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    backend = {"backend": "interpreter"} if peer == "jitflow-interpreter" else {}
    with tf.Session(**backend) as sess:
        sess.run(tf.global_variables_initializer())
        t0 = time.perf_counter()
        sess.run(train)
        first = time.perf_counter() - t0
        for _ in range(20):
            sess.run(train)
        t0 = time.perf_counter()
        for _ in range(steps):
            sess.run(train)
        per = (time.perf_counter() - t0) / steps
        final = float(sess.run(loss))
    return {"first_s": first, "step_ms": per * 1e3, "loss": final}


WORKLOADS = {"w2v": w2v, "pipeline": pipeline}


def child(peer: str, workload: str, steps: int) -> None:
    tf = _import(peer)
    out = WORKLOADS[workload](tf, peer, steps)
    print(MARK + json.dumps(out), flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--child", nargs=2, metavar=("PEER", "WORKLOAD"))
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results",
                                                  "input_pipelines.md"))
    args = ap.parse_args(argv)
    if args.child:
        child(args.child[0], args.child[1], args.steps)
        return 0
    from benchmarks import children
    cache = tempfile.mkdtemp(prefix="jitflow-bench-")
    os.chmod(cache, 0o700)
    results: dict = {}
    for r in range(args.rounds):
        for workload in WORKLOADS:
            for peer in PEERS:
                env = children.peer_env(peer, cache)
                res = children.run(children.script_cmd(__file__, "--child", peer, workload,
                                                       "--steps", str(args.steps)),
                                   env, MARK, timeout=900)
                results.setdefault((workload, peer), []).append(res)
                print(f"round {r + 1} {workload:8s} {peer:20s} "
                      + (f"{res['step_ms']:.3f} ms/step" if "step_ms" in res
                         else res.get("error", "?")), file=sys.stderr)
    lines = ["# Input pipelines and sampled losses", "",
             f"`OPENBLAS_NUM_THREADS=1 python benchmarks/input_pipelines.py --rounds "
             f"{args.rounds} --steps {args.steps}`; each peer in its own process, rounds "
             "interleaved; medians over rounds. Ratio: TensorFlow's time per step over the "
             "peer's (higher is faster).", "",
             "| workload | peer | ms per step | first step s | ratio vs TF | final loss |",
             "|---|---|---:|---:|---:|---:|"]
    for workload in WORKLOADS:
        tf_runs = [x["step_ms"] for x in results[(workload, "tensorflow")] if "step_ms" in x]
        tf_ms = statistics.median(tf_runs) if tf_runs else None
        for peer in PEERS:
            runs = [x for x in results[(workload, peer)] if "step_ms" in x]
            if not runs:
                err = results[(workload, peer)][0].get("error", "?")
                lines.append(f"| {workload} | {peer} | error: {err} | | | |")
                continue
            ms = statistics.median(x["step_ms"] for x in runs)
            first = statistics.median(x["first_s"] for x in runs)
            ratio = f"{tf_ms / ms:.2f}" if tf_ms else "-"
            lines.append(f"| {workload} | {peer} | {ms:.3f} | {first:.2f} | {ratio} | "
                         f"{runs[0]['loss']:.4f} |")
    text = "\n".join(lines) + "\n"
    from benchmarks.api_coverage import write_atomic
    write_atomic(args.out, text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
