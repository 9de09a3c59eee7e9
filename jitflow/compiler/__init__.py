"""The compiler: execution plans turned into fused native kernels (the "numba" backend).

Modules, in pipeline order:

- `plan.py`     what one `Session.run` signature computes: pruned, sorted ops.
- `fuse.py`     lowering of a run of ops to a kernel description (the IR): values with
                symbolic dims, elementwise expression trees, statements (loops, reductions,
                matmuls, row ops, views, in-place variable updates) and hoisted checks. It
                knows nothing about the CPU code text, so another emitter (CUDA) can read it.
- `codegen.py`  the CPU emitter: IR -> the source of one Numba function (explicit loops,
                typed constants, every line tagged `# <op name>`).
- `cache.py`    content-addressed modules, in memory and on disk (`njit(cache=True)`).
- `cpu.py`      the backend: splitting a plan into native segments and reference steps,
                shape classes, the warm path, `make_callable`, `inspect`, `export_source`.
- `vecmath.py`  vectorizable exp/log/tanh/sigmoid helpers the generated code calls.

Importing this package does not import Numba; compiling the first kernel does.
"""
