"""`tf.nn.conv2d_transpose` and `tf.nn.conv2d_backprop_input`: the gradient of a convolution
with respect to its input, used as a layer ("deconvolution").

The op `Conv2DBackpropInputSizes` is TF's Conv2DBackpropInput: inputs (input_sizes, filter,
out_backprop), the size of the result given as an int vector. Its reference is the
Conv2DBackpropInput reference of conv.py applied to a zero tensor of that size; its
gradients are a convolution (for out_backprop) and a filter gradient (for the filter).
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.core import errors
from jitflow.core.graph import Tensor, convert_to_tensor, make_op, name_scope
from jitflow.compiler.ir import LibCall
from jitflow.ops.nn.conv import _conv_input_grad_ref, _np_conv_direct
from jitflow.ops.nn.window import _four, _np_vjp, _out_size, _padding
from jitflow.ops.nn.window_lowering import (
    _check_conv_grad_dims, _conv_params, _win_out, _win_stored, winograd_candidate,
)
from jitflow.ops.reduce import _legacy
from jitflow.ops.registry import Example, register
from jitflow.core.shapes import TensorShape

__all__: list = []

NAMESPACES = {"nn": ["conv2d_transpose", "conv2d_backprop_input"]}

_FLOATS = ("float16", "float32", "float64")
_CONV_ATTRS = ("strides", "padding", "dilations", "data_format")


def _infer(op):
    sizes, f, v = op.inputs
    if f.dtype != v.dtype:
        raise TypeError(f"Input 'out_backprop' of 'Conv2DBackpropInput' Op has type "
                        f"{v.dtype.name} that does not match type {f.dtype.name} of argument "
                        "'filter'.")
    if f.dtype.name not in _FLOATS:
        raise TypeError(f"Value passed to parameter 'filter' has DataType {f.dtype.name} not in "
                        f"list of allowed values: {', '.join(_FLOATS)}")
    if sizes.dtype not in (_dtypes.int32, _dtypes.int64):
        raise TypeError("input_sizes must be int32 or int64")
    for t, what in ((f, "filter"), (v, "out_backprop")):
        if t.shape.ndims not in (None, 4):
            raise ValueError(f"Shape must be rank 4 but is rank {t.shape.ndims} for "
                             f"'{op.name}' (op: 'Conv2DBackpropInput') ({what})")
    fd = f.shape.as_tuple() or (None,) * 4
    vd = v.shape.as_tuple() or (None,) * 4
    out = TensorShape(op.attrs["output_shape"])
    od = out.as_tuple() if out.ndims is not None else (None,) * 4
    if vd[3] is not None and fd[3] is not None and vd[3] != fd[3]:
        raise ValueError(f"input channels does not match filter's input channels, "
                         f"{vd[3]} != {fd[3]}")
    if od[3] is not None and fd[2] is not None and od[3] != fd[2]:
        raise ValueError(f"output_shape does not match filter's output channels, "
                         f"{od[3]} != {fd[2]}")
    return [(v.dtype, out)]


def _check_sizes(op, shape, f, v) -> None:
    """TF's run-time check: a convolution of `shape` by `f` must give `v`'s spatial size."""
    _, sh, sw, _ = op.attrs["strides"]
    _, dh, dw, _ = op.attrs["dilations"]
    for i, (n, k, s, d) in enumerate(((shape[1], f.shape[0], sh, dh),
                                      (shape[2], f.shape[1], sw, dw))):
        computed, _ = _out_size(n, k, s, d, op.attrs["padding"])
        actual = v.shape[1 + i]
        if computed != actual:
            raise errors.InvalidArgumentError(
                None, op, f"Conv2DSlowBackpropInput: Size of out_backprop doesn't match "
                          f"computed: actual = {actual}, computed = {computed} spatial_dim: "
                          f"{i + 1} input: {n} filter: {k} output: {actual} stride: {s} "
                          f"dilation: {d}\n\t [[node {op.name} (Conv2DBackpropInput)]]")
    if shape[0] != v.shape[0] or shape[3] != f.shape[2] or v.shape[3] != f.shape[3]:
        raise errors.InvalidArgumentError(
            None, op, f"Conv2DBackpropInput: input_sizes {list(shape)}, filter "
                      f"{list(f.shape)} and out_backprop {list(v.shape)} do not agree\n\t "
                      f"[[node {op.name} (Conv2DBackpropInput)]]")


def _ref(op, sizes, f, v):
    shape = tuple(int(s) for s in np.reshape(sizes, -1))
    if len(shape) != 4:
        raise errors.InvalidArgumentError(
            None, op, f"input_sizes must be 4-dimensional, got {len(shape)}")
    f, v = np.asarray(f), np.asarray(v)
    _check_sizes(op, shape, f, v)
    return _conv_input_grad_ref(op, np.zeros(shape, v.dtype), f, v)


def _grad(op, h):
    _, f, v = op.inputs
    attrs = {k: op.attrs[k] for k in _CONV_ATTRS}
    return [None,
            make_op("Conv2DBackpropFilter", [h, f, v], attrs,
                    name="Conv2DBackpropFilter").outputs[0],
            make_op("Conv2D", [h, f], attrs, name="Conv2D").outputs[0]]


def _example(stride: int, padding: str, out_hw: tuple):
    def build(f, v):
        return conv2d_transpose(v, f, [1, *out_hw, 2], [1, stride, stride, 1], padding)

    def expect(f, v):
        # the transpose of the convolution from [1, *out_hw, 2] to v's shape, column by column
        x0 = np.zeros((1, *out_hw, 2))
        return _np_vjp(lambda a, b: _np_conv_direct(a, b, stride, padding), [x0, f], 0, v)
    vhw = tuple(_out_size(n, 3, stride, 1, padding)[0] for n in out_hw)
    return Example(build, [(3, 3, 2, 4), (1, *vhw, 4)], expect,
                   id=f"{padding.lower()}_s{stride}")


def _lowerable(op) -> bool:
    """A static output shape (the usual `conv2d_transpose` with a literal `output_shape`),
    NHWC, SAME or VALID, rank-4 float filter and gradient."""
    sizes = op.attrs.get("output_shape") or []
    return (len(sizes) == 4 and all(isinstance(d, int) and d >= 0 for d in sizes)
            and op.attrs.get("padding") in ("SAME", "VALID")
            and all(t.shape.ndims == 4 and t.dtype.name in ("float32", "float64")
                    for t in (op.inputs[1], op.inputs[2], op.outputs[0])))


def _lower(low, op, pos: int) -> None:
    """`conv2d_input_grad` of the window library, the result's size from `output_shape`."""
    f = _win_stored(low, op.inputs[1], pos)
    g = _win_stored(low, op.inputs[2], pos)
    if low.is_fed(op.outputs[0]):
        return
    sizes = op.attrs["output_shape"]
    dims = tuple(1 if d == 1 else ("const", d) for d in sizes)
    ones = tuple(d == 1 for d in sizes)
    _check_conv_grad_dims(low, op, dims, f, g, pos, False)
    out = _win_out(low, op, ones, dims)
    fn = "conv2d_input_grad_w" if winograd_candidate(op, op.inputs[1]) else "conv2d_input_grad"
    low.emit(LibCall(fn, [f, g], [out], _conv_params(op), pos))


