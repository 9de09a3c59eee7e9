"""Cold workloads: a fixed amount of work, each peer in a fresh process with empty caches, timed
from process start (before `import`) to the end of the work.

    python benchmarks/cold_workloads.py [--quick] [--cases seeds,chain,...] [--peers ...]
                                        [--bench-python PATH] [--repeat 1]
                                        [--out benchmarks/results] [--no-affinity]

What a user waits for when a program runs once: interpreter start, imports, graph building,
compiling and every step. Each (case, peer) runs in its own child process started with an
empty JITFLOW_CACHE_DIR and NUMBA_CACHE_DIR (a new temporary folder), JAX's persistent
compilation cache off (JAX_ENABLE_COMPILATION_CACHE=false) and TensorFlow's caches empty (a
TF1 session on the CPU compiles nothing to disk; its kernels are in the library). Python's
bytecode is written and used (every peer's modules are imported once before the first timed
child), so "cold" means empty kernel caches, not a never-imported package.

Peers: `jitflow` (the default mode, JITFLOW_COMPILE unset: `auto`, empty caches),
`jitflow-warm` (the default mode again, a fresh process on the caches the `jitflow` child
left), `numpy` (plain NumPy, gradients written by hand; it does not run the CNN), `jax`
(`jax.jit`), `tf1` (`tf.compat.v1.Session`); on request `jitflow-sync`, `jitflow-quick` and
`jitflow-numba` (those JITFLOW_COMPILE modes). jitflow and NumPy run in this interpreter, JAX
and TF1 in `--bench-python` (default: $JITFLOW_BENCH_PYTHON, else this one); a peer whose
package is not installed there is left out with a note. Every child has one thread
(benchmarks/threads.py, as `make bench`: thread variables and the process held to one CPU;
`--no-affinity` leaves it every CPU, which gives jitflow's compiler thread a core of its own
and XLA its thread pool).

Cases (the same graph, data and initial values in every peer):
- `seeds`: `(a*b)/(a+b)` on float32 scalars fed by feed_dict, 20,000 runs;
- `chain`: `sigmoid(0.7x+0.1)*tanh(x)-exp(-x*x)+0.5x` on 1e6 float32 (fed), 300 runs;
- `train10`, `train50`: a random 64x64 graph (add/mul/sub, tanh/sigmoid/square/neg,
  `tanh(matmul(h, W))`, `x + reduce_mean/sum(y, 1, keepdims=True)`; the kind of
  compile_scaling.py) of 10 / 50 ops, its gradients and an Adam step, 5,000 steps;
- `fwd200`, `fwd1000`: the same kind, 200 ops forward (3,000 runs) and 1,000 ops (300 runs);
- `mlp`: a 784-256-10 `tf.layers` MLP (relu, softmax cross entropy, Adam), batch 64,
  2,000 steps;
- `cnn`: a LeNet-style `tf.layers` CNN (conv 5x5x32, pool, conv 5x5x64, pool, dense 1024,
  dropout 0.4, dense 10; batch 32 of 28x28 synthetic digits; Adam), 100 steps;
- `rnn`: an LSTM unrolled in Python over 20 time steps (hidden 128, batch 32, 10 classes,
  Adam), 500 steps.
The step counts keep the whole default run (nine cases, five peers) under 10 minutes on a
loaded 2-core machine; the programs take from under a second to about a minute.

Per child: total wall (spawn to the end of the last step), the steady step (median of the last
10% of steps, at least 5), and when the steady speed was reached: the end of the first step
from which the median of the next `--window` steps (default 5) is within 1.1x of the steady
step, counted from spawn. jitflow children also report the code their kernels ended with
(quick, optimized, Numba), whether optimized code was still queued at the end of the work,
and when the compiler thread went idle. Each child prints its final loss or output summary; the
parent compares them loosely across peers (same graph, same initial values) so that a broken
peer shows. `--quick` divides every step count by 10 (a 1-3 minute smoke: the CNN's cold
compile alone takes 40 s or more on a loaded 2-core machine).

The report (markdown) goes to stdout and, with `--out DIR`, to DIR/cold_workloads.md and
DIR/cold_workloads.json.
"""
from __future__ import annotations

import os
import time

# the spawn time the parent passes (time.perf_counter is CLOCK_MONOTONIC, one clock for every
# process of the machine), else this process's first statement
T_SPAWN = float(os.environ.get("COLD_SPAWN_T", "nan"))
T_START = time.perf_counter()
if T_SPAWN != T_SPAWN:
    T_SPAWN = T_START

import argparse  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARK = "COLDWORK "
WIDTH = 64
ADAM = {"lr": 1e-3, "b1": 0.9, "b2": 0.999, "eps": 1e-8}
# the step counts keep the default benchmark (eight cases, five peers) under 10 minutes on the
# loaded 2-core machine the results were recorded on, and every program between ~2 and ~40 s
MLP_STEPS = 2000
CNN_STEPS = 100
RNN_STEPS = 500

# id -> (title, steps, rtol of the results check)
CASES = {
    "seeds": ("seeds' (a*b)/(a+b), f32 scalars fed", 20_000, 1e-6),
    "chain": ("1e6 f32 sigmoid(0.7x+0.1)*tanh(x)-exp(-x*x)+0.5x", 300, 1e-4),
    "train10": ("random 64x64 graph, 10 ops + gradients + Adam", 5_000, 2e-2),
    "train50": ("random 64x64 graph, 50 ops + gradients + Adam", 5_000, 2e-2),
    "fwd200": ("random 64x64 graph, 200 ops forward", 3_000, 1e-3),
    "fwd1000": ("random 64x64 graph, 1,000 ops forward", 300, 1e-3),
    # dropout draws differ between peers, so the trained CNNs differ more than rounding
    "mlp": ("MLP 784-256-10 (tf.layers, relu, softmax), batch 64, Adam", MLP_STEPS, 0.05),
    "cnn": ("LeNet-style tf.layers CNN, batch 32, dropout, Adam", CNN_STEPS, 0.5),
    "rnn": ("unrolled LSTM (20 steps, h128), batch 32, Adam", RNN_STEPS, 0.05),
}
GRAPH_OPS = {"train10": 10, "train50": 50, "fwd200": 200, "fwd1000": 1000}
PEERS = ("jitflow", "jitflow-warm", "numpy", "jax", "tf1")
LABELS = {"jitflow": "jitflow (auto, cold)", "jitflow-warm": "jitflow (auto, warm cache)",
          "jitflow-sync": "jitflow sync", "jitflow-numba": "jitflow numba",
          "jitflow-quick": "jitflow quick", "numpy": "NumPy", "jax": "JAX jit",
          "tf1": "TF1 Session"}
#: the module a peer's interpreter must have
PEER_MODULE = {"jax": "jax", "tf1": "tensorflow"}
#: cases a peer does not run (NumPy has no convolution gradients: not written by hand here)
NOT_RUN = {("cnn", "numpy")}


def now() -> float:
    """Seconds since this process was spawned."""
    return time.perf_counter() - T_SPAWN


