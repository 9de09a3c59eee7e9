"""Splitting a long run of compilable ops into kernels of a size Numba compiles quickly.

Why: Numba's compile time per function grows faster than its length (its SSA and dataflow
passes walk every variable across every block, and LLVM optimises the whole function at
once): one 240-op forward graph took 22 s as one function and 16 s as kernels of at most 48
ops. Split, the cost is linear in the graph, and nothing is too large to compile.

Splitting has a run-time price, paid on every step: each value crossing a cut is returned by
one kernel as a new array (boxed into a NumPy object) and passed into the next, and each
kernel call costs a Python-level dispatch. A training step crosses many values (the forward
activations the backward pass reads), so a run stays one kernel while its `weight` is at most
`SPLIT_ABOVE`, and always when it has at most `WHOLE_BELOW` ops (the bound before the weight).
Measured with one thread (median warm step, Numba kernels, JITFLOW_COMPILE=sync, Numba's
compile time in brackets):

    tanh RNN h128x20 + SGD (360 ops): split 0.98 ms [11.9 s], one kernel 0.77 ms [11.2 s]
    tanh RNN h128x20 + Adam (471 ops): split 1.32 ms [12.3 s], one kernel 0.89 ms [9.6 s]
    LeNet CNN b32 + Adam (~250 ops): split 41.7 ms, one kernel 39.3 ms
    compile_scaling train 50 (381 ops): 0.23 -> 0.17 ms [7.9 -> 6.1 s]
    compile_scaling train 100 (750 ops): 0.44 -> 0.34 ms [15.5 -> 18.4 s]
    compile_scaling forward 320 (385 ops): 0.63 -> 0.58 ms [21.5 -> 33.8 s]
    compile_scaling forward 600 (720 ops): 1.18 -> 1.08 ms [39 -> 104 s]
    compile_scaling forward 200 (243 ops): 0.39 -> 0.35 ms [12.8 -> 16.1 s]
    tf.metrics program's update (226 ops): [10 -> 15 s]

Training steps gain both ways up to a few hundred ops. The graphs whose Numba compile grew
when whole are the ones full of innermost-axis reductions (each becomes 32 lanes of partial
sums, long IR for Numba's superlinear passes), so the bound counts such a reduction as
`_LANE_REDUCTION_WEIGHT` ops (`weight`): the RNN steps above (2 of them) and the CNN (4) stay
whole; the forward graphs (33-53), the metrics update (24) and train 50 (19; its whole kernel
was the better one, a loss this bound accepts) are cut.

Tier 1 compiles any length in linear time and serves while Numba compiles in the background,
so a slower Numba compile delays only the upgrade.

Where to cut is decided by content, not by position (content-defined chunking): every op gets
a token from its type, dtypes and how its inputs are wired (the distance back to each nearby
input's producer, never names), a hash over the tokens of the last few ops is computed at
every position, and each kernel ends where that hash is smallest within the range of allowed
lengths (see `cut_points`). Repeated structure is therefore cut at the same place in every
repetition: the steps of an unrolled RNN, the per-variable updates of an optimizer, or the
same layers in a training and an evaluation plan become kernels with identical source, which
the kernel cache compiles once (it keys kernels by their source, see cache.py). No kernel is
longer than `window` ops.
"""
from __future__ import annotations

import hashlib
import os

import numpy as np

__all__ = ["split", "weight", "SPLIT_ABOVE", "WINDOW"]

SPLIT_ABOVE = int(os.environ.get("JITFLOW_SPLIT_ABOVE", 512))  # runs this heavy stay one kernel
WHOLE_BELOW = 96     # runs this long stay one kernel whatever their weight
WINDOW = int(os.environ.get("JITFLOW_KERNEL_OPS", 48))        # longest kernel of a split run
_CONTEXT = 3        # tokens hashed together at each position
_NEAR = 8           # inputs from further back count as "from outside" in a token


def _token(op, pos: int, where: dict) -> str:
    wires = []
    for t in op.inputs:
        p = where.get(t.op)
        near = p is not None and pos - p <= _NEAR
        wires.append(f"{pos - p}.{t.value_index}" if near else "x")
    outs = ",".join(t.dtype.name for t in op.outputs)
    return f"{op.type}({';'.join(wires)})->{outs}"


