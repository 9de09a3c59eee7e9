"""Newton's method in a `tf.while_loop` that runs until it converges, and training through it.

The square root of each fed value is found by Newton iterations `x <- (x + a / x) / 2` inside
one while loop whose condition looks at the data: it stops when every residual |x^2 - a| is
below a tolerance, so the trip count depends on what is fed (far from 1 takes longer).
Gradients flow through the loop: d sqrt(a) / da comes out as 1 / (2 sqrt(a)). Then a scale
`s` is learned by gradient descent *through* the loop so that sqrt(s * a) matches 3 sqrt(a)
(the answer is s = 9).
"""
from __future__ import annotations

import argparse

import numpy as np
from tqdm import tqdm

import jitflow as tf


def newton_sqrt(a, tol: float = 1e-6, max_iterations: int = 100):
    """(sqrt(a), iterations): Newton's method from x = (a + 1) / 2 (one step from 1) until
    |x^2 - a| <= tol * a for every element."""
    def cond(i, x):
        return tf.reduce_max(tf.abs(x * x - a) / a) > tol

    def body(i, x):
        return i + 1, 0.5 * (x + a / x)

    steps, root = tf.while_loop(cond, body, [tf.constant(0), 0.5 * (a + 1.0)],
                                maximum_iterations=max_iterations)
    return root, steps


def main(train_steps: int = 200, lr: float = 0.4, verbose: bool = True) -> dict:
    graph = tf.Graph()
    with graph.as_default():
        a = tf.placeholder(tf.float64, [None], name="a")
        root, steps = newton_sqrt(a)
        droot, = tf.gradients(tf.reduce_sum(root), [a])

        # training through the loop: sqrt(s * a) should equal 3 * sqrt(a)
        s = tf.Variable(1.0, dtype=tf.float64, name="s")
        fit, _ = newton_sqrt(s * a)
        loss = tf.reduce_mean(tf.square(fit - 3.0 * tf.sqrt(a)))
        train = tf.train.GradientDescentOptimizer(lr).minimize(loss)
        init = tf.global_variables_initializer()

    out: dict = {"iterations": {}}
    with tf.Session(graph=graph) as sess:
        sess.run(init)
        for values in ([4.0, 9.0], [2.0, 1e-2, 1e6], [1.0]):
            r, n, g = sess.run([root, steps, droot], {a: values})
            out["iterations"][tuple(values)] = int(n)
            assert np.allclose(r, np.sqrt(values), rtol=1e-5)
            assert np.allclose(g, 0.5 / np.sqrt(values), rtol=1e-4)
            if verbose:
                print(f"sqrt{tuple(values)} = {np.round(r, 6).tolist()} after {n} Newton "
                      f"steps; d/da = {np.round(g, 6).tolist()}")
        data = np.random.default_rng(0).uniform(0.5, 4.0, size=64)
        first = float(sess.run(loss, {a: data}))
        losses = []
        for _ in tqdm(range(train_steps), desc="training s through the loop",
                      disable=not verbose):
            _, l_ = sess.run([train, loss], {a: data})
            losses.append(float(l_))
        s_final = float(sess.run(s))
    if verbose:
        print(f"loss {first:.4f} -> {losses[-1]:.2e}; learned s = {s_final:.5f} (exact: 9)")
    out.update(initial_loss=first, losses=losses, s=s_final)
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    main(train_steps=args.steps)
