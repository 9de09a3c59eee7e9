"""`Session.partial_run_setup` / `Session.partial_run`: one step computed over several calls.

`partial_run_setup(fetches, feeds)` declares everything the step may fetch and feed and
returns a handle; each `partial_run(handle, fetches, feed_dict)` feeds some of the declared
feeds and fetches some of the declared fetches, as TensorFlow's partial runs do:

- every declared feed is fed at most once and every declared fetch fetched at most once per
  handle; the handle is released when all declared fetches (and targets) are done;
- every op runs at most once per handle: the values a call computes that later calls need (a
  random draw feeding two fetches, a variable read) are kept and fed to the later calls;
- declared target ops run in the first call that can compute them;
- errors (InvalidArgumentError) as TensorFlow words them.

Each call is an ordinary `Session.run` whose feeds are the values known so far, so its plan is
compiled and cached like any run signature: a loop repeating the same partial-run pattern
compiles once. One limit: a control dependency on an op without outputs that an earlier call
ran makes a later call that needs it run it again.
"""
from __future__ import annotations

import collections
import itertools

from jitflow.compiler.plan import toposort
from jitflow.core.errors import InvalidArgumentError
from jitflow.core.graph import Tensor

__all__ = ["PartialRuns"]

_SETUP_FIRST = "Must run 'setup' before performing partial runs!"
_ids = itertools.count(1)


class _Handle:
    __slots__ = ("feeds", "fetches", "targets", "known", "fetched", "ran")

    def __init__(self, feeds: list, fetches: list, targets: list) -> None:
        self.feeds = feeds          # declared feed tensors
        self.fetches = fetches      # declared fetch tensors
        self.targets = targets      # declared target ops
        self.known: dict = {}       # tensor -> value: what was fed, and what later calls need
        self.fetched: set = set()
        self.ran: set = set()       # targets that ran

    def done(self) -> bool:
        return len(self.fetched) == len(self.fetches) and len(self.ran) == len(self.targets)


def _keepable(t: Tensor) -> bool:
    """Whether a computed value may be fed to a later call (not a variable's reference, not a
    handle to host state)."""
    return t.op.type != "VariableV2" and t.dtype.name not in ("variant", "resource")


