"""The warm path of single-kernel plans: a generated Python runner per run signature and
caller kind (`Session.run`, `make_callable`) that checks the feeds inline, finds the kernel's
native entry point by the shapes of the fed `None` dimensions and calls it (see `FastPath`).
With a native entry of the LLVM path (pyentry.py), the runner first hands the fed values
straight to the entry used last, which checks and converts them itself (or returns None).
"""
from __future__ import annotations

import numpy as np

from jitflow.backends.base import ERROR_PREFIX
from jitflow.backends.numba_cpu.kernels import Compiled
from jitflow.compiler.program import FEED, KERNEL, VARIABLE
from jitflow.runtime import config

__all__ = ["FastPath", "var_value"]


# -- the warm path: generated runners ----------------------------------------------------------
_SCALAR_FEEDS = {"f": (float, int), "i": (int,), "u": (int,), "b": (bool,), "c": (complex, float)}


_MAX_FAST_ENTRIES = 64


class FastPath:
    """The warm path of one run signature: a generated Python function per caller kind.

    The function inlines the feed checks (fast paths for Python scalars and for C-contiguous
    arrays of the right dtype and shape; anything else through the spec's own checks), finds
    the entry for the shapes of the fed `None` dimensions, checks the variable buffers are the
    ones the entry was made with, calls the kernel's native entry point (no dispatcher typing:
    the arguments have exactly the types the entry was made for) and rebuilds the fetch
    structure. Anything else -- a first call, a new shape, uninitialized or replaced variables,
    a kernel check failing, a value needing conversion to a non-contiguous array -- goes
    through `ordinary(args)`, the session's general path, after which an entry is made.

    Where every feed goes to the kernel and the kernel has a native entry (llvmjit.py), the
    function tries that first: the fed values go as they are to the last entry used (`last`),
    in its variant that takes exactly what the feed checks would pass through unchanged or
    convert as `np.asarray(v, dtype)` does (rank-0 Python and numpy scalars; writeable
    C-contiguous arrays of the dtype, the static shape and the entry's shape class) and
    returns None for anything else, which then takes the way above.
    """

    def __init__(self, ex, spec, store, ordinary) -> None:
        self.ex = ex
        self.spec = spec
        self.store = store
        self.state = store.values
        self.ordinary = ordinary
        self.entries: dict = {}
        self.last = [None]    # (try-entry, consts, variables, buffers...) of the last call
        self.checks = spec.checks
        self.pos = [spec.feed_pos[i] for i in ex.in_pos]
        # kernel results the fetches use, in fetch order (each entry holds their conversions)
        self.conv_idx = [i for kind, i in ex.fetch_src if kind == KERNEL]

    # -- entries ----------------------------------------------------------------------------
    def invalidate(self) -> None:
        """A kernel got faster code: entries holding the old one are made again."""
        self.entries.clear()
        self.last[0] = None

    def promote(self, key, args):
        """Run `args` the ordinary way, then make the entry for `key` if the kernel is ready."""
        result = self.ordinary(args)
        entry = self._entry(args)
        if entry is not None:
            if len(self.entries) >= _MAX_FAST_ENTRIES:
                self.entries.clear()
            self.entries[key] = entry
        return result

    def _entry(self, args):
        ex, state = self.ex, self.state
        if not ex.single or ex.pre:
            return None
        vals = [c(a) for c, a in zip(self.checks, args)]
        ins = [vals[i] for i in self.pos]
        bufs = [state.get(v) for v in ex.var_ops]
        if any(b is None for b in bufs) or any(v not in state for v in ex.extra_vars):
            return None
        if not all(type(a) is np.ndarray and a.flags.carray for a in ins + bufs):
            return None
        c = ex.exact.get(tuple([a.shape for a in ins] + [b.shape for b in bufs]))
        if not isinstance(c, Compiled) or not c.called or c.broken:
            return None
        order = c.var_order
        vs = tuple(bufs) if order is None else tuple([bufs[i] for i in order])
        ct = tuple([v for _, v in c.consts])
        ep = c.entry(tuple(ins) + ct, vs)
        if ep is None:
            return None
        c.listeners.add(self)   # a faster code for `c` drops the entries holding this one
        last = None
        if c.level != "numba":
            from jitflow.backends.numba_cpu import pyentry
            feeds = self.spec.feeds
            # (large operands take the general path, which picks the parallel variant)
            parmin = (config.parallel_min() if config.threads() > 1 and c.par_source is not None
                      else 0)
            fp = pyentry.try_variant(ep, [feeds[k].shape.as_tuple() for k in self.pos],
                                     parmin)
            if fp is not None:
                last = (fp, ct, vs, *bufs)
        # rank-0 results: Numba's entry gives Python scalars, the LLVM path numpy scalars
        convs = [_scalar_maker(c.out_conv[i]) if c.level == "numba" else None
                 for i in self.conv_idx]
        return (ep, ct, vs, last, *convs, *bufs)

    # -- the generated function ---------------------------------------------------------------
    def _direct_lines(self, names: dict, args: str, expr: str) -> list:
        """Source lines calling the last entry used with the fed values as they are (see the
        class docstring); they return the run's result, or fall through."""
        ex = self.ex
        bufs = [f"b{k}" for k in range(len(ex.var_ops))]
        ins = "(" + "".join(f"v{k}, " for k in self.pos) + ")"
        lines = ["    f = _last[0]",
                 "    if f is not None:",
                 "        " + ", ".join(["fp", "ct", "vs"] + bufs) + " = f"]
        conds = [f"_state_get(_V{k}) is b{k}" for k in range(len(bufs))]
        conds += [f"_X{k} in _state" for k in range(len(ex.extra_vars))]
        ind = "        "
        if conds:
            lines.append(f"        if {' and '.join(conds)}:")
            ind += "    "
        lines += [f"{ind}try:",
                  f"{ind}    out = fp({ins} + ct, vs)",
                  f"{ind}except ValueError as err:",
                  f"{ind}    if str(err).startswith(_prefix):",
                  f"{ind}        return _slow({args})",
                  f"{ind}    raise",
                  f"{ind}if out is not None:"]
        for j, (kind, i) in enumerate(ex.fetch_src):
            if kind == KERNEL:
                lines.append(f"{ind}    r{j} = out[{i}]")
            elif kind == VARIABLE:
                names[f"_W{j}"] = i
                lines.append(f"{ind}    r{j} = var_value(_state[_W{j}])")
        lines.append(f"{ind}    return {expr}")
        for k, v in enumerate(ex.var_ops):
            names[f"_V{k}"] = v
        for k, v in enumerate(ex.extra_vars):
            names[f"_X{k}"] = v
        return lines

    def function(self, positional: bool = False, miss=None):
        """The runner for `make_callable` (with `positional`) or for `Session.run` (given the
        feed values, or with `miss` the feed dict)."""
        spec, ex = self.spec, self.ex
        mapper = spec.mapper
        if len(ex.fetch_src) != len(mapper.tensors) or len(spec.fetch_pos) != len(mapper.tensors):
            return None
        names: dict = {"_ndarray": np.ndarray, "_asarray": np.asarray, "_state": self.state,
                       "_state_get": self.state.get, "_entries_get": self.entries.get,
                       "_promote": self.promote, "_slow": self.ordinary, "_prefix": ERROR_PREFIX,
                       "var_value": var_value, "_last": self.last}
        expr = mapper.expression(spec.plan.graph, spec.fetches, names)
        if expr is None:
            names["_build"] = mapper.build
            expr = "_build([" + ", ".join(f"r{j}" for j in range(len(mapper.tensors))) + "])"
        n = len(spec.feeds)
        vs = [f"v{i}" for i in range(n)]
        args = "args" if positional else "(" + "".join(v + ", " for v in vs) + ")"
        lines = []
        if positional:
            names["_store"] = self.store
            lines += ["def _runner(*args, **kwargs):",
                      "    if _store.closed:",
                      "        raise RuntimeError(\"Attempted to use a closed Session.\")",
                      f"    if len(args) != {n}:",
                      f"        raise TypeError(f\"callable expects {n} feed values, got "
                      "{len(args)}\")"]
            if n:
                lines.append("    " + "".join(v + ", " for v in vs) + "= args")
        elif miss is not None:
            names["_miss"] = miss
            lines += ["def _runner(feed):", f"    if len(feed) != {n}:", "        return _miss"]
            for i, t in enumerate(spec.feeds):
                names[f"_T{i}"] = t
                lines.append(f"    v{i} = feed.get(_T{i}, _miss)")
            if n:
                lines += ["    if " + " or ".join(f"{v} is _miss" for v in vs) + ":",
                          "        return _miss"]
        else:
            lines.append("def _runner(" + ", ".join(vs) + "):")
        used = set(self.pos)
        direct = (used == set(range(n))
                  and all(fp is None and kind != FEED
                          for (kind, _), fp in zip(ex.fetch_src, spec.fetch_pos)))
        if direct:
            lines += self._direct_lines(names, args, expr)
        for i, t in enumerate(spec.feeds):
            lines += _feed_lines(i, t, spec.checks[i], names, args, i in used)
        if config.threads() > 1:
            # large operands take the ordinary path, which picks the parallel kernel variant
            names["_PARMIN"] = config.parallel_min()
            for k in sorted(used):
                if spec.feeds[k].shape.as_tuple() != ():
                    lines += [f"    if x{k}.size >= _PARMIN:", f"        return _slow({args})"]
        key = _key_source(spec.feeds, self.pos)
        convs = [f"cv{m}" for m in range(len(self.conv_idx))]
        bufs = [f"b{k}" for k in range(len(ex.var_ops))]
        lines += [f"    key = {key}",
                  "    e = _entries_get(key)",
                  "    if e is None:",
                  f"        return _promote(key, {args})",
                  "    " + ", ".join(["ep", "ct", "vs", "last"] + convs + bufs) + " = e"]
        if bufs:
            for k, v in enumerate(ex.var_ops):
                names[f"_V{k}"] = v
            cond = " or ".join(f"_state_get(_V{k}) is not b{k}" for k in range(len(bufs)))
            lines += [f"    if {cond}:", f"        return _promote(key, {args})"]
        for k, v in enumerate(ex.extra_vars):
            names[f"_X{k}"] = v
            lines += [f"    if _X{k} not in _state:", f"        return _slow({args})"]
        ins = "(" + "".join(f"x{k}, " for k in self.pos) + ")"
        lines += ["    try:",
                  f"        out = ep({ins} + ct, vs)",
                  "    except ValueError as err:",
                  "        if str(err).startswith(_prefix):",
                  f"            return _slow({args})",
                  "        raise"]
        if direct:
            lines.append("    _last[0] = last")
        m = 0
        for j, ((kind, i), fp) in enumerate(zip(ex.fetch_src, spec.fetch_pos)):
            if kind == KERNEL:
                lines.append(f"    r{j} = out[{i}] if cv{m} is None else cv{m} * out[{i}]")
                m += 1
            if fp is not None or kind == FEED:
                k = fp if fp is not None else spec.feed_pos[i]
                lines.append(f"    r{j} = x{k}[()] if x{k}.ndim == 0 else x{k}")
            elif kind == VARIABLE:
                names[f"_W{j}"] = i
                lines.append(f"    r{j} = var_value(_state[_W{j}])")
        lines.append(f"    return {expr}")
        source = "\n".join(lines) + "\n"
        exec(compile(source, f"<jitflow runner {len(spec.plan.ops)} ops>", "exec"), names)
        fn = names["_runner"]
        fn.source = source
        return fn


