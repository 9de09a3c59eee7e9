"""The op registry: one entry per op type holding everything about it.

An entry (`OpDef`) has
- `infer(op) -> [(dtype, shape), ...]`: the static output dtypes and shapes (errors at build
  time, as TF1);
- `ref(op, *inputs) -> value or tuple`: the NumPy reference, used by the interpreter and as the
  test oracle (with `needs_ctx`, it is called as `ref(op, *inputs, ctx=ctx)` and may read or
  write session state through the context);
- `grad(op, *output_grads) -> [Tensor or None per input]`: the gradient rule, building ops;
  `differentiable=False` declares an op whose inputs get no gradient (argmax, equal, shape);
- its lowering into the kernel IR (jitflow/compiler/ir.py), which every backend reads:
  `scalar` for elementwise ops, a scalar expression over the operands built with `ir.S`
  (`S.mul(X0, X1)`), a scalar op name applied to all operands in order (`"add"`), or a callable
  `scalar(op)` returning either (e.g. to choose by dtype); for any other op, `lower(low, op,
  pos)` appends IR nodes through the fuser `low` (jitflow/compiler/lower.py), `lowerable(op)`
  says whether this op instance lowers at all (else it runs through its reference),
  `shape_only` the inputs it reads only for their shapes and `inline` the inputs it may take as
  unstored expressions (True: all);
- `kind`: "elementwise", "reduce", "matmul", "source", "state", "random", "shape", "row" (one
  result per row of the innermost axis: softmax, cross-entropies, top_k), "host" (host work by
  design: control flow, TensorArrays; never in a kernel, no fallback warning) or "other";
- `reduced_axes(op) -> tuple or None`: for a "reduce" op whose axes are not its `axis`
  attribute, the input axes it reduces, from static shapes (None: not known until run time).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional, Union

__all__ = ["OpDef", "Example", "register", "get_op_def", "REGISTRY", "all_op_defs"]


@dataclass
class Example:
    """One sample use of an op, from which the registry-generated tests are made.

    `build(*inputs)` makes the op from placeholders through the public API; `expect(*arrays)`
    computes the same result independently with NumPy (None: skip the value check, e.g. for
    random ops); `inputs` are the input shapes; `domain` picks the random input values:
    "real" (standard normal), "positive" (0.5..2), "unit" (-0.9..0.9), "nonzero" (|x| in
    0.5..2), "int" (small integers), "index" (0..index_max), "bool". `grad=False` leaves the
    example out of the finite-difference gradient test. `kwargs` are recorded for the test id.
    """

    build: Callable
    inputs: list
    expect: Optional[Callable] = None
    dtypes: tuple = ("float32", "float64")
    domain: Union[str, tuple] = "real"
    grad: bool = True
    index_max: int = 3
    rtol: float = 1e-5
    id: str = ""


@dataclass
class OpDef:
    type: str
    infer: Callable
    ref: Callable
    grad: Optional[Callable] = None
    differentiable: bool = True
    scalar: Union[str, Callable, object, None] = None
    lower: Optional[Callable] = None
    lowerable: Optional[Callable] = None
    shape_only: Union[tuple, range] = ()
    inline: Union[bool, tuple, range] = ()
    kind: str = "other"
    reduced_axes: Optional[Callable] = None
    stateful: bool = False
    needs_ctx: bool = False
    default_name: str = ""
    examples: list = field(default_factory=list)  # [Example, ...] for the generated tests
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
