"""Control flow: `tf.cond`, `tf.case`, `tf.while_loop` (static trip counts), `tf.Assert`.

jitflow has no lazy control flow. `cond` builds both branches and selects the taken branch's
outputs with `CondSelect` (elementwise, a scalar predicate; output named `cond/Merge` as in
TF1) or, when the branches' static shapes differ, `CondPick` (returns whichever input the
predicate picks, any shape). Consequences, all documented:
- a branch must be free of side effects: one that creates an assignment, a print or an
  assertion raises NotImplementedError at build time (both branches always run). Random ops
  are allowed (dropout under `is_training`): the untaken branch's draw is discarded;
- run-time errors in the untaken branch (e.g. an out-of-range gather) still raise;
- gradients reach the untaken branch as zeros, so an untaken `log(0)` gives NaN gradients,
  as with `tf.where`.
`while_loop` unrolls when the loop condition folds to a constant at build time (a trip count
known when the graph is built); anything else raises NotImplementedError.
"""
from __future__ import annotations

import collections.abc
from typing import Callable, Optional

import numpy as np

from jitflow import dtypes as _dtypes
from jitflow.graph import (Operation, Tensor, convert_to_tensor, get_default_graph, make_op,
                           name_scope)
from jitflow.ops.array import get_static_value
from jitflow.ops.registry import Example, register
from jitflow.shapes import TensorShape

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

# Stateful ops that only read state: harmless when a branch runs although not taken.
_READ_ONLY = {"VariableV2", "IsVariableInitialized", "VariableOrInitialValue"}


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
    from jitflow.ops.math import zeros_like_of
    p = op.inputs[0]
    zero = zeros_like_of(g)
    return [None, make_op("CondSelect", [p, g, zero], name="CondSelectGrad").outputs[0],
            make_op("CondSelect", [p, zero, g], name="CondSelectGrad").outputs[0]]


def _cond_pick_grad(op, g):
    from jitflow.ops.math import zeros_like_of
    p, a, b = op.inputs
    return [None, make_op("CondPick", [p, g, zeros_like_of(a)], name="CondPickGrad").outputs[0],
            make_op("CondPick", [p, zeros_like_of(b), g], name="CondPickGrad").outputs[0]]


def _cond_example(build_true, build_false, np_true, np_false, shapes, id_):
    return Example(
        build=lambda p, a, b: cond(p > 0, lambda: build_true(a, b), lambda: build_false(a, b)),
        inputs=shapes, id=id_,
        expect=lambda p, a, b: np_true(a, b) if p > 0 else np_false(a, b))


register("CondSelect", infer=_cond_select_infer, ref=_pick_ref, grad=_cond_select_grad,
         kind="elementwise", template="({1} if {0} else {2})", default_name="Merge",
         doc="The output of `tf.cond`: input 1 when the scalar predicate is true, else input 2 "
             "(both branches have the same shape).",
         examples=[_cond_example(lambda a, b: a * 2.0, lambda a, b: b - a, lambda a, b: a * 2,
                                 lambda a, b: b - a, [(), (2, 3), (2, 3)], "same"),
                   _cond_example(lambda a, b: a * b, lambda a, b: a + 1.0, lambda a, b: a * b,
                                 lambda a, b: a + 1, [(), (3,), (3,)], "vector")])
register("CondPick", infer=_cond_infer, ref=_pick_ref, grad=_cond_pick_grad, kind="other",
         default_name="Merge",
         doc="The output of `tf.cond` when the branches' static shapes differ: the input the "
             "scalar predicate picks, whatever its shape.",
         examples=[Example(
             build=lambda p, a, b: cond(p > 0, lambda: a * 3.0, lambda: b),
             inputs=[(), (2,), (3,)], id="shapes",
             expect=lambda p, a, b: a * 3 if p > 0 else b)])


# -- cond -----------------------------------------------------------------------------------------
def _flatten(struct) -> list:
    if isinstance(struct, dict):
        return [x for k in sorted(struct) for x in _flatten(struct[k])]
    if isinstance(struct, (list, tuple)):
        return [x for s in struct for x in _flatten(s)]
    return [struct]


def _pack_like(struct, flat: list):
    it = iter(flat)

    def pack(s):
        if isinstance(s, dict):
            return type(s)((k, pack(s[k])) for k in sorted(s))
        if isinstance(s, tuple) and hasattr(s, "_fields"):
            return type(s)(*[pack(x) for x in s])
        if isinstance(s, (list, tuple)):
            return type(s)(pack(x) for x in s)
        return next(it)
    return pack(struct)


