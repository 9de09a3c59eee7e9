"""Compile scaling: time from a new graph to its first result, 10 to 1,000+ ops, each peer in a
fresh process.

    python benchmarks/compile_scaling.py [--sizes 10,50,200,1000] [--peers jitflow,tf1,jax]
        (jitflow peers: jitflow (the default mode, auto), jitflow-sync, jitflow-quick,
        jitflow-numba, jitflow-cached)
                                         [--modes forward,train] [--out DIR]

The graph is a random mix, from one seed, of elementwise ops, `tanh(matmul(h, W))` with 64x64
weights and row reductions (`tanh(h - reduce_mean(h, 1, keepdims=True))`) over a [64, 64]
batch; "train" adds gradients and an Adam step. The same program is built through
`jitflow`, `tensorflow.compat.v1` and `jax.numpy`. Each child imports its peer (timed apart),
builds the graph and runs it once; it prints one line `SCALING {json}` with the CPU seconds and
wall seconds of build + first result (CPU of the whole process, so the compiler thread counts).
jitflow is measured in each JITFLOW_COMPILE mode: "jitflow" (auto: the first result on quick
code, then runs until the compiler thread has given every kernel its optimized code, and
when), "jitflow-sync" (the first result on optimized code), "jitflow-quick" (quick code only),
"jitflow-numba" (Numba kernels), each with its warm run time; and "jitflow-cached" (a second
process in the default mode, on the kernel cache a sync process filled). Children get an empty
private JITFLOW_CACHE_DIR and NUMBA_CACHE_DIR; OPENBLAS_NUM_THREADS=1 everywhere.
`benchmarks/cold_workloads.py` times whole workloads (every step) the same way.
"""
from __future__ import annotations

import time

T0 = time.perf_counter()
C0 = time.process_time()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks import children  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARK = "SCALING "
WIDTH = 64


# -- the program --------------------------------------------------------------------------------
def program(n_ops: int, seed: int = 0) -> list:
    """A list of steps, each adding about the given number of graph ops; plain data."""
    rng = np.random.default_rng(seed)
    steps, count, n_live, n_w = [], 0, 1, 0
    while count < n_ops:
        r = rng.random()
        i = int(rng.integers(max(0, n_live - 6), n_live))
        if r < 0.2:
            steps.append(("matmul_tanh", i, n_w))
            n_w += 1
            count += 2
        elif r < 0.35:
            steps.append(("row", i))
            count += 3
        elif r < 0.65:
            steps.append(("unary", str(rng.choice(["tanh", "sigmoid", "relu", "neg", "sin"])), i))
            count += 1
        else:
            j = int(rng.integers(max(0, n_live - 6), n_live))
            steps.append(("binary", str(rng.choice(["avg", "gate", "max"])), i, j))
            count += 2
        n_live += 1
    return steps


def n_weights(steps: list) -> int:
    return sum(1 for s in steps if s[0] == "matmul_tanh")


def forward(m, x, weights, steps: list, graph_ops: bool):
    """Build the program with module `m` (tf-like: graph_ops, else jax.numpy)."""
    vals = [x]
    for s in steps:
        kind = s[0]
        if kind == "matmul_tanh":
            y = m.tanh(m.matmul(vals[s[1]], weights[s[2]]))
        elif kind == "row":
            h = vals[s[1]]
            if graph_ops:
                y = m.tanh(h - m.reduce_mean(h, 1, keepdims=True))
            else:
                y = m.tanh(h - m.mean(h, 1, keepdims=True))
        elif kind == "unary":
            fn = s[1]
            h = vals[s[2]]
            if fn == "relu":
                y = m.nn.relu(h) if graph_ops else m.maximum(h, 0.0)
            elif fn == "sigmoid":
                y = m.sigmoid(h) if graph_ops else 1.0 / (1.0 + m.exp(-h))
            elif fn == "neg":
                y = -h
            else:
                y = getattr(m, fn)(h)
        else:
            fn, a, b = s[1], vals[s[2]], vals[s[3]]
            if fn == "avg":
                y = (a + b) * 0.5
            elif fn == "gate":
                y = a * (m.sigmoid(b) if graph_ops else 1.0 / (1.0 + m.exp(-b)))
            else:
                y = m.maximum(a, b)
        vals.append(y)
    mean = m.reduce_mean if graph_ops else m.mean
    loss = mean(m.square(vals[-1]))
    # every weight reaches the loss, so training updates all of them
    for s, v in zip(steps, vals[1:]):
        if s[0] == "matmul_tanh":
            loss = loss + mean(v)
    return loss


