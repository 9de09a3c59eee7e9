"""Session configuration: TensorFlow's `ConfigProto`, `RunOptions` and `RunMetadata`, and what
a jitflow `Session` does with them.

The message classes are TensorFlow's declarations (jitflow/serialize/protos/tensorflow/
config.proto) built by the protobuf package on first use, so `config.gpu_options.allow_growth
= True`, field validation, `repr` and `SerializeToString()` behave as under TensorFlow.

What a Session honours:

- `intra_op_parallelism_threads` (> 0): the threads jitflow's parallel kernels may use, for the
  whole process as in TensorFlow (whose first session sizes the shared pool); the
  JITFLOW_THREADS variable, when set, still wins;
- `log_device_placement`: each new run signature prints "name: (Type): <device>" for the ops
  it runs, to stdout, as TensorFlow's placer does;
- `RunOptions.trace_level` above NO_TRACE with a `RunMetadata`: the run records its step
  statistics in `run_metadata.step_stats` (see jitflow/core/trace.py).

Accepted and ignored (jitflow places every op on the session's one device and runs a plan's
steps in order): `inter_op_parallelism_threads`, `use_per_session_threads`,
`session_inter_op_thread_pool`, `allow_soft_placement`, `device_count`, `device_filters`,
`gpu_options` (`allow_growth`, `per_process_gpu_memory_fraction`, `visible_device_list`: the
cuda backend allocates what a plan needs), `graph_options` (jitflow's compiler makes its own
optimization choices), `operation_timeout_in_ms`, `rpc_options`, `cluster_def`, `experimental`
and RunOptions' other fields.
"""
from __future__ import annotations

from typing import Optional

__all__ = ["PROTO_NAMES", "SessionConfig", "session_config", "run_options", "DEVICE_CPU",
           "device_name", "DeviceAttributes", "list_devices"]

#: the config messages `tf.<name>` gives (those of TensorFlow's tf.compat.v1)
PROTO_NAMES = ("ConfigProto", "GPUOptions", "GraphOptions", "OptimizerOptions", "RunOptions",
               "RunMetadata")

DEVICE_CPU = "/job:localhost/replica:0/task:0/device:CPU:0"


def device_name(backend: str) -> str:
    """The TensorFlow device name a backend's work is reported on."""
    return "/job:localhost/replica:0/task:0/device:GPU:0" if backend == "cuda" else DEVICE_CPU


def _message(name: str):
    from jitflow.serialize import protos
    return protos.message("tensorflow." + name)


def _is_message(value, name: str) -> bool:
    """Whether `value` is a `tensorflow.<name>` message (jitflow's class or TensorFlow's)."""
    return getattr(getattr(value, "DESCRIPTOR", None), "full_name", None) == "tensorflow." + name


def _as_ours(value, name: str, what: str, error=TypeError):
    """`value` as jitflow's `name` message: ours as is, TensorFlow's own (same wire format)
    converted; anything else raises `error` (the class TensorFlow raises there)."""
    cls = _message(name)
    if isinstance(value, cls):
        return value
    if _is_message(value, name):
        return cls.FromString(value.SerializeToString())
    raise error(f'Argument `{what}` must be a tf.{name}, but got "{type(value).__name__}"')


class SessionConfig:
    """What a Session keeps of its ConfigProto (read once, at construction)."""

    __slots__ = ("proto", "log_device_placement", "intra_op_threads")

    def __init__(self, proto=None) -> None:
        self.proto = proto
        self.log_device_placement = bool(proto is not None and proto.log_device_placement)
        self.intra_op_threads = proto.intra_op_parallelism_threads if proto is not None else 0


def session_config(config) -> SessionConfig:
    """Check a Session's `config` argument (None or a ConfigProto) and apply what jitflow
    honours of it (see the module docstring)."""
    if config is None:
        return SessionConfig()
    proto = _as_ours(config, "ConfigProto", "config")
    cfg = SessionConfig(proto)
    if cfg.intra_op_threads > 0:
        from jitflow.runtime import config as runtime_config
        runtime_config.set_session_threads(cfg.intra_op_threads)
    return cfg


def run_options(options, run_metadata) -> Optional[int]:
    """The trace level a run must record (None: no tracing), checking `options` (a RunOptions
    or None) and `run_metadata` (a RunMetadata or None)."""
    if options is None:
        return None
    # TensorFlow serializes both messages, so other objects raise AttributeError there
    trace_level = _as_ours(options, "RunOptions", "options", AttributeError).trace_level
    if run_metadata is not None and not _is_message(run_metadata, "RunMetadata"):
        raise AttributeError("Argument `run_metadata` must be a tf.RunMetadata, but got "
                             f'"{type(run_metadata).__name__}"')
    if run_metadata is None or trace_level == 0:
        return None
    return trace_level


# -- devices ------------------------------------------------------------------------------------
#: what TensorFlow reports as its CPU device's memory limit (its default CPU allocator's, 256 MiB)
CPU_MEMORY_LIMIT = 268435456
_INCARNATIONS: dict = {}


def _incarnation(name: str) -> int:
    """A random 64-bit number per device and process (TF's device incarnation)."""
    n = _INCARNATIONS.get(name)
    if n is None:
        import secrets
        n = _INCARNATIONS[name] = secrets.randbits(64) - (1 << 63)
    return n


class DeviceAttributes:
    """A device of `Session.list_devices()`: `name`, `device_type`, `memory_limit_bytes`,
    `incarnation` (TF1's `_DeviceAttributes`)."""

    __slots__ = ("_name", "_device_type", "_memory_limit_bytes", "_incarnation")

    def __init__(self, name: str, device_type: str, memory_limit_bytes: int,
                 incarnation: int) -> None:
        self._name = name
        self._device_type = device_type
        self._memory_limit_bytes = memory_limit_bytes
        self._incarnation = incarnation

    @property
    def name(self) -> str:
        return self._name

    @property
    def device_type(self) -> str:
        return self._device_type

    @property
    def memory_limit_bytes(self) -> int:
        return self._memory_limit_bytes

    @property
    def incarnation(self) -> int:
        return self._incarnation

    def __repr__(self) -> str:
        return (f"_DeviceAttributes({self._name}, {self._device_type}, "
                f"{self._memory_limit_bytes}, {self._incarnation})")


def _gpu_memory() -> int:
    """The total memory of the GPU the cuda backend uses (0 when it cannot be asked)."""
    try:
        from numba import cuda   # the cuda backend is in use, so numba.cuda is loaded
        return int(cuda.current_context().get_memory_info().total)
    except Exception:  # noqa: BLE001  (the simulator, no driver: nothing to report)
        return 0


def list_devices(backend: str) -> list:
    """The devices a session on `backend` runs on: the CPU, and the GPU for "cuda"."""
    out = [DeviceAttributes(DEVICE_CPU, "CPU", CPU_MEMORY_LIMIT, _incarnation(DEVICE_CPU))]
    if backend == "cuda":
        gpu = device_name(backend)
        out.append(DeviceAttributes(gpu, "GPU", _gpu_memory(), _incarnation(gpu)))
    return out
