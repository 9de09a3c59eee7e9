"""Candidate samplers and `compute_accidental_hits`, the pieces of the sampled losses.

A sampler op draws `num_sampled` classes in [0, range_max) from its distribution and returns
(sampled_candidates int64 [num_sampled], true_expected_count float32 [batch, num_true],
sampled_expected_count float32 [num_sampled]). The expected count of a class of probability p
is p * num_sampled, or with `unique=True` (drawing until num_sampled distinct classes, `tries`
draws in all) 1 - (1 - p)^tries, as TF computes it. Samplers draw with the session's generator
for the op (seeded as every jitflow random op); they are host ops.
"""
from __future__ import annotations

import math
import threading
from typing import Optional

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.core import errors
from jitflow.core.graph import convert_to_tensor, make_op, name_scope
from jitflow.ops.registry import register
from jitflow.core.shapes import TensorShape

__all__: list = []

_SAMPLERS = ["log_uniform_candidate_sampler", "uniform_candidate_sampler",
             "learned_unigram_candidate_sampler", "fixed_unigram_candidate_sampler",
             "all_candidate_sampler"]
NAMESPACES = {"nn": _SAMPLERS + ["compute_accidental_hits"], "random": _SAMPLERS}


# -- distributions --------------------------------------------------------------------------------
class _LogUniform:
    """P(k) = log((k + 2) / (k + 1)) / log(range_max + 1): Zipf-like, small ids frequent."""

    def __init__(self, range_max: int) -> None:
        self.range_max = range_max
        self.log_range = math.log(range_max + 1)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        v = np.exp(rng.random(n) * self.log_range).astype(np.int64) - 1
        return np.minimum(v, self.range_max - 1)

    def prob(self, k: np.ndarray) -> np.ndarray:
        k = np.asarray(k, dtype=np.float64)
        return np.log((k + 2.0) / (k + 1.0)) / self.log_range


class _Uniform:
    def __init__(self, range_max: int) -> None:
        self.range_max = range_max

    def sample(self, rng, n: int) -> np.ndarray:
        return rng.integers(0, self.range_max, size=n, dtype=np.int64)

    def prob(self, k) -> np.ndarray:
        return np.full(np.shape(k), 1.0 / self.range_max)


class _Weighted:
    """P(k) proportional to weights[k] (the unigram samplers)."""

    def __init__(self, weights: np.ndarray) -> None:
        self.weights = np.asarray(weights, dtype=np.float64)
        self.range_max = self.weights.size

    def sample(self, rng, n: int) -> np.ndarray:
        cdf = np.cumsum(self.weights)
        u = rng.random(n) * cdf[-1]
        return np.minimum(np.searchsorted(cdf, u, side="right"), self.range_max - 1)

    def prob(self, k) -> np.ndarray:
        return self.weights[np.asarray(k, dtype=np.int64)] / self.weights.sum()


def expected_count(p: np.ndarray, num_sampled: int, tries: int) -> np.ndarray:
    """TF's expected count of a class of probability `p` among the samples."""
    p = np.asarray(p, dtype=np.float64)
    if tries == num_sampled:
        return p * num_sampled
    return -np.expm1(tries * np.log1p(-p))


def _draw(dist, rng, num_sampled: int, unique: bool) -> tuple:
    """(samples, tries): with `unique`, draws until `num_sampled` distinct classes."""
    if not unique:
        return dist.sample(rng, num_sampled), num_sampled
    out: list = []
    seen: set = set()
    tries = 0
    while len(out) < num_sampled:
        batch = dist.sample(rng, max(2 * (num_sampled - len(out)), 8))
        for v in batch.tolist():
            tries += 1
            if v not in seen:
                seen.add(v)
                out.append(v)
                if len(out) == num_sampled:
                    break
    return np.array(out, dtype=np.int64), tries


# -- the sampler ops ------------------------------------------------------------------------------
def _sampler_infer(op):
    tc = op.inputs[0]
    if tc.dtype != _dtypes.int64:
        raise TypeError(f"Value passed to parameter 'true_classes' has DataType "
                        f"{tc.dtype.name} not in list of allowed values: int64")
    num_true, n = op.attrs["num_true"], op.attrs["num_sampled"]
    if tc.shape.ndims not in (None, 2):
        raise ValueError(f"Shape must be rank 2 but is rank {tc.shape.ndims} for '{op.name}' "
                         f"(op: '{op.type}') (true_classes)")
    dims = tc.shape.as_tuple() or (None, None)
    if dims[1] is not None and dims[1] != num_true:
        raise ValueError(f"true_classes must be a matrix [batch, num_true={num_true}], got "
                         f"shape {tc.shape} for '{op.name}'")
    return [(_dtypes.int64, TensorShape([n])), (_dtypes.float32, TensorShape([dims[0], num_true])),
            (_dtypes.float32, TensorShape([n]))]


class _LearnedState:
    """The class counts of a learned unigram sampler, owned by the session (all start at 1)."""

    def __init__(self, range_max: int) -> None:
        self.weights = np.ones(range_max, dtype=np.float64)
        self.lock = threading.Lock()


