"""Random ops: normal, uniform (float and int), truncated normal, shuffle, multinomial.

Every random op draws from a generator owned by the session (`ctx.rng(op)`), so each run
draws new values and two sessions are independent. Seeds follow TF1: with a graph-level seed
(`tf.set_random_seed`) or an op seed, a new session repeats the same sequence; two ops with
no op seed under one graph seed still differ (each is keyed by its own id in the graph).
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.core.graph import Tensor, convert_to_tensor, get_default_graph, make_op, name_scope
from jitflow.ops._array_args import _args, _int_list_arg, _shape_of
from jitflow.ops.registry import Example, register
from jitflow.core.shapes import TensorShape

__all__ = ["random_normal", "random_uniform", "truncated_normal", "random_shuffle",
           "multinomial"]
NAMESPACES = {"random": [("normal", "random_normal"), ("uniform", "random_uniform"),
                         "truncated_normal", ("shuffle", "random_shuffle"), "multinomial",
                         ("categorical", "multinomial"), "set_random_seed",
                         ("set_seed", "set_random_seed")]}

_FLOATS = (_dtypes.float16, _dtypes.float32, _dtypes.float64)


def set_random_seed(seed) -> None:
    """Set the graph-level seed of the default graph (random ops then repeat per session)."""
    get_default_graph().seed = None if seed is None else int(seed)


def _draw_shape(op, dyn) -> tuple:
    (shape,) = _args(op, dyn, "shape")
    if any(d < 0 for d in shape):
        from jitflow.core.errors import InvalidArgumentError
        raise InvalidArgumentError(None, op, f"Dimension -1 must be >= 0 in shape {list(shape)}")
    return shape


def _random_infer(op):
    return [(op.attrs["dtype"], _shape_of(op, "shape", 0))]


def _as_dtype(values: np.ndarray, op) -> np.ndarray:
    return values.astype(op.attrs["dtype"].as_numpy_dtype, copy=False)


def _normal_ref(op, *dyn, ctx):
    return _as_dtype(ctx.rng(op).standard_normal(_draw_shape(op, dyn)), op)


def _uniform_ref(op, *dyn, ctx):
    out = _as_dtype(ctx.rng(op).random(_draw_shape(op, dyn)), op)
    return np.minimum(out, np.nextafter(out.dtype.type(1), out.dtype.type(0)))  # keep < 1


def _truncated_ref(op, *dyn, ctx):
    rng = ctx.rng(op)
    out = rng.standard_normal(_draw_shape(op, dyn))
    bad = np.abs(out) > 2.0
    while np.any(bad):  # resample beyond two standard deviations, as TF1 does
        out[bad] = rng.standard_normal(int(bad.sum()))
        bad = np.abs(out) > 2.0
    return _as_dtype(out, op)


_RANDOM = dict(infer=_random_infer, needs_ctx=True, stateful=True, differentiable=False,
               kind="random")
register("RandomStandardNormal", ref=_normal_ref,
         examples=[Example(build=lambda: random_normal([3, 2], seed=1), inputs=[],
                           dtypes=((),))], **_RANDOM)
register("RandomUniform", ref=_uniform_ref,
         examples=[Example(build=lambda: random_uniform([4], seed=1), inputs=[],
                           dtypes=((),))], **_RANDOM)
register("TruncatedNormal", ref=_truncated_ref,
         examples=[Example(build=lambda: truncated_normal([5], seed=1), inputs=[],
                           dtypes=((),))], **_RANDOM)


def _uniform_int_infer(op):
    lo, hi = op.inputs[-2:]
    for t in (lo, hi):
        if t.shape.ndims not in (None, 0):
            raise ValueError(f"Shape must be rank 0 but is rank {t.shape.ndims} for "
                             f"'{op.name}' (op: 'RandomUniformInt')")
    return [(op.attrs["dtype"], _shape_of(op, "shape", 0))]


def _uniform_int_ref(op, *args, ctx):
    dyn, lo, hi = args[:-2], args[-2], args[-1]
    if not lo < hi:
        from jitflow.core.errors import InvalidArgumentError
        raise InvalidArgumentError(None, op, f"Need minval < maxval: {lo} >= {hi}")
    out = ctx.rng(op).integers(int(lo), int(hi), size=_draw_shape(op, dyn))
    return _as_dtype(out, op)


register("RandomUniformInt", infer=_uniform_int_infer, ref=_uniform_int_ref,
         needs_ctx=True, stateful=True, differentiable=False, kind="random",
         examples=[Example(build=lambda: random_uniform([6], 2, 5, dtype="int32", seed=3),
                           inputs=[], dtypes=((),))])


def _seed_attrs(seed) -> dict:
    return {"seed": None if seed is None else int(seed), "seed2": 0}


def _random_op(op_type, shape, dtype, seed, name, extra=()):
    static, dyn = _int_list_arg(shape, "shape")
    inputs = ([dyn] if dyn is not None else []) + list(extra)
    attrs = {"shape": static, "dtype": dtype, **_seed_attrs(seed)}
    return make_op(op_type, inputs, attrs, name=name).outputs[0]


def _float_dtype(dtype) -> _dtypes.DType:
    dtype = _dtypes.as_dtype(dtype)
    if dtype not in _FLOATS:
        raise ValueError(f"Invalid dtype {dtype.name}: expected a floating point type")
    return dtype


def random_normal(shape, mean=0.0, stddev=1.0, dtype=_dtypes.float32, seed=None,
                  name: Optional[str] = None) -> Tensor:
    """`tf.random_normal`: normal values; `shape` is a list or a 1-D int tensor."""
    dtype = _float_dtype(dtype)
    with name_scope(name, "random_normal", [shape, mean, stddev]) as scope:
        mean_t = convert_to_tensor(mean, dtype=dtype, name="mean")
        std_t = convert_to_tensor(stddev, dtype=dtype, name="stddev")
        rnd = _random_op("RandomStandardNormal", shape, dtype, seed, "RandomStandardNormal")
        from jitflow.ops.math.arithmetic import add, multiply
        return add(multiply(rnd, std_t), mean_t, name=scope)


def truncated_normal(shape, mean=0.0, stddev=1.0, dtype=_dtypes.float32, seed=None,
                     name: Optional[str] = None) -> Tensor:
    """`tf.truncated_normal`: normal values more than 2 stddev from the mean are redrawn."""
    dtype = _float_dtype(dtype)
    with name_scope(name, "truncated_normal", [shape, mean, stddev]) as scope:
        mean_t = convert_to_tensor(mean, dtype=dtype, name="mean")
        std_t = convert_to_tensor(stddev, dtype=dtype, name="stddev")
        rnd = _random_op("TruncatedNormal", shape, dtype, seed, "TruncatedNormal")
        from jitflow.ops.math.arithmetic import add, multiply
        return add(multiply(rnd, std_t), mean_t, name=scope)


def random_uniform(shape, minval=0, maxval=None, dtype=_dtypes.float32, seed=None,
                   name: Optional[str] = None) -> Tensor:
    """`tf.random_uniform`: values in [minval, maxval); integer dtypes need `maxval`."""
    dtype = _dtypes.as_dtype(dtype)
    with name_scope(name, "random_uniform", [shape, minval, maxval]) as scope:
        if dtype.is_integer:
            if maxval is None:
                raise ValueError(f"Must specify maxval for integer dtype {dtype!r}")
            if dtype not in (_dtypes.int32, _dtypes.int64):
                raise TypeError(f"Value for attr 'Tout' of {dtype.name} is not in the list of "
                                "allowed values: int32, int64")
            lo = convert_to_tensor(minval, dtype=dtype, name="min")
            hi = convert_to_tensor(maxval, dtype=dtype, name="max")
            return _random_op("RandomUniformInt", shape, dtype, seed, scope, extra=(lo, hi))
        dtype = _float_dtype(dtype)
        if maxval is None:
            maxval = 1
        lo = convert_to_tensor(minval, dtype=dtype, name="min")
        hi = convert_to_tensor(maxval, dtype=dtype, name="max")
        rnd = _random_op("RandomUniform", shape, dtype, seed, "RandomUniform")
        from jitflow.ops.math.arithmetic import add, multiply, subtract
        lo_v, hi_v = (np.asarray(t.op.attrs["value"]) if t.op.type == "Const" else None
                      for t in (lo, hi))
        if lo_v is not None and hi_v is not None and lo_v.ndim == 0 and hi_v.ndim == 0 \
                and lo_v == 0 and hi_v == 1:
            return make_op("Identity", [rnd], name=scope).outputs[0]
        return add(multiply(rnd, subtract(hi, lo)), lo, name=scope)


def _shuffle_ref(op, x, ctx):
    x = np.array(x, copy=True)
    if x.ndim:
        ctx.rng(op).shuffle(x, axis=0)
    return x


register("RandomShuffle", infer=lambda op: [(op.inputs[0].dtype, op.inputs[0].shape)],
         ref=_shuffle_ref, needs_ctx=True, stateful=True, differentiable=False, kind="random",
         examples=[Example(build=lambda x: random_shuffle(x, seed=2), inputs=[(4, 2)])])


def random_shuffle(value, seed=None, name: Optional[str] = None) -> Tensor:
    """`tf.random_shuffle`: permute `value` along its first dimension."""
    x = convert_to_tensor(value)
    return make_op("RandomShuffle", [x], _seed_attrs(seed), name=name).outputs[0]


def _multinomial_infer(op):
    logits = op.inputs[0]
    dims = logits.shape.as_tuple()
    if dims is not None and len(dims) != 2:
        raise ValueError(f"Shape must be rank 2 but is rank {len(dims)} for '{op.name}' "
                         "(op: 'Multinomial')")
    batch = None if dims is None else dims[0]
    return [(op.attrs["output_dtype"], TensorShape([batch, op.attrs["num_samples"]]))]


def _multinomial_ref(op, logits, ctx):
    logits = np.asarray(logits, dtype=np.float64)
    n = op.attrs["num_samples"]
    z = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(z)
    cdf = np.cumsum(p, axis=1)
    cdf /= cdf[:, -1:]
    u = ctx.rng(op).random((logits.shape[0], n))
    out = np.empty((logits.shape[0], n), dtype=np.int64)
    for i in range(logits.shape[0]):
        out[i] = np.minimum(np.searchsorted(cdf[i], u[i], side="right"), logits.shape[1] - 1)
    return out.astype(op.attrs["output_dtype"].as_numpy_dtype)


register("Multinomial", infer=_multinomial_infer, ref=_multinomial_ref, needs_ctx=True,
         stateful=True, differentiable=False, kind="random",
         examples=[Example(build=lambda x: multinomial(x, 3, seed=4), inputs=[(2, 4)])])


def multinomial(logits, num_samples, seed=None, name: Optional[str] = None,
                output_dtype=_dtypes.int64) -> Tensor:
    """`tf.multinomial` (`tf.random.categorical`): class indices drawn from each row of
    unnormalized log-probabilities."""
    x = convert_to_tensor(logits)
    static, dyn = _int_list_arg(num_samples, "num_samples")
    if dyn is not None:
        raise TypeError("multinomial: `num_samples` must be known when the graph is built")
    attrs = {"num_samples": static[0], "output_dtype": _dtypes.as_dtype(output_dtype),
             **_seed_attrs(seed)}
    return make_op("Multinomial", [x], attrs, name=name).outputs[0]
