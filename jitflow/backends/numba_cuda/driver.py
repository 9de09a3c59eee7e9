"""The "cuda" backend: the plans numba_cpu runs, as Numba CUDA kernels on an NVIDIA GPU.

`Session(backend="cuda")` (or JITFLOW_BACKEND=cuda) splits a plan as numba_cpu does (native
segments, reference steps, hoisted random ops, deferred host ops), lowers each segment to the
same kernel IR and emits it with emit.py. Variables stay resident on the device between runs
(the session's `VariableStore` holds the device copies; `Saver`, `Variable.load`, `eval` and
export read host values, which copies them back): a run uploads its feeds and downloads only
its fetches, through pinned staging buffers on the session's one stream (a run synchronizes
once, after its downloads). Convolutions and pooling run windowlib.py's kernels; float products
call a vendor GEMM where vendor.py chose one. An op whose IR this backend cannot emit runs on
the host, with one warning naming it. Without an NVIDIA GPU and without Numba's CUDA simulator
(NUMBA_ENABLE_CUDASIM=1), creating the backend fails with an error saying how to get either.
"""
from __future__ import annotations

import os
import sys
import time
import warnings

import numpy as np

from jitflow.backends.base import (REFERENCES, CheckFailed, ProgramExecutable,
                                   decode_check_error, fallback_warning, undraw)
from jitflow.backends.numba_cuda.emit import Unemittable, generate_module
from jitflow.compiler import ir as _ir
from jitflow.compiler import lower as _lower
from jitflow.compiler.plan import Plan
from jitflow.compiler.program import Segment
from jitflow.runtime import config
from jitflow.runtime.reference import RunContext, run_reference_step

__all__ = ["CudaBackend", "CudaExecutable", "cuda_module", "UNAVAILABLE"]

UNAVAILABLE = (
    "jitflow: backend 'cuda' needs an NVIDIA GPU with its driver, or Numba's CUDA simulator. "
    "Install the CUDA target with `pip install 'jitflow[cuda]'` (the numba-cuda package) and "
    "run where `numba.cuda.is_available()` is true, or set NUMBA_ENABLE_CUDASIM=1 in the "
    "environment before starting Python to run the kernels on the CPU simulator (slow: for "
    "tests). {why}")
_WARNED: set = set()
_MODULES: dict = {}   # module source -> namespace (kernels compile at their first launch)


def cuda_module():
    """numba.cuda (the simulator when NUMBA_ENABLE_CUDASIM=1), or RuntimeError saying how to
    get a GPU or the simulator."""
    try:
        import numba
        if (os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")
                and not numba.config.ENABLE_CUDASIM and "numba.cuda" not in sys.modules):
            numba.core.config.reload_config()   # the variable was set after numba's import
        from numba import cuda
    except ImportError as e:
        raise RuntimeError(UNAVAILABLE.format(why=f"(numba.cuda: {e})")) from None
    try:
        ok = cuda.is_available()
    except Exception as e:  # noqa: BLE001  (a broken driver install raises anything)
        raise RuntimeError(UNAVAILABLE.format(why=f"({e})")) from None
    if not ok:
        raise RuntimeError(UNAVAILABLE.format(why="(no CUDA GPU or driver found)"))
    return cuda


def simulated() -> bool:
    import numba
    return bool(numba.config.ENABLE_CUDASIM)


