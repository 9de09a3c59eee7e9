"""Array ops compiled into kernels (their lowerings in jitflow/ops/): slicing, gather,
concat/stack/unstack/split and their gradients equal the interpreter, run on kernels only (no
reference step, no fallback warning), with `None` dims, and raise TF1's errors before any
variable is written."""
from __future__ import annotations

import re

import warnings

import numpy as np
import pytest

import jitflow as tf
from helpers import assert_same_result
from jitflow.core import errors
from jitflow.backends.numba_cpu.executable import Executable
from jitflow.compiler.program import Segment


def rand(*shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def compiled_both(fetches, feed, init=True, steps=1, after=None, rtol=1e-5):
    """Run on both backends; the numba run must use kernels only, with no warning."""
    out = {}
    for name in ("interpreter", "numba"):
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            with tf.Session(backend=name) as sess:
                if init:
                    sess.run(tf.global_variables_initializer())
                res = [sess.run(fetches, feed) for _ in range(steps)]
                out[name] = (res, sess.run(after) if after is not None else None)
                if name == "numba":
                    for spec in sess._specs.values():
                        ex = spec.executable
                        if isinstance(ex, Executable) and spec.plan.ops:
                            assert all(isinstance(s, Segment) for s in ex.steps), \
                                ex.describe(list(feed.values()), sess._store)
    assert_same_result(out["numba"][0], out["interpreter"][0], rtol, rtol, "run")
    if after is not None:
        assert_same_result(out["numba"][1], out["interpreter"][1], rtol, rtol, "after")
    return out["numba"][0][-1]


SLICES = {
    "col": lambda x: x[:, 0],
    "rows": lambda x: x[1:3],
    "neg-step": lambda x: x[1:, ::-2],
    "reverse": lambda x: x[::-1, 3:0:-1],
    "ellipsis-newaxis": lambda x: x[..., 1, None],
    "last-row": lambda x: x[-1],
    "scalar": lambda x: x[0, -1],
    "past-end": lambda x: x[-10:10, 7:],
    "slice": lambda x: tf.slice(x, [1, 0], [2, -1]),
    "slice-sized": lambda x: tf.slice(x, [0, 2], [-1, 3]),
    "masks": lambda x: tf.strided_slice(x, [0, 3], [2, 0], [1, -1], end_mask=1),
}


@pytest.mark.parametrize("name", list(SLICES))
def test_slices_and_their_gradients(name):
    x = tf.placeholder(tf.float32, [None, 5])
    y = SLICES[name](x)
    loss = tf.reduce_sum(y * y)
    (gx,) = tf.gradients(loss, [x])
    for n in (4, 3) if name in ("rows", "slice") else (4, 1):  # 1: a unit dim class
        compiled_both([y * 2.0, gx], {x: rand(n, 5)})


def test_slices_of_fully_static_shapes():
    x = tf.placeholder(tf.float64, [3, 4])
    y = [x[1:, ::2], x[:, -1], tf.slice(x, [1, 1], [1, 2]), x[None, 2]]
    gx = tf.gradients(tf.add_n([tf.reduce_sum(t) for t in y]), x)
    compiled_both(y + gx, {x: rand(3, 4, dtype=np.float64)})


def test_slice_out_of_bounds_raises_tf1_error():
    x = tf.placeholder(tf.float32, [None, 2])
    with tf.Session() as sess:
        with pytest.raises(errors.InvalidArgumentError):
            sess.run(x[3], {x: rand(2, 2)})
        np.testing.assert_array_equal(sess.run(x[3], {x: rand(4, 2)}), rand(4, 2)[3])


@pytest.mark.parametrize("idt", [np.int32, np.int64])
def test_embedding_lookup_training_step(idt):
    ids = tf.placeholder(idt, [None])
    x = tf.placeholder(tf.float32, [None, 3])
    emb = tf.Variable(rand(7, 3, seed=1), name="emb")
    h = tf.gather(emb, ids) * x
    loss = tf.reduce_mean(tf.square(h)) + tf.reduce_sum(tf.gather(emb, 2))
    train = tf.train.GradientDescentOptimizer(0.3).minimize(loss)
    feed = {ids: np.array([0, 6, 2, 6], idt), x: rand(4, 3, seed=2)}
    compiled_both([train, loss, h], feed, steps=3, after=emb)


def test_gather_on_other_axes_and_matrix_indices():
    p = tf.placeholder(tf.float32, [None, None, 4])
    i = tf.placeholder(tf.int32, [None, None])
    ys = [tf.gather(p, i, axis=1), tf.gather(p, i, axis=-1), tf.gather(p, i)]
    loss = tf.add_n([tf.reduce_sum(y * y) for y in ys])
    compiled_both(ys + tf.gradients(loss, [p]),
                  {p: rand(4, 4, 4), i: np.array([[0, 3, 1], [2, 2, 0]], np.int32)})


def test_gather_index_out_of_range_raises_before_any_write():
    ids = tf.placeholder(tf.int32, [None])
    emb = tf.Variable(np.ones((4, 2), np.float32))
    loss = tf.reduce_sum(tf.gather(emb, ids))
    train = tf.train.GradientDescentOptimizer(1.0).minimize(loss)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for bad in ([0, 4], [-1]):
            with pytest.raises(errors.InvalidArgumentError, match=r"not in \[0, 4\)"):
                sess.run(train, {ids: np.array(bad, np.int32)})
            np.testing.assert_array_equal(sess.run(emb), np.ones((4, 2), np.float32))
        sess.run(train, {ids: np.array([1, 1], np.int32)})
        assert sess.run(emb)[1, 0] == -1.0


def test_concat_stack_unstack_split_and_gradients():
    x = tf.placeholder(tf.float32, [None, 3])
    y = tf.placeholder(tf.float32, [None, None])
    outs = [tf.concat([x, y], 1), tf.concat([x, x * 2.0, x[:1]], 0), tf.stack([x, x + 1.0], 1),
            tf.stack([x, x], -1), tf.unstack(x, axis=1)[2], tf.split(x, 3, 1)[1],
            tf.split(y, [1, -1], 0)[1], tf.stack([tf.shape(x)[0], 3])]
    loss = tf.add_n([tf.reduce_sum(tf.cast(o, tf.float32) ** 2) for o in outs])
    gs = tf.gradients(loss, [x, y])
    compiled_both(outs + gs, {x: rand(4, 3), y: rand(4, 2, seed=3)})


def test_concat_dimension_mismatch_raises():
    x = tf.placeholder(tf.float32, [None, 3])
    y = tf.placeholder(tf.float32, [None, 3])
    with tf.Session() as sess:
        with pytest.raises(errors.InvalidArgumentError):
            sess.run(tf.concat([x, y], 1), {x: rand(2, 3), y: rand(3, 3)})


def test_integer_and_bool_array_ops():
    a = tf.placeholder(tf.int32, [None, 4])
    b = tf.placeholder(tf.bool, [None])
    compiled_both([a[:, 1:3], tf.concat([a, a], 0), tf.gather(a, [1, 0]), tf.stack([b, b]),
                   tf.unstack(a, num=2)[1]],
                  {a: np.arange(8, dtype=np.int32).reshape(2, 4), b: np.array([True, False])})


def test_generated_source_indexes_arrays_directly():
    x = tf.placeholder(tf.float32, [None, 5])
    ids = tf.placeholder(tf.int32, [None])
    y = tf.gather(x, ids)[:, 1:4] * 2.0
    with tf.Session() as sess:
        src = sess.inspect(y, {x: rand(3, 5), ids: np.array([0, 2], np.int32)})
    # params read at the fed indices (an index below 0 counts from the end)
    assert re.search(r"(t\d+) = np.int64\(a1\[i0\]\)  # GatherV2", src), src
    assert re.search(r"b1\[i0, i1\] = a0\[t\d+, i1\]  # GatherV2", src), src
    assert "b1[i0, (1 + i1)] * np.float32(2.0)" in src, src  # the slice, fused into the mul
    assert src.index("raise ValueError") < src.index("empty(")  # the index check first


def test_tile_fill_and_their_gradients():
    x = tf.placeholder(tf.float32, [None, 3])
    y = tf.tile(x * 2.0, [2, 1]) + 1.0
    z = tf.tile(x[:1], [3, 2])
    f = tf.fill(tf.shape(x), 2.5) * x + tf.zeros(tf.shape(x)) + tf.fill([3], tf.reduce_sum(x))
    loss = tf.reduce_sum(y * y) + tf.reduce_sum(z * z) + tf.reduce_sum(f * f)
    for n in (4, 1):
        compiled_both([y, z, f] + tf.gradients(loss, [x]), {x: rand(n, 3)})


def test_fill_to_a_stack_of_shape_dims_compiles():
    """`cell.zero_state(tf.shape(x)[0], ...)` fills a shape stacked from shape dims and
    constants: one kernel, the dims read from x's shape (its batch size may change)."""
    x = tf.placeholder(tf.float32, [None, 3, 2])
    z = tf.zeros(tf.stack([tf.shape(x)[0], 4]))
    w = tf.fill(tf.stack([tf.shape(x)[-1], 5, tf.shape(x)[0]]), 1.5) * x[0, 0, 0]
    for n in (6, 1):
        out = compiled_both([z, w], {x: rand(n, 3, 2)})
        assert out[0].shape == (n, 4) and not out[0].any()
        assert out[1].shape == (2, 5, n)


def test_any_all_and_integer_mean():
    a = tf.placeholder(tf.int32, [None, 3])
    b = tf.placeholder(tf.bool, [None, 3])
    out = compiled_both([tf.reduce_mean(a), tf.reduce_mean(a, 0),
                         tf.reduce_mean(a, 1, keepdims=True), tf.reduce_any(b),
                         tf.reduce_all(b, 1), tf.reduce_any(b, 0), tf.reduce_all(b)],
                        {a: np.array([[-7, 2, 1], [4, -5, 9]], np.int32),
                         b: np.array([[True, False, True], [True, True, True]])})
    np.testing.assert_array_equal(out[1], [-1, -1, 5])  # truncated toward zero, as TF1


def test_argmax_and_argmin_on_any_axis():
    x = tf.placeholder(tf.float32, [None, 4, 3])
    xv = rand(5, 4, 3)
    xv[0, :, 0] = np.nan
    compiled_both([tf.argmax(x, 0), tf.argmin(x, 1), tf.argmax(x * 2.0, -2),
                   tf.argmax(x, 2, output_type=tf.int32)], {x: xv})


def test_dropout_with_a_runtime_shape_is_drawn_before_the_native_call():
    tf.set_random_seed(1)
    x = tf.placeholder(tf.float32, [None, 6])
    w = tf.Variable(rand(6, 5, seed=4), name="w")
    h = tf.nn.relu(tf.matmul(x, w) + 1.0)
    d = tf.nn.dropout(h, keep_prob=0.5, seed=3)
    train = tf.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(d))
    compiled_both([train, d], {x: rand(4, 6)}, steps=3, after=w)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(train, {x: rand(3, 6)})
        ex = next(s.executable for s in sess._specs.values()
                  if any(op.type == "RandomUniform" for op in s.plan.ops))
        assert ex.single and [op.type for op in ex.pre] == ["RandomUniform"]


