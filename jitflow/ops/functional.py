"""Real control flow: `While` and `If` ops whose bodies are regions of the graph.

A body (a loop body, a branch of a cond) is built by calling the user's function inside a
`Region`: the ops it creates live in the ordinary graph (with TF1's names, `while/add`,
`cond/Mul`), but they are reached only through the `While`/`If` op, never by the outer plan.
The region's inputs are `LoopVar` ops (fed each iteration) and its *captures*: tensors from
outside the region that body ops read, which become inputs of the `While`/`If` op, so the outer
plan computes them first and gradients flow to them. Variables read in a body are captured too
(their gradient is what an optimizer needs), unless the body writes them: then the body reads
the variable's live value.

At run time a body is a `SubPlan`: the pruned, sorted region ops for its outputs given its
inputs. It runs on the session's own backend (compiled bodies are compiled once, whatever the
trip count) or, when it writes variables or reads ones the run has already written, op by op
through the run's context, so reads and writes stay in order and a failed run still changes
nothing.

Gradients keep what they need, as TF1 does: a `While` keeps each iteration's loop variables and
the body values its backward ops read (its `trace` output), and its gradient is a `WhileGrad`
op that runs the body's backward sub-plan from the last iteration to the first, summing the
captures' gradients. Nothing of the forward body runs again (constants aside), so a dropout
mask or an assignment in the body is drawn or done once. An `If` keeps the taken branch's
values the same way (its last output), and its gradient is an `IfGrad` op that runs the taken
branch's backward sub-plan.
"""
from __future__ import annotations

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.core import errors
from jitflow.compiler.plan import Plan
from jitflow.core.graph import Operation, Tensor, make_op
from jitflow.ops.registry import register
from jitflow.core.shapes import TensorShape, as_shape

__all__: list = []   # machinery for control_flow.py and tensor_array.py; no public names

# Stateful ops that only read a variable.
_READ_ONLY = {"VariableV2", "IsVariableInitialized", "VariableOrInitialValue"}


# -- variant values -------------------------------------------------------------------------------
_OBJECT = np.dtype(object)


def box(value) -> np.ndarray:
    """A Python object as a rank-0 object array (how variant tensors carry values)."""
    a = np.empty((), dtype=_OBJECT)
    a[()] = value
    return a


def is_boxed(a) -> bool:
    return type(a) is np.ndarray and a.dtype is _OBJECT and a.ndim == 0


def unbox(a):
    return a[()] if type(a) is np.ndarray and a.dtype is _OBJECT and a.ndim == 0 else a


def is_differentiable(t: Tensor) -> bool:
    return t.dtype.is_floating or t.dtype is _dtypes.variant


def zeros_for(value):
    """Zeros shaped like a run-time value (a variant's zero is its own `zeros()`)."""
    if is_boxed(value):
        v = unbox(value)
        return box(v.zeros() if hasattr(v, "zeros") else None)
    return np.zeros_like(value)


def add_values(a, b):
    """Sum of two gradient values (arrays, or boxed variants with an `add` method)."""
    if a is None:
        return b
    if b is None:
        return a
    if is_boxed(a):
        x, y = unbox(a), unbox(b)
        if x is None:
            return b
        if y is None:
            return a
        return box(x.add(y))
    return a + b


def accumulate(acc, v):
    """`acc + v` for a running sum the caller owns: the first value is copied, later ones are
    added in place (arrays; TensorArray gradients entry by entry)."""
    if v is None:
        return acc
    if acc is None:
        if is_boxed(v):
            x = unbox(v)
            return box(x.copy()) if hasattr(x, "copy") else v
        return np.array(v, copy=True)
    if is_boxed(acc):
        x, y = unbox(acc), unbox(v)
        if y is None:
            return acc
        if x is None:
            return accumulate(None, v)
        x.add_into(y)
        return acc
    if isinstance(acc, np.ndarray) and acc.ndim and np.shape(v) == acc.shape:
        np.add(acc, v, out=acc)
        return acc
    return acc + v


