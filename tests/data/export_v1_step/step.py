"""step: a function exported by jitflow 0.1.0. Needs only numpy and numba.

Feeds: x:0 float32[None, 2], y:0 float32[None, 1]
Fetches: loss:0
Updates: w, b

Use it without jitflow (the folder holds this file, manifest.json and state.npz):

    import sys; sys.path.insert(0, "/path/to/this/folder")
    import step
    f = step.load()   # checks every file's sha256; f(*feeds) -> fetches, f.save_state()

`load` runs only bytes it has checked, but `import` may first run bytecode that Python cached
in __pycache__: where others can write this folder, load it with `jitflow.load(folder)`,
which checks every file before running any of it.
"""

# ---- generated kernels -------------------------------------------------------------------
# ---- vectorizable math helpers (a copy of jitflow.backends.numba_cpu.vecmath) -------------------
import hashlib
import math
import os

import numba
import numpy as np
from numba import types
from numba.extending import intrinsic

__all__ = [
    "exp32", "exp64", "log32", "log64", "tanh32", "tanh64", "sigmoid32", "sigmoid64",
    "log1p32", "log1p64", "expm1_32", "expm1_64", "pow32", "sigmoid32_libm",
    "sigmoid64_libm", "flat", "empty", "FUNCS", "HELPERS", "LIBM", "OPS", "JIT_OPTIONS",
    "CACHE_TOKEN", "use_libm", "helper_name", "call_source", "import_source",
]

#: The compile flags the JIT uses and these helpers are written for.
JIT_OPTIONS = {"error_model": "numpy", "fastmath": {"contract"}}

# internal pieces: inlined at the Numba IR level; public helpers: LLVM alwaysinline (docstring)
_helper = numba.njit(inline="always", **JIT_OPTIONS)
# compiled once per machine, not per process: Numba caches them on disk, and jitflow lets it
# read only private cache files (see cpu._vecmath_table); an exported module's copy of this
# file compiles them in memory (it must not write or read files beside itself)
_CACHE_HELPERS = __name__ == "jitflow.backends.numba_cpu.vecmath"
# no cfunc wrappers: the helpers are called from kernels (and Python), never as C functions
_public = numba.njit(forceinline=True, cache=_CACHE_HELPERS, no_cfunc_wrapper=True,
                     **JIT_OPTIONS)


# -- bit casts -----------------------------------------------------------------------------
def _bitcast(src, dst):
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(dst))
    return dst(src), codegen


@intrinsic
def _f32_bits(typingctx, x):
    """The bits of a float32 as an int32."""
    return _bitcast(types.float32, types.int32) if x == types.float32 else None


@intrinsic
def _bits_f32(typingctx, i):
    """The float32 whose bits are the int32 `i`."""
    return _bitcast(types.int32, types.float32) if i == types.int32 else None


@intrinsic
def _f64_bits(typingctx, x):
    """The bits of a float64 as an int64."""
    return _bitcast(types.float64, types.int64) if x == types.float64 else None


@intrinsic
def _bits_f64(typingctx, i):
    """The float64 whose bits are the int64 `i`."""
    return _bitcast(types.int64, types.float64) if i == types.int64 else None


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


def _register_flat_aliases() -> None:
    from numba.core import ir_utils
    ir_utils.alias_func_extensions[("flat", __name__)] = _flat_aliases


_register_flat_aliases()


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


# -- float32 constants ---------------------------------------------------------------------
_F = np.float32
_ONE32, _TWO32, _HALF32, _ZERO32 = _F(1), _F(2), _F(0.5), _F(0)
_INF32, _NAN32 = _F(np.inf), _F(np.nan)
_LOG2E32 = _F(1.442695)
_LN2HI32 = _F(0.693145751953125)      # 15 significant bits: k * _LN2HI32 is exact
_LN2LO32 = _F(1.4286068e-06)
_SHIFT32 = _F(12582912.0)             # 1.5 * 2**23: adding it rounds to an integer
_SHIFT32_BITS = 0x4B400000
_SQRTH32_BITS = 0x3F3504F3            # float32(sqrt(1/2))
_EXP32_HI = _F(89.0)                  # beyond the overflow threshold 88.7228
_EXP32_LO = _F(-104.0)                # beyond the underflow threshold -103.972
_EXPM1_32_LO = _F(-80.0)              # expm1 is -1 in float32 below -17.33
_TINY32 = _F(1.1754944e-38)           # smallest normal
_TWO23_32 = _F(8388608.0)
_TANH32_T = _F(0.625)
_TANH32_CLAMP = _F(40.0)              # 1 - 2/(exp(40) + 1) == 1

# exp(r) = 1 + r + r^2 * P(r), |r| <= ln2/2
_EXP32_P = tuple(_F(c) for c in (
    "0.49999994", "0.16666521", "0.04166839", "0.008368745", "0.0013814539"))
# expm1(r) = r + r^2 * Q(r)
_EXPM1_32_Q = tuple(_F(c) for c in (
    "0.5", "0.16666669", "0.04166652", "0.008332854", "0.0013929482", "0.00020170353"))
# log1p(f) = 2*atanh(s) = 2s + s*z*G(z), s = f/(2+f), z = s^2
_LOG32_G = tuple(_F(c) for c in ("0.66666776", "0.39977527", "0.2987228"))
# tanh(x) = x + x^3 * P(x^2), |x| < 0.625
_TANH32_P = tuple(_F(c) for c in (
    "-0.3333333", "0.13333206", "-0.053946763", "0.021700703", "-0.008177399",
    "0.0021429618"))

