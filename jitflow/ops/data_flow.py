"""Queues (`tf.FIFOQueue`, `tf.RandomShuffleQueue`, `tf.PaddingFIFOQueue`) on real threads.

A queue op (`FIFOQueueV2`, ...) yields the queue's handle; its state (the elements, a condition
variable) belongs to the session (`Session._resources`: its variable store's `resources`),
created when a run first uses it. Enqueue and dequeue ops are host ops that block on the
condition (releasing the GIL and holding no session lock), so queue-runner threads and the
training loop share one session as in TF1: a dequeue from a closed, too-empty queue raises
OutOfRangeError, an enqueue into a closed queue CancelledError, and closing the session wakes
every waiter with CancelledError.

`CountUpTo` (the epoch counter of the input producers) is here too: it increments a variable in
place under a lock, raising OutOfRangeError at its limit.
"""
from __future__ import annotations

import collections
import threading
from typing import Optional

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.core import errors
from jitflow.core.graph import Tensor, convert_to_tensor, get_default_graph, make_op, name_scope
from jitflow.ops.registry import register
from jitflow.core.shapes import TensorShape, as_shape

__all__ = ["QueueBase", "FIFOQueue", "RandomShuffleQueue", "PaddingFIFOQueue", "count_up_to"]

NAMESPACES = {"io": ["QueueBase", "FIFOQueue", "RandomShuffleQueue", "PaddingFIFOQueue"],
              "queue": ["QueueBase", "FIFOQueue", "RandomShuffleQueue", "PaddingFIFOQueue"]}

_HANDLE = [(_dtypes.variant, TensorShape([]))]
_KINDS = {"FIFOQueueV2": "FIFOQueue", "RandomShuffleQueueV2": "RandomShuffleQueue",
          "PaddingFIFOQueueV2": "PaddingFIFOQueue"}


class _QueueState:
    """The elements of one queue in one session, and the condition its users wait on."""

    def __init__(self, op, store) -> None:
        a = op.attrs
        self.kind = _KINDS[op.type]
        self.name = a.get("shared_name") or op.name
        self.capacity = a["capacity"]
        self.dtypes = a["component_types"]
        self.shapes = a["shapes"]
        self.min_after = a.get("min_after_dequeue", 0)
        self.items: collections.deque = collections.deque()
        self.cond = threading.Condition()
        self.closed = False
        self.cancelled = False
        self.session_gone = False
        self.rng = store.rng_for(op) if self.kind == "RandomShuffleQueue" else None
        self.waiting = 0  # threads blocked on this queue now

    def _wait(self) -> None:
        self.waiting += 1
        try:
            self.cond.wait()
        finally:
            self.waiting -= 1

    # -- waking waiters -------------------------------------------------------------------------
    def session_closed(self) -> None:
        with self.cond:
            self.session_gone = True
            self.cond.notify_all()

    def _check_session(self, op) -> None:
        if self.session_gone:
            raise errors.CancelledError(None, op, f"Session has been closed (queue "
                                                  f"'{self.name}', op {op.name}).")

    def close(self, cancel_pending: bool) -> None:
        with self.cond:
            self.closed = True
            if cancel_pending:
                self.cancelled = True
            self.cond.notify_all()

    # -- enqueue --------------------------------------------------------------------------------
    def check_row(self, op, row: tuple) -> tuple:
        out = []
        for i, (v, d, s) in enumerate(zip(row, self.dtypes, self.shapes)):
            arr = np.asarray(v)
            if arr.dtype != d.as_numpy_dtype:
                arr = arr.astype(d.as_numpy_dtype)
            if s is not None and s.ndims is not None and not s.is_compatible_with(
                    TensorShape(arr.shape)):
                raise errors.InvalidArgumentError(
                    None, op, f"Shape mismatch in tuple component {i}. Expected {s}, got "
                              f"{list(arr.shape)}\n\t [[node {op.name}]]")
            out.append(arr)
        return tuple(out)

    def enqueue(self, op, rows: list) -> None:
        with self.cond:
            if self.closed:
                raise errors.CancelledError(None, op, f"{self.kind} '{self.name}' is closed.")
            for row in rows:
                while len(self.items) >= self.capacity:
                    self._check_session(op)
                    if self.cancelled:
                        raise errors.CancelledError(
                            None, op, f"Enqueue operation was cancelled (queue "
                                      f"'{self.name}' is closed).")
                    self._wait()
                self._check_session(op)
                self.items.append(row)
                self.cond.notify_all()

    # -- dequeue --------------------------------------------------------------------------------
    def dequeue(self, op, n: int, up_to: bool) -> list:
        with self.cond:
            while True:
                self._check_session(op)
                keep = 0 if self.closed else self.min_after
                if len(self.items) - keep >= n and len(self.items) >= n:
                    rows = self._take(n)
                    self.cond.notify_all()
                    return rows
                if self.closed:
                    if up_to and self.items:
                        rows = self._take(min(n, len(self.items)))
                        self.cond.notify_all()
                        return rows
                    raise errors.OutOfRangeError(
                        None, op, f"{self.kind} '{self.name}' is closed and has insufficient "
                                  f"elements (requested {n}, current size {len(self.items)})"
                                  f"\n\t [[node {op.name}]]")
                self._wait()

    def _take(self, n: int) -> list:
        if self.rng is None:
            return [self.items.popleft() for _ in range(n)]
        rows = []
        for _ in range(n):
            i = int(self.rng.integers(len(self.items)))
            self.items[i], self.items[-1] = self.items[-1], self.items[i]
            rows.append(self.items.pop())
        return rows

    def batch(self, rows: list) -> tuple:
        """Stack dequeued rows per component (padded to the longest for a PaddingFIFOQueue)."""
        out = []
        for c, d in enumerate(self.dtypes):
            vals = [r[c] for r in rows]
            if self.kind == "PaddingFIFOQueue" and vals and vals[0].ndim:
                longest = [max(v.shape[k] for v in vals) for k in range(vals[0].ndim)]
                b = np.zeros([len(vals)] + longest, dtype=d.as_numpy_dtype) \
                    if d != _dtypes.string else np.full([len(vals)] + longest, b"", object)
                for j, v in enumerate(vals):
                    b[(j,) + tuple(slice(0, k) for k in v.shape)] = v
                out.append(b)
            elif vals:
                out.append(np.stack(vals))
            else:
                shape = self.shapes[c].as_tuple() if self.shapes[c] is not None else ()
                out.append(np.zeros((0,) + tuple(d_ or 0 for d_ in (shape or ())),
                                    dtype=d.as_numpy_dtype))
        return tuple(out)


