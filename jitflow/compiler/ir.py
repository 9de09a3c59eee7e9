"""The kernel IR: what one fused kernel computes, in terms every backend reads.

The IR says *what* to compute, never how a CPU or a GPU spells it. Registry entries lower
their ops into it (jitflow/ops/*: `scalar=` for elementwise ops, `lower=` for the others), the
generic fuser (lower.py) assembles one `Kernel` per run of ops, and each backend
(jitflow/backends/<name>/) has a table from scalar op to code and one emitter per node kind.

**Scalar expressions** describe one element of one elementwise op, over its operands:
`Arg(i)` (operand i), `Const(value)` (a number, typed by the backend in the op's float dtype,
else its result dtype) and `Call(fn, args)` with `fn` a name from `SCALAR_OPS` ("add",
"tanh", "select", ...). Op modules build them with `S`: `S.select(S.gt(X0, 0), X0,
S.expm1(X0))` is Elu. Python numbers become `Const`s.

**Values**: a `Value` is an array (or scalar) that exists at run time: a kernel input (`in`), a
variable buffer (`var`), or a buffer or scalar the kernel materializes (`buf`). Every dimension
is symbolic (see *dims* below), so broadcasting is resolved once, at lowering.

**Expressions** (one element of an elementwise region): `Load` (a value at the loop index),
`Lit` (a scalar literal), `Apply` (one op's scalar expression over argument expressions),
`Index` (the loop index along an axis), `Take` (a value read at computed positions: slices,
gathers) and `DimValue` (the runtime value of a dim).

**Statements**, in plan order: `Loop` (store an expression over a buffer's dims), `Reduce`,
`MatMul` (a contraction of two matrices), `AssignVar`/`CopyVar` (variables, updated in place),
`View` (same elements, other dims), `ShapeOf`, `RowOp` (softmax-family row operations),
`Alloc`/`Region` (stores at computed positions), `LibCall` (a library routine on stored
operands: convolutions, pooling) and `NonZeroCheck`/`RangeCheck` placed among them.

**Checks** (`Check`: two dims must agree; `RangeCheck`, `NonZeroCheck`: element values) are
hoisted before any statement where their operands allow, so a failing run raises before
anything is written.

**Dims** are `1` (known from the shape class) or tuples: `("in"|"var", slot, axis)` the runtime
size of an input's or variable's axis; `("const", n)`; `("prod", dims)`, `("div", dims, n)`,
`("mod", dims, n)`; `("arith", "+"|"-"|"*", a, b)`; `("sstart"|"slen", d, b, e, s, bm, em)` the
start and length of a Python slice of an axis of size d; `("sidx", d, i)` index i of an axis of
size d (negative from the end); `("ok", lo, x, hi)` 1 when lo <= x < hi else 0; `("min", a,
b)` the smaller of two dims; `("window", n, k, stride, dilation, same)` the output size of a
window op along one axis.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Union

import numpy as np

__all__ = ["Arg", "Const", "Call", "S", "X0", "X1", "X2", "X3", "SCALAR_OPS", "INT_DIVIDING",
           "scalar_args", "scalar_uses", "VClass", "class_of", "Value", "Load", "Lit", "Apply",
           "Index", "Take", "DimValue", "Check", "Loop", "Reduce", "MatMul", "AssignVar",
           "CopyVar", "View", "ShapeOf", "RowOp", "Alloc", "Region", "LibCall", "RangeCheck",
           "NonZeroCheck", "Kernel", "STATEMENTS", "EXPRESSIONS"]

Dim = Union[int, tuple]


# -- scalar expressions -------------------------------------------------------------------------
@dataclass(frozen=True)
class Arg:
    """Operand `index` of the op."""

    index: int


@dataclass(frozen=True)
class Const:
    """A number in the op's math (backends type it: the float dtype of the op, else its
    result dtype)."""

    value: Union[int, float, bool]


@dataclass(frozen=True)
class Call:
    """Scalar op `fn` (a name in `SCALAR_OPS`) applied to `args`."""

    fn: str
    args: tuple

    def __post_init__(self) -> None:
        arity = SCALAR_OPS.get(self.fn)
        if arity is None:
            raise ValueError(f"unknown scalar op {self.fn!r}")
        if arity >= 0 and len(self.args) != arity or arity < 0 and len(self.args) < -arity:
            raise ValueError(f"scalar op {self.fn!r} takes {abs(arity)} operands, "
                             f"got {len(self.args)}")


#: scalar op -> number of operands (negative: at least that many). The semantics are TF's
#: elementwise kernels for the operand dtype: "floordiv"/"floormod" round toward -inf,
#: "truncdiv"/"truncmod" toward zero (on floats: trunc(x / y), fmod), "rint" half to even,
#: "cast" converts to the result dtype, "id" passes its operand through.
SCALAR_OPS: dict = {
    "id": 1, "cast": 1, "add": -2, "sub": 2, "mul": 2, "div": 2, "neg": 1, "pow": 2,
    "floordiv": 2, "floormod": 2, "truncdiv": 2, "truncmod": 2,
    "maximum": 2, "minimum": 2, "abs": 1, "sign": 1, "sqrt": 1,
    "exp": 1, "log": 1, "log1p": 1, "expm1": 1, "sin": 1, "cos": 1, "tan": 1, "tanh": 1,
    "asin": 1, "acos": 1, "atan": 1, "sinh": 1, "cosh": 1, "asinh": 1, "acosh": 1,
    "atanh": 1, "atan2": 2, "erf": 1, "sigmoid": 1, "softplus": 1,
    "floor": 1, "ceil": 1, "rint": 1, "isnan": 1, "isfinite": 1, "isinf": 1,
    "eq": 2, "ne": 2, "lt": 2, "le": 2, "gt": 2, "ge": 2,
    "and": 2, "or": 2, "not": 1, "select": 3,
}

#: scalar ops that divide by their second operand: on integers it must not be 0 (the fuser
#: checks it before anything is written, and the error names the op, as TF does)
INT_DIVIDING = frozenset({"floordiv", "floormod", "truncdiv", "truncmod"})


def _wrap(x):
    if isinstance(x, (Arg, Const, Call)):
        return x
    if isinstance(x, (bool, int, float, np.integer, np.floating)):
        return Const(x.item() if isinstance(x, np.generic) else x)
    raise TypeError(f"not a scalar expression: {x!r}")


class _Builder:
    """`S.<scalar op>(*args)` builds a `Call` (numbers become `Const`s)."""

    def __getattr__(self, fn: str):
        if fn not in SCALAR_OPS:
            raise AttributeError(f"unknown scalar op {fn!r}")
        return lambda *args: Call(fn, tuple(_wrap(a) for a in args))

    def and_(self, a, b) -> Call:
        return Call("and", (_wrap(a), _wrap(b)))

    def or_(self, a, b) -> Call:
        return Call("or", (_wrap(a), _wrap(b)))

    def not_(self, a) -> Call:
        return Call("not", (_wrap(a),))


S = _Builder()
X0, X1, X2, X3 = Arg(0), Arg(1), Arg(2), Arg(3)


def scalar_args(e) -> set:
    """The operand indices `e` reads."""
    if isinstance(e, Arg):
        return {e.index}
    if isinstance(e, Call):
        out: set = set()
        for a in e.args:
            out |= scalar_args(a)
        return out
    return set()


def scalar_uses(e, fns) -> list:
    """The `Call`s in `e` whose fn is in `fns`."""
    if not isinstance(e, Call):
        return []
    out = [e] if e.fn in fns else []
    for a in e.args:
        out += scalar_uses(a, fns)
    return out


# -- shape classes ----------------------------------------------------------------------------
@dataclass(frozen=True)
class VClass:
    """The shape class of a runtime value: dtype name and, per dim, whether it is 1."""

    dtype: str
    ones: tuple

    @property
    def rank(self) -> int:
        return len(self.ones)


def class_of(arr) -> VClass:
    """The shape class of an ndarray (or numpy scalar)."""
    return VClass(arr.dtype.name, tuple(d == 1 for d in np.shape(arr)))


# -- values and expressions -------------------------------------------------------------------
@dataclass(eq=False)
class Value:
    """A runtime array: `kind` is "in" (argument), "var" (variable buffer) or "buf" (local)."""

    kind: str
    slot: int
    dtype: str
    ones: tuple
    dims: tuple
    name: str = ""

    @property
    def rank(self) -> int:
        return len(self.ones)


@dataclass(eq=False)
class Load:
    """Read `value` at the loop index; `axes` (optional) names the loop axis of each of its
    dims, otherwise dims align to the right as in broadcasting."""

    value: Value
    axes: Optional[tuple] = None


@dataclass(eq=False)
class Lit:
    """A scalar literal of `dtype`."""

    value: object
    dtype: str


@dataclass(eq=False)
class Apply:
    """One elementwise op: the scalar expression `fn` over the expressions `args`, of result
    `dtype`; `lit_dtype` types its `Const`s; `cast` converts the result to `dtype` (a Cast,
    a mixed-dtype op, or a narrow integer wrapped to its width)."""

    fn: object
    args: list
    dtype: str
    op: int
    cast: bool = False
    lit_dtype: str = ""

    def __post_init__(self) -> None:
        if not self.lit_dtype:
            self.lit_dtype = self.dtype


@dataclass(eq=False)
class Index:
    """The loop index along `axis` (for ops like OneHot whose value depends on position)."""

    axis: int
    dtype: str = "int64"


@dataclass(eq=False)
class Take:
    """`value` read at computed positions, one item per dim of `value`: ("loop", k) the loop
    index k, ("lin", start, stride, k) start + stride * i_k, ("fixed", dim) one position,
    ("mod", k, dim) i_k modulo a dim, ("take", indices, axes) a position read from an index
    array (a Value indexed by the loop axes `axes`)."""

    value: Value
    items: tuple


@dataclass(eq=False)
class DimValue:
    """The runtime value of a symbolic dim (Size)."""

    dim: object
    dtype: str


# -- statements -------------------------------------------------------------------------------
@dataclass(eq=False)
class Check:
    """Dims `a` and `b` must be equal (else the run is the interpreter's, which raises)."""

    a: Dim
    b: Dim
    op: int
    what: str


@dataclass(eq=False)
class Loop:
    """`out` = `expr` at every index of `out`'s dims (a rank-0 `out` is a local scalar)."""

    out: Value
    expr: object
    op: int


@dataclass(eq=False)
class Reduce:
    """Reduce `expr` (over the input space `dims`/`ones`) along `axes` with `how`: "sum",
    "mean", "max", "min", "prod", "l2" (half the sum of squares), "argmax", "argmin"."""

    out: Value
    expr: object
    dims: tuple
    ones: tuple
    axes: tuple
    how: str
    op: int
    in_dtype: str = ""


@dataclass(eq=False)
class MatMul:
    """out = op(a) @ op(b) for rank-2 `a`, `b` (op: transpose when `ta`/`tb`)."""

    out: Value
    a: Value
    b: Value
    ta: bool
    tb: bool
    op: int


@dataclass(eq=False)
class AssignVar:
    """var = (mode "set"), += ("add") or -= ("sub") `expr`, in place."""

    var: Value
    expr: object
    mode: str
    op: int


@dataclass(eq=False)
class CopyVar:
    """`out` is a copy of `var` (its value now, before later writes)."""

    out: Value
    var: Value
    op: int


@dataclass(eq=False)
class View:
    """`out` is `src` with other dims (same elements, C order): Reshape/ExpandDims/Squeeze."""

    out: Value
    src: Value
    op: int


@dataclass(eq=False)
class ShapeOf:
    """`out` (1-D ints) holds the runtime dims `dims`."""

    out: Value
    dims: tuple
    op: int


@dataclass(eq=False)
class RowOp:
    """A softmax-family op, one pass structure per row of the last axis of `x`.

    `how`: "softmax", "log_softmax", "xent" (dense labels) or "sparse_xent" (int labels);
    `outs`: output Values (None where unused): [y] or [loss, backprop].
    """

    how: str
    outs: list
    x: Value
    labels: Optional[Value]
    op: int


@dataclass(eq=False)
class Alloc:
    """Allocate `out`, filled with the scalar expression `fill` unless None."""

    out: Value
    fill: object
    op: int


@dataclass(eq=False)
class Region:
    """For every index i over `dims`, out[items(i)] = (mode "set") or += ("add") expr(i);
    `items` as in `Take`; with `where` (a bool expression over the same index), only where it
    holds (the other positions are never computed: a segment sum's negative ids)."""

    out: Value
    expr: object
    dims: tuple
    ones: tuple
    items: tuple
    mode: str
    op: int
    where: object = None


@dataclass(eq=False)
class LibCall:
    """Allocate `outs`, then call library routine `fn` on stored operands `args`, the outputs
    and the int parameters `params` (convolutions, pooling: see backends' window libraries)."""

    fn: str
    args: list
    outs: list
    params: tuple
    op: int


@dataclass(eq=False)
class RangeCheck:
    """Every element of `value` must lie in [0, dim) (`lower` False: only below dim; negative
    ids are dropped by segment sums): checked before anything is written."""

    value: Value
    dim: Dim
    op: int
    what: str
    lower: bool = True


@dataclass(eq=False)
class NonZeroCheck:
    """No element of `value` may be 0 (integer divisors): hoisted when `value` is an input,
    else a statement placed before any variable is written."""

    value: Value
    op: int
    what: str


@dataclass(eq=False)
class Kernel:
    """One native function: inputs, variable buffers, checks, statements, results."""

    inputs: list            # [Value] argument arrays, in argument order
    variables: list         # [Value] variable buffers, in argument order
    checks: list
    stmts: list
    results: list           # [Value or Lit] one per requested output
    op_names: list          # op index -> op name (for tags and error messages)
    op_types: list
    buffers: int = 0
    notes: list = field(default_factory=list)


#: the node kinds a backend emits (one emitter each)
STATEMENTS = (Loop, Reduce, MatMul, AssignVar, CopyVar, View, ShapeOf, RowOp, Alloc, Region,
              LibCall, RangeCheck, NonZeroCheck)
EXPRESSIONS = (Load, Lit, Apply, Index, Take, DimValue)
