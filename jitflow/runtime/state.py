"""The variable store: the values of one session's variables, its random generators and the
host state of its input pipelines (queues, readers, iterators).

A session owns one `VariableStore` and passes it to every executable its backend compiled; an
executable is a function of a plan, the feed values and the store, never of the session.

`values` is a plain dict {VariableV2 op: ndarray} (the CPU backend's warm path reads it
directly). A GPU backend may keep a variable resident on its device: it registers the device
copy with `set_device` after writing it there, which marks the host copy stale; `get` and every
other reader of host values copies it back first (`sync`), and a host write (`commit`, `load`)
drops the device copy, which the backend uploads again when it next needs it.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Optional

import numpy as np

__all__ = ["VariableStore"]


class VariableStore:
    """Variable values (host arrays, maybe device-resident) and random generators."""

    __slots__ = ("values", "rngs", "backend", "subplans", "device", "closed", "_to_host",
                 "resources", "lock", "__weakref__")

    def __init__(self, backend: Any = None) -> None:
        self.values: dict = {}      # var op -> host ndarray (stale where `device` is newer)
        self.rngs: dict = {}        # op -> np.random.Generator
        self.backend = backend      # compiles the sub-plans of control-flow ops
        self.subplans: dict = {}    # sub-plan -> its executable
        self.device: dict = {}      # var op -> device array newer than values[var op]
        self._to_host: Optional[Callable] = None   # device array -> ndarray
        self.closed = False         # set when the owning session closes
        # host state of input pipelines (iterators, queues, readers), keyed by their op, and
        # the lock a run takes to create one
        self.resources: dict = {}
        self.lock = threading.RLock()

    # -- reading ----------------------------------------------------------------------------
    def __contains__(self, var_op) -> bool:
        return var_op in self.values or var_op in self.device

    def get(self, var_op, default=None):
        """The host value of `var_op` (copied back from its device first when newer there)."""
        if var_op in self.device:
            self.sync(var_op)
        return self.values.get(var_op, default)

    def __getitem__(self, var_op):
        v = self.get(var_op)
        if v is None:
            raise KeyError(var_op)
        return v

    def sync(self, var_op=None) -> None:
        """Copy device values back to the host (one variable, or all)."""
        ops = [var_op] if var_op is not None else list(self.device)
        for op in ops:
            d = self.device.pop(op, None)
            if d is not None:
                shape = op.attrs["shape"].as_tuple()
                host = self._to_host(d)
                if shape == () and host.shape != ():
                    host = host.reshape(())
                self.values[op] = host

    def snapshot(self) -> dict:
        """{var op: host value} of every initialized variable."""
        self.sync()
        return dict(self.values)

    # -- writing ----------------------------------------------------------------------------
    def commit(self, pending: dict) -> None:
        """Host writes of a finished run. Compiled kernels update buffers in place: keep them
        C-contiguous, owned and writeable."""
        for k, v in pending.items():
            if isinstance(v, np.ndarray) and not (v.flags.c_contiguous and v.flags.owndata
                                                  and v.flags.writeable):
                v = np.array(v, order="C", copy=True)
            self.device.pop(k, None)
            self.values[k] = v

    def load(self, var_op, value) -> None:
        """`Variable.load`: write `value` (checked against the variable's dtype and shape)."""
        dtype = var_op.attrs["dtype"].as_numpy_dtype
        arr = np.array(value, dtype=dtype, copy=True)
        shape = var_op.attrs["shape"]
        if not shape.is_compatible_with(arr.shape):
            raise ValueError(f"Cannot load value of shape {arr.shape} into variable "
                             f"'{var_op.name}', which has shape '{shape}'")
        self.commit({var_op: arr})

    def set_device(self, var_op, array, to_host: Callable) -> None:
        """`array` on a device is now `var_op`'s value (the host copy is stale);
        `to_host(array)` copies it back."""
        self.device[var_op] = array
        self._to_host = to_host

    def clear(self) -> None:
        self.values.clear()
        self.device.clear()

    # -- random generators ------------------------------------------------------------------
    def rng_for(self, op) -> np.random.Generator:
        """The generator of random op `op`: seeded from the graph and op seeds as TF1 does."""
        rng = self.rngs.get(op)
        if rng is None:
            graph_seed = op.graph.seed
            op_seed = op.attrs.get("seed")
            if graph_seed is None and op_seed is None:
                rng = np.random.default_rng()
            else:  # TF1's get_seed: a missing graph seed is 87654321, a missing op seed
                # is derived from the op (here its id), and seed 0 is a seed like any other
                seed = [graph_seed if graph_seed is not None else 87654321,
                        op_seed if op_seed is not None else op._id]
                rng = np.random.default_rng([s % 2 ** 63 for s in seed])
            self.rngs[op] = rng
        return rng