# -- float64 constants ---------------------------------------------------------------------
_D = np.float64
_ONE64, _TWO64, _HALF64, _ZERO64 = _D(1), _D(2), _D(0.5), _D(0)
_INF64, _NAN64 = _D(np.inf), _D(np.nan)
_LOG2E64 = _D(1.4426950408889634)
_LN2HI64 = _D(0.6931471805592082)     # 40 significant bits
_LN2LO64 = _D(7.371002679751326e-13)
_SHIFT64 = _D(6755399441055744.0)     # 1.5 * 2**52
_SHIFT64_BITS = 0x4338000000000000
_SQRTH64_BITS = 0x3FE6A09E667F3BCD
_EXP64_HI = _D(710.0)                 # overflow threshold 709.7827
_EXP64_LO = _D(-746.0)                # underflow threshold -745.133
_EXPM1_64_LO = _D(-700.0)             # expm1 is -1 in float64 below -37.43
_TINY64 = _D(2.2250738585072014e-308)
_TWO54_64 = _D(18014398509481984.0)
_TANH64_T = _D(0.625)
_TANH64_CLAMP = _D(80.0)

_EXP64_P = tuple(_D(c) for c in (
    0.5, 0.16666666666666682, 0.04166666666666651, 0.008333333333316453,
    0.0013888888888941439, 0.00019841269898927607, 2.480158724212976e-05,
    2.755723165743011e-06, 2.7557325490164817e-07, 2.511329685958975e-08,
    2.090328001919099e-09))
_EXPM1_64_Q = tuple(_D(c) for c in (
    0.5, 0.1666666666666667, 0.041666666666667594, 0.008333333333326353,
    0.001388888888832366, 0.00019841269874202504, 2.4801588564070977e-05,
    2.7557256055397486e-06, 2.755613682383468e-07, 2.510498671646104e-08,
    2.128331826654575e-09))
_LOG64_G = tuple(_D(c) for c in (
    0.6666666666666735, 0.39999999999412683, 0.28571428742913557, 0.22222198511183375,
    0.1818356794507233, 0.15313948276682907, 0.14797065861288128))
_TANH64_P = tuple(_D(c) for c in (
    -0.33333333333333326, 0.13333333333331177, -0.053968253966666366, 0.021869488481410723,
    -0.008863234463897508, 0.0035921151017576603, -0.0014557309709016279,
    0.0005894658875986158, -0.0002370339823030069, 9.157203554699414e-05,
    -3.0178836386088976e-05, 6.030377695716758e-06))

_P0, _P1, _P2, _P3, _P4 = _EXP32_P
_Q0, _Q1, _Q2, _Q3, _Q4, _Q5 = _EXPM1_32_Q
_G0, _G1, _G2 = _LOG32_G
_T0, _T1, _T2, _T3, _T4, _T5 = _TANH32_P
_DP = _EXP64_P
_DQ = _EXPM1_64_Q
_DG = _LOG64_G
_DT = _TANH64_P


# -- exp -----------------------------------------------------------------------------------
@_helper
def _pow2_32(n):
    """2**n for an integer n in [-126, 127] (any int type), through the exponent bits."""
    return _bits_f32(np.int32((n + 127) << 23))


@_helper
def _pow2_64(n):
    """2**n for an integer n in [-1022, 1023], through the exponent bits."""
    return _bits_f64(np.int64((n + 1023) << 52))


@_helper
def _reduce32(x):
    """(k, r, rlo): x = k*ln2 + r + rlo, |r| <= ln2/2, k an integer (x clamped by the caller).

    k*ln2hi is exact and x - k*ln2hi too (Sterbenz); rlo is the rounding error of r."""
    t = x * _LOG2E32 + _SHIFT32
    k = t - _SHIFT32
    rh = x - k * _LN2HI32
    r = rh - k * _LN2LO32
    return np.int32(_f32_bits(t) - _SHIFT32_BITS), r, (rh - r) - k * _LN2LO32


@_helper
def _reduce64(x):
    t = x * _LOG2E64 + _SHIFT64
    k = t - _SHIFT64
    rh = x - k * _LN2HI64
    r = rh - k * _LN2LO64
    return _f64_bits(t) - _SHIFT64_BITS, r, (rh - r) - k * _LN2LO64


@_helper
def _estrin10(r, r2, c):
    """c[0] + c[1]*r + ... + c[10]*r**10 by Estrin's scheme (short dependency chains)."""
    r4 = r2 * r2
    return (((c[0] + c[1] * r) + (c[2] + c[3] * r) * r2)
            + ((c[4] + c[5] * r) + (c[6] + c[7] * r) * r2) * r4
            + ((c[8] + c[9] * r) + c[10] * r2) * (r4 * r4))


@_public
def exp32(x):
    """exp(x) for float32 x."""
    x = np.float32(x)
    x = _EXP32_HI if x > _EXP32_HI else x
    x = _EXP32_LO if x < _EXP32_LO else x
    ki, r, rlo = _reduce32(x)
    r2 = r * r
    p = (_P0 + _P1 * r) + (_P2 + _P3 * r + _P4 * r2) * r2
    p = _ONE32 + (r + (r2 * p + rlo))
    # 2**k in two halves: both normal for k in [-150, 129]; the last product rounds once
    h = ki >> 1
    return (p * _pow2_32(h)) * _pow2_32(ki - h)