# -- the random graph -----------------------------------------------------------------------------
BOUND_LIMIT = 30.0   # a value that could exceed this in magnitude is squashed instead


def random_program(n_ops: int, seed: int = 0) -> list:
    """Steps of a random graph of about `n_ops` ops over [64, 64] values, as plain data.

    Each step reads one or two of the last six values: ("binary", add|mul|sub, i, j),
    ("unary", tanh|sigmoid|square|neg, i), ("matmul_tanh", i, weight index) or
    ("row", mean|sum, i, j) for `v[i] + reduce_<kind>(v[j], 1, keepdims=True)`. A bound on every
    value's magnitude is tracked (the input is uniform in [-1, 1]); a step that could exceed
    BOUND_LIMIT becomes a tanh or sigmoid of its first operand, so no value overflows. The first
    step is a matmul of the input, so that every program has a weight to train."""
    import numpy as np
    rng = np.random.default_rng(seed)
    steps, bounds, count, n_w = [("matmul_tanh", 0, 0)], [1.0, 1.0], 2, 1
    while count < n_ops:
        n = len(bounds)
        i = int(rng.integers(max(0, n - 6), n))
        j = int(rng.integers(max(0, n - 6), n))
        r = rng.random()
        if r < 0.35:
            fn = str(rng.choice(["add", "mul", "sub"]))
            step, bound, ops = ("binary", fn, i, j), (bounds[i] * bounds[j] if fn == "mul"
                                                      else bounds[i] + bounds[j]), 1
        elif r < 0.7:
            fn = str(rng.choice(["tanh", "sigmoid", "square", "neg"]))
            step, bound, ops = ("unary", fn, i), {"tanh": 1.0, "sigmoid": 1.0,
                                                  "square": bounds[i] ** 2,
                                                  "neg": bounds[i]}[fn], 1
        elif r < 0.85:
            step, bound, ops = ("matmul_tanh", i, n_w), 1.0, 2
            n_w += 1
        else:
            fn = str(rng.choice(["mean", "sum"]))
            step, bound, ops = ("row", fn, i, j), bounds[i] + bounds[j] * (
                WIDTH if fn == "sum" else 1), 2
        if bound > BOUND_LIMIT:
            step, bound, ops = ("unary", str(rng.choice(["tanh", "sigmoid"])), i), 1.0, 1
        steps.append(step)
        bounds.append(bound)
        count += ops
    return steps


def n_weights(steps: list) -> int:
    return sum(1 for s in steps if s[0] == "matmul_tanh")


def leaves(steps: list) -> list:
    """Indices of the values no step reads (the last one included): the output sums them all,
    so no op is dead code any peer could drop."""
    used = set()
    for s in steps:
        used.update(s[2:4] if s[0] in ("binary", "row") else s[1:2] if s[0] == "matmul_tanh"
                    else s[2:3])
    return [k for k in range(1, len(steps) + 1) if k not in used]


def program_forward(m, x, weights, steps: list, graph: bool):
    """The program's scalar output with module `m` (a TF1 graph API when `graph`, else
    jax.numpy): the mean of the square of the last value plus the means of every unread value
    and of every matmul's output (so every weight reaches it)."""
    vals = [x]
    for s in steps:
        kind = s[0]
        if kind == "binary":
            a, b = vals[s[2]], vals[s[3]]
            y = a + b if s[1] == "add" else a * b if s[1] == "mul" else a - b
        elif kind == "unary":
            h = vals[s[2]]
            if s[1] == "tanh":
                y = m.tanh(h)
            elif s[1] == "sigmoid":
                y = m.sigmoid(h)
            elif s[1] == "square":
                y = m.square(h)
            else:
                y = -h
        elif kind == "matmul_tanh":
            y = m.tanh(m.matmul(vals[s[1]], weights[s[2]]))
        else:
            red = (m.reduce_mean if s[1] == "mean" else m.reduce_sum) if graph else \
                (m.mean if s[1] == "mean" else m.sum)
            y = vals[s[2]] + red(vals[s[3]], 1, keepdims=True)
        vals.append(y)
    mean = m.reduce_mean if graph else m.mean
    out = mean(m.square(vals[-1]))
    for k in leaves(steps):
        if k != len(steps):
            out = out + mean(vals[k])
    for s, v in zip(steps, vals[1:]):
        if s[0] == "matmul_tanh":
            out = out + mean(v)
    return out


def program_data(steps: list):
    import numpy as np
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, (WIDTH, WIDTH)).astype(np.float32)
    ws = [(rng.standard_normal((WIDTH, WIDTH)) / 8).astype(np.float32)
          for _ in range(n_weights(steps))]
    return x, ws


# -- model data ---------------------------------------------------------------------------------
def digits(n: int = 4096, seed: int = 2, noise: float = 1.5):
    """Synthetic 28x28 "digits": ten smooth random templates under heavy noise, one-hot
    labels; the first `n` are for training, the 256 after them held out for the final loss."""
    import numpy as np
    rng = np.random.default_rng(seed)
    coarse = rng.random((10, 7, 7)).astype(np.float32)
    templates = np.kron(coarse, np.ones((4, 4), np.float32))
    labels = rng.integers(0, 10, n + 256)
    x = templates[labels] + noise * rng.standard_normal((n + 256, 28, 28)).astype(np.float32)
    return x[..., None].astype(np.float32), np.eye(10, dtype=np.float32)[labels]


def cnn_params():
    """Initial values of the CNN's layers (the same in every peer)."""
    import numpy as np
    rng = np.random.default_rng(3)

    def init(*shape):
        fan = int(np.prod(shape[:-1])) + shape[-1]
        return (rng.uniform(-1, 1, shape) * np.sqrt(6 / fan)).astype(np.float32)

    return [init(5, 5, 1, 32), np.full(32, 0.1, np.float32), init(5, 5, 32, 64),
            np.full(64, 0.1, np.float32), init(7 * 7 * 64, 1024), np.full(1024, 0.1, np.float32),
            init(1024, 10), np.zeros(10, np.float32)]


MLP_H = 256


def mlp_params():
    """Initial values of the MLP's two layers (the same in every peer)."""
    import numpy as np
    rng = np.random.default_rng(6)
    return [(rng.standard_normal((784, MLP_H)) * np.sqrt(2 / 784)).astype(np.float32),
            np.zeros(MLP_H, np.float32),
            (rng.standard_normal((MLP_H, 10)) * np.sqrt(1 / MLP_H)).astype(np.float32),
            np.zeros(10, np.float32)]


MLP_BATCH = 64


def mlp_batch_of(i: int) -> slice:
    k = (i * MLP_BATCH) % TRAIN
    return slice(k, k + MLP_BATCH)


RNN_T, RNN_IN, RNN_H = 20, 32, 128


def sequences(n: int = 4096, seed: int = 4):
    """Random sequences [n + 256, 20, 32] labelled by a random projection of their mean (the
    first `n` for training, the rest held out)."""
    import numpy as np
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n + 256, RNN_T, RNN_IN)).astype(np.float32)
    proj = rng.standard_normal((RNN_IN, 10)).astype(np.float32)
    labels = np.argmax(x.mean(axis=1) @ proj, axis=1)
    return x, np.eye(10, dtype=np.float32)[labels]