class _Runtime:
    """What generated host functions call: allocation, launch sizes, copies; and the session's
    transfer machinery: one CUDA stream every copy and launch of a run goes on, and pinned
    host staging buffers (reused across runs, keyed by shape and dtype) that feeds are copied
    through on the way in and fetches on the way out, so a run synchronizes once, after its
    last download (or where a host step needs a device value)."""

    def __init__(self, cuda, sim: bool) -> None:
        import threading
        self.cuda = cuda
        self.sim = sim
        # the simulator runs every thread as a Python thread: few small blocks
        self.block = config.get("JITFLOW_CUDA_BLOCK") or (8 if sim else 128)
        self.tile = config.get("JITFLOW_CUDA_TILE") or (4 if sim else 16)
        self.max_blocks = 4 if sim else 65535
        # reductions: blocks that keep the device busy, and the fewest elements per thread
        # worth a block of its own (see split)
        self.fill_blocks = 4 if sim else 1024
        self.per_thread = 2 if sim else 16
        self.stream = cuda.stream()
        self.lock = threading.RLock()      # one run at a time uses the stream and the staging
        self._staging: dict = {}           # (direction, shape, dtype) -> [pinned buffers]
        self._taken: dict = {}             # the same keys -> buffers handed out in this run
        self.pinned_allocations = 0        # pinned buffers allocated so far (tests read it)
        self.depth = 0                     # runs in progress (nested: control-flow bodies)
        from jitflow.backends.numba_cuda import vendor
        self.blas = vendor.choose(sim)     # a vendor GEMM, or None: the tiled kernel

    def empty(self, shape, dtype):
        return self.cuda.device_array(shape, dtype, stream=self.stream)

    def grid(self, n: int) -> int:
        return max(1, min((n + self.block - 1) // self.block, self.max_blocks))

    def blocks(self, n: int) -> int:
        return max(1, min(n, self.max_blocks))

    def split(self, n_out: int, n_red: int) -> int:
        """Blocks per output element of a reduction: 1 (one block reads all of an output's
        inputs) unless the outputs are too few to fill the device and each has many inputs;
        then up to fill_blocks chunks of at least block * per_thread elements."""
        if n_out >= self.fill_blocks:
            return 1
        chunk = self.block * self.per_thread
        return max(1, min(-(-n_red // chunk), -(-self.fill_blocks // max(n_out, 1))))

    def tiles(self, n: int, m: int) -> tuple:
        t = self.tile
        return (max(1, min((n + t - 1) // t, self.max_blocks)),
                max(1, min((m + t - 1) // t, self.max_blocks)))

    def upload(self, a: np.ndarray):
        """A device copy of `a` (constants, variables: pageable memory, copied at once)."""
        a = np.ascontiguousarray(a)
        return self.cuda.to_device(a.reshape(1) if a.ndim == 0 else a, stream=self.stream)

    def copy(self, d):
        out = self.cuda.device_array(d.shape, d.dtype, stream=self.stream)
        if d.size:
            out.copy_to_device(d, stream=self.stream)
        return out

    def host(self, d) -> np.ndarray:
        """`d`'s value on the host now (waits for the stream: host work inside a run)."""
        a = d.copy_to_host(stream=self.stream)
        self._sync()
        return a

    # -- staged transfers -------------------------------------------------------------------
    def begin_run(self, outermost: bool) -> None:
        """A run starts: output buffers are free (a run reads its staged fetches before it
        returns); input buffers too when no run is in progress (else only after the stream's
        next synchronization, see _sync)."""
        for key in [k for k in self._taken if outermost or k[0] == "out"]:
            del self._taken[key]

    def _sync(self) -> None:
        """Wait for the stream; every input copy is done, so their buffers are free."""
        self.stream.synchronize()
        for key in [k for k in self._taken if k[0] == "in"]:
            del self._taken[key]

    def _pinned(self, way: str, shape: tuple, dtype) -> np.ndarray:
        key = (way, shape, np.dtype(dtype).str)
        pool = self._staging.setdefault(key, [])
        k = self._taken.get(key, 0)
        self._taken[key] = k + 1
        if k == len(pool):
            pool.append(self.cuda.pinned_array(shape, dtype))
            self.pinned_allocations += 1
        return pool[k]

    def stage_in(self, a):
        """A device array holding host value `a`, copied asynchronously on the stream from a
        pinned staging buffer (the k-th feed of a shape and dtype in a run gets the k-th
        buffer of that key, so no copy in flight is overwritten)."""
        a = np.asarray(a)
        shape = (1,) if a.ndim == 0 else a.shape
        buf = self._pinned("in", shape, a.dtype)
        np.copyto(buf, a.reshape(shape))
        d = self.cuda.device_array(shape, a.dtype, stream=self.stream)
        if a.size:
            d.copy_to_device(buf, stream=self.stream)
        return d

    def stage_out(self, d) -> np.ndarray:
        """Start copying device array `d` into a pinned staging buffer; the buffer holds the
        value after `finish()`."""
        buf = self._pinned("out", d.shape, d.dtype)
        if d.size:
            d.copy_to_host(buf, stream=self.stream)
        return buf

    def finish(self) -> None:
        """The run's one synchronization: every copy and launch on the stream is done."""
        self._sync()


class _Module:
    """One segment's generated module for one shape class."""

    __slots__ = ("kernel", "consts", "source", "run", "var_order")

    def __init__(self, kernel, consts, source, run, var_order) -> None:
        self.kernel = kernel
        self.consts = consts
        self.source = source
        self.run = run
        self.var_order = var_order


class CudaExecutable(ProgramExecutable):
    """A plan on the GPU: segments as CUDA kernel launches, the rest on the host."""

    def __init__(self, plan: Plan, backend: "CudaBackend") -> None:
        self.backend = backend
        self.host_ops: set = set()    # ops this backend cannot emit: reference steps
        self.ok_shapes: set = set()   # input shapes whose runs succeeded (writes in place)
        self.modules: dict = {}       # segment -> {exact operand shapes: _Module or REFERENCES}
        super().__init__(plan, self._compiles)

    def _compiles(self, op) -> bool:
        return op not in self.host_ops and _lower.supported(op)

    # control-flow bodies run through __call__ (the CPU driver's lean body runner calls CPU
    # kernels)
    run_body = None

    def fast_runner(self, *args, **kwargs):
        return None   # Session.run takes its general path

    # -- compiling ------------------------------------------------------------------------
    def _module_for(self, seg, ins, bufs):
        """The module of `seg` for the shapes of `ins`/`bufs` (device arrays), or the
        references marker; raises Unemittable for ops that must move to the host."""
        key = tuple([a.shape for a in ins] + [b.shape for b in bufs])
        exact = self.modules.setdefault(seg, {})
        m = exact.get(key)
        if m is not None:
            return m
        rt = self.backend.rt
        cls_in = [(t, _ir.VClass(a.dtype.name, tuple(d == 1 for d in a.shape)
                                 if t not in self._rank0 else ()))
                  for t, a in zip(seg.in_tensors, ins)]
        var_cls = {v: _ir.VClass(b.dtype.name, () if _rank(v) == 0 else
                                 tuple(d == 1 for d in b.shape))
                   for v, b in zip(seg.var_ops, bufs)}
        try:
            kernel, consts = _lower.lower(seg.ops, cls_in, seg.out_tensors, var_cls)
            source = generate_module(kernel, rt.block, rt.tile, rt.sim)
        except _lower.Unsupported as e:
            fallback_warning(seg, str(e.args[0]), bug=False)
            exact[key] = REFERENCES
            return REFERENCES
        ns = _MODULES.get(source)
        if self.debug >= 1:
            config.debug(f"cuda: {'compile' if ns is None else 'reuse'} kernels of "
                        f"{len(seg.ops)} ops for input shapes {key}")
        if self.debug >= 4:
            config.debug("generated cuda source:\n" + source)
        if ns is None:
            ns = {"__name__": "jitflow_cuda_kernel"}
            exec(compile(source, "<jitflow cuda kernel>", "exec"), ns)
            _MODULES[source] = ns
        order = [seg.var_ops.index(v.var_op) for v in kernel.variables]
        m = _Module(kernel, [(slot, rt.upload(np.asarray(op.attrs["value"])))
                             for slot, op in consts], source, ns["run"], order)
        exact[key] = m
        return m

    def _to_host_ops(self, seg, ops: list, why: str) -> None:
        for i in ops:
            op = seg.ops[i]
            self.host_ops.add(op)
            if op.type not in _WARNED:
                _WARNED.add(op.type)
                warnings.warn(f"jitflow: the cuda backend cannot emit {op.name} ({op.type}) "
                              f"yet ({why}); it runs on the host", RuntimeWarning,
                              stacklevel=6)
        self.resplit()

    # -- running ----------------------------------------------------------------------------
    def __call__(self, feed_values, store):
        rt = self.backend.rt
        with rt.lock:
            # a control-flow body's run inside a run must not reuse an input buffer whose
            # copy may still be in flight (see begin_run)
            rt.depth += 1
            try:
                rt.begin_run(rt.depth == 1)
                return self._call(feed_values, store)
            finally:
                rt.depth -= 1

    def _call(self, feed_values, store):
        for _ in range(len(self.plan.ops) + 1):
            try:
                return self._run(feed_values, store)
            except _Retry:
                continue
            except CheckFailed as e:
                op, what = e.args
                if self.debug >= 1:
                    config.debug(f"{op.name} ({op.type}): {what}; running this step op by op")
                return self.run_references(feed_values, store)
        return self.run_references(feed_values, store)

    def _run(self, feed_values, store):
        rt = self.backend.rt
        t0 = time.perf_counter() if self.debug >= 2 else 0.0
        plan = self.plan
        if any(v not in store for v in self.var_ops) or any(
                v not in store for v in self.extra_vars):
            return self.run_references(feed_values, store)
        env = dict(zip(plan.feeds, feed_values))
        for op, v in zip(self.pre, self.draw_hoisted(feed_values, store)):
            env[op.outputs[0]] = v
        self._rank0 = {t for t, v in env.items() if np.ndim(v) == 0}
        dev: dict = {}
        ctx = RunContext(store)
        shape_key = tuple(np.shape(a) for a in feed_values)
        saved = {}
        if shape_key not in self.ok_shapes:
            # the first run of these shapes: a failing check restores what it wrote
            saved = {v: rt.copy(self._var_dev(v, store, ctx)) for v in self.written}
        try:
            with np.errstate(all="ignore"):
                for step in self.steps:
                    if isinstance(step, Segment):
                        self._run_segment(step, env, dev, store, ctx)
                    else:
                        for t in step.inputs:
                            if t not in env and t in dev:
                                env[t] = self._host(t, dev[t])
                        run_reference_step(step, env, ctx)
                for op in self.post:
                    for t in op.inputs:
                        if t not in env and t in dev:
                            env[t] = self._host(t, dev[t])
                    run_reference_step(op, env, ctx)
                results = []
                staged = []
                for t in plan.fetches:
                    if t in env:
                        results.append(env[t])
                    elif t in dev:   # copied out after the loop, once the stream is done
                        staged.append((len(results), t, rt.stage_out(dev[t])))
                        results.append(None)
                    else:   # a variable: its value after the run
                        results.append(np.array(ctx.read_var(t.op), copy=True))
                rt.finish()
                for i, t, buf in staged:
                    a = np.array(buf, copy=True)
                    results[i] = a.reshape(()) if t in self._rank0 else a
        except (CheckFailed, _Retry):
            for v, d in saved.items():
                store.set_device(v, d, rt.host)
            raise
        ctx.commit()
        self.ok_shapes.add(shape_key)
        if self.debug >= 2:
            n = sum(isinstance(s, Segment) for s in self.steps)
            config.debug(f"cuda: run {len(self.steps)} steps ({n} on the device): "
                        f"{(time.perf_counter() - t0) * 1e6:.1f} us")
        return results

    def _host(self, t, d) -> np.ndarray:
        a = self.backend.rt.host(d)
        return a.reshape(()) if t in self._rank0 else a

    def _var_dev(self, v, store, ctx):
        """Variable `v`'s device buffer (uploaded when the host holds the newest value)."""
        if v in ctx.pending:   # written on the host earlier in this run
            d = self.backend.rt.upload(ctx.pending.pop(v))
            store.set_device(v, d, self.backend.rt.host)
            return d
        d = store.device.get(v)
        if d is None:
            d = self.backend.rt.upload(store.values[v])
            store.set_device(v, d, self.backend.rt.host)
        return d

    def _run_segment(self, seg, env, dev, store, ctx) -> None:
        rt = self.backend.rt
        ins = []
        for t in seg.in_tensors:
            d = dev.get(t)
            if d is None:
                d = dev[t] = rt.stage_in(env[t])
            ins.append(d)
        bufs = [self._var_dev(v, store, ctx) for v in seg.var_ops]
        try:
            m = self._module_for(seg, ins, bufs)
        except Unemittable as e:
            self._to_host_ops(seg, e.ops, str(e))
            raise _Retry() from None
        if m is REFERENCES:
            for t in list(seg.in_tensors):
                if t not in env and t in dev:
                    env[t] = self._host(t, dev[t])
            for op in seg.ops:
                run_reference_step(op, env, ctx)
            return
        args = list(ins) + [d for _, d in m.consts]
        vs = [bufs[i] for i in m.var_order]
        try:
            out = m.run(args, vs, rt)
        except ValueError as e:
            failed = decode_check_error(e, seg.ops)
            if failed is not None:
                raise failed from None
            raise
        for t, r, d in zip(seg.out_tensors, m.kernel.results, out):
            if t not in env and t not in dev:
                dev[t] = d
                if isinstance(r, _ir.Lit) or r.rank == 0:
                    self._rank0.add(t)

    # -- introspection ----------------------------------------------------------------------
    def describe(self, feed_values, store) -> str:
        """The generated CUDA modules (compiled for these feeds where not yet, by one run whose
        variable writes and random draws are undone), and the host steps."""
        kept = {v: np.array(store.get(v), copy=True) for v in self.written if v in store}
        drawn = self.saved_draws(store)
        try:
            self(feed_values, store)
        except Exception:  # noqa: BLE001  (the listing shows what was generated)
            pass
        store.commit(kept)
        undraw(drawn)
        parts = []
        for s in self.steps:
            if isinstance(s, Segment):
                mods = [m for m in self.modules.get(s, {}).values() if isinstance(m, _Module)]
                for m in dict.fromkeys(mods):
                    parts.append(m.source)
                if not mods:
                    parts.append(f"# segment of {len(s.ops)} ops runs on the host: "
                                 + ", ".join(op.name for op in s.ops))
            elif s.type != "VariableV2":
                parts.append(f"# host step: {s.name} ({s.type})")
        return "\n".join(parts)


def _rank(var_op) -> int:
    shape = var_op.attrs["shape"]
    return -1 if shape.ndims is None else shape.ndims


class _Retry(Exception):
    """Ops moved to the host: split the plan again and rerun."""


class CudaBackend:
    """Backend compiling plans to Numba CUDA kernels (`Session(backend="cuda")`)."""

    name = "cuda"

    def __init__(self) -> None:
        cuda = cuda_module()
        self.rt = _Runtime(cuda, simulated())

    def compile(self, plan: Plan) -> CudaExecutable:
        return CudaExecutable(plan, self)
