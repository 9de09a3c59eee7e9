"""Classic TF1 programs, written as the TF1 tutorials wrote them, on every backend.

Each checks that training lowers the loss and, where TensorFlow is installed, that its
compat.v1 gives the same numbers for the same program from the same initial values.
TensorFlow 2.21 has no `compat.v1.layers` (Keras 3), so programs built with `tf.layers` are
compared with the same network spelled in `tf.nn` ops, loaded with jitflow's initial values.
"""
from __future__ import annotations

import glob
import os

import numpy as np
import pytest

import jitflow as tf

RNG = np.random.default_rng(42)
N_IN, N_CLASSES = 12, 3
CENTERS = RNG.standard_normal((N_CLASSES, N_IN)).astype(np.float32) * 2.0


def _batch(n: int, rng):
    labels = rng.integers(0, N_CLASSES, n)
    x = (CENTERS[labels] + rng.standard_normal((n, N_IN))).astype(np.float32)
    return x, np.eye(N_CLASSES, dtype=np.float32)[labels], labels


TRAIN = [_batch(16, np.random.default_rng(i)) for i in range(12)]
TEST = _batch(40, np.random.default_rng(99))


def _tf1():
    t1 = pytest.importorskip("tensorflow.compat.v1")
    t1.disable_eager_execution()
    return t1


# -- 1. softmax regression (the "MNIST for ML beginners" program) -------------------------------
def softmax_regression(tf):
    x = tf.placeholder(tf.float32, [None, N_IN])
    W = tf.Variable(tf.zeros([N_IN, N_CLASSES]))
    b = tf.Variable(tf.zeros([N_CLASSES]))
    y = tf.matmul(x, W) + b
    y_ = tf.placeholder(tf.float32, [None, N_CLASSES])
    cross_entropy = tf.reduce_mean(
        tf.nn.softmax_cross_entropy_with_logits_v2(labels=y_, logits=y))
    train_step = tf.train.GradientDescentOptimizer(0.5).minimize(cross_entropy)
    correct_prediction = tf.equal(tf.argmax(y, 1), tf.argmax(y_, 1))
    accuracy = tf.reduce_mean(tf.cast(correct_prediction, tf.float32))

    sess = tf.InteractiveSession()
    tf.global_variables_initializer().run()
    losses = []
    for batch_xs, batch_ys, _ in TRAIN:
        _, loss = sess.run([train_step, cross_entropy], feed_dict={x: batch_xs, y_: batch_ys})
        losses.append(loss)
    acc = sess.run(accuracy, feed_dict={x: TEST[0], y_: TEST[1]})
    weights = sess.run(W)
    sess.close()
    return losses, acc, weights


def test_softmax_regression(backend):
    losses, acc, _ = softmax_regression(tf)
    assert losses[-1] < 0.5 * losses[0]
    assert acc > 0.8


def test_softmax_regression_matches_tensorflow(backend):
    t1 = _tf1()
    with t1.Graph().as_default():
        want = softmax_regression(t1)
    got = softmax_regression(tf)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
    assert got[1] == pytest.approx(want[1])
    np.testing.assert_allclose(got[2], want[2], rtol=1e-4, atol=1e-5)


# -- 2. an MLP with dropout through keep_prob and tf.cond on is_training --------------------------
def mlp(tf, init: dict, keep: float = 0.5, steps: int = 12):
    x = tf.placeholder(tf.float32, [None, N_IN], name="x")
    y_ = tf.placeholder(tf.float32, [None, N_CLASSES], name="y_")
    keep_prob = tf.placeholder(tf.float32, name="keep_prob")
    is_training = tf.placeholder(tf.bool, [], name="is_training")
    with tf.variable_scope("hidden"):
        w1 = tf.get_variable("weights", initializer=init["w1"])
        b1 = tf.get_variable("biases", initializer=init["b1"])
        h = tf.nn.relu(tf.matmul(x, w1) + b1)
    h = tf.cond(is_training, lambda: tf.nn.dropout(h, keep_prob), lambda: h)
    with tf.variable_scope("softmax"):
        w2 = tf.get_variable("weights", initializer=init["w2"])
        b2 = tf.get_variable("biases", initializer=init["b2"])
        logits = tf.matmul(h, w2) + b2
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits_v2(labels=y_, logits=logits))
    global_step = tf.train.get_or_create_global_step()
    train_op = tf.train.AdamOptimizer(0.01).minimize(loss, global_step=global_step)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        eval_feed = {x: TEST[0], y_: TEST[1], keep_prob: 1.0, is_training: False}
        before = sess.run(loss, eval_feed)
        train_losses = []
        for batch_xs, batch_ys, _ in TRAIN[:steps]:
            _, l = sess.run([train_op, loss], {x: batch_xs, y_: batch_ys, keep_prob: keep,
                                               is_training: True})
            train_losses.append(l)
        after = sess.run(loss, eval_feed)
        return before, after, train_losses, sess.run(global_step)


