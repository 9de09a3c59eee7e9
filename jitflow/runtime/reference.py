"""Reference steps: one op run through its NumPy reference, with the run's context.

Every backend runs the ops it does not compile (host ops, ops without a lowering) through
these, and the reference backend (jitflow/backends/interpreter.py) runs whole plans with them.
Variable writes go to a pending overlay (`RunContext.pending`) that is committed only when
the whole run succeeds, so a failed run leaves every variable unchanged.
"""
from __future__ import annotations

import numpy as np

from jitflow.core import errors

__all__ = ["RunContext", "run_op_reference", "run_reference_step", "run_steps", "run_plan"]


class RunContext:
    """What stateful references see: the store's variables (with pending writes) and RNGs."""

    __slots__ = ("store", "pending")

    def __init__(self, store) -> None:
        self.store = store
        self.pending: dict = {}

    def read_var(self, var_op):
        v = self.pending.get(var_op)
        if v is None:
            v = self.store.get(var_op)
            if v is None:
                raise errors.FailedPreconditionError(
                    None, var_op, f"Attempting to use uninitialized value {var_op.name}\n\t "
                                  f"[[node {var_op.name}]]")
        return v

    def write_var(self, var_op, value):
        value = np.asarray(value, dtype=var_op.attrs["dtype"].as_numpy_dtype)
        self.pending[var_op] = value
        return value

    def is_initialized(self, var_op) -> bool:
        return var_op in self.pending or var_op in self.store

    def rng(self, op) -> np.random.Generator:
        return self.store.rng_for(op)

    def commit(self) -> None:
        if self.pending:
            self.store.commit(self.pending)


def run_op_reference(op, args, ctx: RunContext):
    """Run one op's reference; returns a tuple with one array per output."""
    d = op.op_def
    out = d.ref(op, *args, ctx=ctx) if d.needs_ctx else d.ref(op, *args)
    if not isinstance(out, tuple):
        out = (out,)
    result = []
    for t, v in zip(op.outputs, out):
        npd = t.dtype.as_numpy_dtype
        if not isinstance(v, (np.ndarray, np.generic)) or v.dtype != npd:
            v = np.asarray(v, dtype=npd)
        result.append(v)
    return result


def run_reference_step(op, env: dict, ctx: RunContext) -> None:
    """Run `op` by its reference on the values in `env` and store its outputs there.

    Variable ops are references (consumers read the value when they run); a fed output keeps
    its fed value; NumPy's errors become InvalidArgumentError naming the op.
    """
    if op.type == "VariableV2":
        return
    args = [_resolve(t, env, ctx, op.op_def.needs_ctx) for t in op.inputs]
    try:
        outs = run_op_reference(op, args, ctx)
    except errors.OpError:
        raise
    except (ValueError, IndexError, TypeError, ZeroDivisionError, OverflowError) as e:
        raise errors.InvalidArgumentError(
            None, op, f"{e}\n\t [[node {op.name} ({op.type})]]") from e
    for t, v in zip(op.outputs, outs):
        if t not in env:
            env[t] = v


def _resolve(t, env, ctx, needs_ctx: bool):
    if t.op.type == "VariableV2" and t not in env:
        return t.op if needs_ctx else ctx.read_var(t.op)
    return env[t]


def run_steps(ops, env: dict, ctx: RunContext) -> None:
    """Run `ops` in order through their references (`run_reference_step` each)."""
    for op in ops:
        run_reference_step(op, env, ctx)


def run_plan(plan, feed_values, store) -> list:
    """Run a whole plan through the references: the fetches' values (variables committed only
    when every op succeeded)."""
    env = dict(zip(plan.feeds, feed_values))
    ctx = RunContext(store)
    with np.errstate(all="ignore"):
        for op in plan.ops:
            run_reference_step(op, env, ctx)
        results = []
        for t in plan.fetches:
            if t.op.type == "VariableV2" and t not in env:
                results.append(np.array(ctx.read_var(t.op), copy=True))
            else:
                results.append(env[t])
    ctx.commit()
    return results
