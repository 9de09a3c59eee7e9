"""Tests generated from the op registry: for every example of every op, on every backend,
the value equals an independent NumPy computation (value and dtype), the inferred static shape
equals the actual shape, and the compiled backend agrees with the interpreter."""
from __future__ import annotations

import numpy as np
import pytest

import jitflow as tf
from helpers import assert_same_result, build_example, example_inputs, registry_params
from jitflow.ops.registry import all_op_defs
from jitflow.core.session import _BACKENDS

EXAMPLES = [(d.type, i, ex) for d in all_op_defs() for i, ex in enumerate(d.examples)]


@pytest.mark.parametrize("ex,dtype", list(registry_params()))
def test_op_matches_numpy_on_every_backend(ex, dtype):
    arrays = example_inputs(ex, dtype)
    phs, out = build_example(ex, arrays)
    feed = dict(zip(phs, arrays))
    results = {}
    # the Numba kernel of a float64 example whose float32 form is also an example is the same
    # source in the other float type: that compile is left to the fuzzer's float64 programs
    # (each costs the suite ~0.3 s); the interpreter checks every dtype against NumPy
    f64_dup = dtype == "float64" and "float32" in ex.dtypes
    for name in _BACKENDS:
        if name == "cuda" or f64_dup and name != "interpreter":
            continue
        with tf.Session(backend=name) as sess:
            results[name] = sess.run(out, feed)
    ref = results["interpreter"]
    # the inferred static shape agrees with the actual shape
    assert out.shape.is_compatible_with(np.shape(ref)), (out.shape, np.shape(ref))
    assert np.asarray(ref).dtype == out.dtype.as_numpy_dtype
    if ex.expect is not None:
        want = ex.expect(*arrays)
        np.testing.assert_allclose(np.asarray(ref, dtype=np.float64) if np.asarray(
            ref).dtype.kind != "b" else ref, want, rtol=ex.rtol, atol=ex.rtol)
    tol = 1e-5 if np.asarray(ref).dtype != np.float16 else 1e-2
    for name, r in results.items():
        assert_same_result(r, ref, rtol=tol, atol=tol, path=name)


def test_every_registered_op_is_declared_complete():
    """Each op has a shape rule and a reference; differentiable ops have a gradient rule."""
    for d in all_op_defs():
        assert callable(d.infer) and callable(d.ref), d.type
        if d.differentiable:
            assert d.grad is not None, f"{d.type} is differentiable but has no gradient rule"