def _mlp_init():
    rng = np.random.default_rng(5)
    return {"w1": (rng.standard_normal((N_IN, 16)) * 0.3).astype(np.float32),
            "b1": np.full(16, 0.1, np.float32),
            "w2": (rng.standard_normal((16, N_CLASSES)) * 0.3).astype(np.float32),
            "b2": np.zeros(N_CLASSES, np.float32)}


def test_mlp_with_dropout_trains(backend):
    before, after, _, step = mlp(tf, _mlp_init())
    assert after < 0.5 * before
    assert step == 12


def test_mlp_matches_tensorflow_without_dropout(backend):
    """keep_prob 1 through the is_training branch: both libraries run the same numbers."""
    t1 = _tf1()
    with t1.Graph().as_default():
        want = mlp(t1, _mlp_init(), keep=1.0)
    got = mlp(tf, _mlp_init(), keep=1.0)
    assert got[0] == pytest.approx(want[0], rel=1e-5)
    assert got[1] == pytest.approx(want[1], rel=1e-4)
    np.testing.assert_allclose(got[2], want[2], rtol=1e-4, atol=1e-6)


# -- 3. a CNN with tf.layers ---------------------------------------------------------------------
IMAGES = np.random.default_rng(7).uniform(0, 1, (24, 8, 8, 1)).astype(np.float32)
IMAGE_LABELS = (IMAGES[:, :4].mean(axis=(1, 2, 3)) > IMAGES[:, 4:].mean(axis=(1, 2, 3)))
IMAGE_LABELS = IMAGE_LABELS.astype(np.int64)


def cnn_layers(tf):
    images = tf.placeholder(tf.float32, [None, 8, 8, 1])
    labels = tf.placeholder(tf.int64, [None])
    conv1 = tf.layers.conv2d(inputs=images, filters=4, kernel_size=[3, 3], padding="same",
                             activation=tf.nn.relu)
    pool1 = tf.layers.max_pooling2d(inputs=conv1, pool_size=[2, 2], strides=2)
    flat = tf.layers.flatten(pool1)
    dense = tf.layers.dense(inputs=flat, units=8, activation=tf.nn.relu)
    logits = tf.layers.dense(inputs=dense, units=2)
    loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    return images, labels, loss, train_op


