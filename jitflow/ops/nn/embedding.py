"""`tf.nn.embedding_lookup`: rows of a table at ids (a gather), also of a table split in
shards, with optional max-norm clipping; and `embedding_lookup_sparse`, the embeddings of each
row of a SparseTensor of ids combined (sum, mean or sqrtn).
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.core.graph import Tensor, convert_to_tensor, name_scope
from jitflow.ops.math.casting import cast
from jitflow.ops.math.common import scalar_like
from jitflow.ops.math.compare import equal, less, maximum, minimum, where_v2

__all__: list = []

NAMESPACES = {
    "nn": [
        "embedding_lookup", "embedding_lookup_sparse",
    ],
}


def embedding_lookup(params, ids, partition_strategy: str = "mod", name: Optional[str] = None,
                     validate_indices: bool = True, max_norm=None) -> Tensor:
    """`tf.nn.embedding_lookup`: rows of `params` at `ids` (a gather on axis 0), rescaled to
    l2 norm at most `max_norm` when given. A list of params is one table split in shards by
    `partition_strategy` ("mod": id i is row i // n of shard i % n; "div": contiguous
    blocks, the first shards one row longer)."""
    from jitflow.ops.slicing import gather
    if isinstance(params, (list, tuple)):
        if not params:
            raise ValueError("Need at least one param")
        if partition_strategy not in ("mod", "div"):
            raise ValueError(f"Unrecognized partition strategy: {partition_strategy}")
        if len(params) == 1:
            params = params[0]
    with name_scope(name, "embedding_lookup", [params, ids]) as scope:
        if isinstance(params, (list, tuple)):
            rows = _sharded_lookup(list(params), ids, partition_strategy,
                                   None if max_norm is not None else scope)
        else:
            rows = gather(params, ids, name=None if max_norm is not None else scope)
        if max_norm is None:
            return rows
        from jitflow.ops.linalg import clip_by_norm
        r = rows.shape.ndims
        if r is None:
            raise ValueError("embedding_lookup with max_norm needs params of known rank")
        return clip_by_norm(rows, max_norm, axes=list(range(_ids_rank(ids), r)), name=scope)


def _sharded_lookup(params: list, ids, strategy: str, name) -> Tensor:
    """Rows of a table split in shards: each shard is gathered at the ids it owns (others
    clipped into range) and the rows selected by owner, so the lookup and its gradient stay
    dense gathers and selects that compile, without a partition/stitch on the host."""
    from jitflow.ops.shape_ops import expand_dims, shape as shape_of
    from jitflow.ops.slicing import gather
    from jitflow.ops.math.common import add_n
    ps = [convert_to_tensor(p, name="params") for p in params]
    ids = convert_to_tensor(ids, name="ids")
    n = len(ps)
    sizes = [p.shape.as_tuple()[0] if p.shape.ndims else None for p in ps]
    sizes = [scalar_like(s, ids) if s is not None else cast(shape_of(p)[0], ids.dtype)
             for s, p in zip(sizes, ps)]
    one = scalar_like(1, ids)
    if strategy == "mod":
        owner = ids % scalar_like(n, ids)
        local = ids // scalar_like(n, ids)
    else:
        total = add_n(sizes) if n > 1 else sizes[0]
        per = total // scalar_like(n, ids)
        extras = total % scalar_like(n, ids)
        owner = maximum(ids // (per + one), (ids - extras) // per)
        first = cast(less(owner, extras), ids.dtype)
        local = first * (ids % (per + one)) + (one - first) * ((ids - extras) % per)
    rank = ps[0].shape.ndims
    if rank is None:
        raise ValueError("embedding_lookup over several shards needs params of known rank")
    out = None
    for i, (p, size) in enumerate(zip(ps, sizes)):
        safe = maximum(scalar_like(0, ids), minimum(local, size - one))
        rows = gather(p, safe)
        mine = equal(owner, scalar_like(i, ids))
        for _ in range(rank - 1):
            mine = expand_dims(mine, -1)
        out = where_v2(mine, rows, scalar_like(0, rows) if out is None else out,
                       name=name if i == n - 1 else None)
    return out


def _ids_rank(ids) -> int:
    """The rank of `ids` (a tensor or a Python/NumPy value)."""
    return ids.shape.ndims if isinstance(ids, Tensor) else np.ndim(ids)


# -- embedding_lookup_sparse ----------------------------------------------------------------------
def embedding_lookup_sparse(params, sp_ids, sp_weights, partition_strategy: str = "mod",
                            name: Optional[str] = None, combiner: Optional[str] = None,
                            max_norm=None) -> Tensor:
    """`tf.nn.embedding_lookup_sparse`: for each row of the SparseTensor `sp_ids`, the
    embeddings of its ids combined ("sum", "mean" (default) or "sqrtn"), weighted by
    `sp_weights` when given."""
    from jitflow.ops.shape_ops import expand_dims
    from jitflow.ops.math.arithmetic import div_no_nan
    from jitflow.ops.math.unary import sqrt, square
    from jitflow.ops.segment import segment_sum
    combiner = combiner or "mean"
    if combiner not in ("sum", "mean", "sqrtn"):
        raise ValueError("combiner must be one of 'mean', 'sqrtn' or 'sum'")
    with name_scope(name, "embedding_lookup_sparse", [sp_ids]):
        rows = cast(sp_ids.indices[:, 0], _dtypes.int32)
        ids = sp_ids.values
        emb = embedding_lookup(params, ids, partition_strategy=partition_strategy,
                               max_norm=max_norm)
        if sp_weights is None:
            total = segment_sum(emb, rows)
            if combiner == "sum":
                return total
            ones = cast(ids * 0 + 1, emb.dtype)
            cnt = segment_sum(ones, rows)
            div = cnt if combiner == "mean" else sqrt(cnt)
            return div_no_nan(total, expand_dims(div, -1))  # an empty row stays 0
        w = cast(sp_weights.values, emb.dtype)
        total = segment_sum(emb * expand_dims(w, -1), rows)
        if combiner == "sum":
            return total
        wsum = segment_sum(w if combiner == "mean" else square(w), rows)
        div = wsum if combiner == "mean" else sqrt(wsum)
        return div_no_nan(total, expand_dims(div, -1))