def rnn_params():
    import numpy as np
    rng = np.random.default_rng(5)
    s = np.sqrt(1.0 / (RNN_IN + RNN_H))
    return [(rng.standard_normal((RNN_IN + RNN_H, 4 * RNN_H)) * s).astype(np.float32),
            np.zeros(4 * RNN_H, np.float32),
            (rng.standard_normal((RNN_H, 10)) * 0.1).astype(np.float32),
            np.zeros(10, np.float32)]


BATCH = 32
TRAIN = 4096
HELD_OUT = slice(TRAIN, TRAIN + 256)


def batch_of(i: int) -> slice:
    k = (i * BATCH) % TRAIN
    return slice(k, k + BATCH)


# -- the graph peers (jitflow and tf.compat.v1) ---------------------------------------------------
class Work:
    """One peer's prepared case: `step(i)` runs step i; `final()` the value checked."""

    def __init__(self, step, final, ops=None) -> None:
        self.step, self.final, self.ops = step, final, ops


def _session(tf, peer: str):
    if peer == "tf1":
        n = int(os.environ.get("TF_NUM_INTRAOP_THREADS", "1") or 1)
        return tf.Session(config=tf.ConfigProto(intra_op_parallelism_threads=n,
                                                inter_op_parallelism_threads=1))
    return tf.Session()


def _summary(a) -> list:
    """[mean, root mean square] of an output array, in float64."""
    import numpy as np
    a = np.asarray(a, np.float64)
    return [float(a.mean()), float(np.sqrt((a * a).mean()))]


def graph_work(tf, peer: str, case: str, n: int) -> Work:
    import numpy as np
    tf.set_random_seed(0)
    if case == "seeds":
        a = tf.placeholder(tf.float32, shape=[], name="a")
        b = tf.placeholder(tf.float32, shape=[], name="b")
        out = (a * b) / (a + b)
        sess = _session(tf, peer)
        res = []

        def step(i):
            res[:] = [sess.run(out, feed_dict={a: 15.0 + (i % 7), b: 5.0})]
        return Work(step, lambda: [float(res[0])])
    if case == "chain":
        x = tf.placeholder(tf.float32, shape=[None], name="x")
        out = tf.sigmoid(0.7 * x + 0.1) * tf.tanh(x) - tf.exp(-x * x) + 0.5 * x
        xv = np.random.default_rng(0).uniform(-3, 3, 1_000_000).astype(np.float32)
        sess = _session(tf, peer)
        res = []

        def step(i):
            res[:] = [sess.run(out, feed_dict={x: xv})]
        return Work(step, lambda: _summary(res[0]))
    if case in GRAPH_OPS:
        steps = random_program(GRAPH_OPS[case])
        xv, wv = program_data(steps)
        x = tf.placeholder(tf.float32, [None, WIDTH], name="x")
        ws = [tf.Variable(w, name=f"w{k}") for k, w in enumerate(wv)]
        g = tf.get_default_graph()
        n0 = len(g.get_operations())
        loss = program_forward(tf, x, ws, steps, True)
        ops = len(g.get_operations()) - n0
        fetch = loss
        if case.startswith("train"):
            train = tf.train.AdamOptimizer(ADAM["lr"], ADAM["b1"], ADAM["b2"],
                                           ADAM["eps"]).minimize(loss)
            fetch = [loss, train]
        sess = _session(tf, peer)
        sess.run(tf.global_variables_initializer())
        feed = {x: xv}

        def step(i):
            sess.run(fetch, feed_dict=feed)
        return Work(step, lambda: [float(sess.run(loss, feed_dict=feed))], ops)
    if case == "mlp":
        xs, ys = digits()
        xs = xs.reshape(len(xs), 784)
        p = mlp_params()
        init = tf.constant_initializer
        x = tf.placeholder(tf.float32, [None, 784], name="x")
        y = tf.placeholder(tf.float32, [None, 10], name="y")
        h = tf.layers.dense(x, MLP_H, activation=tf.nn.relu, kernel_initializer=init(p[0]),
                            bias_initializer=init(p[1]))
        logits = tf.layers.dense(h, 10, kernel_initializer=init(p[2]),
                                 bias_initializer=init(p[3]))
        loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits_v2(labels=y,
                                                                          logits=logits))
        train = tf.train.AdamOptimizer(ADAM["lr"], ADAM["b1"], ADAM["b2"],
                                       ADAM["eps"]).minimize(loss)
        sess = _session(tf, peer)
        sess.run(tf.global_variables_initializer())

        def step(i):
            s = mlp_batch_of(i)
            sess.run([train, loss], feed_dict={x: xs[s], y: ys[s]})
        return Work(step, lambda: [float(sess.run(loss, {x: xs[HELD_OUT], y: ys[HELD_OUT]}))])
    if case == "cnn":
        xs, ys = digits()
        p = cnn_params()
        init = tf.constant_initializer
        x = tf.placeholder(tf.float32, [None, 28, 28, 1], name="x")
        y = tf.placeholder(tf.float32, [None, 10], name="y")
        training = tf.placeholder_with_default(False, [], name="training")
        h = tf.layers.conv2d(x, 32, 5, padding="same", activation=tf.nn.relu,
                             kernel_initializer=init(p[0]), bias_initializer=init(p[1]))
        h = tf.layers.max_pooling2d(h, 2, 2)
        h = tf.layers.conv2d(h, 64, 5, padding="same", activation=tf.nn.relu,
                             kernel_initializer=init(p[2]), bias_initializer=init(p[3]))
        h = tf.layers.max_pooling2d(h, 2, 2)
        h = tf.layers.flatten(h)
        h = tf.layers.dense(h, 1024, activation=tf.nn.relu, kernel_initializer=init(p[4]),
                            bias_initializer=init(p[5]))
        h = tf.layers.dropout(h, rate=0.4, training=training)
        logits = tf.layers.dense(h, 10, kernel_initializer=init(p[6]),
                                 bias_initializer=init(p[7]))
        loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits_v2(labels=y,
                                                                          logits=logits))
        train = tf.train.AdamOptimizer(ADAM["lr"], ADAM["b1"], ADAM["b2"],
                                       ADAM["eps"]).minimize(loss)
        sess = _session(tf, peer)
        sess.run(tf.global_variables_initializer())

        def step(i):
            s = batch_of(i)
            sess.run([train, loss], feed_dict={x: xs[s], y: ys[s], training: True})
        return Work(step, lambda: [float(sess.run(loss, {x: xs[HELD_OUT], y: ys[HELD_OUT]}))])
    if case == "rnn":
        xs, ys = sequences()
        p = rnn_params()
        x = tf.placeholder(tf.float32, [None, RNN_T, RNN_IN], name="x")
        y = tf.placeholder(tf.float32, [None, 10], name="y")
        w, b, wo, bo = [tf.Variable(v) for v in p]
        h = c = tf.zeros([tf.shape(x)[0], RNN_H])
        for x_t in tf.unstack(x, axis=1):
            z = tf.matmul(tf.concat([x_t, h], 1), w) + b
            i_, j, f, o = tf.split(z, 4, axis=1)
            c = c * tf.sigmoid(f + 1.0) + tf.sigmoid(i_) * tf.tanh(j)
            h = tf.sigmoid(o) * tf.tanh(c)
        logits = tf.matmul(h, wo) + bo
        loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits_v2(labels=y,
                                                                          logits=logits))
        train = tf.train.AdamOptimizer(ADAM["lr"], ADAM["b1"], ADAM["b2"],
                                       ADAM["eps"]).minimize(loss)
        sess = _session(tf, peer)
        sess.run(tf.global_variables_initializer())

        def step(i):
            s = batch_of(i)
            sess.run([train, loss], feed_dict={x: xs[s], y: ys[s]})
        return Work(step, lambda: [float(sess.run(loss, {x: xs[HELD_OUT], y: ys[HELD_OUT]}))])
    raise ValueError(f"unknown case {case!r}")


