"""Native CPython entry points for the fast path's LLVM kernels (llvmjit.py).

A kernel is `i32 kernel(i64 *args)` (data pointers and dims: llvmgen.py). Its callable
`fn(ins, vs) -> tuple` is a builtin made here, with what llvmjit's Python wrapper does done in
native code: check the operands, evaluate the symbolic dims, run the dim checks, allocate the
buffers, call the kernel, turn its error codes into `ValueError("jitflow:<op>:<what>")` and
return the results (numpy scalars at rank 0). One `METH_FASTCALL` function written as LLVM IR
is compiled once per process; it reads a per-kernel *descriptor* (int64 words, the builtin's
`self`) saying what to do. Why: a warm `Session.run` of a tiny graph cost ~10 us through the
Python wrapper and ctypes; the entry costs well under a microsecond.

Two functions read a descriptor: `jf_call` (a kernel's `fn`: an operand it does not take goes
to the Python wrapper, so the convention holds for any argument) and `jf_try` (the warm
runners': None instead, and rank-0 inputs also take Python and numpy scalars, converted as
`np.asarray(v, dtype)` does). The kernel's address is read through a cell, so optimized code
replaces quick code without a new entry (`swap`).

Every CPython / numpy struct offset and C-API table index the IR relies on is checked against
live objects once per process, and the compiled entry runs a self-test; on any difference
`available()` is False and kernels keep the Python wrapper (fail closed).
"""
from __future__ import annotations

import ctypes
import struct
import sys
import threading

import numpy as np

from jitflow.compiler.loops import Buf, Lit, Unsupported

__all__ = ["available", "warm_up", "layout_of", "build", "try_variant", "swap", "is_native",
           "info", "Layout", "Descriptor", "Unsupported", "NOGIL_MIN"]

ERROR_PREFIX = "jitflow:"
#: kernels whose operands and buffers hold at least this many elements run without the GIL
NOGIL_MIN = 1 << 15

# -- CPython / numpy layout (every value checked by `_verify`) -----------------------------------
OB_TYPE = 8            # PyObject.ob_type
TUPLE_SIZE = 16        # PyVarObject.ob_size
TUPLE_ITEMS = 24       # PyTupleObject.ob_item[0]
FLOAT_VAL = 16         # PyFloatObject.ob_fval, and every numpy scalar's obval
ARR_DATA = 16          # PyArrayObject_fields.data
ARR_ND = 24            # .nd (int)
ARR_DIMS = 32          # .dimensions
ARR_STRIDES = 40       # .strides
ARR_DESCR = 56         # .descr
ARR_FLAGS = 64         # .flags (int)
DESCR_TYPEOBJ = 16     # PyArray_Descr.typeobj
DESCR_KIND = 24        # .kind (char)
DESCR_BYTEORDER = 26   # .byteorder (char)
DESCR_TYPE_NUM = 28    # .type_num (int)
DESCR_ELSIZE = 40      # .elsize (npy_intp, numpy 2)
C_CONTIGUOUS, F_CONTIGUOUS, ALIGNED, WRITEABLE = 0x1, 0x2, 0x100, 0x400
# numpy's _ARRAY_API table (numpy/_core/include/numpy/__multiarray_api.h)
API_CVERSION, API_NDARRAY, API_DESCR_TYPE, API_DESCR_FROM_TYPE = 0, 2, 3, 45
API_SCALAR, API_NEWCOPY, API_NEWSHAPE, API_EMPTY, API_FEATURE_VERSION = 60, 85, 135, 184, 211
NPY_ABI_2 = 0x02000000
NPY_2_0_API = 0x12
METH_FASTCALL = 0x80

# dtype name -> (LLVM type of an element, which Python scalars a rank-0 input takes)
_DTYPES = {
    "bool": ("i8", "bool"), "int8": ("i8", "int"), "int16": ("i16", "int"),
    "int32": ("i32", "int"), "int64": ("i64", "int"), "uint8": ("i8", "int"),
    "uint16": ("i16", "int"), "uint32": ("i32", "int"), "uint64": ("i64", "int"),
    "float32": ("float", "float"), "float64": ("double", "float"),
}
_EXACT_INT = 2 ** 53   # Python ints up to this magnitude convert to float64 exactly
_CPY_FUNCS = ("PyTuple_New", "PyErr_SetString", "Py_IncRef", "Py_DecRef",
              "PyLong_AsLongLongAndOverflow", "PyObject_Vectorcall", "PyEval_SaveThread",
              "PyEval_RestoreThread")


class _MethodDef(ctypes.Structure):
    _fields_ = [("ml_name", ctypes.c_char_p), ("ml_meth", ctypes.c_void_p),
                ("ml_flags", ctypes.c_int), ("ml_doc", ctypes.c_char_p)]


class _Dims(ctypes.Structure):      # numpy's PyArray_Dims
    _fields_ = [("ptr", ctypes.c_void_p), ("len", ctypes.c_int)]


def _api(name: str, restype, argtypes):
    f = getattr(ctypes.pythonapi, name)
    f.restype = restype
    f.argtypes = argtypes
    return f


def _i64(addr: int) -> int:
    return ctypes.c_int64.from_address(addr).value


def _i32(addr: int) -> int:
    return ctypes.c_int32.from_address(addr).value


def _u8(addr: int) -> int:
    return ctypes.c_uint8.from_address(addr).value


def _need(cond: bool, what: str) -> None:
    if not cond:
        raise Unsupported(f"layout check failed: {what} (CPython {sys.version.split()[0]}, "
                          f"numpy {np.__version__})")