class PartialRuns:
    """The partial runs of one session, by handle."""

    def __init__(self, session) -> None:
        self.session = session
        self.session_id = next(_ids)
        self.handles: dict = {}
        self.count = 0

    def setup(self, fetches, feeds=None) -> str:
        from jitflow.core.session import _FetchMapper   # the session's fetch flattening
        sess = self.session
        graph = sess.graph
        mapper = _FetchMapper(graph, fetches)
        if feeds is None:
            feeds = []
        elif not isinstance(feeds, (list, tuple)):
            feeds = [feeds]
        feed_tensors: list = []
        for f in feeds:
            t = sess._feed_tensor(f)
            if t not in feed_tensors:
                feed_tensors.append(t)
        for t in mapper.tensors:
            if t in feed_tensors:
                raise InvalidArgumentError(None, None, f"{t.name} is both fed and fetched.")
        handle = (",".join(t.name for t in feed_tensors) + "->"
                  + ",".join(t.name for t in mapper.tensors) + "/"
                  + ",".join(op.name for op in mapper.targets)
                  + f"/{self.session_id}/;{self.count}")
        self.count += 1
        self.handles[handle] = _Handle(feed_tensors, list(mapper.tensors),
                                       list(mapper.targets))
        return handle

    def run(self, handle, fetches, feed_dict=None):
        from jitflow.core.session import _FetchMapper   # the session's fetch flattening
        sess = self.session
        h = self.handles.get(handle) if isinstance(handle, str) else None
        if h is None:
            raise InvalidArgumentError(None, None, _SETUP_FIRST)
        mapper = _FetchMapper(sess.graph, fetches)
        if mapper.targets:
            raise RuntimeError("partial_run() requires empty `target_list`. Received: "
                               f"target_list={mapper.targets} (non-empty)")
        new_feeds: dict = {}
        for k, v in (feed_dict or {}).items():
            t = sess._feed_tensor(k)
            if t not in h.feeds:
                raise InvalidArgumentError(
                    None, None, f"The feed {t.name} was not specified in partial_run_setup.")
            if t in h.known or t in new_feeds:
                raise InvalidArgumentError(None, None, f"The feed {t.name} has already been "
                                                       "fed.")
            new_feeds[t] = v
        wanted = mapper.tensors
        for t in wanted:
            if t in h.feeds:
                if t not in h.known and t not in new_feeds:
                    raise InvalidArgumentError(None, None, f"Fetch {t.name} can't be computed "
                                               "from the feeds that have been fed so far.")
                continue
            if t not in h.fetches:
                raise InvalidArgumentError(
                    None, None, f"The fetch {t.name} was not specified in partial_run_setup.")
            if t in h.fetched:
                raise InvalidArgumentError(None, None, f"The fetch {t.name} has already been "
                                                       "fetched.")
        known = dict(h.known)
        known.update(new_feeds)
        unfed = [t for t in h.feeds if t not in known]
        missing = _needed(wanted, [], known, unfed)
        if missing is not None:
            raise InvalidArgumentError(None, None, f"Fetch {missing.name} can't be computed "
                                       "from the feeds that have been fed so far.")
        targets = [op for op in h.targets if op not in h.ran
                   and _needed([], [op], known, unfed) is None]
        step_ops = set(toposort([t.op for t in wanted if t not in known] + targets,
                                frozenset(known)))
        keep = _kept(h, wanted, targets, step_ops, known)
        values = sess.run([*wanted, *keep, *targets], feed_dict=known) if (
            wanted or keep or targets) else []
        # the call succeeded: commit what it fed, fetched, ran and computed
        h.known.update(new_feeds)
        h.known.update(zip(keep, values[len(wanted):len(wanted) + len(keep)]))
        h.fetched.update(t for t in wanted if t in h.fetches)
        h.ran.update(targets)
        if h.done():
            del self.handles[handle]
        return mapper.build(values[:len(wanted)])


def _needed(tensors: list, ops: list, known: dict, unfed: list):
    """The first declared feed not yet fed that computing `tensors` and `ops` needs, else None
    (breadth-first from them, inputs in order: the feed TensorFlow names)."""
    if not unfed:
        return None
    unfed_set = set(unfed)
    for t in tensors:
        if t in unfed_set:
            return t
    queue = collections.deque([t.op for t in tensors if t not in known] + list(ops))
    seen = set(queue)
    while queue:
        op = queue.popleft()
        for t in op.inputs:
            if t in unfed_set:
                return t
            if t not in known and t.op not in seen:
                seen.add(t.op)
                queue.append(t.op)
        for c in op.control_inputs:
            if c not in seen:
                seen.add(c)
                queue.append(c)
    return None


def _kept(h: _Handle, wanted: list, targets: list, step_ops: set, known: dict) -> list:
    """The values this call computes that the handle's later calls need (so that no op runs
    twice): tensors of `step_ops` that later fetches or targets read, or are."""
    later_fetches = [t for t in h.fetches if t not in h.fetched and t not in wanted]
    later_targets = [op for op in h.targets if op not in h.ran and op not in targets]
    if not (later_fetches or later_targets) or not step_ops:
        return []
    produced = {t for op in step_ops for t in op.outputs}
    stop = frozenset(known) | produced
    later_ops = toposort([t.op for t in later_fetches if t not in stop] + later_targets, stop)
    keep: list = []
    seen: set = set()

    def add(t: Tensor) -> None:
        if t in produced and t not in seen and _keepable(t):
            seen.add(t)
            keep.append(t)

    for t in later_fetches:
        add(t)
    for op in later_ops:
        for t in op.inputs:
            add(t)
        for c in op.control_inputs:
            if c in step_ops:
                for t in c.outputs:
                    add(t)
    return keep
