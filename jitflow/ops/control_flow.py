"""Control flow: `tf.cond`, `tf.case`, `tf.while_loop`, `tf.Assert`, `map_fn`/`scan`/folds.

`cond` and `while_loop` are real control flow (see `jitflow.ops.functional`): a cond runs only
its taken branch (side effects included) and a while loop runs a trip count decided at run
time, its body compiled once. `CondSelect`/`CondPick` stay registered as elementwise and
whole-tensor selects. `map_fn`, `scan`, `foldl` and `foldr` unroll over a leading dimension
known when the graph is built and use a while loop over a TensorArray otherwise.
"""
from __future__ import annotations

import collections.abc
import contextlib
from typing import Callable, Optional

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.core import errors
from jitflow.ops import functional as _fn
from jitflow.core import structure as _structure
from jitflow.core.structure import flatten, pack_sequence_as
from jitflow.core.graph import (Operation, Tensor, convert_to_tensor, get_default_graph, make_op,
                                name_scope)
from jitflow.ops.registry import Example, register
from jitflow.core.shapes import TensorShape, as_shape

__all__ = [
    "cond", "case", "while_loop", "Assert", "assert_equal", "assert_none_equal", "assert_less",
    "assert_less_equal", "assert_greater", "assert_greater_equal", "assert_positive",
    "assert_negative", "assert_non_negative", "assert_non_positive", "assert_rank", "map_fn",
    "scan", "foldl", "foldr",
]
NAMESPACES = {"debugging": ["Assert", "assert_equal", "assert_none_equal", "assert_less",
                            "assert_less_equal", "assert_greater", "assert_greater_equal",
                            "assert_positive", "assert_negative", "assert_non_negative",
                            "assert_non_positive", "assert_rank"]}

# -- CondSelect / CondPick ------------------------------------------------------------------------
def _check_pred(op) -> None:
    p = op.inputs[0]
    if not p.dtype.is_bool:
        raise TypeError(f"Input 'pred' of '{op.type}' Op has type {p.dtype.name} that does not "
                        "match expected type of bool.")
    if p.shape.ndims not in (None, 0):
        raise ValueError(f"Shape must be rank 0 but is rank {p.shape.ndims} for "
                         f"'{op.name}' (op: '{op.type}'): the predicate of cond is a scalar")


def _merged_shape(a: TensorShape, b: TensorShape) -> TensorShape:
    """TF1's Merge shape: dims known where both branches agree, else unknown."""
    if a.ndims is None or b.ndims is None or a.ndims != b.ndims:
        return TensorShape(None)
    return TensorShape([x if x == y else None for x, y in zip(a.as_list(), b.as_list())])


def _cond_infer(op):
    _check_pred(op)
    _, a, b = op.inputs
    if a.dtype != b.dtype:
        raise TypeError(f"Input 'false' of '{op.type}' Op has type {b.dtype.name} that does "
                        f"not match type {a.dtype.name} of argument 'true'.")
    return [(a.dtype, _merged_shape(a.shape, b.shape))]


def _cond_select_infer(op):
    out = _cond_infer(op)
    _, a, b = op.inputs
    if not a.shape.is_compatible_with(b.shape):
        raise ValueError(f"CondSelect needs branches of compatible shapes, got {a.shape} and "
                         f"{b.shape} (use CondPick)")
    return out


def _pick_ref(op, p, a, b):
    return a if bool(p) else b


def _cond_select_grad(op, g):
    from jitflow.ops.math.common import zeros_like_of
    p = op.inputs[0]
    zero = zeros_like_of(g)
    return [None, make_op("CondSelect", [p, g, zero], name="CondSelectGrad").outputs[0],
            make_op("CondSelect", [p, zero, g], name="CondSelectGrad").outputs[0]]


def _cond_pick_grad(op, g):
    from jitflow.ops.math.common import zeros_like_of
    p, a, b = op.inputs
    return [None, make_op("CondPick", [p, g, zeros_like_of(a)], name="CondPickGrad").outputs[0],
            make_op("CondPick", [p, zeros_like_of(b), g], name="CondPickGrad").outputs[0]]


def _select_example(np_true, np_false, shapes, id_):
    return Example(
        build=lambda p, a, b: make_op("CondSelect", [p > 0, a, b]).outputs[0],
        inputs=shapes, id=id_,
        expect=lambda p, a, b: np_true(a, b) if p > 0 else np_false(a, b))


register("CondSelect", infer=_cond_select_infer, ref=_pick_ref, grad=_cond_select_grad,
         kind="elementwise", scalar="select", default_name="Merge",
         doc="A select by a scalar predicate: input 1 when it is true, else input 2 (both "
             "computed; same shape). `tf.cond` runs only its taken branch (the If op).",
         examples=[_select_example(lambda a, b: a, lambda a, b: b, [(), (2, 3), (2, 3)],
                                   "same"),
                   _select_example(lambda a, b: a, lambda a, b: b, [(), (3,), (3,)],
                                   "vector")])
register("CondPick", infer=_cond_infer, ref=_pick_ref, grad=_cond_pick_grad, kind="other",
         default_name="Merge",
         doc="A whole-tensor select by a scalar predicate: the input it picks, whatever its "
             "shape (both computed).",
         examples=[Example(
             build=lambda p, a, b: make_op("CondPick", [p > 0, a, b]).outputs[0],
             inputs=[(), (2,), (3,)], id="shapes",
             expect=lambda p, a, b: a if p > 0 else b)])


# -- cond -----------------------------------------------------------------------------------------
def _same_structure(a, b) -> bool:
    """Whether `a` and `b` nest alike (sequence types not compared, as TF1's cond does not)."""
    try:
        _structure.assert_same_structure(a, b, check_types=False)
    except ValueError:
        return False
    return True