def _data(steps):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((WIDTH, WIDTH)).astype(np.float32)
    ws = [(rng.standard_normal((WIDTH, WIDTH)) / 8).astype(np.float32)
          for _ in range(n_weights(steps))]
    return x, ws


# -- children -----------------------------------------------------------------------------------
def _graph_child(tf, steps, train: bool, cached_probe=None, warm: bool = False) -> dict:
    xv, wv = _data(steps)
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, WIDTH], name="x")
        ws = [tf.Variable(w, name=f"w{k}") for k, w in enumerate(wv)]
        n0 = len(g.get_operations())
        loss = forward(tf, x, ws, steps, True)
        fetch = loss
        if train:
            opt = tf.train.AdamOptimizer(1e-3)
            step = opt.minimize(loss) if ws else tf.no_op()
            fetch = [loss, step]
        n_ops = len(g.get_operations()) - n0
        init = tf.global_variables_initializer()
        sess = tf.Session(graph=g)
        sess.run(init)
        t1, c1 = time.perf_counter(), time.process_time()
        first = sess.run(fetch, {x: xv})
        t2, c2 = time.perf_counter(), time.process_time()
        out = {"ops": n_ops, "first_wall": t2 - t1, "first_cpu": c2 - c1,
               "value": float(np.asarray(first[0] if train else first))}
        if cached_probe is not None:
            out.update(cached_probe(sess, fetch, x, xv, t1))
        elif warm:
            # the warm run time of the code the first result ran on (sync: optimized code,
            # quick: quick code, numba: Numba kernels): the median of 20 runs after 3 more
            for _ in range(3):
                sess.run(fetch, {x: xv})
            times = []
            for _ in range(20):
                t = time.perf_counter()
                sess.run(fetch, {x: xv})
                times.append(time.perf_counter() - t)
            out["warm_run_s"] = float(np.median(times))
        return out


def _jitflow_probe(sess, fetch, x, xv, t1):
    """Keep running until the compiler thread is idle (every kernel on its optimized code);
    report when that happened and the warm run time then."""
    from jitflow.backends.numba_cpu import background, llvmjit
    deadline = time.perf_counter() + 600
    runs = 1
    while background.pending() and time.perf_counter() < deadline:
        sess.run(fetch, {x: xv})
        runs += 1
    t = time.perf_counter() - t1
    cpu = time.process_time() - C_AFTER_IMPORT
    times = []
    for _ in range(5):
        t_run = time.perf_counter()
        sess.run(fetch, {x: xv})
        times.append(time.perf_counter() - t_run)
    return {"compiled_wall": t, "compiled_cpu": cpu, "runs_until_compiled": runs,
            "quick_built": llvmjit.STATS.get("quick", 0),
            "opt_built": llvmjit.STATS.get("opt", 0),
            "objects_loaded": llvmjit.STATS.get("objects_loaded", 0),
            "warm_run_s": float(np.median(times))}


def _jax_child(steps, train: bool) -> dict:
    import jax
    import jax.numpy as jnp
    xv, wv = _data(steps)
    ws = [jnp.asarray(w) for w in wv]
    t1, c1 = time.perf_counter(), time.process_time()

    def loss_fn(ws, x):
        return forward(jnp, x, ws, steps, False)

    if not train:
        fn = jax.jit(loss_fn)
        first = fn(ws, xv).block_until_ready()
    else:
        def adam(ws, m, v, t, x):
            loss, gs = jax.value_and_grad(loss_fn)(ws, x)
            t = t + 1
            lr_t = 1e-3 * jnp.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)
            m = [0.9 * a + 0.1 * g for a, g in zip(m, gs)]
            v = [0.999 * a + 0.001 * g * g for a, g in zip(v, gs)]
            ws = [w - lr_t * a / (jnp.sqrt(b) + 1e-8) for w, a, b in zip(ws, m, v)]
            return loss, ws, m, v, t

        fn = jax.jit(adam)
        zeros = [jnp.zeros_like(w) for w in ws]
        first = fn(ws, zeros, zeros, 0.0, xv)[0].block_until_ready()
    t2, c2 = time.perf_counter(), time.process_time()
    return {"first_wall": t2 - t1, "first_cpu": c2 - c1, "value": float(first)}


C_AFTER_IMPORT = 0.0


