"""Soak test (not run in CI): `make soak [SOAK_MINUTES=20]`, or

    python benchmarks/soak.py --minutes 20 [--seed N] [--dir DIR]

For a fixed time it loops over three kinds of work and counts what goes wrong:

- random programs (the fuzzer's generator, tests/fuzz) checked compiled == interpreter;
- threads sharing one session, running a small training graph and inference concurrently
  (inference results must equal the single-threaded ones bit for bit);
- a child process that trains and calls `Saver.save` after every step, `kill -9`ed at a random
  moment: the latest checkpoint must restore cleanly, to exactly the values the child had when
  it started that save, and after the next save no temporary file may remain.

The in-memory kernel cache is kept small (--memory-entries) so that kernels are evicted while
sessions use them. Prints a line of counts every --report-every seconds and a summary; exits 1
if any check failed.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = os.path.join(ROOT, "tests")


# -- the training program (child process, and the parent's restore check) -------------------
def train_graph(tf):
    """A small MLP with Adam (weights, slots, powers: about 1 MB of checkpoint)."""
    x = tf.placeholder(tf.float32, [None, 16], name="x")
    y = tf.placeholder(tf.float32, [None, 1], name="y")
    w0 = tf.Variable(tf.random_normal([16, 256], stddev=0.1, seed=1), name="w0")
    w1 = tf.Variable(tf.random_normal([256, 256], stddev=0.1, seed=2), name="w1")
    w2 = tf.Variable(tf.zeros([256, 1]), name="w2")
    h = tf.tanh(tf.matmul(tf.tanh(tf.matmul(x, w0)), w1))
    loss = tf.reduce_mean(tf.square(tf.matmul(h, w2) - y), name="loss")
    train = tf.train.AdamOptimizer(0.01).minimize(loss)
    return x, y, loss, train


def batch(np, seed: int, step: int):
    rng = np.random.default_rng([seed, step])
    xs = rng.standard_normal((32, 16)).astype(np.float32)
    return xs, np.sin(xs.sum(axis=1, keepdims=True)).astype(np.float32)


def digest(tf, sess) -> str:
    """sha256 of every global variable's bytes, in name order."""
    variables = sorted(tf.global_variables(), key=lambda v: v.op.name)
    h = hashlib.sha256()
    for v, value in zip(variables, sess.run(variables)):
        h.update(v.op.name.encode())
        h.update(value.tobytes())
    return h.hexdigest()[:16]


def child_main(folder: str, seed: int) -> int:
    """Resume from the latest checkpoint in `folder`; train, saving after every step.

    Prints `ready <step>`, then per step `saving <step> <digest>` before the save starts and
    `saved <step>` when it has returned."""
    import numpy as np

    import jitflow as tf
    x, y, loss, train = train_graph(tf)
    saver = tf.train.Saver(max_to_keep=3)
    prefix = os.path.join(folder, "model")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        step = 0
        latest = tf.train.latest_checkpoint(folder)
        if latest:
            saver.restore(sess, latest)
            step = int(latest.rsplit("-", 1)[1])
            saver.recover_last_checkpoints(
                tf.train.get_checkpoint_state(folder).all_model_checkpoint_paths)
        print(f"ready {step}", flush=True)
        while True:
            xs, ys = batch(np, seed, step)
            sess.run([loss, train], {x: xs, y: ys})
            step += 1
            print(f"saving {step} {digest(tf, sess)}", flush=True)
            saver.save(sess, prefix, global_step=step, write_meta_graph=step % 5 == 0)
            print(f"saved {step}", flush=True)


