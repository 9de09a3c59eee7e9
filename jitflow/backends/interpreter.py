"""The reference backend ("interpreter"): runs a plan op by op with each op's NumPy reference.

It is the oracle for every compiled result. Variable writes are committed only when the whole
run succeeds (see jitflow/runtime/reference.py), so a failed run leaves every variable
unchanged.
"""
from __future__ import annotations

from jitflow.compiler.plan import Plan
from jitflow.runtime.reference import run_plan

__all__ = ["Interpreter"]


class _Executable:
    __slots__ = ("plan",)

    def __init__(self, plan: Plan) -> None:
        self.plan = plan

    def __call__(self, feed_values, store):
        return run_plan(self.plan, feed_values, store)


class Interpreter:
    """Backend that executes plans with the NumPy references."""

    name = "interpreter"

    def compile(self, plan: Plan) -> _Executable:
        return _Executable(plan)