# -- regions --------------------------------------------------------------------------------------
class Region:
    """The ops created inside a `with Region(graph):` block (by op id), with the graph's
    control-dependency stack cleared: outer control inputs go on the `While`/`If` op."""

    def __init__(self, graph, also=()) -> None:
        self.graph = graph
        self.ranges: list = [r for o in also for r in o.ranges]
        self.start = self.end = None

    def __enter__(self) -> "Region":
        g = self.graph
        self._saved = g._control_stack
        g._control_stack = []
        self.start = g._id_counter
        return self

    def __exit__(self, *exc) -> None:
        g = self.graph
        self.end = g._id_counter
        g._control_stack = self._saved
        self.ranges.append((self.start, self.end))

    def contains(self, op: Operation) -> bool:
        i = op._id
        return any(a < i <= b for a, b in self.ranges)


def _writes_variable(op: Operation):
    """The VariableV2 ops `op` may write: a stateful op taking a variable's ref, or what the
    bodies of a control-flow op write (its spec attr has `nested_writes()`)."""
    d = op.op_def
    if d.kind == "host":
        for v in op.attrs.values():
            if hasattr(v, "nested_writes"):
                return v.nested_writes()
        return ()
    if not d.stateful or op.type in _READ_ONLY:
        return ()
    return [t.op for t in op.inputs if t.op.type == "VariableV2"]


def analyze(region: Region, outputs: list, inputs: list, targets=()) -> tuple:
    """(captures, hoisted control inputs, written variables) of a region computing `outputs`
    (and running `targets`) from `inputs` (the region's LoopVar tensors)."""
    inside = set(inputs)
    captures: list = []
    cap_set: set = set()
    hoisted: list = []
    seen: set = set()
    written: set = set()
    var_tensors: list = []

    def capture(t: Tensor) -> None:
        if t not in cap_set and t not in inside:
            cap_set.add(t)
            captures.append(t)

    stack = []
    for t in outputs:
        if t in inside:
            continue
        if t.op.type == "VariableV2" or not region.contains(t.op):
            capture(t)
        else:
            stack.append(t.op)
    stack.extend(targets)
    while stack:
        op = stack.pop()
        if op in seen:
            continue
        seen.add(op)
        written.update(_writes_variable(op))
        for t in op.inputs:
            if t in inside:
                continue
            p = t.op
            if p.type == "VariableV2":
                var_tensors.append(t)
            elif region.contains(p):
                stack.append(p)
            else:
                capture(t)
        for c in op._control_inputs:
            if region.contains(c):
                stack.append(c)
            elif c not in hoisted:
                hoisted.append(c)
    for t in var_tensors:
        if t.op not in written:
            capture(t)
    return captures, hoisted, written


def _region_ops(region: Region, fetches: list, targets: list, fed: set) -> list:
    """Region ops needed for `fetches`/`targets` given `fed`, inputs first (iterative DFS)."""
    order: list = []
    state: dict = {}
    roots = [t.op for t in fetches if t not in fed] + list(targets)

    def deps(op):
        for t in op.inputs:
            if t not in fed:
                yield t.op
        for c in op._control_inputs:
            if region.contains(c):
                yield c

    for root in roots:
        if root in state:
            continue
        state[root] = 1
        stack = [(root, deps(root))]
        while stack:
            op, it = stack[-1]
            for dep in it:
                s = state.get(dep)
                if s is None:
                    if not (region.contains(dep) or dep.type == "VariableV2"):
                        raise ValueError(
                            f"'{op.name}' inside a control-flow body reads '{dep.name}', which "
                            "is neither an input of the body nor captured")
                    state[dep] = 1
                    stack.append((dep, deps(dep)))
                    break
                if s == 1:
                    raise ValueError(f"The graph has a cycle through op '{dep.name}'")
            else:
                stack.pop()
                state[op] = 2
                order.append(op)
    return order


# Forward ops a backward pass recomputes rather than keeps: cheap, deterministic and stateless
# (elementwise math, shapes, data movement). Everything else a backward op reads (matmuls,
# reductions, random draws, stateful and host ops) is kept by the forward pass.
_RECOMPUTE_KINDS = ("elementwise", "shape", "source")
_RECOMPUTE_TYPES = {"ConcatV2", "Split", "Slice", "StridedSlice", "Pack", "Unpack", "Transpose",
                    "Fill", "BroadcastReduced", "ReverseV2", "Tile", "PadV2", "OneHot",
                    "IdentityN"}


