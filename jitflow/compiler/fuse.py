"""Lowering: a run of plan ops -> one kernel description (the IR the code generators read).

The IR says *what* to compute, never how a CPU or GPU spells it:

- a `Value` is an array (or scalar) that exists at run time: a kernel input (`in`), a variable
  buffer (`var`), or a buffer or scalar the kernel materializes (`buf`);
- every dimension is symbolic: `1` (known from the shape class) or `("in"|"var", slot, axis)`,
  the runtime size of an input's axis; broadcasting is therefore resolved here, once;
- an expression tree (`Load`, `Lit`, `Apply`) describes one element of an elementwise region;
  ops with a single elementwise/reduce/assign consumer are inlined into it and never stored;
- statements (`Loop`, `Reduce`, `MatMul`, `AssignVar`, `CopyVar`) run in plan order;
  `Check`s (broadcast and matmul dimension agreement) are hoisted before any statement, so a
  failing run raises before anything is written.

Variables are updated in place, in plan order, as the interpreter orders its reads and writes;
an inlined expression that reads a variable is materialized before a later write to it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional, Union

import numpy as np

__all__ = ["VClass", "Value", "Load", "Lit", "Apply", "Loop", "Reduce", "MatMul", "AssignVar",
           "CopyVar", "Check", "RowOp", "RangeCheck", "NonZeroCheck", "View", "ShapeOf", "Index",
           "Kernel", "lower", "supported", "class_of"]

Dim = Union[int, tuple]


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
    value: object
    dtype: str


@dataclass(eq=False)
class Apply:
    """One elementwise op: `template` (registry syntax, `{0}`...) over `args`."""

    template: str
    args: list
    dtype: str
    op: int
    cast: bool = False


@dataclass(eq=False)
class Index:
    """The loop index along `axis` (for ops like OneHot whose value depends on position)."""

    axis: int
    dtype: str = "int64"


@dataclass(eq=False)
class ShapeOf:
    """Statement: `out` (1-D ints) holds the runtime dims `dims`."""

    out: "Value"
    dims: tuple
    op: int


@dataclass(eq=False)
class ShapeInfo:
    """A Shape op's result, kept symbolic until something needs its values."""

    dims: tuple
    ones: tuple
    dtype: str
    pos: int


@dataclass(eq=False)
class Pending:
    """An elementwise result not yet stored: its expression, dims and the variables it reads."""

    expr: object
    dtype: str
    ones: tuple
    dims: tuple
    reads: frozenset
    pos: int
    consumed: bool = False
    depth: int = 1


# -- statements -------------------------------------------------------------------------------
@dataclass(eq=False)
class Check:
    a: Dim
    b: Dim
    op: int
    what: str


@dataclass(eq=False)
class Loop:
    out: Value
    expr: object
    op: int


@dataclass(eq=False)
class Reduce:
    """Reduce `expr` (over the input space `dims`/`ones`) along `axes` with `how`."""

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
    out: Value
    a: Value
    b: Value
    ta: bool
    tb: bool
    op: int


@dataclass(eq=False)
class AssignVar:
    var: Value
    expr: object
    mode: str  # "set", "add" or "sub"
    op: int


@dataclass(eq=False)
class CopyVar:
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
class RowOp:
    """Softmax-family ops, one pass structure per row of the last axis.

    `how`: "softmax", "log_softmax", "xent" (dense labels) or "sparse_xent" (int labels);
    `outs`: output Values (None where unused): [y] or [loss, backprop].
    """

    how: str
    outs: list
    x: Value
    labels: Optional[Value]
    op: int


@dataclass(eq=False)
class RangeCheck:
    """Every element of `value` must lie in [0, dim): checked before anything is written."""

    value: Value
    dim: Dim
    op: int
    what: str


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


# -- what can be compiled ----------------------------------------------------------------------
_FLOAT = ("float32", "float64")
_REDUCE_HOW = {"Sum": "sum", "Mean": "mean", "Max": "max", "Min": "min", "Prod": "prod",
               "Any": "max", "All": "min"}
_SKIP = ("NoOp",)
_INT_DIVISION = ("FloorDiv", "FloorMod", "TruncateDiv", "TruncateMod")
_NARROW_INTS = ("int8", "int16", "int32", "uint8", "uint16", "uint32")
MAX_INLINE_DEPTH = 64     # longer chains are stored every so often (bounded expression trees)
_ROW_HOW = {"Softmax": "softmax", "LogSoftmax": "log_softmax",
            "SoftmaxCrossEntropyWithLogits": "xent",
            "SparseSoftmaxCrossEntropyWithLogits": "sparse_xent"}


_HOST_DTYPES = ("string", "variant")


def host_only(op) -> bool:
    """Whether `op` is host work by design (kind "host", or string/variant values): never in a
    numeric kernel, so running it through its reference is no fallback."""
    if op.op_def.kind == "host":
        return True
    return any(x.dtype.name in _HOST_DTYPES for x in op.outputs) or any(
        x.dtype.name in _HOST_DTYPES for x in op.inputs)


