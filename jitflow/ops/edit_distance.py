"""`tf.edit_distance`: the Levenshtein distance between the sequences of two SparseTensors.

Each position of the leading (batch) dimensions holds one sequence: the values whose indices
share those leading coordinates, in the order they appear (the last coordinate orders them in
a canonical SparseTensor; its value and any gaps play no part). The result has the leading
dimensions (the larger of the two dense shapes in each) and, with `normalize`, each distance
is divided by the truth's length: an empty truth gives inf (0 when the hypothesis is empty too).
A host op: the sequences' lengths are only known when it runs.
"""
from __future__ import annotations

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.core import errors
from jitflow.core.graph import Tensor, make_op
from jitflow.core.shapes import TensorShape
from jitflow.ops.registry import Example, register
from jitflow.ops.sparse import SparseTensor

__all__ = ["edit_distance"]


def levenshtein(a, b) -> int:
    """The fewest insertions, deletions and substitutions turning sequence `a` into `b`."""
    if len(a) < len(b):
        a, b = b, a
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]


def _static_shape(t: Tensor):
    if t.op.type == "Const":
        return [int(d) for d in np.reshape(t.op.attrs["value"], -1)]
    return None


def _infer(op):
    hi, hv, hs, ti, tv, ts = op.inputs
    if hv.dtype != tv.dtype:
        raise TypeError(f"edit_distance: truth values {tv.name!r} ({tv.dtype.name}) must have "
                        f"the dtype of the hypothesis values {hv.name!r} ({hv.dtype.name})")
    h_static, t_static = _static_shape(hs), _static_shape(ts)
    rank_h, rank_t = hs.shape.as_tuple(), ts.shape.as_tuple()
    rank_h = None if rank_h is None else rank_h[0]
    rank_t = None if rank_t is None else rank_t[0]
    if rank_h is not None and rank_t is not None and rank_h != rank_t:
        raise ValueError(f"edit_distance: hypothesis and truth must have the same rank, got "
                         f"dense shapes of {rank_h} and {rank_t} elements for '{op.name}'")
    rank = rank_h if rank_h is not None else rank_t
    if h_static is not None and t_static is not None:
        out = TensorShape([max(a, b) for a, b in zip(h_static[:-1], t_static[:-1])])
    elif rank is not None:
        out = TensorShape([None] * max(rank - 1, 0))
    else:
        out = TensorShape(None)
    return [(_dtypes.float32, out)]


def _sequences(op, what: str, indices, values, shape) -> dict:
    """{leading coordinates: [values in order]} of one SparseTensor."""
    indices = np.asarray(indices, np.int64).reshape(-1, len(shape))
    values = np.asarray(values)
    if values.shape[0] != indices.shape[0]:
        raise errors.InvalidArgumentError(
            None, op, f"edit_distance: {what} has {indices.shape[0]} indices but "
                      f"{values.shape[0]} values")
    bad = np.any((indices < 0) | (indices >= np.asarray(shape, np.int64)), axis=1)
    if np.any(bad):
        i = int(np.argmax(bad))
        raise errors.InvalidArgumentError(
            None, op, f"edit_distance: {what} index {list(indices[i])} is out of bounds of its "
                      f"dense shape {list(shape)}")
    seqs: dict = {}
    for key, v in zip(map(tuple, indices[:, :-1].tolist()), values.tolist()):
        seqs.setdefault(key, []).append(v)
    return seqs


def _ref(op, hi, hv, hs, ti, tv, ts):
    hs = [int(d) for d in np.reshape(hs, -1)]
    ts = [int(d) for d in np.reshape(ts, -1)]
    if len(hs) != len(ts):
        raise errors.InvalidArgumentError(
            None, op, f"edit_distance: hypothesis and truth must have the same rank, got "
                      f"dense shapes {hs} and {ts}")
    if not hs:
        raise errors.InvalidArgumentError(
            None, op, "edit_distance: the SparseTensors must have rank 1 or more, got rank 0")
    out_shape = tuple(max(a, b) for a, b in zip(hs[:-1], ts[:-1]))
    hyp = _sequences(op, "hypothesis", hi, hv, hs)
    truth = _sequences(op, "truth", ti, tv, ts)
    out = np.zeros(out_shape, np.float32)
    normalize = op.attrs["normalize"]
    for key in set(hyp) | set(truth):
        h, t = hyp.get(key, []), truth.get(key, [])
        d = float(levenshtein(h, t))
        if normalize:
            d = d / len(t) if t else (np.inf if h else 0.0)
        out[key] = d
    return out


register("EditDistance", infer=_infer, ref=_ref, differentiable=False, kind="host",
         default_name="edit_distance",
         doc="Inputs (hypothesis indices, values, shape, truth indices, values, shape): the "
             "Levenshtein distance of the sequences at each leading position (float32).",
         examples=[Example(
             build=lambda h, t: edit_distance(
                 SparseTensor([[0, 0], [0, 1], [1, 0]], h, [2, 2]),
                 SparseTensor([[0, 0], [1, 0], [1, 1]], t, [2, 2])),
             inputs=[(3,), (3,)], dtypes=("int32",), domain="int", grad=False,
             # [h0, h1] against [t0]: drop one, 1 more unless t0 is among them; [h2] against
             # [t1, t2]: insert one, 1 more unless h2 is among them, over the truth's length 2
             expect=lambda h, t: np.array(
                 [1.0 + (t[0] not in h[:2]), (1.0 + (h[2] not in t[1:])) / 2.0],
                 np.float32))])


def edit_distance(hypothesis, truth, normalize: bool = True,
                  name: str = "edit_distance") -> Tensor:
    """`tf.edit_distance`: the Levenshtein distance between the sequences of two SparseTensors
    (one per position of their leading dimensions), divided by the truth's lengths when
    `normalize` (float32, the leading dimensions' shape)."""
    if not isinstance(hypothesis, SparseTensor):
        raise TypeError("Hypothesis must be a SparseTensor.")
    if not isinstance(truth, SparseTensor):
        raise TypeError("Truth must be a SparseTensor.")
    inputs = [hypothesis.indices, hypothesis.values, hypothesis.dense_shape,
              truth.indices, truth.values, truth.dense_shape]
    return make_op("EditDistance", inputs, {"normalize": bool(normalize)},
                   name=name).outputs[0]
