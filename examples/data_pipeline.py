"""A tf.data input pipeline feeding a training loop.

Synthetic records (two numeric features and a class label, as CSV text files with a header)
are read with `tf.data.TextLineDataset`, parsed with `tf.decode_csv` in `Dataset.map`,
shuffled, batched and repeated; a reinitializable iterator switches between the training files
and a held-out file. A small two-layer classifier is trained with Adam on batches from
`get_next()`: the pipeline runs on the host and hands each batch to the compiled step. Prints
the loss per epoch and the held-out accuracy.
"""
from __future__ import annotations

import argparse
import os
import tempfile

import numpy as np

import jitflow as tf

try:
    from tqdm import tqdm
    say = tqdm.write
except ImportError:  # the progress bar is optional
    def tqdm(it, **kwargs):
        return it
    say = print


def write_csv_files(folder: str, rng, n_files: int = 3, rows: int = 400) -> list:
    """Files of `x0,x1,label` rows: the label says which side of a circle a point is on."""
    names = []
    for k in range(n_files):
        xs = rng.uniform(-1.5, 1.5, size=(rows, 2))
        labels = (np.hypot(xs[:, 0], xs[:, 1]) < 1.0).astype(int)
        path = os.path.join(folder, f"part-{k}.csv")
        with open(path, "w") as f:
            f.write("x0,x1,label\n")
            for (a, b), lab in zip(xs, labels):
                f.write(f"{a:.5f},{b:.5f},{lab}\n")
        names.append(path)
    return names


def make_dataset(files: list, batch_size: int, shuffle: bool, seed: int):
    def parse(line):
        x0, x1, label = tf.decode_csv(line, record_defaults=[[0.0], [0.0], [0]])
        return tf.stack([x0, x1]), label

    ds = tf.data.TextLineDataset(files).skip(1) if len(files) == 1 else \
        tf.data.Dataset.from_tensor_slices(files).flat_map(
            lambda f: tf.data.TextLineDataset(f).skip(1))
    ds = ds.map(parse)
    if shuffle:
        ds = ds.shuffle(1000, seed=seed)
    return ds.batch(batch_size)


def main(epochs: int = 8, batch_size: int = 64, seed: int = 0, verbose: bool = True) -> dict:
    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory() as folder:
        files = write_csv_files(folder, rng)
        train_files, test_files = files[:-1], files[-1:]
        graph = tf.Graph()
        with graph.as_default():
            tf.set_random_seed(seed)
            train_ds = make_dataset(train_files, batch_size, True, seed)
            test_ds = make_dataset(test_files, 1000, False, seed)
            it = tf.data.Iterator.from_structure(train_ds.output_types,
                                                 train_ds.output_shapes)
            x, y = it.get_next()
            train_init, test_init = it.make_initializer(train_ds), it.make_initializer(test_ds)
            h = tf.layers.dense(x, 16, activation=tf.nn.tanh)
            logits = tf.layers.dense(h, 2)
            loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
            correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, 1, output_type=tf.int32),
                                                     y), tf.float32))
            train_op = tf.train.AdamOptimizer(0.05).minimize(loss)
            init = tf.global_variables_initializer()

        losses = []
        with tf.Session(graph=graph) as sess:
            sess.run(init)
            for epoch in tqdm(range(epochs), desc="epochs", disable=not verbose):
                sess.run(train_init)  # a new shuffle of the training files each epoch
                total, n = 0.0, 0
                while True:
                    try:
                        _, lv = sess.run([train_op, loss])
                    except tf.errors.OutOfRangeError:
                        break
                    total, n = total + float(lv), n + 1
                losses.append(total / n)
                if verbose:
                    say(f"epoch {epoch + 1:2d}  mean training loss {losses[-1]:.4f} over {n} "
                        "batches")
            sess.run(test_init)
            right, seen = 0.0, 0
            while True:
                try:
                    c, yy = sess.run([correct, y])
                except tf.errors.OutOfRangeError:
                    break
                right, seen = right + float(c), seen + len(yy)
    acc = right / seen
    if verbose:
        print(f"final: training loss {losses[0]:.4f} -> {losses[-1]:.4f}, held-out accuracy "
              f"{acc:.3f} on {seen} records")
    return {"losses": losses, "accuracy": acc, "held_out": seen}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    main(args.epochs, args.batch_size, args.seed)
