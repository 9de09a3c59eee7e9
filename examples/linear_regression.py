"""Linear regression with gradient descent: the second seed's model, y = w * x + b.

Fits w and b to noisy samples of y = 3x + 2 by minimizing the mean squared error with
`tf.train.GradientDescentOptimizer`. Prints the loss once per epoch, then the fitted values.
"""
from __future__ import annotations

import argparse

import numpy as np

import jitflow as tf


def main(epochs: int = 10, steps_per_epoch: int = 25, lr: float = 0.05, seed: int = 0,
         verbose: bool = True) -> dict:
    rng = np.random.default_rng(seed)
    xs = rng.uniform(-1.0, 1.0, size=100).astype(np.float32)
    ys = (3.0 * xs + 2.0 + rng.normal(0.0, 0.1, size=100)).astype(np.float32)

    graph = tf.Graph()
    with graph.as_default():
        x = tf.placeholder(tf.float32, [None], name="x")
        y = tf.placeholder(tf.float32, [None], name="y")
        w = tf.Variable(0.5, name="w")
        b = tf.Variable(0.1, name="b")
        prediction = tf.add(tf.multiply(w, x), b, name="prediction")
        loss = tf.reduce_mean(tf.square(prediction - y), name="loss")
        train_op = tf.train.GradientDescentOptimizer(lr).minimize(loss)
        init = tf.global_variables_initializer()

    losses = []
    with tf.Session(graph=graph) as sess:
        sess.run(init)
        feed = {x: xs, y: ys}
        l0 = float(sess.run(loss, feed))
        if verbose:
            print(f"before training: loss {l0:.6f}")
        for epoch in range(epochs):
            for _ in range(steps_per_epoch):
                sess.run(train_op, feed)
            losses.append(float(sess.run(loss, feed)))
            if verbose:
                print(f"epoch {epoch + 1:3d}  loss {losses[-1]:.6f}")
        w_val, b_val = sess.run([w, b])
    if verbose:
        print(f"final: w = {w_val:.4f} (true 3), b = {b_val:.4f} (true 2), "
              f"loss = {losses[-1]:.6f}")
    return {"initial_loss": l0, "losses": losses, "w": float(w_val), "b": float(b_val)}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10)
    args = parser.parse_args()
    main(epochs=args.epochs)