register("Conv2DBackpropInputSizes", infer=_infer, ref=_ref, grad=_grad, kind="other",
         lower=_lower, lowerable=_lowerable, shape_only=(0,),
         default_name="conv2d_transpose",
         doc="TF's Conv2DBackpropInput: inputs (input_sizes, filter [kh, kw, out, in], "
             "out_backprop); the gradient of Conv2D with respect to an input of that size.",
         examples=[_example(2, "SAME", (5, 4)), _example(2, "VALID", (5, 5)),
                   _example(1, "SAME", (3, 4))])


def _static_sizes(sizes: Tensor) -> list:
    """The known entries of an output-shape tensor (None where only known at run time)."""
    if sizes.op.type == "Const":
        return [int(d) for d in np.reshape(sizes.op.attrs["value"], -1)]
    if sizes.op.type == "Pack":
        return [int(t.op.attrs["value"]) if t.op.type == "Const" else None
                for t in sizes.op.inputs]
    n = sizes.shape.as_tuple()
    return [None] * 4 if n is None or n[0] is None else [None] * n[0]


def _backprop_input(sizes, f, v, strides, padding, dilations, data_format, name, scope):
    if data_format not in ("NHWC", None):
        raise ValueError(f"data_format {data_format!r} is not supported (only NHWC)")
    sizes = convert_to_tensor(sizes, dtype=None if isinstance(sizes, Tensor)
                              else _dtypes.int32, name="output_shape")
    if sizes.shape.ndims not in (None, 1) or sizes.shape.as_tuple() not in (None, (None,),
                                                                             (4,)):
        raise ValueError(f"output_shape must have shape (4,), got {sizes.shape}")
    f = convert_to_tensor(f, name="filter")
    v = convert_to_tensor(v, dtype=None if isinstance(v, Tensor) else f.dtype, name="value")
    attrs = {"strides": _four(strides, "strides"), "padding": _padding(padding),
             "dilations": _four(dilations if dilations is not None else 1, "dilations"),
             "data_format": "NHWC", "output_shape": _static_sizes(sizes)}
    return make_op("Conv2DBackpropInputSizes", [sizes, f, v], attrs,
                   name=scope or name).outputs[0]


def conv2d_transpose(value=None, filter=None, output_shape=None, strides=None,  # noqa: A002
                     padding: str = "SAME", data_format: str = "NHWC",
                     name: Optional[str] = None, input=None, filters=None,  # noqa: A002
                     dilations=None) -> Tensor:
    """`tf.nn.conv2d_transpose`: the transpose of `conv2d` (NHWC); `filter` is
    [height, width, output_channels, in_channels] and `output_shape` the result's shape."""
    value = _legacy(value, input, "value", "input")
    filter = _legacy(filter, filters, "filter", "filters")  # noqa: A001
    if value is None or filter is None or output_shape is None or strides is None:
        raise ValueError("conv2d_transpose needs value, filter, output_shape and strides")
    with name_scope(name, "conv2d_transpose", [value, filter, output_shape]) as scope:
        return _backprop_input(output_shape, filter, value, strides, padding, dilations,
                               data_format, name, scope)


def conv2d_backprop_input(input_sizes, filter=None, out_backprop=None,  # noqa: A002
                          strides=None, padding=None, use_cudnn_on_gpu: bool = True,
                          data_format: str = "NHWC", dilations=(1, 1, 1, 1),
                          name: Optional[str] = None, filters=None) -> Tensor:
    """`tf.nn.conv2d_backprop_input`: the gradient of `conv2d` with respect to an input of
    shape `input_sizes`, given the filter and the output gradient."""
    filter = _legacy(filter, filters, "filter", "filters")  # noqa: A001
    if filter is None or out_backprop is None or strides is None or padding is None:
        raise ValueError("conv2d_backprop_input needs filter, out_backprop, strides, padding")
    with name_scope(name, "Conv2DBackpropInput", [input_sizes, filter, out_backprop]) as scope:
        return _backprop_input(input_sizes, filter, out_backprop, strides, padding, dilations,
                               data_format, name, scope)

