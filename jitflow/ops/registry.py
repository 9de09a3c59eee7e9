"""The op registry: one entry per op type holding everything about it.

An entry (`OpDef`) has
- `infer(op) -> [(dtype, shape), ...]`: the static output dtypes and shapes (errors at build
  time, as TF1);
- `ref(op, *inputs) -> value or tuple`: the NumPy reference, used by the interpreter and as the
  test oracle (with `needs_ctx`, it is called as `ref(op, *inputs, ctx=ctx)` and may read or
  write session state through the context);
- `grad(op, *output_grads) -> [Tensor or None per input]`: the gradient rule, building ops;
  `differentiable=False` declares an op whose inputs get no gradient (argmax, equal, shape);
- `template`: for elementwise ops, the scalar source template the code generator fuses
  (`"({0} * {1})"`), or a callable `template(op) -> str`;
- `kind`: "elementwise", "reduce", "matmul", "source", "state", "random", "shape" or "other".
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional, Union

__all__ = ["OpDef", "register", "get_op_def", "REGISTRY", "all_op_defs"]


@dataclass
class OpDef:
    type: str
    infer: Callable
    ref: Callable
    grad: Optional[Callable] = None
    differentiable: bool = True
    template: Union[str, Callable, None] = None
    kind: str = "other"
    stateful: bool = False
    needs_ctx: bool = False
    default_name: str = ""
    # Test generation hints: sample input shapes/dtypes/attrs for the registry-generated tests.
    examples: list = field(default_factory=list)
    doc: str = ""

    def __post_init__(self) -> None:
        if not self.default_name:
            self.default_name = self.type

    @property
    def is_elementwise(self) -> bool:
        return self.kind == "elementwise"


REGISTRY: dict[str, OpDef] = {}


def register(op_type: str, *, infer: Callable, ref: Callable, grad: Optional[Callable] = None,
             differentiable: Optional[bool] = None, **kw) -> OpDef:
    """Add an op type to the registry; registering a type twice is an error."""
    if op_type in REGISTRY:
        raise ValueError(f"Op type {op_type!r} is already registered")
    if differentiable is None:
        differentiable = grad is not None
    d = OpDef(op_type, infer, ref, grad, differentiable, **kw)
    REGISTRY[op_type] = d
    return d


def get_op_def(op_type: str) -> OpDef:
    try:
        return REGISTRY[op_type]
    except KeyError:
        raise ValueError(f"Op type not registered '{op_type}'") from None


def all_op_defs() -> list:
    return sorted(REGISTRY.values(), key=lambda d: d.type)