def supported(op) -> bool:
    """Whether `op` has a code generator (otherwise it runs through its reference)."""
    t = op.type
    d = op.op_def
    if t in _SKIP:
        return True
    if d.kind == "host":
        return False  # input pipelines, strings, control flow: host work by design
    dt = [x.dtype.name for x in op.inputs] + [x.dtype.name for x in op.outputs]
    if any(n not in _NUMERIC_NAMES for n in dt):
        return False  # float16, complex, strings: references only
    if t in ("VariableV2", "Placeholder", "Const"):
        return True
    if d.kind == "elementwise" and d.template is not None:
        return True
    # ranks come from the kernel's shape class, so unknown static ranks are fine here
    if t in _REDUCE_HOW or t == "Unbroadcast":
        return True
    if t in ("MatMul", "BatchMatMul"):
        return (t == "MatMul" and op.inputs[0].dtype.name != "bool"
                and op.inputs[0].shape.ndims == 2 and op.inputs[1].shape.ndims == 2
                and not op.attrs.get("adjoint_a") and not op.attrs.get("adjoint_b"))
    if t in ("Assign", "AssignAdd", "AssignSub"):
        return bool(op.attrs.get("validate_shape", True))
    if t == "BroadcastReduced":
        return True
    if t in ("Reshape", "ExpandDims", "Squeeze", "Transpose"):
        r = op.inputs[0].shape.ndims
        ro = op.outputs[0].shape.ndims
        if r is None or ro is None or r == 0 or ro == 0:
            return False
        if t == "Reshape":
            if len(op.inputs) == 2:
                return op.inputs[1].op.type == "Shape" and supported(op.inputs[1].op)
            return op.attrs.get("shape") is not None
        if len(op.inputs) != 1:
            return False
        if t == "Transpose":
            return op.attrs.get("perm") is not None or r is not None
        return True
    if t == "L2Loss":
        return op.inputs[0].shape.ndims is not None
    if t == "Shape":
        return op.inputs[0].shape.ndims is not None
    if t == "OneHot":
        r = op.inputs[0].shape.ndims
        return (r is not None and op.attrs.get("axis") in (-1, r)
                and all(x.shape.ndims == 0 for x in op.inputs[1:]))
    if t in ("ArgMax", "ArgMin"):
        r = op.inputs[0].shape.ndims
        a = op.attrs.get("axis")
        return (r is not None and r >= 1 and isinstance(a, (int, np.integer))
                and op.inputs[0].dtype.name != "bool")
    if t in ("Softmax", "LogSoftmax", "SoftmaxCrossEntropyWithLogits"):
        r = op.inputs[0].shape.ndims
        return (r is not None and r >= 1 and (op.attrs.get("axis") in (r - 1, -1) or (
                    t != "SoftmaxCrossEntropyWithLogits" and -r <= op.attrs["axis"] < r))
                and op.inputs[0].dtype.name in _FLOAT
                and (t != "SoftmaxCrossEntropyWithLogits"
                     or op.inputs[1].shape.ndims == r))
    if t == "SparseSoftmaxCrossEntropyWithLogits":
        r = op.inputs[0].shape.ndims
        return r is not None and r >= 1 and op.inputs[0].dtype.name in _FLOAT
    if t in _ak.SUPPORTED:
        return _ak.SUPPORTED[t](op)
    return False


_NUMERIC_NAMES = {"float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16",
                  "uint32", "uint64", "bool"}

_LITERAL = re.compile(r"(?<![\w.{}\]])(\d+\.\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?"
                      r"|\d+[eE][-+]?\d+|\d+)(?![\w.(])")


def _template_text(op) -> str:
    """The op's template with `{dtype}` filled and bare numeric literals typed (float math)."""
    tmpl = op.op_def.template
    if callable(tmpl):
        tmpl = tmpl(op)
    out_dt = op.outputs[0].dtype.name
    in_dt = op.inputs[0].dtype.name if op.inputs else out_dt
    float_dt = out_dt if out_dt in _FLOAT else (in_dt if in_dt in _FLOAT else None)
    np_name = "bool_" if out_dt == "bool" else out_dt
    # Protect placeholders, type the literals of float ops, then put `{dtype}` in.
    parts = re.split(r"(\{\w*\})", tmpl)
    for i in range(0, len(parts), 2):
        if float_dt is not None:
            parts[i] = _LITERAL.sub(lambda m: f"np.{float_dt}({m.group(1)})", parts[i])
    text = "".join(p if i % 2 == 0 or p != "{dtype}" else np_name for i, p in enumerate(parts))
    return text


# -- lowering ---------------------------------------------------------------------------------
class _Unsupported(Exception):
    pass