def test_runtime_shaped_draw_with_operands_that_disagree_raises_tf1_error():
    a = tf.placeholder(tf.float32, [None, None])
    b = tf.placeholder(tf.float32, [None, None])
    tf.set_random_seed(2)
    d = tf.nn.dropout(a * b, keep_prob=0.5, seed=5)
    compiled_both(d, {a: rand(2, 3), b: rand(1, 3)})
    with tf.Session() as sess:
        with pytest.raises(errors.InvalidArgumentError):
            sess.run(d, {a: rand(2, 3), b: rand(3, 3)})


def test_softmax_on_other_axes_reverse_pad_and_gradients():
    x = tf.placeholder(tf.float32, [None, 4, 3])
    ys = [tf.nn.softmax(x, axis=0), tf.nn.log_softmax(x * 2.0, axis=1),
          tf.reverse(x, [0, 2]) * 2.0, tf.pad(x, [[1, 0], [0, 2], [1, 1]]),
          tf.pad(x * 1.0, [[0, 0], [1, 0], [0, 0]], constant_values=3.0)]
    loss = tf.add_n([tf.reduce_sum(y * y) for y in ys])
    for n in (2, 1):
        compiled_both(ys + tf.gradients(loss, [x]), {x: rand(n, 4, 3)})


def test_size_rank_shape_n_and_static_range():
    x = tf.placeholder(tf.float32, [None, 3])
    c = tf.placeholder(tf.float32, [2, 3])
    fs = [tf.size(x), tf.size(c), tf.rank(x), tf.shape_n([x, c])[0], tf.shape_n([x, c])[1] * 2,
          tf.cast(tf.size(x), tf.float32) * tf.reduce_sum(x), tf.range(2, 11, 3) * 2,
          tf.range(1.0, 0.0, -0.25) + 0.0, tf.range(5, dtype=tf.float32) * tf.reduce_sum(x)]
    for n in (4, 1):
        compiled_both(fs, {x: rand(n, 3), c: rand(2, 3)})


def test_batch_matmul_with_broadcast_adjoints_and_gradients():
    a = tf.placeholder(tf.float32, [None, 3, 4])
    b = tf.placeholder(tf.float32, [None, 4, 5])
    c = tf.placeholder(tf.float32, [5, 4])
    i = tf.placeholder(tf.int32, [2, 3, 4])
    ys = [tf.matmul(a, b), tf.matmul(a, c, transpose_b=True),
          tf.matmul(b, a, adjoint_a=True, adjoint_b=True),
          tf.matmul(i, tf.transpose(i, [0, 2, 1]))]
    loss = tf.add_n([tf.reduce_sum(y * y) for y in ys[:3]])
    iv = np.random.default_rng(5).integers(-3, 3, (2, 3, 4)).astype(np.int32)
    for n in (2, 1):
        compiled_both(ys + tf.gradients(loss, [a, b, c]),
                      {a: rand(n, 3, 4), b: rand(n, 4, 5, seed=1), c: rand(5, 4, seed=2), i: iv},
                      rtol=2e-5)
