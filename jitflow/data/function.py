"""Functions of dataset elements (`map`, `filter`, `flat_map`): traced once into the graph.

The Python function is called once, on placeholders standing for one element (their dtypes and
static shapes are the element's), inside a name scope of its own. The ops it creates form a
small plan that runs for each element through the NumPy references (host work: the element's
values are fed, the outputs fetched). Tensors from outside the function that need a feed (a
placeholder fed when the iterator is initialized) are captured: their values are taken when
the iterator is initialized, as TF1 captures them.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from jitflow.core import structure as nest
from jitflow.core.graph import Tensor, convert_to_tensor, name_scope

__all__ = ["TracedFunction", "Spec"]


class Spec:
    """The dtype and static shape of one component of a dataset element."""

    __slots__ = ("dtype", "shape")

    def __init__(self, dtype, shape) -> None:
        from jitflow.core.dtypes import as_dtype
        from jitflow.core.shapes import as_shape
        self.dtype = as_dtype(dtype)
        self.shape = as_shape(shape)

    def __repr__(self) -> str:
        return f"Spec({self.dtype.name}, {self.shape})"


def _needs_feed(t: Tensor, memo: dict) -> bool:
    """Whether computing `t` needs a fed placeholder (iterative walk over its inputs)."""
    start = t.op
    if start in memo:
        return memo[start]
    stack = [(start, False)]
    while stack:
        op, expanded = stack.pop()
        if op in memo:
            continue
        if op.type == "Placeholder":
            memo[op] = True
            continue
        deps = [x.op for x in op.inputs] + list(op._control_inputs)
        if not expanded:
            stack.append((op, True))
            stack.extend((d, False) for d in deps if d not in memo)
        else:
            memo[op] = any(memo.get(d, False) for d in deps)
    return memo[start]


class TracedFunction:
    """A dataset function traced on placeholders; `__call__(store, flat_args, captured)`
    runs it for one element and returns its flat outputs."""

    def __init__(self, fn: Callable, input_structure, graph, scope: str,
                 returns_dataset: bool = False) -> None:
        from jitflow.ops.sources import placeholder
        self.graph = graph
        self.input_structure = input_structure
        specs = nest.flatten(input_structure)
        with graph.as_default(), graph.control_dependencies(None), name_scope(scope):
            n0 = len(graph._ops)
            self.args = [placeholder(s.dtype, s.shape, name=f"args_{i}")
                         for i, s in enumerate(specs)]
            element = nest.pack_sequence_as(input_structure, self.args)
            if isinstance(element, tuple) and not hasattr(element, "_fields"):
                out = fn(*element)
            else:
                out = fn(element)
            if returns_dataset:
                from jitflow.data.dataset import Dataset
                if not isinstance(out, Dataset):
                    raise TypeError(f"`{scope}` function must return a Dataset, got "
                                    f"{type(out).__name__}")
                self.dataset = out
                fetches = out._inputs()
            else:
                if isinstance(out, list):
                    out = tuple(out)  # as TF: a returned list is a tuple of components
                leaves = [convert_to_tensor(v) for v in nest.flatten(out)]
                self.output_structure = nest.pack_sequence_as(
                    out, [Spec(t.dtype, t.shape) for t in leaves])
                self.outputs = leaves
                fetches = leaves
            inside = set(graph._ops[n0:])
        memo: dict = {a.op: False for a in self.args}
        captured = []
        for op in inside:
            for t in op.inputs:
                if t.op not in inside and t not in captured and _needs_feed(t, memo):
                    captured.append(t)
        for t in fetches:
            if t.op not in inside and t not in captured and t not in self.args \
                    and _needs_feed(t, memo):
                captured.append(t)
        self.captured = captured
        self.fetches = list(fetches)
        self._exe = None
        self._feed_order = None

    def _executable(self):
        if self._exe is None:
            from jitflow.compiler.plan import build_plan
            from jitflow.backends.interpreter import Interpreter
            feeds = list(self.args) + list(self.captured)
            plan = build_plan(self.graph, self.fetches, [], feeds)
            pos = {t: i for i, t in enumerate(feeds)}
            self._feed_order = [pos[t] for t in plan.feeds]
            self._fetch_fed = [pos.get(t) for t in self.fetches]
            self._exe = Interpreter().compile(plan)
        return self._exe

    def __call__(self, store, flat_args, captured_values) -> list:
        exe = self._executable()
        vals = list(flat_args) + list(captured_values)
        if self._exe.plan.ops:
            out = exe([vals[i] for i in self._feed_order], store)
        else:
            out = [None] * len(self.fetches)
        return [vals[f] if f is not None else np.asarray(o)
                for f, o in zip(self._fetch_fed, out)]
