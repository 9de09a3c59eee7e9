"""The primitives of the loop-level form (jitflow/compiler/loops.py) for Numba kernels, each an
intrinsic that emits exactly the LLVM instruction or call the LLVM printer (llvmgen.py) emits
for the same primitive, so a Numba kernel and a fast-path kernel compute the same bits.

Generated Numba source writes `_jf.floor(x)`, `_jf.frem(a, b)`, `_jf.sdiv(a, b)`,
`_jf.fma(a, b, c)`, `_jf.uno(a, b)`, `_jf.libm_tan(x)`, `_jf.exp(x)`, `_jf.gemm(...)`, ...
(plain arithmetic, comparisons and conversions are Python operators and numpy scalar types,
which Numba lowers to the one instruction each). This module needs only numpy, numba and
llvmlite: exported modules carry it.

The math library (exp, log, tanh, sigmoid, log1p, expm1, pow of float32) is jitflow's own:
branch-free range reductions and polynomials that LLVM's loop vectorizer widens, defined once
as llvmlite IR builders (`MATH_BUILDERS`), inlined into Numba kernels by the intrinsics below
and into fast-path kernels as the same IR text.
"""
from __future__ import annotations


import llvmlite.binding as llb
from llvmlite import ir as lir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from jitflow.backends.numba_cpu import mathir

__all__ = ["frem", "sdiv", "srem", "floor", "ceil", "rint", "trunc", "sqrt", "fabs",
           "copysign", "fma", "uno", "ord_", "gemm", "empty", "flat", "bind_blas",
           "LIBM_NAMES", "libm_symbol", "blas_symbol"]

_F32, _F64 = lir.FloatType(), lir.DoubleType()


def _ltype(t):
    return {types.float32: _F32, types.float64: _F64}.get(t)


# -- exact float instructions and intrinsics ---------------------------------------------------
def _binary_float(instr: str):
    @intrinsic
    def fn(typingctx, a, b):
        if a != b or _ltype(a) is None:
            return None

        def codegen(context, builder, sig, args):
            return getattr(builder, instr)(args[0], args[1])
        return a(a, b), codegen
    return fn


frem = _binary_float("frem")


def _typed(nargs: int, typer):
    """An intrinsic of `nargs` operands, all of one float type (Numba's intrinsics take no
    star-args): `typer(t)` gives (return type, codegen) for that type."""
    def check(args):
        t = args[0]
        return t if _ltype(t) is not None and all(a == t for a in args) else None
    if nargs == 1:
        def fn(typingctx, a):
            t = check([a])
            return None if t is None else (lambda r, cg: (r(a), cg))(*typer(t))
    elif nargs == 2:
        def fn(typingctx, a, b):
            t = check([a, b])
            return None if t is None else (lambda r, cg: (r(a, b), cg))(*typer(t))
    else:
        def fn(typingctx, a, b, c):
            t = check([a, b, c])
            return None if t is None else (lambda r, cg: (r(a, b, c), cg))(*typer(t))
    return fn


def _llvm_intrinsic(name: str, nargs: int):
    def typer(t):
        def codegen(context, builder, sig, vals):
            f = mathir.declare_intrinsic(builder.module, name, _ltype(t), nargs)
            return builder.call(f, list(vals))
        return t, codegen
    fn = _typed(nargs, typer)
    fn.__name__ = name
    return intrinsic(fn)


floor = _llvm_intrinsic("floor", 1)
ceil = _llvm_intrinsic("ceil", 1)
rint = _llvm_intrinsic("rint", 1)
trunc = _llvm_intrinsic("trunc", 1)
sqrt = _llvm_intrinsic("sqrt", 1)
fabs = _llvm_intrinsic("fabs", 1)
copysign = _llvm_intrinsic("copysign", 2)
fma = _llvm_intrinsic("fma", 3)


def _fcmp(pred: str):
    @intrinsic
    def fn(typingctx, a, b):
        if a != b or _ltype(a) is None:
            return None

        def codegen(context, builder, sig, args):
            return builder.fcmp_unordered("uno", args[0], args[1]) if pred == "uno" else \
                builder.fcmp_ordered("ord", args[0], args[1])
        return types.boolean(a, b), codegen
    return fn


