"""Matrix ops (`tf.linalg` and their TF1 top-level names): diagonals, bands, trace,
inverse, determinants, solves, Cholesky, einsum and the decompositions.

Each is a NumPy reference batched over leading dimensions, with TF's gradient where TF1 has
one that programs rely on (inverse, determinant, log-determinant, solves, Cholesky, einsum of
one or two operands, the diagonal ops). `eigh`, `svd` and `qr` have no gradient here.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from jitflow.core import errors
import builtins
from functools import reduce as _reduce

from jitflow.compiler.ir import X0, Apply, Arg, Index, Load, S, Take
from jitflow.compiler.lower import Pending, Unsupported
from jitflow.core.graph import Tensor, convert_to_tensor, make_op, name_scope
from jitflow.ops.registry import Example, register
from jitflow.core.shapes import TensorShape

__all__ = ["diag", "diag_part", "trace", "matrix_diag", "matrix_diag_part", "matrix_set_diag",
           "matrix_band_part", "matrix_transpose", "matrix_inverse", "matrix_determinant",
           "cholesky", "matrix_solve", "matrix_triangular_solve", "cholesky_solve", "einsum",
           "self_adjoint_eig", "self_adjoint_eigvals", "svd", "qr", "matrix_solve_ls"]

NAMESPACES = {
    "linalg": [("diag", "matrix_diag"), ("diag_part", "matrix_diag_part"), "trace",
               ("set_diag", "matrix_set_diag"), ("band_part", "matrix_band_part"),
               "matrix_transpose", ("transpose", "matrix_transpose"), ("adjoint",
                                                                     "matrix_transpose"),
               ("inv", "matrix_inverse"), ("det", "matrix_determinant"), "slogdet", "logdet",
               "cholesky", ("solve", "matrix_solve"),
               ("triangular_solve", "matrix_triangular_solve"), "cholesky_solve", "einsum",
               ("eigh", "self_adjoint_eig"), ("eigvalsh", "self_adjoint_eigvals"), "svd", "qr",
               ("lstsq", "matrix_solve_ls"), "matvec", "global_norm", "l2_normalize",
               ("tensor_diag", "diag"), ("tensor_diag_part", "diag_part"), "pinv"],
    "math": ["trace"],
}

def _square_infer(op, out_shape=None):
    x = op.inputs[0]
    d = x.shape.as_tuple()
    if d is not None:
        if len(d) < 2:
            raise ValueError(f"Shape must be at least rank 2 but is rank {len(d)} for "
                             f"'{op.name}' (op: '{op.type}')")
        if d[-1] is not None and d[-2] is not None and d[-1] != d[-2]:
            raise ValueError(f"Dimensions must be equal, but are {d[-2]} and {d[-1]} for "
                             f"'{op.name}' (op: '{op.type}') with input shape {x.shape}")
    return [(x.dtype, x.shape if out_shape is None else out_shape(d))]


def _batch_shape(d):
    return TensorShape(None) if d is None else TensorShape(d[:-2])


def _mt(x: Tensor) -> Tensor:
    return matrix_transpose(x)


# -- diagonals -------------------------------------------------------------------------------------
def _matrix_diag_infer(op):
    d = op.inputs[0].shape.as_tuple()
    return [(op.inputs[0].dtype, TensorShape(None) if d is None else TensorShape(d + d[-1:]))]


def _matrix_diag_ref(op, x):
    x = np.asarray(x)
    out = np.zeros(x.shape + x.shape[-1:], dtype=x.dtype)
    i = np.arange(x.shape[-1])
    out[..., i, i] = x
    return out


def _diag_part_infer(op):
    d = op.inputs[0].shape.as_tuple()
    if d is None:
        return [(op.inputs[0].dtype, TensorShape(None))]
    k = None if d[-1] is None or d[-2] is None else min(d[-1], d[-2])
    return [(op.inputs[0].dtype, TensorShape(d[:-2] + (k,)))]


# -- lowering into the kernel IR ------------------------------------------------------------------
_NUMERIC = ("float32", "float64", "int32", "int64")


def _numeric_ranked(op, least: int) -> bool:
    x = op.inputs[0]
    return x.dtype.name in _NUMERIC and x.shape.ndims is not None and x.shape.ndims >= least


def _lower_on_diagonal(low, op, pos: int) -> None:
    """Diag (rank k -> 2k) and MatrixDiag (the last axis -> the last two): the input where the
    paired output indices are equal, else 0; an expression inlined into the consumer."""
    out = op.outputs[0]
    x = low.expr(op.inputs[0])
    r = len(x.ones)
    if r == 0:
        raise Unsupported("diagonal of a scalar")
    if op.type == "Diag":
        ones, dims, axes = x.ones + x.ones, x.dims + x.dims, tuple(builtins.range(r))
        pairs = [(k, r + k) for k in builtins.range(r)]
    else:
        ones, dims = x.ones + x.ones[-1:], x.dims + x.dims[-1:]
        axes = tuple(builtins.range(r))
        pairs = [(r - 1, r)]
    if low.is_fed(out):
        return
    if x.ones == (True,) * r and op.type == "Diag" or op.type == "MatrixDiag" and x.ones[-1]:
        expr = x.expr   # one element per diagonal: the input itself
    else:
        src = low.stored(op.inputs[0], pos)
        idx = sorted({a for p in pairs for a in p})
        args = [Load(src, axes)] + [Index(a) for a in idx]
        at = {a: Arg(1 + n) for n, a in enumerate(idx)}
        cond = _reduce(S.and_, [S.eq(at[a], at[b]) for a, b in pairs])
        expr = Apply(S.select(cond, X0, 0), args, x.dtype, pos)
        return low.place(out, Pending(expr, x.dtype, ones, dims, low.reads_of(src), pos), pos)
    low.place(out, Pending(expr, x.dtype, ones, dims, x.reads, pos), pos)


def _lower_diag_part(low, op, pos: int) -> None:
    """MatrixDiagPart: the input read at (batch..., i, i) for i below the smaller of the last
    two sizes (`ir.Take`), inlined into the consumer."""
    out = op.outputs[0]
    src = low.stored(op.inputs[0], pos)
    r = src.rank
    if r < 2:
        low.fail(pos, "input must be at least 2-dim")
        raise Unsupported("diagonal part of a vector")
    if low.is_fed(out):
        return
    m, n = src.ones[-2:], src.dims[-2:]
    if m[0] or m[1]:
        one, d = True, 1     # a unit dim of the class: min(1, size) is 1 unless size is 0
        if not (m[0] and m[1]):
            one, d = False, ("min", ("const", 1), n[1] if m[0] else n[0])
    else:
        one, d = False, ("min", n[0], n[1])
    ones, dims = low.refine(out, src.ones[:-2] + (one,), src.dims[:-2] + (d,))
    items = tuple(("fixed", ("const", 0)) if o else ("lin", ("const", 0), 1, k)
                  for k, o in enumerate(src.ones[:-2]))
    items += tuple(("fixed", ("const", 0)) if o else ("lin", ("const", 0), 1, r - 2)
                   for o in m)
    low.place(out, Pending(Take(src, items), src.dtype, ones, dims, low.reads_of(src), pos),
              pos)


register("MatrixDiag", infer=_matrix_diag_infer, ref=_matrix_diag_ref,
         lower=_lower_on_diagonal, lowerable=lambda op: _numeric_ranked(op, 1), inline=(0,),
         grad=lambda op, g: [matrix_diag_part(g)], kind="other",
         doc="Batched square matrices with the input's last axis on the diagonal.",
         examples=[Example(lambda x: matrix_diag(x), [(2, 3)], lambda x: np.stack(
             [np.diag(r) for r in x]))])
register("MatrixDiagPart", infer=_diag_part_infer, lower=_lower_diag_part,
         lowerable=lambda op: _numeric_ranked(op, 2),
         ref=lambda op, x: np.diagonal(np.asarray(x), axis1=-2, axis2=-1).copy(),
         grad=lambda op, g: [matrix_set_diag(_zeros_like(op.inputs[0]), g)], kind="other",
         doc="The main diagonals of batched matrices.",
         examples=[Example(lambda x: matrix_diag_part(x), [(2, 3, 3)],
                           lambda x: np.stack([np.diag(m) for m in x]))])


def _zeros_like(t):
    from jitflow.ops.sources import zeros_like
    return zeros_like(t)


def _set_diag_ref(op, x, d):
    out = np.array(x, copy=True)
    k = min(out.shape[-1], out.shape[-2])
    i = np.arange(k)
    out[..., i, i] = d
    return out


register("MatrixSetDiag",
         infer=lambda op: [(op.inputs[0].dtype, op.inputs[0].shape)], ref=_set_diag_ref,
         grad=lambda op, g: [matrix_set_diag(g, _zeros_like(matrix_diag_part(g))),
                             matrix_diag_part(g)], kind="other",
         doc="Inputs (matrices, diagonals): the matrices with their diagonals replaced.",
         examples=[Example(lambda x, d: matrix_set_diag(x, d), [(2, 3, 3), (2, 3)],
                           lambda x, d: _np_set_diag(x, d))])


def _np_set_diag(x, d):
    out = x.copy()
    for b in range(x.shape[0]):
        np.fill_diagonal(out[b], d[b])
    return out


def _band_ref(op, x):
    x = np.asarray(x)
    lo, hi = op.attrs["num_lower"], op.attrs["num_upper"]
    m, n = x.shape[-2:]
    i, j = np.arange(m)[:, None], np.arange(n)[None, :]
    keep = ((lo < 0) | (i - j <= lo)) & ((hi < 0) | (j - i <= hi))
    return np.where(keep, x, np.zeros((), x.dtype))


register("MatrixBandPart", infer=lambda op: [(op.inputs[0].dtype, op.inputs[0].shape)],
         ref=_band_ref,
         grad=lambda op, g: [matrix_band_part(g, op.attrs["num_lower"], op.attrs["num_upper"])],
         kind="other", doc="Zero everything outside the band (num_lower/num_upper: -1 for all).",
         examples=[Example(lambda x: matrix_band_part(x, 1, 0), [(2, 3, 4)],
                           lambda x: np.tril(np.triu(x, -1)))])


def _diag_infer(op):
    d = op.inputs[0].shape.as_tuple()
    return [(op.inputs[0].dtype, TensorShape(None) if d is None else TensorShape(d + d))]


def _diag_ref(op, x):
    x = np.asarray(x)
    return np.diag(x.reshape(-1)).reshape(x.shape + x.shape)


def _diag_part_ref(op, x):
    x = np.asarray(x)
    k = x.ndim // 2
    n = int(np.prod(x.shape[:k]))
    return np.diagonal(x.reshape(n, n)).reshape(x.shape[:k]).copy()


register("Diag", infer=_diag_infer, ref=_diag_ref, lower=_lower_on_diagonal,
         lowerable=lambda op: _numeric_ranked(op, 1), inline=(0,),
         grad=lambda op, g: [diag_part(g)], kind="other",
         doc="A tensor of rank 2k with the rank-k input on its diagonal.",
         examples=[Example(lambda x: diag(x), [(3,)], lambda x: np.diag(x))])
register("DiagPart", infer=lambda op: [(op.inputs[0].dtype, TensorShape(
    None if op.inputs[0].shape.ndims is None
    else op.inputs[0].shape.as_tuple()[:op.inputs[0].shape.ndims // 2]))],
    ref=_diag_part_ref, grad=lambda op, g: [diag(g)], kind="other",
    doc="The inverse of Diag.",
    examples=[Example(lambda x: diag_part(x), [(3, 3)], lambda x: np.diag(x))])


def _unary(op_type: str, x, name, default: str, attrs=None) -> Tensor:
    with name_scope(name, default, [x]) as scope:
        t = convert_to_tensor(x, name="input")
        return make_op(op_type, [t], attrs or {}, name=scope[:-1]).outputs[0]


def matrix_diag(diagonal, name: Optional[str] = None, **kwargs) -> Tensor:
    """`tf.matrix_diag` / `tf.linalg.diag`: matrices with `diagonal` on their diagonal."""
    return _unary("MatrixDiag", diagonal, name, "MatrixDiag")


def matrix_diag_part(input, name: Optional[str] = None, **kwargs) -> Tensor:  # noqa: A002
    """`tf.matrix_diag_part` / `tf.linalg.diag_part`."""
    return _unary("MatrixDiagPart", input, name, "MatrixDiagPart")


def matrix_set_diag(input, diagonal, name: Optional[str] = None, **kwargs) -> Tensor:  # noqa: A002
    """`tf.matrix_set_diag` / `tf.linalg.set_diag`."""
    with name_scope(name, "MatrixSetDiag", [input, diagonal]) as scope:
        x = convert_to_tensor(input, name="input")
        d = convert_to_tensor(diagonal, dtype=None if isinstance(diagonal, Tensor) else x.dtype)
        return make_op("MatrixSetDiag", [x, d], name=scope[:-1]).outputs[0]


def matrix_band_part(input, num_lower, num_upper, name: Optional[str] = None) -> Tensor:  # noqa: A002
    """`tf.matrix_band_part` / `tf.linalg.band_part`."""
    return _unary("MatrixBandPart", input, name, "MatrixBandPart",
                  {"num_lower": int(num_lower), "num_upper": int(num_upper)})


def diag(diagonal, name: Optional[str] = None) -> Tensor:
    """`tf.diag`: a rank-2k tensor with `diagonal` (rank k) on its diagonal."""
    return _unary("Diag", diagonal, name, "Diag")


def diag_part(input, name: Optional[str] = None) -> Tensor:  # noqa: A002
    """`tf.diag_part`: the inverse of `tf.diag`."""
    return _unary("DiagPart", input, name, "DiagPart")


def trace(x, name: Optional[str] = None) -> Tensor:
    """`tf.trace`: the sum of the main diagonal of (batched) matrices."""
    from jitflow.ops.reduce import reduce_sum
    with name_scope(name, "Trace", [x]):
        return reduce_sum(matrix_diag_part(x), axis=-1)


def matrix_transpose(a, name: str = "matrix_transpose", conjugate: bool = False) -> Tensor:
    """`tf.matrix_transpose` / `tf.linalg.matrix_transpose`: swap the last two axes."""
    from jitflow.ops.shape_ops import transpose
    with name_scope(name, "matrix_transpose", [a]):
        x = convert_to_tensor(a, name="a")
        r = x.shape.ndims
        if r is None or r < 2:
            raise ValueError(f"Argument 'a' should be a (batch) matrix, with rank >= 2. Found: "
                             f"{x.shape}")
        return transpose(x, list(range(r - 2)) + [r - 1, r - 2])


# -- inverse, determinants -------------------------------------------------------------------------
def _lin_error(op, e):
    return errors.InvalidArgumentError(None, op, f"{e}: Input is not invertible.\n\t [[node "
                                                 f"{op.name} ({op.type})]]")


def _inv_ref(op, x):
    try:
        out = np.linalg.inv(np.asarray(x))
    except np.linalg.LinAlgError as e:
        raise _lin_error(op, e) from None
    return _mt_np(out) if op.attrs.get("adjoint") else out


def _mt_np(x):
    return np.swapaxes(x, -1, -2)


def _inv_grad(op, g):
    from jitflow.ops.linalg import matmul
    y = op.outputs[0]
    return [-matmul(matmul(y, g, transpose_a=True), y, transpose_b=True)]


register("MatrixInverse", infer=_square_infer, ref=_inv_ref, grad=_inv_grad, kind="other",
         doc="The inverses of (batched) square matrices.",
         examples=[Example(lambda x: matrix_inverse(x + 3.0 * np.eye(3)), [(2, 3, 3)],
                           lambda x: np.linalg.inv(x + 3 * np.eye(3)), domain="unit")])


def _det_grad(op, g):
    from jitflow.ops.shape_ops import expand_dims
    x, y = op.inputs[0], op.outputs[0]
    return [expand_dims(expand_dims(g * y, -1), -1) * _mt(matrix_inverse(x))]


register("MatrixDeterminant", infer=lambda op: _square_infer(op, _batch_shape),
         ref=lambda op, x: np.linalg.det(np.asarray(x)).astype(op.inputs[0].dtype
                                                               .as_numpy_dtype),
         grad=_det_grad, kind="other", doc="Determinants of (batched) square matrices.",
         examples=[Example(lambda x: matrix_determinant(x + 2.0 * np.eye(3)), [(2, 3, 3)],
                           lambda x: np.linalg.det(x + 2 * np.eye(3)), domain="unit")])


def _slogdet_ref(op, x):
    s, ld = np.linalg.slogdet(np.asarray(x))
    dt = op.inputs[0].dtype.as_numpy_dtype
    return s.astype(dt), ld.astype(dt)


def _slogdet_grad(op, g_sign, g_logdet):
    from jitflow.ops.shape_ops import expand_dims
    if g_logdet is None:
        return [None]
    return [expand_dims(expand_dims(g_logdet, -1), -1) * _mt(matrix_inverse(op.inputs[0]))]


register("LogMatrixDeterminant",
         infer=lambda op: _square_infer(op, _batch_shape) * 2, ref=_slogdet_ref,
         grad=_slogdet_grad, kind="other",
         doc="(sign, log |det|) of (batched) square matrices.",
         examples=[Example(lambda x: slogdet(x + 2.0 * np.eye(3))[1], [(2, 3, 3)],
                           lambda x: np.linalg.slogdet(x + 2 * np.eye(3))[1], domain="unit")])


def matrix_inverse(input, adjoint: bool = False, name: Optional[str] = None) -> Tensor:  # noqa: A002
    """`tf.matrix_inverse` / `tf.linalg.inv`."""
    x = _unary("MatrixInverse", input, name, "MatrixInverse")
    return matrix_transpose(x) if adjoint else x


def matrix_determinant(input, name: Optional[str] = None) -> Tensor:  # noqa: A002
    """`tf.matrix_determinant` / `tf.linalg.det`."""
    return _unary("MatrixDeterminant", input, name, "MatrixDeterminant")


def slogdet(input, name: Optional[str] = None) -> tuple:  # noqa: A002
    """`tf.linalg.slogdet`: (sign, log |det|)."""
    with name_scope(name, "LogMatrixDeterminant", [input]) as scope:
        x = convert_to_tensor(input, name="input")
        op = make_op("LogMatrixDeterminant", [x], name=scope[:-1])
        return op.outputs[0], op.outputs[1]


def logdet(matrix, name: Optional[str] = None) -> Tensor:
    """`tf.linalg.logdet`: log det of Hermitian positive definite matrices (via Cholesky)."""
    from jitflow.ops.math.unary import log
    from jitflow.ops.reduce import reduce_sum
    with name_scope(name, "logdet", [matrix]):
        chol = cholesky(matrix)
        return 2.0 * reduce_sum(log(matrix_diag_part(chol)), axis=-1)


# -- solves and Cholesky ---------------------------------------------------------------------------
def _solve_infer(op):
    a, b = op.inputs
    if a.dtype != b.dtype:
        raise TypeError(f"matrix and rhs of '{op.name}' must have the same dtype")
    return [(b.dtype, b.shape)]


def _solve_ref(op, a, b):
    a = np.asarray(a)
    if op.attrs.get("adjoint"):
        a = _mt_np(a)
    try:
        return np.linalg.solve(a, np.asarray(b))
    except np.linalg.LinAlgError as e:
        raise _lin_error(op, e) from None


def _solve_grad(op, g):
    from jitflow.ops.linalg import matmul
    a, _ = op.inputs
    x = op.outputs[0]
    adj = op.attrs.get("adjoint", False)
    gb = matrix_solve(a, g, adjoint=not adj)
    ga = -matmul(gb, x, transpose_b=True)
    return [_mt(ga) if adj else ga, gb]


register("MatrixSolve", infer=_solve_infer, ref=_solve_ref, grad=_solve_grad, kind="other",
         doc="Inputs (matrix, rhs): x with matrix @ x = rhs (attr adjoint: the transpose).",
         examples=[Example(lambda a, b: matrix_solve(a + 3.0 * np.eye(3), b),
                           [(3, 3), (3, 2)], lambda a, b: np.linalg.solve(a + 3 * np.eye(3), b),
                           domain="unit")])


def _tri_ref(op, a, b):
    import scipy.linalg
    a, b = np.asarray(a), np.asarray(b)
    lower, adj = op.attrs["lower"], op.attrs["adjoint"]
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = np.broadcast_to(a, batch + a.shape[-2:])
    b = np.broadcast_to(b, batch + b.shape[-2:])
    out = np.empty(b.shape, dtype=np.result_type(a, b))
    for idx in np.ndindex(*batch):
        out[idx] = scipy.linalg.solve_triangular(a[idx], b[idx], lower=lower,
                                                 trans=1 if adj else 0)
    return out


def _tri_grad(op, g):
    from jitflow.ops.linalg import matmul
    a = op.inputs[0]
    x = op.outputs[0]
    lower, adj = op.attrs["lower"], op.attrs["adjoint"]
    gb = matrix_triangular_solve(a, g, lower=lower, adjoint=not adj)
    ga = -matmul(x, gb, transpose_b=True) if adj else -matmul(gb, x, transpose_b=True)
    ga = matrix_band_part(ga, -1, 0) if lower else matrix_band_part(ga, 0, -1)
    return [ga, gb]


register("MatrixTriangularSolve", infer=_solve_infer, ref=_tri_ref, grad=_tri_grad,
         kind="other", doc="Solve with a lower (or upper) triangular matrix.",
         examples=[Example(lambda a, b: matrix_triangular_solve(
             matrix_band_part(a, -1, 0) + 3.0 * np.eye(3), b), [(3, 3), (3, 2)],
             lambda a, b: np.linalg.solve(np.tril(a) + 3 * np.eye(3), b), domain="unit")])


def _chol_ref(op, x):
    try:
        return np.linalg.cholesky(np.asarray(x))
    except np.linalg.LinAlgError:
        raise errors.InvalidArgumentError(
            None, op, f"Cholesky decomposition was not successful. The input might not be "
                      f"valid.\n\t [[node {op.name} (Cholesky)]]") from None


def _chol_grad(op, g):
    return [make_op("CholeskyGrad", [op.outputs[0], g], name="CholeskyGrad").outputs[0]]


def _chol_grad_ref(op, l_, g):
    """TF's Cholesky gradient (Murray 2016): Phi(L^T G) solved on both sides, symmetrized."""
    import scipy.linalg
    l_, g = np.asarray(l_), np.asarray(g)
    out = np.empty(np.broadcast_shapes(l_.shape, g.shape), dtype=l_.dtype)
    for idx in np.ndindex(*out.shape[:-2]):
        L, G = l_[idx], g[idx]
        P = L.T @ G
        P = np.tril(P) - 0.5 * np.diag(np.diag(P))
        S = scipy.linalg.solve_triangular(L, scipy.linalg.solve_triangular(L, P.T, lower=True,
                                                                             trans=1).T,
                                          lower=True, trans=1)
        out[idx] = 0.5 * (S + S.T)
    return out