def child(peer: str, n: int, train: bool) -> dict:
    global C_AFTER_IMPORT
    steps = program(n)
    if peer.startswith("jitflow"):
        import jitflow as tf
    elif peer == "tf1":
        import tensorflow.compat.v1 as tf
        tf.disable_v2_behavior()
    else:
        import jax  # noqa: F401
        tf = None
    t_import = time.perf_counter() - T0
    C_AFTER_IMPORT = time.process_time()
    if peer == "jax":
        out = _jax_child(steps, train)
    else:
        probe = _jitflow_probe if peer == "jitflow" else None
        out = _graph_child(tf, steps, train, probe, warm=peer == "jitflow-warm")
    out.update({"import_wall": t_import, "total_wall": time.perf_counter() - T0,
                "total_cpu": time.process_time() - C0})
    return out


# -- parent -------------------------------------------------------------------------------------
def run_child(peer: str, n: int, train: bool, cache_dir: str, timeout: float) -> dict:
    env = children.peer_env(peer, cache_dir, NUMBA_CACHE_DIR=os.path.join(cache_dir, "numba"),
                            JAX_PLATFORMS="cpu")
    # the modes that compile once (sync, quick, numba) measure their warm runs too; the
    # default mode runs until its optimized code is in (the probe)
    child_peer = "jitflow-warm" if peer in children.MODES else peer
    cmd = children.script_cmd(__file__, "--child", child_peer, "--n", str(n)) + (
        ["--train"] if train else [])
    return children.run(cmd, env, MARK, timeout)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child")
    ap.add_argument("--n", type=int, default=10)
    ap.add_argument("--train", action="store_true")
    ap.add_argument("--sizes", default="10,50,200,1000")
    ap.add_argument("--modes", default="forward,train")
    ap.add_argument("--peers", default="jitflow,jitflow-sync,jitflow-cached,tf1,jax")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--out", help="also write the table (markdown) and raw json here")
    args = ap.parse_args(argv)
    if args.child:
        print(MARK + json.dumps(child(args.child, args.n, args.train)), flush=True)
        return 0
    from tqdm import tqdm
    sizes = [int(s) for s in args.sizes.split(",")]
    modes = args.modes.split(",")
    peers = args.peers.split(",")
    jobs = [(mode, n, peer) for mode in modes for n in sizes for peer in peers]
    rows = []
    with tqdm(jobs, desc="compile scaling", file=sys.stderr) as bar:
        for mode, n, peer in bar:
            bar.set_postfix_str(f"{mode} {n} {peer}")
            cache = tempfile.mkdtemp(prefix="jitflow-scaling-")
            try:
                if peer == "jitflow-cached":
                    run_child("jitflow-sync", n, mode == "train", cache, args.timeout)
                    r = run_child("jitflow", n, mode == "train", cache, args.timeout)
                else:
                    r = run_child(peer, n, mode == "train", cache, args.timeout)
            finally:
                shutil.rmtree(cache, ignore_errors=True)
            rows.append({"mode": mode, "n": n, "peer": peer, **r})
    text = table(rows, peers)
    print(text)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "compile_scaling.md"), "w") as f:
            f.write(text)
        with open(os.path.join(args.out, "compile_scaling.json"), "w") as f:
            json.dump(rows, f, indent=1)
    return 0


def _cell(r: dict) -> str:
    if "error" in r:
        return "error: " + r["error"][:60]
    s = f"{r['first_cpu']:.2f} cpu / {r['first_wall']:.2f} wall"
    if "compiled_wall" in r and r.get("runs_until_compiled", 1) > 1:
        s += f"; compiled at {r['compiled_wall']:.2f} wall"
    if "warm_run_s" in r:
        s += f"; warm run {r['warm_run_s'] * 1e3:.2f} ms"
    return s


def table(rows: list, peers: list) -> str:
    lines = ["| graph | ops | " + " | ".join(peers) + " | jitflow / jax (first result, wall) |",
             "|---|---|" + "---|" * (len(peers) + 1)]
    keys = sorted({(r["mode"], r["n"]) for r in rows}, key=lambda k: (k[0], k[1]))
    for mode, n in keys:
        by = {r["peer"]: r for r in rows if r["mode"] == mode and r["n"] == n}
        ops = next((r["ops"] for r in by.values() if "ops" in r), "")
        ratio = ""
        s, j = by.get("jitflow", {}), by.get("jax", {})
        if "first_wall" in s and "first_wall" in j:
            ratio = f"{s['first_wall'] / j['first_wall']:.2f}"
        lines.append(f"| {mode} {n} | {ops} | "
                     + " | ".join(_cell(by[p]) if p in by else "" for p in peers)
                     + f" | {ratio} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
