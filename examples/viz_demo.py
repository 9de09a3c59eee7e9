"""Draw graphs with jitflow.viz: the seeds' graph, and the fused kernels of an MLP step.

Writes .dot files (always) and .svg pictures (when Graphviz's `dot` is installed) to a
temporary folder, or to the folder given as the first argument.
"""
import os
import shutil
import sys
import tempfile

import numpy as np

import jitflow as tf
from jitflow import viz


def seeds_graph():
    g = tf.Graph()
    with g.as_default():
        a = tf.constant(15, name="a")
        b = tf.constant(5, name="b")
        prod = tf.multiply(a, b, name="Multiply")
        total = tf.add(a, b, name="Add")
        tf.divide(prod, total, name="Divide")
    return g


def mlp_step():
    """A 784-128-10 MLP with one SGD step: returns (graph, fetches, feed_dict)."""
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 784], name="x")
        y = tf.placeholder(tf.float32, [None, 10], name="y")
        with tf.name_scope("hidden"):
            w1 = tf.Variable(tf.random_normal([784, 128], stddev=0.05), name="w")
            b1 = tf.Variable(tf.zeros([128]), name="b")
            h = tf.nn.relu(tf.matmul(x, w1) + b1)
        with tf.name_scope("output"):
            w2 = tf.Variable(tf.random_normal([128, 10], stddev=0.05), name="w")
            b2 = tf.Variable(tf.zeros([10]), name="b")
            logits = tf.matmul(h, w2) + b2
        loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits_v2(labels=y,
                                                                         logits=logits))
        train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
        init = tf.global_variables_initializer()
    rng = np.random.default_rng(0)
    feed = {x: rng.random((64, 784), np.float32),
            y: np.eye(10, dtype=np.float32)[rng.integers(0, 10, 64)]}
    return g, init, [loss, train], feed


def write(folder: str, name: str, text: str) -> None:
    dot_path = os.path.join(folder, name + ".dot")
    with open(dot_path, "w") as f:
        f.write(text)
    print(f"wrote {dot_path}")
    if shutil.which("dot"):
        print(f"wrote {viz.render(text, os.path.join(folder, name + '.svg'))}")


def main() -> None:
    folder = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="jitflow-viz-")
    os.makedirs(folder, exist_ok=True)
    if not shutil.which("dot"):
        print("Graphviz's `dot` is not installed (apt-get install graphviz): writing .dot "
              "files only")
    write(folder, "seeds", viz.to_dot(seeds_graph()))
    g, init, fetches, feed = mlp_step()
    write(folder, "mlp_graph", viz.to_dot(fetches, feed))
    with tf.Session(graph=g) as sess:
        sess.run(init)
        if sess.backend == "numba":
            write(folder, "mlp_kernels", viz.to_dot(fetches, feed, session=sess, kernels=True))
        else:
            print(f"the {sess.backend!r} backend does not fuse kernels; skipped mlp_kernels")


if __name__ == "__main__":
    main()
