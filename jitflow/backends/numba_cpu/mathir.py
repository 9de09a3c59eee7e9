"""jitflow's math library as LLVM IR: exp, log, tanh, sigmoid, log1p, expm1 (float32 and
float64) and pow (float32), each built once by the functions here with llvmlite's IR builder.

Both compiled paths use exactly these instructions: Numba kernels through mathlib.py's
intrinsics (which define the function in the kernel's module and call it) and fast-path
kernels through its text (`function_ir`), so the two give the same bits. The functions are
`internal` and `alwaysinline`, branch-free (selects), and use no fast-math flags: LLVM inlines
them into the kernel's loops and its vectorizer widens them (`<16 x float>` on AVX-512).
Where a product feeds a sum an explicit `llvm.fma` rounds once (range reductions, polynomial
steps): where it is, is written here, not left to LLVM's choice.

Method, per function (float32 and float64 forms with their own constants):
- exp: k = rint(x/ln2) by the 1.5*2^p shift trick, r = x - k*ln2 (Cody-Waite, two constants,
  FMA; the rounding error of r carried as rlo), exp(r) = 1 + r + r^2*P(r) (minimax; Estrin's
  scheme in float64), times 2^k built from exponent bits in two halves, so subnormal results
  round once and 2^128 / 2^1024 need no special case.
- log / log1p: x = 2^k * m with m in [sqrt(1/2), sqrt(2)) from the bits (subnormals scaled by
  2^23 / 2^54 first), f = m - 1, s = f/(2+f), log1p(f) = f - f^2/2 + s*(f^2/2 + z*G(z)),
  z = s^2; log1p feeds the rounding error of 1+x back into f.
- expm1: as exp, then 2^k*p + (2^k - 1) with p = expm1(r) (its own fit) as hi + lo.
- tanh: x + x^3*P(x^2) for |x| < 0.625, else sign(x) * (1 - 2/(exp(2|x|) + 1)).
- sigmoid: e = exp(-|x|) as hi + lo; (1 if x >= 0 else e) / (1 + e) with one Newton step.
- pow (float32): exp64(y * log64(|x|)) rounded once, with C99's special cases as selects.
The polynomial coefficients are weighted-minimax fits (see vecmath.py's constants).
"""
from __future__ import annotations

from llvmlite import ir


__all__ = ["FUNCTIONS", "function_name", "define", "function_ir"]

# -- constants (float32 ones exactly representable in float32); coefficients are weighted-minimax
# fits for relative error, computed in long double, then rounded
LOG2E32 = 1.4426950216293335
LN2HI32 = 0.693145751953125
LN2LO32 = 1.428606765330187e-06
SHIFT32 = 12582912.0
SHIFT32_BITS = 0x4b400000
SQRTH32_BITS = 0x3f3504f3
EXP32_HI = 89.0
EXP32_LO = -104.0
EXPM1_32_LO = -80.0
TINY32 = 1.1754943508222875e-38
TWO23_32 = 8388608.0
TANH32_T = 0.625
TANH32_CLAMP = 40.0
EXP32_P = (
    0.4999999403953552, 0.1666652113199234, 0.04166838899254799, 0.00836874544620514,
    0.0013814539415761828)
EXPM1_32_Q = (
    0.5, 0.1666666865348816, 0.04166651889681816, 0.008332854136824608,
    0.0013929482083767653, 0.00020170352945569903)
LOG32_G = (0.6666677594184875, 0.39977526664733887, 0.2987228035926819)
TANH32_P = (
    -0.3333333134651184, 0.1333320587873459, -0.05394676327705383, 0.021700702607631683,
    -0.008177398703992367, 0.002142961835488677)
