"""The numba_cpu table: scalar op (jitflow/compiler/ir.py `SCALAR_OPS`) -> Numba source.

An entry is a format string over the operands' texts `{0}`, `{1}`, ... and the typed
literals `{c0}`, `{c1}` (0 and 1 in the op's literal dtype), or a pair (integer form, float
form) chosen by the result dtype, or a function of the operand texts (n-ary ops). Ops with a
vectorizable helper in vecmath.py ("exp", "tanh", ...) are mapped to it by the emitter.
"""
from __future__ import annotations

__all__ = ["TABLE", "WHOLE_HELPERS"]

# C's truncating integer division, from Python's flooring one
_INT_TRUNCDIV = "({0} // {1} + ({c1} if {0} % {1} != 0 and ({0} < 0) != ({1} < 0) else {c0}))"

TABLE: dict = {
    "id": "{0}",
    "cast": "{0}",            # the emitter converts the result to the result dtype
    "add": lambda args: "(" + " + ".join(args) + ")",
    "sub": "({0} - {1})",
    "mul": "({0} * {1})",
    "div": "({0} / {1})",
    "neg": "(-{0})",
    "pow": "({0} ** {1})",
    "floordiv": ("({0} // {1})", "np.floor({0} / {1})"),
    "floormod": ("({0} % {1})", "np.mod({0}, {1})"),
    "truncdiv": (_INT_TRUNCDIV, "np.trunc({0} / {1})"),
    "truncmod": ("({0} - {1} * " + _INT_TRUNCDIV + ")", "np.fmod({0}, {1})"),
    "maximum": "np.maximum({0}, {1})",
    "minimum": "np.minimum({0}, {1})",
    "abs": "abs({0})",
    "sign": "np.sign({0})",
    "sqrt": "math.sqrt({0})",
    "atan2": "math.atan2({0}, {1})",
    # exp(-|x|) keeps both branches finite; the naive 1/(1+exp(-x)) flushes subnormal
    # results to 0
    "sigmoid": "(({c1} if {0} >= {c0} else math.exp({0})) / ({c1} + math.exp(-abs({0}))))",
    "softplus": "(max({0}, {c0}) + math.log1p(math.exp(-abs({0}))))",
    "floor": "np.floor({0})",
    "ceil": "np.ceil({0})",
    "rint": "np.rint({0})",
    "isnan": "np.isnan({0})",
    "isfinite": "np.isfinite({0})",
    "isinf": "np.isinf({0})",
    "eq": "({0} == {1})",
    "ne": "({0} != {1})",
    "lt": "({0} < {1})",
    "le": "({0} <= {1})",
    "gt": "({0} > {1})",
    "ge": "({0} >= {1})",
    "and": "({0} and {1})",
    "or": "({0} or {1})",
    "not": "(not {0})",
    "select": "({1} if {0} else {2})",
}
for _fn in ("exp", "log", "log1p", "expm1", "sin", "cos", "tan", "tanh", "asin", "acos", "atan",
            "sinh", "cosh", "asinh", "acosh", "atanh", "erf"):
    TABLE[_fn] = "math." + _fn + "({0})"

#: scalar ops computed by one vectorizable helper as a whole (rather than their composition)
WHOLE_HELPERS = frozenset({"sigmoid"})
