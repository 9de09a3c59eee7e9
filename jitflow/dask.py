"""Compiled run signatures over Dask arrays: scoring, full-data gradients and synchronous
data-parallel training, on the current `dask.distributed` cluster or Dask's local threads.

    import jitflow.dask as jfd
    scores = jfd.predict(sess, probs, x, X)              # X: a dask array; lazy, chunked as X
    grads = jfd.gradients(sess, loss, [w, b], {x: X, y: Y})           # NumPy arrays
    losses = jfd.fit(sess, train_op, loss, {x: X, y: Y}, batch_size=4096, epochs=2)

Needs the `dask` extra (`pip install jitflow[dask]`: dask[array], distributed, tqdm).

What the workers get is an export of the run signature (`jitflow.export_files`: the generated
module's text, the variables as an `.npz` and the manifest with the sha256 of both), never the
graph or the session. A worker loads it from those bytes with the checks `jitflow.load` makes
(hashes, then the module compiled from the checked text, the state parsed without pickles),
keeps the loaded function per process keyed by the manifest's sha256, and the compiled module
keyed by its own sha256: each worker process compiles a module once (seconds) and reuses it
for every later chunk, call and training step. The variables are read from the session when
`predict`/`gradients` is called (and at every step of `fit`), so later training does not change
an array that `predict` already returned. Workers need jitflow, numpy and numba installed.

Rows: every feed is split along axis 0 only (other axes are rechunked to one chunk). A chunk
of one row uses a function exported for that shape class (a `None` dim of size 1 may
broadcast), so any chunking works. Ops without a code generator (random ops, e.g. dropout)
cannot be exported and so cannot be distributed.

predict: every fetch must have the batch dim first (its first static dim `None`, or the
feed's own static first dim), and each chunk's result must have as many rows as the chunk:
reductions over rows (a mean loss, an accuracy) are refused with a ValueError, since they do
not split into chunks; fetch the per-row values instead and reduce the Dask array
(`jfd.predict(sess, per_row_loss, x, X).mean()`).

gradients: the gradient of a loss that is a mean over the batch rows (`loss_reduction="mean"`,
the default: `reduce_mean`, `tf.losses.*` with their default reduction) is rebuilt from
per-chunk sums: chunk c of n_c rows gives n_c * grad(mean over the chunk) = the gradient of the
loss summed over its rows; the sums are added on the cluster (a tree of tasks, in float64)
and divided by the total row count N. That is the gradient of the mean over all N rows, equal
to the one-process `sess.run(tf.gradients(loss, var_list), whole data)` up to float rounding;
terms that do not depend on the rows (an L2 penalty on the weights) come out right too, since
the weights n_c/N add up to 1. For a loss summed over rows (`loss_reduction="sum"`) the chunk
gradients are added unscaled, which equals the one-process gradient of the sum over all rows
(a penalty term in such a loss would be counted once per chunk: keep those losses a mean).

fit: each step takes the next `batch_size` rows (in order; the last batch of an epoch may be
smaller), splits them into one shard per worker, and each worker computes the loss and the
gradients the train op applies on its shard (with the variables shipped that step); the
driver combines them as `gradients` does and runs the train op with those gradients fed, so
the session's own optimizer updates the variables and its slots (Adam's moments and powers,
momentum accumulators, `global_step`) exactly as a one-process `sess.run(train_op, batch)`
would, up to float rounding. Cost per step, on top of the shard computations: sending the
variables to every worker (an `.npz` of all the variables the gradients read), one scheduler
round trip with the gradients coming back (float64), and the update on the driver: 20-40 ms
a step on a loaded 2-core machine with a 64-256-256-10 MLP (benchmarks/dask_scale.py: a step
of batch 1,024 took 21 ms in one process, 41 ms on 2 workers). It pays only when a shard's
gradient takes well over that (batches of tens of thousands of rows through such a model, or
larger models) and each worker has a core of its own; below that, one process is faster.
Each call of `fit` also persists its rows on the workers once (one shard of every batch per
worker) and sends the compiled module once.
"""
from __future__ import annotations

import collections
import hashlib
import json
import math
import os
import threading
import weakref
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from jitflow.core.graph import Operation, Tensor
from jitflow.runtime import config

__all__ = ["predict", "gradients", "fit", "current_client", "STATS"]

_MANIFEST = "manifest.json"

#: per process: exports loaded (a new manifest: new variables or a new function), loads served
#: from the cache, and distinct modules compiled
STATS = {"loads": 0, "hits": 0, "modules": 0}
_LOCK = threading.Lock()
_LOADED: "collections.OrderedDict[str, Any]" = collections.OrderedDict()
_MODULES: set = set()
_MAX_LOADED = 8


def _dask():
    try:
        import dask
        import dask.array as da
        import dask.threaded  # noqa: F401  (the local scheduler fit uses without a cluster)
    except ImportError:
        raise ImportError("jitflow.dask needs Dask: pip install 'jitflow[dask]' (dask[array] "
                          "and distributed)") from None
    return dask, da