register("Cholesky", infer=_square_infer, ref=_chol_ref, grad=_chol_grad, kind="other",
         doc="Lower Cholesky factors of (batched) symmetric positive definite matrices.",
         examples=[Example(lambda x: cholesky(_spd(x)), [(3, 3)],
                           lambda x: np.linalg.cholesky(x @ x.T + 3 * np.eye(3)),
                           domain="unit")])
register("CholeskyGrad", infer=lambda op: [(op.inputs[0].dtype, op.inputs[0].shape)],
         ref=_chol_grad_ref, differentiable=False, kind="other",
         doc="Inputs (L, gradient of L): the gradient of Cholesky.")


def _spd(x):
    from jitflow.ops.linalg import matmul
    return matmul(x, x, transpose_b=True) + 3.0 * np.eye(3)


def cholesky(input, name: Optional[str] = None) -> Tensor:  # noqa: A002
    """`tf.cholesky` / `tf.linalg.cholesky`."""
    return _unary("Cholesky", input, name, "Cholesky")


def matrix_solve(matrix, rhs, adjoint: bool = False, name: Optional[str] = None) -> Tensor:
    """`tf.matrix_solve` / `tf.linalg.solve`: x with matrix @ x = rhs."""
    with name_scope(name, "MatrixSolve", [matrix, rhs]) as scope:
        a = convert_to_tensor(matrix, name="matrix")
        b = convert_to_tensor(rhs, dtype=None if isinstance(rhs, Tensor) else a.dtype)
        return make_op("MatrixSolve", [a, b], {"adjoint": bool(adjoint)},
                       name=scope[:-1]).outputs[0]