# -- the soak -----------------------------------------------------------------------------------
class Soak:
    def __init__(self, args) -> None:
        self.args = args
        self.counts = {"graphs": 0, "mismatches": 0, "thread_runs": 0, "saves": 0,
                       "kills": 0, "restores": 0, "orphan_temps": 0, "failures": 0}
        self.lock = threading.Lock()
        self.seed = args.seed
        self.digests: dict = {}   # checkpoint step -> digest the child printed

    def count(self, key: str, n: int = 1) -> None:
        with self.lock:
            self.counts[key] += n

    def fail(self, what: str, detail: str = "") -> None:
        self.count("failures")
        print(f"FAILURE: {what}" + (f"\n{detail.rstrip()}" if detail else ""), flush=True)

    # -- random programs -------------------------------------------------------------------
    def check_one_program(self) -> None:
        from fuzz.generator import generate
        from fuzz.runner import check
        seed = self.seed
        self.seed += 1
        try:
            msg = check(generate(seed, self.args.max_ops))
        except Exception:  # noqa: BLE001  (a harness error is a failure to report)
            self.fail(f"fuzz seed {seed}: harness error", traceback.format_exc())
            return
        self.count("graphs")
        if msg is not None:
            self.count("mismatches")
            head = "\n".join(msg.splitlines()[:12])
            print(f"MISMATCH: fuzz seed {seed} (reproduce: cd tests && python -m fuzz -n 1 "
                  f"--start {seed})\n{head}", flush=True)

    # -- threads sharing a session ---------------------------------------------------------
    def setup_threads(self) -> None:
        import numpy as np

        import jitflow as tf
        g = tf.Graph()
        with g.as_default():
            x = tf.placeholder(tf.float32, [None, 8], name="x")
            w = tf.Variable(np.linspace(-1, 1, 64, dtype=np.float32).reshape(8, 8), name="w")
            pred = tf.reduce_sum(tf.tanh(tf.matmul(x, w)) * 0.5, axis=1)
            tx, ty, loss, train = train_graph(tf)
            sess = tf.Session(graph=g)
            sess.run(tf.global_variables_initializer())
        rng = np.random.default_rng(0)
        inputs = [rng.standard_normal((n, 8)).astype(np.float32) for n in (1, 3, 16, 1, 7)]
        for a in inputs:   # first runs may use the references while the kernels compile
            sess.run(pred, {x: a})
        from jitflow.backends.numba_cpu import background
        background.wait_idle(600)
        # the native kernels' answers; a run may also be on the references (the first run of a
        # kernel evicted from the small memory cache), which round differently: a race shows
        # as far more than rounding
        want = [sess.run(pred, {x: a}) for a in inputs]
        self.shared = (sess, x, pred, tx, ty, loss, train, inputs, want)

    def thread_burst(self, seconds: float, n_threads: int = 4) -> None:
        import numpy as np
        sess, x, pred, tx, ty, loss, train, inputs, want = self.shared
        end = time.monotonic() + seconds
        runner = sess.make_callable(pred, [x])

        def infer(k: int) -> None:
            i = k
            while time.monotonic() < end:
                j = i % len(inputs)
                got = runner(inputs[j]) if i % 2 else sess.run(pred, {x: inputs[j]})
                self.count("thread_runs")
                if not np.allclose(got, want[j], rtol=1e-5, atol=1e-6):
                    self.fail(f"thread {k}: inference on a shared session differs",
                              f"got {got}\nwant {want[j]}")
                    return
                i += 1

        def learn(k: int) -> None:
            step = 0
            while time.monotonic() < end:
                xs, ys = batch(np, 1000 + k, step)
                n = 1 + step % 32
                value = sess.run([loss, train], {tx: xs[:n], ty: ys[:n]})[0]
                self.count("thread_runs")
                if not np.isfinite(value):
                    self.fail(f"thread {k}: training loss is {value}")
                    return
                step += 1

        def guarded(fn, k):
            try:
                fn(k)
            except Exception:  # noqa: BLE001
                self.fail(f"thread {k} raised", traceback.format_exc())

        threads = [threading.Thread(target=guarded, args=(infer if k % 2 else learn, k))
                   for k in range(n_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    # -- kill -9 during Saver.save ---------------------------------------------------------
    def start_child(self) -> tuple:
        env = dict(os.environ)
        env.pop("JITFLOW_POISON", None)
        # every step on native code: a resumed child must compute the earlier child's values
        # bit for bit, which a first step run on the references (background mode) would not
        env["JITFLOW_COMPILE"] = "sync"
        proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child",
                                 self.folder, "--seed", str(self.args.seed)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env)
        lines: list = []
        training = threading.Event()   # the first step ran: its kernel is compiled

        def read() -> None:
            for line in proc.stdout:
                lines.append(line.split())
                if line.startswith("saving"):
                    training.set()
            training.set()

        def kill() -> None:
            training.wait()
            time.sleep(random.uniform(0.05, self.args.max_kill_delay))
            if proc.poll() is None:
                proc.kill()     # SIGKILL: no cleanup of any kind
                self.count("kills")

        for fn in (read, kill):
            threading.Thread(target=fn, daemon=True).start()
        return proc, lines

    def verify_after_kill(self, proc, lines) -> None:
        import numpy as np  # noqa: F401  (train_graph needs jitflow's numpy-backed ops)

        import jitflow as tf
        err = proc.stderr.read()
        if proc.returncode != -9:
            self.fail(f"training child exited with {proc.returncode}, not by kill -9", err)
            return
        saved = [int(p[1]) for p in lines if p and p[0] == "saved"]
        for p in lines:
            if p and p[0] == "saving":
                step, d = int(p[1]), p[2]
                if self.digests.get(step, d) != d:
                    self.fail(f"step {step}: a resumed child computed other values ({d}) than "
                              f"the earlier one ({self.digests[step]})")
                self.digests[step] = d
        self.count("saves", len(saved))
        folder = self.folder
        latest = tf.train.latest_checkpoint(folder)
        if latest is None:
            if saved or self.digests:
                self.fail("no restorable checkpoint after the kill, though saves completed")
            return
        step = int(latest.rsplit("-", 1)[1])
        if saved and step < max(saved):
            self.fail(f"latest checkpoint is step {step}; step {max(saved)} was saved")
        g = tf.Graph()
        with g.as_default():
            train_graph(tf)
            saver = tf.train.Saver(max_to_keep=3)
            with tf.Session() as sess:
                try:
                    saver.restore(sess, latest)
                except Exception:  # noqa: BLE001
                    self.fail(f"restoring {latest} after kill -9 failed", traceback.format_exc())
                    return
                self.count("restores")
                got = digest(tf, sess)
                if got != self.digests.get(step):
                    self.fail(f"{latest} restored values {got}, the child saved "
                              f"{self.digests.get(step)}")
                orphans = [f for f in os.listdir(folder) if f.endswith(".tmp")]
                self.count("orphan_temps", len(orphans))
                state = tf.train.get_checkpoint_state(folder)
                saver.recover_last_checkpoints(state.all_model_checkpoint_paths)
                saver.save(sess, os.path.join(folder, "model"), global_step=step)
                self.count("saves")
                left = [f for f in os.listdir(folder) if f.endswith(".tmp")]
                if left:
                    self.fail("temporary files remain after the next save", "\n".join(left))

    # -- the loop --------------------------------------------------------------------------
    def report(self, t0: float, final: bool = False) -> None:
        c = self.counts
        elapsed = time.monotonic() - t0
        print(f"{'summary' if final else 'soak'} {elapsed / 60:5.1f} min: "
              f"{c['graphs']} graphs checked, {c['mismatches']} mismatches, "
              f"{c['thread_runs']} thread runs, {c['saves']} saves, {c['kills']} kills, "
              f"{c['restores']} restores, {c['orphan_temps']} orphan temp files, "
              f"{c['failures']} failures", flush=True)

    def run(self) -> int:
        self.folder = tempfile.mkdtemp(prefix="jitflow-soak-ckpt-", dir=self.args.dir)
        print(f"soak for {self.args.minutes} min; fuzz seeds from {self.seed}; checkpoints in "
              f"{self.folder}", flush=True)
        t0 = time.monotonic()
        deadline = t0 + self.args.minutes * 60
        last_report = t0
        self.setup_threads()
        try:
            while time.monotonic() < deadline:
                proc, lines = self.start_child()
                while proc.poll() is None:
                    if time.monotonic() >= deadline + 30:
                        proc.kill()
                        self.count("kills")
                        break
                    self.check_one_program()
                proc.wait()
                self.verify_after_kill(proc, lines)
                self.thread_burst(self.args.thread_seconds)
                if time.monotonic() - last_report >= self.args.report_every:
                    self.report(t0)
                    last_report = time.monotonic()
        finally:
            if getattr(self, "shared", None):
                self.shared[0].close()
            shutil.rmtree(self.folder, ignore_errors=True)
        self.report(t0, final=True)
        return 1 if self.counts["failures"] or self.counts["mismatches"] else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=20.0)
    ap.add_argument("--seed", type=int, default=None,
                    help="first fuzz seed (default: from the clock; printed)")
    ap.add_argument("--max-ops", type=int, default=12)
    ap.add_argument("--thread-seconds", type=float, default=2.0)
    ap.add_argument("--max-kill-delay", type=float, default=2.5)
    ap.add_argument("--memory-entries", type=int, default=64,
                    help="JITFLOW_MEMORY_CACHE_ENTRIES for this process (small: evictions)")
    ap.add_argument("--report-every", type=float, default=30.0)
    ap.add_argument("--dir", default=None, help="where to put the checkpoint folder")
    ap.add_argument("--child", metavar="FOLDER", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.seed is None:
        args.seed = int(time.time()) % 1_000_000 * 1000
    if args.child:
        return child_main(args.child, args.seed)
    # the fuzzer's settings: poisoned allocations, code generation bugs raise
    os.environ.setdefault("JITFLOW_POISON", "1")
    os.environ.setdefault("JITFLOW_STRICT", "1")
    os.environ["JITFLOW_MEMORY_CACHE_ENTRIES"] = str(args.memory_entries)
    if TESTS not in sys.path:
        sys.path.insert(0, TESTS)
    import warnings
    warnings.simplefilter("ignore")
    return Soak(args).run()


if __name__ == "__main__":
    sys.exit(main())
