"""Traced runs: `Session.run(..., options=tf.RunOptions(trace_level=FULL_TRACE),
run_metadata=md)` fills `md.step_stats` with one `NodeExecStats` per op the run executed.

A backend's executable may time its own kernels: if it has a method
`traced(feed_values, store, record)`, a traced run calls it instead of the executable, and it
calls `record(name, op_type, inputs, start_ns, end_ns, outputs)` once per kernel or op it runs
(`inputs`: the names of the tensors it reads, `outputs`: its result arrays, or None) and
returns the fetches' values as the executable does. Without it, the run goes op by op through
the ops' NumPy references, each op timed: the values are the same (the references are the
compiled code's oracle), the times are those of the references, not of the fused kernels.
"""
from __future__ import annotations

import threading
import time
from typing import Callable, Optional

import numpy as np

from jitflow.core.graph import Tensor

__all__ = ["StepRecorder", "run_traced", "timeline_label"]


def _input_name(t: Tensor) -> str:
    return t.op.name if t.value_index == 0 else f"{t.op.name}:{t.value_index}"


def timeline_label(name: str, op_type: str, inputs) -> str:
    """The label timelines parse: "name = Type(input, input)"."""
    return f"{name} = {op_type}({', '.join(inputs)})"


class StepRecorder:
    """Collects the node statistics of one traced run on one device."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.nodes: list = []
        self.thread_id = threading.get_native_id() & 0xFFFFFFFF

    def record(self, name: str, op_type: str, inputs, start_ns: int, end_ns: int,
               outputs=None) -> None:
        """One executed node: its name, type, input names, wall-clock start and end (ns since
        the epoch) and output values (for their shapes and sizes)."""
        self.nodes.append((name, op_type, list(inputs), start_ns, end_ns, outputs))

    def fill(self, run_metadata) -> None:
        """Write the collected statistics into `run_metadata` (any RunMetadata class: the
        message is built as jitflow's and parsed into it, replacing what it held, as TF)."""
        from jitflow.serialize import protos
        from jitflow.serialize.tensor_util import dtype_to_enum, shape_proto
        from jitflow.core import dtypes as _dtypes
        md = protos.RunMetadata()
        dev = md.step_stats.dev_stats.add(device=self.device)
        for name, op_type, inputs, start, end, outputs in self.nodes:
            dur = max(0, end - start)
            ns = dev.node_stats.add(
                node_name=name, all_start_micros=start // 1000, op_start_rel_micros=0,
                op_end_rel_micros=dur // 1000, all_end_rel_micros=dur // 1000,
                scheduled_micros=start // 1000, thread_id=self.thread_id,
                timeline_label=timeline_label(name, op_type, inputs), all_start_nanos=start,
                op_start_rel_nanos=0, op_end_rel_nanos=dur, all_end_rel_nanos=dur,
                scheduled_nanos=start)
            for slot, v in enumerate(outputs or ()):
                if not isinstance(v, (np.ndarray, np.generic)):
                    continue
                try:
                    dt = _dtypes.string if v.dtype == object else _dtypes.as_dtype(v.dtype)
                    enum = dtype_to_enum(dt)
                except (TypeError, ValueError, KeyError):
                    continue
                out = ns.output.add(slot=slot)
                desc = out.tensor_description
                desc.dtype = enum
                shape_proto(np.shape(v), desc.shape)
                desc.allocation_description.requested_bytes = int(np.asarray(v).nbytes)
                desc.allocation_description.allocator_name = "cpu"
        if hasattr(run_metadata, "ParseFromString"):
            run_metadata.ParseFromString(md.SerializeToString())


def run_traced(executable, plan, feed_values: list, store, recorder: StepRecorder) -> list:
    """Run `plan` (compiled as `executable`) recording each step in `recorder`; the fetches'
    values, as the executable returns them."""
    traced: Optional[Callable] = getattr(executable, "traced", None)
    if traced is not None:
        return traced(feed_values, store, recorder.record)
    return _reference_run(plan, feed_values, store, recorder)


def _reference_run(plan, feed_values: list, store, recorder: StepRecorder) -> list:
    # the references run op by op (a layer below the session; the interpreter's own loop,
    # with a clock around each op)
    from jitflow.runtime.reference import RunContext, run_reference_step
    env = dict(zip(plan.feeds, feed_values))
    ctx = RunContext(store)
    clock = time.time_ns
    with np.errstate(all="ignore"):
        for op in plan.ops:
            start = clock()
            run_reference_step(op, env, ctx)
            end = clock()
            recorder.record(op.name, op.type, [_input_name(t) for t in op.inputs], start, end,
                            [env.get(t) for t in op.outputs])
        results = []
        for t in plan.fetches:
            if t.op.type == "VariableV2" and t not in env:
                results.append(np.array(ctx.read_var(t.op), copy=True))
            else:
                results.append(env[t])
    ctx.commit()
    held = {id(a) for a in store.values.values()}   # results never alias a variable buffer
    return [np.array(r, copy=True) if id(r) in held else r for r in results]
