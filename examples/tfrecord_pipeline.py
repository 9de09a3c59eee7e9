"""Train from TFRecord files of tf.train.Example records holding PNG images.

Synthetic 8x8 RGB images (a bright horizontal bar: label 0, a vertical bar: label 1, on noise)
are PNG-encoded with `tf.image.encode_png` and written with their labels and a variable-length
list of tags as `tf.train.Example` records into GZIP-compressed TFRecord shards
(`tf.io.TFRecordWriter`). They are read back with `tf.data.TFRecordDataset`, parsed in
`Dataset.map` with `tf.parse_single_example` (a FixedLenFeature for the image and label, a
VarLenFeature for the tags) and `tf.image.decode_png`, shuffled and batched; a small softmax
classifier is trained with Adam on the batches. Prints the loss per epoch and the accuracy.

Needs Pillow (the `image` extra: pip install 'jitflow[image]').
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

SIZE = 8


def synthetic_images(rng, n: int) -> tuple:
    """Noisy images with one bright bar (horizontal: label 0, vertical: label 1)."""
    images = rng.integers(0, 90, size=(n, SIZE, SIZE, 3)).astype(np.uint8)
    labels = rng.integers(0, 2, size=n)
    where = rng.integers(1, SIZE - 1, size=n)
    for img, lab, k in zip(images, labels, where):
        if lab == 0:
            img[k, :, :] = 230
        else:
            img[:, k, :] = 230
    return images, labels


def _feature(value) -> object:
    if isinstance(value, bytes):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))
    if isinstance(value, list):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=value))
    return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(value)]))


def write_shards(folder: str, images, labels, shards: int = 3) -> list:
    """TFRecord files (GZIP) of Examples: image (PNG bytes), label, tags (a varying list)."""
    with tf.Graph().as_default():
        pixels = tf.placeholder(tf.uint8, [SIZE, SIZE, 3])
        encode = tf.image.encode_png(pixels)
        with tf.Session() as sess:
            pngs = [sess.run(encode, {pixels: img}) for img in images]
    names = []
    options = tf.io.TFRecordOptions(tf.io.TFRecordCompressionType.GZIP)
    for s in range(shards):
        path = os.path.join(folder, f"train-{s:02d}.tfrecord.gz")
        with tf.io.TFRecordWriter(path, options) as writer:
            for i in range(s, len(images), shards):
                tags = [b"bar", b"horizontal" if labels[i] == 0 else b"vertical"][:1 + i % 2]
                example = tf.train.Example(features=tf.train.Features(feature={
                    "image": _feature(pngs[i]), "label": _feature(labels[i]),
                    "tags": _feature(tags)}))
                writer.write(example.SerializeToString())
        names.append(path)
    return names


FEATURES = {"image": tf.FixedLenFeature([], tf.string),
            "label": tf.FixedLenFeature([], tf.int64),
            "tags": tf.VarLenFeature(tf.string)}


def parse(record):
    """One serialized Example -> (image as floats in [0, 1], label, number of tags)."""
    ex = tf.parse_single_example(record, FEATURES)
    image = tf.image.decode_png(ex["image"], channels=3)
    image = tf.cast(tf.reshape(image, [SIZE, SIZE, 3]), tf.float32) / 255.0
    return image, tf.cast(ex["label"], tf.int32), tf.size(ex["tags"].values)


def main(epochs: int = 6, n: int = 240, batch_size: int = 32, seed: int = 0,
         verbose: bool = True) -> dict:
    rng = np.random.default_rng(seed)
    images, labels = synthetic_images(rng, n)
    with tempfile.TemporaryDirectory() as folder:
        files = write_shards(folder, images, labels)
        records = sum(1 for f in files for _ in tf.io.tf_record_iterator(f, "GZIP"))
        graph = tf.Graph()
        with graph.as_default():
            tf.set_random_seed(seed)
            ds = tf.data.TFRecordDataset(files, compression_type="GZIP").map(parse)
            ds = ds.shuffle(n, seed=seed).batch(batch_size)
            it = ds.make_initializable_iterator()
            x, y, n_tags = it.get_next()
            flat = tf.reshape(x, [-1, SIZE * SIZE * 3])
            hidden = tf.layers.dense(flat, 16, activation=tf.nn.relu)
            logits = tf.layers.dense(hidden, 2)
            loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
            correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, 1, output_type=tf.int32),
                                                     y), tf.float32))
            train_op = tf.train.AdamOptimizer(0.01).minimize(loss)
            init = tf.global_variables_initializer()

        losses, accuracy, tags_seen = [], [], 0
        with tf.Session(graph=graph) as sess:
            sess.run(init)
            for epoch in tqdm(range(epochs), desc="epochs", disable=not verbose):
                sess.run(it.initializer)   # a new shuffle each epoch
                total, right, seen, steps = 0.0, 0.0, 0, 0
                while True:
                    try:
                        _, lv, c, yy, t = sess.run([train_op, loss, correct, y, n_tags])
                    except tf.errors.OutOfRangeError:
                        break
                    total, right, seen, steps = total + float(lv), right + float(c), \
                        seen + len(yy), steps + 1
                    tags_seen += int(t.sum())
                losses.append(total / steps)
                accuracy.append(right / seen)
                if verbose:
                    say(f"epoch {epoch + 1}  loss {losses[-1]:.4f}  accuracy {accuracy[-1]:.3f} "
                        f"over {seen} records in {steps} batches")
    if verbose:
        print(f"final: {records} records in {len(files)} GZIP shards; loss {losses[0]:.4f} -> "
              f"{losses[-1]:.4f}, training accuracy {accuracy[-1]:.3f}")
    return {"losses": losses, "accuracy": accuracy, "records": records, "shards": len(files),
            "tags": tags_seen}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--n", type=int, default=240)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    main(args.epochs, args.n, args.batch_size, args.seed)