def cond(pred, true_fn: Optional[Callable] = None, false_fn: Optional[Callable] = None,
         strict: bool = False, name: Optional[str] = None, fn1=None, fn2=None):
    """`tf.cond`: `true_fn()` if `pred` else `false_fn()`; only the taken branch runs.

    Each branch is built in its own region of the graph and becomes a sub-plan of one `If`
    op (see `jitflow.ops.functional`): assignments, prints and assertions in a branch run
    only when it is taken, and gradients reach only the taken branch. Returns the branches'
    common structure of tensors (an Operation where both branches return operations); with
    `strict=False` a one-element list or tuple is unpacked, as TF1 does.
    """
    return build_cond(pred, true_fn, false_fn, strict, name, fn1, fn2)


def build_cond(pred, true_fn=None, false_fn=None, strict: bool = False, name=None, fn1=None,
               fn2=None, op_name: Optional[str] = None):
    """`cond`, with the `If` op named `op_name` (a full name, outside any scope) when given:
    how `jitflow.serialize` rebuilds a GraphDef's If node under the node's own name."""
    if fn1 is not None:
        if true_fn is not None:
            raise TypeError("cond(): true_fn and fn1 may not be set simultaneously.")
        true_fn = fn1
    if fn2 is not None:
        if false_fn is not None:
            raise TypeError("cond(): false_fn and fn2 may not be set simultaneously.")
        false_fn = fn2
    if not callable(true_fn):
        raise TypeError("true_fn must be callable.")
    if not callable(false_fn):
        raise TypeError("false_fn must be callable.")
    if isinstance(pred, (bool, np.bool_)):
        raise TypeError("pred must not be a Python bool")
    with name_scope(name, "cond", [pred]):
        p = convert_to_tensor(pred, name="pred")
        if not p.dtype.is_bool:
            raise TypeError(f"pred must be a boolean tensor, got {p.dtype.name}")
        if p.shape.ndims not in (None, 0):
            raise ValueError(f"Shape must be rank 0 but is rank {p.shape.ndims}: the pred of "
                             "cond must be a scalar")
        graph = get_default_graph()
        built = []
        for fn in (true_fn, false_fn):
            with _fn.Region(graph) as region:
                res = fn()
                flat = flatten(res) if res is not None else []
                conv = [x if isinstance(x, Operation) else convert_to_tensor(x) for x in flat]
            built.append((region, res, conv))
        (r_t, res_t, flat_t), (r_f, res_f, flat_f) = built
        if res_t is None or res_f is None or not flat_t:
            raise ValueError("true_fn and false_fn must return at least one result.")
        if not _same_structure(res_t, res_f):
            raise ValueError(f"The two structures don't have the same nested structure.\n\n"
                             f"First structure: {res_t!r}\n\nSecond structure: {res_f!r}")
        outs_t, outs_f, targets_t, targets_f, kinds = [], [], [], [], []
        for a, b in zip(flat_t, flat_f):
            if isinstance(a, Operation) or isinstance(b, Operation):
                if not (isinstance(a, Operation) and isinstance(b, Operation)):
                    raise ValueError("Outputs of true_fn and false_fn must both be operations "
                                     f"or both tensors: {a!r}, {b!r}")
                targets_t.append(a)
                targets_f.append(b)
                kinds.append("op")
                continue
            if a.dtype.base_dtype != b.dtype.base_dtype:
                raise ValueError("Outputs of true_fn and false_fn must have the same type: "
                                 f"{a.dtype.name}, {b.dtype.name}")
            outs_t.append(a)
            outs_f.append(b)
            kinds.append("tensor")
        branches = [_Branch(r_t, outs_t, targets_t), _Branch(r_f, outs_f, targets_f)]
        captures: list = []
        hoisted: list = []
        for br in branches:
            for t in br.captures:
                if t not in captures:
                    captures.append(t)
            hoisted += [c for c in br.hoisted if c not in hoisted]
        for br in branches:
            br.cap_index = [captures.index(t) for t in br.captures]
        spec = _CondSpec(branches, [_merged_shape(a.shape, b.shape)
                                    for a, b in zip(outs_t, outs_f)])
        with graph.name_scope(None) if op_name else contextlib.nullcontext():
            op = graph.create_op("If", [p] + captures, {"cond": spec}, name=op_name or "Merge",
                                 control_inputs=hoisted)
        it = iter(op.outputs)
        out = [op if k == "op" else next(it) for k in kinds]
        result = pack_sequence_as(res_t, out)
        if not strict and isinstance(result, (list, tuple)) and len(result) == 1 \
                and not hasattr(result, "_fields"):
            result = result[0]
        return result


class _Branch:
    """One branch of a cond: its region, outputs, run-only ops, captures and sub-plan."""

    def __init__(self, region, outs: list, targets: list) -> None:
        self.region = region
        self.outs = outs
        self.targets = targets
        self.captures, self.hoisted, _ = _fn.analyze(region, outs, [], targets)
        self.cap_index: list = []
        self.saved: list = []   # branch tensors its gradient reads, kept when it runs
        self._sub = None
        self._sub_saved = -1

    @property
    def sub(self):
        """The branch's sub-plan: its outputs, then the saved tensors."""
        if self._sub is None or self._sub_saved != len(self.saved):
            self._sub = _fn.SubPlan(self.region, self.outs + self.saved, self.captures,
                                    self.targets)
            self._sub_saved = len(self.saved)
        return self._sub


class _CondSpec:
    def __init__(self, branches: list, shapes: list) -> None:
        self.branches = branches
        self.shapes = shapes

    def nested_writes(self) -> set:
        return set().union(*(br.sub.writes for br in self.branches))

    def __repr__(self) -> str:
        return "<branches>"


def _if_infer(op):
    _check_pred(op)
    spec = op.attrs["cond"]
    # the last output keeps the values of the taken branch that its gradient reads
    return [(t.dtype, s) for t, s in zip(spec.branches[0].outs, spec.shapes)] + \
        [(_dtypes.variant, TensorShape([]))]