def _feed_lines(i: int, t, check, names: dict, args: str, to_kernel: bool) -> list:
    """Source lines turning feed `v<i>` for tensor `t` into `x<i>` as `check` does, with
    fast paths for Python scalars and for arrays that need no conversion."""
    dtype = np.dtype(t.dtype.as_numpy_dtype)
    dims = t.shape.as_tuple()
    names[f"_D{i}"] = dtype
    names[f"_CHK{i}"] = check
    lines = []
    scalars = _SCALAR_FEEDS.get(dtype.kind)
    cond = "if"
    if scalars and (dims is None or dims == ()):
        names[f"_F{i}"] = frozenset(scalars + (dtype.type,))
        lines += [f"    if type(v{i}) in _F{i}:", f"        x{i} = _asarray(v{i}, _D{i})"]
        cond = "elif"
    if dims is None:
        shape_ok = ""
    elif all(d is not None for d in dims):
        names[f"_SH{i}"] = tuple(dims)
        shape_ok = f" and v{i}.shape == _SH{i}"
    elif all(d is None for d in dims):
        shape_ok = f" and v{i}.ndim == {len(dims)}"
    else:
        known = "".join(f" and s{i}[{k}] == {d}" for k, d in enumerate(dims) if d is not None)
        shape_ok = f" and len(s{i} := v{i}.shape) == {len(dims)}{known}"
    lines += [f"    {cond} type(v{i}) is _ndarray and v{i}.dtype is _D{i}{shape_ok}"
              + (f" and v{i}.flags.carray:" if to_kernel else ":"),
              f"        x{i} = v{i}",
              "    else:",
              f"        x{i} = _CHK{i}(v{i})"]
    if to_kernel:
        lines += [f"        if not x{i}.flags.carray:", f"            return _slow({args})"]
    return lines