uno = _fcmp("uno")    # either operand is NaN
ord_ = _fcmp("ord")   # neither operand is NaN


def _int_div(instr: str):
    @intrinsic
    def fn(typingctx, a, b):
        if a != types.int64 or b != types.int64:
            return None

        def codegen(context, builder, sig, args):
            return getattr(builder, instr)(args[0], args[1])
        return types.int64(a, b), codegen
    return fn


sdiv = _int_div("sdiv")   # the loop form has ruled out a zero divisor and INT_MIN / -1
srem = _int_div("srem")


# -- C math functions ----------------------------------------------------------------------------
LIBM_NAMES = ("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh",
              "atanh", "erf", "atan2", "pow", "exp", "log", "tanh", "log1p", "expm1")


def libm_symbol(name: str, dtype: str) -> str:
    """The C symbol of math function `name` for `dtype` (float32: the "f" form)."""
    return name + ("f" if dtype == "float32" else "")


def _libm(name: str):
    nargs = 2 if name in ("atan2", "pow") else 1

    def typer(t):
        def codegen(context, builder, sig, vals):
            lt = _ltype(t)
            sym = libm_symbol(name, "float32" if t == types.float32 else "float64")
            f = cgutils.get_or_insert_function(builder.module,
                                               lir.FunctionType(lt, [lt] * nargs), sym)
            return builder.call(f, list(vals))
        return t, codegen
    fn = _typed(nargs, typer)
    fn.__name__ = f"libm_{name}"
    return intrinsic(fn)


# (no module-level `name` or `_name`: Numba's alias analysis names a call through this module
# by the first of `name`, `_name`, `__name__` it finds on it)
for _fn in LIBM_NAMES:
    globals()[f"libm_{_fn}"] = _libm(_fn)
    __all__.append(f"libm_{_fn}")
del _fn


def _load_libm() -> None:
    """Make libm's symbols resolvable by LLVM (they are, through the process, on Linux; this
    makes sure where the C library keeps them apart)."""
    import ctypes.util
    path = ctypes.util.find_library("m")
    if path:
        try:
            llb.load_library_permanently(path)
        except RuntimeError:
            pass


_load_libm()


# -- BLAS ----------------------------------------------------------------------------------------
def blas_symbol(dtype: str) -> str:
    """The LLVM symbol bound to scipy's ?gemm for `dtype` (blas.py)."""
    return "jitflow_sgemm" if dtype == "float32" else "jitflow_dgemm"


def bind_blas() -> None:
    """Bind the gemm symbols to scipy's BLAS, unless they are bound already (jitflow binds
    them first, cheaply, in blas.py; an exported module, which carries no jitflow, here)."""
    if llb.address_of_symbol(blas_symbol("float32")):
        return
    import ctypes as _ct

    from scipy.linalg import cython_blas as _cb
    get_name = _ct.pythonapi.PyCapsule_GetName
    get_name.restype = _ct.c_char_p
    get_name.argtypes = [_ct.py_object]
    get_ptr = _ct.pythonapi.PyCapsule_GetPointer
    get_ptr.restype = _ct.c_void_p
    get_ptr.argtypes = [_ct.py_object, _ct.c_char_p]
    for dt, fn in (("float32", "sgemm"), ("float64", "dgemm")):
        cap = _cb.__pyx_capi__[fn]
        llb.add_symbol(blas_symbol(dt), get_ptr(cap, get_name(cap)))


