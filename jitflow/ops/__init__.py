"""All op families. Importing this package registers every op and builds the namespaces.

Each module in this package lists its public functions in `__all__` (the top-level `tf.`
names) and, where TF1 has them elsewhere too, in `NAMESPACES = {"nn": [...], "math": [...]}`.
Modules are discovered, subpackages included (`nn/`, `math/`: one module per family), so adding
a family is adding a file.
"""
from __future__ import annotations

import importlib
import pkgutil

_EXPORTS: dict[str, dict] = {"": {}}


def _load() -> None:
    def modules(path, prefix: str):
        """The op modules under `path` in name order, a subpackage's modules (recursively) in
        its place; names starting with "_" and the registry are not op modules."""
        for info in sorted(pkgutil.iter_modules(path), key=lambda m: m.name):
            if info.name.startswith("_") or info.name == "registry":
                continue
            mod = importlib.import_module(f"{prefix}.{info.name}")
            if info.ispkg:
                yield from modules(mod.__path__, mod.__name__)
            else:
                yield mod

    for mod in modules(__path__, __name__):
        for n in getattr(mod, "__all__", ()):
            _EXPORTS[""][n] = getattr(mod, n)
        for ns, names in getattr(mod, "NAMESPACES", {}).items():
            d = _EXPORTS.setdefault(ns, {})
            for n in names:
                if isinstance(n, tuple):  # (public name, object name)
                    d[n[0]] = getattr(mod, n[1])
                else:
                    d[n] = getattr(mod, n)


def namespace(name: str) -> dict:
    """The public names of one namespace ("" is the top-level `tf.` namespace)."""
    return dict(_EXPORTS.get(name, {}))


_load()
from jitflow.ops.state import install_variable_operators  # noqa: E402

install_variable_operators()
globals().update(_EXPORTS[""])
__all__ = sorted(_EXPORTS[""])