def queue_state(handle_op, ctx) -> _QueueState:
    """The session's state of the queue made by `handle_op` (created on first use)."""
    res = ctx.store.resources
    key = ("queue", handle_op.attrs.get("shared_name") or handle_op.name)
    state = res.get(key)
    if state is None:
        with ctx.store.lock:
            state = res.get(key)
            if state is None:
                state = res[key] = _QueueState(handle_op, ctx.store)
    return state


def _queue_op(t: Tensor):
    """The queue op behind a handle tensor."""
    return t.op


# -- ops ------------------------------------------------------------------------------------------
for _t in _KINDS:
    register(_t, infer=lambda op: _HANDLE,
             ref=lambda op, ctx: (queue_state(op, ctx), np.array(op.name.encode(), object))[1],
             needs_ctx=True, stateful=True, differentiable=False, kind="host",
             doc="A queue's handle; its elements live in the session.")


def _enqueue_ref(many: bool):
    def ref(op, handle, *values, ctx):
        q = queue_state(_queue_op(op.inputs[0]), ctx)
        if not many:
            rows = [q.check_row(op, values)]
        else:
            arrs = [np.asarray(v) for v in values]
            n = arrs[0].shape[0] if arrs[0].ndim else 0
            if any(a.ndim == 0 or a.shape[0] != n for a in arrs):
                raise errors.InvalidArgumentError(
                    None, op, "Shape mismatch: the components of enqueue_many must have the "
                              f"same first dimension\n\t [[node {op.name}]]")
            rows = [q.check_row(op, tuple(a[i] for a in arrs)) for i in range(n)]
        q.enqueue(op, rows)
    return ref


register("QueueEnqueueV2", infer=lambda op: [], ref=_enqueue_ref(False), needs_ctx=True,
         stateful=True, differentiable=False, kind="host",
         doc="Inputs (handle, *components): add one element (blocks while the queue is full).")
register("QueueEnqueueManyV2", infer=lambda op: [], ref=_enqueue_ref(True), needs_ctx=True,
         stateful=True, differentiable=False, kind="host",
         doc="Inputs (handle, *components): add the rows of the components as elements.")


