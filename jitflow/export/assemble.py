"""The text of an exported module: a docstring saying how to use it, the generated kernels
with copies of the helper libraries they call (mathlib, mathir, nnlib), the entry point, and a
copy of jitflow/export/loader.py (one source of truth: the loader jitflow runs is the loader the
module carries).

Every part needs only numpy and numba. Their top-level names share one namespace, so a name
defined by two parts (other than the few imports they may share) is an error at export, not
a module where one part silently rebinds another's global.
"""
from __future__ import annotations

import ast
import functools
import importlib
import importlib.resources
import inspect
import os
import re

#: the line that starts the loader's copy in an exported module
LOADER_MARKER = ("# ---- loader (a copy of jitflow/export/loader.py; needs only numpy) "
                 .ljust(99, "-"))

# the helper libraries generated kernels import: (module, what its copy is called), a library
# before the ones it imports
_LIBRARIES = (("mathlib", "the kernels' primitives"), ("mathir", "the math library's IR"),
              ("nnlib", "window-op helpers"))
# top-level names the kernels and the libraries' copies may both define (the same imports)
_SHARED = {"math", "np", "numba", "os", "__all__", "FUNCS", "types", "intrinsic", "ctypes",
           "lir", "llb", "cgutils", "ir"}
# what the module defines after the kernels
_ENTRY_NAMES = {"SIGNATURE_ID", "ENTRY"}


def _without_docstring(text: str) -> str:
    """`text` (a module's source) less its docstring, if it has one."""
    body = ast.parse(text).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        text = "".join(text.splitlines(True)[body[0].end_lineno:])
    return text


@functools.lru_cache(maxsize=None)
def loader_source() -> str:
    """The code of jitflow/export/loader.py (its file's text less the module docstring), as
    every exported module carries it."""
    text = importlib.resources.files("jitflow.export").joinpath("loader.py").read_text(
        encoding="utf-8")
    return _without_docstring(text).strip("\n") + "\n"


def top_level_names(source: str) -> set:
    """The names a module's text binds at its top level (definitions, imports, assignments)."""
    names = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


def _library_import(lib: str):
    return re.compile(rf"^from jitflow\.backends\.numba_cpu import {lib}(?: as (\w+))?"
                      rf"(?:  #[^\n]*)?\n"
                      rf"|^from jitflow\.backends\.numba_cpu\.{lib} import [\w, ]+"
                      rf"(?:  #[^\n]*)?\n", re.M)


def _strip_import(text: str, pattern, aliases: set) -> str:
    """`text` without the library's import lines and its `alias.` prefixes."""
    text = pattern.sub("", text)
    for alias in aliases:
        text = re.sub(rf"\b{alias}\.", "", text)
    return text


def inline_libraries(source: str) -> str:
    """Replace the kernel's imports of jitflow's helper libraries (mathlib, mathir, nnlib) by
    copies, and the libraries' imports of each other likewise.

    Each library needs only numpy, numba and llvmlite (Numba's own dependency); its text goes
    into the exported module (without its docstring), and `_jf.exp` becomes `exp`. Top-level
    names of the copies must not collide with each other, the generated code or the loader; a
    collision is an error.
    """
    copies = []   # [lib, what, text], in the order found
    kernel = source
    for lib, what in _LIBRARIES:
        pattern = _library_import(lib)
        texts = [kernel] + [c[2] for c in copies]
        found = [m for t in texts for m in pattern.finditer(t)]
        if not found:
            continue
        aliases = {m.group(1) or lib for m in found if not m.group(0).startswith(
            f"from jitflow.backends.numba_cpu.{lib} ")}
        module = importlib.import_module(f"jitflow.backends.numba_cpu.{lib}")
        helpers = _without_docstring(inspect.getsource(module))
        helpers = re.sub(r"^from __future__ import annotations\n", "", helpers, flags=re.M)
        helpers = _without_cache_token(helpers)
        kernel = _strip_import(kernel, pattern, aliases)
        for c in copies:
            c[2] = _strip_import(c[2], pattern, aliases)
        copies.append([lib, what, helpers])
    if not copies:
        return source
    ours = top_level_names(kernel) | top_level_names(loader_source()) | _ENTRY_NAMES
    seen: set = set()
    for lib, _, helpers in copies:
        names = top_level_names(helpers)
        clash = (names & (ours | seen)) - _SHARED
        if clash:
            raise NotImplementedError(f"export: cannot inline {lib}: names {sorted(clash)} "
                                      "clash with the generated module")
        seen |= names
    text = ""
    for lib, what, helpers in reversed(copies):
        text += (f"# ---- {what} (a copy of jitflow.backends.numba_cpu.{lib}) ".ljust(99, "-")
                 + "\n"
                 + helpers.strip() + "\n\n\n")
    return text + "# ---- kernels ".ljust(99, "-") + "\n" + kernel


def _without_cache_token(helpers: str) -> str:
    """The helpers' text without `CACHE_TOKEN` and `_hash_self` (which reads the module's own
    file: an export reads its files once, verified, and needs no cache key)."""
    drop = set()
    for node in ast.parse(helpers).body:
        named = (isinstance(node, ast.FunctionDef) and node.name == "_hash_self"
                 or isinstance(node, ast.Assign) and any(
                     isinstance(t, ast.Name) and t.id == "CACHE_TOKEN" for t in node.targets))
        if named:
            drop.update(range(node.lineno - 1, node.end_lineno))
    lines = helpers.splitlines()
    return "\n".join(line for i, line in enumerate(lines) if i not in drop) + "\n"


_DOC = '''"""{name}: a function exported by jitflow {version}. Needs only numpy and numba.

Feeds: {feeds}
Fetches: {fetches}
Updates: {updates}

Use it without jitflow (the folder holds this file, manifest.json and state.npz):

    import sys; sys.path.insert(0, "/path/to/this/folder")
    import {stem}
    f = {stem}.load()   # checks every file's sha256; f(*feeds) -> fetches, f.save_state()

`load` runs only bytes it has checked, but `import` may first run bytecode that Python cached
in __pycache__: where others can write this folder, load it with `jitflow.load(folder)`,
which checks every file before running any of it.
"""
'''


def module_source(program: dict, manifest: dict) -> str:
    """The exported module: the generated kernels (with their libraries' copies, from
    `inline_libraries`), the entry point, the loader. Raises NotImplementedError if the
    kernels define a name the loader defines too."""
    from jitflow import __version__
    kernels = program["source"].rstrip() + "\n"
    clash = top_level_names(kernels) & (top_level_names(loader_source()) | _ENTRY_NAMES)
    if clash:
        raise NotImplementedError(f"export: the generated kernels define {sorted(clash)}, "
                                  "which the exported module's loader defines too")
    stem = os.path.splitext(manifest["module"])[0]
    doc = _DOC.format(
        name=manifest["name"], version=__version__, stem=stem,
        feeds=", ".join(f"{f['name']} {f['dtype']}{f['shape']}" for f in manifest["feeds"])
        or "none",
        fetches=", ".join(o["name"] for o in manifest["outputs"]) or "none",
        updates=", ".join(manifest["updates"]) or "nothing")
    return (doc + "\n" + "# ---- generated kernels ".ljust(92, "-") + "\n" + kernels + "\n\n"
            f"SIGNATURE_ID = {manifest['signature_id']!r}\n"
            f"ENTRY = {program['entry']}\n\n"
            + LOADER_MARKER + "\n" + loader_source())
