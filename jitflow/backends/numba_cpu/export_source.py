"""The generated module of one run signature, as `jitflow.export` writes it: one Numba kernel
(a plan however long becomes one module), its layout and its constants."""
from __future__ import annotations

from typing import Optional

import numpy as np

from jitflow.backends.numba_cpu.executable import Executable

__all__ = ["export_source"]


def export_source(session, fetches, feed_list=(), feed_values: Optional[list] = None) -> dict:
    """The generated module for one run signature, for writing it out as a standalone module.

    Returns {"source": module text, "entry": "kernel", "layout": {"inputs": [...],
    "variables": [...], "results": [...]}, "constants": {op name: ndarray}}: see the module
    docstring for the calling convention. Feed values (optional) pick the shape class; without
    them every unknown dimension is assumed not to be 1. Raises NotImplementedError when the
    plan has ops that run through references.
    """
    feed_list = list(feed_list)
    runner = session.make_callable(fetches, feed_list)
    spec = runner.spec
    ex = spec.executable
    if isinstance(ex, Executable) and not ex.single:
        ex = Executable(ex.plan, ex.backend, whole=True)   # one module, however long
    if not isinstance(ex, Executable) or not ex.single or ex.pre or ex.post:
        raise NotImplementedError("export needs a plan where every op has a code generator "
                                  "and no random op")
    if feed_values is None:
        feed_values = []
        for t in spec.plan.feeds:
            dims = t.shape.as_tuple() or ()
            feed_values.append(np.zeros([d if d is not None else 2 for d in dims],
                                        t.dtype.as_numpy_dtype))
    else:
        pos = {t: i for i, t in enumerate(spec.feeds)}
        feed_values = [np.asarray(feed_values[pos[t]], t.dtype.as_numpy_dtype)
                       for t in spec.plan.feeds]
    found = ex.sources(feed_values, session._store)
    if not found:
        raise NotImplementedError("export needs a plan that compiles for these feed shapes; "
                                  "this one runs through its references")
    (seg, c), = found
    return {"source": c.source.replace("{cache}", "False"), "entry": "kernel",
            "layout": dict(c.names),
            "constants": {op_name: arr for (_, arr), (_k, op_name) in
                          zip(c.consts, [n for n in c.names["inputs"] if n[0] == "const"])}}