def _hashes(ops) -> list:
    where = {op: i for i, op in enumerate(ops)}
    tokens = [_token(op, i, where) for i, op in enumerate(ops)]
    out = []
    for i in range(len(ops)):
        text = "|".join(tokens[max(0, i - _CONTEXT + 1):i + 1])
        out.append(int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(),
                                  "little"))
    return out


def _crossings(ops) -> list:
    """For each position i: how many values made at or before i are used after it (what a cut
    after i hands from one kernel to the next). Constants (repeated in each chunk) and
    variables (kernel arguments) do not count."""
    where = {op: i for i, op in enumerate(ops)}
    last: dict = {}
    for i, op in enumerate(ops):
        for t in op.inputs:
            p = where.get(t.op)
            if p is not None and p < i and t.op.type not in ("Const", "VariableV2"):
                last[(p, t.value_index)] = i
    diff = [0] * (len(ops) + 1)
    for (p, _), q in last.items():
        diff[p] += 1
        diff[q] -= 1
    out, run = [], 0
    for d in diff[:-1]:
        run += d
        out.append(run)
    return out


def cut_points(ops, window: int) -> list:
    """Positions after which `ops` is cut.

    Each chunk ends, among the positions that give it between window/2 and window ops, at one
    where the fewest values cross the cut (each crossing value is stored by one kernel and
    read back by the next, where one kernel would have kept it in a register: an optimizer's
    per-variable update cut in the middle stores and rereads two arrays of the variable's
    size), and among those at the rightmost holding the smallest hash. In a stretch that
    repeats with a period of at most window/2 both are periodic, so that is the same phase of
    the repetition every time, and the chunks there all have the same length and content."""
    h = _hashes(ops)
    x = _crossings(ops)
    n = len(h)
    cuts = []
    start = 0
    lo = max(1, window // 2)
    while n - start > window:
        best = start + lo - 1
        for i in range(best, start + window):
            if (x[i], h[i]) <= (x[best], h[best]):
                best = i
        cuts.append(best)
        start = best + 1
    return cuts


# what Numba's compile time sees in one op: an innermost-axis reduction becomes _LANES partial
# sums (emit.py), a loop nest several times an elementwise op's IR. Calibrated on the graphs in
# the module doc: the smallest that compiled slower whole, the metrics update (226 ops, 24 such
# reductions), weighs 514.
_LANE_REDUCTION_WEIGHT = 13
_ROW_OPS = frozenset({"Softmax", "LogSoftmax", "SoftmaxCrossEntropyWithLogits",
                      "SparseSoftmaxCrossEntropyWithLogits"})


def _lane_reduction(op) -> bool:
    """Whether `op` reduces along its input's innermost axis (a row reduction, or all axes)."""
    if op.type in _ROW_OPS:
        return True
    d = getattr(op, "op_def", None)
    if d is None or d.kind != "reduce":
        return False
    if op.type == "Unbroadcast":   # sums over the axes input 1's shape was broadcast along
        from jitflow.ops.math.common import unbroadcast_axes
        g, x = (t.shape.as_tuple() for t in op.inputs[:2])
        if g is None or x is None:
            return True
        if len(g) < len(x):   # not a valid Unbroadcast: its lowering refuses it
            return False
        axes = unbroadcast_axes([d == 1 for d in g], [d == 1 for d in x])
        return len(g) - 1 in axes
    axis = op.attrs.get("axis")   # a tuple (None: every axis), an int for ArgMax/ArgMin
    rank = op.inputs[0].shape.ndims
    if axis is None or rank is None:
        return True
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    return rank > 0 and any(int(a) % rank == rank - 1 for a in axes)


def weight(ops) -> int:
    """The length of a run as `SPLIT_ABOVE` counts it: one per op, `_LANE_REDUCTION_WEIGHT`
    per innermost-axis reduction."""
    return len(ops) + (_LANE_REDUCTION_WEIGHT - 1) * sum(map(_lane_reduction, ops))


def split(ops: list, above: int = None, window: int = None) -> list:
    """`ops` as one list when its `weight` is at most `above` (or it has at most `WHOLE_BELOW`
    ops, and `above` is not smaller), else as chunks cut by content.

    Constants used by a chunk but produced in an earlier one are repeated in the chunk, so a
    kernel sees its scalar constants as literals wherever they were created; so are variable
    reads the chunks in between cannot change (see `_read_of`)."""
    above = SPLIT_ABOVE if above is None else above
    window = WINDOW if window is None else window
    if len(ops) <= min(above, WHOLE_BELOW) or weight(ops) <= above:
        return [ops]
    chunks, start = [], 0
    for c in cut_points(ops, window):
        chunks.append(ops[start:c + 1])
        start = c + 1
    if start < len(ops):
        chunks.append(ops[start:])
    owner = {}
    touched = []   # per chunk: the variables its ops use other than by a plain read
    for k, chunk in enumerate(chunks):
        mine = set()
        for op in chunk:
            owner[op] = k
            if _read_of(op) is None:
                mine.update(t.op for t in op.inputs if t.op.type == "VariableV2")
        touched.append(mine)
    shape_like = _shape_computations(ops)
    out = []
    for k, chunk in enumerate(chunks):
        out.append(_repeated(chunk, k, owner, shape_like, touched) + chunk)
    return out


def _repeated(chunk: list, k: int, owner: dict, shape_like: set, touched: list) -> list:
    """What chunk `k` reads from earlier chunks and computes again itself, in graph order:
    constants, shape computations (with the ones they read in turn), and variable reads that
    no chunk from the read's own up to this one may write."""
    local = set(chunk)
    extra: list = []
    seen: set = set()
    for op in chunk:
        for t in op.inputs:
            # depth-first, producers before their readers
            stack = [(t.op, False)]
            while stack:
                src, done = stack.pop()
                if done:
                    extra.append(src)
                    continue
                if src in local or src in seen or owner.get(src, k) >= k:
                    continue
                if src.type != "Const" and src not in shape_like:
                    var = _read_of(src)
                    if var is None or any(var in touched[j] for j in range(owner[src], k)):
                        continue
                seen.add(src)
                stack.append((src, True))
                stack.extend((u.op, False) for u in reversed(src.inputs))
    return extra


# ops that compute integer shape values from other shapes: repeated in a chunk that reads them
# (as constants are), so `tf.zeros([tf.shape(x)[0], n])` or a reshape to a computed shape
# lowers with dims known symbolically even when a cut falls between the shape and its use
_SHAPE_SOURCES = frozenset({"Shape", "Size", "Rank"})
_SHAPE_ARITH = frozenset({"StridedSlice", "Slice", "Pack", "ConcatV2", "Concat", "Cast",
                          "Add", "AddV2", "Sub", "Mul", "FloorDiv", "Maximum", "Minimum",
                          "Prod", "Sum", "Reshape", "ExpandDims", "Squeeze", "Identity"})


def _shape_computations(ops) -> set:
    out: set = set()
    for op in ops:
        if op.type in _SHAPE_SOURCES:
            out.add(op)
        elif (op.type in _SHAPE_ARITH and op.outputs
              and all(t.dtype.name in ("int32", "int64") for t in op.outputs)
              and all(t.op.type == "Const" or t.op in out for t in op.inputs)):
            out.add(op)
    return out


def _read_of(op):
    """The variable (VariableV2 op) that `op` reads when it is a plain read (an Identity of the
    variable without control inputs), else None.

    A chunk using a read made in an earlier chunk repeats the read when no chunk from that
    one up to this one may write the variable (uses it other than by a plain read): it then
    reads the same value from the variable itself, and the earlier kernel need not hand over
    a copy (a kernel result that is a variable is copied, since later kernels may write the
    variable in place). The chunk's own writes are ordered by its kernel."""
    if op.type != "Identity" or len(op.inputs) != 1 or getattr(op, "control_inputs", ()):
        return None
    src = op.inputs[0].op
    return src if src.type == "VariableV2" else None
