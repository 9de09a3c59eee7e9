"""The "numba" backend: kernel IR -> Numba `@njit` functions on the CPU.

- `scalar_ops.py`  scalar op -> Numba source (the table the emitter reads);
- `emit.py`        one emitter per IR node kind: a Kernel -> the source of one function;
- `driver.py`      plans split into native segments and reference steps, shape classes, the
                   multi-kernel driver, the warm path, `inspect`, `export_source`;
- `cache.py`, `background.py`, `compile_worker.py`: content-addressed modules in memory and on
                   disk, background compilation (a thread, or a helper process);
- `vecmath.py` (+ `vecmath_names.py`), `nnlib.py`: the libraries generated code imports
                   (vectorizable math; convolution and pooling routines);
- `memory.py`      allocator tuning for large buffers.

Importing this package does not import Numba.
"""
