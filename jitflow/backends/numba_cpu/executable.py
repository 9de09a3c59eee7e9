"""The CPU backend's executable: one plan's `Program`, run as native kernels.

A run takes one of these paths:
- **single**: the program is one segment: one native call (`_run_single`); warm runs of a
  run signature go through a generated runner (fastpath.py) straight to the kernel;
- **driver**: segments and host steps in order, values in a dict (`_run_driver`); a run in
  which every step was native records a `Chain` (chain.py) that later runs with the same input
  shapes take;
- **body**: a control-flow body or branch, run once per iteration (`run_body`);
- **references**: the whole plan through the references, when a variable is uninitialized or
  a kernel refused its operands (`CheckFailed`: the references then raise TF1's error).

Variables are written in place in plan order; a run writes copies, committed at the end,
until its input shapes have run once with every step native and no check that could still
fail after the first write (`_note_in_place`), so a failing run changes nothing.
"""
from __future__ import annotations

import time
import weakref

import numpy as np

from jitflow.backends.base import (MAX_EXACT, REFERENCES, CheckFailed, CodegenError,
                                   ProgramExecutable, UseReferences, undraw)
from jitflow.backends.numba_cpu import background as _bg
from jitflow.backends.numba_cpu import inspect as _inspect
from jitflow.backends.numba_cpu import kernels as _kernels
from jitflow.backends.numba_cpu.chain import Chain
from jitflow.backends.numba_cpu.fastpath import FastPath
from jitflow.backends.numba_cpu.kernels import (
    STATS, Compiled, SegmentKernels, build_code, call_kernel, classes_key,
    compile_parallel_job, contig, convert_results, describe_change, fallback, generate_segment,
    has_value_checks, load_parallel, parallel_failed, parallel_of, prepare_parallel,
    use_threads)
from jitflow.compiler import lower
from jitflow.compiler.plan import Plan
from jitflow.compiler.loops import Call, walk
from jitflow.compiler.program import FEED, KERNEL, POST, WRITES, Segment
from jitflow.core import errors
from jitflow.runtime import config
from jitflow.runtime.reference import RunContext, run_op_reference, run_reference_step, run_steps

__all__ = ["Executable"]




