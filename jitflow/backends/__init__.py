"""Backends: each turns the kernel IR (jitflow/compiler/ir.py) into code and runs it.

A backend is a folder with a table from scalar op to code and one emitter per IR node kind,
plus the driver that runs a plan's kernels:

- `numba_cpu/`: Numba `@njit` functions on the CPU (the default, `backend="numba"`);
- `numba_cuda/`: Numba CUDA kernels on an NVIDIA GPU (`backend="cuda"`).

`pytext.py` holds what both write alike: Python-syntax dims, literals and dtype names.
"""
