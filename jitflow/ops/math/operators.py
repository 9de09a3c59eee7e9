"""The Python operators on Tensor (`a + b`, `a / b`, `a @ b`, `-a`, `a < b`, `a & b`, ...),
installed on import and named as TF1 names them (`a + b` makes an op `add`).
"""
from __future__ import annotations

from jitflow.core.graph import Tensor, make_op, name_scope
from jitflow.ops.math.arithmetic import _truediv
from jitflow.ops.math.common import binary_op, convert_pair, unary_op
from jitflow.ops.math.compare import logical_xor

__all__: list = []


# -- operator overloads on Tensor -----------------------------------------------------------------
def _matmul(a, b):
    """`a @ b`, named `matmul` as TF1 names it."""
    from jitflow.ops.linalg import matmul
    with name_scope(None, "matmul", [a, b]) as scope:
        a, b = convert_pair(a, b)
        return matmul(a, b, name=scope)


def _logical(op_type: str, scope: str):
    def fn(a, b):
        with name_scope(None, scope, [a, b]) as s:
            a, b = convert_pair(a, b)
            return make_op(op_type, [a, b], name=s).outputs[0]
    return fn


def _install_operators() -> None:
    """Python operators on Tensor, named as TF1 names them (`a + b` -> op `add`)."""
    ops = {
        "__add__": lambda a, b: binary_op("Add", a, b, None, "add"),
        "__radd__": lambda a, b: binary_op("Add", b, a, None, "add"),
        "__sub__": lambda a, b: binary_op("Sub", a, b, None, "sub"),
        "__rsub__": lambda a, b: binary_op("Sub", b, a, None, "sub"),
        "__mul__": lambda a, b: binary_op("Mul", a, b, None, "mul"),
        "__rmul__": lambda a, b: binary_op("Mul", b, a, None, "mul"),
        "__truediv__": lambda a, b: _truediv(a, b),
        "__rtruediv__": lambda a, b: _truediv(b, a),
        "__floordiv__": lambda a, b: binary_op("FloorDiv", a, b, None, "floordiv"),
        "__rfloordiv__": lambda a, b: binary_op("FloorDiv", b, a, None, "floordiv"),
        "__mod__": lambda a, b: binary_op("FloorMod", a, b, None, "mod"),
        "__rmod__": lambda a, b: binary_op("FloorMod", b, a, None, "mod"),
        "__pow__": lambda a, b: binary_op("Pow", a, b, None, "pow"),
        "__rpow__": lambda a, b: binary_op("Pow", b, a, None, "pow"),
        "__matmul__": lambda a, b: _matmul(a, b),
        "__rmatmul__": lambda a, b: _matmul(b, a),
        "__neg__": lambda a: unary_op("Neg", a),
        "__abs__": lambda a: unary_op("Abs", a),
        "__lt__": lambda a, b: binary_op("Less", a, b),
        "__le__": lambda a, b: binary_op("LessEqual", a, b),
        "__gt__": lambda a, b: binary_op("Greater", a, b),
        "__ge__": lambda a, b: binary_op("GreaterEqual", a, b),
        "__and__": _logical("LogicalAnd", "and"),
        "__rand__": lambda a, b: _logical("LogicalAnd", "and")(b, a),
        "__or__": _logical("LogicalOr", "or"),
        "__ror__": lambda a, b: _logical("LogicalOr", "or")(b, a),
        "__xor__": lambda a, b: logical_xor(a, b, name="xor"),
        "__rxor__": lambda a, b: logical_xor(b, a, name="xor"),
        "__invert__": lambda a: unary_op("LogicalNot", a),
    }
    for k, f in ops.items():
        setattr(Tensor, k, f)


_install_operators()