class Executable(ProgramExecutable):
    """Runs one plan: a single native call when it can, else a driver around native segments."""

    def __init__(self, plan: Plan, backend, whole: bool = False) -> None:
        self.backend = backend
        self._fast = None
        self._lean = None    # the body runner of control-flow sub-plans (run_body)
        super().__init__(plan, lower.supported, whole)
        self.kernels = {s: SegmentKernels() for s in self.steps if isinstance(s, Segment)}
        self._in_place_keys: set = set()   # input shapes whose runs write variables in place
        # the warm path of split plans (see `Chain`): one per input shapes, made after a run
        # in which every step was a native kernel; False when the plan cannot have one
        self._chains = {} if (self.all_native and not self.single and not self.pre
                              and not self.post and self.debug < 2) else False
        self.exact: dict = {}   # single mode: exact operand shapes -> kernel

    # -- running ------------------------------------------------------------------------------
    def __call__(self, feed_values, store):
        state = store.values
        try:
            bufs = [state[v] for v in self.var_ops]
            for v in self.extra_vars:
                state[v]
        except KeyError:
            return self.run_references(feed_values, store)
        # the hoisted random ops draw before the kernel runs: if the run then goes to the
        # interpreter instead, it must draw the same numbers (each op has its own generator)
        drawn = self.saved_draws(store)
        try:
            if self.single:
                return self._run_single(feed_values, bufs, state, store)
            return self._run_driver(feed_values, store)
        except UseReferences:
            # the single segment has no kernel for these input classes
            STATS["reference_segments"] = STATS.get("reference_segments", 0) + 1
            undraw(drawn)
            return self.run_references(feed_values, store)
        except CheckFailed as e:
            # Shapes the kernel was not generated for (or invalid ones): the interpreter
            # gives the answer, or the error TF1 gives, naming the op.
            undraw(drawn)
            STATS["checks_failed"] = STATS.get("checks_failed", 0) + 1
            op, what = e.args
            if self.debug >= 1:
                config.debug(f"{op.name} ({op.type}): {what}; running this step op by op")
            return self.run_references(feed_values, store)

    def _run_single(self, feed_values, bufs, state, store):
        seg = self.steps[0]
        if self.pre:
            feed_values = list(feed_values) + self.draw_hoisted(feed_values, store)
        ins = [feed_values[i] for i in self.in_pos]
        for k, a in enumerate(ins):
            # (a rank-0 random draw made before the call is a numpy scalar: the kernel reads
            # a 0-d array)
            if type(a) is not np.ndarray or not a.flags.c_contiguous:
                ins[k] = contig(a)
        key = tuple([a.shape for a in ins] + [b.shape for b in bufs])
        c = self.exact.get(key)
        if c is None:
            c = self._compiled_for(seg, ins, bufs)
            if len(self.exact) >= MAX_EXACT:
                self.exact.clear()   # many distinct sizes: refilling is one dict lookup each
            self.exact[key] = c
        if c is REFERENCES or c.broken:
            raise UseReferences()
        if self.debug >= 2:
            t0 = time.perf_counter()
            out = self._call_fastest(c, ins, bufs, seg)
            config.debug(f"run {len(seg.ops)} ops in one native call: "
                   f"{(time.perf_counter() - t0) * 1e6:.1f} us")
        else:
            out = self._call_fastest(c, ins, bufs, seg)
        conv = c.out_conv
        post = self.run_post(feed_values, seg, convert_results(c, out), store) if self.post \
            else None
        results = []
        for kind, i in self.fetch_src:
            if kind == KERNEL:
                f = conv[i]
                results.append(out[i] if f is None else f(out[i]))
            elif kind == FEED:
                results.append(feed_values[i])
            elif kind == POST:
                results.append(post[i])
            else:
                results.append(np.array(state[i], copy=True))
        return results

    def _exact_kernel(self, step, ins, bufs):
        """The kernel for these exact operand shapes, remembered per step (up to MAX_EXACT
        shapes; then the memory starts over)."""
        key = tuple([a.shape for a in ins] + [b.shape for b in bufs])
        c = self.kernels[step].exact.get(key)
        if c is None:
            c = self._compiled_for(step, ins, bufs)
            if len(self.kernels[step].exact) >= MAX_EXACT:
                self.kernels[step].exact.clear()
            self.kernels[step].exact[key] = c
        return c

    def _compiled_for(self, seg: Segment, ins, bufs):
        """The kernel of `seg` for the classes of `ins`/`bufs`, or `REFERENCES` when that
        class has none (the segment's ops then run through their references). A new kernel
        gets code at once (see `_first_code`)."""
        ckey = classes_key(list(ins) + list(bufs))
        c = self.kernels[seg].compiled.get(ckey)
        if c is None:
            names = [t.name for t in seg.in_tensors] + [v.name for v in seg.var_ops]
            reason = ("new fetch set" if self.kernels[seg].last_key is None
                      else describe_change(names, self.kernels[seg].last_key, ckey))
            try:
                c = generate_segment(seg, ins, bufs, reason)
                self._first_code(c, seg)
            except lower.Unsupported as e:
                fallback(seg, str(e.args[0]), bug=False)
                c = REFERENCES
            except CodegenError as e:
                if config.strict():
                    raise
                fallback(seg, str(e.args[0]), bug=True)
                c = REFERENCES
            self.kernels[seg].compiled[ckey] = c
            self.kernels[seg].last_key = ckey
        return c

    @staticmethod
    def _first_code(c: Compiled, seg: Segment) -> None:
        """Code for a new kernel, by JITFLOW_COMPILE: "auto" the quick code now (or the
        optimized code, where it is cheap or cached) and the optimized code on the compiler
        thread, "sync" the optimized code now, "quick" the quick code only, "numba" the Numba
        kernel. Window routines the kernel calls are built first (once per machine; a new
        process loads them)."""
        from jitflow.backends.numba_cpu import nnlib_c
        for s in walk(c.lk.body):
            if isinstance(s, Call) and s.fn.startswith("nnlib."):
                nnlib_c.address(s.fn[6:], s.args[0][0].dtype, wait=True)
        mode = _bg.mode()
        build_code(c, seg, {"sync": "opt", "quick": "quick", "numba": "numba"}.get(mode,
                                                                                  "auto"))

    def _call_checked(self, c: Compiled, ins, bufs, seg: Segment):
        """`call_kernel`, turning a kernel that cannot be compiled or run into
        `UseReferences`."""
        try:
            return call_kernel(c, ins, bufs, seg)
        except CodegenError as e:
            if config.strict():
                raise
            fallback(seg, str(e.args[0]), bug=True)
            c.broken = True
            raise UseReferences() from None

    def _run_driver(self, feed_values, store):
        t0 = time.perf_counter() if self.debug >= 2 else 0.0
        plan = self.plan
        env = dict(zip(plan.feeds, feed_values))
        for op, v in zip(self.pre, self.draw_hoisted(feed_values, store)):
            env[op.outputs[0]] = v
        ctx = RunContext(store)
        # A run writes its variables in place when this input shape has run before with every
        # step native and no check that could still fail after the first write (see
        # `_note_in_place`); otherwise the kernels write copies, committed at the end, so a
        # failing run changes nothing.
        shape_key = None
        if self.all_native and (self.written or self._chains is not False):
            state = store.values
            shape_key = tuple([np.shape(a) for a in feed_values]
                              + [np.shape(state[v]) for v in self.var_ops])
        in_place = shape_key is not None and shape_key in self._in_place_keys
        # a chain runs only where the general path would write in place (or writes nothing)
        record = None
        if self._chains is not False and shape_key is not None and (in_place
                                                                   or not self.written):
            chain = self._chains.get(shape_key)
            if chain is not None:
                res = chain.run(feed_values, store.values)
                if res is not None:
                    return res
            record = []   # (again, when the chain could not take this run)
        if not in_place:
            for v in self.written:
                ctx.pending[v] = np.array(store.values[v], copy=True)
            STATS["variable_copies"] = STATS.get("variable_copies", 0) + len(self.written)
        native = []   # the kernel of each segment, when every step ran one
        with np.errstate(all="ignore"):
            for step in self.steps:
                if isinstance(step, Segment):
                    # (the arrays earlier kernels returned need no conversion: tested inline,
                    # a call per input costs more than the check on a step's ~200 inputs)
                    ins = [a if type(a) is np.ndarray and a.flags.c_contiguous else contig(a)
                           for a in map(env.__getitem__, step.in_tensors)]
                    bufs = []
                    for v in step.var_ops:
                        b = ctx.read_var(v)
                        if not (isinstance(b, np.ndarray) and b.flags.c_contiguous
                                and b.flags.writeable):
                            b = np.array(b, copy=True)
                            ctx.pending[v] = b
                        bufs.append(b)
                    c = self._exact_kernel(step, ins, bufs)
                    try:
                        if c is REFERENCES or c.broken:
                            raise UseReferences()
                        out = self._call_fastest(c, ins, bufs, step)
                    except UseReferences:
                        if in_place:   # cannot happen: every kernel of this shape ran
                            raise RuntimeError("jitflow: a kernel of an in-place run "
                                               "became unusable") from None
                        STATS["reference_segments"] = STATS.get("reference_segments", 0) + 1
                        run_steps(step.ops, env, ctx)
                        native = None
                        continue
                    if native is not None:
                        native.append((step, c))
                    if record is not None:
                        record.append((c, ins, bufs, out))
                    for t, v in zip(step.out_tensors, convert_results(c, out)):
                        if t not in env:
                            env[t] = v
                    continue
                run_reference_step(step, env, ctx)
            for op in self.post:
                run_reference_step(op, env, ctx)
            results = []
            for t in plan.fetches:
                if t.op.type == "VariableV2" and t not in env:
                    results.append(np.array(ctx.read_var(t.op), copy=True))
                else:
                    results.append(env[t])
        ctx.commit()
        if shape_key is not None and not in_place and native:
            self._note_in_place(shape_key, native)
        if record is not None and native:
            chain = Chain.make(self, feed_values, store.values, record)
            if chain is not None:
                if len(self._chains) >= MAX_EXACT:
                    self._chains.clear()
                self._chains[shape_key] = chain
        if self.debug >= 2:
            n_native = sum(isinstance(s, Segment) for s in self.steps)
            config.debug(f"run {len(self.steps)} steps ({n_native} native): "
                   f"{(time.perf_counter() - t0) * 1e6:.1f} us")
        return results

    def _parallel(self, c: "Compiled", seg: Segment, ins, bufs):
        """The kernel to call: `c`'s parallel variant when the operands are large (at least
        `config.parallel_min()` elements) and it is ready, else `c`."""
        if c.par_source is None or not _kernels.PAR_STATE.get("ok", True):
            return c
        n = config.parallel_min()
        if not any(a.size >= n for a in ins) and not any(b.size >= n for b in bufs):
            return c
        p = c.par
        if p is None:
            p = c.par = parallel_of(c)
            prepare_parallel()
            if _bg.mode() in ("sync", "numba"):
                try:
                    load_parallel(p)
                except Exception as e:  # noqa: BLE001
                    parallel_failed(p, e)
            else:
                self._compile_parallel_later(p, seg, ins, bufs)
        if p.broken or p.run is None:
            return c
        use_threads()
        return p

    @staticmethod
    def _compile_parallel_later(p: Compiled, seg: Segment, ins, bufs) -> None:
        """Have the compiler thread load or compile the parallel variant `p` for the argument
        types of `ins`/`bufs`; runs use the serial kernel until it is ready."""
        args = list(ins) + [v for _, v in p.consts]
        order = p.var_order
        vs = list(bufs) if order is None else [bufs[i] for i in order]
        # what Numba types the arguments by (the arrays themselves are not kept)
        kinds = ([(a.dtype, a.ndim, a.flags.writeable) for a in args],
                 [(a.dtype, a.ndim, a.flags.writeable) for a in vs])
        p.pending = True
        # the job holds only weak references: a kernel whose session is gone by the time the
        # compiler gets to it is not compiled at all
        ref_p, ref_seg = weakref.ref(p), weakref.ref(seg)
        _bg.submit(lambda: compile_parallel_job(ref_p(), kinds, ref_seg()))

    def _call_fastest(self, c: "Compiled", ins, bufs, seg: Segment):
        """Call `c`, or its parallel variant for large operands (falling back to `c` if the
        variant fails to build or run)."""
        p = self._parallel(c, seg, ins, bufs)
        if p is not c:
            try:
                return call_kernel(p, ins, bufs, seg)
            except CheckFailed:
                raise
            except Exception as e:  # noqa: BLE001
                if config.strict():
                    raise
                parallel_failed(p, e)
        return self._call_checked(c, ins, bufs, seg)

    def _note_in_place(self, key: tuple, native: list) -> None:
        """After a successful run where every step was a native kernel: later runs with the
        same input shapes may write variables in place when no kernel from the first writing
        one on has a check that depends on values (integer divisors, gather indices), since
        the shape checks passed for these shapes already."""
        writing = False
        for seg, c in native:
            writing = writing or any(op.type in WRITES for op in seg.ops)
            if writing and has_value_checks(c.kernel):
                return
        if len(self._in_place_keys) >= MAX_EXACT:
            self._in_place_keys.clear()
        self._in_place_keys.add(key)

    # -- control-flow bodies ------------------------------------------------------------------
    def run_body(self, feed_values, store, ctx):
        """One run of a loop body or cond branch (called once per iteration): the driver's
        steps with values in a list of slots rather than a dict, each warm segment found by
        its input shapes, and host ops (TensorArray reads and writes, nested control flow)
        run in the enclosing run's context `ctx`. Plans that draw random numbers before the
        call or write variables take the general path."""
        lean = self._lean
        if lean is None:
            lean = self._lean = self._build_lean()
        if lean is False:
            return self(feed_values, store)
        steps, n_slots, fetches = lean
        vals = list(feed_values)
        vals.extend([None] * (n_slots - len(vals)))
        for step in steps:
            if step[0]:
                self._lean_segment(step, vals, ctx)
                continue
            _, op, args, outs = step
            a = [vals[i] if i >= 0 else (op.inputs[~i].op if op.op_def.needs_ctx
                                         else ctx.read_var(op.inputs[~i].op))
                 for i in args]
            try:
                if op.type in _TRUSTED_HOST:
                    # TensorArray reads and writes: outputs already of the declared types
                    res = (op.op_def.ref(op, *a),)
                elif op.op_def.kind == "host":   # no NumPy math of their own
                    res = run_op_reference(op, a, ctx)
                else:
                    with np.errstate(all="ignore"):
                        res = run_op_reference(op, a, ctx)
            except (ValueError, IndexError, TypeError, ZeroDivisionError, OverflowError) as e:
                raise errors.InvalidArgumentError(
                    None, op, f"{e}\n\t [[node {op.name} ({op.type})]]") from e
            for j, v in zip(outs, res):
                vals[j] = v
        return [vals[i] if i >= 0 else np.array(ctx.read_var(v), copy=True)
                for i, v in fetches]

    def _lean_segment(self, step, vals: list, ctx) -> None:
        _, seg, in_idx, out_idx = step
        ins = [vals[i] for i in in_idx]
        for k, a in enumerate(ins):
            if type(a) is not np.ndarray or not a.flags.c_contiguous:
                ins[k] = contig(a)
        bufs = []
        for v in seg.var_ops:
            b = ctx.read_var(v)
            if not (isinstance(b, np.ndarray) and b.flags.c_contiguous and b.flags.writeable):
                b = np.array(b, copy=True)
            bufs.append(b)
        c = self._exact_kernel(seg, ins, bufs)
        try:
            if c is REFERENCES or c.broken:
                raise UseReferences()
            out = self._call_fastest(c, ins, bufs, seg)
        except (UseReferences, CheckFailed) as e:
            # no kernel for these inputs (or shapes it cannot take): the references give the
            # values, or the error TF1 gives, naming the op
            if isinstance(e, CheckFailed):
                STATS["checks_failed"] = STATS.get("checks_failed", 0) + 1
            env = dict(zip(seg.in_tensors, ins))
            with np.errstate(all="ignore"):
                run_steps(seg.ops, env, ctx)
            for j, t in zip(out_idx, seg.out_tensors):
                vals[j] = env[t]
            return
        conv = c.out_conv
        for j, v, f in zip(out_idx, out, conv):
            vals[j] = v if f is None else f(v)

    def _build_lean(self):
        """(steps, number of value slots, fetch sources) for run_body, or False."""
        plan = self.plan
        if self.pre or self.written or self.debug >= 2:
            return False
        slot = {t: i for i, t in enumerate(plan.feeds)}
        steps = []
        for s in list(self.steps) + list(self.post):   # deferred host ops run last
            if isinstance(s, Segment):
                if any(t not in slot for t in s.in_tensors):
                    return False
                ins = [slot[t] for t in s.in_tensors]
                outs = []
                for t in s.out_tensors:
                    slot.setdefault(t, len(slot))
                    outs.append(slot[t])
                steps.append((True, s, ins, outs))
                continue
            op = s
            if op.type == "VariableV2":
                continue
            args = []
            for k, t in enumerate(op.inputs):
                if t in slot:
                    args.append(slot[t])
                elif t.op.type == "VariableV2":
                    args.append(~k)
                else:
                    return False
            outs = []
            for t in op.outputs:
                slot.setdefault(t, len(slot))
                outs.append(slot[t])
            steps.append((False, op, args, outs))
        fetches = []
        for t in plan.fetches:
            if t in slot:
                fetches.append((slot[t], None))
            elif t.op.type == "VariableV2":
                fetches.append((-1, t.op))
            else:
                return False
        return steps, len(slot), fetches

    # -- the warm path ------------------------------------------------------------------------
    def fast_runner(self, spec, store, ordinary, positional: bool = False, miss=None):
        """A generated function running `spec` with one native call (see `FastPath`), or None.

        `ordinary(args)` is the session's general path, taken for anything unusual. With
        `positional` the function is `make_callable`'s (positional feed values, closed-store
        check); without, `Session.run`'s (called with the feed_dict's values, already checked
        for a closed session). With `miss`, `Session.run`'s taking the feed_dict itself, which
        returns `miss` when the dict's keys are not this signature's feed tensors.
        """
        if not self.single or self.pre or self.post or self.debug >= 2:
            return None
        if self._fast is None:
            self._fast = FastPath(self, spec, store, ordinary)
        return self._fast.function(positional, miss)

    # -- introspection (inspect.py) ---------------------------------------------------------
    def sources(self, feed_values, store) -> list:
        """(segment, compiled) for each native segment (see inspect.sources)."""
        return _inspect.sources(self, feed_values, store)

    def describe(self, feed_values, store) -> str:
        """Readable view of what a run executes (see inspect.describe)."""
        return _inspect.describe(self, feed_values, store)


# host ops whose references return exactly their declared output (one array of the
# TensorArray's dtype, or the boxed TensorArray): run_body calls them without conversion
_TRUSTED_HOST = frozenset({"TensorArrayReadV3", "TensorArrayWriteV3", "TensorArrayGradRead",
                           "TensorArrayGradWrite"})
