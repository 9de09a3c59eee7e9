"""`python -m jitflow check PROGRAM.py`: run a TF1 script on jitflow, saying first what it uses
that jitflow lacks; and `python -m jitflow coverage`: how much of TF1's API jitflow has.

The check reads the script's source (`ast`): the names it binds to TensorFlow (`import tensorflow
as tf`, `import tensorflow.compat.v1 as tf`, `from tensorflow.compat import v1`, `from
tensorflow import nn`, ...) and every attribute chain on them (`tf.nn.relu`,
`tf.contrib.layers.fully_connected`). Each chain is looked up in jitflow's namespaces; the ones
that do not resolve are reported with their line. Then the script runs with `tensorflow` (and
its submodules) importing as jitflow: a meta-path finder installed for that run only.

The coverage figure compares jitflow with `tf1_api.txt`, the public names of TensorFlow 2.21's
`tf.compat.v1` (written by `make_tf1_api.py`).
"""
from __future__ import annotations

import ast
import importlib
import importlib.abc
import importlib.machinery
import os
import runpy
import sys
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

__all__ = ["Use", "scan", "resolve", "missing_uses", "tensorflow_as_jitflow", "run_program",
           "api_names", "coverage", "TUTORIAL_NAMESPACES"]

API_FILE = os.path.join(os.path.dirname(__file__), "tf1_api.txt")
# the namespaces TF1 tutorial programs mostly draw on ("" is the top-level `tf.`)
TUTORIAL_NAMESPACES = ("", "nn", "train", "layers", "losses", "math", "image")


@dataclass(frozen=True)
class Use:
    """One `tf.` attribute chain in a program: its path below `tensorflow` and its line."""
    path: str
    line: int


# -- reading a program --------------------------------------------------------------------------
_ROOTS = ("tensorflow", "jitflow")   # a program already switched reads `import jitflow as tf`


def _tf_path(module: str, roots=("tensorflow",)) -> Optional[str]:
    """'tensorflow.compat.v1' -> 'compat.v1', 'tensorflow' -> '', other modules -> None (with
    `roots` _ROOTS, 'jitflow...' likewise)."""
    for root in roots:
        if module == root:
            return ""
        if module.startswith(root + "."):
            return module[len(root) + 1:]
    return None


def _normal(path: str) -> str:
    """A path below `tensorflow` in jitflow's terms: `compat.v1.` is the namespace itself."""
    for prefix in ("compat.v1.", "compat.v1"):
        if path.startswith(prefix):
            return path[len(prefix):]
    return path


def scan(source: str, filename: str = "<program>") -> list:
    """The `tf.` attribute chains (and `from tensorflow... import` names) of a program's source,
    as `Use`s with paths below `tensorflow` (`compat.v1.` removed), in source order."""
    tree = ast.parse(source, filename)
    aliases: dict = {}   # local name -> path below tensorflow
    uses: list = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                path = _tf_path(a.name, _ROOTS)
                if path is None:
                    continue
                if a.asname:
                    aliases[a.asname] = path
                else:   # `import tensorflow.x`: binds `tensorflow`
                    aliases[a.name.split(".")[0]] = ""
                    if path:
                        uses.append(Use(_normal(path), node.lineno))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            base = _tf_path(node.module, _ROOTS)
            if base is None:
                continue
            for a in node.names:
                if a.name == "*":
                    continue
                path = f"{base}.{a.name}" if base else a.name
                aliases[a.asname or a.name] = path
                if _normal(path):   # `from tensorflow.compat import v1`: the namespace itself
                    uses.append(Use(_normal(path), node.lineno))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and not _is_inner(node):
            chain = _chain(node)
            if chain and chain[0] in aliases:
                base = aliases[chain[0]]
                path = ".".join(([base] if base else []) + chain[1:])
                uses.append(Use(_normal(path), node.lineno))
    uses.sort(key=lambda u: (u.line, u.path))
    return uses


def _is_inner(node: ast.Attribute) -> bool:
    return getattr(node, "_jf_inner", False)


def _chain(node: ast.Attribute) -> Optional[list]:
    """['tf', 'nn', 'relu'] for `tf.nn.relu`; marks the inner Attribute nodes as seen."""
    parts = []
    cur = node
    while isinstance(cur, ast.Attribute):
        parts.append(cur.attr)
        if cur is not node:
            cur._jf_inner = True
        cur = cur.value
    if not isinstance(cur, ast.Name):
        return None
    parts.append(cur.id)
    return parts[::-1]


# -- looking names up in jitflow ----------------------------------------------------------------
def resolve(path: str):
    """(True, None) when `jitflow.<path>` exists; else (False, the prefix that is missing and
    the reason jitflow gives)."""
    import jitflow
    obj = jitflow
    parts = path.split(".") if path else []
    for i, part in enumerate(parts):
        try:
            obj = getattr(obj, part)
        except Exception as e:  # noqa: BLE001  (a lazy namespace may raise anything)
            try:   # a submodule not imported yet (`import jitflow.dask as jfd`)
                import importlib
                obj = importlib.import_module("jitflow." + ".".join(parts[:i + 1]))
            except Exception:  # noqa: BLE001
                return False, (".".join(parts[:i + 1]), _reason(e, part))
    return True, None


