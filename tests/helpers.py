"""Test helpers: compare a run on every backend with the reference interpreter."""
from __future__ import annotations

import contextlib
import os

import itertools

import numpy as np

import jitflow as tf
from jitflow.core.session import _BACKENDS


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


# -- registry example inputs (shared by the generated op and gradient tests) --------------------
def make_input(rng, shape, dtype, domain, index_max=3):
    """Random input values for one example input (see `Example.domain`)."""
    dt = np.dtype(dtype)
    if isinstance(domain, tuple):
        lo, hi = domain
        return rng.uniform(lo, hi, size=shape).astype(dt)
    if domain == "bool" or dt == np.bool_:
        return rng.random(shape) < 0.5
    if domain == "index":
        return rng.integers(0, index_max, size=shape).astype(dt)
    if dt.kind in "iu" or domain == "int":
        lo = 0 if dt.kind == "u" else -5
        return rng.integers(lo, 6, size=shape).astype(dt)
    if domain == "positive":
        return rng.uniform(0.5, 2.0, size=shape).astype(dt)
    if domain == "unit":
        return rng.uniform(-0.9, 0.9, size=shape).astype(dt)
    if domain == "nonzero":
        mag = rng.uniform(0.5, 2.0, size=shape)
        return (mag * np.where(rng.random(shape) < 0.5, -1, 1)).astype(dt)
    return rng.standard_normal(shape).astype(dt)


def example_inputs(ex, dtype, seed=0):
    """The input arrays of a registry example for one entry of its `dtypes`."""
    rng = np.random.default_rng(seed)
    dtypes = dtype if isinstance(dtype, tuple) else (dtype,) * len(ex.inputs)
    return [make_input(rng, s, dt, ex.domain, ex.index_max)
            for s, dt in zip(ex.inputs, dtypes)]


def build_example(ex, arrays):
    """Placeholders shaped like `arrays` and the example's output built on them."""
    phs = [tf.placeholder(a.dtype, a.shape, name=f"in{i}") for i, a in enumerate(arrays)]
    out = ex.build(*phs)
    return phs, out


def central_difference(f, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """d f / d x by central differences; `f` maps an array shaped like x to a float."""
    x = np.array(x, dtype=np.float64, copy=True)
    grad = np.zeros_like(x)
    flat, gflat = x.reshape(-1), grad.reshape(-1)
    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + eps
        hi = f(x)
        flat[i] = old - eps
        lo = f(x)
        flat[i] = old
        gflat[i] = (hi - lo) / (2 * eps)
    return grad


def registry_params():
    """pytest params (example, dtype) for every example of every registered op, with ids
    "<op>-<example id or index>-<dtype>"."""
    import pytest

    from jitflow.ops.registry import all_op_defs
    for d in all_op_defs():
        for i, ex in enumerate(d.examples):
            for dt in ex.dtypes:
                label = dt if isinstance(dt, str) else "-".join(dt)
                yield pytest.param(ex, dt, id=f"{d.type}-{ex.id or i}-{label}")


def conv_direct_sums(x, f, g, pad):
    """float64 forward, input gradient and filter gradient of a stride-1 convolution with `pad`
    rows and columns of zeros before the input, straight from the definition (g: the output
    gradient, whose shape gives the output's). The reference of the Winograd tests and of
    benchmarks/winograd_rounding.py."""
    x, f, g = (np.asarray(a, np.float64) for a in (x, f, g))
    n, h, w, c = x.shape
    r, oh, ow = f.shape[0], g.shape[1], g.shape[2]
    xp = np.zeros((n, h + r, w + r, c))
    xp[:, pad:pad + h, pad:pad + w] = x
    y, df, dxp = np.zeros(g.shape), np.zeros(f.shape), np.zeros_like(xp)
    for i, j in itertools.product(range(r), range(r)):
        win = xp[:, i:i + oh, j:j + ow]
        y += win @ f[i, j]
        df[i, j] = np.einsum("nyzc,nyzk->ck", win, g)
        dxp[:, i:i + oh, j:j + ow] += g @ f[i, j].T
    return y, dxp[:, pad:pad + h, pad:pad + w], df


def same_bits(a, b) -> bool:
    """Whether two results are the same to the bit, NaNs aside: every non-NaN element has the
    same bits (so -0.0 and 0.0 differ), and NaNs sit at the same places (their sign and payload
    are not defined by IEEE 754 arithmetic, and LLVM does not keep them)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind in "fc":
        na, nb = np.isnan(a), np.isnan(b)
        if not np.array_equal(na, nb):
            return False
        a, b = np.where(na, 0, a), np.where(nb, 0, b)
    return a.tobytes() == b.tobytes()


@contextlib.contextmanager
def compile_mode(mode: str):
    """Run the body with JITFLOW_COMPILE=`mode`; "quick:v16" also prints the fast path's
    loops for 16-byte vectors (JITFLOW_VECTOR_BYTES: small examples then run vector bodies
    and scalar tails)."""
    name, _, vec = (mode or "").partition(":v")
    keys = ("JITFLOW_COMPILE", "JITFLOW_VECTOR_BYTES")
    old = {k: os.environ.get(k) for k in keys}
    try:
        if name:
            os.environ["JITFLOW_COMPILE"] = name
        if vec:
            os.environ["JITFLOW_VECTOR_BYTES"] = vec
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
