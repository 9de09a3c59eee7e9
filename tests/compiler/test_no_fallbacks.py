"""Common TF1 programs compile without a reference fallback: dropout after any layer (its random
draw happens before the native call), summaries (host work after the native call), reductions
and broadcasts of tensors whose rank the graph does not know."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import jitflow as tf
from helpers import assert_same_result


@pytest.fixture(autouse=True)
def _strict(monkeypatch):
    monkeypatch.setenv("JITFLOW_STRICT", "1")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        yield


def _run_both(fetches, feed, steps=1, seed=3):
    """`steps` runs of `fetches` on each backend from the same initial values; returns
    ({backend: last result}, the numba session's executable for these fetches)."""
    out, ex = {}, None
    for backend in ("interpreter", "numba"):
        tf.set_random_seed(seed)
        with tf.Session(backend=backend) as sess:
            sess.run(tf.global_variables_initializer())
            for _ in range(steps):
                out[backend] = sess.run(fetches, feed)
            if backend == "numba":
                ex = sess.make_callable(fetches, list(feed)).spec.executable
    return out, ex


def _mlp_with_dropout_and_summaries():
    rng = np.random.default_rng(0)
    x = tf.placeholder(tf.float32, [None, 20])
    y = tf.placeholder(tf.float32, [None, 4])
    keep = tf.placeholder(tf.float32)     # unknown shape, as in the TF1 tutorials
    w = tf.Variable(rng.standard_normal((20, 16)).astype(np.float32) * 0.3)
    b = tf.Variable(tf.zeros([16]))
    h = tf.nn.dropout(tf.nn.relu(tf.matmul(x, w) + b), keep)
    w2 = tf.Variable(rng.standard_normal((16, 4)).astype(np.float32) * 0.3)
    logits = tf.matmul(h, w2)
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=y, logits=logits))
    acc = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), tf.argmax(y, 1)), tf.float32))
    tf.summary.scalar("loss", loss)
    tf.summary.scalar("accuracy", acc)
    tf.summary.histogram("w2", w2)
    merged = tf.summary.merge_all()
    train = tf.train.AdamOptimizer(0.01).minimize(loss)
    feed = {x: rng.standard_normal((8, 20)).astype(np.float32),
            y: np.eye(4, dtype=np.float32)[rng.integers(0, 4, 8)], keep: 0.6}
    return train, loss, merged, feed


def test_a_training_step_with_dropout_and_summaries_is_one_native_call():
    train, loss, merged, feed = _mlp_with_dropout_and_summaries()
    res, ex = _run_both([train, loss, merged], feed, steps=3)
    assert_same_result(res["numba"][1], res["interpreter"][1], rtol=1e-5, atol=1e-6)
    # the serialized summaries agree up to the float rounding of the values they carry
    got, want = res["numba"][2], res["interpreter"][2]
    assert isinstance(got, bytes) and len(got) == len(want)
    assert all(tag in got for tag in (b"loss", b"accuracy", b"w2"))
    assert ex.all_native, "summaries and dropout must not need reference steps"
    assert [op.type for op in ex.pre] == ["RandomUniform"]
    assert {op.type for op in ex.post} == {"ScalarSummary", "HistogramSummary", "MergeSummary"}


def test_a_summary_of_a_variable_the_step_writes_keeps_the_plan_order():
    v = tf.Variable(1.0)
    s = tf.summary.scalar("v", v)
    with tf.control_dependencies([s]):
        step = tf.assign_add(v, 2.0)
    res, ex = _run_both([step, s], {}, steps=2)
    assert res["numba"] == res["interpreter"]
    assert s.op not in ex.post


