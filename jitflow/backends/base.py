"""What every compiling backend shares: the executable's skeleton around a `Program`, and the
protocol between a backend's kernels and its driver.

A backend's executable (numba_cpu/executable.py, numba_cuda/driver.py) subclasses
`ProgramExecutable`: it gets the plan's `Program` (jitflow/compiler/program.py), the hoisted
random draws, the deferred host ops, the whole-plan reference run and the fallback warnings,
and adds how its segments compile and run. Kernels signal the driver with

- `CheckFailed(op, what)`: the kernel's prologue refused its operands (a shape it was not
  made for, or invalid ones) and wrote nothing: the run goes op by op through the references,
  which give the answer or TF1's error naming the op;
- `UseReferences`: no working kernel for these input classes (the segment's ops run through
  their references);
- `CodegenError`: generated code that does not compile or run: a compiler bug (raised under
  JITFLOW_STRICT, else a fallback with one warning).
"""
from __future__ import annotations

import warnings
from typing import Callable, Optional

import numpy as np

from jitflow.compiler.plan import Plan
from jitflow.compiler.program import Program, Segment
from jitflow.core import fold as _fold
from jitflow.runtime import config
from jitflow.runtime.reference import RunContext, run_op_reference, run_plan, run_reference_step

__all__ = ["ProgramExecutable", "CheckFailed", "UseReferences", "CodegenError", "REFERENCES",
           "fallback_warning", "undraw", "MAX_EXACT", "WARNED_OPS", "decode_check_error",
           "ERROR_PREFIX"]

#: what a failing kernel check raises: ValueError("jitflow:<op index>:<what>")
ERROR_PREFIX = "jitflow:"
MAX_EXACT = 256      # exact input shapes remembered per executable (each maps to a kernel)
REFERENCES = "references"   # a segment's kernel marker: this class runs through the references
WARNED_OPS: set = set()     # warnings given once per process (op types, fallback reasons)


class UseReferences(Exception):
    """The segment has no working kernel for these input classes. `args[0]`, when given, is
    a kernel whose references run should be timed into its `ref_cost`."""


class CheckFailed(Exception):
    """A kernel's prologue found operands it cannot handle; nothing was written.
    `args`: (op, what)."""


class CodegenError(Exception):
    """Generated code that does not parse, or that cannot be compiled or run: a compiler bug.

    In production the segment falls back to its references for that shape class (one warning
    naming its ops); with JITFLOW_STRICT=1 (the fuzzer, the tests) it is raised instead."""


def decode_check_error(err: ValueError, ops) -> Optional[CheckFailed]:
    """The `CheckFailed` a kernel's `ValueError("jitflow:<op>:<what>")` stands for, else None."""
    msg = str(err)
    if not msg.startswith(ERROR_PREFIX):
        return None
    _, idx, what = msg.split(":", 2)
    return CheckFailed(ops[int(idx)], what)


def fallback_warning(seg: Optional[Segment], why: str, bug: bool, stats: dict = None) -> None:
    """Warn once per reason that a segment runs through its references."""
    ops = seg.ops if seg is not None else []
    names = ", ".join(f"{op.name} ({op.type})" for op in ops[:4])
    more = f" and {len(ops) - 4} more" if len(ops) > 4 else ""
    what = "a code generation bug" if bug else "no kernel for this case"
    msg = (f"jitflow: {what} ({why}); ops {names}{more} run through their NumPy references "
           "for these input shapes")
    if stats is not None:
        stats["reference_fallbacks"] = stats.get("reference_fallbacks", 0) + 1
    key = (why, bug)
    if key not in WARNED_OPS:
        WARNED_OPS.add(key)
        warnings.warn(msg, RuntimeWarning, stacklevel=5)
    if config.debug_level() >= 1:
        config.debug(msg)


def undraw(drawn) -> None:
    """Put random generators back to the states saved as (generator, state) pairs."""
    for g, st in drawn:
        g.bit_generator.state = st


