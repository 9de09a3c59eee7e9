"""Test helpers: compare a run on every backend with the reference interpreter."""
from __future__ import annotations

import numpy as np

import jitflow as tf
from jitflow.session import _BACKENDS


def run_all_backends(fetches, feed_dict=None, init: bool = True, graph=None) -> dict:
    """Run `fetches` in a fresh session per backend; returns {backend: result}."""
    out = {}
    for name in _BACKENDS:
        if name == "cuda":
            continue
        with tf.Session(graph=graph, backend=name) as sess:
            if init:
                sess.run(tf.global_variables_initializer())
            out[name] = sess.run(fetches, feed_dict)
    return out


def assert_same_result(a, b, rtol: float = 1e-6, atol: float = 1e-6, path: str = "") -> None:
    """Equal values, equal dtypes, and numpy-scalar-vs-array type, through any nesting."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), path
        for k in a:
            assert_same_result(a[k], b[k], rtol, atol, f"{path}[{k!r}]")
        return
    if isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same_result(x, y, rtol, atol, f"{path}[{i}]")
        return
    if a is None:
        assert b is None, path
        return
    assert type(a) is type(b), f"{path}: {type(a)} vs {type(b)}"
    assert np.asarray(a).dtype == np.asarray(b).dtype, f"{path}: {a.dtype} vs {b.dtype}"
    assert np.shape(a) == np.shape(b), f"{path}: {np.shape(a)} vs {np.shape(b)}"
    if np.asarray(a).dtype.kind in "fc":
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=path)
    else:
        np.testing.assert_array_equal(a, b, err_msg=path)


def check_backends_agree(fetches, feed_dict=None, rtol=1e-6, atol=1e-6, init=True):
    """Run on every backend and assert each agrees with the interpreter; returns its result."""
    res = run_all_backends(fetches, feed_dict, init)
    ref = res["interpreter"]
    for name, r in res.items():
        assert_same_result(r, ref, rtol, atol, path=name)
    return ref