class _Convert:
    """`self * x` is `fn(x)`: the generated runners turn scalar results into numpy scalars
    with `*` (see `_scalar_maker`)."""

    __slots__ = ("fn",)

    def __init__(self, fn) -> None:
        self.fn = fn

    def __mul__(self, x):
        return self.fn(x)


def _scalar_maker(conv):
    """What a runner multiplies a kernel's rank-0 result (a Python scalar) by to get the numpy
    scalar `conv(x)`: for real floats and integers the dtype's one, as `one * x` rounds `x` to
    the dtype exactly as `conv(x)` does (NEP 50: a Python scalar takes the numpy scalar's
    type) in a third of the time; else a wrapper calling `conv`."""
    if conv is None:
        return None
    if np.dtype(conv).kind in "fiu":
        return conv(1)
    return _Convert(conv)


def _key_source(feeds, pos) -> str:
    """Source of a runner's entry key: which fed `None` dimensions are 1 (one bit each; a
    kernel is compiled per such class, so other sizes share its entry), plus the whole shape
    of feeds of unknown rank."""
    bits, shapes = [], []
    for k in dict.fromkeys(pos):
        dims = feeds[k].shape.as_tuple()
        if dims is None:
            shapes.append(f"x{k}.shape")
            continue
        for a, d in enumerate(dims):
            if d is None:
                size = f"len(x{k})" if a == 0 else f"x{k}.shape[{a}]"
                bits.append(f"({size} == 1)" + (f" << {len(bits)}" if bits else ""))
    key = " | ".join(bits) or "0"
    return f"({key}, " + "".join(s + ", " for s in shapes) + ")" if shapes else key


def var_value(a):
    """A fetched variable's value: a copy, never the session's buffer; numpy scalar at rank 0."""
    a = np.array(a, copy=True)
    return a[()] if a.ndim == 0 else a