def _same_structure(a, b) -> bool:
    if isinstance(a, dict) or isinstance(b, dict):
        return (isinstance(a, dict) and isinstance(b, dict) and sorted(a) == sorted(b)
                and all(_same_structure(a[k], b[k]) for k in a))
    seq = (list, tuple)
    if isinstance(a, seq) or isinstance(b, seq):
        return (isinstance(a, seq) and isinstance(b, seq) and len(a) == len(b)
                and all(_same_structure(x, y) for x, y in zip(a, b)))
    return True


class _Recorder:
    """Records the ops a branch function creates and rejects those with side effects."""

    def __init__(self, graph, what: str) -> None:
        self.graph = graph
        self.what = what

    def __enter__(self) -> "_Recorder":
        self.start = len(self.graph._ops)
        return self

    def __exit__(self, *exc) -> None:
        if exc[0] is not None:
            return
        new = self.graph._ops[self.start:]
        inits = set()
        for op in new:  # variables created in a branch: their initializers run only on init
            if op.type == "VariableV2":
                inits.update(c for c in new if c.type == "Assign" and c.inputs[0].op is op
                             and c.name == op.name + "/Assign")
        for op in new:
            d = op.op_def
            if not d.stateful or d.kind == "random" or op.type in _READ_ONLY or op in inits:
                continue
            raise NotImplementedError(
                f"{self.what} creates the stateful op '{op.name}' (type {op.type}). jitflow "
                "has no lazy control flow: it builds both branches of a cond (and unrolls "
                "loops) and runs everything built, so functions with side effects "
                "(assignments, prints, assertions) are not supported there. Move the op out "
                "(e.g. select the new value with tf.cond/tf.where, then assign once).")


def cond(pred, true_fn: Optional[Callable] = None, false_fn: Optional[Callable] = None,
         strict: bool = False, name: Optional[str] = None, fn1=None, fn2=None):
    """`tf.cond`: `true_fn()` if `pred` else `false_fn()` (both built and run; see module doc).

    Returns the branches' common structure of tensors; with `strict=False` a one-element
    list or tuple is unpacked, as TF1 does.
    """
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
        with _Recorder(graph, "tf.cond: true_fn"):
            res_t = true_fn()
        with _Recorder(graph, "tf.cond: false_fn"):
            res_f = false_fn()
        if res_t is None or res_f is None or not _flatten(res_t):
            raise ValueError("true_fn and false_fn must return at least one result.")
        if not _same_structure(res_t, res_f):
            raise ValueError(f"The two structures don't have the same nested structure.\n\n"
                             f"First structure: {res_t!r}\n\nSecond structure: {res_f!r}")
        flat_t, flat_f = _flatten(res_t), _flatten(res_f)
        out = []
        for a, b in zip(flat_t, flat_f):
            if isinstance(a, Operation) or isinstance(b, Operation):
                if not (isinstance(a, Operation) and isinstance(b, Operation)):
                    raise ValueError("Outputs of true_fn and false_fn must both be operations "
                                     f"or both tensors: {a!r}, {b!r}")
                from jitflow.ops.array import group
                out.append(group(a, b, name="Merge"))
                continue
            a = convert_to_tensor(a)
            b = convert_to_tensor(b)
            if a.dtype.base_dtype != b.dtype.base_dtype:
                raise ValueError("Outputs of true_fn and false_fn must have the same type: "
                                 f"{a.dtype.name}, {b.dtype.name}")
            same = (a.shape.ndims is not None and b.shape.ndims is not None
                    and a.shape.as_list() == b.shape.as_list())
            op_type = "CondSelect" if same else "CondPick"
            out.append(make_op(op_type, [p, a, b], name="Merge").outputs[0])
        result = _pack_like(res_t, out)
        if not strict and isinstance(result, (list, tuple)) and len(result) == 1 \
                and not hasattr(result, "_fields"):
            result = result[0]
        return result


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
            from jitflow.ops.array import stack
            from jitflow.ops.math import cast
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
    from jitflow.ops.array import identity
    return identity(t)


