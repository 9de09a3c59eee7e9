"""Sources and structural ops: constants, placeholders, identity, no_op, group."""
from __future__ import annotations

from typing import Optional

import numpy as np

from jitflow import dtypes as _dtypes
from jitflow.graph import Tensor, convert_to_tensor, get_default_graph, make_op, name_scope
from jitflow.ops.registry import register
from jitflow.shapes import TensorShape, as_shape

__all__ = ["constant", "placeholder", "placeholder_with_default", "identity", "no_op", "group",
           "tuple_"]


# -- Const ---------------------------------------------------------------------------------
register(
    "Const",
    infer=lambda op: [(op.attrs["dtype"], op.attrs["value"].shape)],
    ref=lambda op: op.attrs["value"],
    differentiable=False, kind="source",
    doc="A constant; attrs: value (ndarray), dtype.")


def constant(value, dtype=None, shape=None, name: str = "Const",
             verify_shape: bool = False) -> Tensor:
    """`tf.constant`: a tensor holding `value` (broadcast or reshaped to `shape` if given)."""
    if dtype is not None:
        dtype = _dtypes.as_dtype(dtype)
        arr = np.asarray(value.astype(dtype.as_numpy_dtype) if isinstance(value, np.ndarray)
                         else np.asarray(value, dtype=dtype.as_numpy_dtype))
    else:
        from jitflow.graph import _infer_numpy
        arr = _infer_numpy(value)
        dtype = _dtypes.as_dtype(arr.dtype)
    if shape is not None:
        shape = tuple(int(d) for d in as_shape(shape).as_list())
        if verify_shape and arr.shape != shape:
            raise TypeError(f"Expected Tensor's shape: {shape}, got {arr.shape}.")
        if arr.size == 1:
            arr = np.full(shape, arr.reshape(()), dtype=arr.dtype)
        elif arr.size == int(np.prod(shape)):
            arr = arr.reshape(shape)
        else:
            raise TypeError(f"Eager execution of tf.constant with unsupported shape "
                            f"(value has {arr.size} elements, shape is {list(shape)} with "
                            f"{int(np.prod(shape))} elements).")
    arr = np.array(arr, dtype=dtype.as_numpy_dtype, copy=True)
    arr.setflags(write=False)
    return make_op("Const", [], {"value": arr, "dtype": dtype}, name=name,
                   graph=get_default_graph()).outputs[0]


# -- Placeholder ---------------------------------------------------------------------------
def _no_feed(op, ctx=None):
    from jitflow.errors import InvalidArgumentError
    from jitflow.shapes import shape_tf_str
    raise InvalidArgumentError(
        None, op, f"You must feed a value for placeholder tensor '{op.name}' with dtype "
        f"{op.attrs['dtype'].name} and shape {shape_tf_str(op.attrs['shape'])}")


register("Placeholder", infer=lambda op: [(op.attrs["dtype"], op.attrs["shape"])],
         ref=_no_feed, differentiable=False, kind="source")


def placeholder(dtype, shape=None, name: Optional[str] = None) -> Tensor:
    """`tf.placeholder`: a tensor that must be fed; `None` dims accept any size."""
    dtype = _dtypes.as_dtype(dtype)
    return make_op("Placeholder", [], {"dtype": dtype, "shape": as_shape(shape)},
                   name=name or "Placeholder", graph=get_default_graph()).outputs[0]


def _pwd_infer(op):
    x = op.inputs[0]
    shape = op.attrs["shape"]
    if not shape.is_compatible_with(x.shape):
        raise ValueError(f"Shapes {x.shape} and {shape} are incompatible for "
                         f"placeholder_with_default '{op.name}'")
    return [(x.dtype, shape)]


register("PlaceholderWithDefault", infer=_pwd_infer, ref=lambda op, x: x,
         grad=lambda op, g: [g], kind="elementwise", template="{0}")


def placeholder_with_default(input, shape, name: Optional[str] = None) -> Tensor:
    """A placeholder that yields `input` when it is not fed."""
    x = convert_to_tensor(input)
    return make_op("PlaceholderWithDefault", [x], {"shape": as_shape(shape)},
                   name=name).outputs[0]


# -- Identity, NoOp, group -----------------------------------------------------------------
def _identity_ref(op, x):
    # Identity of a variable (`w/read`) returns a snapshot the caller can keep.
    return np.array(x, copy=True) if isinstance(x, np.ndarray) else x


register("Identity", infer=lambda op: [(op.inputs[0].dtype, op.inputs[0].shape)],
         ref=_identity_ref, grad=lambda op, g: [g], kind="elementwise", template="{0}")


def identity(input, name: Optional[str] = None) -> Tensor:
    """`tf.identity`."""
    x = convert_to_tensor(input)
    return make_op("Identity", [x], name=name).outputs[0]


register("NoOp", infer=lambda op: [], ref=lambda op: (), differentiable=False, kind="other")


def no_op(name: Optional[str] = None):
    """An op that does nothing; useful as a target with control inputs."""
    return get_default_graph().create_op("NoOp", [], name=name)


def group(*inputs, name: Optional[str] = None):
    """An op that runs all `inputs` (tensors or ops) and produces nothing."""
    ops = []
    for x in inputs:
        if isinstance(x, (list, tuple)):
            ops.extend(x)
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
            return [identity(t) if t is not None else None for t in tensors]


_ = TensorShape  # re-exported for op modules that build shapes
