"""The LLVM printer: a kernel in the loop-level form (jitflow/compiler/loops.py) as LLVM IR text,
`i32 <name>(ptr noalias %args)`.

`args` holds, per slot, a buffer's address or a dim's value (`LLVMKernel.slots` says which:
the caller allocates every buffer and evaluates every dim before the call). The function runs
the statements and returns 0, or the code of the check that failed (nothing the caller keeps
was written then). Every primitive is the instruction the Python printer's Numba code lowers
to (no fast-math flags), so both give the same bits; jitflow's math functions are the IR of
mathlib.py's builders, inlined.

Innermost loops whose iterations are independent (only `Let` and `Store`; every access either
the same element in each iteration or consecutive elements; a buffer the loop writes read only
at the element written) are printed already vectorized: `lanes` iterations at a time on
`<lanes x T>` values, then the remaining iterations one at a time. Each lane computes the
instructions of the scalar loop (the vector forms of the same instructions, jitflow's math
functions on vectors: mathir.py), so the result has the same bits, and LLVM's costly loop
vectorizer is not needed: a cheap pipeline gives vector code.
"""
from __future__ import annotations

import math
import struct

from jitflow.compiler.loops import (FLOATS, Alloc, Buf, Call, Copy, DimOf, Fail, For, If, Let,
                                    Lit, Load, Local, LoopKernel, Prim, Set, Store, Unsupported,
                                    Var, View)

__all__ = ["LLVMKernel", "print_llvm"]

_FT = {"float32": "float", "float64": "double"}
_STORE = {"float32": "float", "float64": "double", "bool": "i8", "int8": "i8", "int16": "i16",
          "int32": "i32", "int64": "i64", "uint8": "i8", "uint16": "i16", "uint32": "i32",
          "uint64": "i64"}
