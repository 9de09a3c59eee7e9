"""The step speed each compile mode settles at, and what its first run costs: one graph of
`compile_scaling.py`'s kind (or the 1e6 chain, or row passes) per process, first run timed in
CPU seconds, then the fastest of many warm steps.

    python benchmarks/tier_steps.py 50 train            # JITFLOW_COMPILE as set (default auto)
    for m in sync numba; do JITFLOW_COMPILE=$m python benchmarks/tier_steps.py 50 train; done
    JITFLOW_COMPILE=sync JITFLOW_OPT_PIPELINE=o3 python benchmarks/tier_steps.py 1000 fwd
    python benchmarks/tier_steps.py 1000000 chain;  python benchmarks/tier_steps.py 1000 rows

Each run uses an empty kernel cache of its own. One thread (OPENBLAS_NUM_THREADS=1 is set).
"""
from __future__ import annotations

import os
import sys
import tempfile
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ["JITFLOW_CACHE_DIR"] = tempfile.mkdtemp(prefix="jitflow-tier-steps-")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import jitflow as tf  # noqa: E402
from benchmarks.compile_scaling import WIDTH, _data, forward, program  # noqa: E402


def build(n: int, kind: str):
    """(fetches, feed) of the case."""
    if kind == "chain":
        x = tf.placeholder(tf.float32, [None])
        y = tf.sigmoid(0.7 * x + 0.1) * tf.tanh(x) - tf.exp(-x * x) + 0.5 * x
        return [y, tf.reduce_sum(y)], {x: np.random.default_rng(0).random(n, np.float32)}
    if kind == "rows":
        x = tf.placeholder(tf.float32, [None, 1000])
        y = tf.tanh(x) * x
        xv = np.random.default_rng(0).random((n, 1000), np.float32)
        return [tf.reduce_mean(y, 1), tf.reduce_max(y, 0), tf.nn.softmax(y)], {x: xv}
    steps = program(n)
    xv, wv = _data(steps)
    x = tf.placeholder(tf.float32, [None, WIDTH])
    ws = [tf.Variable(w) for w in wv]
    loss = forward(tf, x, ws, steps, True)
    if kind == "train":
        return [loss, tf.train.AdamOptimizer(1e-3).minimize(loss)], {x: xv}
    return loss, {x: xv}


def main() -> None:
    n, kind = int(sys.argv[1]), sys.argv[2]
    fetches, feed = build(n, kind)
    sess = tf.Session()
    sess.run(tf.global_variables_initializer())
    t = time.process_time()
    sess.run(fetches, feed)
    first = time.process_time() - t
    from jitflow.backends.numba_cpu import background
    background.wait_idle()   # the default mode: time the code it settles at
    steps = []
    for _ in range(100 if n >= 1000 and kind != "chain" else 400):
        t = time.perf_counter()
        sess.run(fetches, feed)
        steps.append(time.perf_counter() - t)
    mode = os.environ.get("JITFLOW_COMPILE", "auto")
    print(f"{kind} n={n} mode={mode} pipeline={os.environ.get('JITFLOW_OPT_PIPELINE', 'light')}"
          f" first run {first:.2f} s CPU, fastest step {min(steps) * 1e3:.3f} ms")


if __name__ == "__main__":
    main()
