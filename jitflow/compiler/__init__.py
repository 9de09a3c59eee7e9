"""The compiler: execution plans turned into backend-neutral kernel descriptions.

Modules, in pipeline order:

- `plan.py`       what one `Session.run` signature computes: pruned, sorted ops.
- `partition.py`  long plans cut into kernels by content (repeated structure compiles once).
- `ir.py`         the kernel IR: values with symbolic dims, scalar-op expressions, statements
                  (loops, reductions, contractions, row ops, regions, views, library calls,
                  in-place variable updates) and checks. No backend's code text.
- `lower.py`      the generic fuser: a run of ops -> one IR kernel, through each op's registry
                  entry (`scalar=` or `lower=`); broadcasting, inlining, materializing.

Backends read the IR: jitflow/backends/numba_cpu (the default) and numba_cuda.

The compiler is a function of a plan: executables are called with the feed values and the
session's variable store (jitflow/runtime/state.py), never with the session.

Importing this package does not import Numba; compiling the first kernel does.
"""