@_public
def exp64(x):
    """exp(x) for float64 x."""
    x = np.float64(x)
    x = _EXP64_HI if x > _EXP64_HI else x
    x = _EXP64_LO if x < _EXP64_LO else x
    ki, r, rlo = _reduce64(x)
    r2 = r * r
    p = _estrin10(r, r2, _DP)
    p = _ONE64 + (r + (r2 * p + rlo))
    h = ki >> 1
    return (p * _pow2_64(h)) * _pow2_64(ki - h)


# -- expm1 ---------------------------------------------------------------------------------
@_public
def expm1_32(x):
    """exp(x) - 1 for float32 x, accurate near 0."""
    x = np.float32(x)
    xc = _EXP32_HI if x > _EXP32_HI else x
    xc = _EXPM1_32_LO if xc < _EXPM1_32_LO else xc
    ki, r, rlo = _reduce32(xc)
    r2 = r * r
    q = (_Q0 + _Q1 * r) + ((_Q2 + _Q3 * r) + (_Q4 + _Q5 * r) * r2) * r2
    t = r2 * q + rlo
    p = r + t
    plo = (r - p) + t                           # p + plo = expm1(r) without p's rounding
    # 2**k * (1 + p) - 1; k = 128 is done as 2 * (2**127 * (1 + p)) where the -1 is lost anyway
    big = ki > 127
    s = _pow2_32(127 if big else ki)
    res = s * plo + (s * p + (s - _ONE32))     # s * p is exact
    res = res * _TWO32 if big else res
    return x if x == _ZERO32 else res


@_public
def expm1_64(x):
    """exp(x) - 1 for float64 x, accurate near 0."""
    x = np.float64(x)
    xc = _EXP64_HI if x > _EXP64_HI else x
    xc = _EXPM1_64_LO if xc < _EXPM1_64_LO else xc
    ki, r, rlo = _reduce64(xc)
    r2 = r * r
    t = r2 * _estrin10(r, r2, _DQ) + rlo
    p = r + t
    plo = (r - p) + t
    big = ki > 1023
    s = _pow2_64(1023 if big else ki)
    res = s * plo + (s * p + (s - _ONE64))
    res = res * _TWO64 if big else res
    return x if x == _ZERO64 else res


# -- log -----------------------------------------------------------------------------------
@_helper
def _split32(x):
    """(k, m) with x = 2**k * m, m in [sqrt(1/2), sqrt(2)), for positive finite float32 x."""
    sub = x < _TINY32
    ix = _f32_bits(x * _TWO23_32 if sub else x)
    k = np.int32(ix - _SQRTH32_BITS) >> 23
    m = _bits_f32(np.int32(ix - (k << 23)))
    return np.float32(k) - (_F(23.0) if sub else _ZERO32), m


@_helper
def _split64(x):
    sub = x < _TINY64
    ix = _f64_bits(x * _TWO54_64 if sub else x)
    k = (ix - _SQRTH64_BITS) >> 52
    m = _bits_f64(ix - (k << 52))
    return np.float64(k) - (_D(54.0) if sub else _ZERO64), m


@_helper
def _log_finish32(k, f):
    """k*ln2 + log(1 + f) for f in [sqrt(1/2) - 1, sqrt(2) - 1]."""
    s = f / (_TWO32 + f)
    z = s * s
    g = (_G2 * z + _G1) * z + _G0
    hfsq = _HALF32 * (f * f)
    lo = s * (hfsq + z * g) + k * _LN2LO32
    return k * _LN2HI32 + (f - (hfsq - lo))


@_helper
def _log_finish64(k, f):
    s = f / (_TWO64 + f)
    z = s * s
    z2 = z * z
    g = ((_DG[0] + _DG[1] * z) + (_DG[2] + _DG[3] * z) * z2
         + ((_DG[4] + _DG[5] * z) + _DG[6] * z2) * (z2 * z2))
    hfsq = _HALF64 * (f * f)
    lo = s * (hfsq + z * g) + k * _LN2LO64
    return k * _LN2HI64 + (f - (hfsq - lo))


@_public
def log32(x):
    """Natural log for float32 x: -inf at +-0, nan below 0."""
    x = np.float32(x)
    k, m = _split32(x)
    res = _log_finish32(k, m - _ONE32)
    res = res if x < _INF32 else x              # +inf and nan
    res = _NAN32 if x < _ZERO32 else res
    return -_INF32 if x == _ZERO32 else res


@_public
def log64(x):
    """Natural log for float64 x: -inf at +-0, nan below 0."""
    x = np.float64(x)
    k, m = _split64(x)
    res = _log_finish64(k, m - _ONE64)
    res = res if x < _INF64 else x
    res = _NAN64 if x < _ZERO64 else res
    return -_INF64 if x == _ZERO64 else res


@_public
def log1p32(x):
    """log(1 + x) for float32 x, accurate near 0."""
    x = np.float32(x)
    u = x + _ONE32
    # 1 + x == u + c exactly (Fast2Sum, the larger operand first)
    c = (x - (u - _ONE32)) if abs(x) <= _ONE32 else (_ONE32 - (u - x))
    k, m = _split32(u)
    # fold c into f: 1 + x = 2**k * (m + c * 2**-k); c is 0 whenever k is large
    ki = np.int32(k)
    f = (m - _ONE32) + c * _pow2_32(-(ki if ki < 126 else 126))
    res = _log_finish32(k, f)
    res = res if u < _INF32 else u
    res = _NAN32 if u < _ZERO32 else res
    res = -_INF32 if u == _ZERO32 else res
    return x if x == _ZERO32 else res