def _dequeue_infer(op):
    n = op.attrs.get("n")
    lead = [] if op.type == "QueueDequeueV2" else [n]
    return [(d, TensorShape(None) if s is None or s.ndims is None
             else TensorShape(lead + list(s.as_tuple())))
            for d, s in zip(op.attrs["component_types"], op.attrs["shapes"])]


def _dequeue_ref(op, handle, *n, ctx):
    q = queue_state(_queue_op(op.inputs[0]), ctx)
    if op.type == "QueueDequeueV2":
        return q.dequeue(op, 1, False)[0]
    count = int(n[0])
    if count < 0:
        raise errors.InvalidArgumentError(None, op, f"Dequeue requested {count} < 0 elements")
    return q.batch(q.dequeue(op, count, op.type == "QueueDequeueUpToV2"))


for _t in ("QueueDequeueV2", "QueueDequeueManyV2", "QueueDequeueUpToV2"):
    register(_t, infer=_dequeue_infer, ref=_dequeue_ref, needs_ctx=True, stateful=True,
             differentiable=False, kind="host",
             doc="Take one element (or n, stacked); blocks until enough are queued; "
                 "OutOfRangeError once the queue is closed with too few.")


def _close_ref(op, handle, ctx):
    queue_state(_queue_op(op.inputs[0]), ctx).close(op.attrs["cancel_pending_enqueues"])


register("QueueCloseV2", infer=lambda op: [], ref=_close_ref, needs_ctx=True, stateful=True,
         differentiable=False, kind="host", doc="Close the queue to new elements.")
register("QueueSizeV2", infer=lambda op: [(_dtypes.int32, TensorShape([]))],
         ref=lambda op, h, ctx: np.int32(len(queue_state(_queue_op(op.inputs[0]), ctx).items)),
         needs_ctx=True, stateful=True, differentiable=False, kind="host",
         doc="The number of elements in the queue.")
register("QueueIsClosedV2", infer=lambda op: [(_dtypes.bool_, TensorShape([]))],
         ref=lambda op, h, ctx: np.bool_(queue_state(_queue_op(op.inputs[0]), ctx).closed),
         needs_ctx=True, stateful=True, differentiable=False, kind="host",
         doc="Whether the queue is closed.")


# -- the queue objects ----------------------------------------------------------------------------
def _as_type_list(dtypes) -> list:
    if isinstance(dtypes, (list, tuple)):
        return [_dtypes.as_dtype(d) for d in dtypes]
    return [_dtypes.as_dtype(dtypes)]


def _as_shape_list(shapes, dtypes, unknown_dim_allowed: bool = False) -> list:
    if shapes is None:
        return [None] * len(dtypes)
    if isinstance(shapes, (list, tuple)) and (not shapes or isinstance(
            shapes[0], (list, tuple, TensorShape)) or shapes[0] is None):
        out = [as_shape(s) for s in shapes]
    else:
        out = [as_shape(shapes)]
    if len(out) != len(dtypes):
        raise ValueError("shapes must have the same length as dtypes")
    if not unknown_dim_allowed:
        for s in out:
            if not s.is_fully_defined():
                raise ValueError(f"All shapes must be fully defined: {out}")
    return out