def current_client():
    """The `distributed.Client` Dask would compute on here (the one made current with
    `client.as_current()`, else the default one), or None: then Dask's local scheduler
    (threads) runs the work. A `scheduler` other than "distributed" set in `dask.config`
    wins, as it does for `dask.compute`."""
    dask, _ = _dask()
    configured = dask.config.get("scheduler", None)
    if configured is not None and not (isinstance(configured, str) and configured.lower()
                                       in ("dask.distributed", "distributed")):
        return configured if "Client" in type(configured).__name__ else None
    try:
        from distributed import Client
    except ImportError:
        return None
    try:
        client = Client.current(allow_global=True)
    except ValueError:
        return None
    return None if getattr(client, "status", "running") in ("closed", "closing") else client


# -- the worker side --------------------------------------------------------------------------
_TUNED: list = []


def _tune_worker_allocator() -> bool:
    """Raise glibc's mmap and trim thresholds in this process, as a Session does for its
    compiled kernels (jitflow/compiler/memory.py), once.

    A Dask nanny starts its workers with MALLOC_TRIM_THRESHOLD_=65536, so every large array
    a kernel returns and frees goes back to the OS and the next chunk page-faults it in again
    (measured: 0.36 s instead of 0.25 s per 50,000-row chunk of benchmarks/dask_scale.py's
    MLP). The thresholds are raised only where that value is Dask's own setting (not a
    user's), nothing else tunes malloc, and JITFLOW_MALLOC_TUNE is not 0. A worker may then
    keep up to 256 MiB of freed memory for reuse."""
    if _TUNED:
        return _TUNED[0]
    applied = False
    env = os.environ
    try:
        import dask
        dask_default = dask.config.get("distributed.nanny.pre-spawn-environ", {}).get(
            "MALLOC_TRIM_THRESHOLD_")
    except ImportError:
        dask_default = None
    from_dask = (dask_default is not None
                 and env.get("MALLOC_TRIM_THRESHOLD_") == str(dask_default))
    if config.get("JITFLOW_MALLOC_TUNE") and from_dask \
            and "MALLOC_MMAP_THRESHOLD_" not in env and "GLIBC_TUNABLES" not in env:
        import ctypes
        import sys

        from jitflow.backends.numba_cpu import memory
        if sys.platform.startswith("linux"):
            try:
                libc = ctypes.CDLL("libc.so.6")
                if hasattr(libc, "gnu_get_libc_version"):
                    applied = bool(libc.mallopt(memory._M_MMAP_THRESHOLD, memory.THRESHOLD)) \
                        and bool(libc.mallopt(memory._M_TRIM_THRESHOLD, memory.THRESHOLD))
            except OSError:
                applied = False
    _TUNED.append(applied)
    return applied


def _function(files: Mapping[str, bytes]):
    """The function of an export, from its files' bytes: loaded (checked, the module compiled
    once per process) on first use, then served from this process's cache."""
    from jitflow.export import load_files
    if not _TUNED:
        _tune_worker_allocator()
    key = hashlib.sha256(files[_MANIFEST]).hexdigest()
    with _LOCK:
        fn = _LOADED.get(key)
        if fn is not None:
            _LOADED.move_to_end(key)
            STATS["hits"] += 1
            return fn
    fn = load_files(files, label=f"<jitflow.dask export {key[:12]}>")
    digest = fn.manifest["files"][fn.manifest["module"]]
    with _LOCK:
        _LOADED[key] = fn
        STATS["loads"] += 1
        if digest not in _MODULES:
            _MODULES.add(digest)
            STATS["modules"] += 1
        while len(_LOADED) > _MAX_LOADED:
            _LOADED.popitem(last=False)
    return fn


def _row_class(rows: int) -> int:
    """The shape class of a batch dim: 1 (it may broadcast) or 2 (any other size)."""
    return 1 if rows == 1 else 2


def _as_feed(value, dtype: str) -> np.ndarray:
    """A chunk converted to the feed's dtype, as Session.run converts fed values."""
    return np.asarray(value, dtype=np.dtype(dtype))