def _if_ref(op, pred, *caps, ctx):
    spec = op.attrs["cond"]
    caps = _fn.resolve_inputs(caps, ctx)
    br = spec.branches[0 if bool(pred) else 1]
    vals = br.sub.run([caps[i] for i in br.cap_index], ctx)
    n = len(br.outs)
    return tuple(vals[:n]) + (_fn.box(vals[n:]),)


class _CondGradSpec:
    def __init__(self, subs: list, cap_grad_index: list, n_caps: int) -> None:
        # per branch: (SubPlan, output per fetch, capture indices, saved positions)
        self.subs = subs
        self.cap_grad_index = cap_grad_index  # union capture index of each IfGrad output
        self.n_caps = n_caps

    def nested_writes(self) -> set:
        return set().union(*(sub.writes for sub, _, _, _ in self.subs))

    def __repr__(self) -> str:
        return "<branch gradients>"


def _if_grad(op, *gs):
    spec = op.attrs["cond"]
    graph = op.graph
    caps = list(op.inputs[1:])
    diff_out = [k for k, t in enumerate(op.outputs[:-1]) if _fn.is_differentiable(t)]
    diff_cap = [j for j, t in enumerate(caps) if _fn.is_differentiable(t)]
    if not diff_out or not diff_cap:
        return [None] * len(op.inputs)
    # gradients of a branch are built by tf.gradients, a layer above the ops
    from jitflow.core.gradients import gradients
    subs = []
    with _fn.Region(graph) as back:
        g_phs = [_fn.loop_var(op.outputs[k].dtype, op.outputs[k].shape, name="grad_in",
                              owner="cond gradient") for k in diff_out]
        for br in spec.branches:
            xs = [caps[j] for j in diff_cap if caps[j] in br.captures]
            ys = [br.outs[k] for k in diff_out]
            grads = gradients(ys, xs, grad_ys=g_phs, stop_gradients=xs) if xs else []
            fetch, where = [], []
            for x, g in zip(xs, grads):
                if g is not None:
                    fetch.append(g)
                    where.append(diff_cap.index(caps.index(x)))
            br_caps = br.captures
            subs.append((br, fetch, where, br_caps, g_phs))
    built = []
    for br, fetch, where, br_caps, g_phs_ in subs:
        region = _fn.Region(graph, also=[br.region, back])
        saved = _fn.saved_for_backward(br.region, back, fetch, br_caps + g_phs_)
        for t in saved:
            if t not in br.saved:
                br.saved.append(t)
        pos = [br.saved.index(t) for t in saved]
        built.append((_fn.SubPlan(region, fetch, br_caps + saved + g_phs_), where,
                      br.cap_index, pos))
    gspec = _CondGradSpec(built, diff_cap, len(caps))
    g_in = [gs[k] for k in diff_out]
    gop = graph.create_op("IfGrad", [op.inputs[0]] + caps + g_in + [op.outputs[-1]],
                          {"grad": gspec}, name="IfGrad")
    out = [None] * len(op.inputs)
    for i, j in enumerate(diff_cap):
        out[1 + j] = gop.outputs[i]
    return out


def _if_grad_infer(op):
    spec = op.attrs["grad"]
    caps = op.inputs[1:]
    return [(caps[j].dtype, caps[j].shape) for j in spec.cap_grad_index]


def _if_grad_ref(op, pred, *rest, ctx):
    spec = op.attrs["grad"]
    caps_all = _fn.resolve_inputs(rest[:spec.n_caps], ctx)
    g_in = list(rest[spec.n_caps:-1])
    kept = _fn.unbox(rest[-1])
    sub, where, cap_index, pos = spec.subs[0 if bool(pred) else 1]
    vals = sub.run([caps_all[i] for i in cap_index] + [kept[k] for k in pos] + g_in, ctx)
    out = [None] * len(spec.cap_grad_index)
    for w, v in zip(where, vals):
        out[w] = _fn.add_values(out[w], v)
    return tuple(_fn.zeros_for(caps_all[j]) if v is None else v
                 for v, j in zip(out, spec.cap_grad_index))


register("If", infer=_if_infer, ref=_if_ref, grad=_if_grad, kind="host", needs_ctx=True,
         default_name="If",
         doc="`tf.cond`: runs the sub-plan of the branch its scalar predicate picks.")
register("IfGrad", infer=_if_grad_infer, ref=_if_grad_ref, differentiable=False, kind="host",
         needs_ctx=True, doc="The gradient of an `If`: the taken branch's backward sub-plan.")


def case(pred_fn_pairs, default: Optional[Callable] = None, exclusive: bool = False,
         strict: bool = False, name: str = "case"):
    """`tf.case`: the fn of the first pair whose predicate is true, else `default()`.

    Built as nested `cond`s (all branches run; see the module doc). `exclusive=True` adds a
    run-time check that at most one predicate is true.
    """
    if isinstance(pred_fn_pairs, dict):
        pairs = list(pred_fn_pairs.items())
    elif isinstance(pred_fn_pairs, collections.abc.Sequence):
        pairs = list(pred_fn_pairs)
    else:
        raise TypeError("fns must be a list, tuple, or dict")
    for pair in pairs:
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise TypeError(f"Each entry in pred_fn_pairs must be a 2-tuple, got {pair!r}")
        if not callable(pair[1]):
            raise TypeError("fn for pred %s must be callable." % getattr(pair[0], "name", ""))
    if not pairs:
        if default is None:
            raise ValueError("pred_fn_pairs is empty and no default was given")
        return default()
    if default is None:  # TF1: the last pair's fn serves as the default
        pairs, default = pairs[:-1], pairs[-1][1]
        if not pairs:
            return default()
    with name_scope(name, "case", [p for p, _ in pairs]):
        preds = [convert_to_tensor(p) for p, _ in pairs]
        if exclusive and len(preds) > 1:
            from jitflow.ops.join import stack
            from jitflow.ops.math.casting import cast
            from jitflow.ops.reduce import reduce_sum
            count = reduce_sum(cast(stack(preds), _dtypes.int32))
            check = Assert(count <= 1, [preds], name="exclusive")
            with get_default_graph().control_dependencies([check]):
                preds = [_identity(q) for q in preds]
        result = default
        for p, (_, fn) in reversed(list(zip(preds, pairs))):
            result = _chain(p, fn, result, strict)
        return result()