def cnn_nn(tf, values: dict):
    """The same network in tf.nn ops, its variables holding `values`."""
    images = tf.placeholder(tf.float32, [None, 8, 8, 1])
    labels = tf.placeholder(tf.int64, [None])
    v = {k: tf.Variable(a, name=k.replace("/", "_")) for k, a in values.items()}
    conv1 = tf.nn.relu(tf.nn.conv2d(images, v["conv2d/kernel"], [1, 1, 1, 1], "SAME")
                       + v["conv2d/bias"])
    pool1 = tf.nn.max_pool(conv1, [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
    flat = tf.reshape(pool1, [-1, 64])
    dense = tf.nn.relu(tf.matmul(flat, v["dense/kernel"]) + v["dense/bias"])
    logits = tf.matmul(dense, v["dense_1/kernel"]) + v["dense_1/bias"]
    loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    return images, labels, loss, train_op


def _train(tf, built, steps: int = 15, init_values=None):
    images, labels, loss, train_op = built
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        initial = {v.op.name: sess.run(v) for v in tf.global_variables()}
        losses = [sess.run([train_op, loss], {images: IMAGES, labels: IMAGE_LABELS})[1]
                  for _ in range(steps)]
    return losses, initial


def test_cnn_with_layers_trains_and_matches_tensorflow(backend):
    tf.set_random_seed(1)
    losses, initial = _train(tf, cnn_layers(tf))
    assert sorted(initial) == ["conv2d/bias", "conv2d/kernel", "dense/bias", "dense/kernel",
                               "dense_1/bias", "dense_1/kernel"]
    assert losses[-1] < losses[0]
    t1 = pytest.importorskip("tensorflow.compat.v1")
    t1.disable_eager_execution()
    with t1.Graph().as_default():
        want, _ = _train(t1, cnn_nn(t1, initial))
    np.testing.assert_allclose(losses, want, rtol=1e-4, atol=1e-5)


# -- 4. summaries, tf.metrics.accuracy, flags and tf.app.run -------------------------------------
def test_app_with_flags_summaries_and_metrics(tmp_path, backend):
    flags = tf.app.flags
    flags.FLAGS._reset()
    flags.DEFINE_string("log_dir", "/nonexistent", "Summaries directory")
    flags.DEFINE_integer("max_steps", 100, "Number of steps to run trainer.")
    flags.DEFINE_float("learning_rate", 0.01, "Initial learning rate")
    flags.DEFINE_boolean("fake_data", True, "If true, uses fake data.")
    FLAGS = flags.FLAGS
    seen = {}

    def main(argv):
        tf.logging.set_verbosity(tf.logging.INFO)
        x = tf.placeholder(tf.float32, [None, N_IN], name="x-input")
        y_ = tf.placeholder(tf.int64, [None], name="y-input")
        with tf.name_scope("layer"):
            logits = tf.layers.dense(x, N_CLASSES, kernel_initializer=tf.zeros_initializer())
        with tf.name_scope("cross_entropy"):
            cross_entropy = tf.losses.sparse_softmax_cross_entropy(labels=y_, logits=logits)
        tf.summary.scalar("cross_entropy", cross_entropy)
        tf.summary.histogram("logits", logits)
        train_step = tf.train.GradientDescentOptimizer(FLAGS.learning_rate).minimize(
            cross_entropy)
        predictions = tf.argmax(logits, 1)
        acc, acc_update = tf.metrics.accuracy(labels=y_, predictions=predictions)
        merged = tf.summary.merge_all()
        with tf.Session() as sess:
            writer = tf.summary.FileWriter(FLAGS.log_dir + "/train", sess.graph)
            sess.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
            losses = []
            for i in range(FLAGS.max_steps):
                xs, _, ls = TRAIN[i % len(TRAIN)]
                summary, _, loss = sess.run([merged, train_step, cross_entropy],
                                            {x: xs, y_: ls})
                writer.add_summary(summary, i)
                losses.append(loss)
                tf.logging.info("step %d loss %f", i, loss)
            sess.run(acc_update, {x: TEST[0], y_: TEST[2]})
            preds = sess.run(predictions, {x: TEST[0]})
            seen.update(losses=losses, acc=sess.run(acc), preds=preds, argv=argv)
            writer.close()
        return 0

    argv = ["prog", f"--log_dir={tmp_path}", "--max_steps", "6", "--learning_rate=0.5",
            "--nofake_data", "leftover"]
    with pytest.raises(SystemExit) as exit_info:
        tf.app.run(main=main, argv=argv)
    assert exit_info.value.code == 0
    assert seen["argv"] == ["prog", "leftover"] and FLAGS.fake_data is False
    assert seen["losses"][-1] < seen["losses"][0]
    assert seen["acc"] == pytest.approx(np.mean(seen["preds"] == TEST[2]))
    files = glob.glob(os.path.join(str(tmp_path), "train", "events.out.tfevents.*"))
    assert len(files) == 1
    t1 = pytest.importorskip("tensorflow.compat.v1")
    events = list(t1.train.summary_iterator(files[0]))
    # the name scope "cross_entropy" is taken, so the tag is "cross_entropy_1", as in TF1
    scalars = [(e.step, v.simple_value) for e in events for v in e.summary.value
               if v.tag == "cross_entropy_1"]
    assert [s for s, _ in scalars] == list(range(6))
    np.testing.assert_allclose([v for _, v in scalars], seen["losses"], rtol=1e-6)
    flags.FLAGS._reset()


def test_flags_parse_sys_argv_on_first_access(monkeypatch):
    fv = tf.flags.FlagValues()
    tf.flags.DEFINE_integer("batch_size", 32, "size", flag_values=fv)
    tf.flags.DEFINE_boolean("debug", False, "debug", flag_values=fv)
    tf.flags.DEFINE_string("name", None, "name", flag_values=fv)
    monkeypatch.setattr("sys.argv", ["prog", "--batch_size=8", "--debug", "pos"])
    assert not fv.is_parsed()
    assert fv.batch_size == 8 and fv.debug is True and fv.name is None
    fv.name = "set"
    assert fv.flag_values_dict() == {"batch_size": 8, "debug": True, "name": "set"}
    with pytest.raises(tf.flags.Error, match="batch_size"):
        fv(["prog", "--batch_size=abc"])
    with pytest.raises(tf.flags.Error, match="defined twice"):
        tf.flags.DEFINE_integer("batch_size", 1, "again", flag_values=fv)


def test_logging_levels(caplog):
    tf.logging.set_verbosity(tf.logging.WARN)
    assert tf.logging.get_verbosity() == tf.logging.WARN == 30
    with caplog.at_level(tf.logging.WARN, logger="jitflow"):
        tf.logging.info("hidden")
        tf.logging.warn("shown %d", 1)
        tf.logging.error("bad")
    assert [r.getMessage() for r in caplog.records] == ["shown 1", "bad"]
    assert (tf.logging.DEBUG, tf.logging.INFO, tf.logging.ERROR) == (10, 20, 40)
