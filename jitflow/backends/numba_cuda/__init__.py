"""The "cuda" backend: kernel IR -> Numba CUDA kernels on an NVIDIA GPU (numba-cuda).

- `scalar_ops.py`  scalar op -> CUDA Python source (math functions, builtins, devlib.py);
- `devlib.py`      device functions the kernels call (float rounding);
- `emit.py`        one emitter per IR node kind: grid-stride elementwise kernels, block
                   reductions in shared memory, a tiled matmul, row kernels, host-side views;
- `windowlib.py`   convolutions, depthwise convolutions, pooling and gradients (`LibCall`);
- `vendor.py`      the vendor GEMM float products call (CuPy's cuBLAS), or none: tiled kernel;
- `driver.py`      `CudaBackend`: plans split as numba_cpu splits them, device-resident
                   variables, pinned staged transfers on one stream, host fallback (with
                   one warning) for ops it cannot emit.

Importing this package does not import Numba; creating the backend does (and fails with a
message saying how to get a GPU or the simulator when neither is there).
"""