# -- while_loop -----------------------------------------------------------------------------------
def while_loop(cond, body, loop_vars, shape_invariants=None, parallel_iterations: int = 10,
               back_prop: bool = True, swap_memory: bool = False, name: Optional[str] = None,
               maximum_iterations=None, return_same_structure: bool = False):
    """`tf.while_loop` for loops whose trip count is known when the graph is built.

    The loop is unrolled while `cond(*loop_vars)` folds to a constant (e.g. a counter
    starting from a constant compared with a constant bound); a condition that depends on
    run-time values raises NotImplementedError.
    """
    if not callable(cond):
        raise TypeError("cond must be callable.")
    if not callable(body):
        raise TypeError("body must be callable.")
    if parallel_iterations < 1:
        raise TypeError("parallel_iterations must be a positive integer.")
    single = not isinstance(loop_vars, (list, tuple))
    limit = None
    if maximum_iterations is not None:
        limit = get_static_value(convert_to_tensor(maximum_iterations))
        if limit is None:
            raise NotImplementedError("tf.while_loop: maximum_iterations must be known at build "
                                      "time in jitflow")
        limit = int(limit)
    cap = 10000
    with name_scope(name, "while", _flatten(loop_vars)):
        vars_ = loop_vars
        n = 0
        while True:
            if limit is not None and n >= limit:
                break
            args = (vars_,) if single else tuple(vars_)
            c = cond(*args)
            value = _constant_fold(convert_to_tensor(c))
            if value is None:
                raise NotImplementedError(
                    "tf.while_loop: jitflow has no dynamic loops; it unrolls a loop only when "
                    "its condition is known at build time (constant loop variables in the "
                    "condition). This condition depends on run-time values: "
                    f"{getattr(c, 'name', c)!r}. Write the loop in Python, or use vectorized "
                    "ops (tf.cumsum, tf.scan-like reductions).")
            if not bool(value):
                break
            if n >= cap:
                raise NotImplementedError(f"tf.while_loop: more than {cap} iterations to unroll")
            graph = get_default_graph()
            with _Recorder(graph, "tf.while_loop: body"):
                new = body(*args)
            if single and isinstance(new, (list, tuple)) and len(new) == 1:
                new = new[0]
            if not single and not isinstance(new, (list, tuple)):
                new = [new]
            if not _same_structure(new, vars_):
                raise ValueError("The two structures don't have the same nested structure: "
                                 f"loop_vars {vars_!r} and body output {new!r}")
            vars_ = _pack_like(vars_, [convert_to_tensor(x) for x in _flatten(new)])
            n += 1
        out = _pack_like(vars_, [convert_to_tensor(x) for x in _flatten(vars_)])
        if not single and not return_same_structure and len(out) == 1:
            return out[0]
        return out


def _constant_fold(t: Tensor, max_ops: int = 500):
    """The value of `t` if it depends only on constants and static shapes (run through the
    references), else None."""
    value = get_static_value(t)
    if value is not None:
        return value
    env: dict = {}
    order, seen, stack = [], set(), [(t.op, False)]
    while stack:
        op, done = stack.pop()
        if done:
            order.append(op)
            continue
        if op in seen:
            continue
        seen.add(op)
        d = op.op_def
        if op.type == "Placeholder" or d.stateful or d.needs_ctx or d.kind == "random" \
                or op.control_inputs or len(seen) > max_ops:
            return None
        stack.append((op, True))
        for x in op.inputs:
            if x in env or x.op in seen:
                continue
            known = get_static_value(x)  # e.g. tf.shape of a fully defined placeholder
            if known is not None:
                env[x] = known
            else:
                stack.append((x.op, False))
    from jitflow.interpreter import run_op_reference
    with np.errstate(all="ignore"):
        for op in order:
            args = [env[x] for x in op.inputs]
            for out, v in zip(op.outputs, run_op_reference(op, args, None)):
                env[out] = v
    return env[t]


# -- map_fn, scan, foldl, foldr: unrolled over a leading dimension known at build time ----------
def _unstacked(elems, what: str):
    """(structure, per-element lists of slices, n) for a nest of tensors of equal length."""
    from jitflow.ops.array import unstack
    flat = [convert_to_tensor(e) for e in _flatten(elems)]
    if not flat:
        raise ValueError(f"{what}: elems must not be empty")
    dims = [t.shape.as_list()[0] if t.shape.ndims else None for t in flat]
    n = dims[0]
    if n is None or any(d != n for d in dims):
        raise NotImplementedError(
            f"{what}: jitflow unrolls the loop, so the first dimension of elems must be known "
            f"at build time and equal for all of them (got {dims})")
    columns = [unstack(t, num=n) for t in flat]
    return [_pack_like(elems, [c[i] for c in columns]) for i in range(n)], n


