"""A `dynamic_rnn` LSTM training step (hidden 128, 50 steps, batch 32, input 28, SGD) under
jitflow, TensorFlow 1 (`tensorflow.compat.v1` Session) and JAX (`lax.scan` + `jax.grad`, jit):
steps per second and the ratios, every peer single-threaded, timed in interleaved rounds.

    python benchmarks/dynamic_rnn.py [--quick] [--steps 50] [--hidden 128] [--batch 32]

All three run the same model from the same initial weights (TF's glorot-uniform draws, loaded
into the others) and the first step's loss is checked against jitflow's interpreter before any
time counts. `--profile` also splits jitflow's step into time in the While driver (Python)
and time in native kernels.
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks import threads  # noqa: E402

threads.pin()
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")   # TF's tf.nn.rnn_cell lives in tf-keras
os.environ.setdefault("JITFLOW_COMPILE", "sync")

import numpy as np  # noqa: E402

CLASSES = 10


def _data(steps: int, batch: int, depth: int):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, steps, depth)).astype(np.float32)
    y = np.eye(CLASSES, dtype=np.float32)[rng.integers(0, CLASSES, batch)]
    return x, y


def _graph(t, steps: int, depth: int, hidden: int, lr: float):
    """The TF1 program, for jitflow and TensorFlow alike."""
    x = t.placeholder(t.float32, [None, steps, depth], name="x")
    y = t.placeholder(t.float32, [None, CLASSES], name="y")
    cell = t.nn.rnn_cell.BasicLSTMCell(hidden)
    _, state = t.nn.dynamic_rnn(cell, x, dtype=t.float32)
    w = t.get_variable("w", [hidden, CLASSES])
    b = t.get_variable("b", [CLASSES], initializer=t.zeros_initializer())
    logits = t.matmul(state.h, w) + b
    loss = t.reduce_mean(t.nn.softmax_cross_entropy_with_logits_v2(labels=y, logits=logits))
    train = t.train.GradientDescentOptimizer(lr).minimize(loss)
    return x, y, loss, train


def tf1_peer(args, data):
    """(step function, initial weights by name, first loss) under TensorFlow."""
    import tensorflow.compat.v1 as t
    t.disable_v2_behavior()
    g = t.Graph()
    with g.as_default():
        t.set_random_seed(0)
        x, y, loss, train = _graph(t, args.steps, args.depth, args.hidden, args.lr)
        init = t.global_variables_initializer()
    cfg = t.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
    sess = t.Session(graph=g, config=cfg)
    sess.run(init)
    with g.as_default():
        weights = {v.op.name: sess.run(v) for v in t.global_variables()}
    feed = {x: data[0], y: data[1]}
    first = float(sess.run(loss, feed))

    def step():
        sess.run(train, feed)
    return step, weights, first


def jitflow_peer(args, data, weights, backend: str = "numba"):
    import jitflow as t
    g = t.Graph()
    with g.as_default():
        x, y, loss, train = _graph(t, args.steps, args.depth, args.hidden, args.lr)
        init = t.global_variables_initializer()
        variables = t.global_variables()
    sess = t.Session(graph=g, backend=backend)
    sess.run(init)
    for v in variables:
        v.load(weights[v.op.name], sess)
    feed = {x: data[0], y: data[1]}
    first = float(sess.run(loss, feed))

    def step():
        sess.run(train, feed)
    return step, first, sess, (train, feed)


def jax_peer(args, data, weights):
    import jax
    import jax.numpy as jnp
    from jax import lax
    k = jnp.asarray(weights["rnn/basic_lstm_cell/kernel"])
    p = {"k": k, "b": jnp.asarray(weights["rnn/basic_lstm_cell/bias"]),
         "w": jnp.asarray(weights["w"]), "wb": jnp.asarray(weights["b"])}
    xs = jnp.asarray(np.transpose(data[0], (1, 0, 2)))   # time-major, as dynamic_rnn runs
    ys = jnp.asarray(data[1])
    batch, hidden = data[0].shape[0], args.hidden

    def loss_fn(p, xs, ys):
        def cell(carry, x_t):
            c, h = carry
            z = jnp.concatenate([x_t, h], 1) @ p["k"] + p["b"]
            i, j, f, o = jnp.split(z, 4, 1)
            c = c * jax.nn.sigmoid(f + 1.0) + jax.nn.sigmoid(i) * jnp.tanh(j)
            h = jnp.tanh(c) * jax.nn.sigmoid(o)
            return (c, h), None
        zero = jnp.zeros((batch, hidden), jnp.float32)
        (_, h), _ = lax.scan(cell, (zero, zero), xs)
        logits = h @ p["w"] + p["wb"]
        return -jnp.mean(jnp.sum(ys * jax.nn.log_softmax(logits), 1))

    @jax.jit
    def train(p, xs, ys):
        g = jax.grad(loss_fn)(p, xs, ys)
        return jax.tree_util.tree_map(lambda a, b: a - args.lr * b, p, g)

    first = float(jax.jit(loss_fn)(p, xs, ys))
    state = {"p": p}

    def step():
        state["p"] = train(state["p"], xs, ys)
        jax.block_until_ready(state["p"])
    return step, first


def cpu_times(fns: dict, rounds: int, per_round: int = 3) -> dict:
    """Median CPU seconds (this process) per call of each function, in interleaved rounds.
    On a shared machine the wall time of a step includes the time other processes held the
    core; the CPU time of a single-threaded peer does not."""
    import time
    samples: dict = {k: [] for k in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            t0 = time.process_time()
            for _ in range(per_round):
                fn()
            samples[name].append((time.process_time() - t0) / per_round)
    return {k: float(np.median(v)) for k, v in samples.items()}


def profile_jitflow(sess, train, feed, n: int) -> dict:
    """Seconds per step: total, in native kernel calls, and the rest (driver overhead)."""
    import time
    from jitflow.backends.numba_cpu import executable as cpu
    spent = [0.0, 0]
    orig = cpu.call_kernel

    def timed(c, ins, bufs, seg):
        t0 = time.perf_counter()
        try:
            return orig(c, ins, bufs, seg)
        finally:
            spent[0] += time.perf_counter() - t0
            spent[1] += 1
    cpu.call_kernel = timed
    try:
        t0 = time.perf_counter()
        for _ in range(n):
            sess.run(train, feed)
        total = (time.perf_counter() - t0) / n
    finally:
        cpu.call_kernel = orig
    return {"step": total, "kernels": spent[0] / n, "kernel_calls": spent[1] / n,
            "overhead": total - spent[0] / n}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--depth", type=int, default=28)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--quick", action="store_true", help="a shorter timing budget")
    ap.add_argument("--profile", action="store_true", help="split jitflow's step time")
    ap.add_argument("--cpu-rounds", type=int, default=15,
                    help="rounds of the CPU-time measurement")
    args = ap.parse_args(argv)
    from tqdm import tqdm

    from benchmarks.harness import FULL, QUICK, measure_interleaved
    data = _data(args.steps, args.batch, args.depth)
    fns, firsts = {}, {}
    with tqdm(total=4, desc="building peers", file=sys.stderr) as bar:
        try:
            fns["tf1"], weights, firsts["tf1"] = tf1_peer(args, data)
        except ImportError as e:
            print(f"TensorFlow unavailable ({e}); weights drawn here instead", file=sys.stderr)
            rng = np.random.default_rng(1)
            h, d = args.hidden, args.depth
            lim = np.sqrt(6 / (d + 5 * h))
            weights = {"rnn/basic_lstm_cell/kernel":
                       rng.uniform(-lim, lim, (d + h, 4 * h)).astype(np.float32),
                       "rnn/basic_lstm_cell/bias": np.zeros(4 * h, np.float32),
                       "w": rng.uniform(-0.2, 0.2, (h, CLASSES)).astype(np.float32),
                       "b": np.zeros(CLASSES, np.float32)}
        bar.update()
        fns["jitflow"], firsts["jitflow"], sess, (train, feed) = jitflow_peer(args, data,
                                                                             weights)
        bar.update()
        _, firsts["interpreter"], _, _ = jitflow_peer(args, data, weights, "interpreter")
        bar.update()
        try:
            fns["jax"], firsts["jax"] = jax_peer(args, data, weights)
        except ImportError as e:
            print(f"JAX unavailable ({e})", file=sys.stderr)
        bar.update()
    ref = firsts["interpreter"]
    for name, v in firsts.items():
        if abs(v - ref) > 1e-4 * max(1.0, abs(ref)):
            print(f"WRONG: {name}'s first loss {v:.6f} differs from the interpreter's "
                  f"{ref:.6f}", file=sys.stderr)
            return 1
    budget = QUICK if args.quick else FULL
    budget = type(budget)(**{**budget.__dict__, "warmup": 3, "sample_target": 0.0,
                             "min_samples": 30 if not args.quick else 10,
                             "min_time": 3.0 if not args.quick else 0.5,
                             "max_time": 10.0 if not args.quick else 1.5})
    print(f"dynamic_rnn LSTM training step: hidden {args.hidden}, {args.steps} steps, batch "
          f"{args.batch}, input {args.depth}, SGD; one thread per peer "
          f"(OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')})")
    timings = measure_interleaved(fns, budget)
    rate, best = {}, {}
    for name, tm in timings.items():
        if isinstance(tm, Exception):
            print(f"  {name:8s} failed: {tm}")
            continue
        rate[name], best[name] = 1.0 / tm.median, 1.0 / tm.min
        print(f"  {name:8s} {rate[name]:8.1f} steps/s  (median {tm.median * 1e3:.2f} ms, "
              f"q1-q3 {tm.q1 * 1e3:.2f}-{tm.q3 * 1e3:.2f} ms, best {tm.min * 1e3:.2f} ms, "
              f"{len(tm.samples)} samples)")
    cpu = cpu_times({k: v for k, v in fns.items() if k in rate}, rounds=args.cpu_rounds)
    for name, t in cpu.items():
        print(f"  {name:8s} {1.0 / t:8.1f} steps per CPU second  ({t * 1e3:.2f} ms of CPU time "
              "per step, median of rounds)")
    for peer in ("tf1", "jax"):
        if peer in rate and "jitflow" in rate:
            print(f"  jitflow / {peer}: {rate['jitflow'] / rate[peer]:.2f}x by wall-time "
                  f"medians, {best['jitflow'] / best[peer]:.2f}x by best samples, "
                  f"{cpu[peer] / cpu['jitflow']:.2f}x by CPU time")
    if args.profile:
        p = profile_jitflow(sess, train, feed, 20)
        print(f"  jitflow step {p['step'] * 1e3:.2f} ms: native kernels "
              f"{p['kernels'] * 1e3:.2f} ms in {p['kernel_calls']:.0f} calls, driver and "
              f"host ops {p['overhead'] * 1e3:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
