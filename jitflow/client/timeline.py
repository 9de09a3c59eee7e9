"""Chrome traces of a traced run: `Timeline(run_metadata.step_stats).generate_chrome_trace_format()`
gives the JSON that chrome://tracing and Perfetto open.

    run_metadata = tf.RunMetadata()
    sess.run(train_op, feed, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
             run_metadata=run_metadata)
    trace = timeline.Timeline(run_metadata.step_stats).generate_chrome_trace_format()

The trace has, per device, a "Compute" process whose threads are lanes (ops that overlap in time
go to different lanes) with one complete event ("X") per recorded node, named by its op type,
its node name and inputs in `args`; dataflow arrows ("s"/"t") between nodes on different lanes
or devices; and with `show_memory`, the output tensors as objects ("N"/"O"/"D") in the device's
"Tensors" process. It reads jitflow's StepStats or TensorFlow's (the same fields).
"""
from __future__ import annotations

import json
import re
__all__ = ["Timeline"]

_LABEL = re.compile(r"^\s*(?P<name>[^=]+?)\s*=\s*(?P<type>[^(\s]+)\((?P<inputs>.*)\)\s*$")
_OP_TIMES = ("schedule", "gpu", "all")


class _Node:
    __slots__ = ("stats", "name", "type", "inputs", "ts", "dur", "pid", "tid")

    def __init__(self, stats, graph, op_time: str) -> None:
        self.stats = stats
        self.name = stats.node_name
        m = _LABEL.match(stats.timeline_label or "")
        if m is not None:
            self.type = m.group("type")
            self.inputs = [x.strip() for x in m.group("inputs").split(",") if x.strip()]
        else:
            self.type = _graph_type(graph, self.name)
            self.inputs = []
        start = stats.all_start_micros
        if op_time == "gpu":        # the op's own execution
            self.ts = start + stats.op_start_rel_micros
            self.dur = stats.op_end_rel_micros - stats.op_start_rel_micros
        elif op_time == "all":      # from its scheduling to the end of its execution
            sched = stats.scheduled_micros or start
            self.ts = min(sched, start)
            self.dur = start + stats.all_end_rel_micros - self.ts
        else:                       # "schedule": from its start to the end of its work
            self.ts = start
            self.dur = stats.all_end_rel_micros
        self.dur = max(0, self.dur)


def _graph_type(graph, name: str) -> str:
    if graph is not None:
        try:
            return graph.get_operation_by_name(name).type
        except (KeyError, ValueError):
            pass
    return "unknown"


class Timeline:
    """A Chrome trace of the step statistics of one traced run."""

    def __init__(self, step_stats, graph=None) -> None:
        self._step_stats = step_stats
        self._graph = graph

    def generate_chrome_trace_format(self, show_dataflow: bool = True,
                                     show_memory: bool = False,
                                     op_time: str = "schedule") -> str:
        """The trace as JSON text: {"traceEvents": [...]}.

        `show_dataflow`: arrows from the node producing an input to the node reading it, when
        they sit on different lanes or devices; `show_memory`: the nodes' output tensors as
        trace objects; `op_time`: "schedule" (a node from its start to the end of its work),
        "gpu" (its kernel's execution only) or "all" (from its scheduling on)."""
        if op_time not in _OP_TIMES:
            raise ValueError(f"op_time must be one of {', '.join(_OP_TIMES)}, got {op_time!r}")
        events: list = [_process(0, "Allocators")]
        nodes: list = []
        tensors_pid: dict = {}
        for i, dev in enumerate(self._step_stats.dev_stats if self._step_stats else ()):
            compute, tensors = 1 + 2 * i, 2 + 2 * i
            events.append(_process(compute, f"{dev.device} Compute"))
            events.append(_process(tensors, f"{dev.device} Tensors"))
            tensors_pid[compute] = tensors
            dev_nodes = [_Node(s, self._graph, op_time) for s in dev.node_stats]
            _assign_lanes(dev_nodes, compute)
            nodes.extend(dev_nodes)
        by_name = {n.name: n for n in nodes}
        flow_id = 0
        for n in nodes:
            args = {"name": n.name, "op": n.type}
            for k, inp in enumerate(n.inputs):
                args[f"input{k}"] = inp
            events.append({"ph": "X", "cat": "Op", "name": n.type, "pid": n.pid, "tid": n.tid,
                           "ts": n.ts, "dur": n.dur, "args": args})
            if not show_dataflow:
                continue
            for inp in n.inputs:
                src = by_name.get(_producer(inp))
                if src is None or (src.pid, src.tid) == (n.pid, n.tid):
                    continue
                common = {"cat": "DataFlow", "name": _producer(inp), "id": flow_id}
                events.append({"ph": "s", "pid": src.pid, "tid": src.tid,
                               "ts": src.ts + src.dur, **common})
                events.append({"ph": "t", "pid": n.pid, "tid": n.tid, "ts": n.ts, **common})
                flow_id += 1
        if show_memory:
            events.extend(_tensor_events(nodes, tensors_pid))
            events.extend(_allocator_events(nodes))
        return json.dumps({"traceEvents": events}, indent=4)


def _process(pid: int, name: str) -> dict:
    return {"name": "process_name", "ph": "M", "pid": pid, "args": {"name": name}}


def _producer(input_name: str) -> str:
    """The node an input name comes from ("^ctrl", "node:1", "node")."""
    return input_name.lstrip("^").split(":", 1)[0]


def _assign_lanes(nodes: list, pid: int) -> None:
    """Put each node on the first lane free at its start (nodes that overlap in time go to
    different lanes, which the trace shows as threads)."""
    ends: list = []   # per lane, when its last node ends
    for n in sorted(nodes, key=lambda n: (n.ts, n.dur)):
        lane = next((i for i, end in enumerate(ends) if end <= n.ts), len(ends))
        if lane == len(ends):
            ends.append(0)
        ends[lane] = n.ts + n.dur
        n.pid, n.tid = pid, lane


def _tensor_events(nodes: list, tensors_pid: dict) -> list:
    """Each recorded output tensor as an object: created when its node ends, described by a
    snapshot, deleted when its last reader (on the same device) ends."""
    last_use: dict = {}
    for n in nodes:
        for inp in n.inputs:
            name = inp.lstrip("^")
            key = name if ":" in name else name + ":0"
            last_use[key] = max(last_use.get(key, 0), n.ts + n.dur)
    out: list = []
    oid = 0
    for n in nodes:
        for o in n.stats.output:
            name = f"{n.name}:{o.slot}"
            born = n.ts + n.dur
            pid = tensors_pid[n.pid]
            common = {"cat": "Tensor", "name": name, "pid": pid, "tid": 0, "id": oid}
            out.append({"ph": "N", "ts": born, **common})
            out.append({"ph": "O", "ts": born, **common,
                        "args": {"snapshot": {"tensor_description":
                                              str(o.tensor_description)}}})
            out.append({"ph": "D", "ts": max(born, last_use.get(name, born)), **common})
            oid += 1
    return out


def _allocator_events(nodes: list) -> list:
    """Allocator use recorded with the nodes, as counters of the "Allocators" process."""
    out: list = []
    for n in nodes:
        for m in n.stats.memory:
            out.append({"ph": "C", "name": m.allocator_name, "pid": 0, "ts": n.ts,
                        "args": {"bytes in use": m.allocator_bytes_in_use or m.live_bytes}})
    return out
