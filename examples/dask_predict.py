"""Score a trained MLP over a Dask array larger than one chunk with `jitflow.dask.predict`.

Trains a 3-class MLP (16 features, 32 hidden units) with Adam in this process, then scores
200,000 rows held as a Dask array of 25,000-row chunks on a dask.distributed cluster of two
worker processes (its dashboard address is printed), checks the scores against one
`sess.run` on the same rows and reports the accuracy, reduced on the cluster. The workers get
an export of the scoring signature (module, variables, manifest), compile it once each, and
score their chunks with it.

    python examples/dask_predict.py             # a LocalCluster of 2 workers
    python examples/dask_predict.py --threads   # Dask's local threaded scheduler
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import jitflow as tf


def _truth(n_features: int) -> np.ndarray:
    return np.random.default_rng(42).standard_normal((n_features, 3)).astype(np.float32)


def _labels(xs, w_true):
    """The rule the model learns: the class whose column of w_true scores a row highest."""
    return (xs @ w_true).argmax(axis=1)


def main(rows: int = 200_000, chunk: int = 25_000, steps: int = 300, threads: bool = False,
         verbose: bool = True) -> dict:
    try:
        import dask
        import dask.array as da

        import jitflow.dask as jfd
    except ImportError:
        print("this example needs Dask: pip install 'jitflow[dask]'")
        return {}
    from tqdm import tqdm

    n_features = 16
    w_true = _truth(n_features)
    rng = np.random.default_rng(0)
    graph = tf.Graph()
    with graph.as_default():
        x = tf.placeholder(tf.float32, [None, n_features], name="x")
        y = tf.placeholder(tf.int64, [None], name="y")
        h = tf.layers.dense(x, 32, activation=tf.nn.relu, name="hidden")
        logits = tf.layers.dense(h, 3, name="logits")
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y,
                                                                              logits=logits))
        train = tf.train.AdamOptimizer(0.01).minimize(loss)
        probs = tf.nn.softmax(logits, name="probs")
        label = tf.argmax(logits, axis=1, name="label")
        init = tf.global_variables_initializer()

    client = cluster = None
    with tf.Session(graph=graph) as sess:
        sess.run(init)
        bar = tqdm(range(steps), desc="training", unit="step", disable=not verbose)
        for _ in bar:
            xs = rng.standard_normal((256, n_features)).astype(np.float32)
            _, l = sess.run([train, loss], {x: xs, y: _labels(xs, w_true)})
            bar.set_postfix(loss=f"{l:.4f}", refresh=False)

        if not threads:
            from distributed import Client, LocalCluster
            cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                   dashboard_address=":0")
            client = Client(cluster)
            if verbose:
                print(f"dask.distributed cluster: 2 worker processes; dashboard at "
                      f"{client.dashboard_link}")
        elif verbose:
            print("Dask's local threaded scheduler (no cluster)")
        try:
            data = da.random.RandomState(7).standard_normal((rows, n_features),
                                                            chunks=(chunk, n_features))
            data = data.astype(np.float32)
            t0 = time.perf_counter()
            p, lab = jfd.predict(sess, [probs, label], x, data)
            truth = data.map_blocks(_labels, w_true, drop_axis=1, dtype=np.int64)
            accuracy = (lab == truth).mean()
            # one compute: the rows are generated once, on the workers
            scores, labels, acc, xs_all = dask.compute(p, lab, accuracy, data)
            elapsed = time.perf_counter() - t0
        finally:
            if client is not None:
                client.close()
                cluster.close()
        want_p, want_l = sess.run([probs, label], {x: xs_all})
    max_diff = float(np.abs(scores - want_p).max())
    agree = float((labels == want_l).mean())
    if verbose:
        print(f"scored {rows:,} rows in {data.numblocks[0]} chunks of {chunk:,} in "
              f"{elapsed:.2f} s (generating the rows and compiling on the workers included)")
        print(f"against one sess.run on the same rows: max |difference| {max_diff:.2e}, "
              f"labels agree on {agree:.4%}")
        print(f"accuracy against the true rule: {float(acc):.4f}")
    return {"max_diff": max_diff, "agree": agree, "accuracy": float(acc), "rows": rows,
            "chunks": data.numblocks[0], "shape": scores.shape}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", action="store_true",
                        help="Dask's local threaded scheduler instead of a LocalCluster")
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--chunk", type=int, default=25_000)
    args = parser.parse_args()
    main(rows=args.rows, chunk=args.chunk, threads=args.threads)
