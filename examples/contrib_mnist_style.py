"""A TF 1.x tutorial program written with `tf.contrib`, which TensorFlow 2 can no longer run.

Synthetic "MNIST-style" data: 10x10 grey images of four kinds of stroke (horizontal,
vertical, diagonal, anti-diagonal) at random places, with noise. Two classic TF1 models learn
to tell them apart:

1. a CNN made of `tf.contrib.layers` in an `arg_scope` (conv2d with batch_norm as the
   normalizer, xavier weights and an l2 regularizer, max_pool2d, flatten, fully_connected,
   dropout), trained with the batch-norm update ops run before each Adam step;
2. an RNN that reads the image row by row, as the MNIST RNN tutorials do: a
   `tf.contrib.rnn.LSTMBlockCell` unrolled by `tf.contrib.rnn.static_rnn`, then a
   fully_connected layer on the last output.

Prints the variables (TF 1.15's names: Conv/weights, Conv/BatchNorm/beta, ...), then the loss
and held-out accuracy of each model as it trains.
"""
from __future__ import annotations

import argparse

import numpy as np

import jitflow as tf

SIZE, CLASSES = 10, 4


def make_data(n: int, rng) -> tuple:
    """Images with one stroke each (its kind is the label), plus noise."""
    images = rng.normal(0.0, 0.25, size=(n, SIZE, SIZE)).astype(np.float32)
    labels = rng.integers(0, CLASSES, size=n)
    length = 6
    for k, label in enumerate(labels):
        r, c = rng.integers(0, SIZE - length + 1, size=2)
        idx = np.arange(length)
        rows, cols = {0: (np.full(length, r + 2), c + idx), 1: (r + idx, np.full(length, c + 2)),
                      2: (r + idx, c + idx), 3: (r + idx, c + length - 1 - idx)}[label]
        images[k, rows, cols] += 1.0
    return images[..., None], labels.astype(np.int64)


def cnn(images, training, keep_prob):
    """conv(8) + batch norm -> pool -> conv(16) + batch norm -> pool -> fc(32) -> dropout ->
    fc(classes), the tf.contrib.layers way."""
    layers = tf.contrib.layers
    with tf.contrib.framework.arg_scope(
            [layers.conv2d, layers.fully_connected],
            weights_initializer=layers.xavier_initializer(),
            weights_regularizer=layers.l2_regularizer(1e-4)):
        with tf.contrib.framework.arg_scope([layers.conv2d], normalizer_fn=layers.batch_norm,
                                            normalizer_params={"is_training": training,
                                                               "decay": 0.9}):
            net = layers.conv2d(images, 8, [3, 3])
            net = layers.max_pool2d(net, [2, 2])
            net = layers.conv2d(net, 16, [3, 3])
            net = layers.max_pool2d(net, [2, 2], padding="SAME")
        net = layers.fully_connected(layers.flatten(net), 32)
        net = layers.dropout(net, keep_prob, is_training=training)
        return layers.fully_connected(net, CLASSES, activation_fn=None, scope="logits")


def rnn(images):
    """Rows as time steps: an LSTMBlockCell(32) over the 10 rows, then fc on its last
    output."""
    rows = tf.unstack(tf.squeeze(images, 3), axis=1)          # SIZE tensors [batch, SIZE]
    cell = tf.contrib.rnn.LSTMBlockCell(32)
    outputs, _ = tf.contrib.rnn.static_rnn(cell, rows, dtype=tf.float32)
    return tf.contrib.layers.fully_connected(outputs[-1], CLASSES, activation_fn=None,
                                             scope="rnn_logits")


def train(model: str, steps: int, batch: int, lr: float, data: tuple, seed: int,
          verbose: bool) -> dict:
    (train_x, train_y), (test_x, test_y) = data
    graph = tf.Graph()
    with graph.as_default():
        tf.set_random_seed(seed)
        x = tf.placeholder(tf.float32, [None, SIZE, SIZE, 1], name="x")
        y = tf.placeholder(tf.int64, [None], name="y")
        training = tf.placeholder_with_default(False, [], name="training")
        keep_prob = tf.placeholder_with_default(1.0, [], name="keep_prob")
        logits = cnn(x, training, keep_prob) if model == "cnn" else rnn(x)
        loss = tf.losses.sparse_softmax_cross_entropy(y, logits)
        total = loss + tf.losses.get_regularization_loss()
        accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), y), tf.float32))
        with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
            step_op = tf.train.AdamOptimizer(lr).minimize(total)
        init = tf.global_variables_initializer()
        names = [f"{v.op.name} {v.shape.as_list()}" for v in tf.global_variables()
                 if "Adam" not in v.op.name and "power" not in v.op.name]
    if verbose:
        print(f"== {model}: " + ", ".join(names))
    rng = np.random.default_rng(seed)
    test = {x: test_x, y: test_y}
    history = []
    with tf.Session(graph=graph) as sess:
        sess.run(init)
        first = sess.run([loss, accuracy], test)
        for step in range(1, steps + 1):
            idx = rng.integers(0, len(train_x), size=batch)
            sess.run(step_op, {x: train_x[idx], y: train_y[idx], training: True,
                               keep_prob: 0.8})
            if step % (steps // 4) == 0:
                l_, a_ = sess.run([loss, accuracy], test)
                history.append((step, float(l_), float(a_)))
                if verbose:
                    print(f"{model} step {step:4d}  loss {l_:.4f}  held-out accuracy {a_:.3f}")
    return {"initial": (float(first[0]), float(first[1])), "history": history,
            "variables": names}


def main(steps: int = 200, batch: int = 32, seed: int = 0, verbose: bool = True) -> dict:
    rng = np.random.default_rng(seed)
    data = (make_data(2048, rng), make_data(512, rng))
    out = {"cnn": train("cnn", steps, batch, 0.01, data, seed, verbose),
           "rnn": train("rnn", steps, batch, 0.01, data, seed, verbose)}
    if verbose:
        for model, res in out.items():
            l0, a0 = res["initial"]
            _, l1, a1 = res["history"][-1]
            print(f"final {model}: loss {l0:.3f} -> {l1:.3f}, accuracy {a0:.3f} -> {a1:.3f}")
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch", type=int, default=32)
    args = parser.parse_args()
    main(steps=args.steps, batch=args.batch)