def matrix_triangular_solve(matrix, rhs, lower: bool = True, adjoint: bool = False,
                            name: Optional[str] = None) -> Tensor:
    """`tf.matrix_triangular_solve` / `tf.linalg.triangular_solve`."""
    with name_scope(name, "MatrixTriangularSolve", [matrix, rhs]) as scope:
        a = convert_to_tensor(matrix, name="matrix")
        b = convert_to_tensor(rhs, dtype=None if isinstance(rhs, Tensor) else a.dtype)
        return make_op("MatrixTriangularSolve", [a, b],
                       {"lower": bool(lower), "adjoint": bool(adjoint)},
                       name=scope[:-1]).outputs[0]


def cholesky_solve(chol, rhs, name: Optional[str] = None) -> Tensor:
    """`tf.cholesky_solve` / `tf.linalg.cholesky_solve`: x with (L L^T) x = rhs."""
    with name_scope(name, "cholesky_solve", [chol, rhs]):
        y = matrix_triangular_solve(chol, rhs, lower=True, adjoint=False)
        return matrix_triangular_solve(chol, y, lower=True, adjoint=True)


def matrix_solve_ls(matrix, rhs, l2_regularizer=0.0, fast: bool = True,
                    name: Optional[str] = None) -> Tensor:
    """`tf.matrix_solve_ls` / `tf.linalg.lstsq`: least squares through the regularized normal
    equations, (A^T A + l2 I) x = A^T b."""
    from jitflow.ops.linalg import matmul
    with name_scope(name, "matrix_solve_ls", [matrix, rhs]):
        a = convert_to_tensor(matrix, name="matrix")
        n = a.shape.as_tuple()[-1]
        if n is None:
            raise NotImplementedError("matrix_solve_ls needs a static number of columns")
        gram = matmul(a, a, transpose_a=True) + float(l2_regularizer) * np.eye(
            n, dtype=a.dtype.as_numpy_dtype)
        return matrix_solve(gram, matmul(a, rhs, transpose_a=True))


