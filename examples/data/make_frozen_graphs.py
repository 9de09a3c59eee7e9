"""Make the frozen graphs examples/frozen_graph.py runs (needs TensorFlow: the `bench` extra).

    python examples/data/make_frozen_graphs.py

Trains, with TensorFlow 2.x's `compat.v1` API, two small classifiers of synthetic 10-class
"digits" (a bar whose position and orientation give the class, plus noise) and freezes them:
- mnist_cnn.pb: 28x28x1 -> conv 5x5x8 + relu + maxpool -> conv 5x5x16 + relu + maxpool ->
  dense 16 -> dense 10 -> softmax (an MNIST-style CNN);
- mlp.pb: 8x8 images flattened -> dense 32 tanh -> dense 10 -> softmax.
frozen_expected.npz holds TensorFlow's outputs for the test images `digits(64, size, 2)`.
"""
from __future__ import annotations

import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def digits(n: int, size: int, seed: int):
    """Images with one bar: classes 0-4 a row band, 5-9 a column band (plus noise)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, n)
    x = rng.normal(0, 0.3, (n, size, size, 1)).astype(np.float32)
    band = size // 5
    for i, c in enumerate(labels):
        lo = (c % 5) * band
        if c < 5:
            x[i, lo:lo + band, :, 0] += 1.0
        else:
            x[i, :, lo:lo + band, 0] += 1.0
    return x, labels.astype(np.int64)


def train_and_freeze(tf, build, size: int, steps: int, name: str):
    x_train, y_train = digits(2000, size, 1)
    x_test, y_test = digits(64, size, 2)
    with tf.Graph().as_default() as g:
        tf.set_random_seed(0)
        x = tf.placeholder(tf.float32, [None, size, size, 1], name="images")
        labels = tf.placeholder(tf.int64, [None])
        logits = build(tf, x)
        tf.nn.softmax(logits, name="probs")
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=logits))
        train = tf.train.AdamOptimizer(3e-3).minimize(loss)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            rng = np.random.default_rng(3)
            for _ in range(steps):
                idx = rng.integers(0, len(x_train), 64)
                sess.run(train, {x: x_train[idx], labels: y_train[idx]})
            probs = sess.run("probs:0", {x: x_test})
            frozen = tf.graph_util.convert_variables_to_constants(sess, g.as_graph_def(),
                                                                  ["probs"])
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(frozen.SerializeToString())
    print(f"{name}: {len(frozen.node)} nodes, test accuracy "
          f"{(probs.argmax(1) == y_test).mean():.2f}")
    return x_test, y_test, probs


def _var(tf, name, shape):
    fan_in = int(np.prod(shape[:-1]))
    return tf.Variable(tf.truncated_normal(shape, stddev=(2.0 / fan_in) ** 0.5), name=name)


def _dense(tf, h, n_in, n_out, name):
    with tf.name_scope(name):
        return tf.nn.bias_add(tf.matmul(h, _var(tf, "kernel", [n_in, n_out])),
                              tf.Variable(tf.zeros([n_out]), name="bias"))


def _conv(tf, h, k, c_in, c_out, name):
    with tf.name_scope(name):
        y = tf.nn.conv2d(h, _var(tf, "kernel", [k, k, c_in, c_out]), [1, 1, 1, 1], "SAME")
        return tf.nn.relu(tf.nn.bias_add(y, tf.Variable(tf.zeros([c_out]), name="bias")))


def cnn(tf, x):
    h = tf.nn.max_pool(_conv(tf, x, 5, 1, 8, "conv1"), [1, 2, 2, 1], [1, 2, 2, 1], "SAME")
    h = tf.nn.max_pool(_conv(tf, h, 5, 8, 16, "conv2"), [1, 2, 2, 1], [1, 2, 2, 1], "SAME")
    h = tf.reshape(h, [-1, 7 * 7 * 16])
    h = tf.nn.relu(_dense(tf, h, 7 * 7 * 16, 16, "fc1"))
    return _dense(tf, h, 16, 10, "logits")


def mlp(tf, x):
    h = tf.reshape(x, [-1, 64])
    h = tf.tanh(_dense(tf, h, 64, 32, "hidden"))
    return _dense(tf, h, 32, 10, "logits")


def main() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow.compat.v1 as tf
    tf.disable_v2_behavior()
    cx, cy, cp = train_and_freeze(tf, cnn, 28, 300, "mnist_cnn.pb")
    mx, my, mp = train_and_freeze(tf, mlp, 8, 400, "mlp.pb")
    # the test images are digits(64, size, 2): the example makes them again
    np.savez(os.path.join(HERE, "frozen_expected.npz"), cnn_labels=cy, cnn_probs=cp,
             mlp_labels=my, mlp_probs=mp)


if __name__ == "__main__":
    main()