class Lowerer:
    """Turns an ordered list of ops into one Kernel, given the classes of what flows in."""

    def __init__(self, ops, inputs, outputs, var_classes, const_scalars=True) -> None:
        self.ops = list(ops)
        self.in_tensors = [t for t, _ in inputs]
        self.outputs = list(outputs)
        self.var_classes = var_classes   # var op -> VClass
        self.info: dict = {}             # tensor -> Value | Lit | Pending
        self.kinputs: list = []
        self.kvars: list = []
        self.var_value: dict = {}
        self.checks: list = []
        self.stmts: list = []
        self.nbuf = 0
        self.const_inputs: list = []     # Const ops passed as arguments
        for t, cls in inputs:
            self.info[t] = self._new_input(cls)
        self.fed = set(self.in_tensors)
        # consumer counts within this kernel (+1 for a requested output)
        self.uses: dict = {}
        for op in self.ops:
            for i in _value_inputs(op):
                t = op.inputs[i]
                self.uses[t] = self.uses.get(t, 0) + 1
        for t in self.outputs:
            self.uses[t] = self.uses.get(t, 0) + 1
        self.remaining = dict(self.uses)
        self.inlinable: dict = {}
        for op in self.ops:
            for i in _value_inputs(op):
                self.inlinable.setdefault(op.inputs[i], []).append(_can_inline_into(op, i))
        self.writes: dict = {}  # var op -> positions of writes

    # -- values ---------------------------------------------------------------------------
    def _new_input(self, cls: VClass) -> Value:
        slot = len(self.kinputs)
        dims = tuple(1 if one else ("in", slot, k) for k, one in enumerate(cls.ones))
        v = Value("in", slot, cls.dtype, cls.ones, dims, f"a{slot}")
        self.kinputs.append(v)
        return v

    def _var(self, var_op) -> Value:
        v = self.var_value.get(var_op)
        if v is None:
            cls = self.var_classes[var_op]
            slot = len(self.kvars)
            dims = tuple(1 if one else ("var", slot, k) for k, one in enumerate(cls.ones))
            v = Value("var", slot, cls.dtype, cls.ones, dims, f"v{slot}")
            self.kvars.append(v)
            self.var_value[var_op] = v
            v.var_op = var_op
        return v

    def _buf(self, dtype: str, ones: tuple, dims: tuple) -> Value:
        self.nbuf += 1
        return Value("buf", self.nbuf, dtype, ones, dims, f"b{self.nbuf}")

    # -- expressions ----------------------------------------------------------------------
    def _expr(self, t, shape_only: bool = False):
        """(expr, dtype, ones, dims, reads) for tensor `t` as seen by a consumer now."""
        inf = self.info.get(t)
        if isinstance(inf, Pending) and not shape_only:
            inf.consumed = True
        if inf is None:
            if t.op.type == "VariableV2":
                v = self._var(t.op)
                return Load(v), v.dtype, v.ones, v.dims, frozenset([t.op])
            raise _Unsupported(f"no value for {t.name}")
        if isinstance(inf, ShapeInfo):
            if shape_only:
                r = len(inf.dims)
                return None, inf.dtype, (r == 1,), (1 if r == 1 else ("const", r),), frozenset()
            inf = self._materialize_shape(t, inf)
        if isinstance(inf, Pending):
            return inf.expr, inf.dtype, inf.ones, inf.dims, inf.reads
        if isinstance(inf, Lit):
            return inf, inf.dtype, (), (), frozenset()
        reads = frozenset([inf.var_op]) if inf.kind == "var" else frozenset()
        return Load(inf), inf.dtype, inf.ones, inf.dims, reads

    def _value(self, t, pos: int) -> Value:
        """`t` as a stored array (materializing a pending expression)."""
        inf = self.info.get(t)
        if isinstance(inf, Value):
            return inf
        if inf is None and t.op.type == "VariableV2":
            return self._var(t.op)
        if isinstance(inf, Lit):
            raise _Unsupported("scalar literal where an array is needed")
        if isinstance(inf, ShapeInfo):
            return self._materialize_shape(t, inf)
        return self._materialize(t, inf, pos)

    def _materialize_shape(self, t, inf: ShapeInfo) -> Value:
        r = len(inf.dims)
        v = self._buf(inf.dtype, (r == 1,), (1 if r == 1 else ("const", r),))
        self.stmts.append(ShapeOf(v, inf.dims, inf.pos))
        self.info[t] = v
        return v

    def _materialize(self, t, p: Pending, pos: int) -> Value:
        e = p.expr
        if (isinstance(e, Load) and e.axes is None and e.value.ones == p.ones
                and e.value.dims == p.dims):
            # an identity of a stored value: share it (copied before its variable changes)
            self.info[t] = e.value
            return e.value
        out = self._buf(p.dtype, p.ones, p.dims)
        self.stmts.append(Loop(out, p.expr, pos))
        self.info[t] = out
        return out

    def _broadcast(self, parts, pos: int):
        rank = max((len(o) for _, _, o, _, _ in parts), default=0)
        ones, dims = [], []
        for k in range(rank):
            chosen = None
            for _, _, o, d, _ in parts:
                j = k - (rank - len(o))
                if j < 0 or o[j]:
                    continue
                if chosen is None:
                    chosen = d[j]
                elif d[j] != chosen:
                    self.checks.append(Check(chosen, d[j], pos, "Incompatible shapes"))
            ones.append(chosen is None)
            dims.append(1 if chosen is None else chosen)
        return tuple(ones), tuple(dims)

    def _flush_reads(self, var_op, pos: int) -> None:
        """Store pending expressions that read `var_op` before it is written."""
        for t, inf in list(self.info.items()):
            if isinstance(inf, Pending) and var_op in inf.reads and not inf.consumed:
                self._materialize(t, inf, pos)

    # -- ops ------------------------------------------------------------------------------
    def lower(self) -> Kernel:
        for pos, op in enumerate(self.ops):
            self._lower_op(op, pos)
        results = []
        seen = set()
        end = max(len(self.ops) - 1, 0)
        for t in self.outputs:
            inf = self.info.get(t)
            if isinstance(inf, Pending):
                inf = self._materialize(t, inf, end)
            if isinstance(inf, ShapeInfo):
                inf = self._materialize_shape(t, inf)
            if inf is None and t.op.type == "VariableV2":
                raise _Unsupported("variable fetched from a kernel")
            if isinstance(inf, Value) and (inf.kind == "var" or getattr(inf, "view", False)
                                           or inf.rank > 0 and id(inf) in seen):
                c = self._buf(inf.dtype, inf.ones, inf.dims)
                self.stmts.append(CopyVar(c, inf, end))
                inf = c
            seen.add(id(inf))
            results.append(inf)
        return Kernel(self.kinputs, self.kvars, self.checks, self.stmts, results,
                      [op.name for op in self.ops], [op.type for op in self.ops], self.nbuf)

    def _set(self, t, pos: int, value) -> None:
        if t in self.fed:
            return
        self.info[t] = value

    def _lower_op(self, op, pos: int) -> None:
        t = op.type
        d = op.op_def
        outs = op.outputs
        if t in _SKIP or t == "VariableV2" or t == "Placeholder":
            return
        if t == "Const":
            val = op.attrs["value"]
            if outs[0] in self.fed:
                return
            if np.ndim(val) == 0:
                self.info[outs[0]] = Lit(val.item() if hasattr(val, "item") else val,
                                         outs[0].dtype.name)
            else:
                v = self._new_input(class_of(np.asarray(val)))
                self.const_inputs.append((v.slot, op))
                self.info[outs[0]] = v
            return
        for i in _value_inputs(op):
            x = op.inputs[i]
            self.remaining[x] = self.remaining.get(x, 1) - 1
        if all(o in self.fed for o in outs) and not d.stateful:
            return
        if d.kind == "elementwise":
            return self._lower_elementwise(op, pos)
        if t in _REDUCE_HOW:
            return self._lower_reduce(op, pos, _REDUCE_HOW[t], op.attrs["axis"],
                                      bool(op.attrs["keepdims"]))
        if t == "Unbroadcast":
            return self._lower_unbroadcast(op, pos)
        if t == "MatMul":
            return self._lower_matmul(op, pos)
        if t in ("Assign", "AssignAdd", "AssignSub"):
            return self._lower_assign(op, pos)
        if t == "BroadcastReduced":
            return self._lower_broadcast_reduced(op, pos)
        if t in ("Reshape", "ExpandDims", "Squeeze"):
            return self._lower_view(op, pos)
        if t == "Transpose":
            return self._lower_transpose(op, pos)
        if t in ("ArgMax", "ArgMin"):
            if op.attrs["axis"] % op.inputs[0].shape.ndims != op.inputs[0].shape.ndims - 1:
                return _ak.lower_arg_inner_axis(self, op, pos)
            return self._lower_reduce(op, pos, t.lower(), (op.attrs["axis"],), False)
        if t == "L2Loss":
            return self._lower_reduce(op, pos, "l2", None, False)
        if t == "Shape":
            _, _, ones, dims, _ = self._expr(op.inputs[0], shape_only=True)
            if op.outputs[0] not in self.fed:
                self.info[op.outputs[0]] = ShapeInfo(dims, ones, op.outputs[0].dtype.name, pos)
            return
        if t == "OneHot":
            return self._lower_one_hot(op, pos)
        if t in _ROW_HOW:
            if t in ("Softmax", "LogSoftmax") and op.attrs["axis"] not in (
                    -1, op.inputs[0].shape.ndims - 1):
                return _ak.lower_row_inner_axis(self, op, pos)
            return self._lower_row(op, pos)
        if t in _ak.LOWER:
            return _ak.LOWER[t](self, op, pos)
        raise _Unsupported(t)

    def _lower_broadcast_reduced(self, op, pos: int) -> None:
        g, like = op.inputs
        _, _, l_ones, l_dims, _ = self._expr(like, shape_only=True)
        rank = len(l_ones)
        axes = tuple(sorted(a + rank if a < 0 else a for a in op.attrs["axis"]))
        lit = self.info.get(g)
        if isinstance(lit, Lit):
            # a scalar (the gradient of a rank-0 loss) broadcast to `like`'s shape
            if op.outputs[0] not in self.fed:
                self._place(op.outputs[0], Pending(lit, lit.dtype, tuple(l_ones), l_dims,
                                                   frozenset(), pos), pos)
            return
        gv = self._value(g, pos)
        if gv.rank == rank:
            amap = tuple(range(rank))
        elif gv.rank == rank - len(axes):
            amap = tuple(k for k in range(rank) if k not in axes)
        else:
            raise _Unsupported("BroadcastReduced ranks")
        ones = list(l_ones)
        for j, k in enumerate(amap):
            if not gv.ones[j] and not l_ones[k] and gv.dims[j] != l_dims[k]:
                self.checks.append(Check(gv.dims[j], l_dims[k], pos, "Incompatible shapes"))
        out = op.outputs[0]
        if out in self.fed:
            return
        p = Pending(Load(gv, amap), gv.dtype, tuple(ones), l_dims, frozenset(), pos)
        self._place(out, p, pos)

    def _lower_view(self, op, pos: int) -> None:
        src = self._value(op.inputs[0], pos)
        if isinstance(src, Lit) or src.rank == 0:
            raise _Unsupported("view of a scalar")
        if src.kind == "var":
            c = self._buf(src.dtype, src.ones, src.dims)
            self.stmts.append(CopyVar(c, src, pos))
            src = c
        r = src.rank
        if op.type == "ExpandDims":
            a = op.attrs["axis"]
            a = a if a >= 0 else a + r + 1
            ones = src.ones[:a] + (True,) + src.ones[a:]
            dims = src.dims[:a] + (1,) + src.dims[a:]
        elif op.type == "Squeeze":
            axes = op.attrs["squeeze_dims"]
            if not axes:
                axes = [k for k in range(r) if src.ones[k]]
            axes = {a % r for a in axes}
            if any(not src.ones[a] for a in axes):
                raise _Unsupported("squeeze of a dimension that is not 1")
            ones = tuple(o for k, o in enumerate(src.ones) if k not in axes)
            dims = tuple(d for k, d in enumerate(src.dims) if k not in axes)
        elif len(op.inputs) == 2:
            inf = self.info.get(op.inputs[1])
            if not isinstance(inf, ShapeInfo):
                raise _Unsupported("reshape to a computed shape")
            dims, ones = inf.dims, inf.ones
            if dims != src.dims:
                self.checks.append(Check(("prod", src.dims), ("prod", dims), pos,
                                         "Input to reshape has the wrong number of values"))
        else:
            want = [int(d) for d in op.attrs["shape"]]
            known = 1
            for d in want:
                if d != -1:
                    known *= d
            if want.count(-1) > 1 or known == 0 and -1 in want:
                raise _Unsupported("reshape target")
            if -1 in want:
                self.checks.append(Check(("mod", src.dims, known), ("const", 0), pos,
                                         "Input to reshape has a size that does not divide"))
                static = op.outputs[0].shape.as_tuple() or (None,) * len(want)
                # a -1 that static shapes already know to be 1 is a unit dim of the class
                if any(d == -1 and static[k] == 1 for k, d in enumerate(want)):
                    want = [1 if d == -1 else d for d in want]
                    self.checks.append(Check(("prod", src.dims), ("const", known), pos,
                                             "Input to reshape has the wrong number of values"))
                dims = tuple(("div", src.dims, known) if d == -1 else (1 if d == 1 else
                                                                       ("const", d))
                             for d in want)
            else:
                self.checks.append(Check(("prod", src.dims), ("const", known), pos,
                                         "Input to reshape has the wrong number of values"))
                dims = tuple(1 if d == 1 else ("const", d) for d in want)
            ones = tuple(d == 1 for d in want)
        out = op.outputs[0]
        if out in self.fed:
            return
        v = self._buf(src.dtype, ones, dims)
        v.view = True
        self.stmts.append(View(v, src, pos))
        self.info[out] = v

    def _lower_one_hot(self, op, pos: int) -> None:
        idx = self._value(op.inputs[0], pos)
        on = self._expr(op.inputs[1])
        off = self._expr(op.inputs[2])
        if isinstance(idx, Lit):
            raise _Unsupported("one_hot of a literal")
        depth = int(op.attrs["depth"])
        r = idx.rank
        out = op.outputs[0]
        dtype = out.dtype.name
        ones = idx.ones + (depth == 1,)
        dims = idx.dims + (1 if depth == 1 else ("const", depth),)
        expr = Apply("({1} if {0} == {3} else {2})",
                     [Load(idx, tuple(range(r))), on[0], off[0], Index(r)], dtype, pos)
        reads = on[4] | off[4]
        if out in self.fed:
            return
        self._place(out, Pending(expr, dtype, ones, dims, reads, pos), pos)

    def _lower_transpose(self, op, pos: int) -> None:
        src = self._value(op.inputs[0], pos)
        if isinstance(src, Lit):
            raise _Unsupported("transpose of a scalar")
        r = src.rank
        perm = op.attrs.get("perm")
        perm = tuple(range(r - 1, -1, -1)) if perm is None else tuple(int(p) % r for p in perm)
        inv = [0] * r
        for j, p in enumerate(perm):
            inv[p] = j
        ones = tuple(src.ones[p] for p in perm)
        dims = tuple(src.dims[p] for p in perm)
        out = op.outputs[0]
        if out in self.fed:
            return
        reads = frozenset([src.var_op]) if src.kind == "var" else frozenset()
        self._place(out, Pending(Load(src, tuple(inv)), src.dtype, ones, dims, reads, pos), pos)

    def _place(self, out, p: Pending, pos: int) -> None:
        """Keep `p` inlinable if its one consumer can take an expression, else store it."""
        n = self.uses.get(out, 0)
        self.info[out] = p
        if n == 0:
            p.consumed = True  # only its shape may be asked for: never computed
            return
        inl = self.inlinable.get(out, [])
        if not (n == 1 and len(inl) == 1 and inl[0] and out not in self.outputs):
            if not p.ones:
                self.info[out] = _scalar_or_buf(self, p, pos)
            else:
                self._materialize(out, p, pos)

    def _lower_row(self, op, pos: int) -> None:
        how = _ROW_HOW[op.type]
        x = self._value(op.inputs[0], pos)
        if isinstance(x, Lit):
            raise _Unsupported("row op of a literal")
        if x.ones[-1] and how == "sparse_xent":
            raise _Unsupported("sparse xent over a unit axis")
        labels = None
        if how == "xent":
            labels = self._dense_labels(op, pos, x)
            if x.ones[-1]:
                return self._lower_row_unit(op, pos, how, x, labels)
        elif x.ones[-1]:
            return self._lower_row_unit(op, pos, how, x, None)
        elif how == "sparse_xent":
            labels = self._value(op.inputs[1], pos)
            if (isinstance(labels, Lit) or labels.kind != "in"
                    or labels.ones != x.ones[:-1]):
                raise _Unsupported("sparse xent labels must be an input")
            for a, b in zip(labels.dims, x.dims[:-1]):
                if a != b:
                    self.checks.append(Check(a, b, pos, "Incompatible shapes"))
            self.checks.append(RangeCheck(labels, x.dims[-1], pos, "Received a label value "
                                          "outside the valid range"))
        outs = []
        for i, t in enumerate(op.outputs):
            loss = how in ("xent", "sparse_xent") and i == 0
            ones, dims = (x.ones[:-1], x.dims[:-1]) if loss else (x.ones, x.dims)
            if t in self.fed or not self.uses.get(t, 0):
                outs.append(None)
                if t not in self.fed:  # only its shape may be asked for
                    self.info[t] = Pending(Lit(0, t.dtype.name), t.dtype.name, ones, dims,
                                           frozenset(), pos, consumed=True)
                continue
            v = self._buf(t.dtype.name, ones, dims)
            outs.append(v)
            self.info[t] = v
        if any(o is not None for o in outs):
            self.stmts.append(RowOp(how, outs, x, labels, pos))

    def _dense_labels(self, op, pos: int, x: Value) -> Value:
        """The labels of a dense cross-entropy: stored, of the logits' shape (checked)."""
        lab = self._value(op.inputs[1], pos)
        if isinstance(lab, Lit) or lab.ones != x.ones:
            raise _Unsupported("xent labels broadcast")
        for a, b in zip(lab.dims, x.dims):
            if a != b:
                self.checks.append(Check(a, b, pos, "Incompatible shapes"))
        return lab

    def _lower_row_unit(self, op, pos: int, how: str, x: Value, lab) -> None:
        """A softmax-family op over an axis of size 1 is elementwise: softmax is exp(x - x)
        (1, or NaN where x is not finite, as the row formula gives), log_softmax x - x, the
        cross-entropy loss labels * (x - x) + 0 and its backprop exp(x - x) - labels."""
        r, dt = x.rank, x.dtype
        reads = frozenset(v.var_op for v in (x, lab) if v is not None and v.kind == "var")
        drop = tuple(range(r - 1)) + (0,)   # loads of a row result: the unit axis is index 0
        for i, t in enumerate(op.outputs):
            loss = how == "xent" and i == 0
            ones, dims = (x.ones[:-1], x.dims[:-1]) if loss else (x.ones, x.dims)
            if t in self.fed or not self.uses.get(t, 0):
                if t not in self.fed:
                    self.info[t] = Pending(Lit(0, dt), dt, ones, dims, frozenset(), pos,
                                           consumed=True)
                continue
            if how == "softmax":
                expr = Apply("math.exp({0} - {0})", [Load(x)], dt, pos, True)
            elif how == "log_softmax":
                expr = Apply("({0} - {0})", [Load(x)], dt, pos)
            elif loss:
                # TF's labels * (lse - z) summed from +0: here lse = 0 and z = x - x
                expr = Apply("({0} * ({1} - {1}) + np.%s(0.0))" % dt,
                             [Load(lab, drop), Load(x, drop)], dt, pos)
            else:
                expr = Apply("math.exp({1} - {1}) - {0}", [Load(lab), Load(x)], dt, pos, True)
            self._place(t, Pending(expr, dt, ones, dims, reads, pos), pos)

    def _lower_elementwise(self, op, pos: int) -> None:
        out = op.outputs[0]
        if op.type == "BroadcastTo":
            target = op.attrs.get("shape")
            if len(op.inputs) != 1 or target is None or any(
                    not isinstance(d, (int, np.integer)) or d < 0 for d in target):
                raise _Unsupported("BroadcastTo with a computed shape")
            parts = [self._expr(op.inputs[0])]
            shape_part = (None, None, tuple(int(d) == 1 for d in target),
                          tuple(1 if int(d) == 1 else ("const", int(d)) for d in target), None)
            ones, dims = self._broadcast(parts + [shape_part], pos)
            parts = [_aligned(self, op.inputs[0], parts[0], ones, pos)]
        else:
            used = set(_value_inputs(op))
            parts = [self._expr(x, shape_only=i not in used) for i, x in enumerate(op.inputs)]
            parts = [p if i in used else (Lit(0, p[1]),) + p[1:3] + (p[3], frozenset())
                     for i, p in enumerate(parts)]
            ones, dims = self._broadcast(parts, pos)
            parts = [_aligned(self, x, p, ones, pos) if i in used else p
                     for i, (x, p) in enumerate(zip(op.inputs, parts))]
            if op.type in _INT_DIVISION and out.dtype.is_integer and 1 in used:
                parts[1] = self._nonzero_divisor(op, pos, parts[1])
        static = out.shape.as_tuple()
        if static is not None and (len(static) != len(ones) or any(
                s is not None and (s == 1) != one for s, one in zip(static, ones))):
            raise _Unsupported(f"{op.type} is not a broadcasting elementwise op here")
        dtype = out.dtype.name
        cast = op.type == "Cast" or (
            parts and dtype != parts[0][1] and dtype != "bool")
        # Numba computes narrow integers in 64 bits: wrap each op's result to its dtype, so an
        # overflow feeding a comparison, max or division wraps where TF's does
        wrap = dtype in _NARROW_INTS and _template_text(op) != "{0}"
        expr = Apply(_template_text(op), [p[0] for p in parts], dtype, pos, cast or wrap)
        if (not cast and len(parts) == 1 and expr.template == "{0}" and parts[0][0] is not None
                and parts[0][2] == ones and parts[0][3] == dims):
            # an identity (e.g. a variable's `read`): pass the value through, so a stored
            # input is shared rather than copied (it is copied only if its variable is
            # written while the read still has consumers)
            expr = parts[0][0]
        reads = frozenset().union(*[p[4] for p in parts]) if parts else frozenset()
        if out in self.fed:
            return
        n = self.uses.get(out, 0)
        if n == 0:
            # nothing reads its value (at most its shape): never computed
            self.info[out] = Pending(expr, dtype, ones, dims, frozenset(), pos, consumed=True)
            return
        depth = 1 + max((getattr(self.info.get(x), "depth", 0) for x in op.inputs), default=0)
        p = Pending(expr, dtype, ones, dims, reads, pos, depth=depth)
        self.info[out] = p
        inl = self.inlinable.get(out, [])
        if depth >= MAX_INLINE_DEPTH or not (
                n == 1 and len(inl) == 1 and inl[0] and out not in self.outputs):
            if not ones:
                self.info[out] = _scalar_or_buf(self, p, pos)
            else:
                self._materialize(out, p, pos)

    def _nonzero_divisor(self, op, pos: int, part) -> tuple:
        """An integer divisor is checked for zeros before anything is written (the division
        raises InvalidArgumentError naming the op, as TF does); returns the operand part."""
        expr, dtype, ones, dims, reads = part
        if isinstance(expr, Lit):
            if expr.value == 0:
                raise _Unsupported("integer division by a literal zero")
            return part
        v = self._value(op.inputs[1], pos)
        what = "Integer division by zero"
        if v.kind == "in":
            self.checks.append(NonZeroCheck(v, pos, what))
        elif any(isinstance(st, AssignVar) for st in self.stmts):
            raise _Unsupported("integer divisor computed after a variable write")
        else:
            self.stmts.append(NonZeroCheck(v, pos, what))
        return Load(v), dtype, v.ones, v.dims, reads

    def _lower_reduce(self, op, pos: int, how: str, axis, keep: bool, out_dims=None) -> None:
        expr, dtype, ones, dims, _ = self._expr(op.inputs[0])
        rank = len(ones)
        axes = tuple(range(rank)) if axis is None else tuple(sorted(
            a + rank if a < 0 else a for a in axis))
        if out_dims is None:
            o_ones = tuple(True if k in axes else ones[k] for k in range(rank)
                           if keep or k not in axes)
            o_dims = tuple(1 if k in axes else dims[k] for k in range(rank)
                           if keep or k not in axes)
        else:
            o_ones, o_dims = out_dims
        out = op.outputs[0]
        if out in self.fed:
            return
        v = self._buf(out.dtype.name, o_ones, o_dims)
        self.stmts.append(Reduce(v, expr, dims, ones, axes, how, pos, dtype))
        self.info[out] = v

    def _lower_unbroadcast(self, op, pos: int) -> None:
        g, x = op.inputs
        _, _, g_ones, g_dims, _ = self._expr(g, shape_only=True)
        _, _, x_ones, x_dims, _ = self._expr(x, shape_only=True)
        lead = len(g_ones) - len(x_ones)
        if lead < 0:
            raise _Unsupported("unbroadcast to a higher rank")
        axes = tuple(range(lead)) + tuple(
            k + lead for k, one in enumerate(x_ones) if one and not g_ones[k + lead])
        for k, one in enumerate(x_ones):
            if not one and not g_ones[k + lead] and g_dims[k + lead] != x_dims[k]:
                self.checks.append(Check(g_dims[k + lead], x_dims[k], pos, "Incompatible shapes"))
        if not axes and lead == 0:
            # same shape class: a plain (inlinable) identity
            expr, dtype, ones, dims, reads = self._expr(g)
            out = op.outputs[0]
            # the same shape (checked above): described by g's dims, so that a stored g is
            # shared rather than copied
            p = Pending(expr, dtype, x_ones, dims if ones == x_ones else x_dims, reads, pos)
            self.info[out] = p
            n = self.uses.get(out, 0)
            inl = self.inlinable.get(out, [])
            if not (n == 1 and len(inl) == 1 and inl[0] and out not in self.outputs):
                self.info[out] = (_scalar_or_buf(self, p, pos) if not x_ones
                                  else self._materialize(out, p, pos))
            return
        self._lower_reduce(op, pos, "sum", axes, False, out_dims=(x_ones, x_dims))

    def _lower_matmul(self, op, pos: int) -> None:
        ta = bool(op.attrs.get("transpose_a"))
        tb = bool(op.attrs.get("transpose_b"))
        a = self._value(op.inputs[0], pos)
        b = self._value(op.inputs[1], pos)
        if isinstance(a, Lit) or isinstance(b, Lit) or a.rank != 2 or b.rank != 2:
            raise _Unsupported("matmul operands")
        m, ka = (a.dims[1], a.dims[0]) if ta else (a.dims[0], a.dims[1])
        kb, n = (b.dims[1], b.dims[0]) if tb else (b.dims[0], b.dims[1])
        mo, ko_a = (a.ones[1], a.ones[0]) if ta else (a.ones[0], a.ones[1])
        ko_b, no = (b.ones[1], b.ones[0]) if tb else (b.ones[0], b.ones[1])
        if ka != kb:
            self.checks.append(Check(ka, kb, pos, "Matrix size-incompatible"))
        out = op.outputs[0]
        if out in self.fed:
            return
        v = self._buf(out.dtype.name, (mo, no), (m, n))
        self.stmts.append(MatMul(v, a, b, ta, tb, pos))
        self.info[out] = v

    def _lower_assign(self, op, pos: int) -> None:
        ref, value = op.inputs
        var_op = ref.op
        if var_op not in self.var_classes:
            raise _Unsupported("assign to an unknown variable")
        var = self._var(var_op)
        expr, dtype, ones, dims, reads = _aligned(self, value, self._expr(value), var.ones, pos)
        if len(ones) > var.rank:
            raise _Unsupported("assign value of higher rank")
        # the value must have the variable's shape (TF1: validate_shape)
        lead = var.rank - len(ones)
        for k in range(var.rank):
            j = k - lead
            vd = 1 if j < 0 else dims[j]
            if vd != var.dims[k]:
                if op.type == "Assign" or vd != 1:
                    self.checks.append(Check(var.dims[k], vd, pos, "Assign shapes"))
        self._flush_reads(var_op, pos)
        for t, inf in list(self.info.items()):
            if inf is var and self.remaining.get(t, 0) > 0:
                c = self._buf(var.dtype, var.ones, var.dims)
                self.stmts.append(CopyVar(c, var, pos))
                self.info[t] = c
        self.stmts.append(AssignVar(var, expr, {"Assign": "set", "AssignAdd": "add",
                                                "AssignSub": "sub"}[op.type], pos))
        out = op.outputs[0]
        if self.uses.get(out, 0) and out not in self.fed:
            c = self._buf(var.dtype, var.ones, var.dims)
            self.stmts.append(CopyVar(c, var, pos))
            self.info[out] = c