def _reason(e: Exception, part: str) -> str:
    text = str(e)
    generic = text.startswith(("module ", "type object ")) and text.endswith(f"'{part}'")
    return "" if generic or not text else text


def missing_uses(uses: Iterable[Use]) -> list:
    """[(missing path, reason, [lines])] for the uses that jitflow cannot resolve, one entry
    per missing prefix (`tf.contrib.seq2seq` once, not once per name below it)."""
    found: dict = {}
    for u in uses:
        ok, why = resolve(u.path)
        if ok:
            continue
        prefix, reason = why
        entry = found.setdefault(prefix, [reason, []])
        if u.line not in entry[1]:
            entry[1].append(u.line)
    return [(p, r, lines) for p, (r, lines) in found.items()]


# -- running a program with tensorflow as jitflow -----------------------------------------------
class _AsJitflow(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports `tensorflow[.x.y]` as jitflow's module `jitflow[.x.y]` (or the attribute
    `jitflow.x.y` where that is not a module: `tensorflow.compat.v1`)."""

    def find_spec(self, fullname, path=None, target=None):
        local = _tf_path(fullname)
        if local is None:
            return None
        target_mod = self._target(local)
        if target_mod is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    @staticmethod
    def _target(local: str):
        name = "jitflow" + ("." + local if local else "")
        try:
            return importlib.import_module(name)
        except ImportError:
            pass
        ok, _ = resolve(local)
        if not ok:
            return None
        obj = importlib.import_module("jitflow")
        for part in local.split("."):
            obj = getattr(obj, part)
        return obj if hasattr(obj, "__dict__") else None

    def __init__(self) -> None:
        self._specs: dict = {}

    def create_module(self, spec):
        module = self._target(_tf_path(spec.name))
        self._specs[id(module)] = getattr(module, "__spec__", None)
        return module

    def exec_module(self, module) -> None:
        """Nothing to run (the module is jitflow's, already loaded): give back the module its
        own `__spec__`, which the import system set to the `tensorflow` one."""
        if id(module) in self._specs:
            module.__spec__ = self._specs.pop(id(module))


class tensorflow_as_jitflow:  # noqa: N801  (used as a function: `with tensorflow_as_jitflow():`)
    """Within the block `import tensorflow` (and its submodules) gives jitflow's modules; on
    exit the finder and the `tensorflow*` entries of sys.modules are removed again."""

    def __enter__(self) -> "tensorflow_as_jitflow":
        self._finder = _AsJitflow()
        self._saved = {k: v for k, v in sys.modules.items()
                       if k == "tensorflow" or k.startswith("tensorflow.")}
        for k in self._saved:
            del sys.modules[k]
        sys.meta_path.insert(0, self._finder)
        return self

    def __exit__(self, *exc) -> None:
        if self._finder in sys.meta_path:
            sys.meta_path.remove(self._finder)
        for k in [k for k in sys.modules if k == "tensorflow" or k.startswith("tensorflow.")]:
            del sys.modules[k]
        sys.modules.update(self._saved)


def run_program(path: str, argv: Sequence[str] = ()) -> int:
    """Run the script at `path` as `__main__` with `argv`, tensorflow importing as jitflow;
    its exit status (an exception propagates)."""
    old_argv, old_path0 = sys.argv, sys.path[0] if sys.path else None
    sys.argv = [path, *argv]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        with tensorflow_as_jitflow():
            runpy.run_path(path, run_name="__main__")
    except SystemExit as e:
        code = e.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)
        return 1
    finally:
        sys.argv = old_argv
        if sys.path and sys.path[0] != old_path0:
            del sys.path[0]
    return 0


# -- API coverage -------------------------------------------------------------------------------
def api_names(path: str = API_FILE) -> list:
    """TF1's public `tf.compat.v1` names (dotted paths below `tf.`)."""
    with open(path, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip() and not line.startswith("#")]


def _namespace(name: str) -> str:
    return name.rsplit(".", 1)[0] if "." in name else ""


def coverage(namespaces: Optional[Sequence[str]] = None, names: Optional[list] = None) -> dict:
    """{namespace: (found, total, [missing names])} over TF1's names, for the given namespaces
    (exact: "nn" is `tf.nn.*`, not `tf.nn.rnn_cell.*`; default: every namespace)."""
    out: dict = {}
    for name in names if names is not None else api_names():
        ns = _namespace(name)
        if namespaces is not None and ns not in namespaces:
            continue
        entry = out.setdefault(ns, [0, 0, []])
        entry[1] += 1
        if resolve(name)[0]:
            entry[0] += 1
        else:
            entry[2].append(name)
    return {ns: tuple(v) for ns, v in out.items()}


def total(cov: dict) -> tuple:
    """(found, total) summed over a coverage table."""
    return sum(v[0] for v in cov.values()), sum(v[1] for v in cov.values())