def _verify() -> dict:
    """Check every offset and table index the IR uses against live objects; the addresses the
    IR calls and compares with. Values are compared before a pointer read from a checked
    field is followed, so a wrong offset fails a check instead of crashing."""
    _need(sys.byteorder == "little" and struct.calcsize("P") == 8, "64-bit little endian")
    _need(not hasattr(sys, "gettotalrefcount"), "a release build of CPython")
    gil = getattr(sys, "_is_gil_enabled", None)
    _need(gil is None or gil(), "a CPython with the GIL")
    _need(sys.implementation.name == "cpython", "CPython")
    for obj in (1.5, (1, 2), "x", np.zeros(2)):
        _need(_i64(id(obj) + OB_TYPE) == id(type(obj)), "PyObject.ob_type")
    t = (object(), 2.5, None)
    _need(_i64(id(t) + TUPLE_SIZE) == 3, "tuple ob_size")
    _need(all(_i64(id(t) + TUPLE_ITEMS + 8 * i) == id(x) for i, x in enumerate(t)),
          "tuple ob_item")
    f = 1.25e-3 * len(t)
    _need(ctypes.c_double.from_address(id(f) + FLOAT_VAL).value == f, "float ob_fval")
    for name in _DTYPES:
        dt = np.dtype(name)
        v = dt.type(1) if name == "bool" else dt.type(7)
        _need(ctypes.string_at(id(v) + FLOAT_VAL, dt.itemsize) == np.array(v, dt).tobytes(),
              f"numpy scalar obval of {name}")
    _need(np.ndarray.__basicsize__ >= ARR_FLAGS + 4, "ndarray size")
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    ro = base.copy()
    ro.flags.writeable = False
    raw = np.zeros(17, np.uint8)
    cases = [base, base.T, base[:, ::2], ro, np.zeros((), np.float64), raw[1:].view(np.float64),
             np.zeros((0, 3), np.int32), np.asfortranarray(base)]
    _need(not cases[5].flags.aligned, "an unaligned test array")
    for a in cases:
        p = id(a)
        _need(_i64(p + ARR_DATA) == a.__array_interface__["data"][0], "ndarray data")
        _need(_i32(p + ARR_ND) == a.ndim, "ndarray nd")
        _need(_i64(p + ARR_DESCR) == id(a.dtype), "ndarray descr")
        fl = _i32(p + ARR_FLAGS)
        _need(bool(fl & C_CONTIGUOUS) == a.flags.c_contiguous
              and bool(fl & F_CONTIGUOUS) == a.flags.f_contiguous
              and bool(fl & ALIGNED) == a.flags.aligned
              and bool(fl & WRITEABLE) == a.flags.writeable, "ndarray flags")
        if a.ndim:
            dims, strides = _i64(p + ARR_DIMS), _i64(p + ARR_STRIDES)
            # numpy allocates an array's dims and strides as one block
            _need(dims != 0 and strides == dims + 8 * a.ndim, "ndarray dims / strides")
            _need(all(_i64(dims + 8 * k) == a.shape[k] for k in range(a.ndim)), "ndarray dims")
            _need(all(_i64(strides + 8 * k) == a.strides[k] for k in range(a.ndim)),
                  "ndarray strides")
    for name in list(_DTYPES) + [">f4", ">i8"]:
        dt = np.dtype(name)
        _need(type(dt).__basicsize__ >= DESCR_ELSIZE + 8, "descr size")
        p = id(dt)
        _need(_i64(p + DESCR_TYPEOBJ) == id(dt.type), f"descr typeobj of {name}")
        _need(_u8(p + DESCR_KIND) == ord(dt.kind), f"descr kind of {name}")
        _need(_u8(p + DESCR_BYTEORDER) == ord(dt.byteorder), f"descr byteorder of {name}")
        _need(_i32(p + DESCR_TYPE_NUM) == dt.num, f"descr type_num of {name}")
        _need(_i64(p + DESCR_ELSIZE) == dt.itemsize, f"descr elsize of {name}")
    # the API table
    from numpy._core import _multiarray_umath as mu
    cap = mu._ARRAY_API
    get_name = _api("PyCapsule_GetName", ctypes.c_char_p, [ctypes.py_object])
    get_ptr = _api("PyCapsule_GetPointer", ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p])
    table = get_ptr(cap, get_name(cap))
    _need(bool(table), "_ARRAY_API capsule")
    ent = (ctypes.c_void_p * (API_FEATURE_VERSION + 1)).from_address(table)
    version = ctypes.CFUNCTYPE(ctypes.c_uint)
    _need(version(ent[API_CVERSION])() == NPY_ABI_2, "numpy C ABI version 2")
    _need(version(ent[API_FEATURE_VERSION])() >= NPY_2_0_API, "numpy C API >= 2.0")
    _need(ent[API_NDARRAY] == id(np.ndarray), "PyArray_Type in the API table")
    _need(ent[API_DESCR_TYPE] == id(np.dtype), "PyArrayDescr_Type in the API table")
    obj = ctypes.py_object
    from_type = ctypes.PYFUNCTYPE(obj, ctypes.c_int)(ent[API_DESCR_FROM_TYPE])
    _need(from_type(np.dtype(np.float32).num) is np.dtype(np.float32), "DescrFromType")
    incref = _api("Py_IncRef", None, [obj])
    empty = ctypes.PYFUNCTYPE(obj, ctypes.c_int, ctypes.c_void_p, obj, ctypes.c_int)(
        ent[API_EMPTY])
    dims = (ctypes.c_int64 * 2)(3, 5)
    d = np.dtype(np.int16)
    incref(d)   # PyArray_Empty steals a reference to the descr
    a = empty(2, ctypes.addressof(dims), d, 0)
    _need(type(a) is np.ndarray and a.shape == (3, 5) and a.dtype is d
          and a.flags.c_contiguous and a.flags.writeable, "PyArray_Empty")
    scalar = ctypes.PYFUNCTYPE(obj, ctypes.c_void_p, obj, ctypes.c_void_p)(ent[API_SCALAR])
    val = ctypes.c_float(1.5)
    s = scalar(ctypes.addressof(val), np.dtype(np.float32), None)
    _need(type(s) is np.float32 and s == 1.5, "PyArray_Scalar")
    a[...] = np.arange(15).reshape(3, 5)
    copy = ctypes.PYFUNCTYPE(obj, obj, ctypes.c_int)(ent[API_NEWCOPY])(a, 0)
    _need(type(copy) is np.ndarray and copy is not a and copy.base is None
          and np.array_equal(copy, a) and copy.dtype is d, "PyArray_NewCopy")
    nd = (ctypes.c_int64 * 2)(5, 3)
    spec = _Dims(ctypes.addressof(nd), 2)
    view = ctypes.PYFUNCTYPE(obj, obj, ctypes.c_void_p, ctypes.c_int)(ent[API_NEWSHAPE])(
        a, ctypes.addressof(spec), 0)
    _need(type(view) is np.ndarray and view.shape == (5, 3) and view.base is a
          and np.array_equal(view.ravel(), a.ravel()), "PyArray_Newshape")
    addr = {}
    for n in _CPY_FUNCS:
        fn = getattr(ctypes.pythonapi, n, None)
        _need(fn is not None, f"CPython function {n}")
        addr[n] = ctypes.cast(fn, ctypes.c_void_p).value
    vcall = ctypes.PYFUNCTYPE(obj, obj, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)(
        addr["PyObject_Vectorcall"])
    items = (ctypes.py_object * 2)(3, 4)
    _need(vcall(lambda x, y: (x, y), ctypes.addressof(items), 2, None) == (3, 4),
          "PyObject_Vectorcall")
    addr.update(PyArray_Empty=ent[API_EMPTY], PyArray_Scalar=ent[API_SCALAR],
                PyArray_NewCopy=ent[API_NEWCOPY], PyArray_Newshape=ent[API_NEWSHAPE])
    return addr


# -- the IR ---------------------------------------------------------------------------------------
# Descriptor words (int64). Header:
H_CELL, H_NIN, H_NVS, H_ARGS, H_PROG, H_NPROG, H_MAKE, H_NMAKE = range(8)
H_SLOTS, H_NSLOTS, H_RES, H_NRES, H_ERRS, H_NERRS, H_FALLBACK, H_NOGIL = range(8, 16)
H_WORK, H_M_UNKNOWN, H_M_BIG, H_M_ZERO, H_PARMIN, H_LARGEST = range(16, 22)
HEADER = 22
# Tables (offsets in the header):
#   args   ARG_WORDS each: descr, rank, flag mask, type_num, other type_num, scalar helper
#          (jf_try only; 0: none), first dim register, known dims@ (-1: none; per dim -1 any,
#          -2 not 1, n >= 0 exactly n)
#   prog   PROG_WORDS each: (op, a, b, c) over dim registers, `_OPS`
#   make   MAKE_WORDS each: (0, descr, rank, first dim register, fill@ or 0, itemsize) a new
#          array; (1, value, rank, first dim register, 0, 0) a view of value with these dims
#   slots  2 words each: (0, value) data pointer; (1, k) rank-0 result slot k; (2, reg) a dim
#   res    3 words each: (0, value) the object; (1, value) a copy; (2, address) an object the
#          descriptor holds; (3, k, descr) a numpy scalar from rank-0 result slot k
#   errs   the message of kernel error code 1, 2, ...
# Values: the arguments (ins, then vs) and then every array made, in order.
ARG_WORDS, PROG_WORDS, MAKE_WORDS = 8, 4, 6
_OPS = {"const": 0, "mul": 1, "check": 2, "copy": 3, "add": 4, "sub": 5, "div": 6, "mod": 7,
        "min": 8, "max": 9, "lt": 10, "le": 11}
MAX_ARGS, MAX_VALUES, MAX_REGS, MAX_RANK0, MAX_SLOTS = 256, 512, 1024, 64, 1024


class _Fn:
    """Text of one LLVM function; `$name` in a line is the address `name` (an immediate, so
    nothing is looked up by symbol)."""

    def __init__(self, addr: dict) -> None:
        self.addr = addr
        self.lines: list = []
        self.allocas: list = []
        self.used: set = set()
        self.n = 0

    def t(self) -> str:
        self.n += 1
        return f"%t{self.n}"

    def lab(self, p: str) -> str:
        self.n += 1
        return f"{p}{self.n}"

    def e(self, s: str) -> None:
        if "$" in s:
            parts = s.split("$")
            out = [parts[0]]
            for p in parts[1:]:
                k = 0
                while k < len(p) and (p[k].isalnum() or p[k] == "_"):
                    k += 1
                self.used.add(p[:k])
                out.append("%a." + p[:k] + p[k:])
            s = "".join(out)
        self.lines.append("  " + s)

    def op(self, text: str) -> str:
        v = self.t()
        self.e(f"{v} = {text}")
        return v

    def blk(self, lab: str) -> None:
        self.lines.append(f"{lab}:")

    def br(self, c: str, a: str, b: str) -> None:
        self.e(f"br i1 {c}, label %{a}, label %{b}")

    def jmp(self, a: str) -> None:
        self.e(f"br label %{a}")

    def alloca(self, ty: str, align: int = 8) -> str:
        self.n += 1
        v = f"%s{self.n}"
        self.allocas.append(f"  {v} = alloca {ty}, align {align}")
        return v

    def word(self, base: str, idx) -> str:
        p = self.op(f"getelementptr i64, ptr {base}, i64 {idx}")
        return self.op(f"load i64, ptr {p}")

    def ptrw(self, base: str, idx) -> str:
        return self.op(f"inttoptr i64 {self.word(base, idx)} to ptr")

    def at(self, ty: str, base: str, off: int) -> str:
        p = self.op(f"getelementptr i8, ptr {base}, i64 {off}")
        return self.op(f"load {ty}, ptr {p}")

    def record(self, base: str, table: str, i: str, words: int) -> str:
        """Address of record `i` (`words` words each) of the table at word `table` of
        `base`."""
        m = self.op(f"mul i64 {i}, {words}")
        return self.op(f"getelementptr i64, ptr {base}, i64 {self.op(f'add i64 {table}, {m}')}")

    def elem(self, arr: str, idx) -> str:
        """Address of element `idx` of an i64 / ptr stack array."""
        return self.op(f"getelementptr i64, ptr {arr}, i64 {idx}")

    def loop(self, n: str, body) -> None:
        """`for i in range(n): body(i, nxt)`; `body` ends in an open block (`nxt` is the
        label of the next iteration, for early exits)."""
        ctr = self.alloca("i64")
        self.e(f"store i64 0, ptr {ctr}")
        head, inner, nxt, done = (self.lab(p) for p in ("lh", "lb", "ln", "ld"))
        self.jmp(head)
        self.blk(head)
        i = self.op(f"load i64, ptr {ctr}")
        self.br(self.op(f"icmp slt i64 {i}, {n}"), inner, done)
        self.blk(inner)
        body(i, nxt)
        self.jmp(nxt)
        self.blk(nxt)
        j = self.op(f"load i64, ptr {ctr}")
        self.e(f"store i64 {self.op(f'add i64 {j}, 1')}, ptr {ctr}")
        self.jmp(head)
        self.blk(done)

    def text(self, head: str) -> str:
        consts = [f"  %a.{n} = inttoptr i64 {self.addr[n]} to ptr" for n in sorted(self.used)]
        first = self.lines.index("entry:")
        body = self.lines[:first + 1] + self.allocas + consts + self.lines[first + 1:]
        return "\n".join([head + " {"] + body + ["}"]) + "\n"