# -- einsum ---------------------------------------------------------------------------------------
def _parse_einsum(eq: str, n: int) -> tuple:
    eq = eq.replace(" ", "")
    if "..." in eq:
        raise NotImplementedError("einsum: ellipses are not supported")
    if "->" in eq:
        lhs, out = eq.split("->")
    else:
        lhs = eq
        counts = {c: lhs.count(c) for c in set(lhs) if c.isalpha()}
        out = "".join(sorted(c for c, k in counts.items() if k == 1))
    ins = lhs.split(",")
    if len(ins) != n:
        raise ValueError(f"einsum: equation {eq!r} names {len(ins)} operands, got {n}")
    return ins, out


def _einsum_infer(op):
    ins, out = _parse_einsum(op.attrs["equation"], len(op.inputs))
    sizes: dict = {}
    for spec, t in zip(ins, op.inputs):
        d = t.shape.as_tuple()
        if d is None:
            continue
        if len(d) != len(spec):
            raise ValueError(f"einsum: operand {t.name} has rank {len(d)}, the equation "
                             f"{op.attrs['equation']!r} says {len(spec)}")
        for c, v in zip(spec, d):
            if v is not None:
                if sizes.get(c) not in (None, v):
                    raise ValueError(f"einsum: dimension {c!r} is {sizes[c]} and {v}")
                sizes[c] = v
    dt = op.inputs[0].dtype
    return [(dt, TensorShape([sizes.get(c) for c in out]))]


