"""`tf.py_func` / `tf.numpy_function`: a Python function as an op.

As in TF1, the function is kept in a per-process registry and the op holds only its token
(`pyfunc_0`, ...), so graphs with py_funcs still serialize (and run again in the same
process). The op always runs through its reference, on every backend; it has no gradient.
"""
from __future__ import annotations

import itertools
from typing import Callable, Optional

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.core.graph import convert_to_tensor, get_default_graph, make_op
from jitflow.ops.registry import register
from jitflow.core.shapes import TensorShape

__all__ = ["py_func", "numpy_function"]

_FUNCS: dict = {}
_TOKENS = itertools.count()


def _py_func_infer(op):
    return [(d, TensorShape(None)) for d in op.attrs["Tout"]]


def _py_func_ref(op, *args):
    func = _FUNCS.get(op.attrs["token"])
    if func is None:
        from jitflow.core.errors import UnknownError
        raise UnknownError(None, op, f"exceptions.KeyError: callback {op.attrs['token']} is "
                                     "not found (py_func functions live in the process that "
                                     "created them)")
    out = func(*[np.asarray(a) if not isinstance(a, np.ndarray) else a for a in args])
    touts = op.attrs["Tout"]
    if not op.attrs["listed"]:
        out = (out,)
    elif out is None:
        out = ()
    out = tuple(out)
    if len(out) != len(touts):
        from jitflow.core.errors import InvalidArgumentError
        raise InvalidArgumentError(None, op, f"{op.attrs['token']} returns {len(out)} values, "
                                   f"but expects to see {len(touts)} values.")
    result = []
    for v, d in zip(out, touts):
        arr = np.asarray(v)
        if d == _dtypes.string:
            arr = np.asarray(v, dtype=object)
        elif arr.dtype != d.as_numpy_dtype:
            from jitflow.core.errors import InvalidArgumentError
            raise InvalidArgumentError(
                None, op, f"{op.attrs['token']} returns {arr.dtype}, but expects "
                          f"{d.name} (Tout)")
        result.append(arr)
    return tuple(result)


register("PyFunc", infer=_py_func_infer, ref=_py_func_ref, differentiable=False, kind="other",
         stateful=True, doc="Calls a registered Python function on the inputs' values.")
register("PyFuncStateless", infer=_py_func_infer, ref=_py_func_ref, differentiable=False,
         kind="other", doc="PyFunc declared free of side effects.")


def py_func(func: Callable, inp, Tout, stateful: bool = True,  # noqa: N803  (TF1 name)
            name: Optional[str] = None):
    """`tf.py_func`: an op computing `func(*values of inp)` with NumPy arrays.

    `Tout` is one dtype (the result is one tensor) or a list (a list of tensors, possibly
    empty). Outputs have unknown static shapes; call `set_shape` where known.
    """
    if not callable(func):
        raise TypeError(f"func must be callable, got {func!r}")
    listed = isinstance(Tout, (list, tuple))
    touts = tuple(_dtypes.as_dtype(d) for d in (Tout if listed else [Tout]))
    token = f"pyfunc_{next(_TOKENS)}"
    _FUNCS[token] = func
    xs = [convert_to_tensor(x) for x in inp]
    op = make_op("PyFunc" if stateful else "PyFuncStateless", xs,
                 {"token": token, "Tout": touts, "listed": listed}, name=name,
                 graph=None if xs else get_default_graph())
    if not listed:
        return op.outputs[0]
    return list(op.outputs) if touts else op


def numpy_function(func: Callable, inp, Tout, name: Optional[str] = None):  # noqa: N803
    """`tf.numpy_function`: `py_func` declared stateful, as TF1 declares it."""
    return py_func(func, inp, Tout, stateful=True, name=name)
