"""Inspection: what a CPU executable runs, as text (`Session.inspect`, `JITFLOW_DEBUG=4`,
export).

`sources(ex, feeds, store)` gives (segment, compiled) pairs: in single mode compiled for the
given feeds if needed (nothing runs); otherwise the segments compiled by earlier runs.
`describe(ex, feeds, store)` gives the generated source of each kernel, each line tagged with
its op's name, and the host steps between them.
"""
from __future__ import annotations

import numpy as np

from jitflow.backends.numba_cpu.kernels import Compiled, contig
from jitflow.compiler.program import Segment

__all__ = ["sources", "describe", "placeholder_value", "placeholder_var"]


def sources(ex, feed_values, store) -> list:
    """(segment, compiled) for each native segment of executable `ex`."""
    out = []
    state = store.values
    if ex.single:
        seg = ex.steps[0]
        env = dict(zip(ex.plan.feeds, feed_values))
        ins = [contig(env[t]) if t in env else placeholder_value(t) for t in seg.in_tensors]
        bufs = [state.get(v) for v in ex.var_ops]
        if any(b is None for b in bufs):
            bufs = [b if b is not None else placeholder_var(v)
                    for b, v in zip(bufs, ex.var_ops)]
        c = ex._compiled_for(seg, ins, bufs)
        if isinstance(c, Compiled) and not c.broken:
            out.append((seg, c))
        return out
    for s in ex.steps:
        if isinstance(s, Segment):
            for c in ex.kernels[s].compiled.values():
                if isinstance(c, Compiled) and not c.broken:
                    out.append((s, c))
    return out


def describe(ex, feed_values, store) -> str:
    """Readable view of what a run of `ex` executes: generated sources and reference steps."""
    if ex.single:
        found = sources(ex, feed_values, store)
        if found:
            return found[0][1].tagged
        return "# no kernel for these input shapes: the plan runs through its references\n" \
            + ex.plan.as_text()
    parts = []
    for s in ex.steps:
        if isinstance(s, Segment):
            kernels = [c for c in ex.kernels[s].compiled.values() if isinstance(c, Compiled)]
            if kernels:
                for c in kernels:
                    parts.append(c.tagged)
            else:
                parts.append(f"# native segment of {len(s.ops)} ops (compiled at first run): "
                             + ", ".join(op.name for op in s.ops))
        elif s.type != "VariableV2":
            parts.append(f"# reference step: {s.name} ({s.type})")
    return "\n".join(parts)


def placeholder_value(t):
    """A stand-in feed for tensor `t` (unknown dims 2, so none is 1)."""
    dims = t.shape.as_tuple() or ()
    return np.zeros([d if d is not None else 2 for d in dims], t.dtype.as_numpy_dtype)


def placeholder_var(var_op):
    """A stand-in buffer for an uninitialized variable."""
    shape = var_op.attrs["shape"].as_tuple() or ()
    return np.zeros([d if d is not None else 2 for d in shape],
                    var_op.attrs["dtype"].as_numpy_dtype)