def _chain(p: Tensor, fn: Callable, rest: Callable, strict: bool) -> Callable:
    return lambda: cond(p, fn, rest, strict=strict)


def _identity(t: Tensor) -> Tensor:
    from jitflow.ops.identity import identity
    return identity(t)


# -- while_loop -----------------------------------------------------------------------------------
def _is_tensor_array(x) -> bool:
    from jitflow.ops.tensor_array import TensorArray
    return isinstance(x, TensorArray)


def _loop_leaves(struct) -> list:
    """The loop variables' leaves: TensorArrays stand for their flow tensor."""
    out = []
    for x in flatten(struct):
        if _is_tensor_array(x):
            out.append(x.flow)
        elif isinstance(x, Operation):
            raise TypeError(f"tf.while_loop: loop variables must be tensors, got operation "
                            f"'{x.name}'")
        else:
            out.append(convert_to_tensor(x))
    return out


def _rewrap(struct, flat: list):
    """`flat` tensors in `struct`'s structure, TensorArrays rebuilt around their new flows."""
    templates = flatten(struct)
    vals = [t.with_flow(f) if _is_tensor_array(t) else f for t, f in zip(templates, flat)]
    return pack_sequence_as(struct, vals)


def _shape_ok(out: TensorShape, inv: TensorShape) -> bool:
    """Whether a body output of shape `out` fits the loop variable's invariant `inv`."""
    if inv.ndims is None:
        return True
    if out.ndims is None:
        return False
    if out.ndims != inv.ndims:
        return False
    return all(i is None or o is None or i == o for o, i in zip(out.as_list(), inv.as_list()))


class _LoopSpec:
    """A while loop's body region: its inputs, outputs, next predicate and captures."""

    def __init__(self, region, phs: list, outs: list, next_pred: Tensor, back_prop: bool):
        self.region = region
        self.phs = phs
        self.outs = outs
        self.next_pred = next_pred
        self.back_prop = back_prop
        self.captures, self.hoisted, _ = _fn.analyze(region, outs + [next_pred], phs)
        self.traced = False   # set when a gradient needs each iteration's loop variables
        self.saved: list = []  # body tensors the gradients read: kept for each iteration
        self._sub = None
        self._sub_saved = -1

    @property
    def sub(self):
        """The body's sub-plan: the next loop variables, the next predicate, then the saved
        tensors (while a gradient of the loop exists)."""
        n = len(self.saved) if self.traced and self.back_prop else 0
        if self._sub is None or self._sub_saved != n:
            self._sub = _fn.SubPlan(self.region, self.outs + [self.next_pred]
                                    + self.saved[:n], self.phs + self.captures)
            self._sub_saved = n
        return self._sub

    def nested_writes(self) -> set:
        return self.sub.writes

    def __repr__(self) -> str:
        return "<loop body>"


def while_loop(cond, body, loop_vars, shape_invariants=None, parallel_iterations: int = 10,
               back_prop: bool = True, swap_memory: bool = False, name: Optional[str] = None,
               maximum_iterations=None, return_same_structure: bool = False):
    """`tf.while_loop`: repeat `body` while `cond` holds, with a trip count known at run time.

    The body (and the condition on its results) is built once in a region of the graph and
    runs as a sub-plan of one `While` op, compiled once whatever the trip count (see
    `jitflow.ops.functional`). Loop variables may be tensors, nested structures of them and
    TensorArrays. A loop variable whose shape changes between iterations needs a
    `shape_invariants` entry, as in TF1; `parallel_iterations` and `swap_memory` are accepted
    and change nothing. With `back_prop=False` no gradient flows through the loop.
    """
    return build_while(cond, body, loop_vars, shape_invariants, parallel_iterations, back_prop,
                       name, maximum_iterations, return_same_structure)


