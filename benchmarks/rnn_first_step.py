"""First training step of an unrolled tanh RNN (hidden 128, 20 steps, batch 32, Adam), or with
--model cnn of the LeNet-style CNN (batch 32, Adam), with an empty kernel cache: when the
first result comes, and when every kernel runs native code.

    OPENBLAS_NUM_THREADS=1 python benchmarks/rnn_first_step.py [--mode background|thread|sync]
        [--model rnn|cnn]

Runs in this process (set JITFLOW_CACHE_DIR to an empty directory for a cold cache; by default
a fresh temporary one is used). Keeps running steps until the background compiler is idle.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time


def build(tf, np, t_steps: int = 20, hidden: int = 128, batch: int = 32, width: int = 64):
    """The unrolled RNN's (loss, Adam train op, feed) in the default graph of `tf`."""
    rng = np.random.default_rng(0)
    x = tf.placeholder(tf.float32, [None, t_steps, width])
    y = tf.placeholder(tf.float32, [None, hidden])
    wx = tf.Variable(rng.standard_normal((width, hidden)).astype(np.float32) * 0.1)
    wh = tf.Variable(rng.standard_normal((hidden, hidden)).astype(np.float32) * 0.1)
    b = tf.Variable(np.zeros(hidden, np.float32))
    h = tf.zeros([tf.shape(x)[0], hidden])
    for x_t in tf.unstack(x, axis=1):
        h = tf.tanh(tf.matmul(x_t, wx) + tf.matmul(h, wh) + b)
    loss = tf.reduce_mean(tf.square(h - y))
    train = tf.train.AdamOptimizer(1e-3).minimize(loss)
    feed = {x: rng.standard_normal((batch, t_steps, width)).astype(np.float32),
            y: rng.standard_normal((batch, hidden)).astype(np.float32)}
    return loss, train, feed


def build_cnn(tf, np, batch: int = 32):
    """The LeNet-style CNN of the benchmarks (model_cases.py) with Adam: (loss, train, feed)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if root not in sys.path:
        sys.path.insert(0, root)
    from benchmarks.model_cases import cnn_data
    d = cnn_data(batch)(np.random.default_rng(0))
    x = tf.placeholder(tf.float32, [None, 28, 28, 1])
    y = tf.placeholder(tf.float32, [None, 10])
    w1, b1, w2, b2, w3, b3, w4, b4 = [tf.Variable(p) for p in d["params"]]
    h = tf.nn.relu(tf.nn.conv2d(x, w1, [1, 1, 1, 1], "SAME") + b1)
    h = tf.nn.max_pool(h, [1, 2, 2, 1], [1, 2, 2, 1], "SAME")
    h = tf.nn.relu(tf.nn.conv2d(h, w2, [1, 1, 1, 1], "SAME") + b2)
    h = tf.nn.max_pool(h, [1, 2, 2, 1], [1, 2, 2, 1], "SAME")
    h = tf.nn.relu(tf.matmul(tf.reshape(h, [-1, 7 * 7 * 64]), w3) + b3)
    logits = tf.matmul(h, w4) + b4
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits_v2(labels=y, logits=logits))
    train = tf.train.AdamOptimizer(1e-3).minimize(loss)
    return loss, train, {x: d["X"], y: d["Y"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", default="background", choices=["background", "thread", "sync"])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--model", default="rnn", choices=["rnn", "cnn"],
                    help="the unrolled RNN (default) or the LeNet-style CNN, batch 32")
    args = ap.parse_args(argv)
    os.environ["JITFLOW_COMPILE"] = args.mode
    os.environ.setdefault("JITFLOW_CACHE_DIR", tempfile.mkdtemp(prefix="jitflow-rnn-"))
    import numpy as np
    from tqdm import tqdm

    import jitflow as tf
    from jitflow.backends.numba_cpu import background
    from jitflow.backends.numba_cpu.kernels import STATS
    loss, train, feed = (build(tf, np, args.steps) if args.model == "rnn"
                         else build_cnn(tf, np))
    sess = tf.Session()
    sess.run(tf.global_variables_initializer())
    t0, c0 = time.perf_counter(), time.process_time()
    sess.run([loss, train], feed)
    first = time.perf_counter() - t0
    runs = 1
    tier1_at = None   # wall time of the end of the first run with a tier-1 kernel in it
    all_native_at = None   # ... of the first run with no segment on the references
    steps = []        # wall time of each run while compiling
    with tqdm(desc="steps while compiling", file=sys.stderr) as bar:
        while background.pending():
            before = STATS.get("tier1_runs", 0)
            refs = STATS.get("reference_segments", 0)
            t = time.perf_counter()
            sess.run([loss, train], feed)
            steps.append(time.perf_counter() - t)
            if tier1_at is None and STATS.get("tier1_runs", 0) > before:
                tier1_at = time.perf_counter() - t0
            if all_native_at is None and STATS.get("reference_segments", 0) == refs:
                all_native_at = time.perf_counter() - t0
            runs += 1
            bar.update()
    native = time.perf_counter() - t0
    t1 = time.perf_counter()
    for _ in range(20):
        sess.run([loss, train], feed)
    warm = (time.perf_counter() - t1) / 20
    if steps:
        print(f"while compiling: {len(steps)} runs, median {np.median(steps) * 1e3:.2f} ms; "
              "first run with a tier-1 kernel done at "
              + ("-" if tier1_at is None else f"{tier1_at:.2f} s wall")
              + "; first run with every kernel native (tier 1 or Numba) done at "
              + ("-" if all_native_at is None else f"{all_native_at:.2f} s wall"))
        if len(steps) > 4:
            tail = steps[len(steps) // 2:]
            print(f"  median of the later half of those runs: {np.median(tail) * 1e3:.2f} ms")
    print(f"mode {args.mode}: first result {first:.2f} s wall; Numba code in use at "
          f"{native:.2f} s wall after {runs} runs (this process {time.process_time() - c0:.1f} s "
          f"CPU); warm step {warm * 1e3:.2f} ms; compiles here {STATS['compiles']}, "
          f"cache loads {STATS['numba_cache_hits']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
