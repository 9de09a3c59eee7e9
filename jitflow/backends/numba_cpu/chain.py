"""The warm path of split plans: a `Chain` calls each segment's native entry point in plan
order on a flat list of values, for one set of input shapes, with none of the general
driver's per-step work (see `Chain`)."""
from __future__ import annotations

from typing import Optional

import numpy as np

from jitflow.backends.base import decode_check_error
from jitflow.compiler.program import FEED, VALUE, VARIABLE, Segment
from jitflow.runtime import config

__all__ = ["Chain"]


class Chain:
    """The warm path of a split plan for one set of input shapes: each segment's native entry
    point called in plan order on a flat list of values (the feeds, then every kernel's
    results), with none of the general driver's per-step work.

    Made from a run of the general path in which every step was a native kernel and
    variables were written in place (or none were): it records where each kernel input came
    from and which variable buffers the kernels took. A later run with the same input shapes
    takes the chain when the session still holds those buffers and the feeds the kernels read
    are arrays of the recorded kinds; anything else returns None and the general path runs.
    Kernels whose operands are large enough for a parallel variant keep the general path.
    """

    __slots__ = ("segs", "feed_checks", "var_checks", "fetches", "__weakref__")

    @classmethod
    def make(cls, ex, feed_values, state, record) -> Optional["Chain"]:
        if len(record) != sum(isinstance(s, Segment) for s in ex.steps):
            return None
        plan = ex.plan
        slot: dict = {t: i for i, t in enumerate(plan.feeds)}
        made: list = [None] * len(feed_values)   # slot -> (kernel output converted to 0-d)
        vals = list(feed_values)
        segs = []
        used_feeds = set()
        many = config.threads() > 1 and config.parallel_min()
        for (c, ins, bufs, out), step in zip(record, [s for s in ex.steps
                                                      if isinstance(s, Segment)]):
            if c.par_source is not None and many and (
                    any(a.size >= many for a in ins) or any(b.size >= many for b in bufs)):
                return None
            if type(out) is not tuple or len(out) != len(step.out_tensors):
                return None
            in_slots = []
            for t, a in zip(step.in_tensors, ins):
                i = slot.get(t)
                if i is None:
                    return None
                v = vals[i]
                if made[i] is not None:   # a rank-0 result: the 0-d array the kernel took
                    if not (type(a) is np.ndarray and a.ndim == 0 and a.dtype == v.dtype):
                        return None
                elif a is not v:
                    return None
                if i < len(feed_values):
                    used_feeds.add(i)
                in_slots.append(i)
            order = c.var_order
            vs = tuple(bufs) if order is None else tuple([bufs[i] for i in order])
            ct = tuple([v for _, v in c.consts])
            args = tuple(ins) + ct
            ep = c.entry(args, vs)
            if ep is None:
                return None
            conv = dict(c.conv_items)
            base = len(vals)
            for k, (t, r) in enumerate(zip(step.out_tensors, out)):
                f = conv.get(k)
                vals.append(r if f is None else np.asarray(f(r)))
                made.append(f)
                slot.setdefault(t, base + k)
            segs.append((ep, tuple(in_slots), ct, vs, tuple(conv.items()),
                         step.ops))
        fetches = []
        for kind, x in ex.fetch_src:
            if kind == FEED:
                fetches.append((0, x))
            elif kind == VARIABLE:
                fetches.append((1, x))
            elif kind == VALUE and x in slot:
                i = slot[x]
                fetches.append((2 if made[i] is not None else 0, i))
            else:
                return None
        self = cls()
        self.segs = segs
        for c, *_ in record:
            c.listeners.add(self)   # a faster code for a kernel retires this chain
        self.feed_checks = tuple((i, feed_values[i].dtype, feed_values[i].flags.writeable)
                                 for i in sorted(used_feeds))
        if not all(type(feed_values[i]) is np.ndarray for i, _, _ in self.feed_checks):
            return None
        self.var_checks = tuple((v, state[v]) for v in ex.var_ops)
        self.fetches = fetches
        return self

    def invalidate(self) -> None:
        """A kernel got faster code: the general path runs (and records a new chain)."""
        self.segs = None

    def run(self, feed_values, state):
        """The run's results, or None when this run must take the general path."""
        # read once: the compiler thread may `invalidate` between a check and the loop (the
        # entry points already read stay valid code, with the same bits)
        segs = self.segs
        if segs is None:
            return None
        for v, b in self.var_checks:
            if state.get(v) is not b:
                return None
        for i, dt, w in self.feed_checks:
            a = feed_values[i]
            if (type(a) is not np.ndarray or a.dtype != dt or not a.flags.c_contiguous
                    or a.flags.writeable != w or not a.flags.aligned):
                return None
        vals = list(feed_values)
        with np.errstate(all="ignore"):
            for ep, in_slots, ct, vs, conv, ops in segs:
                try:
                    out = ep(tuple([vals[i] for i in in_slots]) + ct, vs)
                except ValueError as e:
                    failed = decode_check_error(e, ops)
                    if failed is not None:
                        raise failed from None
                    raise
                if conv:
                    out = list(out)
                    for k, f in conv:
                        out[k] = np.asarray(f(out[k]))
                vals.extend(out)
        res = []
        for kind, x in self.fetches:
            if kind == 0:
                res.append(vals[x])
            elif kind == 2:
                res.append(vals[x][()])
            else:
                res.append(np.array(state[x], copy=True))
        return res


