"""Programs: a plan as the steps a backend runs.

A `Program` splits a plan's ops (jitflow/compiler/plan.py) into

- `pre`: random ops whose inputs are known before anything runs (feeds, constants, shapes
  computable from feeds): drawn first, with the session's generators, so they do not cut the
  plan into pieces;
- `steps`, in order: `Segment`s (maximal runs of ops a backend compiles into one kernel, long
  runs cut by partition.py) and host ops (run through their references: input pipelines,
  strings, control flow, and ops without a lowering);
- `post`: host ops nothing else waits for (summaries, string formatting), run after the
  kernels on their results instead of splitting the plan.

Every backend composes with it: the CPU backend compiles each segment to one native kernel per
input shape class, the CUDA backend to a module of GPU kernels. Whether an op compiles is the
backend's `compiles(op)` (by default `lower.supported`). The program is pure structure: what
a backend compiled for a segment lives in the backend.
"""
from __future__ import annotations

from typing import Callable, Optional

from jitflow.compiler import lower as _lower
from jitflow.compiler import partition as _partition
from jitflow.compiler.plan import Plan
from jitflow.core import fold as _fold

__all__ = ["Segment", "Program", "WRITES", "FEED", "VARIABLE", "KERNEL", "VALUE", "POST"]

#: op types that write a variable in place (their input 0 is the variable)
WRITES = ("Assign", "AssignAdd", "AssignSub")

#: where a fetch comes from (`Program.fetch_src`): a feed (or a value drawn before the run), a
#: variable (read after the run), the single segment's results, the run's values, a deferred
#: host op
FEED, VARIABLE, KERNEL, VALUE, POST = range(5)


class Segment:
    """A run of ops compiled together.

    `in_tensors`: what flows in (feeds, values of earlier steps), in argument order;
    `out_tensors`: what later steps or the fetches need; `var_ops`: the variables its ops read
    or write (passed as buffers, written in place)."""

    __slots__ = ("ops", "in_tensors", "out_tensors", "var_ops", "__weakref__")

    def __init__(self, ops: list, in_tensors: list, out_tensors: list, var_ops: list) -> None:
        self.ops = ops
        self.in_tensors = in_tensors
        self.out_tensors = out_tensors
        self.var_ops = var_ops

    def __repr__(self) -> str:
        return f"<Segment of {len(self.ops)} ops: {', '.join(op.name for op in self.ops[:3])}>"


class Program:
    """`plan` as steps (see the module docstring).

    Besides `pre`, `steps` and `post`:
    - `var_ops`: the segments' variables in order of first use, `extra_vars` the plan's other
      variables (read by host ops), `written` the segment variables some segment writes;
    - `all_native`: every step is a segment; `single`: the program is one segment;
    - `fallbacks`: ops that run through their references only because they have no lowering
      (not host work by design): backends warn about them once;
    - `fetch_src`: per fetch, (kind, index): FEED (index into feeds + pre values), VARIABLE
      (the variable op), KERNEL (index into the single segment's results), VALUE (the tensor,
      from the run's values), POST (the tensor, from the deferred host ops' values);
    - `in_pos`: with `single`, where each of the segment's inputs comes from (index into feeds
      + pre values).
    """

    def __init__(self, plan: Plan, compiles: Optional[Callable] = None,
                 whole: bool = False) -> None:
        self.plan = plan
        self.compiles = compiles or _lower.supported
        self.whole = whole   # never split runs of compilable ops (export: one module)
        self.split()

    def split(self) -> None:
        """(Re)compute the steps from `compiles` (a backend that moves ops to the host
        changes it and splits again)."""
        self.pre, self.steps, self.post, self.fallbacks = _split(self.plan, self.compiles,
                                                                 self.whole)
        self._derive()

    def _derive(self) -> None:
        plan = self.plan
        self.single = len(self.steps) == 1 and isinstance(self.steps[0], Segment)
        vars_: list = []
        written = set()
        for s in self.steps:
            if isinstance(s, Segment):
                for v in s.var_ops:
                    if v not in vars_:
                        vars_.append(v)
                for op in s.ops:
                    if op.type in WRITES:
                        written.add(op.inputs[0].op)
        self.var_ops = vars_
        self.all_native = all(isinstance(s, Segment) for s in self.steps)
        self.extra_vars = [v for v in plan.variables if v not in vars_]
        self.written = [v for v in vars_ if v in written]
        feeds = list(plan.feeds)
        pre_out = [op.outputs[0] for op in self.pre]
        post_out = {t for op in self.post for t in op.outputs}
        self.fetch_src = []
        seg = self.steps[0] if self.single else None
        for t in plan.fetches:
            if t in feeds:
                self.fetch_src.append((FEED, feeds.index(t)))
            elif t in post_out:
                self.fetch_src.append((POST, t))
            elif t in pre_out:
                self.fetch_src.append((FEED, len(feeds) + pre_out.index(t)))
            elif t.op.type == "VariableV2":
                self.fetch_src.append((VARIABLE, t.op))
            elif seg is not None:
                self.fetch_src.append((KERNEL, seg.out_tensors.index(t)))
            else:
                self.fetch_src.append((VALUE, t))
        self.in_pos = None
        if seg is not None:
            self.in_pos = [feeds.index(t) if t in feeds else len(feeds) + pre_out.index(t)
                           for t in seg.in_tensors]

    def segments(self) -> list:
        return [s for s in self.steps if isinstance(s, Segment)]

    def as_text(self) -> str:
        """A readable listing of the steps."""
        lines = []
        for op in self.pre:
            lines.append(f"pre   {op.name} ({op.type})")
        for s in self.steps:
            if isinstance(s, Segment):
                lines.append(f"kernel of {len(s.ops)} ops: "
                             + ", ".join(op.name for op in s.ops))
            else:
                lines.append(f"host  {s.name} ({s.type})")
        for op in self.post:
            lines.append(f"post  {op.name} ({op.type})")
        return "\n".join(lines)


