"""Property tests: random graphs (elementwise chains with broadcasting, reductions over random
axes, matmuls, mixed float32/float64) give the interpreter's results on the numba backend,
including fetched intermediates and fed intermediates."""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jitflow as tf
from helpers import assert_same_result

_UNARY = [tf.tanh, tf.sigmoid, tf.abs, tf.square, lambda x: tf.exp(-tf.abs(x)),
          lambda x: x * 0.5 + 1.0, tf.nn.relu, tf.negative]
_BINARY = [tf.add, tf.subtract, tf.multiply, tf.maximum, tf.minimum,
           lambda a, b: a / (tf.abs(b) + 1.0)]


@st.composite
def graphs(draw):
    """(build function, input shapes, dtype) for a random small graph."""
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    rank = draw(st.integers(1, 3))
    dims = [draw(st.integers(1, 4)) for _ in range(rank)]
    n_in = draw(st.integers(1, 3))
    shapes = []
    for _ in range(n_in):
        # each input broadcasts to `dims`: drop leading dims, set some dims to 1
        lead = draw(st.integers(0, rank))
        shapes.append(tuple(1 if draw(st.booleans()) else d for d in dims[lead:]))
    shapes[0] = tuple(dims)
    steps = draw(st.lists(st.tuples(st.integers(0, 10), st.integers(0, 10),
                                    st.integers(0, 10)), min_size=1, max_size=6))
    red = draw(st.sampled_from(["none", "sum", "mean", "max"]))
    axes = draw(st.lists(st.integers(0, rank - 1), unique=True, max_size=rank))
    keep = draw(st.booleans())
    mm = draw(st.booleans()) and rank == 2

    def build(inputs):
        vals = list(inputs)
        for a, b, f in steps:
            x, y = vals[a % len(vals)], vals[b % len(vals)]
            if f % 2:
                vals.append(_UNARY[f % len(_UNARY)](x))
            else:
                vals.append(_BINARY[f % len(_BINARY)](x, y))
        out = vals[-1]
        if mm:
            out = tf.matmul(tf.broadcast_to(out, dims), tf.broadcast_to(vals[0], dims),
                            transpose_b=True)
        elif red != "none":
            fn = {"sum": tf.reduce_sum, "mean": tf.reduce_mean, "max": tf.reduce_max}[red]
            out = fn(out, axis=axes or None, keepdims=keep)
        return vals, out

    return build, shapes, dtype


def _run(backend, build, shapes, dtype, arrays, feed_mid):
    tf.reset_default_graph()
    phs = [tf.placeholder(dtype, [None] * len(s) if i == 0 else s, name=f"in{i}")
           for i, s in enumerate(shapes)]
    vals, out = build(phs)
    mid = vals[len(phs)] if len(vals) > len(phs) else None
    feed = dict(zip(phs, arrays))
    fetches = [out] + ([mid] if mid is not None else [])
    with tf.Session(backend=backend) as sess:
        first = sess.run(fetches, feed)
        if feed_mid and mid is not None:
            feed = dict(feed)
            feed[mid] = np.full(np.shape(first[1]), 0.25, dtype)
            second = sess.run(out, feed)
        else:
            second = None
    return first, second


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(graphs(), st.booleans(), st.integers(0, 2**16))
def test_random_graph_matches_interpreter(g, feed_mid, seed):
    build, shapes, dtype = g
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s).astype(dtype) for s in shapes]
    ref = _run("interpreter", build, shapes, dtype, arrays, feed_mid)
    got = _run("numba", build, shapes, dtype, arrays, feed_mid)
    tol = 2e-5 if dtype == np.float32 else 1e-9
    assert_same_result(got[0], ref[0], tol, tol, "fetches")
    assert_same_result(got[1], ref[1], tol, tol, "fed intermediate")