def _distribution(op, ctx):
    a = op.attrs
    t = op.type
    if t == "LogUniformCandidateSampler":
        return _LogUniform(a["range_max"])
    if t == "UniformCandidateSampler":
        return _Uniform(a["range_max"])
    if t == "LearnedUnigramCandidateSampler":
        res = ctx.store.resources
        state = res.get(op)
        if state is None:
            state = res.setdefault(op, _LearnedState(a["range_max"]))
        return _Weighted(state.weights.copy())
    if t == "FixedUnigramCandidateSampler":
        return _Weighted(a["weights"])
    raise KeyError(t)


def _sampler_ref(op, true_classes, ctx):
    a = op.attrs
    tc = np.asarray(true_classes, dtype=np.int64)
    n, unique = a["num_sampled"], a["unique"]
    if tc.ndim != 2 or tc.shape[1] != a["num_true"]:
        raise errors.InvalidArgumentError(
            None, op, f"true_classes must be a matrix [batch, {a['num_true']}], got shape "
                      f"{list(tc.shape)}\n\t [[node {op.name} ({op.type})]]")
    if op.type == "AllCandidateSampler":
        sampled = np.arange(n, dtype=np.int64)
        return (sampled, np.ones(tc.shape, np.float32), np.ones(n, np.float32))
    dist = _distribution(op, ctx)
    if unique and n > dist.range_max:
        raise errors.InvalidArgumentError(
            None, op, f"Sampler's range is too small: num_sampled {n} > range_max "
                      f"{dist.range_max} with unique=True\n\t [[node {op.name} ({op.type})]]")
    sampled, tries = _draw(dist, ctx.rng(op), n, unique)
    true_exp = expected_count(dist.prob(tc), n, tries).astype(np.float32)
    samp_exp = expected_count(dist.prob(sampled), n, tries).astype(np.float32)
    if op.type == "LearnedUnigramCandidateSampler":
        state = ctx.store.resources[op]
        with state.lock:  # TF learns from the true classes after sampling
            np.add.at(state.weights, tc.reshape(-1) % dist.range_max, 1.0)
    return sampled, true_exp, samp_exp


for _t in ("LogUniformCandidateSampler", "UniformCandidateSampler",
           "LearnedUnigramCandidateSampler", "FixedUnigramCandidateSampler",
           "AllCandidateSampler"):
    register(_t, infer=_sampler_infer, ref=_sampler_ref, needs_ctx=True, stateful=True,
             differentiable=False, kind="host",
             doc="Input true_classes int64 [batch, num_true]; outputs (sampled_candidates, "
                 "true_expected_count, sampled_expected_count).")


def _sampler(op_type: str, true_classes, num_true, num_sampled, unique, range_max, seed, name,
             default_name: str, **extra):
    if num_sampled < 1:
        raise ValueError(f"num_sampled must be positive, got {num_sampled}")
    with name_scope(name, default_name, [true_classes]) as scope:
        tc = convert_to_tensor(true_classes, dtype=None if hasattr(true_classes, "dtype")
                               and not isinstance(true_classes, np.ndarray)
                               else _dtypes.int64, name="true_classes")
        attrs = {"num_true": int(num_true), "num_sampled": int(num_sampled),
                 "unique": bool(unique), "range_max": int(range_max),
                 "seed": None if seed is None else int(seed), **extra}
        op = make_op(op_type, [tc], attrs, name=scope[:-1] if scope else op_type)
        return tuple(op.outputs)


def log_uniform_candidate_sampler(true_classes, num_true: int, num_sampled: int, unique: bool,
                                  range_max: int, seed=None, name: Optional[str] = None):
    """`tf.nn.log_uniform_candidate_sampler`: classes drawn with P(k) = log((k+2)/(k+1)) /
    log(range_max+1) (ids sorted by decreasing frequency)."""
    return _sampler("LogUniformCandidateSampler", true_classes, num_true, num_sampled, unique,
                    range_max, seed, name, "LogUniformCandidateSampler")


def uniform_candidate_sampler(true_classes, num_true: int, num_sampled: int, unique: bool,
                              range_max: int, seed=None, name: Optional[str] = None):
    """`tf.nn.uniform_candidate_sampler`: classes drawn uniformly from [0, range_max)."""
    return _sampler("UniformCandidateSampler", true_classes, num_true, num_sampled, unique,
                    range_max, seed, name, "UniformCandidateSampler")


def learned_unigram_candidate_sampler(true_classes, num_true: int, num_sampled: int,
                                      unique: bool, range_max: int, seed=None,
                                      name: Optional[str] = None):
    """`tf.nn.learned_unigram_candidate_sampler`: classes drawn in proportion to how often they
    were true classes in earlier runs (every count starts at 1; the session keeps them)."""
    return _sampler("LearnedUnigramCandidateSampler", true_classes, num_true, num_sampled,
                    unique, range_max, seed, name, "LearnedUnigramCandidateSampler")