def _einsum_ref(op, *xs):
    return np.einsum(op.attrs["equation"].replace(" ", ""), *[np.asarray(x) for x in xs])


def _einsum_grad(op, g):
    from jitflow.ops.shape_ops import expand_dims, shape
    from jitflow.ops.tile_pad import broadcast_to
    ins, out = _parse_einsum(op.attrs["equation"], len(op.inputs))
    grads = []
    for i, spec in enumerate(ins):
        if len(set(spec)) != len(spec):
            raise NotImplementedError("einsum gradient: repeated indices in one operand")
        others = [(s, t) for j, (s, t) in enumerate(zip(ins, op.inputs)) if j != i]
        avail = set(out) | {c for s, _ in others for c in s}
        kept = "".join(c for c in spec if c in avail)
        eq = ",".join([out] + [s for s, _ in others]) + "->" + kept
        part = einsum(eq, g, *[t for _, t in others])
        if kept != spec:  # indices summed within this operand alone: broadcast back
            for pos, c in enumerate(spec):
                if c not in kept:
                    part = expand_dims(part, pos)
            part = broadcast_to(part, shape(op.inputs[i]))
        grads.append(part)
    return grads


register("Einsum", infer=_einsum_infer, ref=_einsum_ref, grad=_einsum_grad, kind="other",
         doc="A contraction given by attr `equation` (no ellipses).",
         examples=[Example(lambda a, b: einsum("ij,jk->ik", a, b), [(2, 3), (3, 4)],
                           lambda a, b: a @ b, id="matmul"),
                   Example(lambda a, b: einsum("bij,bj->bi", a, b), [(2, 3, 4), (2, 4)],
                           lambda a, b: np.einsum("bij,bj->bi", a, b), id="batch"),
                   Example(lambda a: einsum("ij->j", a), [(3, 4)], lambda a: a.sum(0),
                           id="sum")])


