"""The reference backend ("interpreter"): runs a plan op by op with each op's NumPy reference.

It is the oracle for every compiled result. Variable writes are committed only when the whole
run succeeds (see jitflow/runtime/reference.py), so a failed run leaves every variable
unchanged.
"""
from __future__ import annotations

import numpy as np

from jitflow.compiler.plan import Plan
from jitflow.runtime.reference import RunContext, run_reference_step

__all__ = ["Interpreter"]


class _Executable:
    __slots__ = ("plan", "feeds")

    def __init__(self, plan: Plan) -> None:
        self.plan = plan

    def __call__(self, feed_values, store):
        plan = self.plan
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


class Interpreter:
    """Backend that executes plans with the NumPy references."""

    name = "interpreter"

    def compile(self, plan: Plan) -> _Executable:
        return _Executable(plan)