def _unigram_weights(range_max, vocab_file, distortion, num_reserved_ids, num_shards, shard,
                     unigrams) -> np.ndarray:
    if vocab_file:
        counts = []
        with open(vocab_file, encoding="utf-8") as f:
            for line in f:
                line = line.rstrip("\n")
                if line:
                    counts.append(float(line.rsplit(",", 1)[-1]))
    else:
        counts = [float(u) for u in unigrams]
    w = np.concatenate([np.zeros(num_reserved_ids), np.power(np.asarray(counts), distortion)])
    if w.size != range_max:
        raise ValueError(f"fixed_unigram_candidate_sampler: range_max {range_max} does not "
                         f"match the {w.size} unigrams (with {num_reserved_ids} reserved ids)")
    if num_shards > 1:
        w[np.arange(w.size) % num_shards != shard] = 0.0
    return w


def fixed_unigram_candidate_sampler(true_classes, num_true: int, num_sampled: int, unique: bool,
                                    range_max: int, vocab_file: str = "",
                                    distortion: float = 1.0, num_reserved_ids: int = 0,
                                    num_shards: int = 1, shard: int = 0, unigrams=(), seed=None,
                                    name: Optional[str] = None):
    """`tf.nn.fixed_unigram_candidate_sampler`: classes drawn in proportion to given counts
    (`unigrams`, or the last comma-separated field of each line of `vocab_file`) raised to
    `distortion`; `num_reserved_ids` zero-weight ids come first."""
    w = _unigram_weights(range_max, vocab_file, distortion, num_reserved_ids, num_shards, shard,
                         unigrams)
    return _sampler("FixedUnigramCandidateSampler", true_classes, num_true, num_sampled, unique,
                    range_max, seed, name, "FixedUnigramCandidateSampler", weights=w)


def all_candidate_sampler(true_classes, num_true: int, num_sampled: int, unique: bool,
                          seed=None, name: Optional[str] = None):
    """`tf.nn.all_candidate_sampler`: the classes 0..num_sampled-1, each expected once."""
    return _sampler("AllCandidateSampler", true_classes, num_true, num_sampled, True,
                    num_sampled, seed, name, "AllCandidateSampler")


# -- accidental hits ------------------------------------------------------------------------------
_NEG_MAX = np.float32(-np.finfo(np.float32).max)


def _hits(true_classes, sampled) -> tuple:
    tc = np.asarray(true_classes, dtype=np.int64)
    s = np.asarray(sampled, dtype=np.int64)
    rows, cols = np.nonzero((tc[:, :, None] == s[None, None, :]).any(axis=1))
    return rows.astype(np.int32), cols.astype(np.int64)


def _hits_infer(op):
    return [(_dtypes.int32, TensorShape([None])), (_dtypes.int64, TensorShape([None])),
            (_dtypes.float32, TensorShape([None]))]


def _hits_ref(op, true_classes, sampled):
    rows, cols = _hits(true_classes, sampled)
    return rows, cols, np.full(rows.size, _NEG_MAX, np.float32)


register("ComputeAccidentalHits", infer=_hits_infer, ref=_hits_ref, differentiable=False,
         kind="host", doc="Inputs (true_classes, sampled_candidates): the (row, sample) pairs "
                          "where a sample is one of the row's true classes, weight -FLT_MAX.")


def compute_accidental_hits(true_classes, sampled_candidates, num_true: int, seed=None,
                            name: Optional[str] = None):
    """`tf.nn.compute_accidental_hits`: (indices int32, ids int64, weights float32) of the
    sampled candidates that equal a true class of a row."""
    with name_scope(name, "ComputeAccidentalHits", [true_classes, sampled_candidates]) as scope:
        tc = convert_to_tensor(true_classes, name="true_classes")
        sc = convert_to_tensor(sampled_candidates, name="sampled_candidates")
        if tc.dtype != _dtypes.int64 or sc.dtype != _dtypes.int64:
            raise TypeError("compute_accidental_hits: true_classes and sampled_candidates must "
                            "be int64")
        op = make_op("ComputeAccidentalHits", [tc, sc], {"num_true": int(num_true)},
                     name=scope[:-1] if scope else None)
        return tuple(op.outputs)


def _hit_mask_infer(op):
    tc, s = op.inputs
    rows = tc.shape.as_tuple()[0] if tc.shape.ndims else None
    cols = s.shape.as_tuple()[0] if s.shape.ndims else None
    return [(op.attrs["dtype"], TensorShape([rows, cols]))]


def _hit_mask_ref(op, true_classes, sampled):
    tc = np.asarray(true_classes, dtype=np.int64)
    s = np.asarray(sampled, dtype=np.int64)
    out = np.zeros((tc.shape[0], s.size), dtype=op.attrs["dtype"].as_numpy_dtype)
    rows, cols = _hits(tc, s)
    out[rows, cols] = _NEG_MAX
    return out


register("AccidentalHitsMask", infer=_hit_mask_infer, ref=_hit_mask_ref, differentiable=False,
         kind="host", doc="Inputs (true_classes, sampled_candidates): [batch, num_sampled] of "
                          "-FLT_MAX at accidental hits and 0 elsewhere (compute_accidental_hits "
                          "scattered densely, on the host).")
