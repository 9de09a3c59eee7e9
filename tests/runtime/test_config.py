"""runtime/config.py: every JITFLOW_* variable is declared once, read through it, documented in
the README's table, and printed by `python -m jitflow config`."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from jitflow.runtime import config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _package_sources():
    for dirpath, _, files in os.walk(os.path.join(ROOT, "jitflow")):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(dirpath, f)
                with open(path, encoding="utf-8") as fh:
                    yield os.path.relpath(path, ROOT), fh.read()


def test_every_variable_the_package_names_is_declared():
    named = set()
    for _, text in _package_sources():
        named |= set(re.findall(r"\bJITFLOW_[A-Z0-9_]+", text))
    assert named - set(config.VARS) == set()


_OWN_READERS = {"jitflow/runtime/config.py"}


def test_only_the_config_module_reads_jitflow_variables():
    readers = {path for path, text in _package_sources()
               if re.search(r"environ(\.get)?[\[(]\s*[\"']JITFLOW_", text)}
    assert readers <= _OWN_READERS, readers - _OWN_READERS


def test_values_parse_and_fall_back_to_the_default_with_one_warning(monkeypatch):
    monkeypatch.setenv("JITFLOW_DEBUG", "3")
    monkeypatch.setenv("JITFLOW_CACHE", "off")
    assert config.get("JITFLOW_DEBUG") == 3 and config.debug_level() == 3
    assert config.get("JITFLOW_CACHE") is False
    monkeypatch.setenv("JITFLOW_MEMORY_CACHE_ENTRIES", "many")
    with pytest.warns(RuntimeWarning, match="JITFLOW_MEMORY_CACHE_ENTRIES='many'"):
        assert config.get("JITFLOW_MEMORY_CACHE_ENTRIES") == 256
    monkeypatch.setenv("JITFLOW_BACKEND", "tpu")
    with pytest.warns(RuntimeWarning, match="one of numba, interpreter, cuda"):
        assert config.get("JITFLOW_BACKEND") == "numba"
    monkeypatch.delenv("JITFLOW_THREADS", raising=False)
    assert config.get("JITFLOW_THREADS") is None   # computed by its user


def test_the_readme_table_is_the_declared_one():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as fh:
        readme = fh.read()
    assert config.markdown_table() in readme


def test_cli_prints_each_variable_with_its_value_and_origin():
    env = dict(os.environ, JITFLOW_DEBUG="2")
    out = subprocess.run([sys.executable, "-m", "jitflow", "config"], env=env,
                         capture_output=True, text=True, timeout=120, check=True).stdout
    rows = {line.split()[0]: line.split()[1:3] for line in out.splitlines()}
    assert set(rows) == set(config.VARS)
    assert rows["JITFLOW_DEBUG"] == ["2", "set"]
    assert rows["JITFLOW_POISON"] == ["False", "default"]
