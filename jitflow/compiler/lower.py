"""The generic fuser: a run of plan ops -> one `Kernel` of the IR (ir.py).

It does the work every op shares and names no op types: it follows the shape classes of what
flows in (broadcasting resolved into symbolic dims and `Check`s), inlines an elementwise result
into its one consumer when that consumer can take an expression, materializes what must be
stored, and orders variable reads and writes. What an op computes comes from its registry entry:

- an elementwise op declares `scalar=` (a scalar expression over its operands, built with
  `ir.S`; or `scalar(op) -> expression`), and the fuser turns it into an `Apply`;
- an elementwise op may declare `lower=` too: it then decides (from its operands' shape
  classes) whether to call `low.elementwise` or raise `Unsupported`;
- any other op declares `lower=`, a function `lower(low, op, pos)` that reads its operands
  through this `Lowerer` (`low.expr`, `low.value`, `low.stored`), appends IR statements and
  checks, and records its outputs (`low.place`, `low.set`); `lowerable(op)` says whether it
  compiles at all (else it runs through its reference), `shape_only` lists the inputs it reads
  only for their shapes and `inline` those it takes as unstored expressions.

Variables are updated in place, in plan order, as the interpreter orders its reads and writes;
an inlined expression that reads a variable is materialized before a later write to it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from jitflow.compiler.ir import (Apply, Arg, AssignVar, Check, CopyVar, Index, INT_DIVIDING,
                                 Kernel, Lit, Load, Loop, NonZeroCheck, RangeCheck, Reduce,
                                 ShapeOf, Take, Value, VClass, View, class_of, scalar_args,
                                 scalar_uses)

__all__ = ["Lowerer", "Operand", "Pending", "ShapeInfo", "Unsupported", "lower", "supported",
           "host_only", "value_inputs", "can_inline_into", "scalar_expr", "const_dim", "add_dims",
           "is_static", "static_size", "MAX_INLINE_DEPTH", "computes_nothing",
           "written_by"]


class Unsupported(Exception):
    """The ops cannot be lowered for these shape classes: they run through their references."""



class Operand(NamedTuple):
    """A tensor as a consumer sees it: an expression (None when only the shape is known), its
    dtype, shape class, symbolic dims and the variable ops it reads."""

    expr: object
    dtype: str
    ones: tuple
    dims: tuple
    reads: frozenset


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


# -- symbolic dims ------------------------------------------------------------------------------
def is_static(d) -> bool:
    """Whether dim `d` is a known number."""
    return d == 1 or d[0] == "const"


def static_size(d) -> int:
    return 1 if d == 1 else d[1]


def const_dim(n: int):
    """The dim of known size `n` (1 is the unit dim of the shape class)."""
    return 1 if n == 1 else ("const", int(n))


def add_dims(a, b):
    if is_static(a) and is_static(b):
        return const_dim(static_size(a) + static_size(b))
    return ("arith", "+", a, b)


# -- what can be compiled ----------------------------------------------------------------------
_NUMERIC_NAMES = {"float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16",
                  "uint32", "uint64", "bool"}
_FLOAT = ("float32", "float64")
_NARROW_INTS = ("int8", "int16", "int32", "uint8", "uint16", "uint32")
MAX_INLINE_DEPTH = 64     # longer chains are stored every so often (bounded expression trees)


_HOST_DTYPES = ("string", "variant")


def host_only(op) -> bool:
    """Whether `op` is host work by design (kind "host", or string/variant values): never in a
    numeric kernel, so running it through its reference is no fallback."""
    if op.op_def.kind == "host":
        return True
    return any(x.dtype.name in _HOST_DTYPES for x in op.outputs) or any(
        x.dtype.name in _HOST_DTYPES for x in op.inputs)


def supported(op) -> bool:
    """Whether `op` lowers into the IR (otherwise it runs through its reference)."""
    d = op.op_def
    if d.kind == "host":
        return False  # input pipelines, strings, control flow: host work by design
    for x in op.inputs:
        if x.dtype.name not in _NUMERIC_NAMES:
            return False  # float16, complex, strings: references only
    for x in op.outputs:
        if x.dtype.name not in _NUMERIC_NAMES:
            return False
    if d.scalar is not None:
        return True
    if d.lower is None:
        return False
    return d.lowerable is None or bool(d.lowerable(op))


def scalar_expr(op):
    """The scalar expression of elementwise `op` (its registry entry's `scalar`)."""
    s = op.op_def.scalar
    if isinstance(s, str):
        return _call(s, op)
    if callable(s):
        s = s(op)
        return _call(s, op) if isinstance(s, str) else s
    return s


def _call(fn: str, op):
    from jitflow.compiler.ir import Call
    return Call(fn, tuple(Arg(i) for i in range(len(op.inputs))))


def value_inputs(op) -> list:
    """Indices of the inputs whose values `op` reads (the others only give a shape)."""
    d = op.op_def
    n = len(op.inputs)
    if d.scalar is not None:
        used = scalar_args(scalar_expr(op))
        return [i for i in range(n) if i in used]
    shape_only = d.shape_only
    return [i for i in range(n) if i not in shape_only]


def can_inline_into(op, i: int) -> bool:
    """Whether input `i` of `op` may be an inlined expression rather than a stored array."""
    d = op.op_def
    if not supported(op):
        return False
    if d.scalar is not None:
        return True
    inline = d.inline
    return inline is True or (not isinstance(inline, bool) and i in inline)


# -- lowering ---------------------------------------------------------------------------------
class Lowerer:
    """Turns an ordered list of ops into one Kernel, given the classes of what flows in.

    Op lowerings (registry `lower=` functions) use its public methods: `expr`, `value`,
    `stored`, `buf`, `emit`, `check_equal`, `check_in_range`, `range_check`, `place`, `set`,
    `is_fed`, `reduce`, `elementwise`, `assign`, `refine`, `broadcast`, `aligned`.
    """

    def __init__(self, ops, inputs, outputs, var_classes) -> None:
        self.ops = list(ops)
        self.in_tensors = [t for t, _ in inputs]
        self.outputs = list(outputs)
        self.var_classes = var_classes   # var op -> VClass
        self.info: dict = {}             # tensor -> Value | Lit | Pending | ShapeInfo
        self.kinputs: list = []
        self.kvars: list = []
        self.var_value: dict = {}
        self.checks: list = []
        self.stmts: list = []
        self.nbuf = 0
        self.const_inputs: list = []     # (slot, Const op) for constants passed as arguments
        for t, cls in inputs:
            self.info[t] = self.new_input(cls)
        self.fed = set(self.in_tensors)
        # consumer counts within this kernel (+1 for a requested output)
        self.uses: dict = {}
        self.inlinable: dict = {}
        for op in self.ops:
            for i in value_inputs(op):
                t = op.inputs[i]
                self.uses[t] = self.uses.get(t, 0) + 1
                self.inlinable.setdefault(t, []).append(can_inline_into(op, i))
        for t in self.outputs:
            self.uses[t] = self.uses.get(t, 0) + 1
        self.remaining = dict(self.uses)

    # -- values ---------------------------------------------------------------------------
    def new_input(self, cls: VClass) -> Value:
        """A new kernel argument of shape class `cls`."""
        slot = len(self.kinputs)
        dims = tuple(1 if one else ("in", slot, k) for k, one in enumerate(cls.ones))
        v = Value("in", slot, cls.dtype, cls.ones, dims, f"a{slot}")
        self.kinputs.append(v)
        return v

    def constant(self, op, value) -> None:
        """Output 0 of `op` is the constant `value`: a literal, or an argument array."""
        out = op.outputs[0]
        if out in self.fed:
            return
        if np.ndim(value) == 0:
            self.info[out] = Lit(value.item() if hasattr(value, "item") else value,
                                 out.dtype.name)
        else:
            v = self.new_input(class_of(np.asarray(value)))
            self.const_inputs.append((v.slot, op))
            self.info[out] = v

    def var(self, var_op) -> Value:
        """The buffer of variable `var_op` (an argument, written in place)."""
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

    def buf(self, dtype: str, ones: tuple, dims: tuple) -> Value:
        """A new buffer the kernel materializes."""
        self.nbuf += 1
        return Value("buf", self.nbuf, dtype, ones, dims, f"b{self.nbuf}")

    def is_fed(self, t) -> bool:
        """Whether `t` comes into the kernel as an argument (its producer computes nothing)."""
        return t in self.fed

    def set(self, t, value) -> None:
        """Record what tensor `t` is (unless it is fed)."""
        if t not in self.fed:
            self.info[t] = value

    def emit(self, stmt) -> None:
        """Append an IR statement."""
        self.stmts.append(stmt)

    @staticmethod
    def reads_of(v) -> frozenset:
        """The variable ops a stored value reads."""
        return frozenset([v.var_op]) if isinstance(v, Value) and v.kind == "var" else frozenset()

    # -- expressions ----------------------------------------------------------------------
    def expr(self, t, shape_only: bool = False) -> Operand:
        """Tensor `t` as seen by a consumer now (`shape_only`: only its shape is needed)."""
        inf = self.info.get(t)
        if isinstance(inf, Pending) and not shape_only:
            inf.consumed = True
        if inf is None:
            if t.op in self.var_classes:
                v = self.var(t.op)
                return Operand(Load(v), v.dtype, v.ones, v.dims, frozenset([t.op]))
            raise Unsupported(f"no value for {t.name}")
        if isinstance(inf, ShapeInfo):
            if shape_only:
                r = len(inf.dims)
                return Operand(None, inf.dtype, (r == 1,), (1 if r == 1 else ("const", r),),
                               frozenset())
            inf = self._materialize_shape(t, inf)
        if isinstance(inf, Pending):
            return Operand(inf.expr, inf.dtype, inf.ones, inf.dims, inf.reads)
        if isinstance(inf, Lit):
            return Operand(inf, inf.dtype, (), (), frozenset())
        return Operand(Load(inf), inf.dtype, inf.ones, inf.dims, self.reads_of(inf))

    def value(self, t, pos: int) -> Value:
        """`t` as a stored array (materializing a pending expression)."""
        inf = self.info.get(t)
        if isinstance(inf, Value):
            return inf
        if inf is None and t.op in self.var_classes:
            return self.var(t.op)
        if isinstance(inf, Lit):
            raise Unsupported("scalar literal where an array is needed")
        if isinstance(inf, ShapeInfo):
            return self._materialize_shape(t, inf)
        if inf is None:
            raise Unsupported(f"no value for {t.name}")
        return self.materialize(t, inf, pos)

    def stored(self, t, pos: int) -> Value:
        """`t` as a stored array of rank >= 1 that the op indexes; an identity of a stored
        value (a variable's read) is indexed at its source."""
        inf = self.info.get(t)
        e = getattr(inf, "expr", None)
        if (isinstance(inf, Pending) and isinstance(e, Apply) and e.fn == Arg(0)
                and not e.cast and isinstance(e.args[0], Load) and e.args[0].axes is None
                and e.args[0].value.ones == inf.ones and e.args[0].value.dims == inf.dims):
            inf.consumed = True
            return e.args[0].value
        v = self.value(t, pos)
        if not isinstance(v, Value) or v.rank == 0:
            raise Unsupported("an array op of a scalar")
        return v

    def shape_info(self, t):
        """The symbolic value of a Shape-like result (`ShapeInfo`), else None."""
        inf = self.info.get(t)
        return inf if isinstance(inf, ShapeInfo) else None

    def literal(self, t):
        """The scalar literal `t` is (`Lit`), else None."""
        inf = self.info.get(t)
        return inf if isinstance(inf, Lit) else None

    def _materialize_shape(self, t, inf: ShapeInfo) -> Value:
        r = len(inf.dims)
        v = self.buf(inf.dtype, (r == 1,), (1 if r == 1 else ("const", r),))
        self.stmts.append(ShapeOf(v, inf.dims, inf.pos))
        self.info[t] = v
        return v

    def materialize(self, t, p: Pending, pos: int) -> Value:
        """Store pending expression `p` (the value of `t`) into a buffer."""
        e = p.expr
        if (isinstance(e, Load) and e.axes is None and e.value.ones == p.ones
                and e.value.dims == p.dims):
            # an identity of a stored value: share it (copied before its variable changes)
            self.info[t] = e.value
            return e.value
        out = self.buf(p.dtype, p.ones, p.dims)
        self.stmts.append(Loop(out, p.expr, pos))
        self.info[t] = out
        return out

    def scalar_local(self, p: Pending, pos: int) -> Value:
        """A rank-0 result: a local scalar."""
        self.nbuf += 1
        v = Value("buf", self.nbuf, p.dtype, (), (), f"s{self.nbuf}")
        self.stmts.append(Loop(v, p.expr, pos))
        return v

    def broadcast(self, parts, pos: int) -> tuple:
        """(ones, dims) of the broadcast of operands `parts`; unequal dims are checked."""
        rank = max((len(p[2]) for p in parts), default=0)
        ones, dims = [], []
        for k in range(rank):
            chosen = None
            for p in parts:
                o, d = p[2], p[3]
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

    def aligned(self, t, part: tuple, ones: tuple, pos: int) -> Operand:
        """Operand `part` (from `expr(t)`) ready for a loop over dims whose unit-ness is
        `ones`."""
        part = Operand(*part)
        k = len(ones) - len(part.ones)
        if part.expr is None:
            return part
        widened = any(one and not ones[j + k] for j, one in enumerate(part.ones))
        if widened and _position_dependent(part.expr):
            # a size-1 dim broadcast along a longer loop axis: positions computed from the loop
            # index would walk past it; store the value (loads index a unit dim with 0)
            v = self.value(t, pos)
            return part._replace(expr=Load(v))
        if k <= 0:
            return part
        e = _shift_axes(part.expr, k)
        if e is None:
            v = self.value(t, pos)
            return part._replace(expr=Load(v))
        return part._replace(expr=e)

    def _flush_reads(self, var_op, pos: int) -> None:
        """Store pending expressions that read `var_op` before it is written."""
        for t, inf in list(self.info.items()):
            if isinstance(inf, Pending) and var_op in inf.reads and not inf.consumed:
                self.materialize(t, inf, pos)

    def place(self, out, p: Pending, pos: int) -> None:
        """Keep `p` inlinable if its one consumer can take an expression, else store it."""
        n = self.uses.get(out, 0)
        self.info[out] = p
        if n == 0:
            p.consumed = True  # only its shape may be asked for: never computed
            return
        inl = self.inlinable.get(out, [])
        if not (n == 1 and len(inl) == 1 and inl[0] and out not in self.outputs):
            if not p.ones:
                self.info[out] = self.scalar_local(p, pos)
            else:
                self.materialize(out, p, pos)

    def refine(self, t, ones: tuple, dims: tuple) -> tuple:
        """Use the static shape of `t`: its known sizes replace symbolic ones (a size 1 becomes
        a unit dim of the shape class, as the consumers' shape rules assume)."""
        static = t.shape.as_tuple()
        if static is None or len(static) != len(ones):
            return ones, dims
        ones, dims = list(ones), list(dims)
        for k, s in enumerate(static):
            if s is not None and not is_static(dims[k]):
                ones[k] = s == 1
                dims[k] = const_dim(s) if s != 0 else ("const", 0)
        return tuple(ones), tuple(dims)

    # -- checks -----------------------------------------------------------------------------
    def check_equal(self, a, b, pos: int, what: str) -> None:
        """Dims `a` and `b` must agree."""
        if a != b:
            self.checks.append(Check(a, b, pos, what))

    def check_in_range(self, lo, x, hi, pos: int, what: str) -> None:
        """lo <= x < hi (dims), statically when all three are known."""
        if all(is_static(v) for v in (lo, x, hi)):
            if not static_size(lo) <= static_size(x) < static_size(hi):
                self.checks.append(Check(1, ("const", 0), pos, what))  # always fails
            return
        self.checks.append(Check(("ok", lo, x, hi), 1, pos, what))

    def range_check(self, idx: Value, dim, pos: int, what: str, lower: bool = True) -> None:
        """Every element of index array `idx` lies in [0, dim) (`lower` False: below dim)."""
        if idx.kind == "in":
            self.checks.append(RangeCheck(idx, dim, pos, what, lower))
            return
        self.value_check(RangeCheck(idx, dim, pos, what, lower), idx,
                         "indices computed after a variable write")

    def value_check(self, check, v: Value, why: str) -> None:
        """Place element check `check` of computed value `v` before anything is written: at
        the end when no variable was written yet, else just before the first write when `v`
        was complete by then (its elements cannot change afterwards: only variables are
        written in place, and `v` is not one). A value computed after a variable write
        raises Unsupported (`why`): its check could fail after the write."""
        first = next((i for i, s in enumerate(self.stmts) if isinstance(s, AssignVar)), None)
        if first is None:
            self.stmts.append(check)
            return
        if v.kind == "var" or any(v in written_by(s) for s in self.stmts[first:]):
            raise Unsupported(why)
        self.stmts.insert(first, check)

    def fail(self, pos: int, what: str) -> None:
        """A check that always fails: these operands are invalid for op `pos` (the run goes
        to the references, which raise TF's error)."""
        self.checks.append(Check(1, ("const", 0), pos, what))

    def rank(self, t) -> int:
        """The rank of tensor `t` in this kernel (known from the classes of what flows in,
        also where the graph's static shape has no rank)."""
        return len(self.expr(t, shape_only=True).ones)

    def nonzero_divisor(self, op, pos: int, i: int, part: Operand) -> Operand:
        """Input `i` (an integer divisor) is checked for zeros before anything is written (the
        division raises InvalidArgumentError naming the op, as TF does)."""
        if isinstance(part.expr, Lit):
            if part.expr.value == 0:
                raise Unsupported("integer division by a literal zero")
            return part
        v = self.value(op.inputs[i], pos)
        what = "Integer division by zero"
        if v.kind == "in":
            self.checks.append(NonZeroCheck(v, pos, what))
        else:
            self.value_check(NonZeroCheck(v, pos, what), v,
                             "integer divisor computed after a variable write")
        return Operand(Load(v), part.dtype, v.ones, v.dims, part.reads)

    # -- the kernel -------------------------------------------------------------------------
    def always_fails(self) -> bool:
        """Whether a check of two known dims that differ was added: operands some op refuses
        (TF raises for them), so the kernel never computes anything."""
        return any(isinstance(c, Check) and is_static(c.a) and is_static(c.b)
                   and static_size(c.a) != static_size(c.b) for c in self.checks)

    def lower(self) -> Kernel:
        for pos, op in enumerate(self.ops):
            try:
                self._lower_op(op, pos)
            except Unsupported:
                if not self.always_fails():
                    raise
                # an op refused these operands (its failing check is in place): the kernel
                # is that check, and the references raise TF's error naming the op
                fails = [c for c in self.checks if isinstance(c, Check)
                         and is_static(c.a) and is_static(c.b)
                         and static_size(c.a) != static_size(c.b)]
                return Kernel(self.kinputs, self.kvars, fails[:1], [],
                              [Lit(0, t.dtype.name) for t in self.outputs],
                              [op.name for op in self.ops], [op.type for op in self.ops], 0)
        results = []
        seen = set()
        end = max(len(self.ops) - 1, 0)
        for t in self.outputs:
            inf = self.info.get(t)
            if isinstance(inf, Pending):
                inf = self.materialize(t, inf, end)
            if isinstance(inf, ShapeInfo):
                inf = self._materialize_shape(t, inf)
            if inf is None and t.op in self.var_classes:
                raise Unsupported("variable fetched from a kernel")
            if isinstance(inf, Value) and (inf.kind == "var" or getattr(inf, "view", False)
                                           or inf.rank > 0 and id(inf) in seen):
                c = self.buf(inf.dtype, inf.ones, inf.dims)
                self.stmts.append(CopyVar(c, inf, end))
                inf = c
            seen.add(id(inf))
            results.append(inf)
        return Kernel(self.kinputs, self.kvars, self.checks, self.stmts, results,
                      [op.name for op in self.ops], [op.type for op in self.ops], self.nbuf)

    def _lower_op(self, op, pos: int) -> None:
        d = op.op_def
        for i in value_inputs(op):
            x = op.inputs[i]
            self.remaining[x] = self.remaining.get(x, 1) - 1
        if all(o in self.fed for o in op.outputs) and not d.stateful:
            return
        if d.scalar is not None and d.lower is None:
            return self.elementwise(op, pos)
        if d.lower is None:
            raise Unsupported(op.type)
        d.lower(self, op, pos)

    # -- building blocks for op lowerings ---------------------------------------------------
    def elementwise(self, op, pos: int, target=None) -> None:
        """Lower elementwise `op` (its `scalar_expr`) over its broadcast operands; with
        `target` (ones, dims), broadcast to that shape too (BroadcastTo)."""
        out = op.outputs[0]
        fn = scalar_expr(op) if target is None else Arg(0)
        used = set(value_inputs(op)) if target is None else {0}
        parts = [self.expr(x, shape_only=i not in used) for i, x in enumerate(op.inputs)]
        parts = [p if i in used else Operand(Lit(0, p.dtype), p.dtype, p.ones, p.dims,
                                             frozenset())
                 for i, p in enumerate(parts)]
        extra = [] if target is None else [Operand(None, None, target[0], target[1], None)]
        ones, dims = self.broadcast(parts + extra, pos)
        parts = [self.aligned(x, p, ones, pos) if i in used else p
                 for i, (x, p) in enumerate(zip(op.inputs, parts))]
        dtype = out.dtype.name
        if dtype not in ("bool",) and not dtype.startswith("float"):
            for call in scalar_uses(fn, INT_DIVIDING):
                div = call.args[1]
                if isinstance(div, Arg) and div.index in used:
                    parts[div.index] = self.nonzero_divisor(op, pos, div.index,
                                                            parts[div.index])
        static = out.shape.as_tuple()
        if static is not None and (len(static) != len(ones) or any(
                s is not None and (s == 1) != one for s, one in zip(static, ones))):
            raise Unsupported(f"{op.type} is not a broadcasting elementwise op here")
        cast = bool(scalar_uses(fn, ("cast",))) or (
            bool(parts) and dtype != parts[0].dtype and dtype != "bool")
        identity = isinstance(fn, Arg)
        # Numba computes narrow integers in 64 bits: wrap each op's result to its dtype, so an
        # overflow feeding a comparison, max or division wraps where TF's does
        wrap = dtype in _NARROW_INTS and not identity
        in_dt = op.inputs[0].dtype.name if op.inputs else dtype
        lit_dt = dtype if dtype in _FLOAT else (in_dt if in_dt in _FLOAT else dtype)
        expr = Apply(fn, [p.expr for p in parts], dtype, pos, cast or wrap, lit_dt)
        if (not cast and len(parts) == 1 and identity and fn.index == 0
                and parts[0].expr is not None and parts[0].ones == ones
                and parts[0].dims == dims):
            # an identity (e.g. a variable's `read`): pass the value through, so a stored
            # input is shared rather than copied (it is copied only if its variable is
            # written while the read still has consumers)
            expr = parts[0].expr
        reads = frozenset().union(*[p.reads for p in parts]) if parts else frozenset()
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
                self.info[out] = self.scalar_local(p, pos)
            else:
                self.materialize(out, p, pos)

    def reduce(self, op, pos: int, how: str, axis, keep: bool, out_dims=None) -> None:
        """Output 0 of `op` is input 0 reduced with `how` along `axis` (None: all axes)."""
        expr, dtype, ones, dims, _ = self.expr(op.inputs[0])
        rank = len(ones)
        if axis is not None and any(not -rank <= a < rank for a in axis):
            # an axis out of range (the graph did not know the rank): the reference raises
            raise Unsupported(f"{op.type} axis {tuple(axis)} out of range for rank {rank}")
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
        v = self.buf(out.dtype.name, o_ones, o_dims)
        self.stmts.append(Reduce(v, expr, dims, ones, axes, how, pos, dtype))
        self.info[out] = v

    def identity_of(self, op, pos: int, src: Operand, ones: tuple, dims: tuple) -> None:
        """Output 0 of `op` is `src` with the shape class `ones`/`dims` (same elements):
        inlined into its consumer or stored."""
        out = op.outputs[0]
        p = Pending(src.expr, src.dtype, ones, dims, src.reads, pos)
        self.info[out] = p
        n = self.uses.get(out, 0)
        inl = self.inlinable.get(out, [])
        if not (n == 1 and len(inl) == 1 and inl[0] and out not in self.outputs):
            self.info[out] = (self.scalar_local(p, pos) if not ones
                              else self.materialize(out, p, pos))

    def assign(self, op, pos: int, mode: str) -> None:
        """Variable input 0 of `op` = ("set"), += ("add") or -= ("sub") input 1, in place;
        output 0 (when used) is the variable's new value."""
        ref, value = op.inputs
        var_op = ref.op
        if var_op not in self.var_classes:
            raise Unsupported("assign to an unknown variable")
        var = self.var(var_op)
        expr, dtype, ones, dims, reads = self.aligned(value, self.expr(value), var.ones, pos)
        if len(ones) > var.rank:
            raise Unsupported("assign value of higher rank")
        # the value must have the variable's shape (TF1: validate_shape)
        lead = var.rank - len(ones)
        for k in range(var.rank):
            j = k - lead
            vd = 1 if j < 0 else dims[j]
            if vd != var.dims[k]:
                if mode == "set" or vd != 1:
                    self.checks.append(Check(var.dims[k], vd, pos, "Assign shapes"))
        self._flush_reads(var_op, pos)
        for t, inf in list(self.info.items()):
            if inf is var and self.remaining.get(t, 0) > 0:
                c = self.buf(var.dtype, var.ones, var.dims)
                self.stmts.append(CopyVar(c, var, pos))
                self.info[t] = c
        self.stmts.append(AssignVar(var, expr, mode, pos))
        out = op.outputs[0]
        if self.uses.get(out, 0) and out not in self.fed:
            # the new value is read from the variable itself: a later write of the variable in
            # this kernel first copies what still needs it (above), and a kernel result that
            # is the variable is returned as a copy (`lower`)
            self.info[out] = var


def written_by(s) -> list:
    """The Values IR statement `s` defines or writes (a view is its source's memory: a
    statement writing the view writes the source too, and the reverse)."""
    out = []
    for name in ("out", "var"):
        v = getattr(s, name, None)
        if isinstance(v, Value):
            out.append(v)
    for name in ("outs",):
        out.extend(v for v in getattr(s, name, None) or () if isinstance(v, Value))
    if isinstance(s, View):
        out.append(s.src)
    return out


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
        return Apply(e.fn, args, e.dtype, e.op, e.cast, e.lit_dtype)
    return None


def _position_dependent(e) -> bool:
    """Whether `e` reads positions from the loop indices themselves (a slice's `Take`, a
    one-hot's `Index`) rather than through loads that know which of their dims are 1."""
    if isinstance(e, (Lit, Load)) or e is None:
        return False
    if isinstance(e, Apply):
        return any(_position_dependent(a) for a in e.args)
    return True


def computes_nothing(low: Lowerer, op, pos: int) -> None:
    """The lowering of ops whose values come into the kernel as arguments (placeholders,
    variables) or that have none (NoOp)."""


def lower(ops, inputs, outputs, var_classes) -> tuple:
    """Lower `ops` to a Kernel; returns (kernel, [(input slot, Const op)]) or raises
    Unsupported."""
    low = Lowerer(ops, inputs, outputs, var_classes)
    return low.lower(), low.const_inputs


_ = Take   # re-exported for op lowerings