def _split(plan: Plan, compiles: Callable, whole: bool) -> tuple:
    """(pre, steps, post, fallbacks) of `plan`."""
    fed = set(plan.feeds)
    pre = []
    for op in plan.ops:
        # random ops whose inputs are known before the call are drawn first, with the
        # session's RNG, so they do not split the plan
        if (op.op_def.kind == "random" and len(op.outputs) == 1
                and all(t in fed or t.op.type == "Const" or t.op.type == "Shape"
                        and _fold.computable(t.op.inputs[0], fed) for t in op.inputs)
                and op.outputs[0] not in fed):
            pre.append(op)
    pre_set = set(pre)
    post = _deferred_host_ops(plan, fed)
    steps: list = []
    cur: list = []
    fallbacks: list = []
    on_host, quiet = _host_steps(plan, pre_set | post, compiles)
    for op in _host_first(plan, pre_set | post, on_host):
        if op in pre_set or op in post:
            continue
        if op not in on_host:
            cur.append(op)
            continue
        # host ops (control flow, TensorArrays, input pipelines, strings) and the ops only
        # they read are host work by design, and random ops always draw with the session's
        # NumPy generators: not fallbacks
        if (op.op_def.kind != "random" and not _lower.host_only(op)
                and not _lower.supported(op) and op not in quiet):
            fallbacks.append(op)
        if cur:
            steps.append(cur)
            cur = []
        steps.append(op)
    if cur:
        steps.append(cur)
    # a run of no-ops alone (a train op after host updates) needs no kernel
    steps = [st for st in steps
             if not (isinstance(st, list) and all(op.type == "NoOp" for op in st))]
    flat: list = []
    for s in steps:
        # long runs become several kernels, cut where repeated structure repeats
        flat.extend(_partition.split(s) if isinstance(s, list) and not whole else [s])
    steps = flat
    # the step owning each tensor (repeated constants are owned by their first chunk)
    produced_at: dict = {op.outputs[0]: -1 for op in pre}
    for i, s in enumerate(steps):
        for op in (s if isinstance(s, list) else [s]):
            for t in op.outputs:
                if t not in fed:
                    produced_at.setdefault(t, i)
    local_sets = [set(s) if isinstance(s, list) else {s} for s in steps]
    needed_after: dict = {}  # tensor -> last step index needing it (len(steps): fetched)
    for i, s in enumerate(steps):
        for op in (s if isinstance(s, list) else [s]):
            for t in op.inputs:
                if t.op in local_sets[i] and t not in fed:
                    continue
                needed_after[t] = max(needed_after.get(t, -1), i)
    for t in plan.fetches:
        needed_after[t] = len(steps)
    for op in post:
        for t in op.inputs:
            needed_after[t] = len(steps)
    out = []
    for i, s in enumerate(steps):
        if not isinstance(s, list):
            out.append(s)
            continue
        ins, outs, var_ops = [], [], []
        local = local_sets[i]
        for op in s:
            for t in op.inputs:
                src = t.op
                if src.type == "VariableV2" and t not in fed:
                    if src not in var_ops:
                        var_ops.append(src)
                    continue
                if (t in fed or src not in local) and t not in ins:
                    ins.append(t)
            if op.type == "VariableV2" and op not in var_ops:
                var_ops.append(op)
        for op in s:
            for t in op.outputs:
                if (t not in fed and produced_at.get(t) == i and needed_after.get(t, -1) > i
                        and t.op.type != "VariableV2"):
                    outs.append(t)
        out.append(Segment(s, ins, outs, var_ops))
    return pre, out, [op for op in plan.ops if op in post], fallbacks


