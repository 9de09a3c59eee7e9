"""The cuda backend's window library: convolutions, depthwise convolutions, pooling and their
gradients as CUDA kernels on NHWC device arrays, the routines `ir.LibCall` names (the same
names and arguments as numba_cpu's nnlib), so a CNN's forward and backward passes stay on the
device.

Kernels gather: one thread per output element (grid-stride) sums what reaches it, so no atomics
and a fixed summation order; a filter gradient, which sums over the whole batch for few
outputs, takes one block per filter element and reduces in shared memory. Pooling follows
nnlib exactly (float64 sums for the average; a max-pool gradient goes to the first window
element equal to the maximum, padding counting as -inf), so its results are bit-identical to
the CPU backend's; convolutions sum in the operands' dtype in window order, where the CPU path
uses BLAS (equal within float rounding). `call` is what generated host code calls.
"""
from __future__ import annotations

import numpy as np
from numba import cuda

__all__ = ["call", "ROUTINES", "pad_before"]

_RED = 128   # shared-memory size of the block reductions (threads per block at most)


def pad_before(n: int, out: int, k: int, stride: int, dilation: int, same: bool) -> int:
    """Padding before the first element of one spatial axis (0 for VALID), as nnlib."""
    if not same:
        return 0
    total = (out - 1) * stride + (k - 1) * dilation + 1 - n
    return total // 2 if total > 0 else 0


@cuda.jit(device=True)
def _first_window(t, pad, k, stride, n_out):
    """The first output index whose window (k taps from o*stride - pad) holds input index t."""
    lo = t + pad - k + 1
    first = 0 if lo <= 0 else (lo + stride - 1) // stride
    return first


@cuda.jit(device=True)
def _window_count(y, z, kh, kw, sh, sw, ph, pw, h, w):
    y0 = y * sh - ph
    z0 = z * sw - pw
    rows = min(y0 + kh, h) - max(y0, 0)
    cols = min(z0 + kw, w) - max(z0, 0)
    return max(rows, 0) * max(cols, 0)


# -- convolutions -------------------------------------------------------------------------------
# A depthwise convolution is a convolution whose output channel k = ch * mult + q reads input
# channel ch alone, with filter [kh, kw, c, mult]: each kernel below takes `depthwise` and
# picks the channels it sums over from it.
@cuda.jit
def _conv2d(x, f, out, sh, sw, dh, dw, ph, pw, zero, depthwise):
    n, h, w, c = x.shape
    kh, kw, fq = f.shape[0], f.shape[1], f.shape[3]
    oh, ow, co = out.shape[1], out.shape[2], out.shape[3]
    for q in range(cuda.grid(1), n * oh * ow * co, cuda.gridsize(1)):
        k = q % co
        r = q // co
        z = r % ow
        r = r // ow
        y = r % oh
        b = r // oh
        if depthwise:   # input channel k // mult, filter column k % mult
            c0 = k // fq
            c1 = c0 + 1
            o = k - c0 * fq
        else:           # every input channel, filter column k
            c0 = 0
            c1 = c
            o = k
        acc = zero
        for i in range(kh):
            iy = y * sh + i * dh - ph
            if iy < 0 or iy >= h:
                continue
            for j in range(kw):
                ix = z * sw + j * dw - pw
                if ix < 0 or ix >= w:
                    continue
                for ch in range(c0, c1):
                    acc += x[b, iy, ix, ch] * f[i, j, ch, o]
        out[b, y, z, k] = acc


@cuda.jit
def _conv2d_input_grad(f, g, dx, sh, sw, dh, dw, ph, pw, zero, depthwise):
    n, h, w, c = dx.shape
    kh, kw, fq = f.shape[0], f.shape[1], f.shape[3]
    oh, ow = g.shape[1], g.shape[2]
    for q in range(cuda.grid(1), n * h * w * c, cuda.gridsize(1)):
        ch = q % c
        r = q // c
        ix = r % w
        r = r // w
        iy = r % h
        b = r // h
        base = ch * fq if depthwise else 0   # g's channel of filter column o: base + o
        acc = zero
        for i in range(kh):
            ty = iy + ph - i * dh
            if ty < 0 or ty % sh != 0 or ty // sh >= oh:
                continue
            y = ty // sh
            for j in range(kw):
                tz = ix + pw - j * dw
                if tz < 0 or tz % sw != 0 or tz // sw >= ow:
                    continue
                z = tz // sw
                for o in range(fq):
                    acc += g[b, y, z, base + o] * f[i, j, ch, o]
        dx[b, iy, ix, ch] = acc


