"""Identities and structure: Identity, IdentityN, NoOp, group, tuple, and the pass-through
debugging ops Print and check_numerics.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from jitflow.compiler import lower as _lower
from jitflow.compiler.ir import (X0)
from jitflow.core.graph import Tensor, convert_to_tensor, get_default_graph, make_op, name_scope
from jitflow.ops._array_args import _err
from jitflow.ops.registry import Example, register

__all__ = ["identity", "identity_n", "no_op", "group", "tuple_", "Print", "check_numerics",
           "verify_tensor_all_finite"]
NAMESPACES = {"": [("tuple", "tuple_"), ("print", "print_")]}


# -- Identity, IdentityN, NoOp, group, tuple ---------------------------------------------------
def _identity_ref(op, x):
    # Identity of a variable (`w/read`) returns a snapshot the caller can keep.
    return np.array(x, copy=True) if isinstance(x, np.ndarray) else x


register("Identity", infer=lambda op: [(op.inputs[0].dtype, op.inputs[0].shape)],
         ref=_identity_ref, grad=lambda op, g: [g], kind="elementwise", scalar=X0,
         examples=[Example(build=lambda x: identity(x), inputs=[(2, 3)], expect=lambda x: x)])


def identity(input, name: Optional[str] = None) -> Tensor:
    """`tf.identity`."""
    x = convert_to_tensor(input)
    return make_op("Identity", [x], name=name).outputs[0]


register("IdentityN", infer=lambda op: [(t.dtype, t.shape) for t in op.inputs],
         ref=lambda op, *xs: tuple(_identity_ref(op, x) for x in xs),
         grad=lambda op, *gs: list(gs), kind="host",
         examples=[Example(build=lambda x, y: identity_n([x, y])[1] * 2.0,
                           inputs=[(2,), (3,)], expect=lambda x, y: y * 2)])


def identity_n(input, name: Optional[str] = None) -> list:
    """`tf.identity_n`: identities of a list of tensors (one op, one output each)."""
    xs = [convert_to_tensor(x) for x in input]
    return list(make_op("IdentityN", xs, name=name).outputs)


register("NoOp", infer=lambda op: [], ref=lambda op: (), differentiable=False, kind="other",
         lower=_lower.computes_nothing)


def no_op(name: Optional[str] = None):
    """An op that does nothing; useful as a target with control inputs."""
    return get_default_graph().create_op("NoOp", [], name=name)


def group(*inputs, name: Optional[str] = None):
    """An op that runs all `inputs` (tensors or ops) and produces nothing."""
    ops = []
    for x in inputs:
        if isinstance(x, (list, tuple)):
            ops.extend(x)
        elif isinstance(x, dict):
            ops.extend(x.values())
        else:
            ops.append(x)
    g = get_default_graph()
    with name_scope(name, "group_deps") as scope:
        with g.control_dependencies(ops):
            return g.create_op("NoOp", [], name=scope)


def tuple_(tensors, name: Optional[str] = None, control_inputs=None) -> list:
    """`tf.tuple`: identities of `tensors` that are available only once all of them are."""
    tensors = [convert_to_tensor(t) if t is not None else None for t in tensors]
    with name_scope(name, "tuple") as scope:
        gate = group(*[t for t in tensors if t is not None], *(control_inputs or []))
        with get_default_graph().control_dependencies([gate]):
            return [identity(t, name=f"{scope}control_dependency") if t is not None else None
                    for t in tensors]


# -- Print, check_numerics ------------------------------------------------------------------------
def _format_value(v, summarize: int) -> str:
    v = np.asarray(v)
    flat = v.reshape(-1)
    body = " ".join(str(x) for x in flat[:summarize])
    if flat.size > summarize:
        body += "..."
    return f"[{body}]" if v.ndim else body


def _print_ref(op, x, *data):
    import sys
    msg = op.attrs["message"] + "".join(_format_value(d, op.attrs["summarize"]) for d in data)
    print(msg, file=sys.stderr)
    return x


register("Print", infer=lambda op: [(op.inputs[0].dtype, op.inputs[0].shape)],
         ref=_print_ref, grad=lambda op, g: [g] + [None] * (len(op.inputs) - 1),
         stateful=True, kind="other",
         doc="Identity on input 0 that writes `message` and the data inputs to stderr.")


def Print(input_, data, message=None, first_n=None, summarize=None,  # noqa: N802
          name: Optional[str] = None) -> Tensor:
    """`tf.Print`: passes `input_` through and prints `message` and `data` to stderr each time
    it runs (`first_n` is accepted and ignored)."""
    x = convert_to_tensor(input_)
    ds = [convert_to_tensor(d) for d in data]
    attrs = {"message": message or "", "summarize": 3 if summarize is None else int(summarize)}
    return make_op("Print", [x] + ds, attrs, name=name).outputs[0]


register("PrintV2", infer=lambda op: [], ref=lambda op, *xs: _print_v2(op, xs),
         stateful=True, differentiable=False, kind="other",
         doc="Write the inputs (and literal strings) to stderr; produces no output.")


def _print_v2(op, xs) -> tuple:
    import sys
    parts = [text if i is None else _format_value(xs[i], op.attrs["summarize"])
             for i, text in op.attrs["template"]]
    print(op.attrs["sep"].join(parts), end=op.attrs["end"], file=sys.stderr)
    return ()


def print_(*inputs, **kwargs):
    """`tf.print`: an op that prints its inputs (tensors and Python values) when run."""
    sep = kwargs.pop("sep", " ")
    end = kwargs.pop("end", "\n")
    summarize = kwargs.pop("summarize", 3)
    name = kwargs.pop("name", None)
    kwargs.pop("output_stream", None)
    tensors, template = [], []
    for v in inputs:
        if isinstance(v, Tensor) or hasattr(v, "_to_tensor"):
            template.append((len(tensors), ""))
            tensors.append(convert_to_tensor(v))
        else:
            template.append((None, str(v)))
    return make_op("PrintV2", tensors, {"template": tuple(template), "sep": sep, "end": end,
                                        "summarize": int(summarize)}, name=name,
                   graph=get_default_graph() if not tensors else None)


def _check_numerics_ref(op, x):
    x = np.asarray(x)
    if not np.all(np.isfinite(x)):
        kind = "NaN" if np.any(np.isnan(x)) else "Inf"
        raise _err(f"{op.attrs['message']} : Tensor had {kind} values", op)
    return x


def _check_numerics_infer(op):
    x = op.inputs[0]
    if not x.dtype.is_floating:
        raise TypeError(f"Value for attr 'T' of {x.dtype.name} is not in the list of allowed "
                        "values: float16, float32, float64")
    return [(x.dtype, x.shape)]


register("CheckNumerics", infer=_check_numerics_infer, ref=_check_numerics_ref,
         grad=lambda op, g: [g], stateful=True, kind="other",
         doc="Identity that raises InvalidArgumentError when its input has NaN or Inf.")


def check_numerics(tensor, message: str, name: Optional[str] = None) -> Tensor:
    """`tf.check_numerics`: `tensor`, or InvalidArgumentError at run time if it has NaN/Inf."""
    x = convert_to_tensor(tensor)
    return make_op("CheckNumerics", [x], {"message": message}, name=name).outputs[0]


def verify_tensor_all_finite(t, msg: str, name: Optional[str] = None) -> Tensor:
    """`tf.verify_tensor_all_finite`: check_numerics under its TF1 name."""
    with name_scope(name, "VerifyFinite", [t]) as scope:
        return check_numerics(t, msg, name=scope)
