"""The allocator tuning made when the compiled backend is first used (numba_cpu/memory.py)."""
import os
import subprocess
import sys

import pytest

PROBE = ("import jitflow as tf; tf.Session(backend='numba');"
         "from jitflow.backends.numba_cpu import memory; print(memory.tune_allocator())")


def _probe(**env) -> str:
    # glibc's own settings (MALLOC_*_, which a Dask nanny also sets) would turn the tuning off
    full = {k: v for k, v in os.environ.items()
            if k not in ("JITFLOW_MALLOC_TUNE", "GLIBC_TUNABLES") and not k.startswith("MALLOC_")}
    full.update(env)
    out = subprocess.run([sys.executable, "-c", PROBE], env=full, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def _is_glibc() -> bool:
    import platform
    return sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"


@pytest.mark.skipif(not _is_glibc(), reason="the tuning applies to glibc only")
def test_compiled_backend_raises_the_mmap_threshold_on_glibc():
    assert _probe() == "True"


def test_switch_and_user_settings_turn_the_tuning_off():
    assert _probe(JITFLOW_MALLOC_TUNE="0") == "False"
    assert _probe(MALLOC_MMAP_THRESHOLD_="65536") == "False"