# -- JAX -------------------------------------------------------------------------------------------
def adam_step(jax, jnp, loss_fn):
    """One step of TF1's Adam (its epsilon-hat form) on a list of parameters."""
    lr, b1, b2, eps = ADAM["lr"], ADAM["b1"], ADAM["b2"], ADAM["eps"]

    def step(state, *batch):
        params, m, v, t = state
        loss, grads = jax.value_and_grad(loss_fn)(params, *batch)
        t = t + 1
        lr_t = lr * jnp.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        m = [b1 * a + (1 - b1) * g for a, g in zip(m, grads)]
        v = [b2 * a + (1 - b2) * g * g for a, g in zip(v, grads)]
        params = [q - lr_t * a / (jnp.sqrt(c) + eps) for q, a, c in zip(params, m, v)]
        return (params, m, v, t), loss

    return step


def _adam_state(jnp, params):
    zeros = [jnp.zeros_like(q) for q in params]
    return [(list(map(jnp.asarray, params)), zeros, zeros, jnp.float32(0))]


def jax_work(jax, jnp, case: str, n: int) -> Work:
    import numpy as np
    if case == "seeds":
        f = jax.jit(lambda a, b: (a * b) / (a + b))
        res = []

        def step(i):
            res[:] = [np.asarray(f(np.float32(15.0 + (i % 7)), np.float32(5.0)))]
        return Work(step, lambda: [float(res[0])])
    if case == "chain":
        f = jax.jit(lambda x: jax.nn.sigmoid(0.7 * x + 0.1) * jnp.tanh(x) - jnp.exp(-x * x)
                    + 0.5 * x)
        xv = np.random.default_rng(0).uniform(-3, 3, 1_000_000).astype(np.float32)
        res = []

        def step(i):
            res[:] = [np.asarray(f(xv))]
        return Work(step, lambda: _summary(res[0]))
    if case in GRAPH_OPS:
        steps = random_program(GRAPH_OPS[case])
        xv, wv = program_data(steps)

        def loss_fn(ws, x):
            return program_forward(_JaxGraph(jax, jnp), x, ws, steps, False)

        if case.startswith("fwd"):
            f = jax.jit(loss_fn)
            ws = list(map(jnp.asarray, wv))

            def step(i):
                np.asarray(f(ws, xv))
            return Work(step, lambda: [float(f(ws, xv))])
        f = jax.jit(adam_step(jax, jnp, loss_fn))
        state = _adam_state(jnp, wv)

        def step(i):
            state[0], loss = f(state[0], xv)
            np.asarray(loss)
        return Work(step, lambda: [float(jax.jit(loss_fn)(state[0][0], xv))])
    if case == "mlp":
        xs, ys = digits()
        xs = xs.reshape(len(xs), 784)

        def mlp_loss(params, x, y):
            w1, b1, w2, b2 = params
            logits = jax.nn.relu(x @ w1 + b1) @ w2 + b2
            return jnp.mean(-jnp.sum(y * jax.nn.log_softmax(logits), axis=1))

        f = jax.jit(adam_step(jax, jnp, mlp_loss))
        state = _adam_state(jnp, mlp_params())

        def step(i):
            s = mlp_batch_of(i)
            state[0], loss = f(state[0], xs[s], ys[s])
            np.asarray(loss)
        evaluate = jax.jit(mlp_loss)
        return Work(step, lambda: [float(evaluate(state[0][0], xs[HELD_OUT], ys[HELD_OUT]))])
    if case == "cnn":
        xs, ys = digits()
        lax = jax.lax
        dn = ("NHWC", "HWIO", "NHWC")

        def pool(h):
            return lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")

        def logits_of(params, x, key):
            w1, b1, w2, b2, w3, b3, w4, b4 = params
            h = pool(jax.nn.relu(lax.conv_general_dilated(x, w1, (1, 1), "SAME",
                                                          dimension_numbers=dn) + b1))
            h = pool(jax.nn.relu(lax.conv_general_dilated(h, w2, (1, 1), "SAME",
                                                          dimension_numbers=dn) + b2))
            h = jax.nn.relu(h.reshape(h.shape[0], -1) @ w3 + b3)
            if key is not None:
                keep = jax.random.bernoulli(key, 0.6, h.shape)
                h = jnp.where(keep, h / 0.6, 0.0)
            return h @ w4 + b4

        def xent(logits, y):
            return jnp.mean(-jnp.sum(y * jax.nn.log_softmax(logits), axis=1))

        def loss_fn(params, x, y, key):
            return xent(logits_of(params, x, key), y)

        f = jax.jit(adam_step(jax, jnp, loss_fn))
        state = _adam_state(jnp, cnn_params())
        key = jax.random.PRNGKey(0)

        def step(i):
            s = batch_of(i)
            state[0], loss = f(state[0], xs[s], ys[s], jax.random.fold_in(key, i))
            np.asarray(loss)
        evaluate = jax.jit(lambda params, x, y: xent(logits_of(params, x, None), y))
        return Work(step, lambda: [float(evaluate(state[0][0], xs[HELD_OUT], ys[HELD_OUT]))])
    if case == "rnn":
        xs, ys = sequences()

        def loss_fn(params, x, y):
            w, b, wo, bo = params
            h = c = jnp.zeros((x.shape[0], RNN_H), jnp.float32)
            for t in range(RNN_T):   # unrolled, as the graph
                z = jnp.concatenate([x[:, t, :], h], 1) @ w + b
                i_, j, f_, o = jnp.split(z, 4, axis=1)
                c = c * jax.nn.sigmoid(f_ + 1.0) + jax.nn.sigmoid(i_) * jnp.tanh(j)
                h = jax.nn.sigmoid(o) * jnp.tanh(c)
            logits = h @ wo + bo
            return jnp.mean(-jnp.sum(y * jax.nn.log_softmax(logits), axis=1))

        f = jax.jit(adam_step(jax, jnp, loss_fn))
        state = _adam_state(jnp, rnn_params())

        def step(i):
            s = batch_of(i)
            state[0], loss = f(state[0], xs[s], ys[s])
            np.asarray(loss)
        evaluate = jax.jit(loss_fn)
        return Work(step, lambda: [float(evaluate(state[0][0], xs[HELD_OUT], ys[HELD_OUT]))])
    raise ValueError(f"unknown case {case!r}")


