"""jitflow.dask on 1 and 2 worker processes against one process: predict throughput, and the
per-step cost of fit against one-process training.

    OPENBLAS_NUM_THREADS=1 python benchmarks/dask_scale.py [--rows 2000000] [--quick]

predict: an MLP 64-256-256-10 (float32, softmax) scores `--rows` rows of 64 features held in
chunks of `--chunk` rows. Peers, timed in interleaved rounds so the load of a shared machine
falls on all alike (the median of `--reps` rounds is reported):
- one process: `sess.run(probs, {x: chunk})` in a loop over the chunks, already in memory;
- `jitflow.dask.predict` on a LocalCluster of 1 and of 2 worker processes (one thread each),
  the rows already persisted on the workers (generated there), compiled and warm; timed
  twice: results kept on the workers (`persist`) and gathered into this process (`compute`).
fit: the same MLP with softmax cross-entropy and gradient descent, `--fit-steps` steps at
batch 1,024 and a quarter as many at 32,768: one process running `sess.run(train_op, batch)`
against `jitflow.dask.fit` on each cluster (warm: its gradients compiled on the workers by an
earlier call). Everything runs with one BLAS/OpenMP thread per process; the machine's CPU
count and load average are printed, and the table is written to benchmarks/results/dask_scale.md.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.threads import pin  # noqa: E402

pin()
os.environ.setdefault("JITFLOW_COMPILE", "sync")

import numpy as np  # noqa: E402

FEATURES, HIDDEN, CLASSES = 64, 256, 10


def _block(block_info=None, chunk: int = 0):
    """Chunk i of the data: rows drawn from a generator seeded by i (same on every peer)."""
    i = block_info[None]["chunk-location"][0] if block_info else 0
    rows = block_info[None]["chunk-shape"][0] if block_info else chunk
    return np.random.default_rng(1000 + i).standard_normal((rows, FEATURES), np.float32)


def _labels(xs):
    """One-hot classes of a fixed rule, so the labels need no data of their own."""
    w = np.random.default_rng(99).standard_normal((FEATURES, CLASSES))
    return np.eye(CLASSES, dtype=np.float32)[(xs @ w).argmax(axis=1)]


def _model(tf):
    rng = np.random.default_rng(0)
    x = tf.placeholder(tf.float32, [None, FEATURES], name="x")
    y = tf.placeholder(tf.float32, [None, CLASSES], name="y")
    dims = [FEATURES, HIDDEN, HIDDEN, CLASSES]
    h = x
    for i, (a, b) in enumerate(zip(dims, dims[1:])):
        w = tf.Variable((rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32),
                        name=f"w{i}")
        bias = tf.Variable(np.zeros(b, np.float32), name=f"b{i}")
        h = tf.matmul(h, w) + bias
        if i < len(dims) - 2:
            h = tf.nn.relu(h)
    probs = tf.nn.softmax(h, name="probs")
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits_v2(labels=y, logits=h))
    train = tf.train.GradientDescentOptimizer(0.05).minimize(loss)
    return x, y, probs, loss, train


class _StepClock:
    """Stands in for fit's progress bar: the time of every finished step."""

    def __init__(self) -> None:
        self.times: list = []

    def update(self, n: int = 1) -> None:
        self.times.append(time.perf_counter())

    def set_postfix(self, **kwargs) -> None:
        pass

    def close(self) -> None:
        pass


