"""The numba_cuda table: scalar op (jitflow/compiler/ir.py `SCALAR_OPS`) -> CUDA Python source.

As numba_cpu's table (scalar_ops.py there), but only with what Numba's CUDA target compiles:
`math.*` functions, Python builtins and the device functions of devlib.py, no NumPy ufuncs.
An entry is a format
string over the operands `{0}`, `{1}`, ... and the typed literals `{c0}`, `{c1}`, a pair
(integer form, float form), or a function of (operand texts, result dtype).
"""
from __future__ import annotations

__all__ = ["TABLE"]

_INT_TRUNCDIV = "({0} // {1} + ({c1} if {0} % {1} != 0 and ({0} < 0) != ({1} < 0) else {c0}))"
# NumPy's float remainder (sign of the divisor) from C's fmod (sign of the dividend)
_FLOAT_MOD = ("(math.fmod({0}, {1}) + {1} if (math.fmod({0}, {1}) != {c0} and "
              "((math.fmod({0}, {1}) < {c0}) != ({1} < {c0}))) else math.fmod({0}, {1}))")


def _rounding(name: str):
    """A rounding function of devlib.py: `_dl.floor32` for float32, `_dl.floor64` for float64."""
    return lambda args, dtype: f"_dl.{name}{'32' if dtype == 'float32' else '64'}({args[0]})"


TABLE: dict = {
    "id": "{0}",
    "cast": "{0}",
    "add": lambda args, dtype: "(" + " + ".join(args) + ")",
    "sub": "({0} - {1})",
    "mul": "({0} * {1})",
    "div": "({0} / {1})",
    "neg": "(-{0})",
    "pow": "({0} ** {1})",
    "floordiv": ("({0} // {1})",
                 lambda args, dtype: _rounding("floor")([f"({args[0]} / {args[1]})"], dtype)),
    "floormod": ("({0} % {1})", _FLOAT_MOD),
    "truncdiv": (_INT_TRUNCDIV,
                 lambda args, dtype: _rounding("trunc")([f"({args[0]} / {args[1]})"], dtype)),
    "truncmod": ("({0} - {1} * " + _INT_TRUNCDIV + ")", "math.fmod({0}, {1})"),
    # NaN-propagating, as np.maximum / np.minimum
    "maximum": ("max({0}, {1})", "({0} if ({0} >= {1} or {0} != {0}) else {1})"),
    "minimum": ("min({0}, {1})", "({0} if ({0} <= {1} or {0} != {0}) else {1})"),
    "abs": "abs({0})",
    "sign": "({c1} if {0} > {c0} else (-{c1} if {0} < {c0} else {0}))",
    "sqrt": "math.sqrt({0})",
    "atan2": "math.atan2({0}, {1})",
    "sigmoid": "(({c1} if {0} >= {c0} else math.exp({0})) / ({c1} + math.exp(-abs({0}))))",
    "softplus": "(max({0}, {c0}) + math.log1p(math.exp(-abs({0}))))",
    "floor": _rounding("floor"),
    "ceil": _rounding("ceil"),
    "rint": _rounding("rint"),
    "isnan": "math.isnan({0})",
    "isinf": "math.isinf({0})",
    "isfinite": "(not (math.isinf({0}) or math.isnan({0})))",
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
