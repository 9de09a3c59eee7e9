"""Linear algebra: MatMul (rank 2), BatchMatMulV2 (rank > 2, batch dims broadcast), tensordot
and the euclidean norm. Integer matmul is supported by the references (NumPy's integer matmul).
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from jitflow.compiler.ir import X0, X1, Apply, Check, Load, MatMul, Reduce, S
from jitflow.compiler.lower import Unsupported
from jitflow.core.graph import Tensor, convert_to_tensor, make_op, name_scope
from jitflow.ops.framework import IndexedSlices
from jitflow.ops.math.unary import abs as _abs, sqrt
from jitflow.ops.math.arithmetic import pow as _pow, multiply
from jitflow.ops.math.common import add_n, check_dtype, scalar_like, unbroadcast
from jitflow.ops.math.compare import greater, maximum, minimum, where_v2
from jitflow.ops.reduce import _legacy, reduce_max, reduce_sum
from jitflow.ops.registry import Example, register
from jitflow.core.shapes import TensorShape, broadcast_static, shape_tf_str

__all__ = ["matmul", "tensordot", "norm", "clip_by_norm", "clip_by_global_norm", "global_norm",
           "clip_by_average_norm", "cross"]

NAMESPACES = {"linalg": ["matmul", "tensordot", "norm", "cross"]}

_MATMUL_TYPES = ("float16", "float32", "float64", "int32", "int64")


def _inner_dims(op, a_dims, b_dims, ta: bool, tb: bool):
    """(m, k_a, k_b, n) of the trailing matrices, checking k_a == k_b when both are known."""
    m, ka = (a_dims[-1], a_dims[-2]) if ta else (a_dims[-2], a_dims[-1])
    kb, n = (b_dims[-1], b_dims[-2]) if tb else (b_dims[-2], b_dims[-1])
    if ka is not None and kb is not None and ka != kb:
        a, b = op.inputs
        raise ValueError(f"Dimensions must be equal, but are {ka} and {kb} for '{op.name}' "
                         f"(op: '{op.type}') with input shapes: {shape_tf_str(a.shape)}, "
                         f"{shape_tf_str(b.shape)}.")
    return m, n


def _check_inputs(op, min_rank: int, exact: bool):
    a, b = op.inputs
    if a.dtype != b.dtype:
        raise TypeError(f"Input 'b' of '{op.type}' Op has type {b.dtype.name} that does not "
                        f"match type {a.dtype.name} of argument 'a'.")
    check_dtype(op, a, _MATMUL_TYPES, "a")
    for t in (a, b):
        r = t.shape.ndims
        if r is not None and (r != min_rank if exact else r < min_rank):
            raise ValueError(f"Shape must be rank {min_rank} but is rank {r} for '{op.name}' "
                             f"(op: '{op.type}') with input shapes: {shape_tf_str(a.shape)}, "
                             f"{shape_tf_str(b.shape)}.")
    return a, b


def _matmul_infer(op):
    a, b = _check_inputs(op, 2, True)
    ad = a.shape.as_tuple() or (None, None)
    bd = b.shape.as_tuple() or (None, None)
    m, n = _inner_dims(op, ad, bd, op.attrs["transpose_a"], op.attrs["transpose_b"])
    return [(a.dtype, TensorShape([m, n]))]


def _batch_infer(op):
    a, b = _check_inputs(op, 2, False)
    if a.shape.ndims is None or b.shape.ndims is None:
        return [(a.dtype, TensorShape(None))]
    ad, bd = a.shape.as_tuple(), b.shape.as_tuple()
    m, n = _inner_dims(op, ad, bd, op.attrs["adj_x"], op.attrs["adj_y"])
    batch = broadcast_static(TensorShape(ad[:-2]), TensorShape(bd[:-2]),
                             f" for '{op.name}' (op: '{op.type}')")
    return [(a.dtype, TensorShape(batch.as_tuple() + (m, n)))]


def _t(x, flag: bool):
    return np.swapaxes(x, -1, -2) if flag else x


def _matmul_ref(op, a, b):
    a, b = np.asarray(a), np.asarray(b)
    ta, tb = op.attrs["transpose_a"], op.attrs["transpose_b"]
    if a.ndim == 2 and b.ndim == 2 and a.shape[0 if ta else 1] != b.shape[1 if tb else 0]:
        from jitflow.core.errors import InvalidArgumentError
        raise InvalidArgumentError(None, op, "Matrix size-incompatible: In[0]: [{}], In[1]: "
                                   "[{}]".format(",".join(map(str, a.shape)),
                                                 ",".join(map(str, b.shape))))
    return np.matmul(_t(a, ta), _t(b, tb))


def _batch_ref(op, a, b):
    return np.matmul(_t(np.asarray(a), op.attrs["adj_x"]), _t(np.asarray(b), op.attrs["adj_y"]))


def _product_grads(mm, a, b, g, ta: bool, tb: bool):
    """Gradients of a @ b (each possibly transposed) through `mm(x, y, tx, ty)`."""
    if not ta and not tb:
        return mm(g, b, False, True), mm(a, g, True, False)
    if not ta and tb:
        return mm(g, b, False, False), mm(g, a, True, False)
    if ta and not tb:
        return mm(b, g, False, True), mm(a, g, False, False)
    return mm(b, g, True, True), mm(g, a, True, True)


def _matmul_grad(op, g):
    a, b = op.inputs

    def mm(x, y, tx, ty):
        return matmul(x, y, transpose_a=tx, transpose_b=ty)
    ga, gb = _product_grads(mm, a, b, g, op.attrs["transpose_a"], op.attrs["transpose_b"])
    return [ga, gb]


def _batch_grad(op, g):
    a, b = op.inputs

    def mm(x, y, tx, ty):
        return make_op("BatchMatMulV2", [x, y], {"adj_x": tx, "adj_y": ty},
                       name="MatMul").outputs[0]
    ga, gb = _product_grads(mm, a, b, g, op.attrs["adj_x"], op.attrs["adj_y"])
    return [unbroadcast(ga, a), unbroadcast(gb, b)]


def _mm_examples():
    out = []
    for ta in (False, True):
        for tb in (False, True):
            sa = (4, 3) if ta else (3, 4)
            sb = (2, 4) if tb else (4, 2)
            out.append(Example(
                (lambda a, b, ta=ta, tb=tb: matmul(a, b, transpose_a=ta, transpose_b=tb)),
                [sa, sb],
                (lambda a, b, ta=ta, tb=tb: (a.T if ta else a).astype(np.float64)
                 @ (b.T if tb else b)),
                ("float32", "float64", "int32"), id=f"ta{int(ta)}_tb{int(tb)}"))
    out.append(Example(lambda a, b: a @ b, [(1, 5), (5, 1)], lambda a, b: a @ b, id="dot"))
    return out


# -- lowering into the kernel IR ------------------------------------------------------------------
def _lower_matmul(low, op, pos: int) -> None:
    """A contraction of two stored matrices (`ir.MatMul`); the inner sizes are checked."""
    ta = bool(op.attrs.get("transpose_a", op.attrs.get("adj_x")))
    tb = bool(op.attrs.get("transpose_b", op.attrs.get("adj_y")))
    a = low.value(op.inputs[0], pos)
    b = low.value(op.inputs[1], pos)
    if a.rank != 2 or b.rank != 2:
        raise Unsupported("matmul operands")
    m, ka = (a.dims[1], a.dims[0]) if ta else (a.dims[0], a.dims[1])
    kb, n = (b.dims[1], b.dims[0]) if tb else (b.dims[0], b.dims[1])
    mo = a.ones[1] if ta else a.ones[0]
    no = b.ones[0] if tb else b.ones[1]
    low.check_equal(ka, kb, pos, "Matrix size-incompatible")
    out = op.outputs[0]
    if low.is_fed(out):
        return
    v = low.buf(out.dtype.name, (mo, no), (m, n))
    low.emit(MatMul(v, a, b, ta, tb, pos))
    low.set(out, v)


def _matmul_lowerable(op) -> bool:
    return (op.inputs[0].dtype.name != "bool" and op.inputs[0].shape.ndims == 2
            and op.inputs[1].shape.ndims == 2
            and not op.attrs.get("adjoint_a") and not op.attrs.get("adjoint_b"))


def _lower_batch_matmul(low, op, pos: int) -> None:
    """BatchMatMulV2 as a sum over k of a[..., i, k] * b[..., k, j] (batch dims broadcast);
    of two matrices (ranks the graph may not know), a BLAS product as MatMul."""
    out = op.outputs[0]
    if low.is_fed(out):
        return
    if low.rank(op.inputs[0]) < 2 or low.rank(op.inputs[1]) < 2:
        low.fail(pos, "In[0] and In[1] must have rank at least 2")
        raise Unsupported("batch matmul of vectors")
    if (low.rank(op.inputs[0]) == 2 and low.rank(op.inputs[1]) == 2
            and op.inputs[0].dtype.name in ("float32", "float64")):
        return _lower_matmul(low, op, pos)
    a, b = low.stored(op.inputs[0], pos), low.stored(op.inputs[1], pos)
    nb = max(a.rank, b.rank) - 2
    parts = [(None, None, v.ones[:-2], v.dims[:-2], None) for v in (a, b)]
    b_ones, b_dims = low.broadcast(parts, pos)
    ta, tb = bool(op.attrs["adj_x"]), bool(op.attrs["adj_y"])
    # loop axes: batch..., i (nb), j (nb + 1), k (nb + 2)
    i, j, k = nb, nb + 1, nb + 2
    ax_a = tuple(range(nb - (a.rank - 2), nb)) + ((k, i) if ta else (i, k))
    ax_b = tuple(range(nb - (b.rank - 2), nb)) + ((j, k) if tb else (k, j))
    m_one, m = (a.ones[-1], a.dims[-1]) if ta else (a.ones[-2], a.dims[-2])
    ka_one, ka = (a.ones[-2], a.dims[-2]) if ta else (a.ones[-1], a.dims[-1])
    n_one, n = (b.ones[-2], b.dims[-2]) if tb else (b.ones[-1], b.dims[-1])
    kb_one, kb = (b.ones[-1], b.dims[-1]) if tb else (b.ones[-2], b.dims[-2])
    if ka != kb:
        low.checks.append(Check(ka, kb, pos, "Matrix size-incompatible"))
    expr = Apply(S.mul(X0, X1), [Load(a, ax_a), Load(b, ax_b)], a.dtype, pos)
    ones = b_ones + (m_one, n_one, ka_one and kb_one)
    dims = b_dims + (m, n, ka if not ka_one else kb)
    v = low.buf(out.dtype.name, ones[:-1], dims[:-1])
    low.emit(Reduce(v, expr, dims, ones, (k,), "sum", pos, a.dtype))
    low.set(out, v)


register("MatMul", infer=_matmul_infer, ref=_matmul_ref, grad=_matmul_grad, kind="matmul",
         lower=_lower_matmul, lowerable=_matmul_lowerable,
         doc="a @ b for matrices; attrs transpose_a, transpose_b.", examples=_mm_examples())
register("BatchMatMulV2", infer=_batch_infer, ref=_batch_ref, grad=_batch_grad, kind="matmul",
         lower=_lower_batch_matmul, lowerable=lambda op: op.inputs[0].dtype.name != "bool",
         doc="Matrix products over the last two axes; the leading (batch) axes broadcast.",
         examples=[Example(lambda a, b: matmul(a, b), [(2, 3, 4), (2, 4, 5)], np.matmul,
                           ("float32", "float64", "int32"), id="batch"),
                   Example(lambda a, b: matmul(a, b, transpose_b=True), [(2, 1, 3, 4), (3, 5, 4)],
                           lambda a, b: a @ np.swapaxes(b, -1, -2), id="bcast_tb"),
                   Example(lambda a, b: matmul(a, b, adjoint_a=True), [(2, 4, 3), (4, 2)],
                           lambda a, b: np.swapaxes(a, -1, -2) @ b, id="adj_a")])


def matmul(a, b, transpose_a: bool = False, transpose_b: bool = False, adjoint_a: bool = False,
           adjoint_b: bool = False, a_is_sparse: bool = False, b_is_sparse: bool = False,
           name: Optional[str] = None) -> Tensor:
    """`tf.matmul`: op `MatMul` for two matrices, `BatchMatMulV2` when either has rank > 2.

    For real dtypes `adjoint_*` is the same as `transpose_*`. Shapes are checked when the graph
    is built (ValueError with TF1's message).
    """
    if transpose_a and adjoint_a or transpose_b and adjoint_b:
        raise ValueError("Only one of transpose_a and adjoint_a (transpose_b and adjoint_b) "
                         "can be True.")
    ta, tb = bool(transpose_a or adjoint_a), bool(transpose_b or adjoint_b)
    with name_scope(name, "MatMul", [a, b]) as scope:
        a = convert_to_tensor(a, name="a")
        b = convert_to_tensor(b, dtype=None if isinstance(b, Tensor) else a.dtype, name="b")
        ra, rb = a.shape.ndims, b.shape.ndims
        if (ra is None or ra > 2) or (rb is None or rb > 2):
            return make_op("BatchMatMulV2", [a, b], {"adj_x": ta, "adj_y": tb},
                           name=scope).outputs[0]
        return make_op("MatMul", [a, b], {"transpose_a": ta, "transpose_b": tb},
                       name=scope).outputs[0]


def _tensordot_axes(a: Tensor, b: Tensor, axes):
    """The contraction axes `(axes_a, axes_b)` as TF1 reads `axes`: an int n (the last n of
    `a`, the first n of `b`) or a pair of ints or int lists; negative axes count from the end.
    Lists are resolved against known ranks; an int with an unknown rank stays an int."""
    if isinstance(axes, (int, np.integer)) and not isinstance(axes, bool):
        n = int(axes)
        if n < 0:
            raise ValueError(f"`axes` must be at least 0. Received: {n}.")
        ra = a.shape.ndims
        if ra is not None and n > ra:
            raise ValueError(f"`axes` must not be larger than the number of dimensions of "
                             f"tensor {a!r}.  Received {n}, vs tensor dimensions {ra}.")
        return n, n
    if isinstance(axes, np.ndarray):
        axes = axes.tolist()
    if not isinstance(axes, (list, tuple)) or len(axes) != 2:
        raise ValueError(f"`axes` must be an integer or have length 2. Received {axes}.")
    ax_a, ax_b = axes
    ax_a = [ax_a] if isinstance(ax_a, (int, np.integer)) else [int(i) for i in ax_a]
    ax_b = [ax_b] if isinstance(ax_b, (int, np.integer)) else [int(i) for i in ax_b]
    if len(ax_a) != len(ax_b):
        raise ValueError(f"Different number of contraction axes `a` and `b`, {len(ax_a)} != "
                         f"{len(ax_b)}.")
    return ax_a, ax_b


def _resolve_axes(axes: list, rank: int, which: str) -> list:
    """An axis list checked against an operand's known rank, negative axes made positive."""
    out = []
    for i in axes:
        if not -rank <= i < rank:
            raise IndexError(f"tensordot: axis {i} is out of range for '{which}' of rank "
                             f"{rank}")
        out.append(i % rank)
    return out


def _tensordot_infer(op):
    a, b = op.inputs
    if a.dtype != b.dtype:
        raise TypeError(f"Input 'b' of 'Tensordot' has type {b.dtype.name} that does not match "
                        f"type {a.dtype.name} of argument 'a'.")
    ax_a, ax_b = op.attrs["axes_a"], op.attrs["axes_b"]
    ad, bd = a.shape.as_tuple(), b.shape.as_tuple()
    for i, j in zip(ax_a, ax_b):
        if ad[i] is not None and bd[j] is not None and ad[i] != bd[j]:
            raise ValueError(f"Dimensions must be equal, but are {ad[i]} and {bd[j]} for "
                             f"'{op.name}' (op: 'Tensordot') with input shapes: "
                             f"{shape_tf_str(a.shape)}, {shape_tf_str(b.shape)}.")
    free = [d for i, d in enumerate(ad) if i not in ax_a]
    free += [d for j, d in enumerate(bd) if j not in ax_b]
    return [(a.dtype, TensorShape(free))]


def _tensordot_ref(op, a, b):
    return np.tensordot(a, b, axes=(list(op.attrs["axes_a"]), list(op.attrs["axes_b"])))


def _tensordot_grad(op, g):
    """Contract g with the other operand over its free axes, then restore the axis order."""
    a, b = op.inputs
    ax_a, ax_b = op.attrs["axes_a"], op.attrs["axes_b"]
    ra, rb = a.shape.ndims, b.shape.ndims
    free_a = [i for i in range(ra) if i not in ax_a]
    free_b = [j for j in range(rb) if j not in ax_b]
    nfa = len(free_a)
    # np.tensordot keeps each operand's remaining axes in their original order
    ga = _tensordot_op(g, b, list(range(nfa, nfa + len(free_b))), free_b)
    ga_axes = free_a + [ax_a[ax_b.index(j)] for j in sorted(ax_b)]
    ga = _permute(ga, np.argsort(ga_axes))
    gb = _tensordot_op(a, g, free_a, list(range(nfa)))
    gb_axes = [ax_b[ax_a.index(i)] for i in sorted(ax_a)] + free_b
    gb = _permute(gb, np.argsort(gb_axes))
    return [ga, gb]


def _lower_tensordot(low, op, pos: int) -> None:
    """out[free a..., free b...] = the sum over the contracted axes of a * b: one Reduce whose
    loop axes are a's free axes, b's free axes, then the contracted ones (as BatchMatMul's)."""
    out = op.outputs[0]
    if low.is_fed(out):
        return
    ax_a, ax_b = list(op.attrs["axes_a"]), list(op.attrs["axes_b"])
    a, b = low.stored(op.inputs[0], pos), low.stored(op.inputs[1], pos)
    free_a = [i for i in range(a.rank) if i not in ax_a]
    free_b = [j for j in range(b.rank) if j not in ax_b]
    nf = len(free_a) + len(free_b)
    map_a = [free_a.index(i) if i in free_a else nf + ax_a.index(i) for i in range(a.rank)]
    map_b = [len(free_a) + free_b.index(j) if j in free_b else nf + ax_b.index(j)
             for j in range(b.rank)]
    ones = ([a.ones[i] for i in free_a] + [b.ones[j] for j in free_b]
            + [a.ones[i] and b.ones[j] for i, j in zip(ax_a, ax_b)])
    dims = ([a.dims[i] for i in free_a] + [b.dims[j] for j in free_b]
            + [b.dims[j] if a.ones[i] else a.dims[i] for i, j in zip(ax_a, ax_b)])
    for i, j in zip(ax_a, ax_b):
        if a.dims[i] != b.dims[j]:
            low.checks.append(Check(a.dims[i], b.dims[j], pos, "Matrix size-incompatible"))
    expr = Apply(S.mul(X0, X1), [Load(a, tuple(map_a)), Load(b, tuple(map_b))], a.dtype, pos)
    v = low.buf(out.dtype.name, tuple(ones[:nf]), tuple(dims[:nf]))
    low.emit(Reduce(v, expr, tuple(dims), tuple(ones), tuple(range(nf, len(dims))), "sum", pos,
                    a.dtype))
    low.set(out, v)


register("Tensordot", infer=_tensordot_infer, ref=_tensordot_ref, grad=_tensordot_grad,
         kind="matmul", lower=_lower_tensordot,
         lowerable=lambda op: op.inputs[0].dtype.name != "bool",
         doc="Contraction of a's axes_a with b's axes_b (NumPy's tensordot).",
         examples=[Example(lambda a, b: tensordot(a, b, 1), [(2, 3), (3, 4)],
                           lambda a, b: np.tensordot(a, b, 1), id="int"),
                   Example(lambda a, b: tensordot(a, b, [[0, 2], [2, 1]]),
                           [(2, 3, 4), (5, 4, 2)],
                           lambda a, b: np.tensordot(a, b, [[0, 2], [2, 1]]), id="pairs"),
                   Example(lambda a, b: tensordot(a, b, [[1], [0]]), [(4, 3, 2), (3, 5)],
                           lambda a, b: np.tensordot(a, b, [[1], [0]]), id="middle"),
                   Example(lambda a, b: tensordot(a, b, 0), [(2, 3), (4,)],
                           lambda a, b: np.tensordot(a, b, 0), id="outer")])


def _tensordot_op(a, b, ax_a, ax_b):
    return make_op("Tensordot", [a, b], {"axes_a": tuple(ax_a), "axes_b": tuple(ax_b)},
                   name="Tensordot").outputs[0]


def _permute(x: Tensor, perm) -> Tensor:
    perm = [int(p) for p in perm]
    if perm == list(range(len(perm))):
        return x
    from jitflow.ops.shape_ops import transpose
    return transpose(x, perm)


def tensordot(a, b, axes, name: Optional[str] = None) -> Tensor:
    """`tf.tensordot`: sum over `axes` (an int n: the last n of a with the first n of b; a
    pair of axes or axis lists; or an int32 tensor of shape [2, k]).

    With both ranks and the axes known at build time this is one `Tensordot` op whose static
    shape is the free dims of a then b (named `<scope>/MatMul` where TF returns its MatMul
    directly: axes given as Python values, fully defined shapes, one free dim each; an axes
    tensor whose value is known at build time counts as known). Otherwise, as in TF, the operands
    are transposed and reshaped to matrices at run time (shape, gather, list_diff), multiplied
    and reshaped back; the result's static shape is then unknown.
    """
    with name_scope(name, "Tensordot", [a, b, axes]) as scope:
        a = convert_to_tensor(a, name="a")
        b = convert_to_tensor(b, dtype=None if isinstance(b, Tensor) else a.dtype, name="b")
        axes_tensor = isinstance(axes, Tensor)
        if axes_tensor:
            from jitflow.core.fold import static_value
            value = static_value(axes)
            if value is None:
                return _tensordot_dynamic(a, b, axes, scope)
            if value.ndim == 0:
                raise ValueError(f"Attempting to slice scalar input 'axes' of tensordot "
                                 f"({axes.name}): it must have shape [2, k] or [2]")
            axes = value.tolist()
        ax_a, ax_b = _tensordot_axes(a, b, axes)
        ra, rb = a.shape.ndims, b.shape.ndims
        if isinstance(ax_a, int) and ra is not None:  # as TF: the int read against a's rank
            ax_a, ax_b = list(range(ra - ax_a, ra)), list(range(ax_b))
        if ra is None or rb is None:
            return _tensordot_dynamic(a, b, (ax_a, ax_b), scope)
        ax_a = _resolve_axes(ax_a, ra, "a")
        ax_b = _resolve_axes(ax_b, rb, "b")
        op_name = scope
        if (not axes_tensor and a.shape.is_fully_defined() and b.shape.is_fully_defined()
                and ra - len(ax_a) == 1 and rb - len(ax_b) == 1):
            op_name = "MatMul"
        return make_op("Tensordot", [a, b], {"axes_a": tuple(ax_a), "axes_b": tuple(ax_b)},
                       name=op_name).outputs[0]


def _tensordot_dynamic(a: Tensor, b: Tensor, axes, scope: str) -> Tensor:
    """tensordot when a rank or the axes are known only at run time: each operand transposed
    (free axes then contracted ones for a, the reverse for b) and reshaped to a matrix, one
    MatMul, then reshaped to the free dims of a and b. Bad axes fail at run time in the
    shape gathers, mismatched contraction sizes in the MatMul, as in TF."""
    from jitflow.ops.array_extra import setdiff1d
    from jitflow.ops.join import concat, stack
    from jitflow.ops.reduce import reduce_prod
    from jitflow.ops.shape_ops import rank, reshape, shape, transpose
    from jitflow.ops.slicing import gather
    from jitflow.ops.sources import constant, range as _range

    if isinstance(axes, Tensor):
        if axes.dtype.name not in ("int32", "int64"):
            raise TypeError(f"tensordot: 'axes' must be an int32 tensor, got {axes.dtype.name}")
        if axes.dtype.name != "int32":
            axes = _cast(axes, "int32")
        ax_a, ax_b = axes[0], axes[1]
    else:
        ax_a, ax_b = axes

    def operand(x: Tensor, ax, flipped: bool):
        rx = x.shape.ndims
        if rx is not None and not isinstance(ax, (int, Tensor)):
            ax = _resolve_axes(ax, rx, "b" if flipped else "a")
            free = [i for i in range(rx) if i not in ax]
            ax_t = constant(ax, dtype="int32", name="axes")
            free_t = constant(free, dtype="int32", name="free")
        else:
            rank_x = rank(x)
            if isinstance(ax, int):
                ax_t = _range(ax) if flipped else _range(rank_x - ax, rank_x)
            else:
                ax_t = ax if isinstance(ax, Tensor) else constant(ax, dtype="int32",
                                                                  name="axes")
                ax_t = where_v2(ax_t >= 0, ax_t, ax_t + rank_x)
            free_t = setdiff1d(_range(rank_x), ax_t).out
        shape_x = shape(x)
        free_dims = gather(shape_x, free_t)
        ax_dims = gather(shape_x, ax_t)
        prod_free, prod_ax = reduce_prod(free_dims), reduce_prod(ax_dims)
        if flipped:
            perm, new_shape = concat([ax_t, free_t], 0), stack([prod_ax, prod_free])
        else:
            perm, new_shape = concat([free_t, ax_t], 0), stack([prod_free, prod_ax])
        return reshape(transpose(x, perm), new_shape), free_dims

    a_mat, a_free = operand(a, ax_a, False)
    b_mat, b_free = operand(b, ax_b, True)
    product = matmul(a_mat, b_mat)
    return reshape(product, concat([a_free, b_free], 0), name=scope)


def norm(tensor, ord="euclidean", axis=None, keepdims=None, name: Optional[str] = None,
         keep_dims=None) -> Tensor:
    """`tf.norm`: the euclidean (default; also 'fro', and 2 for vectors), inf or any p > 0
    vector norm over `axis` (all elements when None)."""
    keepdims = bool(_legacy(keepdims, keep_dims, "keepdims", "keep_dims"))
    with name_scope(name, "norm", [tensor]) as scope:
        x = convert_to_tensor(tensor, name="tensor")
        if isinstance(axis, (list, tuple)) and len(axis) == 2 and ord not in (
                "euclidean", "fro"):
            raise ValueError(f"'ord' must be 'euclidean' or 'fro' for matrix norms, got {ord!r}")
        if ord in ("euclidean", "fro", 2, 2.0):
            s = reduce_sum(x * x, axis, keepdims=keepdims)
            return make_op("Sqrt", [s], name=scope).outputs[0]
        if ord in (1, 1.0):
            return reduce_sum(_abs(x), axis, keepdims=keepdims, name=scope)
        if ord == np.inf:
            return reduce_max(_abs(x), axis, keepdims=keepdims, name=scope)
        if isinstance(ord, (int, float)) and not isinstance(ord, bool) and ord > 0:
            p = scalar_like(ord, x)
            s = reduce_sum(_pow(_abs(x), p), axis, keepdims=keepdims)
            return make_op("Pow", [s, scalar_like(1.0 / ord, x)], name=scope).outputs[0]
        raise ValueError(f"'ord' must be a supported vector norm, got {ord!r}")




# -- clipping by norm ---------------------------------------------------------------------------
def clip_by_norm(t, clip_norm, axes=None, name: Optional[str] = None) -> Tensor:
    """`tf.clip_by_norm`: t * clip_norm / max(l2norm(t, axes), clip_norm); a zero tensor stays
    zero and gets a finite gradient."""
    with name_scope(name, "clip_by_norm", [t, clip_norm]) as scope:
        t = convert_to_tensor(t, name="t")
        clip = convert_to_tensor(clip_norm, dtype=None if isinstance(clip_norm, Tensor)
                                 else t.dtype, name="clip_norm")
        l2sum = reduce_sum(t * t, axes, keepdims=True)
        pred = greater(l2sum, scalar_like(0, l2sum))
        l2sum_safe = where_v2(pred, l2sum, scalar_like(1, l2sum))
        l2norm = where_v2(pred, sqrt(l2sum_safe), l2sum)
        return make_op("RealDiv", [t * clip, maximum(l2norm, clip)], name=scope).outputs[0]


def _values_of(t):
    """A tensor's self, an IndexedSlices' values (what the norms count)."""
    return t.values if isinstance(t, IndexedSlices) else t


def global_norm(t_list, name: Optional[str] = None) -> Tensor:
    """`tf.global_norm`: sqrt of the sum of squares of every element of every tensor (None
    entries are skipped; an IndexedSlices counts its `values`, as TF)."""
    if isinstance(t_list, Tensor) or not isinstance(t_list, (list, tuple)):
        raise TypeError("t_list should be a sequence")
    vals = [_values_of(v) for v in t_list if v is not None]
    with name_scope(name, "global_norm", vals) as scope:
        sums = [reduce_sum(t * t) for t in (convert_to_tensor(v) for v in vals)]
        if not sums:
            raise ValueError("global_norm needs at least one tensor")
        total = add_n(sums) if len(sums) > 1 else sums[0]
        return make_op("Sqrt", [total], name=scope).outputs[0]


def clip_by_global_norm(t_list, clip_norm, use_norm=None, name: Optional[str] = None):
    """`tf.clip_by_global_norm`: scale every tensor by clip_norm / max(global_norm, clip_norm);
    returns (clipped list with None kept, the global norm). An IndexedSlices (a sparse
    gradient) comes back as one, its values scaled."""
    if isinstance(t_list, Tensor) or not isinstance(t_list, (list, tuple)):
        raise TypeError("t_list should be a sequence")
    t_list = list(t_list)
    with name_scope(name, "clip_by_global_norm",
                    [_values_of(t) for t in t_list if t is not None]):
        norm_ = global_norm(t_list, "global_norm") if use_norm is None else \
            convert_to_tensor(use_norm)
        clip = convert_to_tensor(clip_norm, dtype=None if isinstance(clip_norm, Tensor)
                                 else norm_.dtype, name="clip_norm")
        one = scalar_like(1, norm_)
        scale = clip * minimum(one / norm_, one / clip)
        out = []
        for t in t_list:
            if t is None:
                out.append(None)
                continue
            if isinstance(t, IndexedSlices):
                v = t.values
                s = scale if v.dtype == scale.dtype else _cast(scale, v.dtype)
                out.append(IndexedSlices(v * s, t.indices, t.dense_shape))
                continue
            t = convert_to_tensor(t)
            s = scale if t.dtype == scale.dtype else _cast(scale, t.dtype)
            out.append(t * s)
        return out, norm_


def clip_by_average_norm(t, clip_norm, name: Optional[str] = None) -> Tensor:
    """`tf.clip_by_average_norm`: clip so that l2norm(t) / size(t) is at most clip_norm."""
    with name_scope(name, "clip_by_average_norm", [t, clip_norm]) as scope:
        t = convert_to_tensor(t, name="t")
        n = t.shape.num_elements()
        if n is None:
            from jitflow.ops.shape_ops import size
            n_t = _cast(size(t), t.dtype)
        else:
            n_t = scalar_like(n, t)
        clip = convert_to_tensor(clip_norm, dtype=None if isinstance(clip_norm, Tensor)
                                 else t.dtype, name="clip_norm")
        l2norm_inv = 1 / sqrt(reduce_sum(t * t))
        return multiply(t, clip * minimum(l2norm_inv * n_t, 1 / clip), name=scope)


def _cast(x, dtype):
    from jitflow.ops.math.casting import cast
    return cast(x, dtype)


def cross(a, b, name: Optional[str] = None) -> Tensor:
    """`tf.cross` / `tf.linalg.cross`: the cross product of 3-vectors along the last axis
    (a and b of the same shape). Built from slices and products, so it fuses and has a
    gradient; TF's graph has one `Cross` op instead."""
    from jitflow.ops.join import stack
    from jitflow.ops.math.arithmetic import subtract
    with name_scope(name, "Cross", [a, b]) as scope:
        a = convert_to_tensor(a, name="a")
        b = convert_to_tensor(b, dtype=None if isinstance(b, Tensor) else a.dtype, name="b")
        if a.dtype != b.dtype:
            raise TypeError(f"cross: b has dtype {b.dtype.name}, a has {a.dtype.name}")
        for t, what in ((a, "a"), (b, "b")):
            d = t.shape.as_tuple()
            if d is not None and (len(d) == 0 or d[-1] not in (None, 3)):
                raise ValueError(f"Dimension must be 3 but is {d[-1] if d else 'rank 0'}: "
                                 f"the last dimension of {what} (shape {shape_tf_str(t.shape)})"
                                 f" for '{scope[:-1]}' (op: 'Cross')")
        if not a.shape.is_compatible_with(b.shape):
            raise ValueError(f"Shapes must be equal for 'Cross': {shape_tf_str(a.shape)} and "
                             f"{shape_tf_str(b.shape)}")
        ax = [a[..., i] for i in range(3)]
        bx = [b[..., i] for i in range(3)]
        parts = [subtract(multiply(ax[(i + 1) % 3], bx[(i + 2) % 3]),
                          multiply(ax[(i + 2) % 3], bx[(i + 1) % 3])) for i in range(3)]
        return stack(parts, axis=-1, name=scope[:-1])