@_public
def log1p64(x):
    """log(1 + x) for float64 x, accurate near 0."""
    x = np.float64(x)
    u = x + _ONE64
    c = (x - (u - _ONE64)) if abs(x) <= _ONE64 else (_ONE64 - (u - x))
    k, m = _split64(u)
    ki = np.int64(k)
    f = (m - _ONE64) + c * _pow2_64(-(ki if ki < 1022 else 1022))
    res = _log_finish64(k, f)
    res = res if u < _INF64 else u
    res = _NAN64 if u < _ZERO64 else res
    res = -_INF64 if u == _ZERO64 else res
    return x if x == _ZERO64 else res


# -- tanh, sigmoid -------------------------------------------------------------------------
@_helper
def _exp32_tanh(y):
    """exp(y) for y >= 0 where only 1 - 2/(exp(y) + 1) matters: y is clamped to 40, so 2**k
    needs one scaling step."""
    y = _TANH32_CLAMP if y > _TANH32_CLAMP else y
    ki, r, rlo = _reduce32(y)
    r2 = r * r
    p = (_P0 + _P1 * r) + (_P2 + _P3 * r + _P4 * r2) * r2
    return (_ONE32 + (r + (r2 * p + rlo))) * _pow2_32(ki)


@_helper
def _exp64_tanh(y):
    y = _TANH64_CLAMP if y > _TANH64_CLAMP else y
    ki, r, rlo = _reduce64(y)
    r2 = r * r
    return (_ONE64 + (r + (r2 * _estrin10(r, r2, _DP) + rlo))) * _pow2_64(ki)


@_public
def tanh32(x):
    """tanh(x) for float32 x."""
    x = np.float32(x)
    a = abs(x)
    w = x * x
    w2 = w * w
    p = (_T0 + _T1 * w) + ((_T2 + _T3 * w) + (_T4 + _T5 * w) * w2) * w2
    small = x + (x * w) * p
    big = _ONE32 - _TWO32 / (_exp32_tanh(a + a) + _ONE32)
    big = -big if x < _ZERO32 else big
    res = small if a < _TANH32_T else big
    return x if x == _ZERO32 else res


@_public
def tanh64(x):
    """tanh(x) for float64 x."""
    x = np.float64(x)
    a = abs(x)
    w = x * x
    w2 = w * w
    w4 = w2 * w2
    p = (((_DT[0] + _DT[1] * w) + (_DT[2] + _DT[3] * w) * w2)
         + ((_DT[4] + _DT[5] * w) + (_DT[6] + _DT[7] * w) * w2) * w4
         + ((_DT[8] + _DT[9] * w) + (_DT[10] + _DT[11] * w) * w2) * (w4 * w4))
    small = x + (x * w) * p
    big = _ONE64 - _TWO64 / (_exp64_tanh(a + a) + _ONE64)
    big = -big if x < _ZERO64 else big
    res = small if a < _TANH64_T else big
    return x if x == _ZERO64 else res


@_helper
def _exp32_hilo(x):
    """exp(x) = hi + lo for x <= 0, lo being the rounding error of the last sum."""
    x = _EXP32_LO if x < _EXP32_LO else x
    ki, r, rlo = _reduce32(x)
    r2 = r * r
    p = (_P0 + _P1 * r) + (_P2 + _P3 * r + _P4 * r2) * r2
    t = r2 * p + rlo
    q = r + t
    hi = _ONE32 + q
    lo = (_ONE32 - hi) + q
    h = ki >> 1
    s1 = _pow2_32(h)
    s2 = _pow2_32(ki - h)
    return (hi * s1) * s2, (lo * s1) * s2


@_public
def sigmoid32(x):
    """1 / (1 + exp(-x)) for float32 x, exact down into the subnormals."""
    x = np.float32(x)
    e, elo = _exp32_hilo(-abs(x))
    pos = x >= _ZERO32
    num = _ONE32 if pos else e
    den = _ONE32 + e
    dlo = ((_ONE32 - den) + e) + elo
    res = num / den
    # one Newton step on num/den with the low parts; 1/den is res or 1 - res
    inv = res if pos else _ONE32 - res
    rem = (num - res * den) + ((_ZERO32 if pos else elo) - res * dlo)
    return res + rem * inv


@_helper
def _exp64_hilo(x):
    """exp(x) = hi + lo for x <= 0, lo being the rounding error of the last sum."""
    x = _EXP64_LO if x < _EXP64_LO else x
    ki, r, rlo = _reduce64(x)
    r2 = r * r
    t = r2 * _estrin10(r, r2, _DP) + rlo
    q = r + t
    hi = _ONE64 + q
    lo = (_ONE64 - hi) + q
    h = ki >> 1
    s1 = _pow2_64(h)
    s2 = _pow2_64(ki - h)
    return (hi * s1) * s2, (lo * s1) * s2


@_public
def sigmoid64(x):
    """1 / (1 + exp(-x)) for float64 x, exact down into the subnormals."""
    x = np.float64(x)
    e, elo = _exp64_hilo(-abs(x))
    pos = x >= _ZERO64
    num = _ONE64 if pos else e
    den = _ONE64 + e
    dlo = ((_ONE64 - den) + e) + elo
    res = num / den
    inv = res if pos else _ONE64 - res
    rem = (num - res * den) + ((_ZERO64 if pos else elo) - res * dlo)
    return res + rem * inv