def gemm_call(builder, dtype: str, ta, tb, m, n, k, a_ptr, b_ptr, c_ptr, alloca) -> None:
    """Emit out (m x n, row-major, at c_ptr) = op(a) @ op(b) as the column-major product
    out^T = op(b)^T op(a)^T: one ?gemm call (the caller handles m, n or k of 0). `ta`/`tb`
    are Python bools, m/n/k i64 values, pointers i8*; `alloca(type)` makes an entry-block
    stack slot. Shared by the Numba intrinsic and, as text, mirrored by the LLVM printer."""
    i8, i32 = lir.IntType(8), lir.IntType(32)
    ft = _F32 if dtype == "float32" else _F64
    ptr = lir.IntType(8).as_pointer()

    def slot(ty, value):
        p = alloca(ty)
        builder.store(value, p)
        return builder.bitcast(p, ptr)

    def i32v(x):
        return slot(i32, builder.trunc(x, i32))
    ldb = k if tb else n
    lda = m if ta else k
    fnty = lir.FunctionType(lir.VoidType(), [ptr] * 13)
    f = cgutils.get_or_insert_function(builder.module, fnty, blas_symbol(dtype))
    args = [slot(i8, i8(ord("T" if tb else "N"))), slot(i8, i8(ord("T" if ta else "N"))),
            i32v(n), i32v(m), i32v(k), slot(ft, ft(1.0)), b_ptr, i32v(ldb), a_ptr, i32v(lda),
            slot(ft, ft(0.0)), c_ptr, i32v(n)]
    builder.call(f, args)


bind_blas()   # kernels that call gemm resolve its symbols when they are compiled or loaded


@intrinsic
def gemm(typingctx, ta, tb, m, n, k, a, b, out):
    """out (m x n) = op(a) @ op(b) for float C-contiguous matrices (ta, tb: literal bools);
    zeros when k is 0, nothing when m or n is 0."""
    if not all(isinstance(x, types.Array) and x.ndim == 2 and x.layout == "C"
               for x in (a, b, out)) or not (a.dtype == b.dtype == out.dtype) or \
            a.dtype not in (types.float32, types.float64):
        return None
    if not all(isinstance(x, types.BooleanLiteral) for x in (ta, tb)):
        return None
    dtype = "float32" if a.dtype == types.float32 else "float64"
    lit_ta, lit_tb = ta.literal_value, tb.literal_value

    def codegen(context, builder, sig, args):
        _, _, mv, nv, kv, av, bv, ov = args
        i64 = lir.IntType(64)
        mv, nv, kv = (context.cast(builder, v, t, types.int64)
                      for v, t in zip((mv, nv, kv), sig.args[2:5]))
        arrs = [context.make_array(t)(context, builder, v)
                for t, v in zip(sig.args[5:], (av, bv, ov))]
        ptrs = [builder.bitcast(x.data, lir.IntType(8).as_pointer()) for x in arrs]
        empty = builder.or_(builder.icmp_signed("==", mv, i64(0)),
                            builder.icmp_signed("==", nv, i64(0)))
        with builder.if_then(builder.not_(empty)):
            with builder.if_else(builder.icmp_signed("==", kv, i64(0))) as (zero, work):
                with zero:
                    ft = _F32 if dtype == "float32" else _F64
                    out = builder.bitcast(arrs[2].data, ft.as_pointer())
                    total = builder.mul(mv, nv)
                    with cgutils.for_range(builder, total) as loop:
                        builder.store(ft(0.0), builder.gep(out, [loop.index]))
                with work:
                    gemm_call(builder, dtype, lit_ta, lit_tb, mv, nv, kv, ptrs[0], ptrs[1],
                              ptrs[2], lambda ty: cgutils.alloca_once(builder, ty))
        return context.get_dummy_value()
    return types.none(ta, tb, m, n, k, a, b, out), codegen


# -- arrays --------------------------------------------------------------------------------------
# -- flat views ----------------------------------------------------------------------------
@intrinsic
def flat(typingctx, a):
    """The 1-d view of a C-contiguous array: what `a.reshape(a.size)` gives, without the
    size checks and helper calls Numba's reshape is lowered to. Generated kernels take one per
    operand of every flat loop, and each reshape cost ~10 ms of Numba and LLVM time."""
    if not isinstance(a, types.Array) or a.layout != "C" or a.ndim == 0:
        return None
    ret = a.copy(ndim=1, layout="C")

    def codegen(context, builder, signature, args):
        from numba.core import cgutils
        from numba.core.imputils import impl_ret_borrowed
        src = context.make_array(signature.args[0])(context, builder, args[0])
        dst = context.make_array(signature.return_type)(context, builder)
        context.populate_array(dst, data=src.data,
                               shape=cgutils.pack_array(builder, [src.nitems]),
                               strides=cgutils.pack_array(builder, [src.itemsize]),
                               itemsize=src.itemsize, meminfo=src.meminfo, parent=src.parent)
        return impl_ret_borrowed(context, builder, signature.return_type, dst._getvalue())

    return ret(a), codegen


