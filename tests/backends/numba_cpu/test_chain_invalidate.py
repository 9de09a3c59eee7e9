"""The warm chain (backends/numba_cpu/chain.py) when the compiler thread invalidates it while a
run is on it: the run finishes on the entry points it read (found by
benchmarks/cold_workloads.py: a 1,000-op graph's run died with "'NoneType' object is not
iterable" when a kernel got its optimized code between the chain's checks and its loop)."""
from __future__ import annotations

import numpy as np

from jitflow.backends.numba_cpu import chain as chain_mod


def test_a_chain_invalidated_during_its_checks_still_runs():
    c = chain_mod.Chain.__new__(chain_mod.Chain)
    buf = np.zeros(2)

    class State(dict):
        def get(self, key, default=None):
            c.invalidate()   # the compiler thread gives a kernel faster code right now
            return super().get(key, default)

    def entry(args, var_slots):
        return (args[0] + 1.0,)

    c.segs = [(entry, (0,), (), None, (), ())]
    c.var_checks = (("v", buf),)
    c.feed_checks = ()
    c.fetches = ((0, 1),)      # kind 0: the value in slot 1 (the entry point's output)
    res = c.run([np.array([1.0, 2.0])], State(v=buf))
    assert np.array_equal(res[0], [2.0, 3.0])
    assert c.segs is None      # the next run takes the general path and records a new chain
    assert c.run([np.array([1.0, 2.0])], State(v=buf)) is None