# -- pow -----------------------------------------------------------------------------------
@_public
def pow32(x, y):
    """x ** y for float32 x, y with C99/NumPy semantics, computed in float64."""
    x = np.float32(x)
    y = np.float32(y)
    xd = np.float64(x)
    yd = np.float64(y)
    a = abs(xd)
    r = exp64(yd * log64(a))
    fl = np.floor(yd)
    yfrac = fl != yd                                # false for +-inf
    yhalf = _HALF64 * yd
    yodd = (np.floor(yhalf) != yhalf) & (fl == yd)
    neg = _f32_bits(x) < 0                          # sign bit: -0.0 counts
    r = -r if neg & yodd else r
    r = _NAN64 if (xd < _ZERO64) & (xd > -_INF64) & yfrac else r
    one = (yd == _ZERO64) | (xd == _ONE64) | ((a == _ONE64) & (abs(yd) == _INF64))
    return np.float32(_ONE64 if one else r)


# -- libm-backed forms for JITFLOW_LIBM=1 (sigmoid has no math.* counterpart) --------------
@_public
def sigmoid32_libm(x):
    """sigmoid through libm's expf (the JITFLOW_LIBM=1 form of sigmoid32)."""
    x = np.float32(x)
    e = math.exp(-abs(x))
    return (_ONE32 if x >= _ZERO32 else e) / (_ONE32 + e)


@_public
def sigmoid64_libm(x):
    """sigmoid through libm's exp (the JITFLOW_LIBM=1 form of sigmoid64)."""
    x = np.float64(x)
    e = math.exp(-abs(x))
    return (_ONE64 if x >= _ZERO64 else e) / (_ONE64 + e)


# -- column sums, called (not inlined) by generated kernels -----------------------------------
# A sum or mean over the leading axes of a stored array (a bias gradient, `Unbroadcast`)
# written out in a kernel is three loops and two temporaries: ~0.1 s of Numba compile time
# each time. Called here instead it is one line of the kernel, compiled once per machine. Same
# arithmetic as the inline form: float64 partial sums per column, rows in order.
_called = numba.njit(cache=_CACHE_HELPERS, no_cfunc_wrapper=True, **JIT_OPTIONS)


@_called
def colsum(a, out, mean):
    """out[j] = sum (or mean) over i of a[i, j] (a: [R, C] float32 or float64), accumulated in
    float64 and rounded once to out's dtype."""
    rows, cols = a.shape
    acc = np.zeros(cols, np.float64)
    for i in range(rows):
        for j in range(cols):
            acc[j] += a[i, j]
    for j in range(cols):
        out[j] = acc[j] / rows if mean else acc[j]


# -- a @ b.T with few rows, called by generated kernels -----------------------------------------
# The BLAS Numba calls (OpenBLAS) runs a @ b.T with a short and wide (a backpropagated batch
# times a transposed weight matrix) well below its peak: the CNN's fc1 input gradient, 32 x
# 1024 times 1024 x 3136, took 4.3 ms where b @ a.T, the same products as 3136 x 32, took 2.6 ms
# including the transposing copy. Measured on this machine's OpenBLAS: worth it from about 256
# columns of a and an output 4 times wider than tall; squares and tiny inner sizes are not.
_NT_MAX_ROWS = 64
_NT_MIN_INNER = 256


@_called
def dot_nt(a, b, out):
    """out = a @ b.T (a: [m, k], b: [n, k] float arrays; out: [m, n] C-contiguous)."""
    m, k = a.shape
    n = b.shape[0]
    if m <= _NT_MAX_ROWS and k >= _NT_MIN_INNER and n >= 4 * m:
        tmp = np.empty((n, m), out.dtype)
        np.dot(b, a.T, tmp)
        for i in range(m):
            for j in range(n):
                out[i, j] = tmp[j, i]
    else:
        np.dot(a, b.T, out)


# -- tables for code generators --------------------------------------------------------------
OPS = ("exp", "log", "tanh", "sigmoid", "log1p", "expm1", "pow")

#: (op, numpy scalar type) -> helper
FUNCS = {
    ("exp", np.float32): exp32, ("exp", np.float64): exp64,
    ("log", np.float32): log32, ("log", np.float64): log64,
    ("tanh", np.float32): tanh32, ("tanh", np.float64): tanh64,
    ("sigmoid", np.float32): sigmoid32, ("sigmoid", np.float64): sigmoid64,
    ("log1p", np.float32): log1p32, ("log1p", np.float64): log1p64,
    ("expm1", np.float32): expm1_32, ("expm1", np.float64): expm1_64,
    ("pow", np.float32): pow32,
}

#: (op, dtype name) -> helper name, importable from this module
HELPERS = {(op, np.dtype(t).name): f.__name__ for (op, t), f in FUNCS.items()}

#: (op, dtype name) -> libm source template for JITFLOW_LIBM=1
LIBM = {}
for _t in (np.float32, np.float64):
    _n = np.dtype(_t).name
    LIBM.update({("exp", _n): "math.exp({0})", ("log", _n): "math.log({0})",
                 ("tanh", _n): "math.tanh({0})", ("log1p", _n): "math.log1p({0})",
                 ("expm1", _n): "math.expm1({0})", ("pow", _n): "math.pow({0}, {1})",
                 ("sigmoid", _n): f"sigmoid{_n[-2:]}_libm({{0}})"})




#: Changes whenever this file changes: part of the key of kernels cached on disk.


def use_libm() -> bool:
    """True when JITFLOW_LIBM=1: code generators should call libm's `math.*` instead."""
    return os.environ.get("JITFLOW_LIBM", "0").strip() not in ("", "0")