def _arr_ir(addr: dict) -> str:
    """`jf_arr(o, descr, rank, mask, tn1, tn2)`: 1 when `o` is an exact ndarray of rank `rank`
    whose descr is `descr` (or has type_num tn1 / tn2 in native byte order) with every flag
    of `mask`, else 0."""
    f = _Fn(addr)
    f.blk("entry")
    f.br(f.op(f"icmp eq ptr {f.at('ptr', '%o', OB_TYPE)}, $ndarray"), "nd", "bad")
    f.blk("nd")
    f.br(f.op(f"icmp eq i32 {f.at('i32', '%o', ARR_ND)}, %rank"), "descr", "bad")
    f.blk("descr")
    d = f.at("ptr", "%o", ARR_DESCR)
    f.br(f.op(f"icmp eq ptr {d}, %want"), "flags", "other")
    f.blk("other")
    tn = f.at("i32", d, DESCR_TYPE_NUM)
    e = f.op(f"or i1 {f.op(f'icmp eq i32 {tn}, %tn1')}, {f.op(f'icmp eq i32 {tn}, %tn2')}")
    bo = f.at("i8", d, DESCR_BYTEORDER)
    b = f.op(f"or i1 {f.op(f'icmp eq i8 {bo}, 61')}, "
             f"{f.op(f'icmp eq i8 {bo}, 124')}")
    f.br(f.op(f"and i1 {e}, {b}"), "flags", "bad")
    f.blk("flags")
    m = f.op(f"and i32 {f.at('i32', '%o', ARR_FLAGS)}, %mask")
    eq = f.op(f"icmp eq i32 {m}, %mask")
    f.e(f"ret i32 {f.op(f'zext i1 {eq} to i32')}")
    f.blk("bad")
    f.e("ret i32 0")
    return f.text("define internal i32 @jf_arr(ptr %o, ptr %want, i32 %rank, i32 %mask, "
                  "i32 %tn1, i32 %tn2) nounwind")


def _scalar_ir(addr: dict, name: str) -> str:
    """`jf_sc_<dtype>(o, slot)`: 1 after storing the value of scalar `o` into `slot` as
    `np.asarray(o, dtype)` would, for the dtype's own numpy scalar, a Python float (float
    dtypes), an int in range (exactly representable for float dtypes), a bool (bool); else
    0."""
    llty, accepts = _DTYPES[name]
    dt = np.dtype(name)
    f = _Fn(addr)
    f.blk("entry")
    ty = f.at("ptr", "%o", OB_TYPE)
    f.br(f.op(f"icmp eq ptr {ty}, $scalar_{name}"), "own", "n1")
    f.blk("own")
    f.e(f"store {llty} {f.at(llty, '%o', FLOAT_VAL)}, ptr %slot")
    f.e("ret i32 1")
    f.blk("n1")
    if accepts == "bool":
        f.br(f.op(f"icmp eq ptr {ty}, $bool"), "pyb", "no")
        f.blk("pyb")
        yes = f.op("icmp eq ptr %o, $True")
        f.e(f"store i8 {f.op(f'zext i1 {yes} to i8')}, ptr %slot")
        f.e("ret i32 1")
    else:
        if accepts == "float":
            f.br(f.op(f"icmp eq ptr {ty}, $float"), "pyf", "n2")
            f.blk("pyf")
            v = f.at("double", "%o", FLOAT_VAL)
            if llty == "float":
                # a finite value that overflows: numpy warns, so the caller's slow path it is
                d, v = v, f.op(f"fptrunc double {v} to float")
                inf = "0x7FF0000000000000"
                fin = f.op(f"fcmp one double {f.op(f'call double @llvm.fabs.f64(double {d})')}, "
                           f"{inf}")
                back = f.op(f"call double @llvm.fabs.f64(double "
                            f"{f.op(f'fpext float {v} to double')})")
                big = f.op(f"fcmp oeq double {back}, {inf}")
                f.br(f.op(f"and i1 {fin}, {big}"), "no", "fok")
                f.blk("fok")
            f.e(f"store {llty} {v}, ptr %slot")
            f.e("ret i32 1")
            f.blk("n2")
        f.br(f.op(f"icmp eq ptr {ty}, $int"), "pyi", "no")
        f.blk("pyi")
        ovf = f.alloca("i32", 4)
        x = f.op(f"call i64 $PyLong_AsLongLongAndOverflow(ptr %o, ptr {ovf})")
        o = f.op(f"load i32, ptr {ovf}")
        if accepts == "float":
            lo, hi = -_EXACT_INT, _EXACT_INT
        elif dt.kind == "u":
            lo, hi = 0, min(2 ** (8 * dt.itemsize) - 1, 2 ** 63 - 1)
        else:
            lo, hi = -2 ** (8 * dt.itemsize - 1), 2 ** (8 * dt.itemsize - 1) - 1
        ok = f.op(f"and i1 {f.op(f'icmp eq i32 {o}, 0')}, {f.op(f'icmp sge i64 {x}, {lo}')}")
        f.br(f.op(f"and i1 {ok}, {f.op(f'icmp sle i64 {x}, {hi}')}"), "conv", "no")
        f.blk("conv")
        if accepts == "float":
            x = f.op(f"sitofp i64 {x} to {llty}")
        elif llty != "i64":
            x = f.op(f"trunc i64 {x} to {llty}")
        f.e(f"store {llty} {x}, ptr %slot")
        f.e("ret i32 1")
    f.blk("no")
    f.e("ret i32 0")
    return f.text(f"define i32 @jf_sc_{name}(ptr %o, ptr %slot) nounwind")