def _recomputable(op: Operation) -> bool:
    d = op.op_def
    if d.stateful or op.type in ("LoopVar", "Placeholder"):
        return False
    return d.kind in _RECOMPUTE_KINDS or op.type in _RECOMPUTE_TYPES


def saved_for_backward(forward: Region, back: Region, fetches: list, feeds: list) -> list:
    """The tensors of a forward body that its backward pass keeps from the forward pass, as
    TF1 keeps a loop's intermediates in stacks: the outputs of the forward ops the backward
    needs that are not cheap to recompute (matmuls, reductions, random draws, stateful and
    host ops). So random draws and stateful ops in the body never run again, and the cheap
    elementwise ops between them fuse into the backward kernels instead of being stored."""
    graph = forward.graph
    fed = set(feeds)
    region = Region(graph, also=[forward, back])
    saved: list = []
    while True:
        ops = _region_ops(region, fetches, [], fed)
        used = {t for op in ops for t in op.inputs} | set(fetches)
        new = []
        for op in ops:
            if back.contains(op) or not forward.contains(op) or _recomputable(op):
                continue
            if op.type == "VariableV2":
                continue
            for t in op.outputs:
                if t not in fed and t in used:
                    new.append(t)
        if not new:
            return saved
        for t in new:
            fed.add(t)
            saved.append(t)


def _clustered(ops: list, fed: set) -> list:
    """`ops` re-sorted so that host ops (TensorArray reads and writes, nested control flow)
    split the compiled ops into few runs: between two host ops every ready compiled op runs,
    and at such a boundary every ready host op runs first (a read feeding the body goes before
    the body, a write of its result after it). Each run is one native call per iteration."""
    index = {op: i for i, op in enumerate(ops)}
    waiting = {}
    users: dict = {}
    for op in ops:
        deps = {t.op for t in op.inputs if t not in fed and t.op in index}
        deps |= {c for c in op._control_inputs if c in index}
        waiting[op] = len(deps)
        for d in deps:
            users.setdefault(d, []).append(op)
    ready_c = [op for op in ops if waiting[op] == 0 and op.op_def.kind != "host"]
    ready_h = [op for op in ops if waiting[op] == 0 and op.op_def.kind == "host"]
    out = []
    boundary = True
    while ready_c or ready_h:
        # keep the original order among ready ops of a kind (ties broken by position)
        pool = ready_h if ready_h and (boundary or not ready_c) else ready_c
        boundary = pool is ready_h
        pool.sort(key=index.__getitem__, reverse=True)
        op = pool.pop()
        out.append(op)
        for u in users.get(op, ()):
            waiting[u] -= 1
            if waiting[u] == 0:
                (ready_c if u.op_def.kind != "host" else ready_h).append(u)
    return out if len(out) == len(ops) else ops