LOG2E64 = 1.4426950408889634
LN2HI64 = 0.6931471805592082
LN2LO64 = 7.371002679751326e-13
SHIFT64 = 6755399441055744.0
SHIFT64_BITS = 0x4338000000000000
SQRTH64_BITS = 0x3fe6a09e667f3bcd
EXP64_HI = 710.0
EXP64_LO = -746.0
EXPM1_64_LO = -700.0
TINY64 = 2.2250738585072014e-308
TWO54_64 = 1.8014398509481984e+16
TANH64_T = 0.625
TANH64_CLAMP = 80.0
EXP64_P = (
    0.5, 0.16666666666666682, 0.04166666666666651, 0.008333333333316453,
    0.0013888888888941439, 0.00019841269898927607, 2.480158724212976e-05,
    2.755723165743011e-06, 2.7557325490164817e-07, 2.511329685958975e-08,
    2.090328001919099e-09)
EXPM1_64_Q = (
    0.5, 0.1666666666666667, 0.041666666666667594, 0.008333333333326353,
    0.001388888888832366, 0.00019841269874202504, 2.4801588564070977e-05,
    2.7557256055397486e-06, 2.755613682383468e-07, 2.510498671646104e-08,
    2.128331826654575e-09)
LOG64_G = (
    0.6666666666666735, 0.39999999999412683, 0.28571428742913557, 0.22222198511183375,
    0.1818356794507233, 0.15313948276682907, 0.14797065861288128)
TANH64_P = (
    -0.33333333333333326, 0.13333333333331177, -0.053968253966666366, 0.021869488481410723,
    -0.008863234463897508, 0.0035921151017576603, -0.0014557309709016279,
    0.0005894658875986158, -0.0002370339823030069, 9.157203554699414e-05,
    -3.0178836386088976e-05, 6.030377695716758e-06)


_FLOAT, _DOUBLE = ir.FloatType(), ir.DoubleType()
_I32, _I64, _I1 = ir.IntType(32), ir.IntType(64), ir.IntType(1)

#: (function, dtype) jitflow implements
FUNCTIONS = {("exp", "float32"), ("exp", "float64"), ("log", "float32"), ("log", "float64"),
             ("tanh", "float32"), ("tanh", "float64"), ("sigmoid", "float32"),
             ("sigmoid", "float64"), ("log1p", "float32"), ("log1p", "float64"),
             ("expm1", "float32"), ("expm1", "float64"), ("pow", "float32")}


def function_name(fn: str, dtype: str, lanes: int = 0) -> str:
    """The LLVM name of (fn, dtype), or of its vector form on `lanes` lanes."""
    return (f"jitflow.{fn}.{'f32' if dtype == 'float32' else 'f64'}"
            + (f".v{lanes}" if lanes else ""))


def _suffix(t) -> str:
    """LLVM's overload suffix of a float type or a vector of one (f32, v16f32)."""
    if isinstance(t, ir.VectorType):
        return f"v{t.count}{_suffix(t.element)}"
    return "f32" if t == _FLOAT else "f64"


def declare_intrinsic(module: ir.Module, name: str, t, nargs: int) -> ir.Function:
    """LLVM's intrinsic `llvm.<name>` of float type `t` (or a vector of one) taking `nargs`
    operands, declared in `module` on first use."""
    full = f"llvm.{name}.{_suffix(t)}"
    f = module.globals.get(full)
    if f is None:
        f = ir.Function(module, ir.FunctionType(t, [t] * nargs), name=full)
    return f