class _JaxGraph:
    """jax.numpy under the names program_forward uses for the jax branch."""

    def __init__(self, jax, jnp) -> None:
        self.tanh, self.square, self.matmul = jnp.tanh, jnp.square, jnp.matmul
        self.mean, self.sum = jnp.mean, jnp.sum
        self.sigmoid = jax.nn.sigmoid


# -- NumPy (gradients written by hand) -----------------------------------------------------------
class _NumpyAdam:
    """TF1's Adam (its epsilon-hat form) on a list of float32 arrays, in place."""

    def __init__(self, params: list) -> None:
        import numpy as np
        self.params = params
        self.m = [np.zeros_like(q) for q in params]
        self.v = [np.zeros_like(q) for q in params]
        self.t = 0

    def update(self, grads: list) -> None:
        import numpy as np
        lr, b1, b2, eps = ADAM["lr"], ADAM["b1"], ADAM["b2"], ADAM["eps"]
        self.t += 1
        lr_t = np.float32(lr * np.sqrt(1 - b2 ** self.t) / (1 - b1 ** self.t))
        for q, m, v, g in zip(self.params, self.m, self.v, grads):
            m *= np.float32(b1)
            m += np.float32(1 - b1) * g
            v *= np.float32(b2)
            v += np.float32(1 - b2) * g * g
            q -= lr_t * m / (np.sqrt(v) + np.float32(eps))


def _np_sigmoid(a):
    import numpy as np
    return np.float32(1) / (np.float32(1) + np.exp(-a))


def _np_xent(logits, y):
    """Mean softmax cross entropy and its gradient with respect to the logits."""
    import numpy as np
    z = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    s = e.sum(axis=1, keepdims=True)
    loss = float(np.mean(np.sum(y * (np.log(s) - z), axis=1)))
    return loss, ((e / s - y) / np.float32(len(y))).astype(np.float32)


class _NumpyGraph:
    """numpy under the names program_forward uses for the array branch."""

    def __init__(self) -> None:
        import numpy as np
        self.tanh, self.square, self.matmul = np.tanh, np.square, np.matmul
        self.mean, self.sum, self.sigmoid = np.mean, np.sum, _np_sigmoid


def _program_grads(steps: list, x, ws: list) -> list:
    """Gradients of program_forward's output with respect to the weights, by reverse mode over
    the recorded steps (every value is [WIDTH, WIDTH])."""
    import numpy as np
    m = _NumpyGraph()
    vals = [x]
    for s in steps:                      # the forward pass, keeping every value
        kind = s[0]
        if kind == "binary":
            a, b = vals[s[2]], vals[s[3]]
            y = a + b if s[1] == "add" else a * b if s[1] == "mul" else a - b
        elif kind == "unary":
            y = getattr(m, s[1])(vals[s[2]]) if s[1] != "neg" else -vals[s[2]]
        elif kind == "matmul_tanh":
            y = np.tanh(vals[s[1]] @ ws[s[2]])
        else:
            red = np.mean if s[1] == "mean" else np.sum
            y = vals[s[2]] + red(vals[s[3]], 1, keepdims=True)
        vals.append(y)
    size = np.float32(vals[-1].size)
    g = [np.zeros_like(v) for v in vals]
    g[-1] += np.float32(2) * vals[-1] / size
    for k in leaves(steps):
        if k != len(steps):
            g[k] += np.float32(1) / size
    for k, s in enumerate(steps, 1):
        if s[0] == "matmul_tanh":
            g[k] += np.float32(1) / size
    gw = [np.zeros_like(w) for w in ws]
    for k in range(len(steps), 0, -1):
        s, y, gy = steps[k - 1], vals[k], g[k]
        kind = s[0]
        if kind == "binary":
            i, j = s[2], s[3]
            if s[1] == "add":
                g[i] += gy
                g[j] += gy
            elif s[1] == "sub":
                g[i] += gy
                g[j] -= gy
            else:
                ga, gb = gy * vals[j], gy * vals[i]
                g[i] += ga
                g[j] += gb
        elif kind == "unary":
            i, fn = s[2], s[1]
            g[i] += (gy * (1 - y * y) if fn == "tanh" else gy * y * (1 - y) if fn == "sigmoid"
                     else gy * 2 * vals[i] if fn == "square" else -gy)
        elif kind == "matmul_tanh":
            i, w = s[1], s[2]
            dz = gy * (1 - y * y)
            gw[w] += vals[i].T @ dz
            g[i] += dz @ ws[w].T
        else:
            i, j = s[2], s[3]
            g[i] += gy
            r = gy.sum(axis=1, keepdims=True)
            g[j] += r / np.float32(WIDTH) if s[1] == "mean" else r
    return gw


def numpy_work(case: str, n: int) -> Work:
    """The cases in plain NumPy: float32 arrays, gradients by hand, TF1's Adam."""
    import numpy as np
    if case == "seeds":
        res = []

        def step(i):
            a, b = np.float32(15.0 + (i % 7)), np.float32(5.0)
            res[:] = [(a * b) / (a + b)]
        return Work(step, lambda: [float(res[0])])
    if case == "chain":
        xv = np.random.default_rng(0).uniform(-3, 3, 1_000_000).astype(np.float32)
        res = []
        c07, c01, c05 = np.float32(0.7), np.float32(0.1), np.float32(0.5)

        def step(i):
            res[:] = [_np_sigmoid(c07 * xv + c01) * np.tanh(xv) - np.exp(-xv * xv) + c05 * xv]
        return Work(step, lambda: _summary(res[0]))
    if case in GRAPH_OPS:
        steps = random_program(GRAPH_OPS[case])
        xv, wv = program_data(steps)
        graph = _NumpyGraph()
        if case.startswith("fwd"):
            def step(i):
                program_forward(graph, xv, wv, steps, False)
            return Work(step, lambda: [float(program_forward(graph, xv, wv, steps, False))])
        adam = _NumpyAdam(wv)

        def step(i):
            adam.update(_program_grads(steps, xv, wv))
        return Work(step, lambda: [float(program_forward(graph, xv, wv, steps, False))])
    if case == "mlp":
        xs, ys = digits()
        xs = xs.reshape(len(xs), 784)
        params = mlp_params()
        adam = _NumpyAdam(params)

        def forward(x):
            w1, b1, w2, b2 = params
            h = np.maximum(x @ w1 + b1, np.float32(0))
            return h, h @ w2 + b2

        def step(i):
            s = mlp_batch_of(i)
            x, y = xs[s], ys[s]
            h, logits = forward(x)
            _, dl = _np_xent(logits, y)
            dh = (dl @ params[2].T) * (h > 0)
            adam.update([x.T @ dh, dh.sum(0), h.T @ dl, dl.sum(0)])
        return Work(step, lambda: [_np_xent(forward(xs[HELD_OUT])[1], ys[HELD_OUT])[0]])
    if case == "rnn":
        xs, ys = sequences()
        params = rnn_params()
        adam = _NumpyAdam(params)
        H = RNN_H

        def forward(x):
            w, b, wo, bo = params
            h = c = np.zeros((len(x), H), np.float32)
            tape = []
            for t in range(RNN_T):
                inp = np.concatenate([x[:, t, :], h], 1)
                z = inp @ w + b
                si, tj = _np_sigmoid(z[:, :H]), np.tanh(z[:, H:2 * H])
                sf, so = _np_sigmoid(z[:, 2 * H:3 * H] + np.float32(1)), _np_sigmoid(z[:, 3 * H:])
                c_prev = c
                c = c * sf + si * tj
                tc = np.tanh(c)
                h = so * tc
                tape.append((inp, si, tj, sf, so, c_prev, tc))
            return h, h @ wo + bo, tape

        def step(i):
            w, b, wo, bo = params
            s = batch_of(i)
            h, logits, tape = forward(xs[s])
            _, dl = _np_xent(logits, ys[s])
            dw, db = np.zeros_like(w), np.zeros_like(b)
            dh, dc = dl @ wo.T, np.zeros_like(h)
            for inp, si, tj, sf, so, c_prev, tc in reversed(tape):
                dc = dc + dh * so * (1 - tc * tc)
                dz = np.concatenate([dc * tj * si * (1 - si), dc * si * (1 - tj * tj),
                                     dc * c_prev * sf * (1 - sf), dh * tc * so * (1 - so)], 1)
                dw += inp.T @ dz
                db += dz.sum(0)
                dh = (dz @ w.T)[:, RNN_IN:]
                dc = dc * sf
            adam.update([dw, db, h.T @ dl, dl.sum(0)])
        return Work(step, lambda: [_np_xent(forward(xs[HELD_OUT])[1], ys[HELD_OUT])[0]])
    raise ValueError(f"NumPy does not run case {case!r}")


