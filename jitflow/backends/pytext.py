"""Python-syntax text shared by the Numba backends: dtype names, literals and symbolic dims.

Both Numba targets compile Python source, so a dim such as ("slen", d, b, e, s, bm, em) or a
typed literal is spelled the same in a CPU kernel and in a CUDA kernel's host driver.
"""
from __future__ import annotations

import math

__all__ = ["np_name", "lit_text", "const_text", "dim_text"]


def np_name(dtype: str) -> str:
    """`np.float32`, `np.bool_`, ...: the numpy scalar type that spells `dtype`."""
    return "np.bool_" if dtype == "bool" else f"np.{dtype}"


def lit_text(value, dtype: str) -> str:
    """A literal of `dtype` (typed, so float32 math stays float32)."""
    if dtype == "bool":
        return "True" if value else "False"
    if isinstance(value, float) or dtype.startswith("float"):
        v = float(value)
        if math.isnan(v):
            return f"{np_name(dtype)}(np.nan)"
        if math.isinf(v):
            return f"{np_name(dtype)}({'-' if v < 0 else ''}np.inf)"
        return f"{np_name(dtype)}({v!r})"
    return f"{np_name(dtype)}({int(value)})"


def const_text(value, lit_dtype: str) -> str:
    """A scalar expression's `Const` in an op whose literals have dtype `lit_dtype`: the
    number as written, typed (`np.float32(0)`, `np.int32(1)`)."""
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return lit_text(value, lit_dtype)
    return f"{np_name(lit_dtype)}({value!r})"


def dim_text(d) -> str:
    """The source text of symbolic dim `d` (see the dims of jitflow/compiler/ir.py); the
    runtime size of an input's axis k is the local `d<slot>_<k>`, a variable's `e<slot>_<k>`."""
    if d == 1:
        return "1"
    k = d[0]
    if k == "const":
        return str(d[1])
    if k in ("prod", "div", "mod"):
        prod = "(" + " * ".join(dim_text(x) for x in d[1]) + ")" if d[1] else "1"
        return prod if k == "prod" else f"({prod} {'//' if k == 'div' else '%'} {d[2]})"
    if k == "arith":
        return f"({dim_text(d[2])} {d[1]} {dim_text(d[3])})"
    if k in ("sstart", "slen"):
        n, b, e, s, bm, em = dim_text(d[1]), d[2], d[3], d[4], d[5], d[6]
        lo, hi = ("0", n) if s > 0 else ("-1", f"({n} - 1)")
        st = (("0" if s > 0 else f"({n} - 1)") if bm else
              f"min(max({b} + {n} if {b} < 0 else {b}, {lo}), {hi})")
        if k == "sstart":
            return st if bm and s > 0 else f"({st})"
        en = ((n if s > 0 else "-1") if em else
              f"min(max({e} + {n} if {e} < 0 else {e}, {lo}), {hi})")
        if s > 0:
            return f"max(0, ({en} - {st} + {s - 1}) // {s})"
        return f"max(0, ({st} - {en} + {-s - 1}) // {-s})"
    if k == "sidx":
        return f"({d[2]} + {dim_text(d[1])} if {d[2]} < 0 else {d[2]})"
    if k == "min":
        return f"min({dim_text(d[1])}, {dim_text(d[2])})"
    if k == "ok":  # ("ok", lo, x, hi): 1 when lo <= x < hi
        return f"(1 if {dim_text(d[1])} <= {dim_text(d[2])} < {dim_text(d[3])} else 0)"
    if k == "window":
        _, n, kk, s, dil, same = d
        nt = dim_text(n)
        if same:
            return nt if s == 1 else f"(({nt} + {s - 1}) // {s})"
        ek = f"(({dim_text(kk)} - 1) * {dil} + 1)" if dil != 1 else dim_text(kk)
        return f"max(({nt} - {ek}) // {s} + 1, 0)"
    kind, slot, axis = d
    return f"{'d' if kind == 'in' else 'e'}{slot}_{axis}"