class _B:
    """IR emission for one float type, scalar or `lanes` wide (the same instructions lane by
    lane, so a vector form gives each lane the scalar form's bits): arithmetic, FMAs, selects
    and bit casts."""

    def __init__(self, b: ir.IRBuilder, single: bool, lanes: int = 0) -> None:
        self.b = b
        self.lanes = lanes
        self.t = self._vec(_FLOAT if single else _DOUBLE)
        self.it = self._vec(_I32 if single else _I64)
        self.single = single

    def _vec(self, t):
        return ir.VectorType(t, self.lanes) if self.lanes else t

    def _const(self, t, v) -> ir.Constant:
        if self.lanes:
            return ir.Constant(t, [ir.Constant(t.element, v)] * self.lanes)
        return ir.Constant(t, v)

    def c(self, v) -> ir.Constant:
        return self._const(self.t, float(v))

    def ci(self, v) -> ir.Constant:
        return self._const(self.it, int(v))

    def add(self, a, b):
        return self.b.fadd(a, b)

    def sub(self, a, b):
        return self.b.fsub(a, b)

    def mul(self, a, b):
        return self.b.fmul(a, b)

    def div(self, a, b):
        return self.b.fdiv(a, b)

    def neg(self, a):
        return self.b.fneg(a)

    def _intr(self, name: str, args: list, t=None):
        return self.b.call(declare_intrinsic(self.b.module, name, t or self.t, len(args)), args)

    def fma(self, a, b, c):
        """a * b + c, rounded once."""
        return self._intr("fma", [a, b, c])

    def fabs(self, a):
        return self._intr("fabs", [a])

    def floor(self, a, t=None):
        return self._intr("floor", [a], t)

    def gt(self, a, b):
        return self.b.fcmp_ordered(">", a, b)

    def lt(self, a, b):
        return self.b.fcmp_ordered("<", a, b)

    def ge(self, a, b):
        return self.b.fcmp_ordered(">=", a, b)

    def le(self, a, b):
        return self.b.fcmp_ordered("<=", a, b)

    def eq(self, a, b):
        return self.b.fcmp_ordered("==", a, b)

    def ne(self, a, b):
        return self.b.fcmp_unordered("!=", a, b)

    def sel(self, c, a, b):
        return self.b.select(c, a, b)

    def bits(self, x):
        return self.b.bitcast(x, self.it)

    def from_bits(self, i):
        return self.b.bitcast(i, self.t)

    # -- shared pieces ------------------------------------------------------------------------
    def pow2(self, n):
        """2**n for an integer n (of the float's int width) in the normal exponent range."""
        bias, shift = (127, 23) if self.single else (1023, 52)
        return self.from_bits(self.b.shl(self.b.add(n, self.ci(bias)), self.ci(shift)))

    def reduce(self, x):
        """(k, r, rlo): x = k*ln2 + r + rlo, |r| <= ln2/2, k an integer. k*ln2hi is exact and
        x - k*ln2hi too (Sterbenz); rlo is the rounding error of r."""
        k32 = self.single
        log2e = LOG2E32 if k32 else LOG2E64
        shift = SHIFT32 if k32 else SHIFT64
        hi = LN2HI32 if k32 else LN2HI64
        lo = LN2LO32 if k32 else LN2LO64
        sbits = SHIFT32_BITS if k32 else SHIFT64_BITS
        t = self.fma(x, self.c(log2e), self.c(shift))
        k = self.sub(t, self.c(shift))
        nk = self.neg(k)
        rh = self.fma(nk, self.c(hi), x)
        r = self.fma(nk, self.c(lo), rh)
        rlo = self.fma(nk, self.c(lo), self.sub(rh, r))
        ki = self.b.sub(self.bits(t), self.ci(sbits))
        return ki, r, rlo

    def poly_exp(self, r, r2):
        """P(r) of exp's reduced argument."""
        if self.single:
            p0, p1, p2, p3, p4 = (self.c(v) for v in EXP32_P)
            a = self.fma(p1, r, p0)
            b = self.fma(p4, r2, self.fma(p3, r, p2))
            return self.fma(b, r2, a)
        return self.estrin10(r, r2, EXP64_P)

    def estrin10(self, r, r2, cs):
        """c0 + c1*r + ... + c10*r**10 by Estrin's scheme (short dependency chains)."""
        c = [self.c(v) for v in cs]
        r4 = self.mul(r2, r2)
        e0 = self.fma(self.fma(c[3], r, c[2]), r2, self.fma(c[1], r, c[0]))
        e1 = self.fma(self.fma(c[7], r, c[6]), r2, self.fma(c[5], r, c[4]))
        e2 = self.fma(c[10], r2, self.fma(c[9], r, c[8]))
        return self.fma(e2, self.mul(r4, r4), self.fma(e1, r4, e0))

    def split(self, x):
        """(k, m) with x = 2**k * m, m in [sqrt(1/2), sqrt(2)), for positive finite x."""
        k32 = self.single
        tiny = TINY32 if k32 else TINY64
        scale = TWO23_32 if k32 else TWO54_64
        sq = SQRTH32_BITS if k32 else SQRTH64_BITS
        shift = 23 if k32 else 52
        sub = self.lt(x, self.c(tiny))
        ix = self.bits(self.sel(sub, self.mul(x, self.c(scale)), x))
        k = self.b.ashr(self.b.sub(ix, self.ci(sq)), self.ci(shift))
        m = self.from_bits(self.b.sub(ix, self.b.shl(k, self.ci(shift))))
        kf = self.b.sitofp(k, self.t)
        return self.sub(kf, self.sel(sub, self.c(23.0 if k32 else 54.0), self.c(0.0))), m

    def log_finish(self, k, f):
        """k*ln2 + log(1 + f) for f in [sqrt(1/2) - 1, sqrt(2) - 1]."""
        k32 = self.single
        s = self.div(f, self.add(self.c(2.0), f))
        z = self.mul(s, s)
        if k32:
            g0, g1, g2 = (self.c(v) for v in LOG32_G)
            g = self.fma(self.fma(g2, z, g1), z, g0)
        else:
            d = [self.c(v) for v in LOG64_G]
            z2 = self.mul(z, z)
            ab = self.fma(self.fma(d[3], z, d[2]), z2, self.fma(d[1], z, d[0]))
            cc = self.fma(d[6], z2, self.fma(d[5], z, d[4]))
            g = self.fma(cc, self.mul(z2, z2), ab)
        hfsq = self.mul(self.c(0.5), self.mul(f, f))
        lo = self.fma(s, self.fma(z, g, hfsq),
                      self.mul(k, self.c(LN2LO32 if k32 else LN2LO64)))
        return self.fma(k, self.c(LN2HI32 if k32 else LN2HI64),
                        self.sub(f, self.sub(hfsq, lo)))

    def exp_hilo(self, x):
        """exp(x) = hi + lo for x <= 0, lo being the rounding error of the last sum."""
        lo_bound = EXP32_LO if self.single else EXP64_LO
        x = self.sel(self.lt(x, self.c(lo_bound)), self.c(lo_bound), x)
        ki, r, rlo = self.reduce(x)
        r2 = self.mul(r, r)
        t = self.fma(r2, self.poly_exp(r, r2), rlo)
        q = self.add(r, t)
        one = self.c(1.0)
        hi = self.add(one, q)
        lo = self.add(self.sub(one, hi), q)
        h = self.b.ashr(ki, self.ci(1))
        s1, s2 = self.pow2(h), self.pow2(self.b.sub(ki, h))
        return self.mul(self.mul(hi, s1), s2), self.mul(self.mul(lo, s1), s2)

    # -- the functions --------------------------------------------------------------------------
    def exp(self, x):
        hi_b, lo_b = (EXP32_HI, EXP32_LO) if self.single else (EXP64_HI, EXP64_LO)
        x = self.sel(self.gt(x, self.c(hi_b)), self.c(hi_b), x)
        x = self.sel(self.lt(x, self.c(lo_b)), self.c(lo_b), x)
        ki, r, rlo = self.reduce(x)
        r2 = self.mul(r, r)
        p = self.add(self.c(1.0), self.add(r, self.fma(r2, self.poly_exp(r, r2), rlo)))
        h = self.b.ashr(ki, self.ci(1))
        return self.mul(self.mul(p, self.pow2(h)), self.pow2(self.b.sub(ki, h)))

    def expm1(self, x):
        k32 = self.single
        hi_b = EXP32_HI if k32 else EXP64_HI
        lo_b = EXPM1_32_LO if k32 else EXPM1_64_LO
        xc = self.sel(self.gt(x, self.c(hi_b)), self.c(hi_b), x)
        xc = self.sel(self.lt(xc, self.c(lo_b)), self.c(lo_b), xc)
        ki, r, rlo = self.reduce(xc)
        r2 = self.mul(r, r)
        if k32:
            q0, q1, q2, q3, q4, q5 = (self.c(v) for v in EXPM1_32_Q)
            inner = self.fma(self.fma(q5, r, q4), r2, self.fma(q3, r, q2))
            q = self.fma(inner, r2, self.fma(q1, r, q0))
        else:
            q = self.estrin10(r, r2, EXPM1_64_Q)
        t = self.fma(r2, q, rlo)
        p = self.add(r, t)
        plo = self.add(self.sub(r, p), t)
        # 2**k * (1 + p) - 1; k past the top is done as 2 * (2**(top) * (1 + p))
        top = 127 if k32 else 1023
        big = self.b.icmp_signed(">", ki, self.ci(top))
        s = self.pow2(self.sel(big, self.ci(top), ki))
        one = self.c(1.0)
        res = self.fma(s, plo, self.fma(s, p, self.sub(s, one)))
        res = self.sel(big, self.mul(res, self.c(2.0)), res)
        return self.sel(self.eq(x, self.c(0.0)), x, res)

    def log(self, x):
        k, m = self.split(x)
        res = self.log_finish(k, self.sub(m, self.c(1.0)))
        inf = self.c(float("inf"))
        res = self.sel(self.lt(x, inf), res, x)                 # +inf and nan
        res = self.sel(self.lt(x, self.c(0.0)), self.c(float("nan")), res)
        return self.sel(self.eq(x, self.c(0.0)), self.neg(inf), res)

    def log1p(self, x):
        k32 = self.single
        one = self.c(1.0)
        u = self.add(x, one)
        # 1 + x == u + c exactly (Fast2Sum, the larger operand first)
        c = self.sel(self.le(self.fabs(x), one), self.sub(x, self.sub(u, one)),
                     self.sub(one, self.sub(u, x)))
        k, m = self.split(u)
        # fold c into f: 1 + x = 2**k * (m + c * 2**-k); c is 0 whenever k is large
        ki = self.b.fptosi(k, self.it)
        cap = self.ci(126 if k32 else 1022)
        kc = self.sel(self.b.icmp_signed("<", ki, cap), ki, cap)
        f = self.fma(c, self.pow2(self.b.neg(kc)), self.sub(m, one))
        res = self.log_finish(k, f)
        inf = self.c(float("inf"))
        res = self.sel(self.lt(u, inf), res, u)
        res = self.sel(self.lt(u, self.c(0.0)), self.c(float("nan")), res)
        res = self.sel(self.eq(u, self.c(0.0)), self.neg(inf), res)
        return self.sel(self.eq(x, self.c(0.0)), x, res)

    def _exp_tanh(self, y):
        """exp(y) for y >= 0 where only 1 - 2/(exp(y) + 1) matters: y clamped, 2**k in one
        step."""
        clamp = TANH32_CLAMP if self.single else TANH64_CLAMP
        y = self.sel(self.gt(y, self.c(clamp)), self.c(clamp), y)
        ki, r, rlo = self.reduce(y)
        r2 = self.mul(r, r)
        p = self.add(self.c(1.0), self.add(r, self.fma(r2, self.poly_exp(r, r2), rlo)))
        return self.mul(p, self.pow2(ki))

    def tanh(self, x):
        k32 = self.single
        a = self.fabs(x)
        w = self.mul(x, x)
        w2 = self.mul(w, w)
        if k32:
            t = [self.c(v) for v in TANH32_P]
            inner = self.fma(self.fma(t[5], w, t[4]), w2, self.fma(t[3], w, t[2]))
            p = self.fma(inner, w2, self.fma(t[1], w, t[0]))
        else:
            t = [self.c(v) for v in TANH64_P]
            w4 = self.mul(w2, w2)
            e0 = self.fma(self.fma(t[3], w, t[2]), w2, self.fma(t[1], w, t[0]))
            e1 = self.fma(self.fma(t[7], w, t[6]), w2, self.fma(t[5], w, t[4]))
            e2 = self.fma(self.fma(t[11], w, t[10]), w2, self.fma(t[9], w, t[8]))
            p = self.fma(e2, self.mul(w4, w4), self.fma(e1, w4, e0))
        small = self.fma(self.mul(x, w), p, x)
        one = self.c(1.0)
        big = self.sub(one, self.div(self.c(2.0), self.add(self._exp_tanh(self.add(a, a)), one)))
        big = self.sel(self.lt(x, self.c(0.0)), self.neg(big), big)
        res = self.sel(self.lt(a, self.c(TANH32_T if k32 else TANH64_T)), small, big)
        return self.sel(self.eq(x, self.c(0.0)), x, res)

    def sigmoid(self, x):
        e, elo = self.exp_hilo(self.neg(self.fabs(x)))
        one, zero = self.c(1.0), self.c(0.0)
        pos = self.ge(x, zero)
        num = self.sel(pos, one, e)
        den = self.add(one, e)
        dlo = self.add(self.add(self.sub(one, den), e), elo)
        res = self.div(num, den)
        # one Newton step on num/den with the low parts; 1/den is res or 1 - res
        inv = self.sel(pos, res, self.sub(one, res))
        nres = self.neg(res)
        rem = self.add(self.fma(nres, den, num), self.fma(nres, dlo, self.sel(pos, zero, elo)))
        return self.fma(rem, inv, res)

    def pow(self, x, y):
        """x ** y for float32 x, y (C99 semantics) computed in float64."""
        d = _B(self.b, False, self.lanes)
        xd = self.b.fpext(x, d.t)
        yd = self.b.fpext(y, d.t)
        a = d.fabs(xd)
        r = d.exp(d.mul(yd, d.log(a)))
        fl = d.floor(yd)
        yfrac = d.ne(fl, yd)                                   # false for +-inf
        yhalf = d.mul(d.c(0.5), yd)
        yodd = self.b.and_(d.ne(d.floor(yhalf), yhalf), d.eq(fl, yd))
        neg = self.b.icmp_signed("<", self.bits(x), self.ci(0))   # sign bit: -0.0 counts
        r = d.sel(self.b.and_(neg, yodd), d.neg(r), r)
        bad = self.b.and_(self.b.and_(d.lt(xd, d.c(0.0)), d.gt(xd, d.c(float("-inf")))), yfrac)
        r = d.sel(bad, d.c(float("nan")), r)
        one = self.b.or_(self.b.or_(d.eq(yd, d.c(0.0)), d.eq(xd, d.c(1.0))),
                         self.b.and_(d.eq(a, d.c(1.0)), d.eq(d.fabs(yd), d.c(float("inf")))))
        return self.b.fptrunc(d.sel(one, d.c(1.0), r), self.t)


