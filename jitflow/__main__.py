"""The `jitflow` command line (`python -m jitflow ...`).

    jitflow version            versions of jitflow, Python, NumPy, Numba and llvmlite
    jitflow cache [list]       the compiled-kernel cache: one line per entry, with sizes
    jitflow cache clear        empty the cache (refuses a folder holding foreign files)
    jitflow inspect PATH       an exported function's manifest and generated source
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from typing import Optional, Sequence

__all__ = ["main", "cache_dir"]

# What the kernel cache holds: generated modules and what Numba and Python cache beside them.
_CACHE_SUFFIXES = (".py", ".pyc", ".nbi", ".nbc", ".json", ".lock", ".tmp", ".so")
_CACHE_DIRS = ("__pycache__", "objects")


def cache_dir() -> str:
    """The kernel cache folder: JITFLOW_CACHE_DIR, else $XDG_CACHE_HOME/jitflow, else
    ~/.cache/jitflow (as the compiler's cache decides)."""
    from jitflow.backends.numba_cpu.cache import cache_dir as compiler_cache_dir
    return os.path.abspath(os.path.expanduser(compiler_cache_dir()))


def _human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _entries(root: str) -> dict:
    """{entry key: [paths]}: a generated module and every cache file derived from it (Numba's,
    in __pycache__), or a kernel's machine code (`objects/<key>`, the default mode's)."""
    groups: dict = {}
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        rel = os.path.relpath(folder, root)
        prefix = "" if rel in (".", "__pycache__") else rel + "/"
        for f in sorted(files):
            key = prefix + (f.split(".", 1)[0] or f)
            groups.setdefault(key, []).append(os.path.join(folder, f))
    return groups


def _cmd_version(args) -> int:
    import llvmlite
    import numba
    import numpy

    import jitflow
    print(f"jitflow  {jitflow.__version__}")
    print(f"python   {sys.version.split()[0]}")
    print(f"numpy    {numpy.__version__}")
    print(f"numba    {numba.__version__}")
    print(f"llvmlite {llvmlite.__version__}")
    return 0


def _cmd_cache(args) -> int:
    root = cache_dir()
    if args.action == "clear":
        return _cache_clear(root, args.force)
    print(f"cache: {root}")
    if not os.path.isdir(root):
        print("(empty: the folder does not exist)")
        return 0
    groups = _entries(root)
    total = 0
    for key, paths in sorted(groups.items()):
        size = sum(os.path.getsize(p) for p in paths)
        mtime = max(os.path.getmtime(p) for p in paths)
        total += size
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(mtime))
        print(f"{key:<44} {len(paths):>3} files {_human(size):>10}  {when}")
    print(f"{len(groups)} {'entry' if len(groups) == 1 else 'entries'}, {_human(total)}")
    return 0


def _cache_clear(root: str, force: bool) -> int:
    if not os.path.isdir(root):
        print(f"cache: {root} does not exist; nothing to clear")
        return 0
    names = sorted(os.listdir(root))
    foreign = [n for n in names
               if not (n in _CACHE_DIRS or n.endswith(_CACHE_SUFFIXES) or n.startswith(".tmp"))]
    if foreign and not force:
        print(f"error: {root} holds files that are not jitflow cache entries "
              f"({', '.join(foreign[:5])}{', ...' if len(foreign) > 5 else ''}); is "
              "JITFLOW_CACHE_DIR right? Use `jitflow cache clear --force` to remove them too.",
              file=sys.stderr)
        return 1
    removed = 0
    for n in names:
        p = os.path.join(root, n)
        if os.path.isdir(p) and not os.path.islink(p):
            removed += sum(len(f) for _, _, f in os.walk(p))
            shutil.rmtree(p)
        else:
            os.unlink(p)
            removed += 1
    print(f"cache: removed {removed} files from {root}")
    return 0


def _cmd_inspect(args) -> int:
    from jitflow.export import ExportError, check_names, read_manifest, verify
    try:
        manifest = read_manifest(args.path)
    except (ExportError, OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(json.dumps(manifest, indent=2, sort_keys=True))
    problems = verify(args.path, manifest)
    if problems:
        print("\nintegrity: FAILED\n  " + "\n  ".join(problems))
    else:
        print("\nintegrity: ok (every file matches its sha256)")
    if not args.no_source:
        if check_names(args.path, manifest):
            print("error: not showing the module: the manifest does not name a file inside "
                  "the folder", file=sys.stderr)
            return 1
        module = os.path.join(args.path, manifest["module"])
        print(f"\n# ---- {manifest['module']} ----")
        try:
            with open(module, encoding="utf-8") as f:
                sys.stdout.write(f.read())
        except OSError as e:
            print(f"error: cannot read the module: {e}", file=sys.stderr)
            return 1
    return 1 if problems else 0


def _cmd_config(args) -> int:
    from jitflow.runtime import config
    rows = config.values()
    width = max(len(n) for n, _, _ in rows)
    for name, value, is_set in rows:
        shown = "(computed)" if value is None else value
        where = "set" if is_set else "default"
        print(f"{name:<{width}}  {shown!s:<12}  {where:<7}  {config.VARS[name].meaning}")
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="jitflow", description="jitflow command line tools")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    v = sub.add_parser("version", help="print jitflow, NumPy, Numba and llvmlite versions")
    v.set_defaults(func=_cmd_version)
    c = sub.add_parser("cache", help="list or clear the compiled-kernel cache "
                                     "(JITFLOW_CACHE_DIR)")
    c.add_argument("action", nargs="?", choices=("list", "clear"), default="list")
    c.add_argument("--force", action="store_true",
                   help="with clear: also remove files that do not look like cache entries")
    c.set_defaults(func=_cmd_cache)
    i = sub.add_parser("inspect", help="print an exported function's manifest and source")
    i.add_argument("path", help="the folder written by jitflow.export")
    i.add_argument("--no-source", action="store_true", help="print only the manifest")
    i.set_defaults(func=_cmd_inspect)
    g = sub.add_parser("config", help="print every JITFLOW_* variable's value in effect")
    g.set_defaults(func=_cmd_config)
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command line; returns the exit status."""
    args = _parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