def build_while(cond, body, loop_vars, shape_invariants=None, parallel_iterations: int = 10,
                back_prop: bool = True, name: Optional[str] = None, maximum_iterations=None,
                return_same_structure: bool = False, op_name: Optional[str] = None,
                check_shapes: bool = True):
    """`while_loop`, with the `While` op named `op_name` (a full name, outside any scope) when
    given, and with `check_shapes=False` trusting that the body's results fit the shape
    invariants (their static shapes may be less known): how `jitflow.serialize` rebuilds a
    GraphDef's While node, whose shapes TensorFlow has checked, under the node's own name."""
    if not callable(cond):
        raise TypeError("cond must be callable.")
    if not callable(body):
        raise TypeError("body must be callable.")
    if parallel_iterations < 1:
        raise TypeError("parallel_iterations must be a positive integer.")
    single = not isinstance(loop_vars, (list, tuple))
    if not single and not loop_vars:
        raise ValueError("No loop variables provided")
    with name_scope(name, "while", [x for x in flatten(loop_vars) if isinstance(x, Tensor)]):
        graph = get_default_graph()
        inits = _loop_leaves(loop_vars)
        if shape_invariants is not None:
            if not _same_structure(shape_invariants, loop_vars):
                raise ValueError("shape_invariants must have the same structure as loop_vars")
            invs = []
            for x, s, t in zip(flatten(loop_vars), flatten(shape_invariants), inits):
                invs.append(t.shape if _is_tensor_array(x) or s is None else as_shape(s))
        else:
            invs = [t.shape for t in inits]
        for t, inv in zip(inits, invs):
            if not _shape_ok(t.shape, inv):
                raise ValueError(f"The shape invariant specified for {t.name} is not compatible "
                                 f"with the initial shape of the loop variable. It enters the "
                                 f"loop with shape {_fn.shape_str(t.shape)}, but the specified "
                                 f"shape invariant is {_fn.shape_str(inv)}.")
        if maximum_iterations is not None:
            from jitflow.ops.math.casting import cast
            limit = convert_to_tensor(maximum_iterations, name="maximum_iterations")
            if limit.shape.ndims not in (None, 0):
                raise ValueError(f"maximum_iterations must be a scalar, saw shape: "
                                 f"{limit.shape}")
            if not limit.dtype.is_integer:
                raise TypeError(f"maximum_iterations must be an integer, got "
                                f"{limit.dtype.name}")
            limit = cast(limit, _dtypes.int64)
        else:
            limit = convert_to_tensor(np.int64(-1), name="maximum_iterations")

        def call(fn, struct):
            return fn(struct) if single else fn(*struct)

        pred0 = convert_to_tensor(call(cond, _rewrap(loop_vars, inits)))
        _check_loop_pred(pred0)
        with _fn.Region(graph) as region:
            phs = [_fn.loop_var(t.dtype, inv, name="Identity") for t, inv in zip(inits, invs)]
            args = _rewrap(loop_vars, phs)
            new = call(body, args)
            if single and isinstance(new, (list, tuple)) and len(new) == 1:
                new = new[0]
            if not single and not isinstance(new, (list, tuple)):
                new = [new]
            if not _same_structure(new, loop_vars):
                raise ValueError("The two structures don't have the same nested structure: "
                                 f"loop_vars {loop_vars!r} and body output {new!r}")
            outs = _loop_leaves(new)
            for t, o, inv in zip(inits, outs, invs):
                if o.dtype.base_dtype != t.dtype.base_dtype:
                    raise TypeError(f"Loop variable {t.name} enters the loop with type "
                                    f"{t.dtype.name} but has type {o.dtype.name} after one "
                                    "iteration")
                if check_shapes and not _shape_ok(o.shape, inv):
                    raise ValueError(
                        f"Input tensor '{t.name}' enters the loop with shape "
                        f"{_fn.shape_str(inv)}, but has shape {_fn.shape_str(o.shape)} after one "
                        "iteration. To allow the shape to vary across iterations, use the "
                        "`shape_invariants` argument of tf.while_loop to specify a "
                        "less-specific shape.")
            next_pred = convert_to_tensor(call(cond, _rewrap(loop_vars, outs)))
            _check_loop_pred(next_pred)
        spec = _LoopSpec(region, phs, outs, next_pred, bool(back_prop))
        with graph.name_scope(None) if op_name else contextlib.nullcontext():
            op = graph.create_op("While", inits + [pred0, limit] + spec.captures,
                                 {"body": spec, "parallel_iterations": int(parallel_iterations)},
                                 name=op_name or "Exit", control_inputs=spec.hoisted)
        # TF1 packs the result in the structure the body returned (a tuple body on list
        # loop_vars gives a tuple) and unpacks a result of one tensor
        out = _rewrap(new, list(op.outputs[:len(inits)]))
        if not single and not return_same_structure and len(inits) == 1:
            return flatten(out)[0]
        return out


def _check_loop_pred(p: Tensor) -> None:
    if not p.dtype.is_bool or p.shape.ndims not in (None, 0):
        raise ValueError(f"tf.while_loop: cond must return a boolean scalar, got {p.dtype.name} "
                         f"of shape {p.shape}")


def _while_infer(op):
    spec = op.attrs["body"]
    return [(t.dtype, t.shape) for t in spec.phs] + [(_dtypes.variant, TensorShape([]))]


def _while_ref(op, *args, ctx):
    spec = op.attrs["body"]
    n = len(spec.phs)
    vals = _fn.resolve_inputs(args, ctx)
    cur = vals[:n]
    pred = bool(vals[n])
    limit = int(vals[n + 1])
    caps = vals[n + 2:]
    trace = [] if spec.traced and spec.back_prop else None
    run = spec.sub.runner(ctx) if pred and limit != 0 else None
    i = 0
    while pred and (limit < 0 or i < limit):
        res = run(cur + caps)
        if trace is not None:
            # each iteration's loop variables and the body values its gradient reads
            trace.append((cur, res[n + 1:]))
        cur = res[:n]
        pred = bool(res[n])
        i += 1
    return tuple(cur) + (_fn.box(trace),)


class _LoopGradSpec:
    def __init__(self, sub, diff: list, diff_cap: list, where: list, n_caps: int,
                 saved_pos: list) -> None:
        self.sub = sub            # backward body: (loop vars, captures, saved, grads) -> grads
        self.diff = diff          # loop variable indices with a gradient
        self.diff_cap = diff_cap  # capture indices with a gradient
        self.where = where        # per fetch: ("var", k) or ("cap", j) (positions in outputs)
        self.n_caps = n_caps
        self.saved_pos = saved_pos  # positions in the forward spec's saved tensors

    def nested_writes(self) -> set:
        return self.sub.writes

    def __repr__(self) -> str:
        return "<loop body gradient>"