def _body_ir(addr: dict) -> str:
    """`jf_body(self, args, nargs, mode)`: the entry (mode 0: `jf_call`, 1: `jf_try`)."""
    f = _Fn(addr)
    regs = f.alloca(f"[{MAX_REGS} x i64]")
    datas = f.alloca(f"[{MAX_VALUES} x ptr]")
    objs = f.alloca(f"[{MAX_VALUES} x ptr]")
    scal = f.alloca(f"[{MAX_ARGS} x [16 x i8]]", 16)
    rank0 = f.alloca(f"[{MAX_RANK0} x [16 x i8]]", 16)
    kargs = f.alloca(f"[{MAX_SLOTS} x i64]")
    nown = f.alloca("i64")
    newobj = f.alloca("ptr")
    rcv = f.alloca("i32", 4)
    pdims = f.alloca("{ptr, i32}")
    f.blk("entry")
    D = f.op(f"load ptr, ptr {f.op(f'getelementptr i8, ptr %self, i64 {ARR_DATA}')}")
    f.e(f"store i64 0, ptr {nown}")
    f.br(f.op("icmp eq i64 %nargs, 2"), "tuples", "mismatch")
    f.blk("tuples")
    ins = f.op("load ptr, ptr %args")
    vs = f.op(f"load ptr, ptr {f.op('getelementptr ptr, ptr %args, i64 1')}")
    nin, nvs = f.word(D, H_NIN), f.word(D, H_NVS)
    for tup, cnt in ((ins, nin), (vs, nvs)):
        ok = f.lab("tok")
        f.br(f.op(f"icmp eq ptr {f.at('ptr', tup, OB_TYPE)}, $tuple"), ok, "mismatch")
        f.blk(ok)
        ok2 = f.lab("tok")
        f.br(f.op(f"icmp eq i64 {f.at('i64', tup, TUPLE_SIZE)}, {cnt}"), ok2, "mismatch")
        f.blk(ok2)
    nall = f.op(f"add i64 {nin}, {nvs}")
    argtab = f.word(D, H_ARGS)

    def arg(i: str, nxt: str) -> None:
        isin = f.op(f"icmp slt i64 {i}, {nin}")
        k = f.op(f"select i1 {isin}, i64 {i}, i64 {f.op(f'sub i64 {i}, {nin}')}")
        tup = f.op(f"select i1 {isin}, ptr {ins}, ptr {vs}")
        items = f.op(f"getelementptr i8, ptr {tup}, i64 {TUPLE_ITEMS}")
        obj = f.op(f"load ptr, ptr {f.op(f'getelementptr ptr, ptr {items}, i64 {k}')}")
        f.e(f"store ptr {obj}, ptr {f.elem(objs, i)}")
        A = f.record(D, argtab, i, ARG_WORDS)
        dslot = f.elem(datas, i)
        sc = f.word(A, 5)
        tryscal, scok, isarr = f.lab("asc"), f.lab("ascok"), f.lab("aarr")
        f.br(f.op(f"icmp ne i64 {sc}, 0"), tryscal, isarr)
        f.blk(tryscal)
        slot = f.op(f"getelementptr [16 x i8], ptr {scal}, i64 {i}")
        got = f.op(f"call i32 {f.op(f'inttoptr i64 {sc} to ptr')}(ptr {obj}, ptr {slot})")
        f.br(f.op(f"icmp ne i32 {got}, 0"), scok, isarr)
        f.blk(scok)
        f.e(f"store ptr {slot}, ptr {dslot}")
        f.jmp(nxt)
        f.blk(isarr)
        descr = f.ptrw(A, 0)
        rank = f.word(A, 1)
        w32 = [f.op(f"trunc i64 {f.word(A, j)} to i32") for j in (1, 2, 3, 4)]
        okarr = f.op(f"call i32 @jf_arr(ptr {obj}, ptr {descr}, i32 {w32[0]}, i32 {w32[1]}, "
                     f"i32 {w32[2]}, i32 {w32[3]})")
        dims = f.lab("adims")
        f.br(f.op(f"icmp ne i32 {okarr}, 0"), dims, "mismatch")
        f.blk(dims)
        dimsp = f.at("ptr", obj, ARR_DIMS)
        rbase, known = f.word(A, 6), f.word(A, 7)

        def dim(d: str, dnxt: str) -> None:
            dv = f.op(f"load i64, ptr {f.elem(dimsp, d)}")
            f.e(f"store i64 {dv}, ptr {f.elem(regs, f.op(f'add i64 {rbase}, {d}'))}")
            kn = f.lab("kn")
            f.br(f.op(f"icmp sge i64 {known}, 0"), kn, dnxt)
            f.blk(kn)
            kv = f.word(D, f.op(f"add i64 {known}, {d}"))
            anyd = f.op(f"icmp eq i64 {kv}, -1")
            not1 = f.op(f"and i1 {f.op(f'icmp eq i64 {kv}, -2')}, "
                        f"{f.op(f'icmp ne i64 {dv}, 1')}")
            same = f.op(f"icmp eq i64 {kv}, {dv}")
            ok = f.op(f"or i1 {anyd}, {f.op(f'or i1 {not1}, {same}')}")
            f.br(ok, dnxt, "mismatch")
            f.blk(f.lab("kd"))
        f.loop(rank, dim)
        f.e(f"store ptr {f.at('ptr', obj, ARR_DATA)}, ptr {dslot}")
    f.loop(nall, arg)

    # -- the dim program ------------------------------------------------------------------
    progtab = f.word(D, H_PROG)

    def reg(r: str) -> str:
        return f.elem(regs, r)

    def prog(p: str, nxt: str) -> None:
        P = f.record(D, progtab, p, PROG_WORDS)
        op, a, b, c = (f.word(P, j) for j in range(4))
        labs = {k: f.lab("p" + k) for k in _OPS}
        cases = " ".join(f"i64 {v}, label %{labs[k]}" for k, v in _OPS.items())
        f.e(f"switch i64 {op}, label %{nxt} [ {cases} ]")
        f.blk(labs["const"])
        f.e(f"store i64 {a}, ptr {reg(c)}")
        f.jmp(nxt)
        f.blk(labs["copy"])
        f.e(f"store i64 {f.op(f'load i64, ptr {reg(a)}')}, ptr {reg(c)}")
        f.jmp(nxt)
        for k in ("mul", "add", "sub"):
            f.blk(labs[k])
            x, y = f.op(f"load i64, ptr {reg(a)}"), f.op(f"load i64, ptr {reg(b)}")
            r = f.op(f"call {{i64, i1}} @llvm.s{k}.with.overflow.i64(i64 {x}, i64 {y})")
            f.e(f"store i64 {f.op(f'extractvalue {{i64, i1}} {r}, 0')}, ptr {reg(c)}")
            f.br(f.op(f"extractvalue {{i64, i1}} {r}, 1"), "big", nxt)
        f.blk(labs["check"])
        x, y = f.op(f"load i64, ptr {reg(a)}"), f.op(f"load i64, ptr {reg(b)}")
        fail = f.lab("checkfail")
        f.br(f.op(f"icmp eq i64 {x}, {y}"), nxt, fail)
        f.blk(fail)
        f.e(f"call void $PyErr_SetString(ptr $ValueError, ptr {f.op(f'inttoptr i64 {c} to ptr')})")
        f.e("ret ptr null")
        for k, pred in (("min", "slt"), ("max", "sgt")):
            f.blk(labs[k])
            x, y = f.op(f"load i64, ptr {reg(a)}"), f.op(f"load i64, ptr {reg(b)}")
            v = f.op(f"select i1 {f.op(f'icmp {pred} i64 {x}, {y}')}, i64 {x}, i64 {y}")
            f.e(f"store i64 {v}, ptr {reg(c)}")
            f.jmp(nxt)
        for k, pred in (("lt", "slt"), ("le", "sle")):
            f.blk(labs[k])
            x, y = f.op(f"load i64, ptr {reg(a)}"), f.op(f"load i64, ptr {reg(b)}")
            v = f.op(f"zext i1 {f.op(f'icmp {pred} i64 {x}, {y}')} to i64")
            f.e(f"store i64 {v}, ptr {reg(c)}")
            f.jmp(nxt)
        # floor division and modulo with Python's signs; by -1 without sdiv's overflow
        for k in ("div", "mod"):
            f.blk(labs[k])
            x, y = f.op(f"load i64, ptr {reg(a)}"), f.op(f"load i64, ptr {reg(b)}")
            nz, neg1, gen = f.lab("dnz"), f.lab("dm1"), f.lab("dgen")
            f.br(f.op(f"icmp eq i64 {y}, 0"), "zero", nz)
            f.blk(nz)
            f.br(f.op(f"icmp eq i64 {y}, -1"), neg1, gen)
            f.blk(neg1)
            if k == "div":
                r = f.op(f"call {{i64, i1}} @llvm.ssub.with.overflow.i64(i64 0, i64 {x})")
                f.e(f"store i64 {f.op(f'extractvalue {{i64, i1}} {r}, 0')}, ptr {reg(c)}")
                f.br(f.op(f"extractvalue {{i64, i1}} {r}, 1"), "big", nxt)
            else:
                f.e(f"store i64 0, ptr {reg(c)}")
                f.jmp(nxt)
            f.blk(gen)
            q, m = f.op(f"sdiv i64 {x}, {y}"), f.op(f"srem i64 {x}, {y}")
            signs = f.op(f"xor i64 {m}, {y}")
            adj = f.op(f"and i1 {f.op(f'icmp ne i64 {m}, 0')}, "
                       f"{f.op(f'icmp slt i64 {signs}, 0')}")
            if k == "div":
                v = f.op(f"sub i64 {q}, {f.op(f'zext i1 {adj} to i64')}")
            else:
                v = f.op(f"add i64 {m}, {f.op(f'select i1 {adj}, i64 {y}, i64 0')}")
            f.e(f"store i64 {v}, ptr {reg(c)}")
            f.jmp(nxt)
        f.blk(f.lab("pd"))
    f.loop(f.word(D, H_NPROG), prog)
    # (jf_try) an operand of `parmin` elements or more: the runner's general path, which
    # picks the kernel's parallel variant
    parmin = f.word(D, H_PARMIN)
    f.br(f.op(f"icmp sgt i64 {parmin}, 0"), "large", "small")
    f.blk("large")
    big = f.op(f"load i64, ptr {f.elem(regs, f.word(D, H_LARGEST))}")
    f.br(f.op(f"icmp sge i64 {big}, {parmin}"), "mismatch", "small")
    f.blk("small")

    # -- the arrays -----------------------------------------------------------------------
    maketab = f.word(D, H_MAKE)

    def make(k: str, nxt: str) -> None:
        M = f.record(D, maketab, k, MAKE_WORDS)
        kind, a, rank, base = (f.word(M, j) for j in range(4))
        r32 = f.op(f"trunc i64 {rank} to i32")
        shp = f.elem(regs, base)
        empty, view, got = f.lab("mempty"), f.lab("mview"), f.lab("mgot")
        f.br(f.op(f"icmp eq i64 {kind}, 0"), empty, view)
        f.blk(empty)
        descr = f.op(f"inttoptr i64 {a} to ptr")
        f.e(f"call void $Py_IncRef(ptr {descr})")       # PyArray_Empty steals it
        x = f.op(f"call ptr $PyArray_Empty(i32 {r32}, ptr {shp}, ptr {descr}, i32 0)")
        f.e(f"store ptr {x}, ptr {newobj}")
        f.jmp(got)
        f.blk(view)
        src = f.op(f"load ptr, ptr {f.elem(objs, a)}")
        f.e(f"store ptr {shp}, ptr {pdims}")            # PyArray_Dims {ptr, len}
        f.e(f"store i32 {r32}, ptr {f.op(f'getelementptr i8, ptr {pdims}, i64 8')}")
        y = f.op(f"call ptr $PyArray_Newshape(ptr {src}, ptr {pdims}, i32 0)")
        f.e(f"store ptr {y}, ptr {newobj}")
        f.jmp(got)
        f.blk(got)
        o = f.op(f"load ptr, ptr {newobj}")
        ok = f.lab("mok")
        f.br(f.op(f"icmp eq ptr {o}, null"), "cleanup", ok)
        f.blk(ok)
        vi = f.op(f"add i64 {nall}, {k}")
        f.e(f"store ptr {o}, ptr {f.elem(objs, vi)}")
        owned = f.op(f"load i64, ptr {nown}")
        f.e(f"store i64 {f.op(f'add i64 {owned}, 1')}, ptr {nown}")
        data = f.at("ptr", o, ARR_DATA)
        f.e(f"store ptr {data}, ptr {f.elem(datas, vi)}")
        fill = f.word(M, 4)
        dofill = f.lab("mfill")
        f.br(f.op(f"icmp ne i64 {fill}, 0"), dofill, nxt)
        f.blk(dofill)            # JITFLOW_POISON: every element gets the pattern
        size = f.alloca("i64")
        f.e(f"store i64 1, ptr {size}")

        def count(d: str, dn: str) -> None:
            dv = f.op(f"load i64, ptr {f.elem(regs, f.op(f'add i64 {base}, {d}'))}")
            sz = f.op(f"load i64, ptr {size}")
            f.e(f"store i64 {f.op(f'mul i64 {sz}, {dv}')}, ptr {size}")
        f.loop(rank, count)
        isz = f.word(M, 5)
        nb = f.op(f"mul i64 {f.op(f'load i64, ptr {size}')}, {isz}")
        pat = f.op(f"inttoptr i64 {fill} to ptr")

        def put(j: str, jn: str) -> None:
            src = f.op(f"getelementptr i8, ptr {pat}, i64 {f.op(f'urem i64 {j}, {isz}')}")
            f.e(f"store i8 {f.op(f'load i8, ptr {src}')}, "
                f"ptr {f.op(f'getelementptr i8, ptr {data}, i64 {j}')}")
        f.loop(nb, put)
    f.loop(f.word(D, H_NMAKE), make)

    # -- the kernel's arguments, the call ---------------------------------------------------
    slottab = f.word(D, H_SLOTS)

    def slot(s: str, nxt: str) -> None:
        S = f.record(D, slottab, s, 2)
        kind, idx = f.word(S, 0), f.word(S, 1)
        dst = f.elem(kargs, s)
        s0, s1, s2 = f.lab("sdata"), f.lab("sr0"), f.lab("sreg")
        f.e(f"switch i64 {kind}, label %{s2} [ i64 0, label %{s0} i64 1, label %{s1} ]")
        f.blk(s0)
        p = f.op(f"load ptr, ptr {f.elem(datas, idx)}")
        f.e(f"store i64 {f.op(f'ptrtoint ptr {p} to i64')}, ptr {dst}")
        f.jmp(nxt)
        f.blk(s1)
        p = f.op(f"getelementptr [16 x i8], ptr {rank0}, i64 {idx}")
        f.e(f"store i64 {f.op(f'ptrtoint ptr {p} to i64')}, ptr {dst}")
        f.jmp(nxt)
        f.blk(s2)
        f.e(f"store i64 {f.op(f'load i64, ptr {f.elem(regs, idx)}')}, ptr {dst}")
    f.loop(f.word(D, H_NSLOTS), slot)
    kf = f.op(f"load ptr, ptr {f.ptrw(D, H_CELL)}")
    thr = f.word(D, H_NOGIL)
    f.br(f.op(f"icmp sgt i64 {thr}, 0"), "work", "held")
    f.blk("work")
    w = f.op(f"load i64, ptr {f.elem(regs, f.word(D, H_WORK))}")
    f.br(f.op(f"icmp sge i64 {w}, {thr}"), "free", "held")
    f.blk("free")            # a large kernel runs without the GIL
    ts = f.op("call ptr $PyEval_SaveThread()")
    f.e(f"store i32 {f.op(f'call i32 {kf}(ptr {kargs})')}, ptr {rcv}")
    f.e(f"call void $PyEval_RestoreThread(ptr {ts})")
    f.jmp("ran")
    f.blk("held")
    f.e(f"store i32 {f.op(f'call i32 {kf}(ptr {kargs})')}, ptr {rcv}")
    f.jmp("ran")
    f.blk("ran")
    rc = f.op(f"load i32, ptr {rcv}")
    f.br(f.op(f"icmp eq i32 {rc}, 0"), "results", "kerr")
    f.blk("kerr")
    rcm1 = f.op(f"sub i64 {f.op(f'zext i32 {rc} to i64')}, 1")
    f.br(f.op(f"icmp ult i64 {rcm1}, {f.word(D, H_NERRS)}"), "kmsg", "kunknown")
    f.blk("kmsg")
    km = f.ptrw(D, f.op(f"add i64 {f.word(D, H_ERRS)}, {rcm1}"))
    f.e(f"call void $PyErr_SetString(ptr $ValueError, ptr {km})")
    f.jmp("cleanup")
    f.blk("kunknown")
    f.e(f"call void $PyErr_SetString(ptr $SystemError, ptr {f.ptrw(D, H_M_UNKNOWN)})")
    f.jmp("cleanup")

    # -- results ----------------------------------------------------------------------------
    f.blk("results")
    nres = f.word(D, H_NRES)
    rt = f.op(f"call ptr $PyTuple_New(i64 {nres})")
    f.br(f.op(f"icmp eq ptr {rt}, null"), "cleanup", "fill")
    f.blk("fill")
    restab = f.word(D, H_RES)
    titems = f.op(f"getelementptr i8, ptr {rt}, i64 {TUPLE_ITEMS}")

    def result(r: str, nxt: str) -> None:
        R = f.record(D, restab, r, 3)
        kind, x, y = f.word(R, 0), f.word(R, 1), f.word(R, 2)
        item = f.op(f"getelementptr ptr, ptr {titems}, i64 {r}")
        r0, r1, r2, r3 = (f.lab(p) for p in ("robj", "rcopy", "rheld", "rscal"))
        f.e(f"switch i64 {kind}, label %{r3} [ i64 0, label %{r0} i64 1, label %{r1} "
            f"i64 2, label %{r2} ]")
        f.blk(r0)
        o = f.op(f"load ptr, ptr {f.elem(objs, x)}")
        f.e(f"call void $Py_IncRef(ptr {o})")
        f.e(f"store ptr {o}, ptr {item}")
        f.jmp(nxt)
        f.blk(r1)
        o = f.op(f"call ptr $PyArray_NewCopy(ptr {f.op(f'load ptr, ptr {f.elem(objs, x)}')}, "
                 "i32 0)")
        ok = f.lab("rok")
        f.br(f.op(f"icmp eq ptr {o}, null"), "rfail", ok)
        f.blk(ok)
        f.e(f"store ptr {o}, ptr {item}")
        f.jmp(nxt)
        f.blk(r2)
        o = f.op(f"inttoptr i64 {x} to ptr")
        f.e(f"call void $Py_IncRef(ptr {o})")
        f.e(f"store ptr {o}, ptr {item}")
        f.jmp(nxt)
        f.blk(r3)
        p = f.op(f"getelementptr [16 x i8], ptr {rank0}, i64 {x}")
        o = f.op(f"call ptr $PyArray_Scalar(ptr {p}, ptr {f.op(f'inttoptr i64 {y} to ptr')}, "
                 "ptr null)")
        ok = f.lab("rok")
        f.br(f.op(f"icmp eq ptr {o}, null"), "rfail", ok)
        f.blk(ok)
        f.e(f"store ptr {o}, ptr {item}")
    f.loop(nres, result)

    def release(j: str, nxt: str) -> None:
        vi = f.op(f"add i64 {nall}, {j}")
        f.e(f"call void $Py_DecRef(ptr {f.op(f'load ptr, ptr {f.elem(objs, vi)}')})")
    f.loop(f.op(f"load i64, ptr {nown}"), release)     # the entry's own references
    f.e(f"ret ptr {rt}")
    f.blk("rfail")
    f.e(f"call void $Py_DecRef(ptr {rt})")
    f.jmp("cleanup")
    f.blk("cleanup")
    f.loop(f.op(f"load i64, ptr {nown}"), release)
    f.e("ret ptr null")
    f.blk("big")
    f.e(f"call void $PyErr_SetString(ptr $ValueError, ptr {f.ptrw(D, H_M_BIG)})")
    f.e("ret ptr null")
    f.blk("zero")
    f.e(f"call void $PyErr_SetString(ptr $ZeroDivisionError, ptr {f.ptrw(D, H_M_ZERO)})")
    f.e("ret ptr null")
    # -- not this entry's arguments: None (jf_try) or the Python wrapper (jf_call) -----------
    f.blk("mismatch")
    f.br(f.op("icmp ne i32 %mode, 0"), "none", "fb0")
    f.blk("fb0")
    fb = f.word(D, H_FALLBACK)
    f.br(f.op(f"icmp ne i64 {fb}, 0"), "callfb", "none")
    f.blk("callfb")
    r = f.op(f"call ptr $PyObject_Vectorcall(ptr {f.op(f'inttoptr i64 {fb} to ptr')}, "
             "ptr %args, i64 %nargs, ptr null)")
    f.e(f"ret ptr {r}")
    f.blk("none")
    f.e("call void $Py_IncRef(ptr $None)")
    f.e("ret ptr $None")
    return f.text("define internal ptr @jf_body(ptr %self, ptr noalias %args, i64 %nargs, "
                  "i32 %mode) noinline nounwind")


