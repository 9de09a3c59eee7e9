"""Native window ops for generated kernels: 2-D convolutions (and their gradients), depthwise
convolutions, max and average pooling (and their gradients), NHWC.

Generated code calls these as `_nn.<name>(inputs..., outputs..., attrs...)` with outputs it
allocated itself (their shapes are symbolic dims the fuser knows); every helper fills its
outputs completely. Padding is derived here from the sizes, as TF does for SAME: the output size
is ceil(n / stride) and the total padding max((out - 1) * stride + effective_k - n, 0), with
the smaller half before. VALID pads nothing.

Convolutions are im2col + GEMM: the patches of a block of output rows are copied into a column
buffer (about `_COL_ELEMS` elements, so the block stays in cache while BLAS reads it) and one
`np.dot` per block multiplies them by the filter seen as a [kh * kw * in, out] matrix. With at
most `_FEW_CHANNELS` input channels (a first layer on images) the block is transposed, one row
per tap and whole output image rows per block: copying a patch row of one or three elements at
a time cost more than the GEMM, a tap's run of output positions is one long copy. A 1x1
convolution with unit strides is one GEMM on the input itself. The filter gradient is the sum
over blocks of patches^T x output-gradient rows, the input gradient scatters the rows of
output-gradient x filter^T back onto the input (col2im). Pooling and depthwise convolutions are
direct loops with the channel axis innermost (contiguous in NHWC: the loops vectorize).

Arithmetic follows the NumPy references in jitflow/ops/nn.py: float32 convolutions accumulate
in BLAS (float32), average pooling in float64; the max-pool gradient goes to the first maximal
element of each window in row-major window order, padding positions (-inf) included.
"""
from __future__ import annotations

import os

import numba
import numpy as np

__all__ = ["conv2d", "conv2d_input_grad", "conv2d_filter_grad", "depthwise_conv2d",
           "depthwise_input_grad", "depthwise_filter_grad", "max_pool", "max_pool_grad",
           "avg_pool", "avg_pool_grad", "pad_before", "CACHE_TOKEN"]

_COL_ELEMS = 1 << 18     # elements of one block of im2col patches (1 MiB of float32)
_FEW_CHANNELS = 3        # inputs with at most this many channels use transposed patches
_OPTIONS = dict(error_model="numpy", fastmath={"contract"}, nogil=True)
_NO_CFUNC = dict(no_cfunc_wrapper=True)   # called from kernels and Python only
# compiled once per machine: Numba caches them on disk (jitflow lets it read only private cache
# files, see cpu._guard_vecmath_caches); an exported module's copy compiles them in memory
_CACHE = __name__ == "jitflow.backends.numba_cpu.nnlib"
_jit = numba.njit(cache=_CACHE, **_OPTIONS, **_NO_CFUNC)
_inline = numba.njit(inline="always", **_OPTIONS)


@_inline
def pad_before(n, out, k, stride, dilation, same):
    """Padding before the first element of one spatial axis (0 for VALID)."""
    if not same:
        return 0
    total = (out - 1) * stride + (k - 1) * dilation + 1 - n
    return total // 2 if total > 0 else 0


@_inline
def _block_rows(m, kdim):
    """Output rows per im2col block: about _COL_ELEMS elements, at least 1, at most m."""
    rows = _COL_ELEMS // max(kdim, 1)
    if rows < 8:
        rows = 8
    return min(rows, m) if m > 0 else 1


@_inline
def _fill_cols(x, cols, r0, nr, oh, ow, kh, kw, sh, sw, dh, dw, ph, pw):
    """cols[r] = the patch of output row r0 + r (flattened b, y, z), taps in (i, j, c) order;
    positions in the padding are 0."""
    _, h, w, c = x.shape
    zero = x.dtype.type(0)
    for r in range(nr):
        q = r0 + r
        b = q // (oh * ow)
        rem = q - b * (oh * ow)
        y = rem // ow
        z = rem - y * ow
        for i in range(kh):
            iy = y * sh + i * dh - ph
            for j in range(kw):
                ix = z * sw + j * dw - pw
                base = (i * kw + j) * c
                if 0 <= iy < h and 0 <= ix < w:
                    for ch in range(c):
                        cols[r, base + ch] = x[b, iy, ix, ch]
                else:
                    for ch in range(c):
                        cols[r, base + ch] = zero


