"""A two-layer MLP trained with Adam on a small nonlinear problem (two concentric rings).

x (2) -> dense 32 + relu -> dense 2 -> sparse softmax cross entropy, mini-batches with
`tf.train.AdamOptimizer` and a global step. A linear model cannot separate the rings; the
hidden layer can. Prints loss and accuracy once per epoch, then the final numbers.
"""
from __future__ import annotations

import argparse

import numpy as np

import jitflow as tf


def make_rings(n: int, rng) -> tuple:
    labels = rng.integers(0, 2, size=n)
    radius = np.where(labels == 0, 1.0, 2.2) + rng.normal(0.0, 0.25, size=n)
    angle = rng.uniform(0.0, 2 * np.pi, size=n)
    xs = np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=1)
    return xs.astype(np.float32), labels.astype(np.int32)


def dense(x, n_in: int, n_out: int, name: str, seed: int):
    with tf.name_scope(name):
        w = tf.Variable(tf.random_normal([n_in, n_out], stddev=np.sqrt(2.0 / n_in), seed=seed),
                        name="w")
        b = tf.Variable(tf.zeros([n_out]), name="b")
        return tf.matmul(x, w) + b


def main(epochs: int = 15, batch_size: int = 64, lr: float = 0.01, hidden: int = 32,
         seed: int = 0, verbose: bool = True) -> dict:
    rng = np.random.default_rng(seed)
    xs, ys = make_rings(1024, rng)

    graph = tf.Graph()
    with graph.as_default():
        tf.set_random_seed(seed)
        x = tf.placeholder(tf.float32, [None, 2], name="x")
        y = tf.placeholder(tf.int32, [None], name="y")
        h = tf.nn.relu(dense(x, 2, hidden, "hidden", seed=1))
        logits = dense(h, hidden, 2, "output", seed=2)
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits),
            name="loss")
        correct = tf.equal(tf.cast(tf.argmax(logits, 1), tf.int32), y)
        accuracy = tf.reduce_mean(tf.cast(correct, tf.float32), name="accuracy")
        global_step = tf.train.get_or_create_global_step()
        train_op = tf.train.AdamOptimizer(lr).minimize(loss, global_step=global_step)
        init = tf.global_variables_initializer()

    losses, accs = [], []
    with tf.Session(graph=graph) as sess:
        sess.run(init)
        l0 = float(sess.run(loss, {x: xs, y: ys}))
        if verbose:
            print(f"before training: loss {l0:.4f}")
        for epoch in range(epochs):
            order = rng.permutation(len(xs))
            for start in range(0, len(xs), batch_size):
                idx = order[start:start + batch_size]
                sess.run(train_op, {x: xs[idx], y: ys[idx]})
            l, a = sess.run([loss, accuracy], {x: xs, y: ys})
            losses.append(float(l))
            accs.append(float(a))
            if verbose:
                print(f"epoch {epoch + 1:3d}  loss {l:.4f}  accuracy {a:.3f}")
        steps = tf.train.global_step(sess, global_step)
    if verbose:
        print(f"final: loss = {losses[-1]:.4f}, accuracy = {accs[-1]:.3f}, steps = {steps}")
    return {"initial_loss": l0, "losses": losses, "accuracy": accs, "steps": steps}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=15)
    args = parser.parse_args()
    main(epochs=args.epochs)