def _shift_axes(e, k: int):
    """`e` (an expression over a loop of some rank) for a loop with `k` more leading axes, as
    when it broadcasts into a higher-rank consumer: plain loads align to the right by
    themselves, but loop-axis references (`Load.axes`, `Index`) are absolute and move by `k`.
    Returns None for expression kinds it cannot rewrite (the caller stores the value)."""
    if isinstance(e, Lit):
        return e
    if isinstance(e, Load):
        return e if e.axes is None else Load(e.value, tuple(a + k for a in e.axes))
    if isinstance(e, Index):
        return Index(e.axis + k, e.dtype)
    if isinstance(e, Apply):
        args = [_shift_axes(a, k) for a in e.args]
        if any(a is None for a in args):
            return None
        return Apply(e.template, args, e.dtype, e.op, e.cast)
    return None


def _position_dependent(e) -> bool:
    """Whether `e` reads positions from the loop indices themselves (a slice's `Take`, a
    one-hot's `Index`) rather than through loads that know which of their dims are 1."""
    if isinstance(e, (Lit, Load)) or e is None:
        return False
    if isinstance(e, Apply):
        return any(_position_dependent(a) for a in e.args)
    return True


def _aligned(low: "Lowerer", t, part: tuple, ones: tuple, pos: int) -> tuple:
    """Operand `part` (from `_expr(t)`) ready for a loop over dims whose unit-ness is `ones`."""
    k = len(ones) - len(part[2])
    if part[0] is None:
        return part
    widened = any(one and not ones[j + k] for j, one in enumerate(part[2]))
    if widened and _position_dependent(part[0]):
        # a size-1 dim broadcast along a longer loop axis: positions computed from the loop
        # index would walk past it; store the value (loads index a unit dim with 0)
        v = low._value(t, pos)
        return (Load(v),) + tuple(part[1:])
    if k <= 0:
        return part
    e = _shift_axes(part[0], k)
    if e is None:
        v = low._value(t, pos)
        return (Load(v),) + tuple(part[1:])
    return (e,) + tuple(part[1:])


