"""Running one model-building function under TensorFlow and under jitflow, with the same
weights, for the tf.contrib parity tests.

TensorFlow 2.21 has no tf.contrib. Its closest stand-ins here: `tensorflow.compat.v1` (the
ops, and the legacy layers and cells through tf-keras) and the `tf_slim` package, which is
TF 1.15's contrib.layers / contrib.framework / slim code ported to TF 2 (the "slim" tests skip
without it: `pip install --no-deps tf-slim==1.1.0` next to TensorFlow). tf_slim 1.1.0 predates
TF 2.21, so a few moved internals are pointed back at their new homes before it is imported.
"""
from __future__ import annotations

import importlib
import os
import sys

import numpy as np
import pytest

import jitflow as tf


def tf1():
    """tensorflow.compat.v1 in graph mode (skips the test without TensorFlow)."""
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    t = pytest.importorskip("tensorflow.compat.v1")
    t.disable_eager_execution()
    return t


def tf_slim():
    """(tensorflow.compat.v1, tf_slim); skips the test when either is missing."""
    t = tf1()
    from tensorflow.python.framework import ops
    for name in ("Tensor", "IndexedSlices"):   # TF >= 2.16 moved these classes
        if not hasattr(ops, name):
            setattr(ops, name, getattr(t, name))
    try:
        legacy = importlib.import_module("tf_keras.src.legacy_tf_layers")
    except ImportError:
        pytest.skip("tf_slim needs tf-keras")
    sys.modules.setdefault("tf_keras.legacy_tf_layers", legacy)
    for m in ("base", "convolutional", "core", "normalization", "pooling"):
        sys.modules.setdefault(f"tf_keras.legacy_tf_layers.{m}",
                               importlib.import_module(f"tf_keras.src.legacy_tf_layers.{m}"))
    slim = pytest.importorskip("tf_slim")
    return t, slim


def names(variables) -> list:
    return [v.op.name for v in variables]


def run_both(build, feeds: dict, tf_modules, jf_modules, steps: int = 0, fetch_vars=False):
    """Build `build(*modules) -> (placeholders dict, fetches)` in TensorFlow and in jitflow,
    give jitflow TensorFlow's initial variable values, run the fetches on `feeds` (after
    `steps` runs of the graph's TRAIN_OP collection, when given) and return
    {"tf": ..., "jf": ...} each with the fetched values, variable names and values and the
    names of the standard collections."""
    out = {}
    weights = None
    for key, mods in (("tf", tf_modules), ("jf", jf_modules)):
        t = mods[0]
        g = t.Graph()
        with g.as_default():
            phs, fetches = build(*mods)
            sess = t.Session()
            sess.run(t.global_variables_initializer())
            if weights is None:
                weights = {v.op.name: sess.run(v) for v in t.global_variables()}
            else:
                for v in t.global_variables():
                    v.load(weights[v.op.name], sess)
            feed = {phs[k]: val for k, val in feeds.items()}
            train = t.get_collection(t.GraphKeys.TRAIN_OP)
            for _ in range(steps):
                sess.run(train, feed)
            res = {
                "fetches": sess.run(fetches, feed),
                "variables": names(t.global_variables()),
                "values": {v.op.name: sess.run(v) for v in t.global_variables()},
            }
            for c in ("trainable_variables", "model_variables", "local_variables"):
                res[c] = names(t.get_collection(c))
            res["update_ops"] = len(t.get_collection(t.GraphKeys.UPDATE_OPS))
            res["regularization"] = [sess.run(r, feed) for r in
                                     t.get_collection(t.GraphKeys.REGULARIZATION_LOSSES)]
            sess.close()
        out[key] = res
    return out


def assert_same(res: dict, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """The jitflow run matches the TensorFlow run: names, collections, values."""
    a, b = res["tf"], res["jf"]
    for key in ("variables", "trainable_variables", "model_variables", "local_variables",
                "update_ops"):
        assert b[key] == a[key], key
    for got, want in zip(b["regularization"], a["regularization"]):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    assert len(b["regularization"]) == len(a["regularization"])
    for name in a["values"]:
        np.testing.assert_allclose(b["values"][name], a["values"][name], rtol=rtol, atol=atol,
                                   err_msg=name)
    fa, fb = a["fetches"], b["fetches"]
    fa = fa if isinstance(fa, (list, tuple)) else [fa]
    fb = fb if isinstance(fb, (list, tuple)) else [fb]
    assert len(fa) == len(fb)
    for got, want in zip(fb, fa):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def jitflow_modules():
    return tf, tf.contrib.layers
