"""Regenerate the TensorFlow-written files in tests/data (needs TensorFlow: the `bench` extra).

    python tests/data/make_golden.py [OUTDIR]     # default: tests/data

Writes
- ckpt/model.{index,data-00000-of-00001,meta} and ckpt/checkpoint: a V2 checkpoint of a
  variable of every dtype jitflow supports (values in golden_spec.checkpoint_values);
- cnn_frozen.pb: a frozen small CNN (Conv2D, BiasAdd, FusedBatchNormV3, Relu, Relu6, MaxPool,
  AvgPool, ConcatV2, Mean, Squeeze, Reshape, MatMul, Softmax, ...) and cnn_expected.npz with
  TensorFlow's outputs for golden_spec.image_batch();
- mlp.pbtxt: a frozen MLP as a text GraphDef, and mlp_expected.npz;
- events/events.out.tfevents.*: an event file (graph, scalar, histogram, session log);
- saved_model/: a TF1 SavedModel (`simple_save` of y = x w + b with a serving signature) and
  saved_model_expected.npz.

The tests in tests/serialize use these functions to write fresh files with TensorFlow when it is
installed, and read the committed files when it is not.
"""
from __future__ import annotations

import os
import shutil
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from golden_spec import checkpoint_values, image_batch, mlp_batch  # noqa: E402


def _tf():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow.compat.v1 as tf
    tf.disable_eager_execution()   # graph mode; nothing else global (tests import this module)
    return tf


def write_checkpoint(out_dir: str) -> str:
    """A TF-written checkpoint of checkpoint_values(); returns its prefix."""
    tf = _tf()
    os.makedirs(out_dir, exist_ok=True)
    with tf.Graph().as_default():
        for name, value in checkpoint_values().items():
            dtype = tf.string if value.dtype == object else tf.as_dtype(value.dtype)
            tf.Variable(tf.constant(value, dtype=dtype), name=name, use_resource=False)
        saver = tf.train.Saver(save_relative_paths=True)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            return saver.save(sess, os.path.join(out_dir, "model"))


def _cnn_graph(tf):
    rng = np.random.default_rng(3)

    def w(*shape):
        return tf.constant(rng.normal(scale=0.3, size=shape).astype(np.float32))
    x = tf.placeholder(tf.float32, [None, 8, 8, 3], name="images")
    h = tf.nn.conv2d(x, w(3, 3, 3, 4), [1, 1, 1, 1], "SAME", name="conv1")
    h = tf.nn.bias_add(h, w(4), name="bias1")
    h, _, _ = tf.nn.fused_batch_norm(h, w(4) + 1.0, w(4), mean=w(4),
                                     variance=tf.abs(w(4)) + 0.5, epsilon=1e-3,
                                     is_training=False, name="bn1")
    h = tf.nn.relu(h, name="relu1")
    a = tf.nn.max_pool(h, [1, 2, 2, 1], [1, 2, 2, 1], "VALID", name="pool1")
    b = tf.nn.avg_pool(h, [1, 3, 3, 1], [1, 2, 2, 1], "SAME", name="pool2")
    h = tf.concat([a, b], axis=3, name="concat")
    h = tf.nn.conv2d(h, w(2, 2, 8, 6), [1, 2, 2, 1], "VALID", name="conv2")
    h = tf.nn.relu6(h * 2.0 - 0.5, name="relu6")
    pooled = tf.reduce_mean(h, axis=[1, 2], keepdims=True, name="gap")
    flat = tf.squeeze(pooled, axis=[1, 2], name="squeeze")
    flat2 = tf.reshape(h, [-1, 2 * 2 * 6], name="flatten")
    logits = tf.matmul(tf.concat([flat, flat2], 1), w(30, 5)) + w(5)
    tf.nn.softmax(logits, name="probs")
    tf.argmax(logits, axis=1, name="label")
    return ["probs", "label"]