def _deferred_host_ops(plan: Plan, fed: set) -> set:
    """Host ops (summaries, string formatting) that no other op of the plan waits for: they
    run after the kernels on their results instead of splitting the plan. Not stateful ones,
    not ones that reach session state (control flow, TensorArrays: `needs_ctx`), not ones a
    control dependency orders, and not ones reading a variable the plan writes (they would see
    its value after the run, not where the plan reads it)."""
    consumers: dict = {}
    ordered: set = set()
    written: set = set()
    for op in plan.ops:
        for t in op.inputs:
            consumers.setdefault(t, []).append(op)
        ordered.update(op._control_inputs)
        if op.type in WRITES:
            written.add(op.inputs[0].op)
    post: set = set()
    for op in reversed(plan.ops):
        d = op.op_def
        if (d.kind == "host" and not d.stateful and not d.needs_ctx and op not in ordered
                and not any(t in fed for t in op.outputs)
                and all(c in post for t in op.outputs for c in consumers.get(t, ()))
                and not any(t.op.type == "VariableV2" and t.op in written for t in op.inputs)):
            post.add(op)
    return post


def _host_steps(plan: Plan, pre: set, compiles) -> tuple:
    """(host ops, quiet ops): the ops of `plan` that run on the host: those that do not
    compile (`compiles(op)` false), and the ops read only by host ops that are constants,
    variables, random draws or computed from host values alone (a string op's defaults, an
    epoch counter, an input producer's shuffle: no kernel just to hand a few values to the
    host). The quiet ones are host work by position, not a missing lowering (no warning)."""
    host = {op for op in plan.ops if op not in pre and not compiles(op)}
    if not host:
        return host, set()
    fed = set(plan.feeds)
    readers: dict = {}
    for op in plan.ops:
        for t in op.inputs:
            readers.setdefault(t.op, []).append(op)

    def feeds_host(op) -> bool:
        rs = readers.get(op)
        return bool(rs) and all(r in host for r in rs) and (
            op.type in ("Const", "VariableV2") or op.op_def.kind == "random"
            or all(t in fed or t.op in host for t in op.inputs))

    changed = True
    while changed:
        changed = False
        for op in plan.ops:
            if op not in host and op not in pre and feeds_host(op):
                host.add(op)
                changed = True
    # ops without a lowering that feed only host ops are host work too (no warning)
    return host, {op for op in host if feeds_host(op)}


def _host_first(plan: Plan, pre: set, host: set) -> list:
    """`plan.ops` with the host ops that need nothing computed natively moved to the front
    (an input pipeline's get_next, a string parse), so they do not cut the native ops that
    follow them into several kernels; still a topological order."""
    if not host:
        return list(plan.ops)
    fed = set(plan.feeds)
    early: set = set()
    for op in plan.ops:
        if op in host and all(t in fed or t.op in early or t.op in pre for t in op.inputs) \
                and all(c in early for c in op._control_inputs):
            early.add(op)
    # host ops whose results nothing but no-ops wait for (an optimizer's in-place sparse
    # update) go last, with those no-ops, so the native ops around them form one kernel
    fetched = {t.op for t in plan.fetches}
    waiting: dict = {}
    for op in plan.ops:
        for t in op.inputs:
            waiting.setdefault(t.op, set()).add(op)
        for c in op._control_inputs:
            waiting.setdefault(c, set()).add(op)
    late: set = set()
    for op in reversed(plan.ops):
        if op in fetched or op in early:
            continue
        after = waiting.get(op, ())
        if op.type == "NoOp" and all(w in late for w in after):
            if any(c in late or c in host for c in op._control_inputs):
                late.add(op)
        elif op in host and all(w.type == "NoOp" for w in after):
            late.add(op)
    # a no-op seen before the host op it waits for: second pass
    for op in reversed(plan.ops):
        if op.type == "NoOp" and op not in late and op not in fetched and all(
                w in late for w in waiting.get(op, ())) and any(
                c in late for c in op._control_inputs):
            late.add(op)
    head = [op for op in plan.ops if op in early]
    tail = [op for op in plan.ops if op in late]
    return head + [op for op in plan.ops if op not in early and op not in late] + tail
