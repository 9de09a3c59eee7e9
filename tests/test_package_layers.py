"""The package's layers: module-level imports form no cycle, and imports that reach up a layer
(or sideways into another backend) happen only inside functions, each with a comment saying
why (on its line or the line above).

Layers, bottom to top (a module may import from its own layer and those below):
  0 core.dtypes, core.shapes, core.errors, core.structure, runtime.config
  1 core.graph, core.fold
  2 compiler (ir, lower, plan, partition, program), ops, runtime (state, reference)
  3 core.gradients, backends
  4 core.session, lib, train, data, serialize, saved_model, and the public modules at the top
Within layer 2, compiler/ imports neither ops/ nor runtime.reference; within layer 3, a backend
imports no other backend (backends/base.py, pytext.py and interpreter.py are shared).
"""
from __future__ import annotations

import ast
import os

import pytest

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "jitflow")

_LAYER0 = ("jitflow.core.dtypes", "jitflow.core.shapes", "jitflow.core.errors",
           "jitflow.core.structure", "jitflow.runtime.config")
_LAYER1 = ("jitflow.core.graph", "jitflow.core.fold")
_LAYER2 = ("jitflow.compiler", "jitflow.ops", "jitflow.runtime")
_LAYER3 = ("jitflow.core.gradients", "jitflow.backends")


def layer(mod: str) -> int:
    for n, group in enumerate((_LAYER0, _LAYER1, _LAYER2, _LAYER3)):
        if any(mod == g or mod.startswith(g + ".") for g in group):
            return n
    return 4


def _backend(mod: str):
    parts = mod.split(".")
    if len(parts) >= 3 and parts[1] == "backends" and parts[2] not in (
            "base", "pytext", "interpreter", "__init__"):
        return parts[2]
    return None


def forbidden(src: str, dst: str) -> bool:
    """Whether module `src` may not import `dst` at module level."""
    if layer(dst) > layer(src):
        return True
    if src.startswith("jitflow.compiler") and (dst.startswith("jitflow.ops")
                                               or dst == "jitflow.runtime.reference"):
        return True
    a, b = _backend(src), _backend(dst)
    return a is not None and b is not None and a != b


def _modules() -> dict:
    """module name -> path, for every module of the package."""
    out = {}
    for dirpath, _, files in os.walk(ROOT):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, os.path.dirname(ROOT))[:-3].replace(os.sep, ".")
                out[rel[:-len(".__init__")] if rel.endswith(".__init__") else rel] = path
    return out


MODULES = _modules()


def _resolve(name: str, module: str, level: int, is_pkg: bool) -> str:
    if level:
        base = module.split(".")
        base = base[:len(base) - level + (1 if is_pkg else 0)]
        name = ".".join(base + ([name] if name else []))
    return name


def _targets(node, module: str, is_pkg: bool) -> list:
    """The jitflow modules an import statement loads."""
    out = []
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = _resolve(node.module or "", module, node.level, is_pkg)
        names = []
        for a in node.names:
            sub = f"{base}.{a.name}"
            names.append(sub if sub in MODULES else base)
    for n in names:
        while n and n not in MODULES and "." in n:
            n = n.rsplit(".", 1)[0]
        if n in MODULES and n.startswith("jitflow"):
            out.append(n)
    return out


def imports() -> tuple:
    """(module-level edges {src: {dst}}, function-level [(src, dst, path, line, commented)])."""
    top: dict = {m: set() for m in MODULES}
    inner = []
    for mod, path in MODULES.items():
        with open(path) as fh:
            text = fh.read()
        lines = text.splitlines()
        tree = ast.parse(text)
        is_pkg = path.endswith("__init__.py")
        nested = set()
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(fn):
                    if isinstance(node, (ast.Import, ast.ImportFrom)):
                        nested.add(id(node))
                        for dst in _targets(node, mod, is_pkg):
                            here = lines[node.lineno - 1]
                            above = lines[node.lineno - 2].strip() if node.lineno > 1 else ""
                            commented = "#" in here or above.startswith("#")
                            inner.append((mod, dst, path, node.lineno, commented))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in nested:
                for dst in _targets(node, mod, is_pkg):
                    if dst != mod:
                        top[mod].add(dst)
    return top, inner


def cycles(edges: dict) -> list:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict = {}
    low: dict = {}
    on, stack, out = set(), [], []
    counter = [0]
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in edges:
                    continue
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


EDGES, INNER = imports()


def test_module_level_imports_form_no_cycle():
    assert cycles(EDGES) == []


@pytest.mark.parametrize("src", sorted(EDGES))
def test_module_level_imports_stay_in_their_layer(src):
    bad = sorted(d for d in EDGES[src] if forbidden(src, d))
    assert not bad, f"{src} imports {bad} at module level"


def test_the_compiler_imports_no_backend():
    reach = [(s, d) for s, ds in EDGES.items() for d in ds if s.startswith("jitflow.compiler")]
    reach += [(s, d) for s, d, *_ in INNER if s.startswith("jitflow.compiler")]
    assert not [(s, d) for s, d in reach if d.startswith("jitflow.backends")]


def test_function_level_imports_across_layers_say_why():
    silent = [f"{os.path.relpath(p, ROOT)}:{n} {s} -> {d}" for s, d, p, n, c in INNER
              if forbidden(s, d) and not c]
    assert not silent, "\n".join(silent)


def test_the_checker_finds_cycles_and_layer_breaks():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]
    assert forbidden("jitflow.core.graph", "jitflow.ops.math")
    assert forbidden("jitflow.compiler.partition", "jitflow.ops.registry")
    assert forbidden("jitflow.backends.numba_cuda.driver", "jitflow.backends.numba_cpu.kernels")
    assert not forbidden("jitflow.backends.numba_cuda.driver", "jitflow.backends.base")
    assert not forbidden("jitflow.lib.layers", "jitflow.ops.nn")
