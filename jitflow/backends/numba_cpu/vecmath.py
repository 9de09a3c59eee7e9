"""Branch-free exp/log/tanh/sigmoid/log1p/expm1/pow that LLVM auto-vectorizes inside Numba loops.

Why: the pip llvmlite has no SVML, so `math.exp` and friends inside an njit loop are scalar
libm calls that stop the loop vectorizer. The helpers here are built only from arithmetic,
compares/selects and float<->int bit casts (four tiny `numba.extending.intrinsic`s emitting an
llvmlite `bitcast`), so a generated loop that calls them vectorizes to `<16 x float>` /
`<8 x double>` (AVX-512) or `<8 x float>` / `<4 x double>` (AVX2). On this project's AMD EPYC
(LLVM cpu `znver4`) the default target already uses 512-bit `zmm` vectors: appending
`-prefer-256-bit` through `NUMBA_CPU_FEATURES` changed neither the code nor the chain's time
(1e6 float32 1.42 ms both ways, float64 3.89 / 3.87 ms), so jitflow leaves those variables to
the user. The public helpers are
`numba.njit(forceinline=True)`: compiled once per process, then always inlined by LLVM into
the calling kernel (their internal pieces are `inline="always"`, inlined at the Numba IR
level). Measured on the chain below: 0.42 s CPU to compile the first kernel, 0.09 s for each
later one; `inline="always"` everywhere costs ~0.4 s for every kernel.

Method, per function (f32 and f64 versions are separate, each with dtype-typed constants):
- exp: k = rint(x/ln2) by the 1.5*2^p shift trick, r = x - k*ln2 (Cody-Waite, two
  constants, FMA; the rounding error of r is carried along), exp(r) = 1 + r + r^2*P(r)
  (minimax, degree 6 / 12 overall; Estrin's scheme for short dependency chains), times 2^k
  built from exponent bits in two halves so subnormal results round once and 2^128 /
  2^1024 need no special case.
- log / log1p: x = 2^k * m with m in [sqrt(1/2), sqrt(2)) from the bits (subnormals scaled
  by 2^23 / 2^54 first), f = m - 1, s = f/(2+f), log1p(f) = f - f^2/2 + s*(f^2/2 + z*G(z)),
  z = s^2 (minimax G); log1p feeds the rounding error of 1+x back into f.
- expm1: as exp, then 2^k*p + (2^k - 1) with p = expm1(r) (its own minimax fit) as hi + lo.
- tanh: x + x^3*P(x^2) for |x| < 0.625, else sign(x) * (1 - 2/(exp(2|x|) + 1)).
- sigmoid: e = exp(-|x|); (1 if x >= 0 else e) / (1 + e): no overflow, and results down
  in the subnormals stay exact (the naive 1/(1+exp(-x)) flushes them to 0). e comes as
  hi + lo, and one Newton step on the quotient absorbs lo and the rounding of 1 + e.
- pow32(x, y): exp64(y * log64(|x|)) in float64, rounded once to float32, with the C99
  special cases (negative bases with integer y, 0, inf, nan, pow(x, 0) = pow(1, y) = 1) as
  selects. There is no pow64: exp(y*log(x)) in float64 loses log2(|y*log x|) bits (up to
  ~10) without a double-double log, so float64 `**` stays with libm.
Special cases (nan, +-inf, +-0, negative log arguments, overflow and underflow thresholds,
subnormal inputs and results) are selects, not branches. Polynomial coefficients are
weighted-minimax (Remez) fits for relative error, computed in long double, then rounded.

Flags: correct under exactly the JIT's `error_model="numpy"`, `fastmath={"contract"}`
(contract only lets LLVM fuse a*b+c into FMAs). Never compile these with `reassoc` or
`fastmath=True`: reassociation deletes the rounding shift `(x*c + S) - S` and nnan/ninf
delete the nan/inf selects.

Using them from generated code: `HELPERS[(op, "float32")]` is the helper's name
(`helper_name(op, dtype)` the same), `FUNCS[(op, np.float32)]` the function;
`call_source` / `import_source` write the text. With `JITFLOW_LIBM=1` (`use_libm()`), code
generators emit `math.*` libm calls instead (bitwise libm results, scalar speed). Kernels
cached on disk do not notice edits to this file: put `CACHE_TOKEN` into the cache key.

Accuracy: max error in ulp of the result, measured on every 37th and every 61st float32 bit
pattern (186M inputs, against float64 libm) and on 12M random float64 inputs (random bit
patterns, uniform ranges, against np.longdouble); tests/compiler/test_vecmath.py re-checks
dense sweeps incl. subnormals and the overflow/underflow edges, and the special values exactly.
    float32: exp 0.88  log 0.83  tanh 1.29  sigmoid 0.87  log1p 1.39  expm1 1.20
    float64: exp 0.91  log 0.79  tanh 1.30  sigmoid 0.96  log1p 1.31  expm1 1.30
    pow32: correctly rounded on 3M random inputs (float64 inside: <= 0.5 ulp + 2**-20)
(targets: 2 ulp float32, 4 ulp float64). Results are not bitwise libm's: JITFLOW_LIBM=1.

measured (`.venv/bin/python benchmarks/vecmath_bench.py --reps 100`; AMD EPYC with AVX-512,
one thread, median CPU time per call, 1e6 elements) on sigmoid(x*w+b)*tanh(x)-exp(-x*x)+0.5*x:
float32 1.42 ms vs libm 21.6 ms (15x) vs NumPy 2.50 ms (1.8x; NumPy 2.4 has SIMD exp/tanh here);
float64 3.86 ms vs libm 24.6 ms (6.4x) vs NumPy 7.75 ms (2.0x). One helper alone per 1e6
(f32/f64, ms): exp 0.31/0.88, tanh 0.48/1.53, sigmoid 0.55/1.40, log 0.38/0.99.
"""
from __future__ import annotations

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


def _hash_self() -> str:
    with open(__file__, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()[:16]


#: Changes whenever this file changes: part of the key of kernels cached on disk.
CACHE_TOKEN = _hash_self()


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