@cuda.jit
def _conv2d_filter_grad(x, g, df, sh, sw, dh, dw, ph, pw, zero, depthwise):
    """One block per filter element (i, j, ch, o): its threads stride over the batch's output
    positions, then a tree reduction in shared memory (blockDim.x a power of two)."""
    sm = cuda.shared.array(_RED, np.float64)
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    n, h, w, c = x.shape
    kh, kw, fq = df.shape[0], df.shape[1], df.shape[3]
    oh, ow = g.shape[1], g.shape[2]
    m = n * oh * ow
    for e in range(cuda.blockIdx.x, kh * kw * c * fq, cuda.gridDim.x):
        o = e % fq
        r = e // fq
        ch = r % c
        r = r // c
        j = r % kw
        i = r // kw
        go = ch * fq + o if depthwise else o   # g's channel of this filter column
        acc = zero
        for p in range(tid, m, nt):
            z = p % ow
            r2 = p // ow
            y = r2 % oh
            b = r2 // oh
            iy = y * sh + i * dh - ph
            ix = z * sw + j * dw - pw
            if iy >= 0 and iy < h and ix >= 0 and ix < w:
                acc += x[b, iy, ix, ch] * g[b, y, z, go]
        sm[tid] = acc
        cuda.syncthreads()
        half = nt // 2
        while half > 0:
            if tid < half:
                sm[tid] = sm[tid] + sm[tid + half]
            cuda.syncthreads()
            half = half // 2
        if tid == 0:
            df[i, j, ch, o] = sm[0]
        cuda.syncthreads()


# -- pooling ------------------------------------------------------------------------------------
@cuda.jit
def _max_pool(x, out, kh, kw, sh, sw, ph, pw, ninf):
    n, h, w, c = x.shape
    oh, ow = out.shape[1], out.shape[2]
    for q in range(cuda.grid(1), n * oh * ow * c, cuda.gridsize(1)):
        ch = q % c
        r = q // c
        z = r % ow
        r = r // ow
        y = r % oh
        b = r // oh
        m = ninf
        for i in range(kh):
            iy = y * sh + i - ph
            if iy < 0 or iy >= h:
                continue
            for j in range(kw):
                ix = z * sw + j - pw
                if ix < 0 or ix >= w:
                    continue
                v = x[b, iy, ix, ch]
                if v > m or v != v:
                    m = v
        out[b, y, z, ch] = m


@cuda.jit
def _max_pool_grad(x, yv, g, dx, kh, kw, sh, sw, ph, pw, ninf, zero):
    """dx element (b, iy, ix, ch) sums the gradients of the windows whose first element equal
    to their maximum (row-major, padding as -inf) is this one, in nnlib's window order."""
    n, h, w, c = x.shape
    oh, ow = g.shape[1], g.shape[2]
    for q in range(cuda.grid(1), n * h * w * c, cuda.gridsize(1)):
        ch = q % c
        r = q // c
        ix = r % w
        r = r // w
        iy = r % h
        b = r // h
        acc = zero
        for y in range(_first_window(iy, ph, kh, sh, oh), oh):
            if y * sh - ph > iy:
                break
            for z in range(_first_window(ix, pw, kw, sw, ow), ow):
                if z * sw - pw > ix:
                    break
                target = yv[b, y, z, ch]
                mine = False
                found = False
                for i in range(kh):
                    if found:
                        break
                    ty = y * sh + i - ph
                    for j in range(kw):
                        tz = z * sw + j - pw
                        if ty >= 0 and ty < h and tz >= 0 and tz < w:
                            v = x[b, ty, tz, ch]
                        else:
                            v = ninf
                        if v == target:
                            found = True
                            mine = ty == iy and tz == ix
                            break
                if mine:
                    acc += g[b, y, z, ch]
        dx[b, iy, ix, ch] = acc


@cuda.jit
def _avg_pool(x, out, kh, kw, sh, sw, ph, pw):
    n, h, w, c = x.shape
    oh, ow = out.shape[1], out.shape[2]
    for q in range(cuda.grid(1), n * oh * ow * c, cuda.gridsize(1)):
        ch = q % c
        r = q // c
        z = r % ow
        r = r // ow
        y = r % oh
        b = r // oh
        acc = np.float64(0.0)   # (not 0.0: the simulator would sum in float32)
        for i in range(kh):
            iy = y * sh + i - ph
            if iy < 0 or iy >= h:
                continue
            for j in range(kw):
                ix = z * sw + j - pw
                if ix < 0 or ix >= w:
                    continue
                acc += x[b, iy, ix, ch]
        cnt = np.float64(_window_count(y, z, kh, kw, sh, sw, ph, pw, h, w))
        out[b, y, z, ch] = acc / cnt


@cuda.jit
def _avg_pool_grad(g, dx, kh, kw, sh, sw, ph, pw):
    n, h, w, c = dx.shape
    oh, ow = g.shape[1], g.shape[2]
    for q in range(cuda.grid(1), n * h * w * c, cuda.gridsize(1)):
        ch = q % c
        r = q // c
        ix = r % w
        r = r // w
        iy = r % h
        b = r // h
        acc = np.float64(0.0)   # (not 0.0: the simulator would sum in float32)
        for y in range(_first_window(iy, ph, kh, sh, oh), oh):
            if y * sh - ph > iy:
                break
            for z in range(_first_window(ix, pw, kw, sw, ow), ow):
                if z * sw - pw > ix:
                    break
                cnt = np.float64(_window_count(y, z, kh, kw, sh, sw, ph, pw, h, w))
                acc += g[b, y, z, ch] / cnt
        dx[b, iy, ix, ch] = acc