def _flat_aliases(lhs, args, alias_map, arg_aliases) -> None:
    """Numba's dead-code and parfor passes: the result of `flat` is a view of its argument
    (stores through it are stores into the argument)."""
    from numba.core import ir_utils
    ir_utils._add_alias(lhs, args[0].name, alias_map, arg_aliases)


def _register_view_aliases() -> None:
    """Numba's dead-code and parfor passes: `_jf.flat(a)` is a view of `a` (stores through it
    are stores into `a`); Numba names the call by the module kernels reach it through."""
    from numba.core import ir_utils
    ir_utils.alias_func_extensions[("flat", __name__)] = _flat_aliases


_register_view_aliases()


# -- allocation ----------------------------------------------------------------------------
@intrinsic
def empty(typingctx, shape, dtype):
    """A new uninitialized C-contiguous array of `shape` (a tuple of non-negative ints) and
    scalar type `dtype`: what `np.empty(shape, dtype)` gives, lowered inline to one NRT
    allocation without np.empty's shape parsing, negative-dimension and overflow checks and
    calls (~9 ms of Numba and LLVM time per call site). Generated kernels call it only with
    dims that cannot be negative (input and variable sizes, constants, their products)."""
    if isinstance(shape, types.Integer):
        dims = (shape,)
    elif isinstance(shape, types.BaseTuple) and all(isinstance(t, types.Integer)
                                                    for t in shape.types):
        dims = tuple(shape.types)
    else:
        return None
    if not isinstance(dtype, types.NumberClass):
        return None
    ret = types.Array(dtype.instance_type, len(dims), "C")
    tuple_arg = not isinstance(shape, types.Integer)

    def codegen(context, builder, signature, args):
        from numba.core import cgutils
        from numba.core.imputils import impl_ret_new_ref
        arrty = signature.return_type
        vals = cgutils.unpack_tuple(builder, args[0]) if tuple_arg else [args[0]]
        shapes = [context.cast(builder, v, t, types.intp) for v, t in zip(vals, dims)]
        itemsize = context.get_constant(types.intp,
                                        context.get_abi_sizeof(
                                            context.get_data_type(arrty.dtype)))
        strides, nbytes = [], itemsize
        for s in reversed(shapes):
            strides.append(nbytes)
            nbytes = builder.mul(nbytes, s)
        strides.reverse()
        align = context.get_constant(types.uint32,
                                     context.get_preferred_array_alignment(arrty.dtype))
        meminfo = context.nrt.meminfo_alloc_aligned(builder, nbytes, align)
        data = context.nrt.meminfo_data(builder, meminfo)
        ary = context.make_array(arrty)(context, builder)
        intp_t = context.get_value_type(types.intp)
        context.populate_array(ary, data=builder.bitcast(data, ary.data.type),
                               shape=cgutils.pack_array(builder, shapes, ty=intp_t),
                               strides=cgutils.pack_array(builder, strides, ty=intp_t),
                               itemsize=itemsize, meminfo=meminfo)
        return impl_ret_new_ref(context, builder, arrty, ary._getvalue())

    return ret(shape, dtype), codegen



# -- the math library: mathir.py's functions, defined in the kernel's module and called --------
def _math(fn: str):
    nargs = 2 if fn == "pow" else 1

    def typer(t):
        dtype = "float32" if t == types.float32 else "float64"
        if (fn, dtype) not in mathir.FUNCTIONS:
            return None

        def codegen(context, builder, sig, vals):
            return builder.call(mathir.define(builder.module, fn, dtype), list(vals))
        return t, codegen

    def checked(t):
        out = typer(t)
        if out is None:
            raise TypeError(f"no {fn} for {t}")
        return out
    f = _typed(nargs, checked)
    f.__name__ = fn
    return intrinsic(f)


exp = _math("exp")
log = _math("log")
tanh = _math("tanh")
sigmoid = _math("sigmoid")
log1p = _math("log1p")
expm1 = _math("expm1")
pow = _math("pow")   # noqa: A001
__all__ += ["exp", "log", "tanh", "sigmoid", "log1p", "expm1", "pow"]