def einsum(equation: str, *inputs, **kwargs) -> Tensor:
    """`tf.einsum`: the contraction `equation` ("ij,jk->ik") of the inputs."""
    name = kwargs.pop("name", None)
    with name_scope(name, "einsum", list(inputs)) as scope:
        ts = [convert_to_tensor(x) for x in inputs]
        _parse_einsum(equation, len(ts))
        return make_op("Einsum", ts, {"equation": equation}, name=scope[:-1]).outputs[0]


# -- decompositions (no gradients) ----------------------------------------------------------------
def _eigh_ref(op, x):
    w, v = np.linalg.eigh(np.asarray(x))
    return (w, v) if op.attrs["compute_v"] else (w,)


def _eigh_infer(op):
    x = op.inputs[0]
    d = x.shape.as_tuple()
    vals = TensorShape(None) if d is None else TensorShape(d[:-1])
    out = [(x.dtype, vals)]
    if op.attrs["compute_v"]:
        out.append((x.dtype, x.shape))
    return out


register("SelfAdjointEigV2", infer=_eigh_infer, ref=_eigh_ref, differentiable=False,
         kind="other", doc="Eigenvalues (ascending) and eigenvectors of symmetric matrices "
                            "(eigenvector signs are LAPACK's, not always TF's).")


