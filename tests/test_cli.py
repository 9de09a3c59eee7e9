"""The `python -m jitflow` command line, run as a subprocess."""
from __future__ import annotations

import os
import subprocess
import sys

import llvmlite
import numba
import numpy as np
import pytest

import jitflow


def cli(*args, cache=None, check=True):
    env = dict(os.environ)
    if cache is not None:
        env["JITFLOW_CACHE_DIR"] = str(cache)
    proc = subprocess.run([sys.executable, "-m", "jitflow", *map(str, args)], env=env,
                          capture_output=True, text=True, timeout=120)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_version_lists_every_component():
    out = cli("version").stdout
    assert f"jitflow  {jitflow.__version__}" in out
    assert f"numpy    {np.__version__}" in out
    assert f"numba    {numba.__version__}" in out
    assert f"llvmlite {llvmlite.__version__}" in out


def test_cache_list_groups_entries_with_sizes_then_clear(tmp_path):
    cache = tmp_path / "cache"
    assert "does not exist" in cli("cache", cache=cache).stdout
    (cache / "__pycache__").mkdir(parents=True)
    (cache / "abc123.py").write_text("x = 1\n")
    (cache / "__pycache__" / "abc123.kernel-3.py312.nbi").write_bytes(b"\0" * 2048)
    (cache / "def456.py").write_text("y = 2\n" * 10)
    out = cli("cache", "list", cache=cache).stdout
    lines = out.splitlines()
    assert lines[0] == f"cache: {cache}"
    abc = next(line for line in lines if line.startswith("abc123"))
    assert "2 files" in abc and "2.0 KiB" in abc
    assert next(line for line in lines if line.startswith("def456")).split()[3] == "60"
    assert lines[-1] == "2 entries, 2.1 KiB"
    out = cli("cache", "clear", cache=cache).stdout
    assert "removed 3 files" in out
    assert list(cache.iterdir()) == []
    assert "0 entries" in cli("cache", cache=cache).stdout


def test_cache_clear_refuses_foreign_files(tmp_path):
    (tmp_path / "thesis.docx").write_text("precious")
    (tmp_path / "k.py").write_text("")
    proc = cli("cache", "clear", cache=tmp_path, check=False)
    assert proc.returncode == 1 and "thesis.docx" in proc.stderr and "--force" in proc.stderr
    assert (tmp_path / "thesis.docx").exists() and (tmp_path / "k.py").exists()
    cli("cache", "clear", "--force", cache=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_bad_usage_exits_with_argparse_error():
    proc = cli(check=False)
    assert proc.returncode == 2 and "COMMAND" in proc.stderr
    proc = cli("cache", "explode", check=False)
    assert proc.returncode == 2 and "invalid choice" in proc.stderr


def test_inspect_missing_folder_is_an_error(tmp_path):
    proc = cli("inspect", tmp_path / "nothing", check=False)
    assert proc.returncode == 1 and "manifest.json" in proc.stderr


@pytest.mark.parametrize("mode", ["sync", "numba"])
def test_cache_lists_what_a_real_run_compiled(tmp_path, mode):
    """One kernel: its machine code (the default LLVM path), or its module with Numba's
    cache files beside it (JITFLOW_COMPILE=numba)."""
    script = ("import numpy as np, jitflow as tf\n"
              "x = tf.placeholder(tf.float32, [None], name='x')\n"
              "with tf.Session(backend='numba') as s:\n"
              "    print(s.run(x * 2.0 + 1.0, {x: np.ones(3, np.float32)}))\n")
    env = dict(os.environ, JITFLOW_CACHE_DIR=str(tmp_path), JITFLOW_COMPILE=mode)
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = cli("cache", cache=tmp_path).stdout.splitlines()
    entries = lines[1:-1]
    assert len(entries) == 1, entries
    if mode == "numba":
        assert entries[0].startswith("jf_")
        assert int(entries[0].split()[1]) >= 2  # the module and Numba's cache files beside it
    else:
        assert entries[0].startswith("objects/") and int(entries[0].split()[1]) == 1
    assert lines[-1].startswith("1 entry,")
    assert "removed" in cli("cache", "clear", cache=tmp_path).stdout
    assert list(tmp_path.iterdir()) == []
