"""Elementwise math (`tf.math` and the math of the top-level `tf.` namespace), one module
per family; each op is one registry entry (shape rule, NumPy reference, gradient, lowering).

- `common.py`     what the others share and other op modules import: the dtype groups, the
                  shape and dtype rules, operand conversion, `binary_op`/`unary_op`,
                  `scalar_like`; `unbroadcast` (Unbroadcast, BroadcastLike),
                  `broadcast_reduced` (BroadcastReduced), `add_n` (AddN), `stop_gradient`;
- `arithmetic.py` Add, Sub, Mul, RealDiv, DivNoNan, FloorDiv, FloorMod, TruncateDiv,
                  TruncateMod, Pow and their functions (`add` ... `truediv`, `div`, `pow`);
- `unary.py`      Neg, Square, Abs ... Atanh, the (y, dy) gradient ops of Sqrt, Rsqrt and
                  Reciprocal, and Atan2, with their functions;
- `compare.py`    Maximum, Minimum, SquaredDifference, the comparisons, the logical ops and
                  the selects (Select, SelectV2, Where), with `clip_by_value`;
- `cumulative.py` Cumsum, Cumprod;
- `casting.py`    Cast and `cast`, `to_float` ..., `saturate_cast`;
- `special.py`    the special functions Igamma, Igammac, Zeta, Erfinv, Ndtri and `xlog1py`;
- `operators.py`  the Python operators on Tensor (`a + b`, `a @ b`, `a & b`, ...).

Binary ops broadcast as NumPy does; their gradients sum back over the broadcast axes through
`unbroadcast`, the one helper all of them share.

Lowering. An elementwise op's `scalar` is what one element of its result is, as a scalar
expression of the kernel IR (jitflow/compiler/ir.py) over its operands `X0`, `X1`, ...: a scalar
op name applied to all operands in order (`"add"`), or a tree built with `S` (`S.mul(S.sub(X0,
X1), S.sub(X0, X1))`; numbers are constants the backends type in the op's dtype). A callable
`scalar(op)` picks the expression from the op (e.g. by dtype). Each backend spells the scalar ops
(jitflow/backends/*/scalar_ops.py); the fuser inlines the expressions into one loop.

The package itself exports nothing: code imports each name from the module that defines it,
and op discovery (jitflow/ops/__init__.py) reads each module's `__all__` and `NAMESPACES`.
"""