class ProgramExecutable:
    """A plan's `Program` and what every backend does around its segments."""

    def __init__(self, plan: Plan, compiles: Optional[Callable] = None,
                 whole: bool = False) -> None:
        self.plan = plan
        self.debug = config.debug_level()
        self._shape_memo: dict = {}   # shapes of tf.shape(h) for hoisted random ops
        self.program = Program(plan, compiles, whole)
        self._adopt()
        if self.debug >= 3:
            config.debug("plan:\n" + plan.as_text())

    def _adopt(self) -> None:
        """Copy the program's parts the run loop reads (after a split) and warn about ops that
        run through their references for want of a lowering."""
        p = self.program
        self.pre, self.steps, self.post = p.pre, p.steps, p.post
        self.single, self.all_native = p.single, p.all_native
        self.var_ops, self.extra_vars, self.written = p.var_ops, p.extra_vars, p.written
        self.fetch_src, self.in_pos = p.fetch_src, p.in_pos
        for op in p.fallbacks:
            if op.type not in WARNED_OPS:
                WARNED_OPS.add(op.type)
                warnings.warn(f"jitflow: op type {op.type} has no code generator; it runs "
                              "through its NumPy reference", RuntimeWarning, stacklevel=6)

    def resplit(self) -> None:
        """Split the plan again (the backend's `compiles` changed its mind about some ops)."""
        self.program.split()
        self._adopt()

    # -- around the segments ------------------------------------------------------------------
    def run_references(self, feed_values, store) -> list:
        """The whole plan through the references (results never alias a variable buffer)."""
        out = run_plan(self.plan, feed_values, store)
        held = {id(a) for a in store.values.values()}
        return [np.array(r, copy=True) if id(r) in held else r for r in out]

    def saved_draws(self, store) -> list:
        """The states of the hoisted random ops' generators, to put back with `undraw` when a
        run goes to the references after drawing (they must draw the same numbers)."""
        return [(g, g.bit_generator.state) for g in map(store.rng_for, self.pre)] \
            if self.pre else []

    def draw_hoisted(self, feed_values, store) -> list:
        """Values of the hoisted random ops, drawn with the store's RNGs."""
        ctx = RunContext(store)
        env = dict(zip(self.plan.feeds, feed_values))
        vals = []
        for op in self.pre:
            args = [env[t] if t in env else t.op.attrs["value"] if t.op.type == "Const"
                    else self._runtime_shape(t, env, store) for t in op.inputs]
            vals.append(run_op_reference(op, args, ctx)[0])
        return vals

    def _runtime_shape(self, t, env, store) -> np.ndarray:
        """The value of a `tf.shape(h)` feeding a hoisted random op, from feed shapes (and
        variable shapes); remembered per shapes of what flows in."""
        state = store.values
        key = (t, tuple([np.shape(env[f]) for f in self.plan.feeds]),
               tuple([np.shape(state[v]) if v in state else None
                      for v in self.plan.variables]))
        dims = self._shape_memo.get(key)
        if dims is None:
            dims = _fold.shape_of(t.op.inputs[0], env, state)
            if dims is None:  # operands that do not agree: the references report it
                raise CheckFailed(t.op, "shapes of the operands do not agree")
            if len(self._shape_memo) >= MAX_EXACT:
                self._shape_memo.clear()
            self._shape_memo[key] = dims
        return np.array(dims, t.dtype.as_numpy_dtype)

    def run_post(self, feed_values, seg: Segment, outs, store) -> dict:
        """Run the deferred host ops (summaries, string formatting) on a single segment's
        results; the values by tensor."""
        env = dict(zip(self.plan.feeds, feed_values))
        for op, v in zip(self.pre, feed_values[len(self.plan.feeds):]):
            env[op.outputs[0]] = v
        env.update(zip(seg.out_tensors, outs))
        ctx = RunContext(store)
        with np.errstate(all="ignore"):
            for op in self.post:
                run_reference_step(op, env, ctx)
        return env