def _while_grad(op, *gs):
    spec = op.attrs["body"]
    n = len(spec.phs)
    caps = list(op.inputs[n + 2:])
    if not spec.back_prop:
        return [None] * len(op.inputs)
    diff = [k for k in range(n) if _fn.is_differentiable(spec.phs[k])]
    diff_cap = [j for j, t in enumerate(caps) if _fn.is_differentiable(t)]
    if not diff:
        return [None] * len(op.inputs)
    # gradients of a loop body are built by tf.gradients, a layer above the ops
    from jitflow.core.gradients import gradients
    graph = op.graph
    with _fn.Region(graph) as back:
        g_phs = [_fn.loop_var(spec.phs[k].dtype, spec.phs[k].shape, name="grad_in",
                              owner="while loop gradient") for k in diff]
        xs = [spec.phs[k] for k in diff] + [caps[j] for j in diff_cap]
        grads = gradients([spec.outs[k] for k in diff], xs, grad_ys=g_phs,
                          stop_gradients=[caps[j] for j in diff_cap])
    fetch, where = [], []
    for i, g in enumerate(grads):
        if g is None:
            continue
        fetch.append(g)
        where.append(i)   # position among the WhileGrad outputs (vars first, then captures)
    region = _fn.Region(graph, also=[spec.region, back])
    feeds = spec.phs + caps + g_phs
    saved = _fn.saved_for_backward(spec.region, back, fetch, feeds)
    for t in saved:
        if t not in spec.saved:
            spec.saved.append(t)
    saved_pos = [spec.saved.index(t) for t in saved]
    sub = _fn.SubPlan(region, fetch, spec.phs + caps + saved + g_phs)
    gspec = _LoopGradSpec(sub, diff, diff_cap, where, len(caps), saved_pos)
    spec.traced = True
    g_in = [gs[k] for k in diff]
    gop = graph.create_op("WhileGrad", [op.outputs[n]] + caps + g_in, {"grad": gspec},
                          name="WhileGrad")
    out = [None] * len(op.inputs)
    for i, k in enumerate(diff):
        out[k] = gop.outputs[i]
    for i, j in enumerate(diff_cap):
        out[n + 2 + j] = gop.outputs[len(diff) + i]
    return out


def _while_grad_infer(op):
    spec = op.attrs["grad"]
    caps = op.inputs[1:1 + spec.n_caps]
    g_in = op.inputs[1 + spec.n_caps:]
    return [(t.dtype, t.shape) for t in g_in] + [(caps[j].dtype, caps[j].shape)
                                                 for j in spec.diff_cap]


def _while_grad_ref(op, trace, *rest, ctx):
    spec = op.attrs["grad"]
    trace = _fn.unbox(trace)
    if trace is None:
        raise errors.InternalError(None, op, f"{op.name}: the forward loop kept no iterations")
    caps = _fn.resolve_inputs(rest[:spec.n_caps], ctx)
    g = list(rest[spec.n_caps:])
    nd = len(spec.diff)
    acc = [None] * len(spec.diff_cap)
    pos = spec.saved_pos
    run = spec.sub.runner(ctx) if trace else None
    for cur, kept in reversed(trace):
        vals = run(list(cur) + caps + [kept[k] for k in pos] + g)
        new_g = [None] * nd
        for w, v in zip(spec.where, vals):
            if w < nd:
                new_g[w] = v
            else:
                acc[w - nd] = _fn.accumulate(acc[w - nd], v)
        g = [_fn.zeros_for(cur[k]) if v is None else v for v, k in zip(new_g, spec.diff)]
    return tuple(g) + tuple(_fn.zeros_for(caps[j]) if a is None else a
                            for a, j in zip(acc, spec.diff_cap))


register("While", infer=_while_infer, ref=_while_ref, grad=_while_grad, kind="host",
         needs_ctx=True, default_name="While",
         doc="`tf.while_loop`: runs its body's sub-plan while the predicate holds; the last "
             "output keeps each iteration's loop variables for the gradient.")
register("WhileGrad", infer=_while_grad_infer, ref=_while_grad_ref, differentiable=False,
         kind="host", needs_ctx=True,
         doc="The gradient of a `While`: the body's backward sub-plan from the last iteration "
             "to the first.")


# -- map_fn, scan, foldl, foldr --------------------------------------------------------------------
# A leading dimension known at build time and at most _UNROLL long is unrolled (the copies fuse
# into kernels); anything else is a while loop over TensorArrays, as in TF1.
_UNROLL = 32


def _elems(elems, what: str) -> tuple:
    """(flat tensors, static length or None, dynamic length tensor)."""
    flat = [convert_to_tensor(e) for e in flatten(elems)]
    if not flat:
        raise ValueError(f"{what}: elems must not be empty")
    for t in flat:
        if t.shape.ndims == 0:
            raise ValueError(f"{what}: elements in elems must be 1+ dimensional Tensors, not "
                             f"scalars: {t.name}")
    dims = [t.shape.as_list()[0] if t.shape.ndims else None for t in flat]
    known = [d for d in dims if d is not None]
    if len(set(known)) > 1:
        raise ValueError(f"{what}: the first dimension of all elems must be equal, got {dims}")
    from jitflow.ops.shape_ops import shape as _shape
    n_static = known[0] if known else None
    return flat, n_static, _shape(flat[0], out_type=_dtypes.int32)[0]


def _unrolled(flat: list, n: int, elems) -> list:
    from jitflow.ops.join import unstack
    columns = [unstack(t, num=n) for t in flat]
    return [pack_sequence_as(elems, [c[i] for c in columns]) for i in range(n)]


def _stack_results(results: list):
    from jitflow.ops.join import stack
    flat = [[convert_to_tensor(x) for x in flatten(r)] for r in results]
    stacked = [stack([f[i] for f in flat]) for i in range(len(flat[0]))]
    return pack_sequence_as(results[0], stacked)


def _input_arrays(flat: list, n):
    from jitflow.ops.tensor_array import TensorArray
    return [TensorArray(t.dtype, size=n, element_shape=t.shape.as_list()[1:]
                        if t.shape.ndims is not None else None).unstack(t) for t in flat]


def _slices(tas: list, elems, i):
    return pack_sequence_as(elems, [ta.read(i) for ta in tas])


