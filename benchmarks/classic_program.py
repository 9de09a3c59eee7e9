"""A classic TF1 program end to end, in a fresh process with an empty kernel cache: build an
MLP, train it with Adam for a few hundred steps on mini-batches, evaluate accuracy, save a
checkpoint. The same source runs under `import jitflow as tf` and under
`import tensorflow.compat.v1 as tf`; the time includes the import, as a user waits for it.

    python benchmarks/classic_program.py [--steps 300] [--peers jitflow,jitflow-sync,tf1]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from benchmarks import children  # noqa: E402
MARK = "CLASSIC "


def program(tf, steps: int, out_dir: str) -> dict:
    """The user's program (the classic TF1 MNIST-style MLP, on synthetic data)."""
    import numpy as np
    rng = np.random.default_rng(0)
    centers = rng.standard_normal((10, 784)).astype(np.float32)
    labels = rng.integers(0, 10, 6000)
    images = (centers[labels] + rng.standard_normal((6000, 784)).astype(np.float32))
    onehot = np.eye(10, dtype=np.float32)[labels]

    x = tf.placeholder(tf.float32, [None, 784], name="x")
    y = tf.placeholder(tf.float32, [None, 10], name="y")
    w1 = tf.Variable(tf.truncated_normal([784, 128], stddev=0.05, seed=1), name="w1")
    b1 = tf.Variable(tf.zeros([128]), name="b1")
    w2 = tf.Variable(tf.truncated_normal([128, 10], stddev=0.05, seed=2), name="w2")
    b2 = tf.Variable(tf.zeros([10]), name="b2")
    hidden = tf.nn.relu(tf.matmul(x, w1) + b1)
    logits = tf.matmul(hidden, w2) + b2
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits_v2(labels=y, logits=logits))
    train = tf.train.AdamOptimizer(1e-3).minimize(loss)
    correct = tf.equal(tf.argmax(logits, 1), tf.argmax(y, 1))
    accuracy = tf.reduce_mean(tf.cast(correct, tf.float32))
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for step in range(steps):
            k = (step * 64) % 5000
            _, cost = sess.run([train, loss], {x: images[k:k + 64], y: onehot[k:k + 64]})
        acc = sess.run(accuracy, {x: images[5000:], y: onehot[5000:]})
        saver.save(sess, os.path.join(out_dir, "model.ckpt"))
    return {"loss": float(cost), "accuracy": float(acc)}


def child(peer: str, steps: int, out_dir: str) -> dict:
    t0 = time.perf_counter()
    if peer.startswith("jitflow"):
        import jitflow as tf
    else:
        import tensorflow.compat.v1 as tf
        tf.disable_v2_behavior()
    t_import = time.perf_counter() - t0
    res = program(tf, steps, out_dir)
    res.update({"import": t_import, "total": time.perf_counter() - t0,
                "cpu": time.process_time()})
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--peers", default="jitflow,jitflow-sync,tf1")
    ap.add_argument("--child")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    if args.child:
        print(MARK + json.dumps(child(args.child, args.steps, args.out)), flush=True)
        return 0
    from tqdm import tqdm
    rows = {}
    for peer in tqdm(args.peers.split(","), desc="classic program", file=sys.stderr):
        work = tempfile.mkdtemp(prefix="jitflow-classic-")
        try:
            rows[peer] = children.run(
                children.script_cmd(__file__, "--child", peer, "--steps", str(args.steps),
                                    "--out", work),
                children.peer_env(peer, os.path.join(work, "cache")), MARK)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    ref = rows.get("tf1", {}).get("process_wall")
    print(f"classic MLP program, {args.steps} Adam steps + evaluate + save, empty cache:")
    for peer, r in rows.items():
        if "error" in r:
            print(f"  {peer:13s} error: {r['error']}")
            continue
        ratio = f"  {ref / r['process_wall']:.2f}x TF1's speed" if ref else ""
        print(f"  {peer:13s} {r['process_wall']:6.2f} s wall (process), import "
              f"{r['import']:.2f} s, cpu {r['cpu']:.2f} s, loss {r['loss']:.4f}, "
              f"accuracy {r['accuracy']:.3f}{ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