def _cpu_self() -> float:
    """User + system CPU seconds of the calling process (run on every worker)."""
    import resource
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _median_time(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--chunk", type=int, default=100_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--fit-steps", type=int, default=20)
    ap.add_argument("--quick", action="store_true", help="200k rows, 1 round, 8 fit steps")
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results",
                                                  "dask_scale.md"))
    args = ap.parse_args(argv)
    if args.quick:
        args.rows, args.chunk, args.reps, args.fit_steps = 200_000, 50_000, 1, 8
    os.environ.setdefault("JITFLOW_CACHE_DIR", tempfile.mkdtemp(prefix="jitflow-dask-"))
    import logging

    import dask
    import dask.array as da
    from distributed import Client, LocalCluster, wait
    logging.getLogger("distributed").setLevel(logging.WARNING)

    import jitflow as tf
    import jitflow.dask as jfd

    load_before = os.getloadavg()
    x, y, probs, loss, train = _model(tf)
    sess = tf.Session()
    sess.run(tf.global_variables_initializer())
    n_chunks = -(-args.rows // args.chunk)
    chunks = tuple(min(args.chunk, args.rows - i * args.chunk) for i in range(n_chunks))
    lazy = da.map_blocks(_block, chunks=(chunks, (FEATURES,)), dtype=np.float32,
                         meta=np.empty((0, 0), np.float32))
    local = [_block({None: {"chunk-location": (i, 0), "chunk-shape": (c, FEATURES)}})
             for i, c in enumerate(chunks)]
    gb = args.rows * FEATURES * 4 / 2 ** 30
    print(f"{os.cpu_count()} CPUs, load average {load_before[0]:.2f} {load_before[1]:.2f} "
          f"{load_before[2]:.2f}; {args.rows:,} rows x {FEATURES} float32 ({gb:.2f} GiB) in "
          f"{n_chunks} chunks; MLP {FEATURES}-{HIDDEN}-{HIDDEN}-{CLASSES}")

    def one_process():
        return [sess.run(probs, {x: c}) for c in local]

    want = one_process()                       # compiles; the reference result
    clusters = {}
    for n in (1, 2):
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                               dashboard_address=":0", worker_dashboard_address=None)
        client = Client(cluster, set_as_default=False)
        with client.as_current():
            data = lazy.persist()
            wait(data)
            t0 = time.perf_counter()
            got = jfd.predict(sess, probs, x, data).compute()     # compiles on the workers
            first = time.perf_counter() - t0
        err = float(np.abs(got - np.concatenate(want)).max())
        if err > 1e-4:
            raise SystemExit(f"{n} worker(s): predict differs from sess.run by {err}")
        clusters[n] = (cluster, client, data)
        print(f"{n} worker(s): first predict (compiling) {first:.2f} s, max |diff| {err:.1e}")

    def cpu_seconds(n=None) -> float:
        """CPU time of this process (scheduler included), plus cluster n's workers."""
        total = time.process_time()
        if n is not None:
            total += sum(clusters[n][1].run(_cpu_self).values())
        return total

    def on(n, fn):
        client = clusters[n][1]

        def run():
            with client.as_current():
                return fn(clusters[n][2])
        run.cluster = n
        return run

    def persist(data):
        out = jfd.predict(sess, probs, x, data).persist()
        wait(out)
        del out

    def gather(data):
        return jfd.predict(sess, probs, x, data).compute()

    peers = {"one process (sess.run loop)": one_process,
             "predict, 1 worker (persist)": on(1, persist),
             "predict, 2 workers (persist)": on(2, persist),
             "predict, 2 workers (compute)": on(2, gather)}
    samples = {k: [] for k in peers}
    cpu = {k: [] for k in peers}
    for r in range(args.reps):
        for k, fn in peers.items():
            n = getattr(fn, "cluster", None)
            c0 = cpu_seconds(n)
            samples[k].append(_median_time(fn, 1))
            cpu[k].append(cpu_seconds(n) - c0)
            print(f"  round {r + 1}: {k}: {samples[k][-1]:.3f} s, CPU {cpu[k][-1]:.3f} s "
                  f"(load {os.getloadavg()[0]:.2f})", flush=True)
    base = statistics.median(samples["one process (sess.run loop)"])
    base_cpu = statistics.median(cpu["one process (sess.run loop)"])
    rows_out = []
    for k, ts in samples.items():
        t, c = statistics.median(ts), statistics.median(cpu[k])
        rows_out.append((k, t, args.rows / t, base / t, c, base_cpu / c))

    # -- fit -----------------------------------------------------------------------------------
    # per-step times: the median interval between consecutive steps of one fit call (read off
    # its progress bar, replaced here by a recorder), which leaves out what a call does once
    # (persisting the rows on the workers, shipping the module); one process: the median step
    fit_rows = []
    for batch, steps in ((1024, args.fit_steps), (32768, max(3, args.fit_steps // 4))):
        fx = da.map_blocks(_block, chunks=((batch,) * steps, (FEATURES,)),
                           dtype=np.float32, meta=np.empty((0, 0), np.float32))
        fy = fx.map_blocks(_labels, chunks=(fx.chunks[0], (CLASSES,)), dtype=np.float32)
        xs, ys = dask.compute(fx, fy, scheduler="threads")
        feeds = {x: fx, y: fy}
        sess.run(train, {x: xs[:batch], y: ys[:batch]})          # compile the one-process step
        single = []
        for s in range(steps):
            t0 = time.perf_counter()
            sess.run(train, {x: xs[s * batch:(s + 1) * batch], y: ys[s * batch:(s + 1) * batch]})
            single.append(time.perf_counter() - t0)
        entry = {"batch": batch, "steps": steps, "one process": statistics.median(single)}
        for n in (1, 2):
            client = clusters[n][1]
            with client.as_current():
                jfd.fit(sess, train, loss, {t: a[:batch] for t, a in feeds.items()},
                        batch_size=batch, progress=False)            # compile on the workers
                marks = _StepClock()
                real, jfd._progress = jfd._progress, lambda total, enabled, m=marks: m
                try:
                    t0 = time.perf_counter()
                    jfd.fit(sess, train, loss, feeds, batch_size=batch)
                    entry[f"{n} call"] = time.perf_counter() - t0
                finally:
                    jfd._progress = real
                entry[f"{n} step"] = statistics.median(np.diff(marks.times))
        print(f"  fit, batch {batch}: " + ", ".join(
            f"{k} {v * 1e3:.1f} ms" if isinstance(v, float) else f"{k} {v}"
            for k, v in entry.items()), flush=True)
        fit_rows.append(entry)

    load_after = os.getloadavg()
    for cluster, client, _ in clusters.values():
        client.close()
        cluster.close()

    lines = [f"# jitflow.dask scaling ({time.strftime('%Y-%m-%d %H:%M')})", "",
             f"{os.cpu_count()} CPUs; load average before {load_before[0]:.2f} / after "
             f"{load_after[0]:.2f} (1 min); one BLAS/OpenMP thread per process; "
             f"JITFLOW_COMPILE={os.environ['JITFLOW_COMPILE']}; dask {dask.__version__}", "",
             f"## predict: {args.rows:,} rows x {FEATURES} float32, {n_chunks} chunks of "
             f"{args.chunk:,}, MLP {FEATURES}-{HIDDEN}-{HIDDEN}-{CLASSES}, median of "
             f"{args.reps}", "",
             "CPU: seconds of CPU used by this process (which also runs the scheduler) and the "
             "cluster's workers during the call; one-process CPU / that CPU is the share of "
             "the work that is the computation itself, which bounds what n workers can gain on "
             "n idle cores (n x that share).", "",
             "| peer | time (s) | rows/s | x one process | CPU (s) | one-process CPU / CPU |",
             "|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {k} | {t:.3f} | {r:,.0f} | {ratio:.2f} | {c:.3f} | {cr:.2f} |"
              for k, t, r, ratio, c, cr in rows_out]
    lines += ["", "## fit: per-step time, gradient descent (median step of one call)", "",
              "On a cluster: the median interval between consecutive steps of a warm fit call; "
              "in brackets, the whole call divided by its steps (it also persists the rows on "
              "the workers and ships the module).", "",
              "| batch | steps | one process (ms) | 1 worker (ms) | 2 workers (ms) | 2 workers x "
              "one process |", "|---:|---:|---:|---:|---:|---:|"]
    for e in fit_rows:
        lines.append(f"| {e['batch']:,} | {e['steps']} | {e['one process'] * 1e3:.1f} | "
                     f"{e['1 step'] * 1e3:.1f} ({e['1 call'] / e['steps'] * 1e3:.1f}) | "
                     f"{e['2 step'] * 1e3:.1f} ({e['2 call'] / e['steps'] * 1e3:.1f}) | "
                     f"{e['one process'] / e['2 step']:.2f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.quick:
        os.makedirs(os.path.dirname(args.out), exist_ok=True)
        tmp = args.out + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