def _stack_results(results: list, what: str):
    from jitflow.ops.array import stack
    if not results:
        raise NotImplementedError(f"{what}: elems of length 0 are not supported")
    flat = [[convert_to_tensor(x) for x in _flatten(r)] for r in results]
    stacked = [stack([f[i] for f in flat]) for i in range(len(flat[0]))]
    return _pack_like(results[0], stacked)


def map_fn(fn: Callable, elems, dtype=None, parallel_iterations=None, back_prop: bool = True,
           swap_memory: bool = False, infer_shape: bool = True, name: Optional[str] = None):
    """`tf.map_fn`: `fn` applied to each slice of `elems` along axis 0, results stacked.

    Unrolled at build time: the length of axis 0 must be known.
    """
    if not callable(fn):
        raise TypeError("fn must be callable.")
    with name_scope(name, "map", _flatten(elems)):
        items, _ = _unstacked(elems, "map_fn")
        graph = get_default_graph()
        with _Recorder(graph, "tf.map_fn: fn"):
            results = [fn(x) for x in items]
        return _stack_results(results, "map_fn")


def scan(fn: Callable, elems, initializer=None, parallel_iterations: int = 10,
         back_prop: bool = True, swap_memory: bool = False, infer_shape: bool = True,
         reverse: bool = False, name: Optional[str] = None):
    """`tf.scan`: the running accumulation `a = fn(a, x)` over axis 0, each `a` stacked."""
    if not callable(fn):
        raise TypeError("fn must be callable.")
    with name_scope(name, "scan", _flatten(elems)):
        items, n = _unstacked(elems, "scan")
        order = list(range(n))[::-1] if reverse else list(range(n))
        if initializer is None:
            acc, order = items[order[0]], order[1:]
            results = {0 if not reverse else n - 1: acc}
        else:
            acc, results = initializer, {}
        graph = get_default_graph()
        with _Recorder(graph, "tf.scan: fn"):
            for i in order:
                acc = fn(acc, items[i])
                results[i] = acc
        return _stack_results([results[i] for i in sorted(results)], "scan")


def _fold_over(fn: Callable, elems, initializer, reverse: bool, what: str, name):
    if not callable(fn):
        raise TypeError("fn must be callable.")
    with name_scope(name, what, _flatten(elems)):
        items, n = _unstacked(elems, what)
        if reverse:
            items = items[::-1]
        if initializer is None:
            acc, items = items[0], items[1:]
        else:
            acc = initializer
        with _Recorder(get_default_graph(), f"tf.{what}: fn"):
            for x in items:
                acc = fn(acc, x)
        return acc


def foldl(fn: Callable, elems, initializer=None, parallel_iterations: int = 10,
          back_prop: bool = True, swap_memory: bool = False, name: Optional[str] = None):
    """`tf.foldl`: `fn(fn(fn(init, x0), x1), ...)` over axis 0 (unrolled)."""
    return _fold_over(fn, elems, initializer, False, "foldl", name)


def foldr(fn: Callable, elems, initializer=None, parallel_iterations: int = 10,
          back_prop: bool = True, swap_memory: bool = False, name: Optional[str] = None):
    """`tf.foldr`: like foldl from the last element to the first."""
    return _fold_over(fn, elems, initializer, True, "foldr", name)


# -- Assert and the assert_* family ---------------------------------------------------------------
def _assert_ref(op, c, *data):
    if not np.all(c):
        from jitflow.errors import InvalidArgumentError
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
        from jitflow.ops.array import constant
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
        from jitflow.ops import math as m
        from jitflow.ops.reduce import reduce_all
        with name_scope(name, default_name, [x, y]):
            x, y = m.convert_pair(x, y)
            cond_t = reduce_all(getattr(m, np_name)(x, y))
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
        from jitflow.ops import math as m
        from jitflow.ops.math import scalar_like
        from jitflow.ops.reduce import reduce_all
        with name_scope(name, default_name, [x]):
            x = convert_to_tensor(x, name="x")
            zero = scalar_like(0, x)
            cond_t = reduce_all(getattr(m, np_name)(x, zero))
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
    from jitflow.ops.array import no_op
    return no_op(name=name or "assert_rank")