# a kernel for the self-test: out[i] = 2 * x[i] (float64, n = dim), r0 = x[0] + n; error code
# 1 when x[0] < 0
_SELFTEST_IR = """\
define i32 @jf_selftest(ptr noalias %a) nounwind {
entry:
  %xp = load ptr, ptr %a
  %np = getelementptr i64, ptr %a, i64 1
  %n = load i64, ptr %np
  %op = getelementptr i64, ptr %a, i64 2
  %out = load ptr, ptr %op
  %rp = getelementptr i64, ptr %a, i64 3
  %r0 = load ptr, ptr %rp
  %x0 = load double, ptr %xp
  %neg = fcmp olt double %x0, 0.0
  br i1 %neg, label %err, label %loop
err:
  ret i32 1
loop:
  %i = phi i64 [0, %entry], [%i1, %body]
  %more = icmp slt i64 %i, %n
  br i1 %more, label %body, label %done
body:
  %pi = getelementptr double, ptr %xp, i64 %i
  %v = load double, ptr %pi
  %w = fmul double %v, 2.0
  %po = getelementptr double, ptr %out, i64 %i
  store double %w, ptr %po
  %i1 = add i64 %i, 1
  br label %loop
done:
  %nf = sitofp i64 %n to double
  %s = fadd double %x0, %nf
  store double %s, ptr %r0
  ret i32 0
}
"""