class SubPlan:
    """A region's ops computing `fetches` from `feeds`, runnable many times per outer run."""

    def __init__(self, region: Region, fetches: list, feeds: list, targets=()) -> None:
        graph = region.graph
        self.region = region
        fed = set(feeds)
        ops = _region_ops(region, fetches, list(targets), fed)
        if not any(_writes_variable(op) for op in ops):
            ops = _clustered(ops, fed)   # the order of reads and writes is left alone
        computed = [t for t in fetches if t not in fed]
        self.feeds = list(feeds)
        self.fetches = list(fetches)
        # where each fetch comes from: ("feed", i) or ("out", j)
        pos = {t: i for i, t in enumerate(feeds)}
        out_pos = {}
        for t in computed:
            out_pos.setdefault(t, len(out_pos))
        self.where = [("feed", pos[t]) if t in fed else ("out", out_pos[t]) for t in fetches]
        used = {t for op in ops for t in op.inputs} | set(computed)
        self.plan_feed_pos = [i for i, t in enumerate(feeds) if t in used]
        self.plan = Plan(graph, list(out_pos), list(targets), [feeds[i] for i in
                                                              self.plan_feed_pos], ops)
        self.writes = {v for op in ops for v in _writes_variable(op)}
        self.reads = {op for op in ops if op.type == "VariableV2"}
        self.npdtypes = [None if t.dtype is _dtypes.variant else np.dtype(t.dtype.as_numpy_dtype)
                         for t in self.plan.feeds]

    def runner(self, ctx):
        """A function running this sub-plan many times in the run context `ctx` (a loop's
        iterations): what `run` decides per call (compiled or op by op, which executable) is
        decided once. The body writes no variable, so the decision holds for the loop."""
        plan = self.plan
        if not (plan.ops or plan.fetches) or self.writes or (
                ctx.pending and not self.reads.isdisjoint(ctx.pending)):
            return lambda values: self.run(values, ctx)
        store = ctx.store
        ex = self._executable(store)
        run_body = getattr(ex, "run_body", None)
        pos, dts, where = self.plan_feed_pos, self.npdtypes, self.where
        feed_only = all(k == "feed" for k, _ in where)

        def call(values: list) -> list:
            vals = []
            for i, d in zip(pos, dts):
                v = values[i]
                if d is not None and not (type(v) is np.ndarray and v.dtype is d):
                    v = _as_array(v, d)
                vals.append(v)
            out = ex(vals, store) if run_body is None else run_body(vals, store, ctx)
            if feed_only:
                return [values[i] for _, i in where]
            return [out[i] if k == "out" else values[i] for k, i in where]
        return call

    def _executable(self, store):
        """This sub-plan's executable on the store's backend (compiled once per store)."""
        ex = store.subplans.get(self)
        if ex is None:
            ex = store.subplans[self] = store.backend.compile(self.plan)
        return ex

    def run(self, values: list, ctx) -> list:
        """The fetches' values given the feeds' `values`, in the run context `ctx`."""
        plan = self.plan
        if plan.ops or plan.fetches:
            vals = [values[i] for i in self.plan_feed_pos]
            store = ctx.store
            if not self.writes and not (ctx.pending and not self.reads.isdisjoint(ctx.pending)):
                ex = self._executable(store)
                vals = [v if d is None else _as_array(v, d) for v, d in zip(vals, self.npdtypes)]
                run_body = getattr(ex, "run_body", None)
                out = ex(vals, store) if run_body is None else run_body(vals, store, ctx)
            else:
                from jitflow.runtime.reference import run_reference_step
                env = dict(zip(plan.feeds, vals))
                for op in plan.ops:
                    run_reference_step(op, env, ctx)
                out = []
                for t in plan.fetches:
                    if t.op.type == "VariableV2" and t not in env:
                        out.append(np.array(ctx.read_var(t.op), copy=True))
                    else:
                        out.append(env[t])
        else:
            out = []
        return [values[i] if k == "feed" else out[i] for k, i in self.where]


def _as_array(v, npd: np.dtype):
    if type(v) is np.ndarray and (v.dtype is npd or v.dtype == npd):
        return v
    return np.asarray(v, dtype=npd)


# -- LoopVar: a region's input ------------------------------------------------------------------
def _loop_var_ref(op, ctx=None):
    raise errors.InvalidArgumentError(
        None, op, f"Tensor '{op.outputs[0].name}' is an input of a control-flow body "
        f"({op.attrs.get('owner', 'while loop')}); it has a value only inside that body, so "
        "ops outside the loop or cond cannot use it or what is computed from it")


register("LoopVar", infer=lambda op: [(op.attrs["dtype"], op.attrs["shape"])],
         ref=_loop_var_ref, differentiable=False, kind="source", default_name="Identity",
         doc="An input of a while-loop body or cond branch, fed each time the body runs.")


def loop_var(dtype, shape, name: str = "Identity", owner: str = "while loop") -> Tensor:
    from jitflow.core.graph import get_default_graph
    return make_op("LoopVar", [], {"dtype": dtype, "shape": as_shape(shape), "owner": owner},
                   name=name, graph=get_default_graph()).outputs[0]


def resolve_inputs(args, ctx) -> list:
    """Reference inputs with variables (passed as their ops to ctx refs) read as values."""
    return [ctx.read_var(a) if isinstance(a, Operation) else a for a in args]


def shape_str(shape: TensorShape) -> str:
    if shape.ndims is None:
        return "<unknown>"
    return "(" + ", ".join("?" if d is None else str(d) for d in shape.as_list()) + \
        ("," if shape.ndims == 1 else "") + ")"