_REG = {"float32": "float", "float64": "double", "int64": "i64", "bool": "i1"}
_SIZE = {"float32": 4, "float64": 8, "bool": 1, "int8": 1, "int16": 2, "int32": 4, "int64": 8,
         "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8}
_FBIN = {"fadd", "fsub", "fmul", "fdiv", "frem"}
_IBIN = {"add", "sub", "mul", "sdiv", "srem"}
_LBIN = {"and", "or", "xor"}
_X = {"floor", "ceil", "rint", "trunc", "sqrt", "fabs", "copysign", "fma"}


def _fconst(v: float, dt: str) -> str:
    """An LLVM float constant (hex of the double; float32 values are exact in it)."""
    if dt == "float32":
        v = float(struct.unpack("<f", struct.pack("<f", v))[0]) if math.isfinite(v) else v
    return "0x%016X" % struct.unpack("<Q", struct.pack("<d", float(v)))[0]


class LLVMKernel:
    """The printed kernel: `text` (a module with one function `name` and its declarations),
    `slots` (per args entry: ("ptr", buf name) or ("dim", dim)), `math` (the math functions it
    calls: (name, dtype)), `libcalls` (window routines: (routine, dtype)), `blas` (dtypes of
    its gemm calls)."""

    def __init__(self, name: str, text: str, slots: list, math_fns: set, libcalls: set,
                 blas: set) -> None:
        self.name = name
        self.text = text
        self.slots = slots
        self.math = math_fns
        self.libcalls = libcalls
        self.blas = blas


class _Printer:
    def __init__(self, lk: LoopKernel, math_name, nnlib_symbol, vector_bytes: int = 0) -> None:
        self.lk = lk
        self.vector_bytes = vector_bytes    # 0: scalar loops only
        self.vvals: dict = {}               # Let name -> vector SSA text (in a vector loop)
        self.math_name = math_name          # (fn, dtype, lanes) -> LLVM function name
        self.nnlib_symbol = nnlib_symbol    # (routine, dtype) -> LLVM symbol
        self.entry: list = []
        self.body: list = []
        self.n = 0
        self.cur = "body"
        self.slots: list = []
        self.slot_of: dict = {}
        self.ptrs: dict = {}
        self.alias: dict = {}
        self.dims: dict = {}
        self.strides: dict = {}
        self.decls: set = set()
        self.vals: dict = {}       # Let / loop var name -> SSA text
        self.vars: dict = {}       # Var name -> (alloca, type)
        self.math_used: set = set()
        self.libcalls: set = set()
        self.blas: set = set()
        self.bufs: dict = {}

    # -- text ---------------------------------------------------------------------------------
    def tmp(self) -> str:
        self.n += 1
        return f"%v{self.n}"

    def label(self, p: str) -> str:
        self.n += 1
        return f"{p}{self.n}"

    def e(self, line: str) -> None:
        self.body.append("  " + line)

    def op(self, text: str) -> str:
        t = self.tmp()
        self.e(f"{t} = {text}")
        return t

    def block(self, lab: str) -> None:
        self.body.append(f"{lab}:")
        self.cur = lab

    def alloca(self, ty: str) -> str:
        self.n += 1
        t = f"%a{self.n}"
        self.entry.append(f"  {t} = alloca {ty}")
        return t

    def _slot(self, key) -> int:
        i = self.slot_of.get(key)
        if i is None:
            i = self.slot_of[key] = len(self.slots)
            self.slots.append(key)
        return i

    def dim(self, d) -> str:
        """i64 text of symbolic dim `d` (loaded once, in the entry block)."""
        if d == 1:
            return "1"
        if d[0] == "const":
            return str(int(d[1]))
        t = self.dims.get(d)
        if t is None:
            i = self._slot(("dim", d))
            self.n += 1
            p, t = f"%da{self.n}", f"%d{self.n}"
            self.entry.append(f"  {p} = getelementptr i64, ptr %args, i64 {i}")
            self.entry.append(f"  {t} = load i64, ptr {p}")
            self.dims[d] = t
        return t

    def ptr(self, b: Buf) -> str:
        while b.name in self.alias:
            b = self.alias[b.name]
        t = self.ptrs.get(b.name)
        if t is None:
            if b.kind == "scratch":
                n = int(b.dims[0][1]) if b.dims[0] != 1 else 1
                t = self.alloca(f"[{n} x {_STORE[b.dtype]}]")
                self.ptrs[b.name] = t
                return t
            self.bufs.setdefault(b.name, b)
            i = self._slot(("ptr", b.name))
            self.n += 1
            p, q, t = f"%pa{self.n}", f"%pi{self.n}", f"%p{self.n}"
            self.entry.append(f"  {p} = getelementptr i64, ptr %args, i64 {i}")
            self.entry.append(f"  {q} = load i64, ptr {p}")
            self.entry.append(f"  {t} = inttoptr i64 {q} to ptr")
            self.ptrs[b.name] = t
        return t

    def stride(self, b: Buf, k: int) -> str:
        """Elements between consecutive positions along axis k of C-contiguous `b`."""
        key = (b.name, k)
        s = self.strides.get(key)
        if s is None:
            s = "1"
            for j in range(k + 1, b.rank):
                if b.ones[j]:
                    continue
                d = self.dim(b.dims[j])
                if s == "1":
                    s = d
                else:
                    self.n += 1
                    t = f"%s{self.n}"
                    self.entry.append(f"  {t} = mul i64 {s}, {d}")
                    s = t
            self.strides[key] = s
        return s

    # -- memory -------------------------------------------------------------------------------
    def offset(self, b: Buf, index: list, flat: bool) -> str:
        if flat:
            return self.x(index[0])
        off = "0"
        for k in range(b.rank):
            if b.ones[k]:
                continue
            i = self.x(index[k])
            if i == "0":
                continue
            s = self.stride(b, k)
            term = i if s == "1" else self.op(f"mul i64 {i}, {s}")
            off = term if off == "0" else self.op(f"add i64 {off}, {term}")
        return off

    def addr(self, b: Buf, off: str) -> str:
        base = self.ptr(b)
        if off == "0":
            return base
        return self.op(f"getelementptr {_STORE[b.dtype]}, ptr {base}, i64 {off}")

    def load(self, b: Buf, index: list, flat: bool) -> str:
        st = _STORE[b.dtype]
        x = self.op(f"load {st}, ptr {self.addr(b, self.offset(b, index, flat))}")
        if b.dtype == "bool":
            return self.op(f"icmp ne i8 {x}, 0")
        if st != "i64" and b.dtype not in FLOATS:
            ext = "zext" if b.dtype.startswith("u") else "sext"
            return self.op(f"{ext} {st} {x} to i64")
        return x

    def store(self, b: Buf, index: list, flat: bool, val: str, dt: str) -> None:
        st = _STORE[b.dtype]
        if b.dtype == "bool":
            val = self.op(f"zext i1 {val} to i8")
        elif b.dtype in FLOATS:
            if dt != b.dtype:
                raise Unsupported(f"store of {dt} into {b.dtype}")
        elif st != "i64":
            val = self.op(f"trunc i64 {val} to {st}")
        self.e(f"store {st} {val}, ptr {self.addr(b, self.offset(b, index, flat))}")

    # -- expressions --------------------------------------------------------------------------
    def x(self, e) -> str:
        if isinstance(e, Lit):
            if e.dt in FLOATS:
                return _fconst(e.value, e.dt)
            if e.dt == "bool":
                return "true" if e.value else "false"
            return str(int(e.value))
        if isinstance(e, Local):
            v = self.vals.get(e.name)
            if v is not None:
                return v
            slot = self.vars.get(e.name)
            if slot is None:
                raise Unsupported(f"local {e.name} used outside its scope")
            return self.op(f"load {slot[1]}, ptr {slot[0]}")
        if isinstance(e, DimOf):
            return self.dim(e.dim)
        if isinstance(e, Load):
            return self.load(e.buf, e.index, e.flat)
        assert isinstance(e, Prim), e
        return self.prim(e)

    def prim(self, e: Prim) -> str:
        op, args, dt = e.op, e.args, e.dt
        if op in _FBIN:
            return self.op(f"{op} {_FT[dt]} {self.x(args[0])}, {self.x(args[1])}")
        if op == "fneg":
            return self.op(f"fneg {_FT[dt]} {self.x(args[0])}")
        if op in _IBIN:
            return self.op(f"{op} i64 {self.x(args[0])}, {self.x(args[1])}")
        if op in _LBIN:
            return self.op(f"{op} i1 {self.x(args[0])}, {self.x(args[1])}")
        if op == "not":
            return self.op(f"xor i1 {self.x(args[0])}, true")
        if op == "select":
            c, a, b = (self.x(v) for v in args)
            t = _REG[dt]
            return self.op(f"select i1 {c}, {t} {a}, {t} {b}")
        if op.startswith("fcmp."):
            return self.op(f"fcmp {op[5:]} {_FT[args[0].dt]} {self.x(args[0])}, "
                           f"{self.x(args[1])}")
        if op.startswith("icmp."):
            t = _REG[args[0].dt]
            return self.op(f"icmp {op[5:]} {t} {self.x(args[0])}, {self.x(args[1])}")
        if op in _X:
            suffix = "f32" if dt == "float32" else "f64"
            ft = _FT[dt]
            fn = f"llvm.{op}.{suffix}"
            self.decls.add(f"declare {ft} @{fn}({', '.join([ft] * len(args))})")
            vals = ", ".join(f"{ft} {self.x(a)}" for a in args)
            return self.op(f"call {ft} @{fn}({vals})")
        if op.startswith("libm."):
            name = op[5:] + ("f" if dt == "float32" else "")
            ft = _FT[dt]
            self.decls.add(f"declare {ft} @{name}({', '.join([ft] * len(args))})")
            vals = ", ".join(f"{ft} {self.x(a)}" for a in args)
            return self.op(f"call {ft} @{name}({vals})")
        if op in ("exp", "log", "tanh", "sigmoid", "log1p", "expm1", "pow"):
            fn = self.math_name(op, dt, 0)
            self.math_used.add((op, dt, 0))
            ft = _FT[dt]
            self.decls.add(f"declare {ft} @{fn}({', '.join([ft] * len(args))})")
            vals = ", ".join(f"{ft} {self.x(a)}" for a in args)
            return self.op(f"call {ft} @{fn}({vals})")
        return self.conversion(op, args[0], dt)

    def conversion(self, op: str, a, dt: str) -> str:
        return self.convert(op, a.dt, dt, self.x(a), 0)

    def convert(self, op: str, fr: str, dt: str, v: str, lanes: int) -> str:
        """A conversion of `v` (dtype `fr`) to `dt`, of scalars (lanes 0) or `<lanes x T>`
        vectors."""
        def w(t: str) -> str:
            return f"<{lanes} x {t}>" if lanes else t
        zero = "zeroinitializer" if lanes else ("0.0" if fr in FLOATS else "0")
        if op == "fpext":
            return self.op(f"fpext {w('float')} {v} to {w('double')}")
        if op == "fptrunc":
            return self.op(f"fptrunc {w('double')} {v} to {w('float')}")
        if op == "sitofp":
            return self.op(f"sitofp {w('i64')} {v} to {w(_FT.get(dt, 'double'))}")
        if op == "uitofp":
            return self.op(f"uitofp {w('i1')} {v} to {w(_FT.get(dt, 'double'))}")
        if op == "fptosi":
            return self.op(f"fptosi {w(_REG[fr])} {v} to {w('i64')}")
        if op == "zext":
            return self.op(f"zext {w('i1')} {v} to {w('i64')}")
        if op == "tobool":
            if fr in FLOATS:
                return self.op(f"fcmp une {w(_REG[fr])} {v}, {zero}")
            return self.op(f"icmp ne {w('i64')} {v}, {zero}")
        kind, bits = op.split(".")
        ext = "sext" if kind in ("fptosi", "wrap") else "zext"
        if kind in ("fptosi", "fptoui"):
            t = self.op(f"{kind} {w(_REG[fr])} {v} to {w('i' + bits)}")
        else:
            t = self.op(f"trunc {w('i64')} {v} to {w('i' + bits)}")
        return self.op(f"{ext} {w('i' + bits)} {t} to {w('i64')}")

    # -- statements ---------------------------------------------------------------------------
    def stmts(self, ss: list) -> None:
        for s in ss:
            self.stmt(s)

    def stmt(self, s) -> None:
        if isinstance(s, Let):
            self.vals[s.name] = self.x(s.expr)
        elif isinstance(s, Var):
            t = _REG[s.dt]
            slot = self.alloca(t)
            self.vars[s.name] = (slot, t)
            self.e(f"store {t} {self.x(s.init)}, ptr {slot}")
        elif isinstance(s, Set):
            slot, t = self.vars[s.name]
            self.e(f"store {t} {self.x(s.expr)}, ptr {slot}")
        elif isinstance(s, Store):
            self.store(s.buf, s.index, s.flat, self.x(s.expr), s.expr.dt)
        elif isinstance(s, For):
            self.loop(s)
        elif isinstance(s, If):
            self.cond(s)
        elif isinstance(s, Fail):
            self.e(f"ret i32 {s.code}")
            self.block(self.label("dead"))   # instructions after a return need a block
        elif isinstance(s, Alloc):
            if s.buf.kind == "scratch":
                self.ptr(s.buf)
        elif isinstance(s, View):
            src = s.src
            while src.name in self.alias:
                src = self.alias[src.name]
            self.alias[s.out.name] = src
        elif isinstance(s, Copy):
            n = self.size(s.src)
            nb = self.op(f"mul i64 {n}, {_SIZE[s.src.dtype]}")
            self.decls.add("declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)")
            self.e(f"call void @llvm.memcpy.p0.p0.i64(ptr {self.ptr(s.out)}, "
                   f"ptr {self.ptr(s.src)}, i64 {nb}, i1 false)")
        elif isinstance(s, Call):
            self.call(s)
        else:  # pragma: no cover
            raise Unsupported(f"statement {type(s).__name__}")

    def size(self, b: Buf) -> str:
        s = "1"
        for d, one in zip(b.dims, b.ones):
            if one:
                continue
            dd = self.dim(d)
            s = dd if s == "1" else self.op(f"mul i64 {s}, {dd}")
        return s

    def loop(self, s: For, start: str = None) -> None:
        lanes = self.vector_lanes(s) if start is None else 0
        if lanes:
            self.vector_loop(s, lanes)
            return
        start = self.x(s.start) if start is None else start
        stop = self.x(s.stop)
        pre = self.cur
        h, b, x = self.label("h"), self.label("b"), self.label("x")
        i, nxt = self.tmp(), self.tmp()
        self.e(f"br label %{h}")
        self.block(h)
        at = len(self.body)
        self.body.append(None)   # the phi, once the latch block is known
        c = self.op(f"icmp slt i64 {i}, {stop}")
        self.e(f"br i1 {c}, label %{b}, label %{x}")
        self.block(b)
        saved = dict(self.vals)
        self.vals[s.var] = i
        self.stmts(s.body)
        self.vals = saved
        self.e(f"{nxt} = add i64 {i}, {s.step}")
        latch = self.cur
        self.e(f"br label %{h}")
        self.body[at] = f"  {i} = phi i64 [{start}, %{pre}], [{nxt}, %{latch}]"
        self.block(x)

    # -- vector loops -------------------------------------------------------------------------
    def vector_lanes(self, s: For) -> int:
        """How many iterations of `s` to print as one vector iteration (0: print it scalar)."""
        if not self.vector_bytes or s.step != 1 or not s.body:
            return 0
        kinds: dict = {s.var: ("a", 1)}
        stored: dict = {}
        loads: list = []
        widest = 0
        for t in s.body:
            if not isinstance(t, (Let, Store)):
                return 0
            k = self._vkind(t.expr, kinds, loads)
            if k is None:
                return 0
            widest = max(widest, self._width_of(t.expr, kinds))
            if isinstance(t, Let):
                kinds[t.name] = k
                continue
            if self._access(t.buf, t.index, t.flat, kinds) != "v":
                return 0
            base, key = self._base(t.buf).name, _access_key(t.buf, t.index, t.flat)
            if stored.setdefault(base, key) != key:
                return 0
            widest = max(widest, _SIZE[t.buf.dtype])
        for ld in loads:   # a buffer the loop writes is read only at the element written
            key = stored.get(self._base(ld.buf).name)
            if key is not None and key != _access_key(ld.buf, ld.index, ld.flat):
                return 0
        lanes = self.vector_bytes // max(widest, 1)
        return lanes if lanes >= 2 else 0

    def _base(self, b: Buf) -> Buf:
        while b.name in self.alias:
            b = self.alias[b.name]
        return b

    def _width_of(self, e, kinds: dict) -> int:
        """The widest vector element (bytes) expression `e` computes with (0: no vector)."""
        if self._ikind(e, kinds) != ("v",):
            return 0
        w = 8 if e.dt in ("float64", "int64") else 4 if e.dt == "float32" else 1
        if isinstance(e, Prim):
            for a in e.args:
                w = max(w, self._width_of(a, kinds))
        elif isinstance(e, Load):
            w = max(w, _SIZE[e.buf.dtype])
        return w

    def _access(self, b: Buf, index: list, flat: bool, kinds: dict):
        """"u": the same element every iteration, "v": consecutive elements, None: other."""
        if flat:
            k = self._ikind(index[0], kinds)
            return "u" if k == ("u",) else "v" if k == ("a", 1) else None
        moving = [j for j in range(b.rank) if not b.ones[j]
                  and self._ikind(index[j], kinds) != ("u",)]
        if not moving:
            return "u"
        j = moving[0]
        if len(moving) > 1 or self._ikind(index[j], kinds) != ("a", 1):
            return None
        # the moving index must be the innermost dim that is not 1
        return "v" if all(b.ones[q] for q in range(j + 1, b.rank)) else None

    def _ikind(self, e, kinds: dict):
        return self._vkind(e, kinds, [])

    def _vkind(self, e, kinds: dict, loads: list):
        """How `e` varies with the loop variable: ("u",) not at all, ("a", c) an int64 that
        grows by c per iteration, ("v",) otherwise (a vector value); None: not printable as
        a vector (a call that has no vector form on varying operands, a gather)."""
        if isinstance(e, (Lit, DimOf)):
            return ("u",)
        if isinstance(e, Local):
            return kinds.get(e.name, ("u",))   # a Let or Var from outside the loop: uniform
        if isinstance(e, Load):
            loads.append(e)
            for i in e.index:
                if self._vkind(i, kinds, loads) is None:
                    return None
            a = self._access(e.buf, e.index, e.flat, kinds)
            if a is None or (e.buf.dtype not in _SIZE or e.buf.dtype == "uint64"):
                return None
            return ("u",) if a == "u" else ("v",)
        assert isinstance(e, Prim), e
        ks = [self._vkind(a, kinds, loads) for a in e.args]
        if any(k is None for k in ks):
            return None
        if all(k == ("u",) for k in ks):
            return ("u",)
        op = e.op
        if op in ("add", "sub") and all(k[0] in "ua" for k in ks):
            c = [k[1] if k[0] == "a" else 0 for k in ks]
            return ("a", c[0] + c[1] if op == "add" else c[0] - c[1])
        if op == "mul" and all(k[0] in "ua" for k in ks):
            for k, other in ((ks[0], e.args[1]), (ks[1], e.args[0])):
                if k[0] == "a" and isinstance(other, Lit):
                    return ("a", k[1] * int(other.value))
        if op.startswith("libm."):
            return None
        if op in ("exp", "log", "tanh", "sigmoid", "log1p", "expm1", "pow"):
            return ("v",)
        return ("v",)

    def vector_loop(self, s: For, lanes: int) -> None:
        """`s` as a loop over `lanes` iterations at a time, then the rest one at a time."""
        start, stop = self.x(s.start), self.x(s.stop)
        last = self.op(f"sub i64 {stop}, {lanes - 1}")
        pre = self.cur
        h, b, x = self.label("h"), self.label("b"), self.label("x")
        i, nxt = self.tmp(), self.tmp()
        self.e(f"br label %{h}")
        self.block(h)
        at = len(self.body)
        self.body.append(None)
        c = self.op(f"icmp slt i64 {i}, {last}")
        self.e(f"br i1 {c}, label %{b}, label %{x}")
        self.block(b)
        saved, vsaved = dict(self.vals), dict(self.vvals)
        kinds: dict = {s.var: ("a", 1)}
        self.vals[s.var] = i
        self.vkinds = kinds
        self.lanes = lanes
        for t in s.body:
            k = self._ikind(t.expr, kinds)
            if isinstance(t, Let):
                kinds[t.name] = k
                if k[0] in "ua":
                    self.vals[t.name] = self.x(t.expr)     # the value of lane 0
                else:
                    self.vvals[t.name] = self.vx(t.expr)
                continue
            self.vstore(t.buf, t.index, t.flat, self.vx(t.expr), t.expr.dt)
        self.vals, self.vvals = saved, vsaved
        self.e(f"{nxt} = add i64 {i}, {lanes}")
        latch = self.cur
        self.e(f"br label %{h}")
        self.body[at] = f"  {i} = phi i64 [{start}, %{pre}], [{nxt}, %{latch}]"
        self.block(x)
        self.loop(s, start=i)   # the remaining iterations

    def vty(self, dt: str) -> str:
        return f"<{self.lanes} x {_REG[dt]}>"

    def splat(self, v: str, ty: str) -> str:
        vt = f"<{self.lanes} x {ty}>"
        t = self.op(f"insertelement {vt} poison, {ty} {v}, i64 0")
        return self.op(f"shufflevector {vt} {t}, {vt} poison, <{self.lanes} x i32> "
                       "zeroinitializer")

    def vx(self, e) -> str:
        """The vector of `e`'s values in the lanes of this iteration."""
        k = self._ikind(e, self.vkinds)
        if k[0] == "u":
            if isinstance(e, Lit):
                return f"splat ({_REG[e.dt]} {self.x(e)})"
            return self.splat(self.x(e), _REG[e.dt])
        if k[0] == "a":   # lane j: lane 0's value + j * c
            base = self.splat(self.x(e), "i64")
            step = ", ".join(f"i64 {j * k[1]}" for j in range(self.lanes))
            return self.op(f"add <{self.lanes} x i64> {base}, <{step}>")
        if isinstance(e, Local):
            return self.vvals[e.name]
        if isinstance(e, Load):
            return self.vload(e.buf, e.index, e.flat)
        return self.vprim(e)

    def vload(self, b: Buf, index: list, flat: bool) -> str:
        st = _STORE[b.dtype]
        vt = f"<{self.lanes} x {st}>"
        addr = self.addr(b, self.offset(b, index, flat))
        x = self.op(f"load {vt}, ptr {addr}, align {_SIZE[b.dtype]}")
        if b.dtype == "bool":
            return self.op(f"icmp ne {vt} {x}, zeroinitializer")
        if st != "i64" and b.dtype not in FLOATS:
            ext = "zext" if b.dtype.startswith("u") else "sext"
            return self.op(f"{ext} {vt} {x} to <{self.lanes} x i64>")
        return x

    def vstore(self, b: Buf, index: list, flat: bool, val: str, dt: str) -> None:
        st = _STORE[b.dtype]
        L = self.lanes
        if b.dtype == "bool":
            val = self.op(f"zext <{L} x i1> {val} to <{L} x i8>")
        elif b.dtype in FLOATS:
            if dt != b.dtype:
                raise Unsupported(f"store of {dt} into {b.dtype}")
        elif st != "i64":
            val = self.op(f"trunc <{L} x i64> {val} to <{L} x {st}>")
        addr = self.addr(b, self.offset(b, index, flat))
        self.e(f"store <{L} x {st}> {val}, ptr {addr}, align {_SIZE[b.dtype]}")

    def vprim(self, e: Prim) -> str:
        op, args, dt = e.op, e.args, e.dt
        L = self.lanes
        vt = self.vty(dt)
        if op in _FBIN or op in _IBIN:
            return self.op(f"{op} {vt} {self.vx(args[0])}, {self.vx(args[1])}")
        if op == "fneg":
            return self.op(f"fneg {vt} {self.vx(args[0])}")
        if op in _LBIN:
            return self.op(f"{op} {vt} {self.vx(args[0])}, {self.vx(args[1])}")
        if op == "not":
            return self.op(f"xor {vt} {self.vx(args[0])}, splat (i1 true)")
        if op == "select":
            c, a, b = (self.vx(v) for v in args)
            return self.op(f"select <{L} x i1> {c}, {vt} {a}, {vt} {b}")
        if op.startswith("fcmp.") or op.startswith("icmp."):
            at = self.vty(args[0].dt)
            return self.op(f"{op[:4]} {op[5:]} {at} {self.vx(args[0])}, {self.vx(args[1])}")
        if op in _X or op in ("exp", "log", "tanh", "sigmoid", "log1p", "expm1", "pow"):
            if op in _X:
                fn = f"llvm.{op}.v{L}{'f32' if dt == 'float32' else 'f64'}"
            else:
                fn = self.math_name(op, dt, L)
                self.math_used.add((op, dt, L))
            self.decls.add(f"declare {vt} @{fn}({', '.join([vt] * len(args))})")
            vals = ", ".join(f"{vt} {self.vx(a)}" for a in args)
            return self.op(f"call {vt} @{fn}({vals})")
        return self.vconversion(op, args[0], dt)

    def vconversion(self, op: str, a, dt: str) -> str:
        return self.convert(op, a.dt, dt, self.vx(a), self.lanes)

    def cond(self, s: If) -> None:
        c = self.x(s.cond)
        t, j = self.label("t"), self.label("j")
        f = self.label("f") if s.orelse else j
        self.e(f"br i1 {c}, label %{t}, label %{f}")
        self.block(t)
        saved = dict(self.vals)
        self.stmts(s.then)
        self.vals = dict(saved)
        self.e(f"br label %{j}")
        if s.orelse:
            self.block(f)
            self.stmts(s.orelse)
            self.vals = saved
            self.e(f"br label %{j}")
        self.block(j)

    def call(self, s: Call) -> None:
        if s.fn == "gemm":
            self.gemm(*s.args)
            return
        if s.fn.startswith("nnlib."):
            self.nnlib(s.fn[6:], *s.args)
            return
        raise Unsupported(f"library call {s.fn}")

    def gemm(self, ta: bool, tb: bool, m, n, k, a: Buf, b: Buf, out: Buf) -> None:
        """out (m x n, row-major) = op(a) op(b) as the column-major product
        out^T = op(b)^T op(a)^T: one ?gemm call (mathlib.gemm_call's arguments)."""
        dt = out.dtype
        self.blas.add(dt)
        name = "jitflow_sgemm" if dt == "float32" else "jitflow_dgemm"
        ft = _FT[dt]
        self.decls.add(f"declare void @{name}(ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, "
                       "ptr, ptr, ptr)")
        m, n, k = self.x(m), self.x(n), self.x(k)
        mz = self.op(f"icmp eq i64 {m}, 0")
        nz = self.op(f"icmp eq i64 {n}, 0")
        empty = self.op(f"or i1 {mz}, {nz}")
        kz = self.op(f"icmp eq i64 {k}, 0")
        go, zero, done, chk = (self.label("mm"), self.label("mz"), self.label("md"),
                               self.label("mc"))
        self.e(f"br i1 {empty}, label %{done}, label %{chk}")
        self.block(chk)
        self.e(f"br i1 {kz}, label %{zero}, label %{go}")
        self.block(zero)
        size = self.op(f"mul i64 {m}, {n}")
        base = self.ptr(out)
        pre = self.cur
        h, bb, x = self.label("h"), self.label("b"), self.label("x")
        i, nxt = self.tmp(), self.tmp()
        self.e(f"br label %{h}")
        self.block(h)
        self.e(f"{i} = phi i64 [0, %{pre}], [{nxt}, %{bb}]")
        c = self.op(f"icmp slt i64 {i}, {size}")
        self.e(f"br i1 {c}, label %{bb}, label %{x}")
        self.block(bb)
        p = self.op(f"getelementptr {ft}, ptr {base}, i64 {i}")
        self.e(f"store {ft} 0.0, ptr {p}")
        self.e(f"{nxt} = add i64 {i}, 1")
        self.e(f"br label %{h}")
        self.block(x)
        self.e(f"br label %{done}")
        self.block(go)

        def i32(v):
            slot = self.alloca("i32")
            t = self.op(f"trunc i64 {v} to i32")
            self.e(f"store i32 {t}, ptr {slot}")
            return slot

        def ch(c):
            slot = self.alloca("i8")
            self.e(f"store i8 {ord(c)}, ptr {slot}")
            return slot
        ldb = k if tb else n
        lda = m if ta else k
        al, be = self.alloca(ft), self.alloca(ft)
        self.e(f"store {ft} {_fconst(1.0, dt)}, ptr {al}")
        self.e(f"store {ft} 0.0, ptr {be}")
        args = [ch("T" if tb else "N"), ch("T" if ta else "N"), i32(n), i32(m), i32(k), al,
                self.ptr(b), i32(ldb), self.ptr(a), i32(lda), be, base, i32(n)]
        self.e(f"call void @{name}({', '.join('ptr ' + v for v in args)})")
        self.e(f"br label %{done}")
        self.block(done)

    def nnlib(self, fn: str, ins: list, outs: list, params: list) -> None:
        """A window routine through its C entry point (nnlib_c.py): data pointer and 4 sizes
        per array, then the int parameters."""
        arrays = list(ins) + list(outs)
        dt = arrays[0].dtype
        if any(v.dtype != dt or v.rank != 4 for v in arrays):
            raise Unsupported(f"library call {fn}")
        self.libcalls.add((fn, dt))
        name = self.nnlib_symbol(fn, dt)
        self.decls.add(f"declare void @{name}({', '.join(['ptr'] * 9)})")
        args = []
        for v in arrays:
            sizes = self.alloca("[4 x i64]")
            for j in range(4):
                d = "1" if v.ones[j] else self.dim(v.dims[j])
                q = self.op(f"getelementptr [4 x i64], ptr {sizes}, i64 0, i64 {j}")
                self.e(f"store i64 {d}, ptr {q}")
            args += [self.ptr(v), sizes]
        args += ["null", "null"] * (4 - len(arrays))
        ps = self.alloca(f"[{len(params)} x i64]")
        for j, p in enumerate(params):
            q = self.op(f"getelementptr [{len(params)} x i64], ptr {ps}, i64 0, i64 {j}")
            self.e(f"store i64 {int(p)}, ptr {q}")
        args.append(ps)
        self.e(f"call void @{name}({', '.join('ptr ' + a for a in args)})")

    # -- the function -------------------------------------------------------------------------
    def function(self, name: str) -> LLVMKernel:
        lk = self.lk
        for b in lk.inputs:
            if b.rank == 0:
                # a rank-0 input: its value, read once
                self.vals[b.name] = self.load(b, [], False)
        self.stmts(lk.body)
        for i, dt in lk.scalar_results:
            # rank-0 results: into the 0-d arrays the caller passes
            r = lk.results[i]
            val = self.x(r)
            self.store(Buf(f"r{i}", "tmp", -1, dt, (), ()), [], False,
                       _narrowed(val, r.dt, dt, self), dt)
        self.e("ret i32 0")
        lines = [f"define i32 @{name}(ptr noalias %args) nounwind {{", "entry:"]
        lines += self.entry
        lines.append("  br label %body")
        lines.append("body:")
        lines += self.body
        lines.append("}")
        text = "\n".join(sorted(self.decls) + [""] + lines) + "\n"
        return LLVMKernel(name, text, self.slots, self.math_used, self.libcalls, self.blas)


def _key(e):
    """A structural key of an expression (or a list of them): equal keys, equal values."""
    if isinstance(e, list):
        return tuple(_key(x) for x in e)
    if isinstance(e, Lit):
        return ("lit", e.dt, e.value)
    if isinstance(e, Local):
        return ("local", e.name)
    if isinstance(e, DimOf):
        return ("dim", e.dim)
    if isinstance(e, Load):
        return ("load", e.buf.name, e.flat, _key(e.index))
    return (e.op, e.dt, _key(e.args))


def _access_key(b: Buf, index: list, flat: bool):
    """Equal keys, the same element: a flat index names an element of any view of the
    memory; a per-dim index only of this buffer's dims."""
    return (True, _key(index)) if flat else (False, b.name, _key(index))


def _narrowed(val: str, reg: str, dtype: str, p: "_Printer") -> str:
    """A register value of type `reg` as stored into a `dtype` element (floats convert)."""
    if dtype in FLOATS and reg != dtype:
        return p.op(f"{'fptrunc double' if dtype == 'float32' else 'fpext float'} {val} to "
                    f"{_FT[dtype]}")
    return val


def print_llvm(lk: LoopKernel, name: str, math_name, nnlib_symbol,
               vector_bytes: int = 0) -> LLVMKernel:
    """`lk` as LLVM IR: function `name`; `math_name(fn, dtype, lanes)` names jitflow's math
    functions (the caller links their IR in), `nnlib_symbol(routine, dtype)` the window
    routines'. `vector_bytes`: the width of the host's vectors (0: no loop is printed
    vectorized)."""
    return _Printer(lk, math_name, nnlib_symbol, vector_bytes).function(name)
