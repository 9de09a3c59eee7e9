"""Execution plans: what one `Session.run` signature must compute, in order.

A plan is built once per (fetches, fed tensors) and reused: the pruned, topologically sorted
list of ops (stopping at fed tensors, following control inputs). Both backends execute plans:
the interpreter op by op, the compiler by turning them into kernels.
"""
from __future__ import annotations

from typing import Iterable, Sequence

from jitflow.core.graph import Operation, Tensor

__all__ = ["Plan", "build_plan", "toposort"]


class Plan:
    """The ops needed for `fetches` and `targets` given `feeds`, sorted so inputs come first."""

    __slots__ = ("fetches", "targets", "feeds", "ops", "graph", "_text")

    def __init__(self, graph, fetches: Sequence[Tensor], targets: Sequence[Operation],
                 feeds: Sequence[Tensor], ops: Sequence[Operation]) -> None:
        self.graph = graph
        self.fetches = tuple(fetches)
        self.targets = tuple(targets)
        self.feeds = tuple(feeds)
        self.ops = tuple(ops)
        self._text = None

    @property
    def variables(self) -> list:
        """The VariableV2 ops the plan touches, in plan order."""
        return [op for op in self.ops if op.type == "VariableV2"]

    def as_text(self) -> str:
        """A readable listing: feeds, ops in execution order, fetches."""
        if self._text is None:
            lines = [f"feed {t.name}: {t.dtype.name}{_dims(t)}" for t in self.feeds]
            lines += [self.graph._op_line(op) for op in self.ops]
            lines += [f"fetch {t.name}" for t in self.fetches]
            lines += [f"target {op.name}" for op in self.targets]
            self._text = "\n".join(lines)
        return self._text

    def __repr__(self) -> str:
        return f"<Plan {len(self.ops)} ops, {len(self.feeds)} feeds, {len(self.fetches)} fetches>"


def _dims(t: Tensor) -> str:
    d = t.shape.as_tuple()
    return "[*]" if d is None else "[" + ",".join("?" if x is None else str(x) for x in d) + "]"


def toposort(roots: Iterable[Operation], fed: frozenset = frozenset()) -> list:
    """Iterative depth-first post-order over inputs then control inputs.

    A tensor in `fed` is not computed, so its producer is reached only if another of the
    producer's outputs, or a control edge, needs it.
    """
    order: list = []
    state: dict = {}  # op -> 1 while on the stack, 2 when emitted
    for root in roots:
        if root in state:
            continue
        stack = [(root, _deps(root, fed))]
        state[root] = 1
        while stack:
            op, it = stack[-1]
            for dep in it:
                s = state.get(dep)
                if s is None:
                    state[dep] = 1
                    stack.append((dep, _deps(dep, fed)))
                    break
                if s == 1:
                    raise ValueError(f"The graph has a cycle through op '{dep.name}'")
            else:
                stack.pop()
                state[op] = 2
                order.append(op)
    return order


def _deps(op: Operation, fed: frozenset):
    for t in op.inputs:
        if t not in fed:
            yield t.op
    for c in op._control_inputs:
        # A control input whose every output is fed is satisfied by the feed (TF1 prunes it).
        if not c.outputs or any(o not in fed for o in c.outputs):
            yield c


def build_plan(graph, fetches: Sequence[Tensor], targets: Sequence[Operation],
               feeds: Sequence[Tensor]) -> Plan:
    """Prune and sort the graph for one run signature."""
    fed = frozenset(feeds)
    roots = [t.op for t in fetches if t not in fed] + list(targets)
    ops = toposort(roots, fed)
    used = {t for op in ops for t in op.inputs}
    used.update(fetches)
    needed_feeds = [t for t in feeds if t in used]
    return Plan(graph, fetches, targets, needed_feeds, ops)