def map_fn(fn: Callable, elems, dtype=None, parallel_iterations=None, back_prop: bool = True,
           swap_memory: bool = False, infer_shape: bool = True, name: Optional[str] = None):
    """`tf.map_fn`: `fn` applied to each slice of `elems` along axis 0, results stacked.

    `dtype` gives the structure and dtypes of fn's results when they differ from elems'.
    """
    if not callable(fn):
        raise TypeError("fn must be callable.")
    with name_scope(name, "map", flatten(elems)):
        flat, n_static, n = _elems(elems, "map_fn")
        if n_static is not None and 0 < n_static <= _UNROLL:
            return _stack_results([fn(x) for x in _unrolled(flat, n_static, elems)])
        from jitflow.ops.tensor_array import TensorArray
        out_struct = dtype if dtype is not None else elems
        out_dtypes = [_dtypes.as_dtype(d) for d in flatten(dtype)] if dtype is not None \
            else [t.dtype for t in flat]
        tas = _input_arrays(flat, n)
        accs = [TensorArray(d, size=n, infer_shape=infer_shape) for d in out_dtypes]

        def body(i, *accs):
            y = fn(_slices(tas, elems, i))
            ys = flatten(y)
            if len(ys) != len(accs):
                raise ValueError("The structure of fn's result does not match dtype: "
                                 f"{len(ys)} results for {len(accs)} dtypes")
            return (i + 1,) + tuple(a.write(i, v) for a, v in zip(accs, ys))

        res = while_loop(lambda i, *_: i < n, body, [constant_i32(0)] + accs,
                         parallel_iterations=parallel_iterations or 10, back_prop=back_prop)
        out = [ta.stack() for ta in res[1:]]
        for t in out:
            if n_static is not None and t.shape.ndims is not None:
                t.set_shape([n_static] + t.shape.as_list()[1:])
        return pack_sequence_as(out_struct, out)


def constant_i32(v: int) -> Tensor:
    return convert_to_tensor(np.int32(v))


def scan(fn: Callable, elems, initializer=None, parallel_iterations: int = 10,
         back_prop: bool = True, swap_memory: bool = False, infer_shape: bool = True,
         reverse: bool = False, name: Optional[str] = None):
    """`tf.scan`: the running accumulation `a = fn(a, x)` over axis 0, each `a` stacked."""
    if not callable(fn):
        raise TypeError("fn must be callable.")
    with name_scope(name, "scan", flatten(elems)):
        flat, n_static, n = _elems(elems, "scan")
        if n_static is not None and 0 < n_static <= _UNROLL:
            items = _unrolled(flat, n_static, elems)
            order = list(range(n_static))[::-1] if reverse else list(range(n_static))
            if initializer is None:
                acc, order = items[order[0]], order[1:]
                results = {0 if not reverse else n_static - 1: acc}
            else:
                acc, results = initializer, {}
            for i in order:
                acc = fn(acc, items[i])
                results[i] = acc
            return _stack_results([results[i] for i in sorted(results)])
        from jitflow.ops.tensor_array import TensorArray
        tas = _input_arrays(flat, n)

        def index(i):
            return n - 1 - i if reverse else i

        if initializer is None:
            a0 = _slices(tas, elems, index(constant_i32(0)))
            start = 1
        else:
            a0 = initializer
            start = 0
        a0_flat = [convert_to_tensor(x) for x in flatten(a0)]
        accs = [TensorArray(t.dtype, size=n, infer_shape=infer_shape) for t in a0_flat]
        if start:
            accs = [ta.write(index(constant_i32(0)), t) for ta, t in zip(accs, a0_flat)]

        def body(i, a, *accs):
            a2 = fn(pack_sequence_as(a0, a), _slices(tas, elems, index(i)))
            a2_flat = [convert_to_tensor(x) for x in flatten(a2)]
            return (i + 1, a2_flat) + tuple(ta.write(index(i), t)
                                             for ta, t in zip(accs, a2_flat))

        res = while_loop(lambda i, *_: i < n, body,
                         [constant_i32(start), a0_flat] + accs,
                         parallel_iterations=parallel_iterations, back_prop=back_prop)
        out = [ta.stack() for ta in res[2:]]
        return pack_sequence_as(a0, out)


def _fold_over(fn: Callable, elems, initializer, reverse: bool, what: str, name,
               back_prop: bool = True):
    if not callable(fn):
        raise TypeError("fn must be callable.")
    with name_scope(name, what, flatten(elems)):
        flat, n_static, n = _elems(elems, what)
        if n_static is not None and 0 < n_static <= _UNROLL:
            items = _unrolled(flat, n_static, elems)
            if reverse:
                items = items[::-1]
            if initializer is None:
                acc, items = items[0], items[1:]
            else:
                acc = initializer
            for x in items:
                acc = fn(acc, x)
            return acc
        tas = _input_arrays(flat, n)

        def index(i):
            return n - 1 - i if reverse else i

        if initializer is None:
            a0, start = _slices(tas, elems, index(constant_i32(0))), 1
        else:
            a0, start = initializer, 0
        a0_flat = [convert_to_tensor(x) for x in flatten(a0)]

        def body(i, a):
            a2 = fn(pack_sequence_as(a0, a), _slices(tas, elems, index(i)))
            return i + 1, [convert_to_tensor(x) for x in flatten(a2)]

        _, a = while_loop(lambda i, a: i < n, body, [constant_i32(start), a0_flat],
                          back_prop=back_prop)
        return pack_sequence_as(a0, a)


def foldl(fn: Callable, elems, initializer=None, parallel_iterations: int = 10,
          back_prop: bool = True, swap_memory: bool = False, name: Optional[str] = None):
    """`tf.foldl`: `fn(fn(fn(init, x0), x1), ...)` over axis 0."""
    return _fold_over(fn, elems, initializer, False, "foldl", name, back_prop)