def _pieces(rows: int, per_call: Optional[int]) -> list:
    """(start, size) of the row pieces a chunk runs as: near-equal, at most `per_call` rows
    each where that leaves no piece of one row (that would be another shape class)."""
    if not per_call or rows <= per_call:
        return [(0, rows)]
    sizes = _split(rows, min(-(-rows // per_call), rows // 2))
    starts = np.cumsum([0] + sizes[:-1])
    return [(int(a), n) for a, n in zip(starts, sizes)]


def _predict_block(chunk, payload: dict):
    rows = chunk.shape[0]
    fn = _function(payload["exports"][_row_class(rows)])
    feed = _as_feed(chunk, payload["dtype"])
    parts = [fn(feed[lo:lo + n], *payload["extra"])
             for lo, n in _pieces(rows, payload["rows_per_call"])]
    out = parts[0] if len(parts) == 1 else [np.concatenate(vs) for vs in zip(*parts)]
    for (name, dims), v in zip(payload["outputs"], out):
        want = (rows, *dims)
        if np.shape(v) != want:
            raise ValueError(
                f"jitflow.dask.predict: fetch {name} has shape {np.shape(v)} for a chunk of "
                f"{rows} rows, expected {want}: predict needs fetches whose first dim is the "
                "batch dim and whose other dims do not depend on the data values")
    return out[0] if payload["single"] else tuple(out)


def _pick(block, i: int):
    return block[i]


def _summed(fn, feeds: list, extra: list, per_call: Optional[int], reduction: str) -> list:
    """The fetches (a loss and gradients) summed over the rows of `feeds`, in float64: a
    piece's mean-reduced values times its rows (`reduction="mean"`), or as they are ("sum")."""
    total: Optional[list] = None
    for lo, n in _pieces(feeds[0].shape[0], per_call):
        out = fn(*[f[lo:lo + n] for f in feeds], *extra)
        weight = float(n) if reduction == "mean" else 1.0
        part = [np.asarray(v, dtype=np.float64) * weight for v in out]
        total = part if total is None else [t + p for t, p in zip(total, part)]
    return total


def _grad_block(payload: dict, *blocks) -> list:
    """A chunk's contribution: the gradients of its loss summed over its rows (float64)."""
    fn = _function(payload["exports"][_row_class(blocks[0].shape[0])])
    feeds = [_as_feed(b, d) for b, d in zip(blocks, payload["dtypes"])]
    return _summed(fn, feeds, payload["extra"], payload["rows_per_call"], payload["reduction"])


def _add(*parts: list) -> list:
    total = [np.array(g, copy=True) for g in parts[0]]
    for p in parts[1:]:
        for t, g in zip(total, p):
            t += g
    return total


def _shard_step(modules: dict, step: dict, how: dict, *shards) -> list:
    """One worker's share of a training step: the loss and the gradients on its shard, summed
    over its rows (see `_summed`), with the variables of this step (`step`: the manifest and
    state bytes per row class)."""
    cls = _row_class(shards[0].shape[0])
    fn = _function({**modules[cls], **step[cls]})
    feeds = [_as_feed(s, d) for s, d in zip(shards, how["dtypes"])]
    return _summed(fn, feeds, how["extra"], how["rows_per_call"], how["reduction"])


# -- the driver side --------------------------------------------------------------------------
#: session -> {signature key: files of its export}: the module and manifest layout of a run
#: signature do not change (ops are immutable once built), only the variables' values do
_EXPORTS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_MAX_EXPORTS = 32


class _Exports:
    """Exports of one run signature, one per row class, with the session's variables as they
    are when asked for. Each is generated once per session and signature; later calls only
    replace its state (`with_state`)."""

    def __init__(self, sess, fetches: list, feeds: list, extra: Sequence[tuple], samples: list,
                 what: str) -> None:
        self.sess, self.fetches, self.feeds, self.what = sess, fetches, feeds, what
        self.extra = list(extra)          # [(tensor, value)] fed whole to every call
        self.samples = [tuple(int(d) for d in rest) for rest in samples]  # shapes past axis 0
        self.files: dict = {}

    def _key(self, cls: int) -> tuple:
        extra = tuple((t, v.dtype.str, tuple(v.shape), tuple(d == 1 for d in v.shape))
                      for t, v in self.extra)
        return (self.what, tuple(self.fetches), tuple(self.feeds), tuple(self.samples), extra,
                cls)

    def get(self, cls: int) -> dict:
        """The files of the export for row class `cls`, holding the variables' values now."""
        files = self.files.get(cls)
        if files is not None:
            return files
        from jitflow.export import _state_values, export_files, with_state
        cache = _EXPORTS.setdefault(self.sess, collections.OrderedDict())
        key = self._key(cls)
        template = cache.get(key)
        if template is None:
            values = [np.zeros((cls, *rest), t.dtype.as_numpy_dtype)
                      for t, rest in zip(self.feeds, self.samples)]
            values += [v for _, v in self.extra]
            try:
                template = export_files(self.sess, self.fetches,
                                        self.feeds + [t for t, _ in self.extra],
                                        name=self.what, feed_values=values)
            except NotImplementedError as e:
                raise NotImplementedError(f"jitflow.dask.{self.what}: cannot ship this run "
                                          f"signature to workers: {e}") from None
            cache[key] = template
            while len(cache) > _MAX_EXPORTS:
                cache.popitem(last=False)
            files = template
        else:
            cache.move_to_end(key)
            graph = self.sess.graph
            manifest = json.loads(template[_MANIFEST])
            ops = [graph.get_operation_by_name(v["name"])
                   for v in manifest["state"]["variables"]]
            files = with_state(template, {o.name: v
                                          for o, v in _state_values(self.sess, ops).items()})
        self.files[cls] = files
        return files


def _resolve_feed_dict(graph, feed_dict: Optional[Mapping], what: str) -> list:
    from jitflow.core.session import _feed_check
    out = []
    for k, v in (feed_dict or {}).items():
        t = graph.as_graph_element(k, allow_tensor=True, allow_operation=False)
        out.append((t, _feed_check(t)(v)))
    return out


def _check_data(t: Tensor, arr, what: str):
    """`arr` as a dask array whose shape fits the placeholder `t`, split along axis 0 only."""
    _, da = _dask()
    arr = da.asarray(arr)
    dims = t.shape.as_tuple()
    shape_str = str(t.shape)
    if dims is not None and (arr.ndim != len(dims)
                             or any(d is not None and not math.isnan(s) and d != s
                                    for d, s in zip(dims[1:], arr.shape[1:]))):
        raise ValueError(f"jitflow.dask.{what}: cannot feed a dask array of shape "
                         f"{arr.shape} for Tensor '{t.name}', which has shape '{shape_str}'")
    if arr.ndim == 0:
        raise ValueError(f"jitflow.dask.{what}: the data for Tensor '{t.name}' is a scalar; "
                         "it needs rows (axis 0) to split")
    if any(math.isnan(c) for c in arr.chunks[0]) or any(math.isnan(s) for s in arr.shape):
        raise ValueError(f"jitflow.dask.{what}: the data for Tensor '{t.name}' has unknown "
                         "chunk sizes; call .compute_chunk_sizes() on it first")
    if dims is not None and dims[0] is not None and any(c != dims[0] for c in arr.chunks[0]):
        raise ValueError(f"jitflow.dask.{what}: Tensor '{t.name}' has shape '{shape_str}', so "
                         f"every chunk must have {dims[0]} rows; the chunks have "
                         f"{sorted(set(arr.chunks[0]))}")
    if arr.ndim > 1 and any(len(c) > 1 for c in arr.chunks[1:]):
        arr = arr.rechunk({i: -1 for i in range(1, arr.ndim)})
    return arr


def _payload(dask, obj):
    """`obj` as one key of the graph: sent once to each worker that needs it."""
    return dask.delayed(obj, pure=True, traverse=False)


def predict(sess, fetches, feed, data, *, feed_dict: Optional[Mapping] = None):
    """`sess.run(fetches, {feed: chunk, **feed_dict})` on every chunk of the Dask array `data`
    along axis 0, as a lazy Dask array (a tuple of them when `fetches` is a list or tuple),
    chunked along axis 0 as `data`, with the fetches' dtypes and static shapes (their `None`
    dims are the chunk's rows).

    The variables are read from `sess` now. Fetches must have the batch dim first (see the
    module docstring); a fetch that updates variables, or an Operation, is refused. A worker
    runs a chunk as calls of a few thousand rows (`_rows_per_call`): the result equals
    `sess.run` on the concatenated data for fetches computed row by row; a fetch that mixes
    rows (statistics of its batch) would get those of each call's rows.
    """
    dask, da = _dask()
    graph = sess.graph
    single = not isinstance(fetches, (list, tuple))
    flat = [fetches] if single else list(fetches)
    if not flat:
        raise ValueError("jitflow.dask.predict: no fetches")
    tensors = []
    for f in flat:
        t = graph.as_graph_element(f, allow_tensor=True, allow_operation=True)
        if isinstance(t, Operation):
            raise TypeError(f"jitflow.dask.predict: fetch {t.name!r} is an Operation; predict "
                            "returns arrays: fetch Tensors")
        tensors.append(t)
    feed = graph.as_graph_element(feed, allow_tensor=True, allow_operation=False)
    data = _check_data(feed, data, "predict")
    extra = _resolve_feed_dict(graph, feed_dict, "predict")
    if any(t is feed for t, _ in extra):
        raise ValueError(f"jitflow.dask.predict: {feed.name} is both the data feed and in "
                         "feed_dict")
    batch_dim = (feed.shape.as_tuple() or (None,))[0]
    outputs = []
    for t in tensors:
        dims = t.shape.as_tuple()
        if dims is None or not dims or dims[0] not in (None, batch_dim):
            raise ValueError(
                f"jitflow.dask.predict: fetch {t.name} has shape '{t.shape}', but predict "
                f"maps the chunks of {feed.name} along axis 0 and needs fetches whose first "
                "dim is the batch dim; a reduction over rows does not split into chunks: "
                "fetch per-row values and reduce the returned Dask array")
        outputs.append([t.name, list(dims[1:])])
    if any(d is None for _, dims in outputs for d in dims):
        outputs = _probe_dims(sess, tensors, feed, data, extra, outputs)
    exports = _Exports(sess, tensors, [feed], extra, [data.shape[1:]], "predict")
    classes = sorted({_row_class(c) for c in data.chunks[0]})
    payload = {"exports": {c: exports.get(c) for c in classes},
               "dtype": np.dtype(feed.dtype.as_numpy_dtype).str,
               "extra": [v for _, v in extra], "outputs": outputs, "single": single,
               "rows_per_call": _rows_per_call(tensors, [feed])}
    manifest = json.loads(payload["exports"][classes[0]][_MANIFEST])
    if manifest["updates"]:
        raise ValueError(f"jitflow.dask.predict: these fetches update variables "
                         f"({', '.join(manifest['updates'])}); predict runs side-effect-free "
                         "signatures only")
    token = dask.base.tokenize(*[files[_MANIFEST] for files in payload["exports"].values()],
                               payload["extra"], data.name)
    out_chunks = [(data.chunks[0], *((d,) for d in dims)) for _, dims in outputs]
    dtypes = [np.dtype(t.dtype.as_numpy_dtype) for t in tensors]
    shared = _payload(dask, payload)
    if single:
        return _map_rows(da, _predict_block, data, shared, chunks=out_chunks[0],
                         dtype=dtypes[0], name=f"jitflow-predict-{token}")
    raw = _map_rows(da, _predict_block, data, shared, chunks=(data.chunks[0],), dtype=object,
                    name=f"jitflow-predict-{token}")
    return tuple(_map_rows(da, _pick, raw, i, chunks=ch, dtype=dt,
                           name=f"jitflow-predict-{i}-{token}")
                 for i, (ch, dt) in enumerate(zip(out_chunks, dtypes)))


def _map_rows(da, func, arr, *args, chunks, dtype, name):
    """map_blocks from `arr` (split along axis 0 only) to blocks of `len(chunks)` dims."""
    ndim = len(chunks)
    kw: dict = {}
    if ndim > arr.ndim:
        kw["new_axis"] = list(range(arr.ndim, ndim))
    elif ndim < arr.ndim:
        kw["drop_axis"] = list(range(ndim, arr.ndim))
    return da.map_blocks(func, arr, *args, chunks=chunks, dtype=dtype, name=name,
                         meta=np.empty((0,) * ndim, dtype=dtype), **kw)


#: the largest array with the batch dim first that one kernel call may make (bytes)
_CALL_BYTES = 4 << 20


def _rows_per_call(fetches: list, feeds: list) -> Optional[int]:
    """How many rows a worker passes to one call of the exported function: a chunk runs as
    pieces whose widest tensor with the batch dim first stays under _CALL_BYTES (None: no
    limit known). Large temporaries cost a worker more than this process: Dask runs tasks in
    threads, and glibc serves a thread's blocks over 64 MiB by a fresh mmap every call
    (measured: a 100,000-row chunk of benchmarks/dask_scale.py's MLP took 0.86 s in a thread
    and 0.46 s in the main thread; in pieces of 2,048-8,192 rows 0.39-0.47 s in either)."""
    stop = set(feeds)
    seen: set = set()
    stack = [t.op for t in fetches]
    widest = 0
    while stack:
        op = stack.pop()
        if op in seen:
            continue
        seen.add(op)
        for t in op.outputs:
            dims = t.shape.as_tuple()
            if dims and dims[0] is None and all(d is not None for d in dims[1:]):
                width = int(np.prod(dims[1:], dtype=np.int64)) \
                    * np.dtype(t.dtype.as_numpy_dtype).itemsize
                widest = max(widest, width)
        stack.extend(t.op for t in op.inputs if t not in stop)
    return max(256, _CALL_BYTES // widest) if widest else None


def _probe_dims(sess, tensors, feed, data, extra, outputs) -> list:
    """Fetch dims past the first that are static only given the data's shape: one run of
    the session on two rows of zeros."""
    rest = tuple(int(s) for s in data.shape[1:])
    feed_dict = {feed: np.zeros((2, *rest), feed.dtype.as_numpy_dtype)}
    feed_dict.update(dict(extra))
    values = sess.run(tensors, feed_dict)
    return [[name, [int(s) for s in np.shape(v)[1:]]] for (name, _), v in zip(outputs, values)]


# -- gradients ---------------------------------------------------------------------------------
_GRADS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _gradient_tensors(graph, loss: Tensor, var_list: list) -> list:
    """tf.gradients(loss, var_list), built once per graph, loss and variables."""
    from jitflow.core.gradients import gradients as tf_gradients
    per_graph = _GRADS.setdefault(graph, {})
    key = (loss, tuple(getattr(v, "op", v) for v in var_list))
    grads = per_graph.get(key)
    if grads is None:
        with graph.as_default():
            grads = per_graph[key] = list(tf_gradients(loss, var_list))
    return grads


def _scalar_loss(graph, loss, what: str) -> Tensor:
    loss = graph.as_graph_element(loss, allow_tensor=True, allow_operation=False)
    if loss.shape.as_tuple() != ():
        raise ValueError(f"jitflow.dask.{what}: the loss {loss.name} has shape "
                         f"'{loss.shape}'; it must be a scalar (a mean or a sum over the rows)")
    return loss


def _check_reduction(reduction: str, what: str) -> None:
    if reduction not in ("mean", "sum"):
        raise ValueError(f"jitflow.dask.{what}: loss_reduction must be 'mean' or 'sum', got "
                         f"{reduction!r}")


def _resolve_feeds(graph, feeds: Mapping, what: str) -> tuple:
    """Placeholders and their dask arrays, chunked alike along axis 0 (others rechunked to
    the first's chunks)."""
    if not isinstance(feeds, Mapping) or not feeds:
        raise TypeError(f"jitflow.dask.{what}: feeds must be a dict from placeholders to "
                        "Dask arrays")
    tensors, arrays = [], []
    for k, v in feeds.items():
        t = graph.as_graph_element(k, allow_tensor=True, allow_operation=False)
        tensors.append(t)
        arrays.append(_check_data(t, v, what))
    rows = arrays[0].shape[0]
    for t, a in zip(tensors, arrays):
        if a.shape[0] != rows:
            raise ValueError(f"jitflow.dask.{what}: the data for {t.name} has {a.shape[0]} "
                             f"rows, the data for {tensors[0].name} has {rows}")
    arrays = [a if a.chunks[0] == arrays[0].chunks[0] else a.rechunk({0: arrays[0].chunks[0]})
              for a in arrays]
    return tensors, arrays


def _row_blocks(arr) -> list:
    """The delayed blocks of `arr` (one chunk past axis 0) in row order."""
    return list(arr.to_delayed().reshape(-1))


def _tree_sum(dask, parts: list, split_every: int = 8):
    while len(parts) > 1:
        parts = [dask.delayed(_add, pure=True)(*parts[i:i + split_every])
                 for i in range(0, len(parts), split_every)]
    return parts[0]


def gradients(sess, loss, var_list: Sequence, feeds: Mapping, *, loss_reduction: str = "mean",
              feed_dict: Optional[Mapping] = None) -> list:
    """The gradients of `loss` over all the rows of `feeds` ({placeholder: Dask array}, split
    along axis 0 alike), as NumPy arrays in `var_list` order (None for a variable the loss
    does not depend on), computed chunk by chunk on the cluster.

    `loss_reduction` says how `loss` reduces over the rows of a batch: "mean" (the default)
    returns the gradient of the mean over all rows, "sum" that of the sum over all rows; both
    equal the one-process `tf.gradients(loss, var_list)` on the whole data up to float
    rounding (see the module docstring). The variables are read from `sess` now.
    """
    dask, _ = _dask()
    graph = sess.graph
    _check_reduction(loss_reduction, "gradients")
    loss = _scalar_loss(graph, loss, "gradients")
    var_list = list(var_list)
    if not var_list:
        raise ValueError("jitflow.dask.gradients: var_list is empty")
    tensors, arrays = _resolve_feeds(graph, feeds, "gradients")
    extra = _resolve_feed_dict(graph, feed_dict, "gradients")
    grads = _gradient_tensors(graph, loss, var_list)
    present = [g for g in grads if g is not None]
    if not present:
        return [None] * len(grads)
    rows = int(arrays[0].shape[0])
    if rows == 0:
        raise ValueError("jitflow.dask.gradients: the data has no rows")
    exports = _Exports(sess, present, tensors, extra, [a.shape[1:] for a in arrays],
                       "gradients")
    chunks = arrays[0].chunks[0]
    classes = sorted({_row_class(c) for c in chunks if c})
    payload = _payload(dask, {"exports": {c: exports.get(c) for c in classes},
                              "dtypes": [np.dtype(t.dtype.as_numpy_dtype).str for t in tensors],
                              "extra": [v for _, v in extra], "reduction": loss_reduction,
                              "rows_per_call": _rows_per_call(present, tensors)})
    blocks = [_row_blocks(a) for a in arrays]
    parts = [dask.delayed(_grad_block, pure=True)(payload, *[b[i] for b in blocks])
             for i, n in enumerate(chunks) if n]
    total, = dask.compute(_tree_sum(dask, parts))
    scale = rows if loss_reduction == "mean" else 1
    it = iter(total)
    return [None if g is None else (next(it) / scale).astype(g.dtype.as_numpy_dtype)
            for g in grads]


# -- fit ---------------------------------------------------------------------------------------
_BUILT: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _train_step(sess, train_op, loss: Tensor, var_list) -> tuple:
    """(the op to run, its (gradient, variable) pairs) for a train op or an optimizer."""
    from jitflow.train.optimizer import Optimizer, applied_gradients
    graph = sess.graph
    if isinstance(train_op, Optimizer):
        key = (loss, None if var_list is None else tuple(v.op for v in var_list))
        built = _BUILT.setdefault(train_op, {})
        if key not in built:
            with graph.as_default():
                from jitflow.ops.state import variables_initializer
                before = {v.op for v in graph.get_collection("variables")}
                pairs = [(g, v) for g, v in train_op.compute_gradients(loss, var_list=var_list)
                         if g is not None]
                if not pairs:
                    raise ValueError(f"jitflow.dask.fit: the loss {loss.name} depends on none "
                                     "of the variables")
                op = train_op.apply_gradients(pairs)
                new = [v for v in graph.get_collection("variables") if v.op not in before]
                if new:
                    sess.run(variables_initializer(new))
            built[key] = (op, tuple(pairs))
        return built[key]
    if var_list is not None:
        raise ValueError("jitflow.dask.fit: var_list goes with an optimizer; a train op "
                         "already names its variables")
    op = graph.as_graph_element(train_op, allow_tensor=True, allow_operation=True)
    op = op.op if isinstance(op, Tensor) else op
    pairs, seen, stack = [], set(), [op]
    while stack:
        o = stack.pop()
        if o in seen:
            continue
        seen.add(o)
        found = applied_gradients(o)
        if found is not None:
            pairs.extend(found)
            continue
        stack.extend(t.op for t in o.inputs)
        stack.extend(o.control_inputs)
    if not pairs:
        raise TypeError(f"jitflow.dask.fit: {op.name} applies no gradients made by an "
                        "optimizer (minimize or apply_gradients); pass the optimizer instead")
    return op, tuple(pairs)


def _split(rows: int, parts: int) -> list:
    """`rows` split into at most `parts` near-equal non-empty shards."""
    parts = max(1, min(parts, rows))
    base, extra = divmod(rows, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def fit(sess, train_op, loss, feeds: Mapping, *, batch_size: int, epochs: int = 1,
        var_list: Optional[Sequence] = None, loss_reduction: str = "mean",
        feed_dict: Optional[Mapping] = None, n_shards: Optional[int] = None,
        progress: bool = True) -> np.ndarray:
    """Synchronous data-parallel training on the rows of `feeds` ({placeholder: Dask array}).

    `train_op` is an op made by an optimizer's `minimize`/`apply_gradients` (or a group of
    such ops), or an Optimizer (then its update of `var_list`, default the trainable variables,
    is built once and its new slots initialized). Each step takes the next `batch_size` rows
    in order, splits them into `n_shards` shards (default: one per worker; Dask's number of
    threads without a cluster), computes the loss and gradients of every shard where its
    rows are, combines them on the driver (weighted by rows for a mean loss, added for a sum:
    `loss_reduction`) and runs the train op with the combined gradients fed, so the session's
    optimizer (slots included) updates the variables as one `sess.run(train_op, batch)`
    would. `feed_dict` values are fed to every shard and to the update. Returns the loss of
    every step (before its update), as `sess.run([train_op, loss], batch)` would give it.
    The rows are kept in the cluster's memory for the epochs (persisted once).

    What is averaged is what `apply_gradients` was given: for `minimize` (or the gradients of
    `compute_gradients` as they are) that is exact; a transformation in between that is not
    linear in the rows (clipping by global norm) is applied to each shard's gradients instead
    of the batch's.
    """
    dask, _ = _dask()
    graph = sess.graph
    _check_reduction(loss_reduction, "fit")
    if not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise ValueError(f"jitflow.dask.fit: batch_size must be a positive integer, got "
                         f"{batch_size!r}")
    if not isinstance(epochs, (int, np.integer)) or epochs < 0:
        raise ValueError(f"jitflow.dask.fit: epochs must be a non-negative integer, got "
                         f"{epochs!r}")
    loss = _scalar_loss(graph, loss, "fit")
    op, pairs = _train_step(sess, train_op, loss, var_list)
    tensors, arrays = _resolve_feeds(graph, feeds, "fit")
    extra = _resolve_feed_dict(graph, feed_dict, "fit")
    rows = int(arrays[0].shape[0])
    if rows == 0:
        raise ValueError("jitflow.dask.fit: the data has no rows")
    if epochs == 0:
        return np.zeros(0, dtype=loss.dtype.as_numpy_dtype)
    client = current_client()
    workers = sorted(client.nthreads()) if client is not None else []
    if n_shards is None:
        n_shards = len(workers) if workers else (dask.config.get("num_workers", None)
                                                 or os.cpu_count() or 1)
    batches = [min(batch_size, rows - s) for s in range(0, rows, batch_size)]
    shards = [_split(b, int(n_shards)) for b in batches]
    sizes = tuple(n for step in shards for n in step)
    arrays = [a.rechunk({0: sizes}) for a in arrays]
    grads = [g for g, _ in pairs]
    exports = _Exports(sess, [loss, *grads], tensors, extra, [a.shape[1:] for a in arrays],
                       "fit")
    classes = sorted({_row_class(n) for n in sizes})
    files = {c: exports.get(c) for c in classes}
    manifest = json.loads(files[classes[0]][_MANIFEST])
    modules = {c: {manifest["module"]: f[manifest["module"]]} for c, f in files.items()}
    var_ops = [graph.get_operation_by_name(v["name"]) for v in manifest["state"]["variables"]]
    how = {"dtypes": [np.dtype(t.dtype.as_numpy_dtype).str for t in tensors],
           "extra": [v for _, v in extra], "reduction": loss_reduction,
           "rows_per_call": _rows_per_call([loss, *grads], tensors)}
    runner = (_ClusterSteps(client, workers, arrays, shards, modules) if client is not None
              else _LocalSteps(dask, arrays, shards, modules))
    bar = _progress(len(batches) * epochs, progress)
    losses = []
    from jitflow.export import _state_values, with_state
    try:
        for _ in range(epochs):
            for s, batch in enumerate(batches):
                values = {o.name: v for o, v in _state_values(sess, var_ops).items()}
                step = {}
                for c in classes:
                    f = with_state(files[c], values)
                    step[c] = {_MANIFEST: f[_MANIFEST], "state.npz": f["state.npz"]}
                # the shards' sums over their rows, then the batch's mean (or sum)
                total = _add(*runner.run(s, step, how))
                scale = batch if loss_reduction == "mean" else 1
                step_loss = float(total[0]) / scale
                fed = {g: (t / scale).astype(g.dtype.as_numpy_dtype)
                       for g, t in zip(grads, total[1:])}
                fed.update(dict(extra))
                _apply(sess, op, fed)
                losses.append(step_loss)
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(loss=f"{step_loss:.6g}", refresh=False)
    finally:
        if bar is not None:
            bar.close()
        runner.close()
    return np.asarray(losses, dtype=loss.dtype.as_numpy_dtype)


def _apply(sess, op, fed: dict) -> None:
    from jitflow.core import errors
    try:
        sess.run(op, fed)
    except errors.InvalidArgumentError as e:
        raise errors.InvalidArgumentError(
            e.node_def, e.op, f"jitflow.dask.fit: running {op.name} with the combined "
                              f"gradients fed still needs data: {e.message} (ops that read the "
                              "batch outside the gradients, such as batch-norm statistics "
                              "updates, cannot be combined across shards)") from None


def _progress(total: int, enabled: bool):
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc="jitflow.dask.fit", unit="step")


class _LocalSteps:
    """Steps on Dask's local scheduler: the rows computed once into this process."""

    def __init__(self, dask, arrays, shards, modules) -> None:
        self.dask = dask
        self.values = dask.compute(*arrays)
        self.modules = modules
        self.bounds = []
        start = 0
        for step in shards:
            self.bounds.append([(start + sum(step[:j]), n) for j, n in enumerate(step)])
            start += sum(step)

    def run(self, s: int, step: dict, how: dict) -> list:
        from dask.base import get_scheduler
        get = get_scheduler() or self.dask.threaded.get
        dsk = {}
        keys = []
        for j, (lo, n) in enumerate(self.bounds[s]):
            key = f"jitflow-fit-shard-{j}"
            dsk[key] = (_shard_step, self.modules, step, how,
                        *[v[lo:lo + n] for v in self.values])
            keys.append(key)
        return list(get(dsk, keys))

    def close(self) -> None:
        self.values = None


class _ClusterSteps:
    """Steps on a distributed cluster: shard j of every batch kept on worker j (it may move
    if that worker dies), the modules sent to every worker once, the variables every step."""

    def __init__(self, client, workers, arrays, shards, modules) -> None:
        self.client = client
        blocks = [_row_blocks(a) for a in arrays]
        self.futures: list = []          # per step: per shard: per feed: a future
        placed: dict = {}
        k = 0
        for s, step in enumerate(shards):
            for j, _ in enumerate(step):
                placed.setdefault(j, []).append((s, j, k))
                k += 1
        self.futures = [[None] * len(step) for step in shards]
        for j, items in placed.items():
            target = [workers[j % len(workers)]] if workers else None
            flat = [b[k] for _, _, k in items for b in blocks]
            futs = client.compute(flat, workers=target, allow_other_workers=bool(workers))
            per = len(blocks)
            for i, (s, jj, _) in enumerate(items):
                self.futures[s][jj] = futs[i * per:(i + 1) * per]
        self.modules, = client.scatter([modules], broadcast=True, hash=False)
        self.token = hashlib.sha256(os.urandom(16)).hexdigest()[:12]

    def run(self, s: int, step: dict, how: dict) -> list:
        futs = [self.client.submit(_shard_step, self.modules, step, how, *feeds,
                                   pure=False, key=f"jitflow-fit-{self.token}-{s}-{j}-"
                                   f"{os.urandom(4).hex()}")
                for j, feeds in enumerate(self.futures[s])]
        return self.client.gather(futs)

    def close(self) -> None:
        for step in self.futures:
            for feeds in step:
                for f in feeds:
                    f.release()
        self.modules.release()
        self.futures = []