def _dtype_name(dtype) -> str:
    return np.dtype(getattr(dtype, "as_numpy_dtype", dtype)).name


def helper_name(op: str, dtype) -> str:
    """Name of the vectorizable helper for `op` on `dtype` ("exp32"); KeyError if none.

    `dtype` is anything np.dtype() takes, or a jitflow DType."""
    return HELPERS[(op, _dtype_name(dtype))]


def call_source(op: str, dtype, *args: str, libm: bool | None = None) -> str:
    """Source text calling `op` on the argument texts: `exp32(t1)`, or `math.exp(t1)` when
    `libm` (default: use_libm()) or when no helper exists (pow on float64)."""
    key = (op, _dtype_name(dtype))
    if libm is None:
        libm = use_libm()
    if not libm and key in HELPERS:
        return f"{HELPERS[key]}({', '.join(args)})"
    return LIBM[key].format(*args)


def import_source(names) -> str:
    """The import line generated modules need for the helper `names` ("" for none)."""
    names = sorted(set(names))
    if not names:
        return ""
    return f"from jitflow.backends.numba_cpu.vecmath import {', '.join(names)}\n"


# ---- kernels ------------------------------------------------------------------------------------
import math

import numba
import numpy as np
# vecmath 065ee287d08ad317


@numba.njit(cache=False, error_model="numpy", fastmath={"contract"}, nogil=True, no_cfunc_wrapper=True)
def kernel(ins, vs):
    a0 = ins[0]
    d0_0 = a0.shape[0]
    d0_1 = a0.shape[1]
    a1 = ins[1]
    d1_0 = a1.shape[0]
    v0 = vs[0]
    e0_0 = v0.shape[0]
    v1 = vs[1]
    if (d0_1 != e0_0) | (d0_0 != d1_0) | (e0_0 != d0_1):  # MatMul
        raise ValueError("jitflow:2:Matrix size-incompatible")  # MatMul
    b1 = empty((d0_0, 1, ), np.float32)  # MatMul
    np.dot(a0, v0, b1)  # MatMul
    b2 = empty((d0_0, 1, ), np.float32)  # sub
    nb2 = b2.size  # sub
    f_b2 = flat(b2)  # sub
    f_b1 = flat(b1)  # sub
    f_a1 = flat(a1)  # sub
    for i in range(nb2):  # sub
        t1 = (f_b1[i] + v1[()])  # add
        t2 = (t1 - f_a1[i])  # sub
        f_b2[i] = t2  # sub
    accb3 = np.float64(0.0)  # loss
    for i0 in range(d0_0):  # loss
        t3 = (b2[i0, 0] * b2[i0, 0])  # Square
        accb3 = accb3 + t3  # loss
    b3 = np.float32(accb3 / (d0_0 * 1))  # loss
    b4 = empty((1, 1, ), np.float32)  # gradients/loss_grad/Sum
    f_b4 = flat(b4)  # gradients/loss_grad/Sum
    ob4 = 0  # gradients/loss_grad/Sum
    accb4 = np.float64(1.0) * (d0_0 * 1)  # gradients/loss_grad/Sum
    f_b4[ob4] = np.float32(accb4)  # gradients/loss_grad/Sum
    ob4 += 1  # gradients/loss_grad/Sum
    b5 = empty((d0_0, 1, ), np.float32)  # gradients/sub_grad/Unbroadcast
    for i0 in range(d0_0):  # gradients/sub_grad/Unbroadcast
        t4 = np.float32(1.0)  # gradients/loss_grad/BroadcastLike
        t5 = (t4 / b4[0, 0])  # gradients/loss_grad/truediv
        t6 = (b2[i0, 0] * np.float32(2.0))  # gradients/Square_grad/mul
        t7 = (t5 * t6)  # gradients/Square_grad/mul_1
        b5[i0, 0] = t7  # gradients/sub_grad/Unbroadcast
    b6 = empty((d0_1, 1, ), np.float32)  # gradients/MatMul_grad/MatMul_1
    np.dot(a0.T, b5, b6)  # gradients/MatMul_grad/MatMul_1
    nv0 = v0.size  # train/update_w/AssignSub
    f_v0 = flat(v0)  # train/update_w/AssignSub
    f_b6 = flat(b6)  # train/update_w/AssignSub
    for i in range(nv0):  # train/update_w/AssignSub
        t8 = (np.float32(0.10000000149011612) * f_b6[i])  # train/update_w/mul
        f_v0[i] = f_v0[i] - t8  # train/update_w/AssignSub
    accb7 = np.float64(0.0)  # gradients/add_grad/Unbroadcast_1
    for i0 in range(d0_0):  # gradients/add_grad/Unbroadcast_1
        accb7 = accb7 + b5[i0, 0]  # gradients/add_grad/Unbroadcast_1
    b7 = np.float32(accb7)  # gradients/add_grad/Unbroadcast_1
    t9 = (np.float32(0.10000000149011612) * b7)  # train/update_b/mul
    v1[()] = v1[()] - t9  # train/update_b/AssignSub
    return (b3, )


SIGNATURE_ID = '05d45885356e62e8'
ENTRY = kernel

# ---- loader (written by jitflow.export; needs only numpy and numba) -----------------------
import hashlib as _hashlib
import io as _io
import json as _json
import linecache as _linecache
import os as _os
import tempfile as _tempfile

import numpy as _np