def foldr(fn: Callable, elems, initializer=None, parallel_iterations: int = 10,
          back_prop: bool = True, swap_memory: bool = False, name: Optional[str] = None):
    """`tf.foldr`: like foldl from the last element to the first."""
    return _fold_over(fn, elems, initializer, True, "foldr", name, back_prop)


# -- Assert and the assert_* family ---------------------------------------------------------------
def _assert_ref(op, c, *data):
    if not np.all(c):
        from jitflow.core.errors import InvalidArgumentError
        summarize = op.attrs["summarize"]
        parts = []
        for d in data:
            d = np.asarray(d)
            if d.dtype.kind in "OSU":
                items = [x.decode() if isinstance(x, bytes) else str(x) for x in d.reshape(-1)]
                parts.append(" ".join(items))
            else:
                flat = d.reshape(-1)
                text = " ".join(_num(v) for v in flat[:summarize])
                parts.append(text + ("..." if flat.size > summarize else ""))
        raise InvalidArgumentError(None, op, "assertion failed: [" + "] [".join(parts) + "]"
                                   f"\n\t [[node {op.name} (Assert)]]")
    return ()


def _num(v) -> str:
    return str(v).lower() if isinstance(v, np.bool_) else f"{v:g}" if isinstance(
        v, np.floating) else str(v)


def _assert_infer(op):
    c = op.inputs[0]
    if not c.dtype.is_bool:
        raise TypeError(f"Input 'condition' of 'Assert' Op has type {c.dtype.name} that does "
                        "not match expected type of bool.")
    return []


register("Assert", infer=_assert_infer, ref=_assert_ref, stateful=True, differentiable=False,
         kind="other", doc="Raises InvalidArgumentError at run time when its condition is "
                           "false; the data inputs are printed in the message.")


def _data_tensor(d) -> Tensor:
    if isinstance(d, str):
        from jitflow.ops.sources import constant
        return constant(np.array(d.encode(), dtype=object), dtype=_dtypes.string)
    return convert_to_tensor(d)


def Assert(condition, data, summarize: Optional[int] = None,  # noqa: N802
           name: Optional[str] = None) -> Operation:
    """`tf.Assert`: an op that raises InvalidArgumentError when `condition` is false when run.

    Returns the op; make other ops depend on it with `tf.control_dependencies`.
    """
    with name_scope(name, "Assert", [condition]) as scope:
        c = convert_to_tensor(condition, name="condition")
        ds = [_data_tensor(d) for d in data]
        return make_op("Assert", [c] + ds, {"summarize": 3 if summarize is None else
                                             int(summarize)}, name=scope)


def _binary_assert(np_name: str, default_name: str, op_text: str):
    def fn(x, y, data=None, summarize=None, message=None, name=None) -> Operation:
        from jitflow.ops.math import compare
        from jitflow.ops.math.common import convert_pair
        from jitflow.ops.reduce import reduce_all
        with name_scope(name, default_name, [x, y]):
            x, y = convert_pair(x, y)
            cond_t = reduce_all(getattr(compare, np_name)(x, y))
            if data is None:
                data = [message or "", f"Condition x {op_text} y did not hold element-wise:",
                        "x (%s) = " % x.name, x, "y (%s) = " % y.name, y]
            elif message is not None:
                data = [message] + list(data)
            return Assert(cond_t, data, summarize=summarize)
    fn.__name__ = default_name
    fn.__doc__ = f"`tf.{default_name}(x, y)`: an Assert op checking x {op_text} y elementwise."
    return fn


assert_equal = _binary_assert("equal", "assert_equal", "==")
assert_none_equal = _binary_assert("not_equal", "assert_none_equal", "!=")
assert_less = _binary_assert("less", "assert_less", "<")
assert_less_equal = _binary_assert("less_equal", "assert_less_equal", "<=")
assert_greater = _binary_assert("greater", "assert_greater", ">")
assert_greater_equal = _binary_assert("greater_equal", "assert_greater_equal", ">=")


def _sign_assert(np_name: str, default_name: str, text: str):
    def fn(x, data=None, summarize=None, message=None, name=None) -> Operation:
        from jitflow.ops.math import compare
        from jitflow.ops.math.common import scalar_like
        from jitflow.ops.reduce import reduce_all
        with name_scope(name, default_name, [x]):
            x = convert_to_tensor(x, name="x")
            zero = scalar_like(0, x)
            cond_t = reduce_all(getattr(compare, np_name)(x, zero))
            if data is None:
                data = [message or "", f"Condition x {text} did not hold element-wise:",
                        "x (%s) = " % x.name, x]
            elif message is not None:
                data = [message] + list(data)
            return Assert(cond_t, data, summarize=summarize)
    fn.__name__ = default_name
    fn.__doc__ = f"`tf.{default_name}(x)`: an Assert op checking x {text} elementwise."
    return fn


assert_positive = _sign_assert("greater", "assert_positive", "> 0")
assert_negative = _sign_assert("less", "assert_negative", "< 0")
assert_non_negative = _sign_assert("greater_equal", "assert_non_negative", ">= 0")
assert_non_positive = _sign_assert("less_equal", "assert_non_positive", "<= 0")


def assert_rank(x, rank, data=None, summarize=None, message=None, name=None):
    """`tf.assert_rank`: checked at build time when x's rank is known (ValueError), as TF1."""
    x = convert_to_tensor(x)
    r = int(rank)
    if x.shape.ndims is None:
        raise NotImplementedError("assert_rank on a tensor of unknown rank is not supported")
    if x.shape.ndims != r:
        raise ValueError(f"{message or ''} Tensor {x.name} must have rank {r}. Received rank "
                         f"{x.shape.ndims}, shape {x.shape}".strip())
    from jitflow.ops.identity import no_op
    return no_op(name=name or "assert_rank")
