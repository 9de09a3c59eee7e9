"""Vendor GEMMs for the cuda backend's products (`ir.MatMul`), chosen once per backend.

A float32/float64 product calls the chosen library on the operands' device memory, shared
through the CUDA array interface (no copy), on the session's stream; integer products, and
every product where no library is chosen, run the emitter's tiled kernel. JITFLOW_CUDA_BLAS
picks: `auto` (default: CuPy's cuBLAS where CuPy imports and sees a GPU; never on the
simulator), `cupy` (the same, but an error when CuPy cannot be used), `none` (the tiled kernel
always). Install the library with `pip install 'jitflow[cuda-libs]'`.
"""
from __future__ import annotations

import importlib
from typing import Callable, Optional

from jitflow.runtime import config

__all__ = ["choose", "CupyGemm", "stream_handle"]


def stream_handle(stream) -> int:
    """The raw CUstream of a numba stream (ctypes handle or cuda-python object)."""
    h = stream.handle
    h = getattr(h, "value", h)
    return int(h or 0)


class CupyGemm:
    """cuBLAS through `cupy.matmul` on zero-copy CuPy views of numba device arrays."""

    name = "cupy"

    def __init__(self, cupy) -> None:
        self.cp = cupy
        self._streams: dict = {}

    def matmul(self, a, b, out, ta: bool, tb: bool, stream) -> None:
        """out[...] = op(a) @ op(b), enqueued on `stream` (a numba stream)."""
        cp = self.cp
        h = stream_handle(stream)
        ext = self._streams.get(h)
        if ext is None:
            ext = self._streams[h] = cp.cuda.ExternalStream(h)
        with ext:
            x = cp.asarray(a)
            y = cp.asarray(b)
            cp.matmul(x.T if ta else x, y.T if tb else y, out=cp.asarray(out))


def _cupy(importer: Callable):
    """CuPy's GEMM, or None when CuPy does not import or sees no GPU."""
    try:
        cp = importer("cupy")
        if cp.cuda.runtime.getDeviceCount() < 1:
            return None
    except Exception:  # noqa: BLE001  (not installed, or a broken CUDA install: anything)
        return None
    return CupyGemm(cp)


_LIBRARIES = {"cupy": _cupy}


def choose(simulator: bool, importer: Callable = importlib.import_module) -> Optional[object]:
    """The GEMM object products call (`.matmul(a, b, out, ta, tb, stream)`), or None for the
    tiled kernel; `importer` imports a module by name (tests pass a fake)."""
    mode = config.get("JITFLOW_CUDA_BLAS")
    if mode == "none" or (simulator and mode == "auto"):
        return None
    if mode == "auto":
        for make in _LIBRARIES.values():
            lib = make(importer)
            if lib is not None:
                return lib
        return None
    lib = _LIBRARIES[mode](importer)
    if lib is None:
        raise RuntimeError(f"jitflow: JITFLOW_CUDA_BLAS={mode} but {mode} cannot be used here "
                           "(not installed, or no GPU it can see); install it with "
                           "`pip install 'jitflow[cuda-libs]'` or set JITFLOW_CUDA_BLAS=auto")
    return lib
