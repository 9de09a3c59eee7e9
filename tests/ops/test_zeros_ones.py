"""tf.zeros, tf.ones, tf.fill, tf.zeros_like and tf.ones_like on string and bool tensors, as TF1:
a string's zero is the empty string, strings have no one, a bool's zero is False."""
from __future__ import annotations

import numpy as np
import pytest

import jitflow as tf


def _cases(t):
    """(name, builder) pairs; a builder returns a tensor, or raises as TF1 does."""
    return [
        ("zeros_like string list", lambda: t.zeros_like(["apple", "peach", "banana"])),
        ("zeros_like string tensor", lambda: t.zeros_like(t.constant(["a", "b"]))),
        ("zeros_like as string", lambda: t.zeros_like([1, 2], dtype=t.string)),
        ("ones_like string", lambda: t.ones_like(["apple", "peach"])),
        ("ones_like string tensor", lambda: t.ones_like(t.constant(["a"]))),
        ("ones_like string placeholder", lambda: t.ones_like(t.placeholder(t.string, [None]))),
        ("zeros_like bool", lambda: t.zeros_like([True, False])),
        ("ones_like bool", lambda: t.ones_like([True, False])),
        ("ones_like as bool", lambda: t.ones_like([1.0, 2.0], dtype=t.bool)),
        ("zeros_like as bool", lambda: t.zeros_like([1.0, 2.0], dtype=t.bool)),
        ("zeros string", lambda: t.zeros([2], t.string)),
        ("zeros string dynamic", lambda: t.zeros(t.constant([2]), t.string)),
        ("ones string", lambda: t.ones([2], t.string)),
        ("zeros bool", lambda: t.zeros([2], t.bool)),
        ("ones bool", lambda: t.ones([2], t.bool)),
        ("fill string", lambda: t.fill([2], "x")),
        ("fill bool", lambda: t.fill([2], True)),
    ]


def _outcomes(t, session):
    out = {}
    for name, build in _cases(t):
        try:
            x = build()
        except TypeError as e:
            out[name] = ("TypeError", str(e))
            continue
        v = session(x)
        out[name] = (x.dtype.name, np.asarray(v).tolist())
    return out


def _run_jitflow(x):
    with tf.Session() as sess:
        return sess.run(x)


def test_strings_and_bools(backend):
    got = _outcomes(tf, _run_jitflow)
    no_one = ("TypeError", "Expected string, but got 1 of type 'int'.")
    assert got == {
        "zeros_like string list": ("string", [b"", b"", b""]),
        "zeros_like string tensor": ("string", [b"", b""]),
        "zeros_like as string": ("string", [b"", b""]),
        "ones_like string": no_one,
        "ones_like string tensor": no_one,
        "ones_like string placeholder": no_one,
        "zeros_like bool": ("bool", [False, False]),
        "ones_like bool": ("bool", [True, True]),
        "ones_like as bool": ("bool", [True, True]),
        "zeros_like as bool": ("bool", [False, False]),
        "zeros string": ("string", [b"", b""]),
        "zeros string dynamic": ("string", [b"", b""]),
        "ones string": no_one,
        "zeros bool": ("bool", [False, False]),
        "ones bool": ("bool", [True, True]),
        "fill string": ("string", [b"x", b"x"]),
        "fill bool": ("bool", [True, True]),
    }


def test_zeros_like_of_fed_strings_and_bools(backend):
    s = tf.placeholder(tf.string, [None])
    b = tf.placeholder(tf.bool, [None])
    with tf.Session() as sess:
        zs, zb, ob, zd = sess.run([tf.zeros_like(s), tf.zeros_like(b), tf.ones_like(b),
                                   tf.zeros(tf.shape(s), tf.string)],
                                  {s: ["a", "bb", "c"], b: [True, False]})
    assert zs.tolist() == [b"", b"", b""] and zs.dtype == object
    assert zb.tolist() == [False, False] and zb.dtype == np.bool_
    assert ob.tolist() == [True, True] and zd.tolist() == [b"", b"", b""]


def test_strings_and_bools_match_tensorflow():
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    tf1.disable_eager_execution()

    def run_tf(x):
        with tf1.Session(graph=x.graph) as sess:
            return sess.run(x)

    with tf1.Graph().as_default():
        theirs = _outcomes(tf1, run_tf)
    assert _outcomes(tf, _run_jitflow) == theirs
