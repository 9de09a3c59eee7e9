"""Device functions generated CUDA kernels call (`from jitflow.backends.numba_cuda import devlib
as _dl`): rounding without libdevice's float-returning functions (absent from the simulator),
one version per float width so float32 math stays float32.

trunc(x) = x - fmod(x, 1) is exact; floor, ceil and round-half-to-even (rint) follow from it;
NaN and infinities pass through.
"""
from __future__ import annotations

import math

import numpy as np
from numba import cuda

__all__ = ["trunc32", "trunc64", "floor32", "floor64", "ceil32", "ceil64", "rint32", "rint64"]

_ONE32, _HALF32, _TWO32, _BIG32 = (np.float32(1.0), np.float32(0.5), np.float32(2.0),
                                   np.float32(8388608.0))   # 2**23: larger floats are integers


@cuda.jit(device=True)
def trunc32(x):
    if math.isinf(x) or math.isnan(x):
        return x
    return x - math.fmod(x, _ONE32)


@cuda.jit(device=True)
def trunc64(x):
    if math.isinf(x) or math.isnan(x):
        return x
    return x - math.fmod(x, 1.0)


@cuda.jit(device=True)
def floor32(x):
    t = trunc32(x)
    return t - _ONE32 if x < t else t


@cuda.jit(device=True)
def floor64(x):
    t = trunc64(x)
    return t - 1.0 if x < t else t


@cuda.jit(device=True)
def ceil32(x):
    t = trunc32(x)
    return t + _ONE32 if x > t else t


@cuda.jit(device=True)
def ceil64(x):
    t = trunc64(x)
    return t + 1.0 if x > t else t


@cuda.jit(device=True)
def rint32(x):
    if not (abs(x) < _BIG32):
        return x
    t = trunc32(x)
    d = x - t
    odd = math.fmod(t, _TWO32) != 0
    if d > _HALF32 or (d == _HALF32 and odd):
        return t + _ONE32
    if d < -_HALF32 or (d == -_HALF32 and odd):
        return t - _ONE32
    return t


@cuda.jit(device=True)
def rint64(x):
    if not (abs(x) < 4503599627370496.0):   # 2**52: larger floats are integers
        return x
    t = trunc64(x)
    d = x - t
    odd = math.fmod(t, 2.0) != 0
    if d > 0.5 or (d == 0.5 and odd):
        return t + 1.0
    if d < -0.5 or (d == -0.5 and odd):
        return t - 1.0
    return t