def self_adjoint_eig(tensor, name: Optional[str] = None) -> tuple:
    """`tf.self_adjoint_eig` / `tf.linalg.eigh`: (eigenvalues in ascending order, eigenvectors
    as the columns of the second result).

    Each eigenvector is defined only up to its sign (and, for a repeated eigenvalue, up to a
    rotation within its eigenspace). jitflow computes them with LAPACK (NumPy's `eigh`); TF's
    CPU kernel uses Eigen's tridiagonal QR solver, whose signs follow from its rotations and no
    sign rule reproduces (checked on 880 eigenvectors of random symmetric matrices of sizes
    2-8: "first/last/largest component positive" and "positive sum" each agree with TF only
    about half the time). So the columns can differ from TF's by a factor -1: use results that
    do not depend on the sign (reconstructions, projections `v v^T`, eigenvalues).
    """
    op = make_op("SelfAdjointEigV2", [convert_to_tensor(tensor)], {"compute_v": True},
                 name=name or "SelfAdjointEigV2")
    return op.outputs[0], op.outputs[1]


def self_adjoint_eigvals(tensor, name: Optional[str] = None) -> Tensor:
    """`tf.self_adjoint_eigvals` / `tf.linalg.eigvalsh`."""
    return make_op("SelfAdjointEigV2", [convert_to_tensor(tensor)], {"compute_v": False},
                   name=name or "SelfAdjointEigV2").outputs[0]


