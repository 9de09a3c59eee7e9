"""A TF1 program with its own tests: tf.contrib layers trained from TFRecord files, checked by
a `tf.test.TestCase`.

Synthetic points of two interleaved half-moons are written as `tf.train.Example` records
(a float feature "x" of 2 values, an int64 "label") to a TFRecord file, read back with
`tf.data.TFRecordDataset` and `tf.parse_single_example`, shuffled and batched. A two-layer
network built with `tf.contrib.layers.fully_connected` (L2-regularized through
`tf.contrib.layers.l2_regularizer`) is trained with `tf.contrib.layers.optimize_loss` (Adam).

Then `tf.test` checks the program: the records parse back to what was written
(`assertAllClose`, `assertAllEqual`), the network's gradients agree with finite differences
(`tf.test.compute_gradient_error`), the predicted probabilities lie in [0, 1]
(`assertAllInRange`) and the trained model separates the moons (`assertGreater`).
Run: python examples/tested_contrib_tfrecord.py [--epochs N]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import unittest

import numpy as np

import jitflow as tf

try:
    from tqdm import tqdm
    say = tqdm.write
except ImportError:  # the progress bar is optional
    def tqdm(it, **kwargs):
        return it
    say = print

FEATURES = {"x": tf.FixedLenFeature([2], tf.float32),
            "label": tf.FixedLenFeature([], tf.int64)}


def moons(rng, n: int) -> tuple:
    """Two interleaved half circles with noise; label 0 the upper, 1 the lower."""
    labels = rng.integers(0, 2, size=n)
    angle = rng.uniform(0, np.pi, size=n)
    x = np.where(labels[:, None] == 0,
                 np.stack([np.cos(angle), np.sin(angle)], 1),
                 np.stack([1 - np.cos(angle), 0.5 - np.sin(angle)], 1))
    return (x + rng.normal(0, 0.1, size=x.shape)).astype(np.float32), labels


def write_records(path: str, points, labels) -> None:
    with tf.io.TFRecordWriter(path) as writer:
        for p, lab in zip(points, labels):
            ex = tf.train.Example(features=tf.train.Features(feature={
                "x": tf.train.Feature(float_list=tf.train.FloatList(value=p.tolist())),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(lab)]))}))
            writer.write(ex.SerializeToString())


def parse(record):
    ex = tf.parse_single_example(record, FEATURES)
    return ex["x"], tf.cast(ex["label"], tf.int32)


def network(x, reuse: bool = False):
    """Logits of the two-layer contrib network (variables in scope "net")."""
    layers = tf.contrib.layers
    with tf.variable_scope("net", reuse=reuse):
        h = layers.fully_connected(x, 16, activation_fn=tf.nn.tanh,
                                   weights_regularizer=layers.l2_regularizer(1e-4))
        return layers.fully_connected(h, 2, activation_fn=None,
                                      weights_regularizer=layers.l2_regularizer(1e-4))


class Model:
    """The graph: the input pipeline, the network, its training op; and a fed copy for tests."""

    def __init__(self, path: str, batch_size: int, seed: int) -> None:
        self.graph = tf.Graph()
        with self.graph.as_default():
            tf.set_random_seed(seed)
            ds = tf.data.TFRecordDataset([path]).map(parse).shuffle(1000, seed=seed)
            self.iterator = ds.batch(batch_size).make_initializable_iterator()
            x, y = self.iterator.get_next()
            logits = network(x)
            data_loss = tf.losses.sparse_softmax_cross_entropy(labels=y, logits=logits)
            self.loss = data_loss + tf.add_n(tf.losses.get_regularization_losses())
            step = tf.train.get_or_create_global_step()
            self.train_op = tf.contrib.layers.optimize_loss(self.loss, step, 0.05, "Adam")
            self.points = tf.placeholder(tf.float32, [None, 2], name="points")
            self.probs = tf.nn.softmax(network(self.points, reuse=True))
            self.init = tf.global_variables_initializer()


def train(sess, model: Model, epochs: int, verbose: bool) -> list:
    losses = []
    for epoch in tqdm(range(epochs), desc="epochs", disable=not verbose):
        sess.run(model.iterator.initializer)
        total, steps = 0.0, 0
        while True:
            try:
                _, lv = sess.run([model.train_op, model.loss])
            except tf.errors.OutOfRangeError:
                break
            total, steps = total + float(lv), steps + 1
        losses.append(total / steps)
        if verbose:
            say(f"epoch {epoch + 1}  loss {losses[-1]:.4f}")
    return losses


class ProgramTest(tf.test.TestCase):
    """The checks of this program (set up by `main`: its data and trained model)."""

    state: dict = {}

    def test_records_parse_back(self):
        s = self.state
        with self.session() as sess:
            records = tf.data.TFRecordDataset([s["path"]]).map(parse).batch(len(s["labels"]))
            x, y = sess.run(records.make_one_shot_iterator().get_next())
        self.assertAllClose(x, s["points"])
        self.assertAllEqual(y, s["labels"])
        self.assertDTypeEqual(y, np.int32)

    def test_network_gradients_match_finite_differences(self):
        with self.cached_session():
            x = tf.placeholder(tf.float64, [3, 2])
            logits = network(x)
            loss = tf.reduce_sum(tf.nn.softmax(logits) * [[1.0, -2.0]])
            err = tf.test.compute_gradient_error(
                x, [3, 2], loss, [], x_init_value=self.state["points"][:3].astype(np.float64),
                init_targets=[tf.global_variables_initializer()])
        self.assertLess(err, 1e-6)

    def test_trained_model_separates_the_moons(self):
        s = self.state
        probs = s["probs"]
        self.assertAllInRange(probs, 0.0, 1.0)
        self.assertAllClose(probs.sum(1), np.ones(len(probs)), atol=1e-5)
        accuracy = float(np.mean(probs.argmax(1) == s["test_labels"]))
        self.assertGreater(accuracy, 0.85)
        self.assertLess(s["losses"][-1], 0.5 * s["losses"][0])


def main(epochs: int = 30, n: int = 512, batch_size: int = 64, seed: int = 0,
         verbose: bool = True) -> dict:
    rng = np.random.default_rng(seed)
    points, labels = moons(rng, n)
    test_points, test_labels = moons(rng, 256)
    folder = tempfile.mkdtemp(prefix="tested_contrib_")
    path = os.path.join(folder, "moons.tfrecord")
    write_records(path, points, labels)
    model = Model(path, batch_size, seed)
    with tf.Session(graph=model.graph) as sess:
        sess.run(model.init)
        losses = train(sess, model, epochs, verbose)
        probs = sess.run(model.probs, {model.points: test_points})
    accuracy = float(np.mean(probs.argmax(1) == test_labels))
    if verbose:
        print(f"final: loss {losses[0]:.4f} -> {losses[-1]:.4f}, test accuracy {accuracy:.3f}")
    ProgramTest.state = dict(path=path, points=points, labels=labels, probs=probs,
                             test_labels=test_labels, losses=losses)
    return {"losses": losses, "accuracy": accuracy, "path": path}


def run_tests(verbosity: int = 2) -> unittest.TestResult:
    """Run ProgramTest (after `main`) and return the result."""
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(ProgramTest)
    return unittest.TextTestRunner(verbosity=verbosity, stream=sys.stdout).run(suite)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    main(args.epochs, seed=args.seed)
    tf.test.main(argv=[sys.argv[0]])   # runs ProgramTest; exits with its status