def _entry_ir(addr: dict) -> str:
    decls = "".join(f"declare {{i64, i1}} @llvm.s{k}.with.overflow.i64(i64, i64)\n"
                    for k in ("mul", "add", "sub")) + "declare double @llvm.fabs.f64(double)\n"
    parts = [decls, _arr_ir(addr)] + [_scalar_ir(addr, n) for n in _DTYPES] + [_body_ir(addr)]
    for name, mode in (("jf_call", 0), ("jf_try", 1)):
        parts.append(f"define ptr @{name}(ptr %self, ptr noalias %args, i64 %nargs) nounwind {{\n"
                     f"entry:\n  %r = call ptr @jf_body(ptr %self, ptr %args, i64 %nargs, "
                     f"i32 {mode})\n  ret ptr %r\n}}\n")
    return "\n".join(parts) + "\n" + _SELFTEST_IR


# -- the process's runtime ------------------------------------------------------------------------
class _Runtime:
    """The verified layout, the addresses, the compiled entry (once per process)."""

    def __init__(self) -> None:
        self.addr = _verify()
        objs = {"tuple": tuple, "float": float, "int": int, "bool": bool, "True": True,
                "None": None, "ValueError": ValueError, "SystemError": SystemError,
                "ZeroDivisionError": ZeroDivisionError, "ndarray": np.ndarray}
        for name in _DTYPES:
            objs[f"scalar_{name}"] = np.dtype(name).type
        self.keep = list(objs.values())
        for name, obj in objs.items():
            self.addr[name] = id(obj)
        self.new_function = _api("PyCFunction_NewEx", ctypes.py_object,
                                 [ctypes.c_void_p, ctypes.py_object, ctypes.c_void_p])
        self.messages = {k: ctypes.create_string_buffer(v.encode()) for k, v in (
            ("unknown", "jitflow: unknown kernel error code"), ("big", "array is too big"),
            ("zero", "integer division or modulo by zero"))}
        self._compile()
        self._selftest()

    def _compile(self) -> None:
        import llvmlite.binding as llvm
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        text = _entry_ir(self.addr)
        target = llvm.Target.from_default_triple()
        tm = target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                          features=llvm.get_host_cpu_features().flatten(),
                                          opt=2, jit=True)
        ctx = llvm.create_context()
        mod = llvm.parse_assembly(text, context=ctx)
        mod.verify()
        pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=2))
        pb.getModulePassManager().run(mod, pb)
        ee = llvm.create_mcjit_compiler(mod, tm)
        # kept for the process, also when this runtime is refused: llvmlite disposing an
        # engine drops its modules, and with them the last reference to their own context,
        # before the engine itself (a use after free)
        _ENGINES.append((ee, tm, ctx))
        ee.finalize_object()
        self.ir = text
        self.functions = {n: ee.get_function_address(n)
                          for n in ["jf_call", "jf_try", "jf_selftest"]
                          + [f"jf_sc_{d}" for d in _DTYPES]}
        if not all(self.functions.values()):
            raise Unsupported("the entry did not compile")

    def _selftest(self) -> None:
        """Run the compiled entry once on a known kernel: results, errors, refusals and
        reference counts as expected, else `Unsupported`."""
        L = Layout("selftest")
        x = L.arg("float64", 1, ones=(False,))
        n = L.arg_dims[x][0]
        out = L.empty("float64", [n])
        r0 = L.rank0()
        for s in [(0, x), (2, n), (0, out), (1, r0)]:
            L.slots.append(s)
        L.results += [(0, out), (3, r0, id(np.dtype(np.float64)))]
        L.errors.append("jitflow:0:selftest")
        L.finish()
        L.cell.value = self.functions["jf_selftest"]
        seen = []
        fn = _new(self, L, lambda ins, vs: seen.append(ins) or "fallback", "call")
        tr = _new(self, L, None, "try")
        a = np.arange(3.0)
        before = sys.getrefcount(a)
        got = fn((a,), ())
        ok = (type(got) is tuple and len(got) == 2 and type(got[0]) is np.ndarray
              and got[0].tolist() == [0.0, 2.0, 4.0] and type(got[1]) is np.float64
              and got[1] == 3.0 and sys.getrefcount(a) == before
              and sys.getrefcount(got[0]) == 2)   # the tuple, the argument
        try:
            fn((np.array([-1.0]),), ())
            ok = False
        except ValueError as e:
            ok = ok and str(e) == "jitflow:0:selftest"
        f32 = np.zeros(2, np.float32)
        ok = ok and fn((f32,), ()) == "fallback" and len(seen) == 1 and seen[0][0] is f32
        ok = ok and tr((f32,), ()) is None and tr((a,), ())[0].tolist() == [0.0, 2.0, 4.0]
        ok = ok and tr((a, a), ()) is None and tr(a, ()) is None
        if not ok:
            raise Unsupported("the entry's self-test failed")


_RUNTIME: list = []
_RT_LOCK = threading.Lock()
_ENGINES: list = []   # every engine compiled here (see _Runtime._compile)


def _runtime() -> _Runtime:
    """The process's runtime (verified, compiled and self-tested on first use); raises
    `Unsupported` when this process cannot have native entries."""
    if not _RUNTIME:
        with _RT_LOCK:
            if not _RUNTIME:
                try:
                    _RUNTIME.append(_Runtime())
                except Unsupported as e:
                    _RUNTIME.append(e)
                except Exception as e:  # noqa: BLE001  (anything unexpected: fail closed)
                    _RUNTIME.append(Unsupported(f"{type(e).__name__}: {e}"))
    rt = _RUNTIME[0]
    if isinstance(rt, Unsupported):
        raise rt
    return rt


def available() -> bool:
    """Whether native entries can be made in this process."""
    try:
        _runtime()
    except Unsupported:
        return False
    return True


def warm_up() -> None:
    """Verify the layout and compile the entry now (~0.1 s of CPU once per process; the
    backend does it on the compiler thread)."""
    available()