class QueueBase:
    """A queue of elements (tuples of tensors of fixed dtypes) shared by threads."""

    _op_type = "FIFOQueueV2"

    def __init__(self, dtypes, shapes, names, queue_ref: Tensor) -> None:
        self._dtypes = dtypes
        self._shapes = shapes
        self._names = names
        self._queue_ref = queue_ref
        self._name = queue_ref.op.name

    @staticmethod
    def _make(op_type: str, capacity: int, dtypes, shapes, names, shared_name, name,
              extra: Optional[dict] = None, unknown_dims: bool = False) -> tuple:
        types = _as_type_list(dtypes)
        shps = _as_shape_list(shapes, types, unknown_dims)
        if names is not None:
            names = list(names) if isinstance(names, (list, tuple)) else [names]
            if len(names) != len(types):
                raise ValueError("Queue dtypes and names must have the same length")
        attrs = {"capacity": int(capacity), "component_types": types, "shapes": shps,
                 "shared_name": shared_name or "", **(extra or {})}
        g = get_default_graph()
        with g.control_dependencies(None):
            ref = make_op(op_type, [], attrs, name=name, graph=g).outputs[0]
        return types, shps, names, ref

    # -- properties -------------------------------------------------------------------------
    queue_ref = property(lambda self: self._queue_ref)
    name = property(lambda self: self._name)
    dtypes = property(lambda self: self._dtypes)
    shapes = property(lambda self: self._shapes)
    names = property(lambda self: self._names)

    @property
    def _attrs(self) -> dict:
        return {"component_types": self._dtypes, "shapes": self._shapes}

    def _components(self, vals) -> list:
        if isinstance(vals, dict):
            if self._names is None:
                raise ValueError("Queue must have names to enqueue a dictionary")
            if sorted(vals) != sorted(self._names):
                raise ValueError(f"Keys in dictionary to enqueue do not match names of Queue. "
                                 f"Dictionary: {sorted(vals)}, Queue: {sorted(self._names)}")
            vals = [vals[k] for k in self._names]
        elif not isinstance(vals, (list, tuple)):
            vals = [vals]
        if len(vals) != len(self._dtypes):
            raise ValueError(f"Expected {len(self._dtypes)} components, got {len(vals)}")
        return [convert_to_tensor(v, dtype=d, name=f"component_{i}")
                for i, (v, d) in enumerate(zip(vals, self._dtypes))]

    def _check_shapes(self, comps, many: bool) -> None:
        for c, s in zip(comps, self._shapes):
            have = c.shape
            if many and have.ndims is not None:
                have = TensorShape(have.as_tuple()[1:])
            if s is not None and s.ndims is not None and not s.is_compatible_with(have):
                raise ValueError(f"Shapes {have} and {s} are incompatible")

    # -- ops --------------------------------------------------------------------------------
    def enqueue(self, vals, name: Optional[str] = None):
        """An op adding one element (blocks while the queue is full)."""
        with name_scope(name, f"{self._name}_enqueue", [self._queue_ref]) as scope:
            comps = self._components(vals)
            self._check_shapes(comps, False)
            return make_op("QueueEnqueueV2", [self._queue_ref] + comps,
                           name=scope[:-1] if scope else "QueueEnqueueV2")

    def enqueue_many(self, vals, name: Optional[str] = None):
        """An op adding each row (first dimension) of the components as an element."""
        with name_scope(name, f"{self._name}_EnqueueMany", [self._queue_ref]) as scope:
            comps = self._components(vals)
            self._check_shapes(comps, True)
            return make_op("QueueEnqueueManyV2", [self._queue_ref] + comps,
                           name=scope[:-1] if scope else "QueueEnqueueManyV2")

    def _result(self, outputs):
        outs = list(outputs)
        if self._names is not None:
            return dict(zip(self._names, outs))
        return outs[0] if len(outs) == 1 else outs

    def dequeue(self, name: Optional[str] = None):
        """One element (a tensor, a list of them, or a dict with `names`)."""
        op = make_op("QueueDequeueV2", [self._queue_ref], self._attrs,
                     name=name or f"{self._name}_Dequeue")
        return self._result(op.outputs)

    def _dequeue_n(self, op_type: str, n, name: str):
        n_t = convert_to_tensor(n, dtype=_dtypes.int32, name="n")
        static = int(n_t.op.attrs["value"]) if n_t.op.type == "Const" else None
        attrs = dict(self._attrs, n=static if op_type == "QueueDequeueManyV2" else None)
        op = make_op(op_type, [self._queue_ref, n_t], attrs, name=name)
        return self._result(op.outputs)

    def dequeue_many(self, n, name: Optional[str] = None):
        """`n` elements stacked along a new first dimension (blocks until there are `n`)."""
        return self._dequeue_n("QueueDequeueManyV2", n, name or f"{self._name}_DequeueMany")

    def dequeue_up_to(self, n, name: Optional[str] = None):
        """As `dequeue_many`, but a closed queue gives its last, smaller batch."""
        return self._dequeue_n("QueueDequeueUpToV2", n, name or f"{self._name}_DequeueUpTo")

    def close(self, cancel_pending_enqueues: bool = False, name: Optional[str] = None):
        """An op closing the queue (and failing blocked enqueues if `cancel_pending_enqueues`)."""
        return make_op("QueueCloseV2", [self._queue_ref],
                       {"cancel_pending_enqueues": bool(cancel_pending_enqueues)},
                       name=name or f"{self._name}_Close")

    def size(self, name: Optional[str] = None) -> Tensor:
        return make_op("QueueSizeV2", [self._queue_ref],
                       name=name or f"{self._name}_Size").outputs[0]

    def is_closed(self, name: Optional[str] = None) -> Tensor:
        return make_op("QueueIsClosedV2", [self._queue_ref],
                       name=name or f"{self._name}_IsClosed").outputs[0]