def _mlp_graph(tf):
    rng = np.random.default_rng(4)
    x = tf.placeholder(tf.float32, [None, 5], name="x")
    w1 = tf.Variable(rng.normal(size=(5, 7)).astype(np.float32), name="w1", use_resource=False)
    b1 = tf.Variable(rng.normal(size=7).astype(np.float32), name="b1", use_resource=False)
    w2 = tf.Variable(rng.normal(size=(7, 3)).astype(np.float32), name="w2", use_resource=False)
    h = tf.tanh(tf.nn.bias_add(tf.matmul(x, w1), b1))
    h = tf.sigmoid(h) - tf.nn.relu(-h)
    tf.nn.softmax(tf.matmul(h, w2), name="out")
    return ["out"]


def _freeze(tf, build, feed_name, batch):
    with tf.Graph().as_default() as g:
        outputs = build(tf)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            frozen = tf.graph_util.convert_variables_to_constants(
                sess, g.as_graph_def(), outputs)
            expected = sess.run([o + ":0" for o in outputs], {feed_name + ":0": batch})
    return frozen, dict(zip(outputs, expected))


def write_cnn(out_dir: str) -> tuple:
    tf = _tf()
    frozen, expected = _freeze(tf, _cnn_graph, "images", image_batch())
    path = os.path.join(out_dir, "cnn_frozen.pb")
    with open(path, "wb") as f:
        f.write(frozen.SerializeToString())
    np.savez(os.path.join(out_dir, "cnn_expected.npz"), **expected)
    return path, expected


def write_mlp_text(out_dir: str) -> tuple:
    tf = _tf()
    frozen, expected = _freeze(tf, _mlp_graph, "x", mlp_batch())
    path = tf.train.write_graph(frozen, out_dir, "mlp.pbtxt", as_text=True)
    np.savez(os.path.join(out_dir, "mlp_expected.npz"), **expected)
    return path, expected


def write_events(out_dir: str) -> str:
    tf = _tf()
    with tf.Graph().as_default() as g:
        x = tf.placeholder(tf.float32, [None], name="x")
        tf.summary.scalar("mean", tf.reduce_mean(x))
        tf.summary.histogram("values", x)
        merged = tf.summary.merge_all()
        writer = tf.summary.FileWriter(out_dir, g, filename_suffix=".golden")
        with tf.Session() as sess:
            for step in range(3):
                writer.add_summary(sess.run(merged, {x: np.arange(4.0) * (step + 1)}), step)
        writer.add_session_log(tf.SessionLog(status=tf.SessionLog.STOP), 3)
        writer.close()
    return writer.get_logdir()


def write_saved_model(out_dir: str) -> tuple:
    tf = _tf()
    x_val = mlp_batch()
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 5], name="x")
        w = tf.Variable(np.linspace(-1, 1, 15, dtype=np.float32).reshape(5, 3), name="w",
                        use_resource=False)
        b = tf.Variable(np.array([0.5, -0.5, 2.0], np.float32), name="b", use_resource=False)
        y = tf.nn.relu(tf.matmul(x, w) + b, name="y")
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            tf.saved_model.simple_save(sess, out_dir, inputs={"x": x}, outputs={"y": y})
            expected = sess.run(y, {x: x_val})
    return out_dir, {"y": expected}


def main(out: str = HERE) -> None:
    for sub in ("ckpt", "events", "saved_model"):
        shutil.rmtree(os.path.join(out, sub), ignore_errors=True)
    print(write_checkpoint(os.path.join(out, "ckpt")))
    print(write_cnn(out)[0])
    print(write_mlp_text(out)[0])
    print(write_events(os.path.join(out, "events")))
    path, expected = write_saved_model(os.path.join(out, "saved_model"))
    np.savez(os.path.join(out, "saved_model_expected.npz"), **expected)
    print(path)


if __name__ == "__main__":
    main(*sys.argv[1:])
