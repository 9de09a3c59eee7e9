"""Random TF1 programs for the differential fuzzer.

A *program* is plain data (a `Program` of `Node`s), built from one integer seed, so a failure
is reproduced from its seed and shrunk by editing the data. `build(tfm, program)` turns it into
a graph through the public API of any TF1-style module: `jitflow`, or
`tensorflow.compat.v1` when it is installed, so the same program runs on every backend and on
TensorFlow.

Shapes are symbolic while generating: a dimension is an int or `"B"`, the batch size, which is
a `None` dimension of the placeholders that carry it and is fed with several sizes (1 included)
when the program runs. Every op is generated only where its operands are valid for every size
of B, so a program either builds and runs, or (in the error modes) fails on purpose.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

B = "B"
FLOATS = ("float32", "float64")

UNARY = ("neg", "abs", "square", "sqrt", "exp", "log", "tanh", "sigmoid", "relu", "softplus",
         "sin", "cos", "reciprocal")
# unary ops that keep values bounded when their input is bounded (cast to int needs that)
_BOUNDED_UNARY = {"neg", "abs", "tanh", "sigmoid", "relu", "sin", "cos", "square"}
BINARY = ("add", "sub", "mul", "div", "maximum", "minimum", "pow")
INT_UNARY = ("neg", "abs", "square")
INT_BINARY = ("add", "sub", "mul", "maximum", "minimum")
REDUCE = ("sum", "mean", "max", "min")
COMPARE = ("less", "greater", "less_equal", "greater_equal", "equal", "not_equal")


MAX_RANK = 4
MAX_ELEMENTS = 2048      # per tensor, at the largest batch size fed


class _TooBig(Exception):
    pass


@dataclass
class Node:
    """One tensor of the program: a leaf (placeholder, const, variable) or an op."""

    op: str
    args: tuple = ()
    params: dict = field(default_factory=dict)
    dtype: str = "float32"
    shape: Optional[tuple] = ()     # symbolic dims; a placeholder of unknown rank keeps its rank
    bounded: bool = True            # values stay within a small range (safe to cast to int)


@dataclass
class Program:
    """A random TF1 program: nodes in build order, what to fetch, how to run it."""

    seed: int
    nodes: list
    fetches: list                    # node indices
    mode: str = "forward"            # forward | gradients | train
    fetch_style: str = "list"        # list | single | dict
    optimizer: str = "sgd"
    train_steps: int = 3
    grad_wrt: list = field(default_factory=list)   # node indices (variables, placeholders)
    loss_node: Optional[int] = None
    loss_reduce: str = "sum"
    batches: tuple = (3, 1)
    error: Optional[str] = None      # None | wrong_feed_shape | missing_feed | bad_batch
    #                                  | static_mismatch (a build-time shape error)
    error_target: Optional[int] = None
    fed: list = field(default_factory=list)        # intermediate nodes fed with values
    extra_fetch: Optional[str] = None              # None | "duplicate" | "leaf": fetched too

    def describe(self) -> str:
        lines = [f"program seed={self.seed} mode={self.mode} fetch={self.fetch_style} "
                 f"batches={self.batches} error={self.error}:{self.error_target}"]
        for i, n in enumerate(self.nodes):
            lines.append(f"  n{i} = {n.op}{tuple(f'n{a}' for a in n.args)} {n.params} "
                         f"-> {n.dtype}{list(n.shape) if n.shape is not None else '?'}")
        lines.append(f"  fetches={self.fetches} grad_wrt={self.grad_wrt} loss={self.loss_node} "
                     f"opt={self.optimizer} fed={self.fed}")
        return "\n".join(lines)


# -- symbolic shapes -------------------------------------------------------------------------
def broadcast(a: tuple, b: tuple) -> Optional[tuple]:
    """The broadcast of two symbolic shapes, or None when some size of B breaks it."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            return None
    return tuple(reversed(out))


def concrete(shape: tuple, batch: int) -> tuple:
    return tuple(batch if d == B else d for d in shape)


