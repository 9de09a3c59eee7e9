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

__all__ = ["TracedFunction", "Spec", "SparseSpec", "spec_like"]


class Spec:
    """The dtype and static shape of one component of a dataset element."""

    __slots__ = ("dtype", "shape")
    is_sparse = False

    def __init__(self, dtype, shape) -> None:
        from jitflow.core.dtypes import as_dtype
        from jitflow.core.shapes import as_shape
        self.dtype = as_dtype(dtype)
        self.shape = as_shape(shape)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.dtype.name}, {self.shape})"


class SparseSpec(Spec):
    """A SparseTensor component (`shape`: its dense shape). Its value in a running pipeline is
    a SparseTensorValue; graph ops see its three tensors (indices, values, dense_shape)."""

    __slots__ = ()
    is_sparse = True

    def parts(self) -> list:
        """The (dtype, static shape) of indices, values and dense_shape."""
        from jitflow.core import dtypes
        from jitflow.core.shapes import TensorShape
        rank = self.shape.ndims
        return [(dtypes.int64, TensorShape([None, rank])), (self.dtype, TensorShape([None])),
                (dtypes.int64, TensorShape([rank]))]


def spec_like(spec: Spec, dtype, shape) -> Spec:
    """A spec of the same kind (dense or sparse) as `spec`."""
    return type(spec)(dtype, shape)


def _sparse_value(parts):
    from jitflow.ops.sparse import SparseTensorValue
    return SparseTensorValue(*parts)


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
            self.args, leaves = [], []
            self._in_sparse = [s.is_sparse for s in specs]
            for i, s in enumerate(specs):
                if s.is_sparse:
                    from jitflow.ops.sparse import SparseTensor
                    parts = [placeholder(d, sh, name=f"args_{i}_{k}") for k, (d, sh) in
                             zip(("indices", "values", "dense_shape"), s.parts())]
                    self.args.extend(parts)
                    leaves.append(SparseTensor(*parts))
                else:
                    self.args.append(placeholder(s.dtype, s.shape, name=f"args_{i}"))
                    leaves.append(self.args[-1])
            element = nest.pack_sequence_as(input_structure, leaves)
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
                out_specs, fetches, self._out_sparse = [], [], []
                for v in nest.flatten(out):
                    if _is_sparse_tensor(v):
                        out_specs.append(SparseSpec(v.dtype, v.shape))
                        fetches.extend([v.indices, v.values, v.dense_shape])
                        self._out_sparse.append(True)
                    else:
                        t = convert_to_tensor(v)
                        out_specs.append(Spec(t.dtype, t.shape))
                        fetches.append(t)
                        self._out_sparse.append(False)
                self.output_structure = nest.pack_sequence_as(out, out_specs)
                self.outputs = fetches
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
        """The flat outputs for one element's components (a sparse component is a
        SparseTensorValue, in and out)."""
        exe = self._executable()
        args: list = []
        for v, sparse in zip(flat_args, self._in_sparse):
            args.extend(v if sparse else (v,))
        vals = args + list(captured_values)
        if self._exe.plan.ops:
            out = exe([vals[i] for i in self._feed_order], store)
        else:
            out = [None] * len(self.fetches)
        flat = [vals[f] if f is not None else np.asarray(o)
                for f, o in zip(self._fetch_fed, out)]
        if not hasattr(self, "_out_sparse") or not any(self._out_sparse):
            return flat
        result, k = [], 0
        for sparse in self._out_sparse:
            if sparse:
                result.append(_sparse_value([np.asarray(x) for x in flat[k:k + 3]]))
                k += 3
            else:
                result.append(flat[k])
                k += 1
        return result


def _is_sparse_tensor(v) -> bool:
    from jitflow.ops.sparse import SparseTensor
    return isinstance(v, SparseTensor)