def test_dropout_after_convolution_and_reshape_is_drawn_before_the_native_call():
    rng = np.random.default_rng(1)
    x = tf.placeholder(tf.float32, [None, 8, 8, 1])
    keep = tf.placeholder(tf.float32)
    f = tf.Variable(rng.standard_normal((3, 3, 1, 4)).astype(np.float32))
    h = tf.nn.max_pool(tf.nn.relu(tf.nn.conv2d(x, f, 1, "SAME")), 2, 2, "SAME")
    h = tf.nn.dropout(tf.reshape(h, [-1, 4 * 4 * 4]), keep)
    w = tf.Variable(rng.standard_normal((64, 2)).astype(np.float32))
    loss = tf.reduce_mean(tf.square(tf.matmul(h, w)))
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    for batch in (3, 5):
        feed = {x: rng.standard_normal((batch, 8, 8, 1)).astype(np.float32), keep: 0.5}
        res, ex = _run_both([train, loss], feed, steps=2)
        assert_same_result(res["numba"][1], res["interpreter"][1], rtol=1e-5, atol=1e-6)
        assert ex.all_native and [op.type for op in ex.pre] == ["RandomUniform"]


def test_reductions_and_broadcasts_of_unknown_rank_compile():
    x = tf.placeholder(tf.float32)            # unknown rank
    w = tf.Variable(2.0)
    b = tf.Variable(tf.zeros([3]))
    loss = tf.reduce_sum(tf.square(x * w + b)) + tf.reduce_sum(tf.reduce_mean(x, axis=-1))
    train = tf.train.GradientDescentOptimizer(0.01).minimize(loss)
    feed = {x: np.arange(12, dtype=np.float32).reshape(4, 3) / 10}
    res, ex = _run_both([train, loss, w, b], feed, steps=2)
    assert_same_result(res["numba"], res["interpreter"], rtol=1e-6, atol=1e-6)
    assert ex.all_native


def test_runtime_shapes_follow_the_ops_own_shape_rules():
    from jitflow.core import fold as rs
    x = tf.placeholder(tf.float32, [None, 6, 6, 2])
    f = tf.Variable(np.ones((3, 3, 2, 5), np.float32))
    h = tf.nn.avg_pool(tf.nn.conv2d(x, f, 2, "SAME"), 2, 1, "VALID")
    r = tf.reduce_sum(tf.transpose(h, [3, 0, 1, 2]), axis=1)
    assert rs.computable(r, {x})
    assert rs.shape_of(r, {x: np.zeros((4, 6, 6, 2))}, {f.op: np.zeros((3, 3, 2, 5))}) == \
        (5, 2, 2)
    # a shape that depends on values cannot be known before the run
    assert not rs.computable(tf.where(x > 0), {x})
    assert not rs.computable(tf.reshape(x, tf.cast(tf.reduce_sum(x, [1, 2, 3]), tf.int32)), {x})


@pytest.mark.parametrize("stride,padding", [(2, "SAME"), (2, "VALID"), (1, "SAME")])
def test_conv2d_transpose_with_a_literal_output_shape_compiles(stride, padding):
    rng = np.random.default_rng(2)
    oh = {(2, "SAME"): 4, (2, "VALID"): 3, (1, "SAME"): 7}[(stride, padding)]
    v = tf.placeholder(tf.float32, [None, oh, oh, 3])
    f = tf.Variable(rng.standard_normal((3, 3, 2, 3)).astype(np.float32))
    y = tf.nn.conv2d_transpose(v, f, [4, 7, 7, 2], [1, stride, stride, 1], padding)
    loss = tf.reduce_sum(tf.tanh(y))
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    feed = {v: rng.standard_normal((4, oh, oh, 3)).astype(np.float32)}
    res, ex = _run_both([train, loss, y], feed, steps=2)
    assert_same_result(res["numba"][1:], res["interpreter"][1:], rtol=2e-5, atol=2e-5)
    assert ex.all_native


def test_a_scalar_random_draw_feeding_the_kernel_compiles():
    # random_flip_left_right draws one rank-0 uniform before the call (a numpy scalar); the
    # kernel takes it as a 0-d array
    x = tf.placeholder(tf.float32, [4, 3, 2])
    flipped = tf.image.random_flip_left_right(x, seed=1) * 2.0
    xv = np.arange(24, dtype=np.float32).reshape(4, 3, 2)
    out, ex = _run_both(flipped, {x: xv}, steps=5)
    assert_same_result(out["numba"], out["interpreter"])
    assert ex.single and ex.pre
