"""scipy's BLAS for compiled kernels: `jitflow_sgemm` and `jitflow_dgemm` bound, as LLVM symbols,
to scipy.linalg.cython_blas's ?gemm (Fortran convention), once per process, before any kernel
that calls them is compiled or loaded. Imports neither Numba nor scipy.linalg's package."""
from __future__ import annotations

import ctypes
import sys

__all__ = ["bind", "symbol", "address"]

_ADDR: dict = {}


def symbol(dtype: str) -> str:
    """The LLVM symbol of ?gemm for `dtype` ("float32": sgemm, "float64": dgemm)."""
    return "jitflow_sgemm" if dtype == "float32" else "jitflow_dgemm"


def address(dtype: str) -> int:
    bind()
    return _ADDR[dtype]


def bind() -> None:
    """Bind the gemm symbols (once per process)."""
    if _ADDR:
        return
    import llvmlite.binding as llb
    mod = _cython_blas()
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype = ctypes.c_char_p
    get_name.argtypes = [ctypes.py_object]
    get_ptr = ctypes.pythonapi.PyCapsule_GetPointer
    get_ptr.restype = ctypes.c_void_p
    get_ptr.argtypes = [ctypes.py_object, ctypes.c_char_p]
    for dt, fn in (("float32", "sgemm"), ("float64", "dgemm")):
        cap = mod.__pyx_capi__[fn]
        addr = get_ptr(cap, get_name(cap))
        llb.add_symbol(symbol(dt), addr)
        _ADDR[dt] = addr


def _cython_blas():
    """scipy.linalg.cython_blas, loaded without running scipy.linalg's __init__ (which
    imports most of scipy: ~0.4 s)."""
    mod = sys.modules.get("scipy.linalg.cython_blas")
    if mod is not None:
        return mod
    try:
        import importlib.machinery
        import importlib.util
        import os

        import scipy
        folder = os.path.join(os.path.dirname(scipy.__file__), "linalg")
        files = [f for f in os.listdir(folder)
                 if f.startswith("cython_blas.") and f.endswith((".so", ".pyd"))]
        path = os.path.join(folder, files[0])
        loader = importlib.machinery.ExtensionFileLoader("scipy.linalg.cython_blas", path)
        spec = importlib.util.spec_from_file_location("scipy.linalg.cython_blas", path,
                                                      loader=loader)
        mod = importlib.util.module_from_spec(spec)
        loader.exec_module(mod)
        sys.modules["scipy.linalg.cython_blas"] = mod
        return mod
    except Exception:  # noqa: BLE001  (any layout surprise: the ordinary import)
        from scipy.linalg import cython_blas
        return cython_blas
