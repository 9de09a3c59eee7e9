"""Checks that a run on the numba backend did its numeric work in native kernels: every step
that is not a native segment is host work by design (no reference fallback), and every
segment ran a compiled kernel."""
from __future__ import annotations

from jitflow.compiler.lower import host_only
from jitflow.backends.numba_cpu.executable import Executable
from jitflow.backends.numba_cpu.kernels import Compiled
from jitflow.compiler.program import Segment


def native_steps(sess, fetches_key=None) -> list:
    """[(kind, name)] of the steps of the session's run signatures (all, or the one whose
    memo key starts with `fetches_key`), asserting the numba backend's invariants."""
    out = []
    for key, spec in sess._specs.items():
        if fetches_key is not None and key[0] is not fetches_key:
            continue
        ex = spec.executable
        assert isinstance(ex, Executable), type(ex)
        for s in ex.steps:
            if isinstance(s, Segment):
                kernels = [c for c in ex.kernels[s].compiled.values() if isinstance(c, Compiled)]
                assert kernels and all(c.called and not c.broken for c in kernels), \
                    f"segment of {[op.name for op in s.ops]} did not run native code"
                out.append(("native", len(s.ops)))
            else:
                assert (host_only(s) or s.type in ("Const", "VariableV2")
                        or s.op_def.kind == "random"), f"{s.name} ({s.type}) fell back"
                out.append(("host", s.type))
    return out