def _scalar_or_buf(low: Lowerer, p: Pending, pos: int) -> Value:
    """A rank-0 result: a local scalar."""
    low.nbuf += 1
    v = Value("buf", low.nbuf, p.dtype, (), (), f"s{low.nbuf}")
    low.stmts.append(Loop(v, p.expr, pos))
    return v


def _value_inputs(op) -> list:
    """Indices of the inputs whose values `op` reads (the others only give a shape)."""
    d = op.op_def
    n = len(op.inputs)
    if d.kind == "elementwise" and d.template is not None and op.type != "BroadcastTo":
        tmpl = d.template(op) if callable(d.template) else d.template
        return [i for i in range(n) if "{%d}" % i in tmpl]
    if op.type in ("Unbroadcast", "BroadcastReduced", "Reshape", "Shape"):
        return [] if op.type == "Shape" else [0]
    if op.type in _ak.SHAPE_ONLY:
        return [i for i in range(n) if i not in _ak.SHAPE_ONLY[op.type]]
    return list(range(n))


def _can_inline_into(op, i: int) -> bool:
    """Whether input `i` of `op` may be an inlined expression rather than a stored array."""
    d = op.op_def
    if d.kind == "elementwise" and d.template is not None and supported(op):
        return True
    if (op.type in _REDUCE_HOW or op.type in ("ArgMax", "ArgMin")) and supported(op):
        return True
    if op.type in ("Unbroadcast", "BroadcastReduced", "Reshape", "ExpandDims", "Squeeze",
                   "Transpose", "OneHot", "L2Loss", "Shape") and supported(op):
        if op.type in ("Reshape", "ExpandDims", "Squeeze", "Transpose", "OneHot"):
            return i >= 1 and op.type != "Transpose"
        if op.type in ("L2Loss", "Shape"):
            return True
        return i == 1 or op.type == "Unbroadcast"
    if op.type in ("Assign", "AssignAdd", "AssignSub") and i == 1 and supported(op):
        return True
    if op.type in _ak.INLINE_INTO and supported(op):
        allowed = _ak.INLINE_INTO[op.type]
        return allowed is None or i in allowed
    return False


def lower(ops, inputs, outputs, var_classes) -> tuple:
    """Lower `ops` to a Kernel; returns (kernel, [(input slot, Const op)]) or raises."""
    low = Lowerer(ops, inputs, outputs, var_classes)
    return low.lower(), low.const_inputs


Unsupported = _Unsupported
_ = Optional

# array ops (slicing, gather, concat, ...): lowering and emitters live in array_kernels.py;
# window ops (convolutions, pooling) in window_kernels.py, which adds to the same tables
from jitflow.compiler import array_kernels as _ak  # noqa: E402
from jitflow.compiler import window_kernels as _wk  # noqa: E402

for _table in ("SUPPORTED", "LOWER", "SHAPE_ONLY", "EMIT", "DIM_TEXT"):
    getattr(_ak, _table).update(getattr(_wk, _table))
