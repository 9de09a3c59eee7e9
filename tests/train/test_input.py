"""TF1's queue-based pipelines end to end: string_input_producer -> TextLineReader ->
decode_csv -> train.batch / shuffle_batch, run by queue runners and ended by epochs."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import jitflow as tf
from jitflow.core import errors
from pipeline_helpers import native_steps


def _csv_files(tmp_path, n_files=2, rows=5):
    names = []
    for k in range(n_files):
        p = tmp_path / f"f{k}.csv"
        p.write_text("a,b,label\n" + "".join(f"{k * 10 + i},{i * 0.5},{i % 2}\n"
                                              for i in range(rows)))
        names.append(str(p))
    return names


def _drain(sess, fetch, coord):
    out = []
    try:
        while not coord.should_stop():
            out.append(sess.run(fetch))
    except errors.OutOfRangeError:
        pass
    return out


def test_csv_pipeline_batches_every_record_for_each_epoch(tmp_path, backend):
    names = _csv_files(tmp_path)
    fq = tf.train.string_input_producer(names, num_epochs=2, shuffle=False)
    _, value = tf.TextLineReader(skip_header_lines=1).read(fq)
    a, b, lab = tf.decode_csv(value, record_defaults=[[0], [0.0], [0]])
    feats = tf.stack([tf.cast(a, tf.float32), b])
    xb, yb = tf.train.batch([feats, lab], batch_size=4, allow_smaller_final_batch=True)
    assert xb.shape.as_list() == [None, 2] and yb.shape.as_list() == [None]
    with tf.Session() as sess:
        sess.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess=sess, coord=coord)
        batches = _drain(sess, [xb, yb], coord)
        coord.request_stop()
        coord.join(threads)
    xs = np.concatenate([x for x, _ in batches])
    ys = np.concatenate([y for _, y in batches])
    assert len(xs) == 20 and [len(y) for _, y in batches] == [4] * 5
    assert sorted(xs[:, 0].tolist()) == sorted([float(k * 10 + i) for k in range(2)
                                                for i in range(5)] * 2)
    assert ys.sum() == 8


def test_epoch_limit_needs_local_variables(tmp_path):
    tf.train.string_input_producer(_csv_files(tmp_path), num_epochs=1)
    runner, = tf.get_collection(tf.GraphKeys.QUEUE_RUNNERS)
    with tf.Session() as sess:
        with pytest.raises(errors.FailedPreconditionError, match="epochs"):
            sess.run(runner.enqueue_ops[0])


def test_batch_returns_the_structure_it_was_given():
    x = tf.constant([1.0, 2.0])
    one = tf.train.batch([x], batch_size=3)
    assert isinstance(one, tf.Tensor) and one.shape.as_list() == [3, 2]
    d = tf.train.batch({"b": x, "a": tf.constant(1)}, batch_size=2)
    assert set(d) == {"a", "b"} and d["a"].shape.as_list() == [2]
    with pytest.raises(ValueError, match="fully defined"):
        tf.train.batch([tf.placeholder(tf.float32, [None])], 2)
    dyn = tf.train.batch([tf.placeholder(tf.float32, [None])], 2, dynamic_pad=True)
    assert dyn.shape.as_list() == [2, None]
    assert len(tf.get_collection(tf.GraphKeys.QUEUE_RUNNERS)) == 3
    assert any("fraction_of_32_full" in s.op.name for s in
               tf.get_collection(tf.GraphKeys.SUMMARIES))


def test_slice_input_producer_and_shuffle_batch():
    tf.set_random_seed(1)
    data = np.arange(30)
    i, = tf.train.slice_input_producer([tf.constant(data)], num_epochs=1, seed=3)
    sb = tf.train.shuffle_batch([i], batch_size=7, capacity=12, min_after_dequeue=4,
                                allow_smaller_final_batch=True, seed=1, num_threads=2)
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess, coord)
        got = np.concatenate(_drain(sess, sb, coord)).tolist()
        coord.request_stop()
        coord.join(threads)
    assert sorted(got) == data.tolist() and got != data.tolist()


def test_training_on_a_queue_pipeline_compiles(tmp_path):
    """The reader and the queues run on the host; the training step compiles into kernels."""
    names = _csv_files(tmp_path, 2, 8)
    fq = tf.train.string_input_producer(names, shuffle=False)
    _, value = tf.TextLineReader(skip_header_lines=1).read(fq)
    a, b, lab = tf.decode_csv(value, record_defaults=[[0], [0.0], [0]])
    x, y = tf.train.batch([tf.stack([tf.cast(a, tf.float32) / 20.0, b]),
                           tf.cast(lab, tf.float32)], batch_size=8)
    w = tf.Variable(tf.zeros([2, 1]))
    logits = tf.squeeze(tf.matmul(x, w), 1)
    loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=logits))
    train = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with tf.Session(backend="numba") as sess:
            sess.run(tf.global_variables_initializer())
            coord = tf.train.Coordinator()
            threads = tf.train.start_queue_runners(sess, coord)
            first = sess.run(loss)
            for _ in range(30):
                sess.run(train)
            steps = native_steps(sess, train)
            coord.request_stop()
            coord.join(threads)
    assert np.isfinite(first)
    assert [k for k, _ in steps].count("native") == 1, steps
    assert ("host", "QueueDequeueManyV2") in steps