def _svd_ref(op, x):
    full, uv = op.attrs["full_matrices"], op.attrs["compute_uv"]
    if not uv:
        return (np.linalg.svd(np.asarray(x), compute_uv=False),)
    u, s, vh = np.linalg.svd(np.asarray(x), full_matrices=full)
    return s, u, _mt_np(vh)


def _svd_infer(op):
    x = op.inputs[0]
    d = x.shape.as_tuple()
    if d is None:
        return [(x.dtype, TensorShape(None))] * (3 if op.attrs["compute_uv"] else 1)
    m, n = d[-2:]
    k = None if m is None or n is None else min(m, n)
    out = [(x.dtype, TensorShape(d[:-2] + (k,)))]
    if op.attrs["compute_uv"]:
        full = op.attrs["full_matrices"]
        out.append((x.dtype, TensorShape(d[:-2] + (m, m if full else k))))
        out.append((x.dtype, TensorShape(d[:-2] + (n, n if full else k))))
    return out


register("Svd", infer=_svd_infer, ref=_svd_ref, differentiable=False, kind="other",
         doc="Singular values (descending) and, with compute_uv, u and v (x = u diag(s) v^T).")


def svd(tensor, full_matrices: bool = False, compute_uv: bool = True,
        name: Optional[str] = None):
    """`tf.svd` / `tf.linalg.svd`: s, or (s, u, v) with compute_uv."""
    op = make_op("Svd", [convert_to_tensor(tensor)],
                 {"full_matrices": bool(full_matrices), "compute_uv": bool(compute_uv)},
                 name=name or "Svd")
    return tuple(op.outputs) if compute_uv else op.outputs[0]


def _qr_infer(op):
    x = op.inputs[0]
    d = x.shape.as_tuple()
    if d is None:
        return [(x.dtype, TensorShape(None))] * 2
    m, n = d[-2:]
    k = m if op.attrs["full_matrices"] else (None if m is None or n is None else min(m, n))
    return [(x.dtype, TensorShape(d[:-2] + (m, k))), (x.dtype, TensorShape(d[:-2] + (k, n)))]


register("Qr", infer=_qr_infer,
         ref=lambda op, x: np.linalg.qr(np.asarray(x), mode="complete"
                                        if op.attrs["full_matrices"] else "reduced"),
         differentiable=False, kind="other", doc="(q, r) with x = q r.")


def qr(input, full_matrices: bool = False, name: Optional[str] = None) -> tuple:  # noqa: A002
    """`tf.qr` / `tf.linalg.qr`: (q, r)."""
    op = make_op("Qr", [convert_to_tensor(input)], {"full_matrices": bool(full_matrices)},
                 name=name or "Qr")
    return op.outputs[0], op.outputs[1]


def pinv(a, rcond=None, validate_args: bool = False, name: Optional[str] = None) -> Tensor:
    """`tf.linalg.pinv` (no gradient: through the SVD)."""
    return make_op("Pinv", [convert_to_tensor(a)], {"rcond": rcond},
                   name=name or "pinv").outputs[0]


register("Pinv", infer=lambda op: [(op.inputs[0].dtype, TensorShape(
    None if op.inputs[0].shape.ndims is None else
    op.inputs[0].shape.as_tuple()[:-2] + op.inputs[0].shape.as_tuple()[-2:][::-1]))],
    ref=lambda op, a: np.linalg.pinv(np.asarray(a), **({} if op.attrs["rcond"] is None
                                                        else {"rcond": op.attrs["rcond"]})),
    differentiable=False, kind="other", doc="The Moore-Penrose pseudo-inverse.")


# -- small compositions ---------------------------------------------------------------------------
def matvec(a, b, transpose_a: bool = False, adjoint_a: bool = False,
           name: Optional[str] = None) -> Tensor:
    """`tf.linalg.matvec`: a @ b for a vector b (batched)."""
    from jitflow.ops.shape_ops import expand_dims, squeeze
    from jitflow.ops.linalg import matmul
    with name_scope(name, "MatVec", [a, b]):
        return squeeze(matmul(a, expand_dims(b, -1), transpose_a=transpose_a or adjoint_a),
                       [-1])


def global_norm(t_list, name: Optional[str] = None) -> Tensor:
    """`tf.linalg.global_norm` (= `tf.global_norm`)."""
    from jitflow.ops.linalg import global_norm as gn
    return gn(t_list, name=name)


def l2_normalize(x, axis=None, epsilon: float = 1e-12, name: Optional[str] = None,
                 dim=None) -> Tensor:
    """`tf.linalg.l2_normalize` (= `tf.nn.l2_normalize`)."""
    from jitflow.ops.nn.basic import l2_normalize as l2n
    return l2n(x, axis=axis, epsilon=epsilon, name=name, dim=dim)