# -- descriptors -------------------------------------------------------------------------------
class Layout:
    """What one kernel's descriptor says: its operands, the dim program, the arrays to make,
    the kernel's argument slots, the results and the error messages; and what the words point
    at (messages, objects, the kernel cell). `layout_of` makes one from a kernel."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.args: list = []       # (dtype, rank, var, scalar, ones)
        self.arg_dims: list = []   # per argument: its dims' registers
        self.nin = 0
        self.nregs = 0
        self.prog: list = []       # (op, a, b, c)
        self.makes: list = []      # (0, descr, rank, base, fill, itemsize) | (1, value, ...)
        self.nrank0 = 0
        self.slots: list = []
        self.results: list = []
        self.errors: list = []     # messages
        self.work = -1
        self.largest = -1          # the register of the largest operand's size
        self.keep: list = []       # what words point at
        self.memo: dict = {}
        self.cell = ctypes.c_int64(0)
        self.key = None            # equal keys: the same descriptor with another kernel

    # -- building --------------------------------------------------------------------------
    def arg(self, dtype: str, rank: int, var: bool = False, scalar: bool = False,
            ones: tuple = ()) -> int:
        if dtype not in _DTYPES:
            raise Unsupported(f"dtype {dtype}")
        if not var and self.nin != len(self.args):
            raise Unsupported("inputs after variables")
        self.args.append((dtype, rank, var, scalar, tuple(ones)))
        self.arg_dims.append([self.reg() for _ in range(rank)])
        if not var:
            self.nin += 1
        return len(self.args) - 1

    def reg(self) -> int:
        self.nregs += 1
        if self.nregs > MAX_REGS:
            raise Unsupported("too many dims for the native entry")
        return self.nregs - 1

    def const(self, v: int) -> int:
        key = ("const", int(v))
        r = self.memo.get(key)
        if r is None:
            r = self.memo[key] = self.reg()
            self.prog.append((_OPS["const"], int(v), 0, r))
        return r

    def op(self, name: str, a: int, b: int) -> int:
        key = (name, a, b)
        r = self.memo.get(key)
        if r is None:
            r = self.memo[key] = self.reg()
            self.prog.append((_OPS[name], a, b, r))
        return r

    def check(self, a: int, b: int, msg: str) -> None:
        self.prog.append((_OPS["check"], a, b, self.text(msg)))

    def text(self, msg: str) -> int:
        buf = ctypes.create_string_buffer(msg.encode())
        self.keep.append(buf)
        return ctypes.addressof(buf)

    def _consecutive(self, regs: list) -> int:
        base = self.nregs
        for r in regs:
            self.prog.append((_OPS["copy"], r, 0, self.reg()))
        return base

    def empty(self, dtype: str, regs: list, fill=None) -> int:
        """A new array (value index); `fill`: the bytes of one element to fill it with."""
        dt = np.dtype(dtype)
        base = self._consecutive(regs)
        pat = 0
        if fill is not None:
            buf = ctypes.create_string_buffer(bytes(fill), len(fill))
            self.keep.append(buf)
            pat = ctypes.addressof(buf)
        self.makes.append((0, id(dt), len(regs), base, pat, dt.itemsize))
        return len(self.args) + len(self.makes) - 1

    def view(self, value: int, regs: list) -> int:
        """`value` reshaped to these dims (a new view: value index)."""
        base = self._consecutive(regs)
        self.makes.append((1, value, len(regs), base, 0, 0))
        return len(self.args) + len(self.makes) - 1

    def rank0(self) -> int:
        self.nrank0 += 1
        if self.nrank0 > MAX_RANK0:
            raise Unsupported("too many rank-0 results")
        return self.nrank0 - 1

    def finish(self) -> None:
        """The work register (elements of every array operand and new array: a kernel with
        enough runs without the GIL) and the limits."""
        sizes = []
        for dims in self.arg_dims:
            if dims:
                sizes.append(self.product(dims))
        if sizes:
            self.largest = sizes[0]
            for s in sizes[1:]:
                self.largest = self.op("max", self.largest, s)
        for m in self.makes:
            if m[0] == 0 and m[2]:
                sizes.append(self.product(list(range(m[3], m[3] + m[2]))))
        if sizes:
            w = sizes[0]
            for s in sizes[1:]:
                w = self.op("add", w, s)
            self.work = w
        if len(self.args) > MAX_ARGS or len(self.args) + len(self.makes) > MAX_VALUES \
                or len(self.slots) > MAX_SLOTS:
            raise Unsupported("too many operands for the native entry")

    def product(self, regs: list) -> int:
        r = regs[0]
        for x in regs[1:]:
            r = self.op("mul", r, x)
        return r

    # -- words -----------------------------------------------------------------------------
    def words(self, rt: _Runtime, fallback, variant: str, statics=None,
              writeable_inputs: bool = False, parmin: int = 0) -> np.ndarray:
        """The descriptor's words for `jf_call` ("call") or `jf_try` ("try": scalar inputs,
        the shape classes and the `statics` dims (per input: a tuple with None for any, or
        None) checked, operands of `parmin` elements or more refused)."""
        w = [0] * HEADER
        known: list = []
        args = []
        for i, (dtype, rank, var, scalar, ones) in enumerate(self.args):
            dt = np.dtype(dtype)
            mask = C_CONTIGUOUS | ALIGNED | (WRITEABLE if var or writeable_inputs else 0)
            tns = _type_nums(dtype) * 2
            helper = rt.functions[f"jf_sc_{dtype}"] if scalar and variant == "try" else 0
            k = -1
            if variant == "try" and rank:
                st = statics[i] if statics is not None and i < len(statics) else None
                dims = [1 if one else -2 for one in ones] if len(ones) == rank else [-1] * rank
                if st is not None and len(st) == rank:
                    dims = [d if s is None else int(s) for d, s in zip(dims, st)]
                k = len(known)
                known.append(dims)
            args.append([id(dt), rank, mask, tns[0], tns[1], helper,
                         self.arg_dims[i][0] if rank else 0, k])
        tables = {}
        for key, rows in (("args", args), ("prog", self.prog), ("make", self.makes),
                          ("slots", self.slots), ("res", [list(r) + [0] * (3 - len(r))
                                                          for r in self.results]),
                          ("errs", [[self.text(m)] for m in self.errors] if self.errors else [])):
            tables[key] = len(w)
            for row in rows:
                w.extend(row)
        for i, row in enumerate(args):
            if row[7] >= 0:
                w[tables["args"] + ARG_WORDS * i + 7] = len(w)
                w.extend(known[row[7]])
        head = {H_CELL: ctypes.addressof(self.cell), H_NIN: self.nin,
                H_NVS: len(self.args) - self.nin, H_ARGS: tables["args"],
                H_PROG: tables["prog"], H_NPROG: len(self.prog), H_MAKE: tables["make"],
                H_NMAKE: len(self.makes), H_SLOTS: tables["slots"], H_NSLOTS: len(self.slots),
                H_RES: tables["res"], H_NRES: len(self.results), H_ERRS: tables["errs"],
                H_NERRS: len(self.errors), H_FALLBACK: 0 if fallback is None else id(fallback),
                H_NOGIL: NOGIL_MIN if self.work >= 0 else 0, H_WORK: max(self.work, 0),
                H_M_UNKNOWN: ctypes.addressof(rt.messages["unknown"]),
                H_M_BIG: ctypes.addressof(rt.messages["big"]),
                H_M_ZERO: ctypes.addressof(rt.messages["zero"]),
                H_PARMIN: parmin if variant == "try" and self.largest >= 0 else 0,
                H_LARGEST: max(self.largest, 0)}
        for k, v in head.items():
            w[k] = v
        return np.array(w, dtype=np.int64)


def _type_nums(dtype: str) -> list:
    """type_nums of the native-order descrs equal to `dtype` (int64 is `long` and `long long`)."""
    dt = np.dtype(dtype)
    nums = {dt.num}
    for c in np.typecodes["All"]:
        try:
            d = np.dtype(c)
        except TypeError:
            continue
        if d == dt and d.byteorder in "=|":
            nums.add(d.num)
    return sorted(nums)[:2]


class Descriptor(np.ndarray):
    """An entry's words (its `self`), holding its `layout` (what the words point at) and the
    fallback; a kernel's entry also carries `llvm_ir`, `libraries`, `wrapper_source`,
    `level` (see llvmjit.info)."""


def _new(rt: _Runtime, layout: Layout, fallback, variant: str, statics=None,
         writeable_inputs: bool = False, parmin: int = 0):
    desc = layout.words(rt, fallback, variant, statics, writeable_inputs,
                        parmin).view(Descriptor)
    desc.flags.writeable = False
    desc.layout = layout
    desc.fallback = fallback
    desc.variant = variant
    desc.fname = layout.name.encode()
    desc.doc = b"entry(ins, vs)\n--\n\njitflow native entry point"
    fn = rt.functions["jf_call" if variant == "call" else "jf_try"]
    desc.methoddef = _MethodDef(desc.fname, fn, METH_FASTCALL, desc.doc)
    return rt.new_function(ctypes.addressof(desc.methoddef), desc, None)


def build(layout: Layout, kernel_address: int, fallback):
    """A kernel's `fn(ins, vs) -> tuple`: the native entry of `layout` calling the kernel at
    `kernel_address`; arguments it does not take go to `fallback(ins, vs)`. Raises
    `Unsupported`."""
    rt = _runtime()
    layout.cell.value = kernel_address
    return _new(rt, layout, fallback, "call")


def is_native(fn) -> bool:
    return isinstance(getattr(fn, "__self__", None), Descriptor)


def info(fn):
    """What describes `fn`'s code: its descriptor for a native entry, else `fn` itself."""
    return fn.__self__ if is_native(fn) else fn