FORMAT = "jitflow.export"
FORMAT_VERSION = 1


class ExportError(RuntimeError):
    """An export folder is missing, corrupt, tampered with or of another format version."""


def _sha256(path):
    h = _hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_manifest(folder):
    """The folder's manifest.json, after checking its format and version."""
    path = _os.path.join(folder, "manifest.json")
    try:
        with open(path, encoding="utf-8") as f:
            manifest = _json.load(f)
    except FileNotFoundError:
        raise ExportError(f"{folder!r} is not an exported function: it has no "
                          "manifest.json") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise ExportError(f"{path} is corrupt: {e}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ExportError(f"{path} is not a {FORMAT} manifest")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise ExportError(f"{path} has format version {manifest.get('format_version')!r}; "
                          f"this loader reads version {FORMAT_VERSION}")
    return manifest


def _name_problem(folder, name):
    """Why `name`, a file the manifest names, is not a plain file name inside `folder`."""
    if not isinstance(name, str) or not name:
        return f"{name!r}: not a file name"
    seps = [s for s in ("/", "\\", _os.sep, _os.altsep) if s]
    if (any(s in name for s in seps) or name in (".", "..") or "\0" in name
            or _os.path.isabs(name)):
        return f"{name}: not a plain file name inside the folder"
    real = _os.path.realpath(_os.path.join(folder, name))
    if _os.path.dirname(real) != _os.path.realpath(folder):
        return f"{name}: resolves outside the folder (to {real})"
    return None


def check_names(folder, manifest):
    """Problems with the file names in the manifest; checked before any file is read."""
    files = manifest.get("files")
    state = manifest.get("state")
    if not isinstance(files, dict) or not isinstance(state, dict):
        return ["manifest.json: no table of files and their sha256, or no state entry"]
    named = {"module": manifest.get("module"), "state file": state.get("file")}
    problems = []
    for what, name in named.items():
        if name is None:
            problems.append(f"the manifest names no {what}")
        elif name not in files:
            problems.append(f"{name}: not covered by a hash in the manifest")
    for name in dict.fromkeys([*named.values(), *files]):
        why = None if name is None else _name_problem(folder, name)
        if why:
            problems.append(why)
    return problems


def _check_files(folder, manifest, keep=None):
    """Problems with the files (names, then missing or not matching their sha256). With
    `keep` (a dict), each file is read once and its checked bytes are stored there."""
    problems = check_names(folder, manifest)
    if problems:
        return problems
    for name, digest in sorted(manifest["files"].items()):
        try:
            with open(_os.path.join(folder, name), "rb") as f:
                data = f.read()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            problems.append(f"{name}: missing")
            continue
        if _hashlib.sha256(data).hexdigest() != digest:
            problems.append(f"{name}: sha256 mismatch (the file was changed or truncated)")
        elif keep is not None:
            keep[name] = data
    return problems


def verify(folder, manifest):
    """A list of problems: names not inside the folder, files missing or not matching their
    sha256 in the manifest."""
    return _check_files(folder, manifest)


def read_verified(folder, manifest):
    """{file name: bytes} of every file in the manifest, each read once and checked against its
    sha256; raises ExportError naming every problem."""
    blobs = {}
    problems = _check_files(folder, manifest, blobs)
    if problems:
        raise ExportError(f"export {folder!r} failed its integrity check: "
                          + "; ".join(problems))
    return blobs


def compile_verified(data, digest):
    """Code of a module from its checked bytes, with Numba's disk cache off: `cache=True` (as
    jitflow 0.1 wrote it) becomes `cache=False`, and the code's file name names no file, so
    Numba cannot locate a cache for it (it would unpickle whatever __pycache__ holds)."""
    text = data.decode("utf-8").replace("numba.njit(cache=True", "numba.njit(cache=False")
    filename = f"<jitflow export {digest[:16]}>"
    _linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    return compile(text, filename, "exec", dont_inherit=True)


def _dims_str(shape):
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def _build(spec, flat):
    if "tensor" in spec:
        return flat[spec["tensor"]]
    if "op" in spec:
        return None
    if "list" in spec:
        return [_build(s, flat) for s in spec["list"]]
    if "tuple" in spec:
        return tuple(_build(s, flat) for s in spec["tuple"])
    return {k: _build(s, flat) for k, s in spec["dict"]}