# -- host entry points ---------------------------------------------------------------------------
def _reduce_block(rt) -> int:
    """Threads per block of the filter-gradient reductions: a power of two <= _RED."""
    t = 1
    while t * 2 <= min(rt.block, _RED):
        t *= 2
    return t


def _conv(kernel, rt, lhs, rhs, out, x_shape, f_shape, o_shape, params,
          depthwise: bool = False) -> None:
    # conv2d's routines take the EXPLICIT padding before the first row and column after the
    # five window parameters (nnlib.conv2d); the depthwise ones do not
    sh, sw, dh, dw, same = params[:5]
    eh, ew = params[5:7] if len(params) > 5 else (0, 0)
    _, h, w, _ = x_shape
    kh, kw = f_shape[0], f_shape[1]
    oh, ow = o_shape[1], o_shape[2]
    ph = pad_before(h, oh, kh, sh, dh, bool(same)) + eh
    pw = pad_before(w, ow, kw, sw, dw, bool(same)) + ew
    zero = out.dtype.type(0)
    total = int(np.prod(out.shape))
    if total == 0:
        return
    if kernel is _conv2d_filter_grad:
        kernel[rt.blocks(total), _reduce_block(rt), rt.stream](
            lhs, rhs, out, sh, sw, dh, dw, ph, pw, zero, depthwise)
    else:
        kernel[rt.grid(total), rt.block, rt.stream](lhs, rhs, out, sh, sw, dh, dw, ph, pw, zero,
                                                    depthwise)


def _pool_pads(x_shape, o_shape, params) -> tuple:
    kh, kw, sh, sw, same = params
    return (pad_before(x_shape[1], o_shape[1], kh, sh, 1, bool(same)),
            pad_before(x_shape[2], o_shape[2], kw, sw, 1, bool(same)))


def call(fn: str, rt, args: list, outs: list, params: tuple) -> None:
    """Run window routine `fn` (an `ir.LibCall`'s name) on device arrays, writing `outs`."""
    out = outs[0]
    if fn in ("conv2d", "conv2d_w"):
        x, f = args
        _conv(_conv2d, rt, x, f, out, x.shape, f.shape, out.shape, params)
    elif fn in ("conv2d_input_grad", "conv2d_input_grad_w"):
        f, g = args
        _conv(_conv2d_input_grad, rt, f, g, out, out.shape, f.shape, g.shape, params)
    elif fn in ("conv2d_filter_grad", "conv2d_filter_grad_w"):
        x, g = args
        _conv(_conv2d_filter_grad, rt, x, g, out, x.shape, out.shape, g.shape, params)
    elif fn == "depthwise_conv2d":
        x, f = args
        _conv(_conv2d, rt, x, f, out, x.shape, f.shape, out.shape, params, True)
    elif fn == "depthwise_input_grad":
        f, g = args
        _conv(_conv2d_input_grad, rt, f, g, out, out.shape, f.shape, g.shape, params, True)
    elif fn == "depthwise_filter_grad":
        x, g = args
        _conv(_conv2d_filter_grad, rt, x, g, out, x.shape, out.shape, g.shape, params, True)
    else:
        kh, kw, sh, sw, _ = params
        ninf = out.dtype.type(-np.inf)
        total = int(np.prod(out.shape))
        if total == 0:
            return
        launch = (rt.grid(total), rt.block, rt.stream)
        if fn == "max_pool":
            ph, pw = _pool_pads(args[0].shape, out.shape, params)
            _max_pool[launch](args[0], out, kh, kw, sh, sw, ph, pw, ninf)
        elif fn == "avg_pool":
            ph, pw = _pool_pads(args[0].shape, out.shape, params)
            _avg_pool[launch](args[0], out, kh, kw, sh, sw, ph, pw)
        elif fn == "max_pool_grad":
            x, y, g = args
            ph, pw = _pool_pads(x.shape, g.shape, params)
            _max_pool_grad[launch](x, y, g, out, kh, kw, sh, sw, ph, pw, ninf,
                                   out.dtype.type(0))
        elif fn == "avg_pool_grad":
            (g,) = args
            ph, pw = _pool_pads(out.shape, g.shape, params)
            _avg_pool_grad[launch](g, out, kh, kw, sh, sw, ph, pw)
        else:
            raise KeyError(fn)


#: the routine names `call` runs (others: the op runs on the host)
ROUTINES = frozenset({
    "conv2d", "conv2d_w", "conv2d_input_grad", "conv2d_input_grad_w", "conv2d_filter_grad",
    "conv2d_filter_grad_w", "depthwise_conv2d", "depthwise_input_grad",
    "depthwise_filter_grad", "max_pool", "avg_pool", "max_pool_grad", "avg_pool_grad"})