def try_variant(fn, statics=None, parmin: int = 0):
    """The warm runners' entry for kernel entry `fn` (None when `fn` is not native): the same
    kernel (and cell), but an argument it does not take gives None; rank-0 inputs take Python
    and numpy scalars; inputs must be writeable C-contiguous aligned arrays (numpy's `carray`:
    what the runners pass without conversion) of the shape class the kernel was made for and
    of the `statics` dims (per input: a tuple with None for any dim, or None); with `parmin`,
    operands of that many elements or more are refused too."""
    if not is_native(fn):
        return None
    return _new(_runtime(), fn.__self__.layout, None, "try", statics, True, parmin)


def swap(old, new) -> bool:
    """Make entry `old` call `new`'s kernel (the same kernel at another level) where both are
    native entries of the same layout; False (nothing changed) otherwise."""
    if not (is_native(old) and is_native(new)):
        return False
    a, b = old.__self__, new.__self__
    if a.layout.key is None or a.layout.key != b.layout.key:
        return False
    a.layout.keep.append(b)     # (its code stays in its engine anyway)
    a.layout.cell.value = b.layout.cell.value
    for name in ("llvm_ir", "libraries", "level"):
        if hasattr(b, name):
            setattr(a, name, getattr(b, name))
    return True


# -- from the loop-level form ---------------------------------------------------------------------
def _poison_bytes(dtype: str) -> bytes:
    from jitflow.backends.numba_cpu.pyprint import POISON
    text = POISON.get(dtype, "0")
    value = float("nan") if text == "np.nan" else text == "True" if dtype == "bool" \
        else int(text)
    return np.array(value, dtype).tobytes()


def _int(v) -> int:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise Unsupported(f"dim parameter {v!r}")
    return int(v)


class _DimProgram:
    """Symbolic dims (jitflow/compiler/ir.py, printed by pytext.dim_text) as dim-program
    registers of a layout, evaluated as the Python text is."""

    def __init__(self, layout: Layout, regs: dict) -> None:
        self.L = layout
        self.regs = regs     # ("in"|"var", slot, axis) -> register

    def __call__(self, d) -> int:
        L = self.L
        if isinstance(d, (int, np.integer)) and not isinstance(d, bool):
            return L.const(int(d))
        if not isinstance(d, tuple) or not d:
            raise Unsupported(f"dim {d!r}")
        r = L.memo.get(("dim", d))
        if r is None:
            r = L.memo[("dim", d)] = self._new(d)
        return r

    def _new(self, d: tuple) -> int:
        L, k = self.L, d[0]
        if k == "const":
            return L.const(_int(d[1]))
        if k in ("prod", "div", "mod"):
            terms = [self(x) for x in d[1]]
            r = L.product(terms) if terms else L.const(1)
            return r if k == "prod" else L.op(k, r, L.const(_int(d[2])))
        if k == "arith":
            ops = {"+": "add", "-": "sub", "*": "mul"}
            if d[1] not in ops:
                raise Unsupported(f"dim {d!r}")
            return L.op(ops[d[1]], self(d[2]), self(d[3]))
        if k in ("sstart", "slen"):
            return self._slice(d)
        if k == "sidx":
            i = _int(d[2])
            return L.op("add", self(d[1]), L.const(i)) if i < 0 else L.const(i)
        if k == "ok":   # 1 when lo <= x < hi
            x = self(d[2])
            return L.op("mul", L.op("le", self(d[1]), x), L.op("lt", x, self(d[3])))
        if k == "window":
            _, n, kk, s, dil, same = d
            s, dil, nr = _int(s), _int(dil), self(n)
            if same:
                return nr if s == 1 else L.op("div", L.op("add", nr, L.const(s - 1)),
                                              L.const(s))
            ek = self(kk)
            if dil != 1:
                ek = L.op("add", L.op("mul", L.op("sub", ek, L.const(1)), L.const(dil)),
                          L.const(1))
            q = L.op("div", L.op("sub", nr, ek), L.const(s))
            return L.op("max", L.op("add", q, L.const(1)), L.const(0))
        if len(d) == 3 and k in ("in", "var"):
            r = self.regs.get(d)
            if r is None:
                raise Unsupported(f"dim {d!r} of no operand")
            return r
        raise Unsupported(f"dim {d!r}")

    def _slice(self, d: tuple) -> int:
        L = self.L
        n = self(d[1])
        b, e, s = (None if v is None else _int(v) for v in d[2:5])
        bm, em = bool(d[5]), bool(d[6])
        if s is None or s == 0 or (b is None and not bm) or (e is None and not em):
            raise Unsupported(f"dim {d!r}")
        lo, hi = (L.const(0), n) if s > 0 else (L.const(-1), L.op("sub", n, L.const(1)))

        def clamp(v: int) -> int:
            start = L.op("add", n, L.const(v)) if v < 0 else L.const(v)
            return L.op("min", L.op("max", start, lo), hi)
        if bm:
            st = L.const(0) if s > 0 else L.op("sub", n, L.const(1))
        else:
            st = clamp(b)
        if d[0] == "sstart":
            return st
        en = ((n if s > 0 else L.const(-1)) if em else clamp(e))
        if s > 0:
            num = L.op("add", L.op("sub", en, st), L.const(s - 1))
            return L.op("max", L.const(0), L.op("div", num, L.const(s)))
        num = L.op("add", L.op("sub", st, en), L.const(-s - 1))
        return L.op("max", L.const(0), L.op("div", num, L.const(-s)))


def layout_of(lk, lg, poison: bool = False, name: str = "kernel") -> Layout:
    """The layout of kernel `lk` printed as `lg` (llvmgen.LLVMKernel): what llvmjit's Python
    wrapper (`_wrapper_source`) does, as a descriptor. Raises `Unsupported` for what it does
    not cover."""
    L = Layout(name)
    values: dict = {}
    dregs: dict = {}
    as_object = {src.name for src, _ in lk.views}
    as_object |= {r.name for r in lk.results if isinstance(r, Buf)}
    for group, kind in ((lk.inputs, "in"), (lk.variables, "var")):
        if [b.slot for b in group] != list(range(len(group))):
            raise Unsupported(f"{kind} slots {[b.slot for b in group]}")
        for b in group:
            i = L.arg(b.dtype, b.rank, var=kind == "var",
                      scalar=kind == "in" and b.rank == 0 and b.name not in as_object,
                      ones=b.ones)
            values[b.name] = i
            for k, r in enumerate(L.arg_dims[i]):
                dregs[(kind, b.slot, k)] = r
    dim = _DimProgram(L, dregs)
    if lk.dim_checks:
        a0, b0, op, what = lk.dim_checks[0]
        msg = f"{ERROR_PREFIX}{op}:{what}"     # any failing check is reported as the first
        for a, b, _, _ in lk.dim_checks:
            L.check(dim(a), dim(b), msg)
    for b in lk.buffers:
        if b.name not in values:
            fill = _poison_bytes(b.dtype) if poison and b.poison else None
            values[b.name] = L.empty(b.dtype, [dim(d) for d in b.dims], fill)
    for src, out in lk.views:
        if out.name not in values:
            if src.name not in values:
                raise Unsupported(f"a view of {src.name}")
            values[out.name] = L.view(values[src.name], [dim(d) for d in out.dims])
    rank0 = {}
    for i, dt in lk.scalar_results:
        if dt not in _DTYPES:
            raise Unsupported(f"dtype {dt}")
        rank0[f"r{i}"] = (L.rank0(), dt)
    for kind, key in lg.slots:
        if kind == "ptr":
            if key in values:
                L.slots.append((0, values[key]))
            elif key in rank0:
                L.slots.append((1, rank0[key][0]))
            else:
                raise Unsupported(f"no buffer for {key}")
        else:
            L.slots.append((2, dim(key)))
    scalar_idx = dict(lk.scalar_results)
    for i, r in enumerate(lk.results):
        if isinstance(r, Buf):
            if r.name not in values:
                raise Unsupported(f"no result {r.name}")
            L.results.append((1 if r.kind == "in" else 0, values[r.name]))
        elif isinstance(r, Lit) and i not in scalar_idx:
            obj = np.array(r.value, lk.result_dtypes[i])[()]
            L.keep.append(obj)
            L.results.append((2, id(obj)))
        elif f"r{i}" in rank0:
            k, dt = rank0[f"r{i}"]
            L.results.append((3, k, id(np.dtype(dt))))
        else:
            raise Unsupported(f"result {i}")
    L.errors = [f"{ERROR_PREFIX}{op}:{what}" for op, what in lk.errors]
    L.finish()
    return L
