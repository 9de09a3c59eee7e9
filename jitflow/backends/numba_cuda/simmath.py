"""`math` for kernels run by Numba's CUDA simulator.

The simulator runs kernels as Python, where `math.sqrt(-1)` and `math.exp(1000)` raise; on a GPU
they give NaN and inf, as NumPy does. Under the simulator generated modules import this module
as `math`: the same names, with NumPy's IEEE results (in the operand's float width).
"""
from __future__ import annotations

import math as _math

import numpy as np

__all__ = ["exp", "log", "log1p", "expm1", "sin", "cos", "tan", "tanh", "asin", "acos", "atan",
           "sinh", "cosh", "asinh", "acosh", "atanh", "erf", "sqrt", "atan2", "fmod", "isnan",
           "isinf", "pi", "inf", "nan"]

exp, log, log1p, expm1 = np.exp, np.log, np.log1p, np.expm1
sin, cos, tan, tanh = np.sin, np.cos, np.tan, np.tanh
asin, acos, atan = np.arcsin, np.arccos, np.arctan
sinh, cosh, asinh, acosh, atanh = np.sinh, np.cosh, np.arcsinh, np.arccosh, np.arctanh
sqrt, atan2, fmod = np.sqrt, np.arctan2, np.fmod
isnan, isinf = np.isnan, np.isinf
pi, inf, nan = _math.pi, _math.inf, _math.nan


def erf(x):
    """math.erf in the operand's float type (it never raises)."""
    return type(x)(_math.erf(x)) if isinstance(x, np.floating) else _math.erf(x)