# -- the generator -------------------------------------------------------------------------------
class _Gen:
    def __init__(self, seed: int, max_ops: int, wide: bool = True) -> None:
        self.rng = np.random.default_rng(seed)
        self.wide = wide
        self.seed = seed
        self.nodes: list = []
        self.max_ops = max_ops
        self.n_vars = 0

    # helpers
    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def pick(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    def add(self, node: Node) -> int:
        if node.shape is not None and (len(node.shape) > MAX_RANK or math.prod(
                concrete(node.shape, 5)) > MAX_ELEMENTS):
            raise _TooBig()
        self.nodes.append(node)
        return len(self.nodes) - 1

    def values(self, shape: tuple, dtype: str) -> np.ndarray:
        if dtype == "int32":
            # mostly small; sometimes large enough that products overflow (and wrap, as in TF)
            hi = 6 if self.chance(0.8) else 70000
            return self.rng.integers(-hi, hi, size=shape).astype(np.int32)
        return self.rng.uniform(-2, 2, size=shape).astype(dtype)

    def rand_shape(self, rank: int, batch_ok: bool) -> tuple:
        dims = []
        for _ in range(rank):
            r = self.rng.random()
            if batch_ok and r < 0.25 and B not in dims:
                dims.append(B)
            elif r < 0.45:
                dims.append(1)
            else:
                dims.append(int(self.rng.integers(2, 5)))
        return tuple(dims)

    # leaves
    def leaf(self, shape: tuple, dtype: str, allow_placeholder: bool = True) -> int:
        """A new placeholder, constant or variable of this shape."""
        if not self.wide and (B in shape or (allow_placeholder and self.chance(0.4))):
            static = "none"
            if B not in shape:
                r = self.rng.random()
                static = "full" if r < 0.5 else ("unknown_rank" if r < 0.7 else "none")
            return self.add(Node("placeholder", (), {"static": static}, dtype, shape))
        if self.wide and (B in shape or (allow_placeholder and self.chance(0.4))):
            # the static shape it is declared with: "full", "none" (B dims None),
            # "unknown_rank" (shape=None), "partial" (B dims and some others None)
            r = self.rng.random()
            if B in shape:
                static = "none" if r < 0.6 else ("unknown_rank" if r < 0.8 else "partial")
            else:
                static = "full" if r < 0.4 else ("unknown_rank" if r < 0.65 else (
                    "none" if r < 0.75 else "partial"))
            params = {"static": static}
            if static == "partial":
                params["unknown"] = [k for k in range(len(shape)) if self.chance(0.5)]
            return self.add(Node("placeholder", (), params, dtype, shape))
        if self.chance(0.35) and dtype in FLOATS:
            self.n_vars += 1
            kind = "variable" if self.chance(0.6) else "get_variable"
            return self.add(Node(kind, (), {"value": self.values(shape, dtype),
                                            "name": f"v{self.n_vars}"}, dtype, shape))
        if shape == () and self.chance(0.3):
            v = float(self.values((), dtype)) if dtype in FLOATS else int(self.values((), dtype))
            return self.add(Node("const", (), {"value": v, "form": "scalar"}, dtype, shape))
        form = "list" if self.chance(0.3) else "array"
        return self.add(Node("const", (), {"value": self.values(shape, dtype), "form": form},
                             dtype, shape))

    def operand(self, dtype: str, want: Optional[tuple] = None) -> int:
        """An existing node of this dtype (of shape `want` if given), or a new leaf."""
        cands = [i for i, n in enumerate(self.nodes) if n.dtype == dtype and n.shape is not None
                 and (want is None or n.shape == want)]
        if cands and self.chance(0.7):
            # prefer recent nodes so programs grow deep, not wide
            w = np.arange(1, len(cands) + 1, dtype=float) ** 2
            return cands[int(self.rng.choice(len(cands), p=w / w.sum()))]
        if want is None:
            want = self.rand_shape(int(self.rng.integers(0, 4)), True)
        return self.leaf(want, dtype)

    # ops
    def step(self) -> None:
        """Add one op (and the leaves it needs); nothing if it would grow too large."""
        n = len(self.nodes)
        try:
            self._step()
        except _TooBig:
            del self.nodes[n:]

    def _step(self) -> None:
        float_dt = self.pick(FLOATS) if self.chance(0.2) else "float32"
        if self.chance(0.035):
            # real control flow, kept rare and small: a while loop whose trip count comes
            # from the data, or a cond (sometimes assigning a variable in its branches)
            self.while_loop(float_dt) if self.chance(0.5) else self.cond(float_dt)
            return
        r = self.rng.random()
        if r < 0.08:
            self.int_op()
        elif r < 0.25:
            self.unary(float_dt)
        elif r < 0.45:
            self.binary(float_dt)
        elif r < 0.55:
            self.reduce(float_dt)
        elif r < 0.63:
            self.window(float_dt) if self.chance(0.3) else self.matmul(float_dt)
        elif r < 0.68:
            self.softmax(float_dt)
        elif r < 0.71:
            self.xent(float_dt)
        elif r < 0.76:
            self.reshape(float_dt)
        elif r < 0.80:
            self.transpose(float_dt)
        elif r < 0.84:
            self.concat(float_dt)
        elif r < (0.89 if self.wide else 0.90):
            self.getitem(float_dt)
        elif r < (0.91 if self.wide else 0.92):
            self.tf_slice(float_dt)
        elif r < (0.95 if self.wide else 0.96):
            self.cast()
        elif r < 0.97 and self.wide:
            self.shape_op(float_dt)
        else:
            self.where(float_dt)

    def unary(self, dt: str) -> None:
        a = self.operand(dt)
        kind = self.pick(UNARY)
        n = self.nodes[a]
        self.add(Node("unary", (a,), {"fn": kind}, dt, n.shape,
                      n.bounded and kind in _BOUNDED_UNARY))

    def binary(self, dt: str, kinds=BINARY) -> None:
        a = self.operand(dt)
        sa = self.nodes[a].shape
        kind = self.pick(kinds)
        bounded = self.nodes[a].bounded and kind in ("add", "sub", "mul", "maximum", "minimum")
        if self.chance(0.2):
            # a Python scalar on either side (reversed operators: 2.0 - x)
            s = round(float(self.rng.uniform(0.5, 2.5)), 2) if dt in FLOATS \
                else int(self.rng.integers(1, 4))
            self.add(Node("binary_scalar", (a,), {"fn": kind, "scalar": s,
                                                  "left": self.chance(0.5),
                                                  "operator": self.chance(0.6)},
                          dt, sa, bounded))
            return
        # partner: same shape, a broadcastable shape, or a fresh leaf
        r = self.rng.random()
        if r < 0.4:
            want = sa
        elif r < 0.6:
            want = sa[int(self.rng.integers(0, len(sa) + 1)):]
        elif r < 0.8:
            want = tuple(1 if self.chance(0.5) else d for d in sa)
        else:
            want = tuple([1] * int(self.rng.integers(0, 2))) + sa
            want = tuple(1 if d != B and self.chance(0.3) else d for d in want)
        b = self.operand(dt, want)
        out = broadcast(sa, self.nodes[b].shape)
        if out is None:
            return
        if self.chance(0.5):
            a, b = b, a
        bounded = bounded and self.nodes[b].bounded
        self.add(Node("binary", (a, b), {"fn": kind, "operator": self.chance(0.5)}, dt, out,
                      bounded))

    def int_op(self) -> None:
        r = self.rng.random()
        if r < 0.3:
            self.unary_int()
        elif r < 0.8:
            self.binary("int32", INT_BINARY)
        else:
            self.reduce("int32", ("sum", "max", "min", "mean"))

    def unary_int(self) -> None:
        a = self.operand("int32")
        self.add(Node("unary", (a,), {"fn": self.pick(INT_UNARY)}, "int32",
                      self.nodes[a].shape))

    def reduce(self, dt: str, kinds=REDUCE) -> None:
        a = self.operand(dt)
        shape = self.nodes[a].shape
        rank = len(shape)
        kind = self.pick(kinds)
        keep = self.chance(0.4)
        r = self.rng.random()
        if rank == 0 or r < 0.2:
            axis = None
            axes = list(range(rank))
        elif r < 0.6:
            ax = int(self.rng.integers(-rank, rank))
            axis = ax
            axes = [ax % rank]
        else:
            k = int(self.rng.integers(1, rank + 1))
            axes = sorted(int(x) for x in self.rng.choice(rank, k, replace=False))
            axis = [x - rank if self.chance(0.3) else x for x in axes]
        out = tuple(1 if i in axes else d for i, d in enumerate(shape)) if keep else \
            tuple(d for i, d in enumerate(shape) if i not in axes)
        self.add(Node("reduce", (a,), {"fn": kind, "axis": axis, "keepdims": keep,
                                       "legacy": self.chance(0.1)}, dt, out,
                      self.nodes[a].bounded and kind in ("max", "min")))

    def matmul(self, dt: str) -> None:
        batched = self.chance(0.25)
        ta, tb = self.chance(0.3), self.chance(0.3)
        cands = [i for i, n in enumerate(self.nodes) if n.dtype == dt and n.shape is not None
                 and len(n.shape) == (3 if batched else 2)]
        if cands and self.chance(0.7):
            a = self.pick(cands)
            sa = self.nodes[a].shape
        else:
            sa = self.rand_shape(3 if batched else 2, True)
            a = self.leaf(sa, dt)
        if batched and sa[0] == 1 and self.chance(0.5):
            batched = batched  # batch dim 1 stays 1
        m, k = (sa[-1], sa[-2]) if ta else (sa[-2], sa[-1])
        n = self.pick([2, 3, 4, 1, B]) if B not in sa else self.pick([2, 3, 1])
        sb_core = (n, k) if tb else (k, n)
        sb = ((sa[0],) if batched else ()) + sb_core
        b = self.operand(dt, sb)
        out = ((sa[0],) if batched else ()) + (m, n)
        self.add(Node("matmul", (a, b), {"ta": ta, "tb": tb, "operator": not (ta or tb)
                                         and self.chance(0.3)}, dt, out, False))

    def window(self, dt: str) -> None:
        """A convolution (plain, depthwise) or a pooling over a rank-4 NHWC operand."""
        cands = [i for i, n in enumerate(self.nodes) if n.dtype == dt and n.shape is not None
                 and len(n.shape) == 4 and all(d != 0 for d in n.shape)]
        if cands and self.chance(0.6):
            a = self.pick(cands)
            sa = self.nodes[a].shape
        else:
            sa = (self.pick([B, 1, 2]), int(self.rng.integers(1, 7)),
                  int(self.rng.integers(1, 7)), int(self.rng.integers(1, 4)))
            a = self.leaf(sa, dt)
        if any(d == B for d in sa[1:]):
            return
        kind = self.pick(("conv", "conv", "depthwise", "max_pool", "avg_pool"))
        same = self.chance(0.5)
        kh, kw = int(self.rng.integers(1, 4)), int(self.rng.integers(1, 4))
        stride = self.pick([1, 1, 2, 3])
        dil = self.pick([1, 1, 2]) if kind in ("conv", "depthwise") and stride == 1 else 1

        def out(n, k):
            ek = (k - 1) * dil + 1
            if same:
                return -(-n // stride)
            return (n - ek) // stride + 1 if n >= ek else None

        oh, ow = out(sa[1], kh), out(sa[2], kw)
        if oh is None or ow is None:
            return
        c = sa[3]
        params = {"kind": kind, "k": (kh, kw), "stride": stride, "dil": dil,
                  "padding": "SAME" if same else "VALID"}
        if kind == "conv":
            co = int(self.rng.integers(1, 4))
            f = self.operand(dt, (kh, kw, c, co))
            self.add(Node("window", (a, f), params, dt, (sa[0], oh, ow, co), False))
        elif kind == "depthwise":
            m = int(self.rng.integers(1, 3))
            f = self.operand(dt, (kh, kw, c, m))
            self.add(Node("window", (a, f), params, dt, (sa[0], oh, ow, c * m), False))
        else:
            self.add(Node("window", (a,), params, dt, (sa[0], oh, ow, c),
                          self.nodes[a].bounded))

    def softmax(self, dt: str) -> None:
        a = self.operand(dt)
        shape = self.nodes[a].shape
        if len(shape) == 0:
            return
        kind = self.pick(("softmax", "log_softmax"))
        axis = None if self.chance(0.5) else int(self.rng.integers(-len(shape), len(shape)))
        self.add(Node(kind, (a,), {"axis": axis}, dt, shape, kind == "softmax"))

    def xent(self, dt: str) -> None:
        a = self.operand(dt)
        shape = self.nodes[a].shape
        if len(shape) == 0:
            return
        if self.chance(0.5):
            lab = self.add(Node("softmax", (self.operand(dt, shape),), {"axis": None}, dt,
                                shape))
        else:
            lab = self.leaf(shape, dt)
        self.add(Node("xent", (lab, a), {}, dt, shape[:-1], False))

    def reshape(self, dt: str) -> None:
        a = self.operand(dt)
        shape = self.nodes[a].shape
        ints = [d for d in shape if d != B]
        total = int(np.prod(ints)) if ints else 1
        if B in shape and self.chance(0.15):
            # a reshape that fails for some batch sizes (a run-time InvalidArgumentError);
            # its result has no symbolic shape, so nothing is built on it
            k = self.pick([d for d in (2, 3, 4, 5) if total % d]) if total % 60 else 7
            self.add(Node("reshape", (a,), {"shape": [-1, k]}, dt, None, False))
            return
        if B in shape:
            opts = [([-1], (B,) if total == 1 else None), ([-1, total], (B, total)),
                    ([total, -1], (total, B))]
            target, out = self.pick([o for o in opts if o[1] is not None])
        elif total == 0:
            target, out = self.pick([[-1], [0]]), (0,)
        else:
            # a random factorization of `total`, maybe with one -1
            facs, t = [], total
            for p in (2, 3, 5, 7):
                while t % p == 0:
                    facs.append(p)
                    t //= p
            if t > 1:
                facs.append(t)
            self.rng.shuffle(facs)
            dims = []
            for f in facs:
                if dims and self.chance(0.5):
                    dims[-1] *= f
                else:
                    dims.append(f)
            if self.chance(0.3):
                dims.insert(int(self.rng.integers(0, len(dims) + 1)), 1)
            out = tuple(dims)
            target = list(dims)
            if dims and self.chance(0.5):
                target[int(self.rng.integers(len(dims)))] = -1
        self.add(Node("reshape", (a,), {"shape": target}, dt, out, self.nodes[a].bounded))

    def transpose(self, dt: str) -> None:
        a = self.operand(dt)
        shape = self.nodes[a].shape
        if self.chance(0.3):
            perm = None
            out = tuple(reversed(shape))
        else:
            perm = [int(x) for x in self.rng.permutation(len(shape))]
            out = tuple(shape[p] for p in perm)
        self.add(Node("transpose", (a,), {"perm": perm}, dt, out, self.nodes[a].bounded))

    def concat(self, dt: str) -> None:
        a = self.operand(dt)
        shape = self.nodes[a].shape
        axes = [i for i, d in enumerate(shape) if d != B]
        if not axes:
            return
        ax = self.pick(axes)
        parts, size = [a], shape[ax]
        for _ in range(int(self.rng.integers(1, 3))):
            k = int(self.rng.integers(1, 4))
            want = shape[:ax] + (k,) + shape[ax + 1:]
            parts.append(self.operand(dt, want))
            size += k
        if self.chance(0.5) and len(parts) > 1:
            self.rng.shuffle(parts)
        out = shape[:ax] + (size,) + shape[ax + 1:]
        axis = ax - len(shape) if self.chance(0.3) else ax
        self.add(Node("concat", tuple(parts), {"axis": axis}, dt, out,
                      all(self.nodes[p].bounded for p in parts)))

    def getitem(self, dt: str) -> None:
        a = self.operand(dt)
        shape = self.nodes[a].shape
        if not shape:
            return
        spec, out = [], []
        ell = self.chance(0.2) and len(shape) > 1
        dims = list(shape)
        if ell:
            keep = int(self.rng.integers(0, len(dims)))
            spec.append(("ellipsis",))
            out.extend(dims[:len(dims) - keep])
            dims = dims[len(dims) - keep:]
        for d in dims:
            r = self.rng.random()
            if r < 0.1:
                spec.append(("newaxis",))
                out.append(1)
            if d == B:
                r = self.rng.random()
                if r < 0.5:
                    spec.append(("slice", None, None, None))
                    out.append(B)
                elif r < 0.7:
                    spec.append(("slice", None, None, -1))
                    out.append(B)
                else:
                    spec.append(("index", self.pick([0, -1])))
                continue
            r = self.rng.random()
            if d == 0:
                spec.append(("slice", None, None, None))
                out.append(d)
            elif r < 0.25:
                spec.append(("index", int(self.rng.integers(-d, d))))
            elif r < 0.4:
                spec.append(("slice", None, None, None))
                out.append(d)
            else:
                step = self.pick([None, 1, 2, -1, -2, 3])
                start = None if self.chance(0.3) else int(self.rng.integers(-d - 1, d + 1))
                stop = None if self.chance(0.3) else int(self.rng.integers(-d - 1, d + 1))
                n = len(range(d)[slice(start, stop, step)])
                spec.append(("slice", start, stop, step))
                out.append(n)
        self.add(Node("getitem", (a,), {"spec": spec}, dt, tuple(out), self.nodes[a].bounded))

    def tf_slice(self, dt: str) -> None:
        a = self.operand(dt)
        shape = self.nodes[a].shape
        if not shape:
            return
        begin, size, out = [], [], []
        for d in shape:
            if d == B:
                begin.append(0)
                size.append(-1)
                out.append(B)
                continue
            b = int(self.rng.integers(0, d)) if d else 0
            s = -1 if self.chance(0.3) else int(self.rng.integers(0, d - b + 1))
            begin.append(b)
            size.append(s)
            out.append(d - b if s == -1 else s)
        self.add(Node("slice", (a,), {"begin": begin, "size": size}, dt, tuple(out),
                      self.nodes[a].bounded))

    def cast(self) -> None:
        cands = [i for i, n in enumerate(self.nodes) if n.shape is not None
                 and (n.dtype == "int32" or n.bounded)]
        if not cands:
            return
        a = self.pick(cands)
        src = self.nodes[a].dtype
        dst = self.pick([d for d in ("float32", "float64", "int32") if d != src])
        self.add(Node("cast", (a,), {"dtype": dst}, dst, self.nodes[a].shape,
                      self.nodes[a].bounded or src == "int32"))

    def where(self, dt: str) -> None:
        """`tf.where(cmp(a, b), b, c)`: TF1 Select with a condition of x's shape, a vector
        over x's first axis (whole rows), or a scalar; `where_v2` broadcasting all three;
        or the coordinates of the true elements (`tf.where(cond)`, summed to a float)."""
        a = self.operand(dt)
        sa = self.nodes[a].shape
        if not self.wide:
            b = self.operand(dt, sa)
            c = self.operand(dt, sa)
            self.add(Node("where", (a, b, c), {"cmp": self.pick(COMPARE)}, dt, sa,
                          self.nodes[b].bounded and self.nodes[c].bounded))
            return
        form = self.pick(("same", "same", "rows", "scalar", "v2", "coords"))
        cmp = self.pick(COMPARE)
        if form == "coords":
            if not sa:
                return      # tf.where of a scalar condition is a run-time error
            b = self.operand(dt, sa)
            self.add(Node("where", (a, b), {"cmp": cmp, "form": form}, "float32", (), False))
            return
        if form == "v2":
            b = self.operand(dt, self._partner(sa))
            c = self.operand(dt, self._partner(sa))
            out = broadcast(sa, self.nodes[b].shape)
            out = broadcast(out, self.nodes[c].shape) if out is not None else None
            if out is None:
                return
            self.add(Node("where", (a, b, c), {"cmp": cmp, "form": form}, dt, out,
                          self.nodes[b].bounded and self.nodes[c].bounded))
            return
        x = self.operand(dt, sa)
        y = self.operand(dt, sa)
        if form == "rows" and sa:
            # a condition vector over the first axis, from two vectors of that length
            a = self.operand(dt, sa[:1])
            b = self.operand(dt, sa[:1])
        elif form == "scalar":
            a = self.operand(dt, ())
            b = self.operand(dt, ())
        else:
            form = "same"
            b = x
        self.add(Node("where", (a, b, x, y), {"cmp": cmp, "form": form}, dt, sa,
                      self.nodes[x].bounded and self.nodes[y].bounded))

    def _partner(self, sa: tuple) -> tuple:
        """A shape broadcastable against `sa` (a suffix, some dims 1, or `sa`)."""
        r = self.rng.random()
        if r < 0.4:
            return sa
        if r < 0.7:
            return sa[int(self.rng.integers(0, len(sa) + 1)):]
        return tuple(1 if self.chance(0.5) else d for d in sa)

    def shape_op(self, dt: str) -> None:
        """expand_dims, squeeze, tile, pad or gather (constant arguments)."""
        a = self.operand(dt)
        sa = self.nodes[a].shape
        bounded = self.nodes[a].bounded
        kind = self.pick(("expand_dims", "squeeze", "tile", "pad", "gather", "stack"))
        if kind == "expand_dims":
            ax = int(self.rng.integers(-len(sa) - 1, len(sa) + 1))
            k = ax % (len(sa) + 1)
            self.add(Node(kind, (a,), {"axis": ax}, dt, sa[:k] + (1,) + sa[k:], bounded))
        elif kind == "squeeze":
            ones = [k for k, d in enumerate(sa) if d == 1]
            if not ones:
                return
            axis = None if self.chance(0.4) else [self.pick(ones)]
            gone = ones if axis is None else axis
            out = tuple(d for k, d in enumerate(sa) if k not in gone)
            self.add(Node(kind, (a,), {"axis": axis}, dt, out, bounded))
        elif kind == "tile":
            if not sa:
                return
            m = [int(self.rng.integers(1, 3)) if d != B else 1 for d in sa]
            out = tuple(d if d == B else d * k for d, k in zip(sa, m))
            self.add(Node(kind, (a,), {"multiples": m}, dt, out, bounded))
        elif kind == "pad":
            if not sa:
                return
            pads = [[0, 0] if d == B else [int(self.rng.integers(0, 2)),
                                            int(self.rng.integers(0, 3))] for d in sa]
            out = tuple(d if d == B else d + lo + hi for d, (lo, hi) in zip(sa, pads))
            self.add(Node(kind, (a,), {"paddings": pads}, dt, out, bounded))
        elif kind == "gather":
            axes = [k for k, d in enumerate(sa) if d != B and d > 0]
            if not axes:
                return
            ax = self.pick(axes)
            idx = [int(i) for i in self.rng.integers(0, sa[ax], size=int(self.rng.integers(1, 4)))]
            out = sa[:ax] + (len(idx),) + sa[ax + 1:]
            self.add(Node(kind, (a,), {"indices": idx, "axis": ax}, dt, out, bounded))
        else:
            b = self.operand(dt, sa)
            ax = int(self.rng.integers(-len(sa) - 1, len(sa) + 1))
            k = ax % (len(sa) + 1)
            self.add(Node(kind, (a, b), {"axis": ax}, dt, sa[:k] + (2,) + sa[k:],
                          bounded and self.nodes[b].bounded))


    def while_loop(self, dt: str) -> None:
        """`v = body(v)` while `i < n`, n = min(k, floor(|sum(a)| * scale + 0.37)): the trip count
        depends on the fed values (and the batch size); the body reads `a` too (a captured
        tensor, so gradients reach it through the loop)."""
        a = self.operand(dt)
        n = self.nodes[a]
        fn = self.pick(("tanh", "decay", "sin"))
        c = round(float(self.rng.uniform(0.3, 0.9)), 2)
        self.add(Node("while", (a,), {"fn": fn, "c": c, "k": int(self.rng.integers(1, 6)),
                                      "scale": self.pick([0.5, 1.0, 2.0]),
                                      "maxit": self.pick([None, None, 2, 4])},
                      dt, n.shape, fn == "tanh" or n.bounded))

    def cond(self, dt: str) -> None:
        """`f(a) if sum(p) > 0 else g(b)`; with `side`, each branch also assigns a value
        of its own to one scalar variable, fetched at the end of the run (so the variable
        shows which branch ran, and every run sets it)."""
        a = self.operand(dt)
        sa = self.nodes[a].shape
        b = self.operand(dt, sa)
        pr = self.operand(dt)
        f, g = self.pick(UNARY), self.pick(UNARY)
        self.add(Node("cond", (pr, a, b), {"f": f, "g": g, "side": self.chance(0.4)}, dt, sa,
                      self.nodes[a].bounded and self.nodes[b].bounded
                      and f in _BOUNDED_UNARY and g in _BOUNDED_UNARY))


def generate(seed: int, max_ops: int = 12, wide: bool = True) -> Program:
    """The random program for `seed`. `wide=False`: the programs of the generator before it
    made placeholders of partly known shapes, TF1 Select's row and scalar conditions,
    where_v2, tf.where's coordinates and the shape ops (so seeds pinned by tests keep their
    programs)."""
    g = _Gen(seed, max_ops, wide)
    rng = g.rng
    g.leaf(g.rand_shape(int(rng.integers(0, 4)), True), "float32")
    # mostly small programs, some a few dozen ops
    n_ops = int(rng.integers(1, max_ops + 1)) if rng.random() < 0.75 else \
        int(rng.integers(max_ops, 3 * max_ops + 1))
    guard = 0
    while sum(1 for n in g.nodes if n.op not in _LEAVES) < n_ops and guard < 10 * max_ops:
        g.step()
        guard += 1
    nodes = g.nodes
    ops = [i for i, n in enumerate(nodes) if n.op not in _LEAVES] or [len(nodes) - 1]
    r = rng.random()
    mode = "forward" if r < 0.55 else ("gradients" if r < 0.8 else "train")
    float_ops = [i for i in ops if nodes[i].dtype in FLOATS and nodes[i].shape is not None]
    if mode != "forward" and not float_ops:
        mode = "forward"
    k = int(rng.integers(1, min(3, len(ops)) + 1))
    fetches = sorted({int(x) for x in rng.choice(ops, k, replace=False)} | {ops[-1]})
    prog = Program(seed, nodes, fetches)
    prog.fetch_style = g.pick(("list", "single", "dict")) if len(fetches) == 1 else \
        g.pick(("list", "dict"))
    prog.batches = (int(rng.integers(2, 5)), g.pick([1, 1, 2, 3, 5]))
    if g.chance(0.15):
        # the same tensor twice, or a placeholder / variable itself, among the fetches
        prog.extra_fetch = g.pick(("duplicate", "leaf"))
    if mode != "forward":
        prog.mode = mode
        prog.loss_node = float_ops[-1] if g.chance(0.7) else g.pick(float_ops)
        prog.loss_reduce = g.pick(("sum", "mean"))
        wrt = [i for i, n in enumerate(nodes) if n.op in ("variable", "get_variable")
               or (n.op == "placeholder" and n.dtype in FLOATS and mode == "gradients")]
        if mode == "train":
            if not any(nodes[i].op in ("variable", "get_variable") for i in wrt):
                # training needs a variable on the path: add one to the loss
                shape = tuple(1 if d == B else d for d in nodes[prog.loss_node].shape)
                dt = nodes[prog.loss_node].dtype
                g.n_vars += 1
                v = g.add(Node("variable", (), {"value": g.values(shape or (), dt),
                                                "name": f"v{g.n_vars}"}, dt, shape))
                prog.loss_node = g.add(Node("binary", (prog.loss_node, v),
                                            {"fn": "add", "operator": True}, dt,
                                            nodes[prog.loss_node].shape, False))
            prog.optimizer = g.pick(("sgd", "adam", "momentum"))
            prog.train_steps = int(rng.integers(1, 4))
        else:
            if g.chance(0.3):
                # an input the loss does not depend on: its gradient is None
                wrt.append(g.leaf(g.rand_shape(1, False), "float32"))
            prog.grad_wrt = wrt
    if g.chance(0.15) and mode != "train":
        # feed an intermediate (any tensor is feedable; what only it needs is pruned away)
        mids = [i for i in ops if i not in prog.fetches and i != prog.loss_node
                and nodes[i].dtype in FLOATS + ("int32",) and nodes[i].shape is not None]
        if mids:
            prog.fed = [g.pick(mids)]
    if g.chance(0.12):
        # a placeholder of unknown rank or dims takes feeds of other shapes: not a target
        phs = [i for i, n in enumerate(nodes) if n.op == "placeholder"
               and (n.params["static"] in ("full", "none") or not wide)]
        if g.chance(0.25):
            bad = [i for i, n in enumerate(nodes) if n.dtype in FLOATS and n.shape is not None
                   and any(d != B and d > 1 for d in n.shape)]
            if bad:
                prog.error, prog.error_target = "static_mismatch", g.pick(bad)
        elif phs:
            prog.error = g.pick(("wrong_feed_shape", "missing_feed", "bad_batch"))
            prog.error_target = g.pick(phs)
    return prog


_LEAVES = ("placeholder", "const", "variable", "get_variable")


# -- building ------------------------------------------------------------------------------------
def _unary(tfm, fn: str):
    return {"neg": tfm.negative, "abs": tfm.abs, "square": tfm.square, "sqrt": tfm.sqrt,
            "exp": tfm.exp, "log": tfm.log, "tanh": tfm.tanh, "sigmoid": tfm.sigmoid,
            "relu": tfm.nn.relu, "softplus": tfm.nn.softplus, "sin": tfm.sin, "cos": tfm.cos,
            "reciprocal": tfm.reciprocal}[fn]


_OPERATORS = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b,
              "mul": lambda a, b: a * b, "div": lambda a, b: a / b,
              "pow": lambda a, b: a ** b}


def _binary(tfm, fn: str, operator: bool):
    if operator and fn in _OPERATORS:
        return _OPERATORS[fn]
    return {"add": tfm.add, "sub": tfm.subtract, "mul": tfm.multiply, "div": tfm.divide,
            "maximum": tfm.maximum, "minimum": tfm.minimum, "pow": tfm.pow}[fn]


def _np_dtype(tfm, name: str):
    return {"float32": tfm.float32, "float64": tfm.float64, "int32": tfm.int32}[name]


def build(tfm, prog: Program, graph, perturb: float = 0.0) -> dict:
    """Build `prog` into `graph` with the TF1-style module `tfm`; `perturb` scales every float
    constant and initial value by 1 +- perturb (the conditioning estimate of the runner).

    Returns {"fetches": fetch structure, "placeholders": {node index: tensor},
    "init": initializer op or None, "train": train op or None, "none_grads": [bool]}."""
    out: dict = {}
    phs: dict = {}
    t: dict = {}
    sides: list = []     # the variables cond branches assign
    rng = np.random.default_rng([prog.seed, 7])

    def jitter(v):
        a = np.asarray(v)
        if not perturb or a.dtype.kind != "f":
            return v
        a = a * (1 + perturb * rng.choice([-1.0, 1.0], size=a.shape))
        return a.astype(np.asarray(v).dtype) if isinstance(v, np.ndarray) else float(a)

    with graph.as_default():
        for i, n in enumerate(prog.nodes):
            p = n.params
            if n.op in ("const", "variable", "get_variable") and n.dtype in FLOATS:
                p = dict(p, value=jitter(p["value"]))
            dt = _np_dtype(tfm, n.dtype)
            if n.op == "placeholder":
                static = p["static"]
                if static == "unknown_rank":
                    shape = None
                elif static == "full":
                    shape = list(n.shape)
                elif static == "partial":
                    shape = [None if d == B or k in p["unknown"] else d
                             for k, d in enumerate(n.shape)]
                else:
                    shape = [None if d == B else d for d in n.shape]
                t[i] = phs[i] = tfm.placeholder(dt, shape, name=f"p{i}")
            elif n.op == "const":
                v = p["value"]
                if p["form"] == "scalar":
                    t[i] = tfm.constant(v, dtype=dt)
                elif p["form"] == "list":
                    t[i] = tfm.constant(np.asarray(v).tolist(), dtype=dt)
                else:
                    t[i] = tfm.constant(v)
            elif n.op == "variable":
                t[i] = tfm.Variable(p["value"], name=p["name"])
            elif n.op == "get_variable":
                t[i] = tfm.get_variable(p["name"], shape=list(n.shape), dtype=dt,
                                        initializer=tfm.constant_initializer(p["value"]))
            elif n.op == "cond" and p["side"]:
                side = tfm.Variable(np.zeros((), n.dtype), trainable=False, name=f"side{i}")
                t[i] = _build_op(tfm, n, [t[a] for a in n.args], prog.nodes, side)
                # read after the branch's assign: a fetch of the variable itself (or of an
                # identity of its snapshot) has no order against the assign in the same run;
                # read_value() under a control dependency is a read made after the cond
                with tfm.control_dependencies([t[i]]):
                    sides.append(side.read_value())
            else:
                t[i] = _build_op(tfm, n, [t[a] for a in n.args], prog.nodes)
        if prog.error == "static_mismatch":
            # a constant whose shape can never broadcast against the target: a build error
            n = prog.nodes[prog.error_target]
            k = max(j for j, d in enumerate(n.shape) if d != B and d > 1)
            bad = [1 if d == B else d for d in n.shape]
            bad[k] += 1
            tfm.add(t[prog.error_target], tfm.constant(np.ones(bad, n.dtype)))
        for i in prog.fed:
            phs[i] = t[i]
        fetch_t = [t[i] for i in prog.fetches]
        result = {"placeholders": phs, "init": None, "train": None, "none_grads": []}
        if prog.mode != "forward":
            red = tfm.reduce_sum if prog.loss_reduce == "sum" else tfm.reduce_mean
            loss = red(tfm.cast(t[prog.loss_node], tfm.float32))
            if prog.mode == "gradients":
                grads = tfm.gradients(loss, [t[i] for i in prog.grad_wrt])
                result["none_grads"] = [g is None for g in grads]
                fetch_t = [loss] + [g for g in grads if g is not None] + fetch_t
            else:
                opt = {"sgd": lambda: tfm.train.GradientDescentOptimizer(0.05),
                       "adam": lambda: tfm.train.AdamOptimizer(0.01),
                       "momentum": lambda: tfm.train.MomentumOptimizer(0.05, 0.9)}
                result["train"] = opt[prog.optimizer]().minimize(loss)
                if prog.optimizer == "adam":
                    # Adam's first step is lr * sign(g) wherever |g| >> its epsilon: the
                    # runner fetches g to see whether rounding decides those signs
                    grads = tfm.gradients(loss, tfm.trainable_variables())
                    result["grads"] = [g for g in grads if g is not None]
                fetch_t = [loss] + fetch_t
        if sides or any(n.op in ("variable", "get_variable") for n in prog.nodes):
            result["init"] = tfm.global_variables_initializer()
        fetch_t = fetch_t + sides
        if prog.mode == "train":
            fetch_t = fetch_t + [t[i] for i, n in enumerate(prog.nodes)
                                 if n.op in ("variable", "get_variable")]
        if prog.extra_fetch == "duplicate":
            fetch_t = fetch_t + [fetch_t[0]]
        elif prog.extra_fetch == "leaf":
            leaves = [i for i, n in enumerate(prog.nodes) if n.op != "const" and not n.args
                      and i != prog.error_target]
            if leaves:
                fetch_t = fetch_t + [t[leaves[-1]]]
    if prog.fetch_style == "single" and len(fetch_t) == 1:
        out = fetch_t[0]
    elif prog.fetch_style == "dict":
        out = {f"f{k}": x for k, x in enumerate(fetch_t)}
    else:
        out = list(fetch_t)
    result["fetches"] = out
    return result


def _build_while(tfm, n: Node, a):
    p = n.params
    dt = a.dtype
    c = tfm.constant(p["c"], dtype=dt)
    # + 0.37: sums that are whole numbers by construction (a softmax's rows add up to 1) would
    # put the floor on a rounding boundary, where one ulp decides the trip count
    count = tfm.cast(tfm.floor(tfm.abs(tfm.reduce_sum(a)) * p["scale"] + 0.37), tfm.int32)
    limit = tfm.minimum(count, p["k"])

    def body(i, v):
        if p["fn"] == "tanh":
            v = tfm.tanh(v * c + a)
        elif p["fn"] == "decay":
            v = v * c + a * (1.0 - c)
        else:
            v = tfm.sin(v) * c + a
        return i + 1, v

    kw = {} if p["maxit"] is None else {"maximum_iterations": p["maxit"]}
    _, out = tfm.while_loop(lambda i, v: i < limit, body, [tfm.constant(0), a], **kw)
    return out


def _build_cond(tfm, n: Node, xs: list, side):
    p = n.params
    pred = tfm.reduce_sum(xs[0]) > 0

    def branch(fn, x, mark):
        y = _unary(tfm, fn)(x)
        if side is None:
            return y
        s = tfm.reduce_sum(y) + mark
        with tfm.control_dependencies([tfm.assign(side, s)]):
            return tfm.identity(y)

    return tfm.cond(pred, lambda: branch(p["f"], xs[1], 0.0),
                    lambda: branch(p["g"], xs[2], 1000.0))


def _build_op(tfm, n: Node, xs: list, nodes: list, side=None):
    p = n.params
    if n.op == "while":
        return _build_while(tfm, n, xs[0])
    if n.op == "cond":
        return _build_cond(tfm, n, xs, side)
    if n.op == "unary":
        return _unary(tfm, p["fn"])(xs[0])
    if n.op == "binary":
        return _binary(tfm, p["fn"], p["operator"])(xs[0], xs[1])
    if n.op == "binary_scalar":
        s = p["scalar"]
        f = _binary(tfm, p["fn"], p["operator"])
        return f(s, xs[0]) if p["left"] else f(xs[0], s)
    if n.op == "reduce":
        fn = {"sum": tfm.reduce_sum, "mean": tfm.reduce_mean, "max": tfm.reduce_max,
              "min": tfm.reduce_min}[p["fn"]]
        if p["legacy"]:
            return fn(xs[0], reduction_indices=p["axis"], keep_dims=p["keepdims"])
        return fn(xs[0], axis=p["axis"], keepdims=p["keepdims"])
    if n.op == "matmul":
        if p["operator"]:
            return xs[0] @ xs[1]
        return tfm.matmul(xs[0], xs[1], transpose_a=p["ta"], transpose_b=p["tb"])
    if n.op == "window":
        k, s, pad = p["k"], [1, p["stride"], p["stride"], 1], p["padding"]
        if p["kind"] == "conv":
            return tfm.nn.conv2d(xs[0], xs[1], s, pad, dilations=[1, p["dil"], p["dil"], 1])
        if p["kind"] == "depthwise":
            return tfm.nn.depthwise_conv2d(xs[0], xs[1], s, pad, rate=[p["dil"], p["dil"]])
        pool = tfm.nn.max_pool if p["kind"] == "max_pool" else tfm.nn.avg_pool
        return pool(xs[0], [1, k[0], k[1], 1], s, pad)
    if n.op == "softmax":
        return tfm.nn.softmax(xs[0], axis=p["axis"])
    if n.op == "log_softmax":
        return tfm.nn.log_softmax(xs[0], axis=p["axis"])
    if n.op == "xent":
        return tfm.nn.softmax_cross_entropy_with_logits_v2(labels=xs[0], logits=xs[1])
    if n.op == "reshape":
        return tfm.reshape(xs[0], p["shape"])
    if n.op == "transpose":
        return tfm.transpose(xs[0], p["perm"])
    if n.op == "concat":
        return tfm.concat(xs, p["axis"])
    if n.op == "getitem":
        key = []
        for s in p["spec"]:
            if s[0] == "ellipsis":
                key.append(Ellipsis)
            elif s[0] == "newaxis":
                key.append(tfm.newaxis)
            elif s[0] == "index":
                key.append(s[1])
            else:
                key.append(slice(s[1], s[2], s[3]))
        return xs[0][tuple(key)]
    if n.op == "slice":
        return tfm.slice(xs[0], p["begin"], p["size"])
    if n.op == "cast":
        return tfm.cast(xs[0], _np_dtype(tfm, p["dtype"]))
    if n.op == "where":
        cmp = {"less": tfm.less, "greater": tfm.greater, "less_equal": tfm.less_equal,
               "greater_equal": tfm.greater_equal, "equal": tfm.equal,
               "not_equal": tfm.not_equal}[p["cmp"]]
        form = p.get("form", "old")
        if form == "old":
            return tfm.where(cmp(xs[0], xs[1]), xs[1], xs[2])
        c = cmp(xs[0], xs[1])
        if form == "coords":
            return tfm.reduce_sum(tfm.cast(tfm.where(c), tfm.float32) + 1.0)
        if form == "v2":
            return tfm.where_v2(c, xs[1], xs[2])
        return tfm.where(c, xs[2], xs[3])
    if n.op == "expand_dims":
        return tfm.expand_dims(xs[0], p["axis"])
    if n.op == "squeeze":
        return tfm.squeeze(xs[0], p["axis"])
    if n.op == "tile":
        return tfm.tile(xs[0], p["multiples"])
    if n.op == "pad":
        return tfm.pad(xs[0], p["paddings"])
    if n.op == "gather":
        return tfm.gather(xs[0], p["indices"], axis=p["axis"])
    if n.op == "stack":
        return tfm.stack([xs[0], xs[1]], axis=p["axis"])
    raise ValueError(f"unknown program op {n.op}")


# -- feeds ---------------------------------------------------------------------------------------
def feed_values(prog: Program, batch: int, run_seed: int, perturb: float = 0.0) -> dict:
    """{placeholder node index: array} for one run with batch size `batch`."""
    rng = np.random.default_rng([prog.seed, batch, run_seed])
    vals = {}
    for i, n in enumerate(prog.nodes):
        if n.op != "placeholder" and i not in prog.fed:
            continue
        shape = concrete(n.shape, batch)
        if n.dtype == "int32":
            hi = 6 if (i + prog.seed) % 5 else 70000
            v = rng.integers(-hi, hi, size=shape).astype(np.int32)
        else:
            v = rng.uniform(-2, 2, size=shape).astype(n.dtype)
            if perturb:
                v = (v * (1 + perturb * rng.choice([-1.0, 1.0], size=shape))).astype(n.dtype)
        vals[i] = v
    return vals


def error_feed(prog: Program, vals: dict, batch: int) -> dict:
    """The feeds of an error-mode run: one placeholder's feed made wrong or left out."""
    vals = dict(vals)
    i = prog.error_target
    n = prog.nodes[i]
    if prog.error == "missing_feed":
        del vals[i]
    elif prog.error == "wrong_feed_shape":
        shape = list(concrete(n.shape, batch))
        if shape and any(d != B for d in n.shape):
            k = max(j for j, d in enumerate(n.shape) if d != B)
            shape[k] += 1
        else:
            shape = shape + [2]
        vals[i] = np.zeros(shape, n.dtype)
    elif prog.error == "bad_batch":
        shape = concrete(n.shape, batch + 1)
        vals[i] = np.ones(shape, n.dtype)
    return vals