@_inline
def _fill_cols_t(x, colt, q0, nq, oh, ow, kh, kw, sh, sw, dh, dw, ph, pw):
    """The transposed patches of the output image rows q0 .. q0 + nq (q = b * oh + y):
    colt[k, (q - q0) * ow + z] = tap k, in (i, j, c) order, of output position (b, y, z); 0 in
    the padding. Each tap of an image row is one run of ow elements (contiguous for unit
    strides and one channel), so this beats `_fill_cols` when the channels are few."""
    _, h, w, c = x.shape
    zero = x.dtype.type(0)
    # per tap column j, the positions z of a row whose tap lies inside: 0 <= z * sw + off < w
    # (the same for every row: computed once, no integer division in the loops below)
    zlos = np.empty(kw, np.int64)
    zhis = np.empty(kw, np.int64)
    for j in range(kw):
        off = j * dw - pw
        zlos[j] = 0 if off >= 0 else min((-off + sw - 1) // sw, ow)
        zhis[j] = 0 if w - 1 - off < 0 else min((w - 1 - off) // sw + 1, ow)
    for qq in range(nq):
        q = q0 + qq
        b = q // oh
        y = q - b * oh
        rb = qq * ow
        for i in range(kh):
            iy = y * sh + i * dh - ph
            inside = 0 <= iy < h
            for j in range(kw):
                off = j * dw - pw
                zlo = zlos[j]
                zhi = zhis[j]
                if zhi < zlo or not inside:
                    zhi = zlo
                ix0 = zlo * sw + off
                for ch in range(c):
                    k = (i * kw + j) * c + ch
                    for z in range(zlo):
                        colt[k, rb + z] = zero
                    if zhi > zlo and ix0 >= 0:
                        dst = colt[k, rb + zlo:rb + zhi]
                        if sw == 1:
                            src = x[b, iy, ix0:ix0 + zhi - zlo, ch]
                            for t in range(zhi - zlo):
                                dst[t] = src[t]
                        else:
                            for t in range(zhi - zlo):
                                dst[t] = x[b, iy, ix0 + t * sw, ch]
                    for z in range(zhi, ow):
                        colt[k, rb + z] = zero


@_jit
def _fill_cols_t_unit(x, colt, q0, nq, oh, ow, kh, kw, ph, pw):
    """`_fill_cols_t` for unit strides and dilations, compiled with them constant (the
    routines take strides as run-time values, one compile serving every geometry; constant
    ones make this copy ~20% faster, which first layers feel)."""
    _fill_cols_t(x, colt, q0, nq, oh, ow, kh, kw, 1, 1, 1, 1, ph, pw)


@_inline
def _patches_t(x, buf, q0, nq, oh, ow, kh, kw, kd, sh, sw, dh, dw, ph, pw):
    """The transposed patches of output image rows q0 .. q0 + nq, filled into `buf`, as a
    [kd, nq * ow] view (`_fill_cols_t`; its unit-stride copy where the geometry allows)."""
    nr = nq * ow
    colt = buf[:kd * nr].reshape((kd, nr))
    if sh == 1 and sw == 1 and dh == 1 and dw == 1:
        _fill_cols_t_unit(x, colt, q0, nq, oh, ow, kh, kw, ph, pw)
    else:
        _fill_cols_t(x, colt, q0, nq, oh, ow, kh, kw, sh, sw, dh, dw, ph, pw)
    return colt


@_inline
def _image_rows(oh, ow, kd):
    """Output image rows per block of transposed patches (about _COL_ELEMS elements)."""
    return max(_COL_ELEMS // max(kd * ow, 1), 1)


@_inline
def _add_into(acc, part):
    for k in range(acc.shape[0]):
        for o in range(acc.shape[1]):
            acc[k, o] += part[k, o]


@_inline
def _is_pointwise(kh, kw, sh, sw, ph, pw, h, w, oh, ow):
    return kh == 1 and kw == 1 and sh == 1 and sw == 1 and ph == 0 and pw == 0 \
        and oh == h and ow == w


@_jit
def conv2d(x, f, out, sh, sw, dh, dw, same):
    """out[b, y, z, o] = sum over i, j, c of xpad[b, y*sh + i*dh, z*sw + j*dw, c] f[i, j, c, o]."""
    n, h, w, c = x.shape
    kh, kw, _, co = f.shape
    oh, ow = out.shape[1], out.shape[2]
    m = n * oh * ow
    kd = kh * kw * c
    out2 = out.reshape((m, co))
    if m == 0 or co == 0:
        return
    if kd == 0:
        out2[:] = 0
        return
    ph = pad_before(h, oh, kh, sh, dh, same)
    pw = pad_before(w, ow, kw, sw, dw, same)
    f2 = f.reshape((kd, co))
    if _is_pointwise(kh, kw, sh, sw, ph, pw, h, w, oh, ow):
        np.dot(x.reshape((m, c)), f2, out2)
        return
    if c <= _FEW_CHANNELS:
        per = _image_rows(oh, ow, kd)
        buf = np.empty(min(per, n * oh) * ow * kd, x.dtype)
        for q0 in range(0, n * oh, per):
            nq = min(per, n * oh - q0)
            nr = nq * ow
            colt = _patches_t(x, buf, q0, nq, oh, ow, kh, kw, kd, sh, sw, dh, dw, ph, pw)
            np.dot(colt.T, f2, out2[q0 * ow:q0 * ow + nr])
        return
    rows = _block_rows(m, kd)
    cols = np.empty((rows, kd), x.dtype)
    for r0 in range(0, m, rows):
        nr = min(rows, m - r0)
        _fill_cols(x, cols, r0, nr, oh, ow, kh, kw, sh, sw, dh, dw, ph, pw)
        np.dot(cols[:nr], f2, out2[r0:r0 + nr])


@_jit
def conv2d_input_grad(f, g, dx, sh, sw, dh, dw, same):
    """dx: the gradient of conv2d with respect to its input (shape of dx), given the output
    gradient g."""
    n, h, w, c = dx.shape
    kh, kw, _, co = f.shape
    oh, ow = g.shape[1], g.shape[2]
    m = n * oh * ow
    kd = kh * kw * c
    dx[:] = 0
    if m == 0 or co == 0 or kd == 0:
        return
    ph = pad_before(h, oh, kh, sh, dh, same)
    pw = pad_before(w, ow, kw, sw, dw, same)
    f2 = f.reshape((kd, co))
    g2 = g.reshape((m, co))
    if _is_pointwise(kh, kw, sh, sw, ph, pw, h, w, oh, ow):
        np.dot(g2, f2.T, dx.reshape((m, c)))
        return
    rows = _block_rows(m, kd)
    cols = np.empty((rows, kd), dx.dtype)
    for r0 in range(0, m, rows):
        nr = min(rows, m - r0)
        np.dot(g2[r0:r0 + nr], f2.T, cols[:nr])
        for r in range(nr):
            q = r0 + r
            b = q // (oh * ow)
            rem = q - b * (oh * ow)
            y = rem // ow
            z = rem - y * ow
            for i in range(kh):
                iy = y * sh + i * dh - ph
                if iy < 0 or iy >= h:
                    continue
                for j in range(kw):
                    ix = z * sw + j * dw - pw
                    if ix < 0 or ix >= w:
                        continue
                    base = (i * kw + j) * c
                    for ch in range(c):
                        dx[b, iy, ix, ch] += cols[r, base + ch]


@_jit
def conv2d_filter_grad(x, g, df, sh, sw, dh, dw, same):
    """df: the gradient of conv2d with respect to its filter (shape of df), given the output
    gradient g."""
    n, h, w, c = x.shape
    kh, kw, _, co = df.shape
    oh, ow = g.shape[1], g.shape[2]
    m = n * oh * ow
    kd = kh * kw * c
    df2 = df.reshape((kd, co))
    if m == 0 or co == 0 or kd == 0:
        df2[:] = 0
        return
    ph = pad_before(h, oh, kh, sh, dh, same)
    pw = pad_before(w, ow, kw, sw, dw, same)
    g2 = g.reshape((m, co))
    if _is_pointwise(kh, kw, sh, sw, ph, pw, h, w, oh, ow):
        np.dot(x.reshape((m, c)).T, g2, df2)
        return
    part = np.empty((kd, co), df.dtype)
    if c <= _FEW_CHANNELS:
        per = _image_rows(oh, ow, kd)
        buf = np.empty(min(per, n * oh) * ow * kd, x.dtype)
        for q0 in range(0, n * oh, per):
            nq = min(per, n * oh - q0)
            nr = nq * ow
            colt = _patches_t(x, buf, q0, nq, oh, ow, kh, kw, kd, sh, sw, dh, dw, ph, pw)
            g_rows = g2[q0 * ow:q0 * ow + nr]
            if q0 == 0:
                np.dot(colt, g_rows, df2)
            else:
                np.dot(colt, g_rows, part)
                _add_into(df2, part)
        return
    rows = _block_rows(m, kd)
    cols = np.empty((rows, kd), x.dtype)
    for r0 in range(0, m, rows):
        nr = min(rows, m - r0)
        _fill_cols(x, cols, r0, nr, oh, ow, kh, kw, sh, sw, dh, dw, ph, pw)
        if r0 == 0:
            np.dot(cols[:nr].T, g2[r0:r0 + nr], df2)
        else:
            np.dot(cols[:nr].T, g2[r0:r0 + nr], part)
            _add_into(df2, part)


# -- depthwise convolution: filter [kh, kw, c, mult], output channel c * mult + q -------------
@_jit
def depthwise_conv2d(x, f, out, sh, sw, dh, dw, same):
    n, h, w, c = x.shape
    kh, kw, _, mult = f.shape
    oh, ow = out.shape[1], out.shape[2]
    ph = pad_before(h, oh, kh, sh, dh, same)
    pw = pad_before(w, ow, kw, sw, dw, same)
    f2 = f.reshape((kh, kw, c * mult))
    cm = c * mult
    for b in range(n):
        for y in range(oh):
            for z in range(ow):
                for k in range(cm):
                    out[b, y, z, k] = 0
                for i in range(kh):
                    iy = y * sh + i * dh - ph
                    if iy < 0 or iy >= h:
                        continue
                    for j in range(kw):
                        ix = z * sw + j * dw - pw
                        if ix < 0 or ix >= w:
                            continue
                        for ch in range(c):
                            v = x[b, iy, ix, ch]
                            for q in range(mult):
                                k = ch * mult + q
                                out[b, y, z, k] += v * f2[i, j, k]


@_jit
def depthwise_input_grad(f, g, dx, sh, sw, dh, dw, same):
    n, h, w, c = dx.shape
    kh, kw, _, mult = f.shape
    oh, ow = g.shape[1], g.shape[2]
    ph = pad_before(h, oh, kh, sh, dh, same)
    pw = pad_before(w, ow, kw, sw, dw, same)
    f2 = f.reshape((kh, kw, c * mult))
    dx[:] = 0
    for b in range(n):
        for y in range(oh):
            for z in range(ow):
                for i in range(kh):
                    iy = y * sh + i * dh - ph
                    if iy < 0 or iy >= h:
                        continue
                    for j in range(kw):
                        ix = z * sw + j * dw - pw
                        if ix < 0 or ix >= w:
                            continue
                        for ch in range(c):
                            acc = dx[b, iy, ix, ch]
                            for q in range(mult):
                                k = ch * mult + q
                                acc += g[b, y, z, k] * f2[i, j, k]
                            dx[b, iy, ix, ch] = acc


@_jit
def depthwise_filter_grad(x, g, df, sh, sw, dh, dw, same):
    n, h, w, c = x.shape
    kh, kw, _, mult = df.shape
    oh, ow = g.shape[1], g.shape[2]
    ph = pad_before(h, oh, kh, sh, dh, same)
    pw = pad_before(w, ow, kw, sw, dw, same)
    df2 = df.reshape((kh, kw, c * mult))
    df2[:] = 0
    for b in range(n):
        for y in range(oh):
            for z in range(ow):
                for i in range(kh):
                    iy = y * sh + i * dh - ph
                    if iy < 0 or iy >= h:
                        continue
                    for j in range(kw):
                        ix = z * sw + j * dw - pw
                        if ix < 0 or ix >= w:
                            continue
                        for ch in range(c):
                            v = x[b, iy, ix, ch]
                            for q in range(mult):
                                k = ch * mult + q
                                df2[i, j, k] += v * g[b, y, z, k]


# -- pooling ------------------------------------------------------------------------------------
@_jit
def max_pool(x, out, kh, kw, sh, sw, same):
    """The maximum over each window (NaN propagates); padding never wins."""
    n, h, w, c = x.shape
    oh, ow = out.shape[1], out.shape[2]
    ph = pad_before(h, oh, kh, sh, 1, same)
    pw = pad_before(w, ow, kw, sw, 1, same)
    ninf = x.dtype.type(-np.inf)
    for b in range(n):
        for y in range(oh):
            for z in range(ow):
                for ch in range(c):
                    out[b, y, z, ch] = ninf
                for i in range(kh):
                    iy = y * sh + i - ph
                    if iy < 0 or iy >= h:
                        continue
                    for j in range(kw):
                        ix = z * sw + j - pw
                        if ix < 0 or ix >= w:
                            continue
                        for ch in range(c):
                            v = x[b, iy, ix, ch]
                            m = out[b, y, z, ch]
                            out[b, y, z, ch] = v if (v > m or v != v) else m


@_jit
def max_pool_grad(x, y, g, dx, kh, kw, sh, sw, same):
    """Each output's gradient goes to the first element of its window (row-major window order,
    padding positions included, which hold -inf) equal to the output."""
    n, h, w, c = x.shape
    oh, ow = g.shape[1], g.shape[2]
    ph = pad_before(h, oh, kh, sh, 1, same)
    pw = pad_before(w, ow, kw, sw, 1, same)
    dx[:] = 0
    taken = np.empty(c, np.bool_)
    ninf = x.dtype.type(-np.inf)
    for b in range(n):
        for yy in range(oh):
            for z in range(ow):
                for ch in range(c):
                    taken[ch] = False
                for i in range(kh):
                    iy = yy * sh + i - ph
                    for j in range(kw):
                        ix = z * sw + j - pw
                        inside = 0 <= iy < h and 0 <= ix < w
                        for ch in range(c):
                            if taken[ch]:
                                continue
                            v = x[b, iy, ix, ch] if inside else ninf
                            if v == y[b, yy, z, ch]:
                                taken[ch] = True
                                if inside:
                                    dx[b, iy, ix, ch] += g[b, yy, z, ch]


@_inline
def _window_count(y, z, kh, kw, sh, sw, ph, pw, h, w):
    y0 = y * sh - ph
    z0 = z * sw - pw
    rows = min(y0 + kh, h) - max(y0, 0)
    cols = min(z0 + kw, w) - max(z0, 0)
    return max(rows, 0) * max(cols, 0)


@_jit
def avg_pool(x, out, kh, kw, sh, sw, same):
    """The mean over each window's elements inside the input (float64 sums)."""
    n, h, w, c = x.shape
    oh, ow = out.shape[1], out.shape[2]
    ph = pad_before(h, oh, kh, sh, 1, same)
    pw = pad_before(w, ow, kw, sw, 1, same)
    acc = np.empty(c, np.float64)
    for b in range(n):
        for y in range(oh):
            for z in range(ow):
                for ch in range(c):
                    acc[ch] = 0.0
                for i in range(kh):
                    iy = y * sh + i - ph
                    if iy < 0 or iy >= h:
                        continue
                    for j in range(kw):
                        ix = z * sw + j - pw
                        if ix < 0 or ix >= w:
                            continue
                        for ch in range(c):
                            acc[ch] += x[b, iy, ix, ch]
                cnt = np.float64(_window_count(y, z, kh, kw, sh, sw, ph, pw, h, w))
                for ch in range(c):
                    out[b, y, z, ch] = acc[ch] / cnt


@_jit
def avg_pool_grad(g, dx, kh, kw, sh, sw, same):
    """Each output's gradient shared equally by its window's elements inside the input
    (float64 sums)."""
    n, h, w, c = dx.shape
    oh, ow = g.shape[1], g.shape[2]
    ph = pad_before(h, oh, kh, sh, 1, same)
    pw = pad_before(w, ow, kw, sw, 1, same)
    acc = np.zeros((h, w, c), np.float64)
    for b in range(n):
        acc[:] = 0.0
        for y in range(oh):
            for z in range(ow):
                cnt = np.float64(_window_count(y, z, kh, kw, sh, sw, ph, pw, h, w))
                for i in range(kh):
                    iy = y * sh + i - ph
                    if iy < 0 or iy >= h:
                        continue
                    for j in range(kw):
                        ix = z * sw + j - pw
                        if ix < 0 or ix >= w:
                            continue
                        for ch in range(c):
                            acc[iy, ix, ch] += g[b, y, z, ch] / cnt
        for iy in range(h):
            for ix in range(w):
                for ch in range(c):
                    dx[b, iy, ix, ch] = acc[iy, ix, ch]


FUNCS = {f.__name__: f for f in (conv2d, conv2d_input_grad, conv2d_filter_grad,
                                 depthwise_conv2d, depthwise_input_grad, depthwise_filter_grad,
                                 max_pool, max_pool_grad, avg_pool, avg_pool_grad)}


def _hash_self() -> str:
    import hashlib
    with open(os.path.abspath(__file__), "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()[:16]


CACHE_TOKEN = _hash_self()