class ExportedFunction:
    """A loaded export: call it with the feeds, in the manifest's order."""

    def __init__(self, folder, manifest, entry, state_bytes):
        self.folder = _os.path.abspath(folder)
        self.manifest = manifest
        self._entry = entry
        self._feeds = [(f["name"], _np.dtype(f["dtype"]), f["shape"])
                       for f in manifest["feeds"]]
        self._outputs = [(o["from"][0], o["from"][1], _np.dtype(o["dtype"]).type)
                         for o in manifest["outputs"]]
        path = _os.path.join(self.folder, manifest["state"]["file"])
        try:
            with _np.load(_io.BytesIO(state_bytes), allow_pickle=False) as data:
                arrays = {k: data[k] for k in data.files}
        except Exception as e:  # noqa: BLE001  (zip and format errors of many kinds)
            raise ExportError(f"{path} is corrupt: {e}") from None
        entries = [(v["name"], v) for v in manifest["state"]["variables"]]
        entries += [(c["key"], c) for c in manifest["state"].get("constants", [])]
        loaded = {}
        for name, v in entries:
            arr = arrays.get(v["key"])
            if arr is None:
                raise ExportError(f"{path} has no value for {name!r}")
            if arr.dtype != _np.dtype(v["dtype"]) or list(arr.shape) != v["shape"]:
                raise ExportError(f"{path}: {name!r} is {arr.dtype}{list(arr.shape)}, the "
                                  f"manifest says {v['dtype']}{v['shape']}")
            loaded[name] = _np.array(arr, copy=True, order="C")
        self.state = {v["name"]: loaded[v["name"]] for v in manifest["state"]["variables"]}
        self._vars = tuple(self.state[v["name"]] for v in manifest["state"]["variables"])
        self._consts = {c["key"]: loaded[c["key"]]
                        for c in manifest["state"].get("constants", [])}
        self._inputs = [(kind, x if kind == "feed" else loaded[x])
                        for kind, x in manifest["inputs"]]

    @property
    def signature(self):
        """`name(feed: dtype[dims], ...)` with `?` for dims of any size."""
        args = ", ".join(f"{n}: {d.name}{_dims_str(s)}" for n, d, s in self._feeds)
        return f"{self.manifest.get('name', 'f')}({args})"

    def _check(self, i, value):
        name, dtype, shape = self._feeds[i]
        if isinstance(value, (_np.ndarray, _np.generic)):
            if value.dtype != dtype:
                raise TypeError(f"feed {name!r} must have dtype {dtype.name}, got "
                                f"{value.dtype.name}; expected {self.signature}")
            arr = _np.asarray(value)
        else:
            try:
                arr = _np.asarray(value, dtype=dtype)
            except (TypeError, ValueError) as e:
                raise TypeError(f"feed {name!r} cannot be converted to {dtype.name} ({e}); "
                                f"expected {self.signature}") from None
        if arr.ndim != len(shape) or any(d is not None and d != s
                                         for d, s in zip(shape, arr.shape)):
            raise ValueError(f"feed {name!r} must have shape {_dims_str(shape)}, got "
                             f"{list(arr.shape)}; expected {self.signature}")
        # (np.ascontiguousarray would turn a rank-0 feed into rank 1)
        return arr if arr.flags.c_contiguous else arr.copy(order="C")

    def __call__(self, *args):
        if len(args) != len(self._feeds):
            raise TypeError(f"{self.signature} takes {len(self._feeds)} feeds, got "
                            f"{len(args)}")
        fs = [self._check(i, a) for i, a in enumerate(args)]
        ins = tuple(fs[x] if kind == "feed" else x for kind, x in self._inputs)
        res = self._entry(ins, self._vars)
        flat = []
        for src, i, typ in self._outputs:
            v = res[i] if src == "result" else fs[i]
            flat.append(v[()] if isinstance(v, _np.ndarray) and v.ndim == 0
                        else v if isinstance(v, _np.ndarray) else typ(v))
        return _build(self.manifest["fetches"], flat)

    def save_state(self):
        """Write the current variable values to the folder (state file, then manifest)."""
        keys = {v["name"]: v["key"] for v in self.manifest["state"]["variables"]}
        arrays = {keys[n]: a for n, a in self.state.items()}
        arrays.update(self._consts)
        state_name = self.manifest["state"]["file"]
        fd, tmp = _tempfile.mkstemp(dir=self.folder, prefix=".tmp-", suffix=".npz")
        try:
            _os.chmod(tmp, 0o644)
            with _os.fdopen(fd, "wb") as f:
                _np.savez(f, **arrays)
            digest = _sha256(tmp)
            _os.replace(tmp, _os.path.join(self.folder, state_name))
        finally:
            if _os.path.exists(tmp):
                _os.unlink(tmp)
        self.manifest["files"][state_name] = digest
        fd, tmp = _tempfile.mkstemp(dir=self.folder, prefix=".tmp-", suffix=".json")
        try:
            _os.chmod(tmp, 0o644)
            with _os.fdopen(fd, "w", encoding="utf-8") as f:
                _json.dump(self.manifest, f, indent=1, sort_keys=True)
            _os.replace(tmp, _os.path.join(self.folder, "manifest.json"))
        finally:
            if _os.path.exists(tmp):
                _os.unlink(tmp)

    def __repr__(self):
        return f"<exported {self.signature}>"


def load(folder=None):
    """Load the export this module belongs to (default: the folder holding this file).

    Every file is read once and checked against the manifest; the kernels used are compiled
    from the checked bytes of this module's file, not taken from the module as imported
    (Python may have run that from bytecode in __pycache__)."""
    folder = _os.path.dirname(_os.path.abspath(__file__)) if folder is None else folder
    manifest = read_manifest(folder)
    blobs = read_verified(folder, manifest)
    module = manifest["module"]
    if module != _os.path.basename(__file__):
        raise ExportError(f"the manifest in {folder!r} describes module {module!r}, not "
                          f"{_os.path.basename(__file__)!r}")
    checked = {"__name__": __name__ + "_checked", "__file__": __file__}
    exec(compile_verified(blobs[module], manifest["files"][module]), checked)
    return checked["open_verified"](folder, manifest, blobs)


def open_verified(folder, manifest, blobs):
    """An ExportedFunction of this module's kernels, with its state from checked bytes."""
    if manifest.get("signature_id") != SIGNATURE_ID:
        raise ExportError(f"the manifest in {folder!r} does not match this module "
                          f"(signature {manifest.get('signature_id')!r}, module has "
                          f"{SIGNATURE_ID!r})")
    return ExportedFunction(folder, manifest, ENTRY, blobs[manifest["state"]["file"]])
