"""A small LeNet-style CNN trained with Adam to tell images of horizontal bars from vertical ones.

x (16x16x1) -> conv 3x3x8 + relu -> max pool 2 -> conv 3x3x16 + relu -> max pool 2 -> dense 32 +
relu -> dense 2 -> softmax cross entropy. The images are noise with one bright bar of random
position and orientation, so a model must find oriented edges anywhere in the image.

With an empty kernel cache the first steps run while the kernels compile in the background:
on the NumPy references first, then on tier 1 (LLVM IR written from the kernel IR, the
convolutions calling the compiled window routines), then on the Numba kernels; set
JITFLOW_DEBUG=1 to see each switch. Prints the loss and accuracy every few steps.
"""
from __future__ import annotations

import argparse

import numpy as np

import jitflow as tf


def make_bars(n: int, size: int, rng) -> tuple:
    """n noisy size x size images, each with one bar: label 0 horizontal, 1 vertical."""
    labels = rng.integers(0, 2, size=n)
    xs = rng.normal(0.0, 0.3, size=(n, size, size, 1)).astype(np.float32)
    at = rng.integers(1, size - 1, size=n)
    for k in range(n):
        if labels[k] == 0:
            xs[k, at[k], :, 0] += 1.5
        else:
            xs[k, :, at[k], 0] += 1.5
    return xs, labels.astype(np.int32)


def conv_layer(x, k: int, c_in: int, c_out: int, name: str, seed: int):
    with tf.name_scope(name):
        w = tf.Variable(tf.truncated_normal([k, k, c_in, c_out],
                                            stddev=np.sqrt(2.0 / (k * k * c_in)), seed=seed),
                        name="w")
        b = tf.Variable(tf.constant(0.05, shape=[c_out]), name="b")
        h = tf.nn.relu(tf.nn.conv2d(x, w, strides=[1, 1, 1, 1], padding="SAME") + b)
        return tf.nn.max_pool(h, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="SAME")


def dense(x, n_in: int, n_out: int, name: str, seed: int):
    with tf.name_scope(name):
        w = tf.Variable(tf.truncated_normal([n_in, n_out], stddev=np.sqrt(2.0 / n_in),
                                            seed=seed), name="w")
        b = tf.Variable(tf.zeros([n_out]), name="b")
        return tf.matmul(x, w) + b


def main(steps: int = 150, batch_size: int = 32, size: int = 16, lr: float = 2e-3,
         seed: int = 0, verbose: bool = True) -> dict:
    from tqdm import tqdm
    rng = np.random.default_rng(seed)
    xs, ys = make_bars(2048, size, rng)
    test_x, test_y = make_bars(512, size, rng)

    graph = tf.Graph()
    with graph.as_default():
        tf.set_random_seed(seed)
        x = tf.placeholder(tf.float32, [None, size, size, 1], name="x")
        y = tf.placeholder(tf.int32, [None], name="y")
        h = conv_layer(x, 3, 1, 8, "conv1", seed=1)
        h = conv_layer(h, 3, 8, 16, "conv2", seed=2)
        flat = (size // 4) * (size // 4) * 16
        h = tf.nn.relu(dense(tf.reshape(h, [-1, flat]), flat, 32, "fc1", seed=3))
        logits = dense(h, 32, 2, "fc2", seed=4)
        loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits_v2(
            labels=tf.one_hot(y, 2), logits=logits), name="loss")
        correct = tf.equal(tf.cast(tf.argmax(logits, 1), tf.int32), y)
        accuracy = tf.reduce_mean(tf.cast(correct, tf.float32), name="accuracy")
        train_op = tf.train.AdamOptimizer(lr).minimize(loss)
        init = tf.global_variables_initializer()

    losses = []
    with tf.Session(graph=graph) as sess:
        sess.run(init)
        l0, a0 = (float(v) for v in sess.run([loss, accuracy], {x: test_x, y: test_y}))
        if verbose:
            print(f"before training: test loss {l0:.4f}  accuracy {a0:.3f}")
        bar = tqdm(range(steps), desc="training", unit="step", disable=not verbose)
        for step in bar:
            idx = rng.integers(0, len(xs), size=batch_size)
            _, l = sess.run([train_op, loss], {x: xs[idx], y: ys[idx]})
            losses.append(float(l))
            if (step + 1) % 25 == 0:
                bar.set_postfix(loss=f"{np.mean(losses[-25:]):.4f}")
        lt, at = (float(v) for v in sess.run([loss, accuracy], {x: test_x, y: test_y}))
    if verbose:
        print(f"final: test loss = {lt:.4f}, test accuracy = {at:.3f}, steps = {steps}")
    return {"initial_loss": l0, "initial_accuracy": a0, "losses": losses, "test_loss": lt,
            "test_accuracy": at}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=150)
    args = parser.parse_args()
    main(steps=args.steps)
