"""Softmax (multinomial logistic) regression on three synthetic Gaussian blobs.

A linear model `logits = x @ W + b` trained with softmax cross entropy and
`tf.train.GradientDescentOptimizer` on mini-batches. Prints the loss and accuracy once per
epoch, then the final numbers.
"""
from __future__ import annotations

import argparse

import numpy as np

import jitflow as tf


def make_data(n_per_class: int, rng) -> tuple:
    centers = np.array([[0.0, 2.0], [-2.0, -1.0], [2.0, -1.0]])
    xs = np.concatenate([c + rng.normal(0.0, 1.2, size=(n_per_class, 2)) for c in centers])
    labels = np.repeat(np.arange(3), n_per_class)
    order = rng.permutation(len(xs))
    onehot = np.eye(3)[labels[order]]
    return xs[order].astype(np.float32), onehot.astype(np.float32)


def main(epochs: int = 15, batch_size: int = 50, lr: float = 0.5, seed: int = 0,
         verbose: bool = True) -> dict:
    rng = np.random.default_rng(seed)
    xs, ys = make_data(200, rng)

    graph = tf.Graph()
    with graph.as_default():
        x = tf.placeholder(tf.float32, [None, 2], name="x")
        y = tf.placeholder(tf.float32, [None, 3], name="y")
        W = tf.Variable(tf.zeros([2, 3]), name="W")
        b = tf.Variable(tf.zeros([3]), name="b")
        logits = tf.matmul(x, W) + b
        loss = tf.reduce_mean(
            tf.nn.softmax_cross_entropy_with_logits_v2(labels=y, logits=logits), name="loss")
        correct = tf.equal(tf.argmax(logits, 1), tf.argmax(y, 1))
        accuracy = tf.reduce_mean(tf.cast(correct, tf.float32), name="accuracy")
        train_op = tf.train.GradientDescentOptimizer(lr).minimize(loss)
        init = tf.global_variables_initializer()

    losses, accs = [], []
    with tf.Session(graph=graph) as sess:
        sess.run(init)
        l0 = float(sess.run(loss, {x: xs, y: ys}))
        if verbose:
            print(f"before training: loss {l0:.4f}")
        for epoch in range(epochs):
            for start in range(0, len(xs), batch_size):
                sess.run(train_op, {x: xs[start:start + batch_size],
                                    y: ys[start:start + batch_size]})
            l, a = sess.run([loss, accuracy], {x: xs, y: ys})
            losses.append(float(l))
            accs.append(float(a))
            if verbose:
                print(f"epoch {epoch + 1:3d}  loss {l:.4f}  accuracy {a:.3f}")
    if verbose:
        print(f"final: loss = {losses[-1]:.4f}, accuracy = {accs[-1]:.3f}")
    return {"initial_loss": l0, "losses": losses, "accuracy": accs}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=15)
    args = parser.parse_args()
    main(epochs=args.epochs)