# -- the child ------------------------------------------------------------------------------------
def steady_figures(ends: list, t_first_start: float, window: int) -> dict:
    """Step figures from the steps' end times (seconds since spawn)."""
    import numpy as np
    e = np.asarray(ends)
    d = np.diff(np.concatenate([[t_first_start], e]))
    n_tail = max(5, len(d) // 10)
    steady = float(np.median(d[-n_tail:]))
    reached_at, reached_step = None, None
    w = max(1, min(window, len(d)))
    for k in range(len(d) - w + 1):
        if np.median(d[k:k + w]) <= 1.1 * steady:
            reached_at, reached_step = float(e[k]), k
            break
    return {"steps": len(d), "steady_step": steady, "steady_of_last": n_tail,
            "first_step": float(d[0]), "reached_at": reached_at, "reached_step": reached_step,
            "median_first_tenth": float(np.median(d[:max(1, len(d) // 10)])),
            "work_wall": float(e[-1] - t_first_start)}


def child(peer: str, case: str, n: int, window: int) -> dict:
    if peer.startswith("jitflow"):
        import jitflow as tf
    elif peer == "tf1":
        import tensorflow.compat.v1 as tf
        tf.disable_v2_behavior()
        tf.logging.set_verbosity(tf.logging.ERROR)
    elif peer == "jax":
        import jax
        import jax.numpy as jnp
    import numpy as np
    t_import = now()
    if peer == "jax":
        work = jax_work(jax, jnp, case, n)
    elif peer == "numpy":
        work = numpy_work(case, n)
    else:
        import warnings
        warnings.simplefilter("ignore")   # tf.layers' deprecation warnings
        work = graph_work(tf, peer, case, n)
    t_built = now()
    ends = []
    jf = peer.startswith("jitflow")
    if jf:
        from jitflow.backends.numba_cpu import background
        idle_at = None
        busy_seen = False
    for i in range(n):
        work.step(i)
        ends.append(now())
        if jf:
            p = background.pending()
            if p:
                busy_seen, idle_at = True, None
            elif busy_seen and idle_at is None:
                idle_at = ends[-1]
    t_end = ends[-1]
    out = {"import_s": t_import, "interpreter_start_s": T_START - T_SPAWN,
           "build_s": t_built - t_import, "total_s": t_end,
           **steady_figures(ends, t_built, window)}
    if jf:
        out.update(jitflow_figures(background, idle_at))
    out["final"] = work.final()
    out["final_ok"] = bool(np.all(np.isfinite(out["final"])))
    out["ops"] = work.ops
    return out


def jitflow_figures(background, idle_at) -> dict:
    """What code jitflow's kernels ended with, at the end of the work."""
    from jitflow.backends.numba_cpu import cache, llvmjit
    ls, cs = llvmjit.STATS, cache.STATS
    return {"mode": background.mode(), "quick_built": ls.get("quick", 0),
            "opt_built": ls.get("opt", 0), "objects_compiled": ls.get("objects_compiled", 0),
            "objects_loaded": ls.get("objects_loaded", 0),
            "numba_compiles": cs.get("compiles", 0),
            "numba_fallbacks": cs.get("numba_fallbacks", 0),
            "reference_segments": cs.get("reference_segments", 0),
            "pending_at_end": background.pending(), "compiler_idle_at": idle_at}


# -- the parent -----------------------------------------------------------------------------------
def child_env(peer: str, tmp: str) -> dict:
    """A child's environment: empty caches under `tmp`, one thread, this checkout first."""
    from benchmarks import children
    env = children.peer_env(peer, os.path.join(tmp, "jitflow"),
                            NUMBA_CACHE_DIR=os.path.join(tmp, "numba"),
                            JAX_ENABLE_COMPILATION_CACHE="false", JAX_PLATFORMS="cpu",
                            TF_USE_LEGACY_KERAS="1")
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    # an installed package imports from bytecode; with PYTHONDONTWRITEBYTECODE set every child
    # would recompile this checkout's sources on import (coldstart.py does the same)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def peer_python(peer: str, bench_python: str) -> str:
    """The interpreter a peer runs in: jitflow and NumPy in this one (the project's venv), JAX
    and TF1 in `bench_python` (a venv with the `bench` extra; this one by default)."""
    return bench_python if peer in PEER_MODULE else sys.executable


def has_module(python: str, module: str) -> bool:
    """Whether `python` can import `module` (found, not imported)."""
    code = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    return subprocess.run([python, "-c", code], capture_output=True).returncode == 0


def run_child(peer: str, case: str, n: int, window: int, timeout: float, python: str,
              tmp: str) -> dict:
    """One child on the caches under `tmp` (the caller makes it empty, or keeps a cold run's
    caches for `jitflow-warm`); its figures, with exit_s (spawn to exit) and returncode."""
    env = child_env("jitflow" if peer == "jitflow-warm" else peer, tmp)
    cmd = [python, os.path.abspath(__file__), "--child", peer, "--case", case,
           "--n", str(n), "--window", str(window)]
    t0 = time.perf_counter()
    env["COLD_SPAWN_T"] = repr(t0)
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout,
                           cwd=tmp)
    except subprocess.TimeoutExpired:
        return {"error": f"over {timeout:.0f} s"}
    exit_s = time.perf_counter() - t0
    for line in p.stdout.splitlines():
        if line.startswith(MARK):
            out = json.loads(line[len(MARK):])
            out.update(exit_s=exit_s, returncode=p.returncode)
            if p.returncode:
                out["error"] = f"exit status {p.returncode} after the work"
            return out
    tail = (p.stderr or p.stdout).strip().splitlines()
    # the exception's own line first (a report cell shows the start), then the traceback's end
    return {"error": f"exit {p.returncode}: {tail[-1] if tail else ''}"[:300],
            "output_tail": "\n".join(tail[-12:])}


def run_case(case: str, peers: list, n: int, args, pythons: dict, bar=None) -> dict:
    """Every peer on one case, each in a fresh process with empty caches; `jitflow-warm` runs
    right after the cold `jitflow` child on the caches that child left (a cold child is run
    first, unrecorded, when `jitflow` itself is not asked for). {peer: figures}."""
    out = {}
    order = [p for p in peers if p != "jitflow-warm"]
    if "jitflow-warm" in peers:
        at = order.index("jitflow") + 1 if "jitflow" in order else 0
        order.insert(at, "jitflow-warm")
    tmp = None
    try:
        for peer in order:
            if (case, peer) in NOT_RUN:
                continue
            if bar is not None:
                bar.set_postfix_str(f"{case} {peer}")
            if peer != "jitflow-warm" or tmp is None:
                if tmp is not None:
                    shutil.rmtree(tmp, ignore_errors=True)
                tmp = tempfile.mkdtemp(prefix="jitflow-cold-")
            if peer == "jitflow-warm" and "jitflow" not in out:
                run_child("jitflow", case, n, args.window, args.timeout, sys.executable, tmp)
            out[peer] = run_child(peer, case, n, args.window, args.timeout,
                                  pythons[peer], tmp)
            if bar is not None:
                bar.update(1)
                if "error" in out[peer]:
                    bar.write(f"{case} {peer}: {out[peer]['error']}", file=sys.stderr)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def warm_imports(peers: list, pythons: dict) -> None:
    """Import each peer's modules once (bytecode written), so no timed child compiles them."""
    mods = {"jax": "import jax, jax.numpy", "tf1": "import tensorflow.compat.v1",
            "numpy": "import numpy"}
    done = set()
    for peer in peers:
        stmt = "import jitflow" if peer.startswith("jitflow") else mods[peer]
        if (stmt, pythons[peer]) in done:
            continue
        done.add((stmt, pythons[peer]))
        tmp = tempfile.mkdtemp(prefix="jitflow-cold-")
        try:
            subprocess.run([pythons[peer], "-c", stmt], env=child_env(peer, tmp),
                           capture_output=True, cwd=tmp, timeout=600)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def _fmt(v, unit: str = "s") -> str:
    if v is None:
        return "-"
    if unit == "s":
        return f"{v:.2f} s" if v >= 0.1 else f"{v:.3f} s"
    for u, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if v >= scale:
            return f"{v / scale:.3g} {u}"
    return f"{v * 1e9:.3g} ns"


def _ratio(a, b) -> str:
    return "-" if a is None or b is None or not b else f"{a / b:.2f}"


def _median_row(rows: list) -> dict:
    """One figure per key: the median over repeated children (first row's other values)."""
    import numpy as np
    ok = [r for r in rows if "error" not in r]
    if not ok:
        return rows[0]
    out = dict(ok[0])
    for k in ("total_s", "exit_s", "steady_step", "reached_at", "import_s", "build_s",
              "first_step"):
        vals = [r[k] for r in ok if r.get(k) is not None]
        out[k] = float(np.median(vals)) if vals else None
    out["repeats"] = len(ok)
    return out


def check_results(case: str, by: dict) -> dict:
    """{peer: None (agrees) or how it differs} against JAX's value (else TF1's, else jitflow
    sync's), with the case's loose tolerance."""
    import numpy as np
    rtol = CASES[case][2]
    ref_peer = next((p for p in ("jax", "tf1", "jitflow-sync", "jitflow") if p in by
                     and "final" in by[p]), None)
    out = {}
    if ref_peer is None:
        return out
    want = np.asarray(by[ref_peer]["final"], np.float64)
    for p, r in by.items():
        if "final" not in r:
            out[p] = "no result"
            continue
        got = np.asarray(r["final"], np.float64)
        if got.shape != want.shape or not np.all(np.isfinite(got)):
            out[p] = f"bad value {r['final']}"
        elif not np.allclose(got, want, rtol=rtol, atol=rtol * 1e-2):
            out[p] = f"differs from {ref_peer} beyond rtol {rtol:g}"
        else:
            out[p] = None
    return out


def report(rows: dict, peers: list, cases: list, facts: dict) -> str:
    """The markdown tables."""
    shown = [p for p in peers if any((c, p) in rows for c in cases)]
    short = {"jitflow": "cold", "jitflow-warm": "warm", "numpy": "NumPy", "jax": "JAX",
             "tf1": "TF1"}
    pairs = [(a, b) for a in ("jitflow", "jitflow-warm") if a in shown
             for b in ("numpy", "jax", "tf1") if b in shown]
    head = "| case | steps | " + " | ".join(LABELS.get(p, p) for p in shown) + " | " + \
        " | ".join(f"jitflow {short[a]} / {short[b]}" for a, b in pairs) + " |"
    sep = "|---|---|" + "---|" * (len(shown) + len(pairs))

    def table(title: str, key: str, unit: str, note: str) -> list:
        import numpy as np
        lines = [f"### {title}", "", note, "", head, sep]
        logs: dict = {pair: [] for pair in pairs}
        for c in cases:
            by = {p: rows[(c, p)] for p in shown if (c, p) in rows}
            cells = []
            for p in shown:
                r = by.get(p)
                if r is None:
                    cells.append("-")
                elif "error" in r and r.get(key) is None:
                    cells.append("error")
                else:
                    cells.append(_fmt(r.get(key), unit))
            ratios = []
            for a, b in pairs:
                va, vb = by.get(a, {}).get(key), by.get(b, {}).get(key)
                ratios.append(_ratio(va, vb))
                if va and vb:
                    logs[(a, b)].append(np.log(va / vb))
            steps = next((r["steps"] for r in by.values() if "steps" in r), "")
            lines.append(f"| {c} | {steps} | " + " | ".join(cells) + " | "
                         + " | ".join(ratios) + " |")
        if len(cases) > 1 and pairs:
            lines.append("| geometric mean | | " + " | ".join("" for _ in shown) + " | "
                         + " | ".join(f"{np.exp(np.mean(v)):.2f}" if v else "-"
                                      for v in logs.values()) + " |")
        return lines + [""]

    out = ["## Cold workloads: a fixed amount of work in a fresh process, empty caches", ""]
    out += [f"- {k}: {v}" for k, v in facts.items()] + [""]
    out += ["Cases:", ""] + [f"- `{c}`: {CASES[c][0]}" for c in cases] + [""]
    out += table("Total wall, process start to the end of the last step", "total_s", "s",
                 "Interpreter start, imports, graph building, compiling and every step. "
                 "Ratios are jitflow's default (auto) mode over the peer, with an empty "
                 "kernel cache (cold) and on the cache the cold run left (warm): below 1 "
                 "jitflow finished first.")
    out += table("Steady step (median of the last 10% of steps)", "steady_step", "t",
                 "The speed a peer settles at once everything is compiled.")
    out += table("Steady speed reached at (seconds from process start)", "reached_at", "s",
                 "The end of the first step from which the median of the next 5 steps is "
                 "within 1.1x of that peer's steady step.")
    out += ["### jitflow's code per case (default mode)", "",
            "Kernels given quick / optimized LLVM code in the process, machine-code objects "
            "compiled / loaded from the cache, optimized compiles still queued when the work "
            "ended, when the compiler thread went idle, and process exit (spawn to exit "
            "status).", "",
            "| case | cold: quick / optimized | cold: objects compiled | cold: queued at end | "
            "cold: compiler idle at | cold: exit | warm: quick / optimized | "
            "warm: objects loaded / compiled | warm: exit |",
            "|---|---|---|---|---|---|---|---|---|"]
    for c in cases:
        cold, warm = rows.get((c, "jitflow"), {}), rows.get((c, "jitflow-warm"), {})
        if "mode" not in cold and "mode" not in warm:
            continue

        def g(r, k):
            return "-" if r.get(k) is None else r[k]

        out.append(f"| {c} | {g(cold, 'quick_built')} / {g(cold, 'opt_built')} | "
                   f"{g(cold, 'objects_compiled')} | {g(cold, 'pending_at_end')} | "
                   f"{_fmt(cold.get('compiler_idle_at'))} | {_fmt(cold.get('exit_s'))} | "
                   f"{g(warm, 'quick_built')} / {g(warm, 'opt_built')} | "
                   f"{g(warm, 'objects_loaded')} / {g(warm, 'objects_compiled')} | "
                   f"{_fmt(warm.get('exit_s'))} |")
    out += ["", "### Results check (final loss or output; loose tolerance per case)", "",
            "| case | " + " | ".join(LABELS.get(p, p) for p in shown) + " | check |",
            "|---|" + "---|" * (len(shown) + 1)]
    for c in cases:
        by = {p: rows[(c, p)] for p in shown if (c, p) in rows}
        verdict = check_results(c, by)
        bad = {p: v for p, v in verdict.items() if v}
        cells = []
        for p in shown:
            r = by.get(p, {})
            cells.append(", ".join(f"{v:.6g}" for v in r["final"]) if "final" in r
                         else r.get("error", "")[:60])
        out.append(f"| {c} | " + " | ".join(cells) + " | "
                   + ("ok (rtol %g)" % CASES[c][2] if not bad else
                      "; ".join(f"{LABELS.get(p, p)}: {v}" for p, v in bad.items())) + " |")
    return "\n".join(out) + "\n"


def machine_facts(args, pinned: list) -> dict:
    import platform
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python "
                       f"{platform.python_version()}",
            "load average at start": "n/a" if load is None else
                                     ", ".join(f"{v:.2f}" for v in load),
            "threads": "one per peer (benchmarks/threads.py)" + (
                f", process held to CPU(s) {pinned}" if pinned else ", every CPU"),
            "form": "--quick (step counts / 10)" if args.quick else "full",
            "repeats": args.repeat, "versions": _versions()}


def _versions() -> str:
    from importlib.metadata import PackageNotFoundError, version
    out = []
    for d in ("numpy", "numba", "llvmlite", "jax", "jaxlib", "tensorflow-cpu", "tensorflow"):
        try:
            out.append(f"{d} {version(d)}")
        except PackageNotFoundError:
            pass
    return ", ".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child")
    ap.add_argument("--case")
    ap.add_argument("--n", type=int)
    ap.add_argument("--quick", action="store_true", help="every step count divided by 10")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--peers", default=",".join(PEERS))
    ap.add_argument("--repeat", type=int, default=1, help="children per (case, peer)")
    ap.add_argument("--window", type=int, default=5,
                    help="steps whose median must be within 1.1x of the steady step")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per child")
    ap.add_argument("--bench-python", default=os.environ.get("JITFLOW_BENCH_PYTHON",
                                                             sys.executable),
                    help="the interpreter for JAX and TF1 (default: $JITFLOW_BENCH_PYTHON, "
                         "else this one)")
    ap.add_argument("--no-affinity", action="store_true",
                    help="leave every CPU to the children (default: held to one)")
    ap.add_argument("--out", help="write cold_workloads.md and .json into this folder")
    args = ap.parse_args(argv)
    if args.child:
        print(MARK + json.dumps(child(args.child, args.case, args.n, args.window)), flush=True)
        return 0
    sys.path.insert(0, ROOT)
    from benchmarks import threads
    threads.pin(1, cpus=not args.no_affinity)
    pinned = sorted(os.sched_getaffinity(0)) if not args.no_affinity and hasattr(
        os, "sched_getaffinity") else []
    from tqdm import tqdm
    cases = args.cases.split(",")
    peers = args.peers.split(",")
    for c in cases:
        if c not in CASES:
            ap.error(f"unknown case {c!r} (cases: {', '.join(CASES)})")
    for p in peers:
        if p not in LABELS:
            ap.error(f"unknown peer {p!r} (peers: {', '.join(LABELS)})")
    pythons = {p: peer_python(p, args.bench_python) for p in peers}
    missing = [p for p in peers if p in PEER_MODULE
               and not has_module(pythons[p], PEER_MODULE[p])]
    for p in missing:
        print(f"{p}: {PEER_MODULE[p]} is not installed in {pythons[p]}; not run "
              "(--bench-python names an interpreter that has it)", file=sys.stderr)
    peers = [p for p in peers if p not in missing]
    facts = machine_facts(args, pinned)
    facts["interpreters"] = ", ".join(sorted({f"{LABELS[p]}: {pythons[p]}" for p in peers}))
    if missing:
        facts["not installed, not run"] = ", ".join(LABELS[p] for p in missing)
    warm_imports(peers, pythons)
    raw: dict = {}
    total = args.repeat * sum(1 for c in cases for p in peers if (c, p) not in NOT_RUN)
    with tqdm(total=total, desc="cold workloads", file=sys.stderr) as bar:
        for _ in range(args.repeat):
            for c in cases:
                n = max(1, CASES[c][1] // (10 if args.quick else 1))
                for p, r in run_case(c, peers, n, args, pythons, bar).items():
                    raw.setdefault((c, p), []).append(r)
    rows = {key: _median_row(rs) for key, rs in raw.items()}
    facts["load average at end"] = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    text = report(rows, peers, cases, facts)
    print(text)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "cold_workloads.md"), "w") as f:
            f.write(text)
        with open(os.path.join(args.out, "cold_workloads.json"), "w") as f:
            json.dump([{"case": c, "peer": p, "runs": rs} for (c, p), rs in raw.items()], f,
                      indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