def define(module: ir.Module, fn: str, dtype: str, lanes: int = 0) -> ir.Function:
    """The function for (fn, dtype) in `module`, on `lanes` lanes (0: scalar): defined there
    on first use (internal, alwaysinline), then reused."""
    name = function_name(fn, dtype, lanes)
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    body_t = _B(None, dtype == "float32", lanes).t
    nargs = 2 if fn == "pow" else 1
    f = ir.Function(module, ir.FunctionType(body_t, [body_t] * nargs), name=name)
    f.linkage = "internal"
    f.attributes.add("alwaysinline")
    f.attributes.add("nounwind")
    b = ir.IRBuilder(f.append_basic_block("entry"))
    body = _B(b, dtype == "float32", lanes)
    b.ret(getattr(body, fn)(*f.args))
    return f


_TEXT: dict = {}


def function_ir(fn: str, dtype: str, lanes: int = 0) -> str:
    """The IR text of (fn, dtype)'s definition (on `lanes` lanes; 0: scalar) and the
    intrinsics it declares, for linking into a module printed as text (llvmgen.py)."""
    text = _TEXT.get((fn, dtype, lanes))
    if text is None:
        m = ir.Module(name="jitflow_math")
        # linked into the kernel's module, which declares it: visible to the linker (the
        # kernel's calls inline it, and the optimizer drops it)
        define(m, fn, dtype, lanes).linkage = "linkonce_odr"
        text = _TEXT[(fn, dtype, lanes)] = "\n".join(str(g) for g in m.functions)
    return text