class FIFOQueue(QueueBase):
    """`tf.FIFOQueue`: elements come out in the order they went in."""

    def __init__(self, capacity: int, dtypes, shapes=None, names=None,
                 shared_name: Optional[str] = None, name: str = "fifo_queue") -> None:
        types, shps, names, ref = self._make("FIFOQueueV2", capacity, dtypes, shapes, names,
                                             shared_name, name, unknown_dims=False)
        super().__init__(types, shps, names, ref)


class PaddingFIFOQueue(QueueBase):
    """`tf.PaddingFIFOQueue`: a FIFO queue whose `dequeue_many` pads each component to the
    longest in the batch (shapes may have None dimensions; their rank must be known)."""

    def __init__(self, capacity: int, dtypes, shapes, names=None,
                 shared_name: Optional[str] = None, name: str = "padding_fifo_queue") -> None:
        types, shps, names, ref = self._make("PaddingFIFOQueueV2", capacity, dtypes, shapes,
                                             names, shared_name, name, unknown_dims=True)
        for s in shps:
            if s is None or s.ndims is None:
                raise ValueError("PaddingFIFOQueue needs shapes of known rank")
        super().__init__(types, shps, names, ref)


class RandomShuffleQueue(QueueBase):
    """`tf.RandomShuffleQueue`: elements come out in random order; a dequeue waits until more
    than `min_after_dequeue` are queued (unless the queue is closed)."""

    def __init__(self, capacity: int, min_after_dequeue: int, dtypes, shapes=None, names=None,
                 seed=None, shared_name: Optional[str] = None,
                 name: str = "random_shuffle_queue") -> None:
        if min_after_dequeue >= capacity:
            raise ValueError(f"min_after_dequeue ({min_after_dequeue}) must be smaller than "
                             f"capacity ({capacity})")
        types, shps, names, ref = self._make(
            "RandomShuffleQueueV2", capacity, dtypes, shapes, names, shared_name, name,
            {"min_after_dequeue": int(min_after_dequeue),
             "seed": None if seed is None else int(seed)})
        super().__init__(types, shps, names, ref)


# -- CountUpTo ------------------------------------------------------------------------------------
_COUNT_LOCK = threading.Lock()


def _count_infer(op):
    v = op.inputs[0]
    if v.dtype not in (_dtypes.int32, _dtypes.int64):
        raise TypeError(f"count_up_to needs an int32 or int64 variable, got {v.dtype.name}")
    if v.shape.ndims not in (None, 0):
        raise ValueError(f"count_up_to needs a scalar variable, got shape {v.shape}")
    return [(v.dtype, TensorShape([]))]


def _count_ref(op, var_op, ctx):
    with _COUNT_LOCK:
        buf = ctx.pending.get(var_op)
        if buf is None:
            buf = ctx.read_var(var_op)
        before = buf[()]
        if before >= op.attrs["limit"]:
            raise errors.OutOfRangeError(None, op, f"Reached limit of {op.attrs['limit']}\n\t "
                                                   f"[[node {op.name} (CountUpTo)]]")
        buf[...] = before + 1  # in place, at once visible to every thread (as TF1)
        return np.asarray(before, dtype=buf.dtype)


register("CountUpTo", infer=_count_infer, ref=_count_ref, needs_ctx=True, stateful=True,
         differentiable=False, kind="host",
         doc="Increment a scalar integer variable, returning its value before; "
             "OutOfRangeError once it has reached attr `limit`.")


def count_up_to(ref, limit: int, name: Optional[str] = None) -> Tensor:
    """`tf.count_up_to`: increments `ref` and returns its old value until it reaches
    `limit`, then raises OutOfRangeError."""
    return make_op("CountUpTo", [ref.op.outputs[0] if hasattr(ref, "op") else ref],
                   {"limit": int(limit)}, name=name or "CountUpTo").outputs[0]


def _install_count_up_to() -> None:
    from jitflow.ops.state import Variable
    if not hasattr(Variable, "count_up_to"):
        Variable.count_up_to = lambda self, limit: count_up_to(self, limit)


_install_count_up_to()
