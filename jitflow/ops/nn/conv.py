"""2-D convolution (NHWC input, HWIO filter): Conv2D, its gradients Conv2DBackpropInput and
Conv2DBackpropFilter (each with its own gradient, so second derivatives work), `tf.nn.conv2d`,
and the compositions `atrous_conv2d`, `conv1d`, `convolution` (1-D and 2-D) and
`conv2d_backprop_filter`. The transposed convolution is conv_transpose.py.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from jitflow.core.graph import Tensor, convert_to_tensor, make_op, name_scope
from jitflow.ops.math.common import _FLOATS, check_dtype
from jitflow.ops.nn.window import (
    _conv_padding, _four, _im2col, _nchw_four, _np_vjp, _padded, _taps, _to_nhwc,
    _window_shape,
)
from jitflow.ops.nn.window_lowering import (
    _lower_conv, _lower_conv_filter_grad, _lower_conv_input_grad, _window_lowerable,
)
from jitflow.ops.reduce import _legacy
from jitflow.ops.registry import Example, register
from jitflow.core.shapes import TensorShape, shape_tf_str

__all__: list = []

NAMESPACES = {
    "nn": [
        "conv2d", "atrous_conv2d", "conv1d", "convolution", "conv2d_backprop_filter",
    ],
}


def _conv_infer(op):
    x, f = op.inputs
    if x.dtype != f.dtype:
        raise TypeError(f"Input 'filter' of 'Conv2D' Op has type {f.dtype.name} that does not "
                        f"match type {x.dtype.name} of argument 'input'.")
    check_dtype(op, x, _FLOATS, "input")
    for t, what in ((x, "input"), (f, "filter")):
        if t.shape.ndims not in (None, 4):
            raise ValueError(f"Shape must be rank 4 but is rank {t.shape.ndims} for "
                             f"'{op.name}' (op: 'Conv2D') ({what})")
    fd = f.shape.as_tuple() if f.shape.ndims is not None else (None,) * 4
    xd = x.shape.as_tuple() if x.shape.ndims is not None else (None,) * 4
    if xd[3] is not None and fd[2] is not None and xd[3] != fd[2]:
        raise ValueError(f"Dimensions must be equal, but are {xd[3]} and {fd[2]} for "
                         f"'{op.name}' (op: 'Conv2D') with input shapes: "
                         f"{shape_tf_str(x.shape)}, {shape_tf_str(f.shape)}.")
    if fd[0] is None or fd[1] is None:
        return [(x.dtype, TensorShape([xd[0], None, None, fd[3]]))]
    n, oh, ow = _window_shape(op, x.shape, fd[0], fd[1])
    return [(x.dtype, TensorShape([n, oh, ow, fd[3]]))]


def _conv_ref(op, x, f):
    x, f = np.asarray(x), np.asarray(f)
    kh, kw, _, o = f.shape
    xp, oh, ow, _, _ = _padded(op, x, kh, kw)
    if oh == 0 or ow == 0:
        return np.zeros((x.shape[0], oh, ow, o), dtype=np.result_type(x, f))
    cols = _im2col(op, xp, kh, kw, oh, ow)
    return (cols.reshape(-1, cols.shape[-1]) @ f.reshape(-1, o)).reshape(cols.shape[:3] + (o,))


def _conv_input_grad_ref(op, x, f, g):
    x, f, g = np.asarray(x), np.asarray(f), np.asarray(g)
    kh, kw, c, o = f.shape
    xp, oh, ow, ph, pw = _padded(op, x, kh, kw)
    dxp = np.zeros_like(xp)
    if g.size:
        dcols = (g.reshape(-1, o) @ f.reshape(-1, o).T).reshape(g.shape[:3] + (kh, kw, c))
        for i, j, sl in _taps(op, kh, kw, oh, ow):
            dxp[sl] += dcols[:, :, :, i, j, :]
    return dxp[:, ph:ph + x.shape[1], pw:pw + x.shape[2], :]


def _conv_filter_grad_ref(op, x, f, g):
    x, f, g = np.asarray(x), np.asarray(f), np.asarray(g)
    kh, kw, c, o = f.shape
    xp, oh, ow, _, _ = _padded(op, x, kh, kw)
    if g.size == 0:
        return np.zeros_like(f)
    cols = _im2col(op, xp, kh, kw, oh, ow)
    df = cols.reshape(-1, cols.shape[-1]).T @ g.reshape(-1, o)
    return df.reshape(f.shape).astype(f.dtype, copy=False)


def _conv_grad(op, g):
    x, f = op.inputs
    attrs = dict(op.attrs)
    dx = make_op("Conv2DBackpropInput", [x, f, g], attrs, name="Conv2DBackpropInput")
    df = make_op("Conv2DBackpropFilter", [x, f, g], attrs, name="Conv2DBackpropFilter")
    return [dx.outputs[0], df.outputs[0]]


def _np_conv_direct(x, f, stride, padding):
    """An independent, loop-by-loop NHWC convolution for the examples; `padding` is "SAME",
    "VALID" or ((top, bottom), (left, right))."""
    n, h, w, c = x.shape
    kh, kw, _, o = f.shape
    if not isinstance(padding, str):
        (ph, pb), (pw, pr) = padding
        oh, ow = (h + ph + pb - kh) // stride + 1, (w + pw + pr - kw) // stride + 1
    elif padding == "SAME":
        oh, ow = -(-h // stride), -(-w // stride)
        ph = max((oh - 1) * stride + kh - h, 0) // 2
        pw = max((ow - 1) * stride + kw - w, 0) // 2
    else:
        oh, ow, ph, pw = (h - kh) // stride + 1, (w - kw) // stride + 1, 0, 0
    out = np.zeros((n, oh, ow, o))
    for b in range(n):
        for y in range(oh):
            for z in range(ow):
                for i in range(kh):
                    for j in range(kw):
                        r, q = y * stride + i - ph, z * stride + j - pw
                        if 0 <= r < h and 0 <= q < w:
                            out[b, y, z] += x[b, r, q] @ f[i, j]
    return out


register("Conv2D", infer=_conv_infer, ref=_conv_ref, grad=_conv_grad, kind="other",
         lower=_lower_conv, lowerable=_window_lowerable,
         doc="2-D convolution, NHWC input and HWIO filter; attrs strides, padding, dilations.",
         examples=[Example(lambda x, f: conv2d(x, f, [1, 1, 1, 1], "SAME"),
                           [(2, 5, 4, 3), (3, 2, 3, 2)],
                           lambda x, f: _np_conv_direct(x, f, 1, "SAME"), id="same"),
                   Example(lambda x, f: conv2d(x, f, [1, 2, 2, 1], "VALID"),
                           [(1, 5, 6, 2), (2, 3, 2, 3)],
                           lambda x, f: _np_conv_direct(x, f, 2, "VALID"), id="valid_s2"),
                   Example(lambda x, f: conv2d(x, f, 2, "SAME"), [(1, 5, 5, 1), (3, 3, 1, 2)],
                           lambda x, f: _np_conv_direct(x, f, 2, "SAME"), id="same_s2"),
                   Example(lambda x, f: conv2d(x, f, 2, [[0, 0], [1, 2], [3, 0], [0, 0]]),
                           [(2, 5, 4, 2), (3, 2, 2, 3)],
                           lambda x, f: _np_conv_direct(x, f, 2, ((1, 2), (3, 0))),
                           id="explicit_s2")])


def _conv_backprop_example(which: int, stride: int, padding):
    def build(x, f, g):
        op_type = "Conv2DBackpropInput" if which == 0 else "Conv2DBackpropFilter"
        attrs = {"strides": (1, stride, stride, 1), "padding": padding,
                 "dilations": (1, 1, 1, 1), "data_format": "NHWC"}
        if not isinstance(padding, str):
            (a, b), (c, d) = padding
            attrs.update(padding="EXPLICIT", explicit_paddings=(0, 0, a, b, c, d, 0, 0))
        return make_op(op_type, [x, f, g], attrs).outputs[0]
    out_hw = {"SAME": (3, 2), "VALID": (2, 1)}.get(padding, (3, 3))
    name = padding.lower() if isinstance(padding, str) else "explicit"
    return Example(build, [(1, 5, 4, 2), (2, 3, 2, 3), (1,) + out_hw + (3,)],
                   lambda x, f, g: _np_vjp(lambda a, b: _np_conv_direct(a, b, stride, padding),
                                           [x, f], which, g),
                   id=f"{name}_s{stride}")


def _conv_input_grad_grad(op, h):
    """Conv2DBackpropInput is linear in the filter and in g."""
    x, f, g = op.inputs
    attrs = dict(op.attrs)
    return [None,
            make_op("Conv2DBackpropFilter", [h, f, g], attrs, name="Conv2DBackpropFilter"
                    ).outputs[0],
            make_op("Conv2D", [h, f], attrs, name="Conv2D").outputs[0]]


def _conv_filter_grad_grad(op, h):
    """Conv2DBackpropFilter is linear in the input and in g."""
    x, f, g = op.inputs
    attrs = dict(op.attrs)
    return [make_op("Conv2DBackpropInput", [x, h, g], attrs, name="Conv2DBackpropInput"
                    ).outputs[0],
            None,
            make_op("Conv2D", [x, h], attrs, name="Conv2D").outputs[0]]


for _t, _r, _w, _gg in (("Conv2DBackpropInput", _conv_input_grad_ref, 0, _conv_input_grad_grad),
                        ("Conv2DBackpropFilter", _conv_filter_grad_ref, 1,
                         _conv_filter_grad_grad)):
    register(_t, infer=(lambda op, w=_w: [(op.inputs[0].dtype, op.inputs[w].shape)]), ref=_r,
             grad=_gg, kind="other", shape_only=(_w,), lowerable=_window_lowerable,
             lower=_lower_conv_input_grad if _w == 0 else _lower_conv_filter_grad,
             doc="Inputs (input, filter, output gradient): the gradient of Conv2D with respect "
                 "to " + ("its input." if _w == 0 else "its filter."),
             examples=[_conv_backprop_example(_w, 2, "SAME"),
                       _conv_backprop_example(_w, 2, "VALID"),
                       _conv_backprop_example(_w, 2, ((1, 0), (0, 3)))])


def conv2d(input, filter=None, strides=None, padding=None, use_cudnn_on_gpu: bool = True,
           data_format: str = "NHWC", dilations=(1, 1, 1, 1), name: Optional[str] = None,
           filters=None) -> Tensor:
    """`tf.nn.conv2d`: NHWC input [batch, h, w, in], filter [kh, kw, in, out] (op `Conv2D`).

    `padding` is "SAME", "VALID" or TF's explicit form: four [before, after] pairs in the
    order of `data_format` (zeros for batch and channels), e.g. [[0, 0], [1, 2], [3, 0],
    [0, 0]]; the op then has padding "EXPLICIT" and attr `explicit_paddings` (8 ints, NHWC:
    jitflow computes NCHW as NHWC between transposes). The window library reads the padding
    amounts directly (no padded copy of the input)."""
    filter = _legacy(filter, filters, "filter", "filters")
    if filter is None or strides is None or padding is None:
        raise ValueError("conv2d needs filter, strides and padding")
    if data_format == "NCHW":
        strides, dilations = _nchw_four(strides, "strides"), _nchw_four(dilations, "dilations")
    with name_scope(name, "Conv2D", [input, filter]) as scope:
        x = convert_to_tensor(input, name="input")
        f = convert_to_tensor(filter, dtype=None if isinstance(filter, Tensor) else x.dtype,
                              name="filter")
        pad_attr, explicit = _conv_padding(padding, data_format)
        x, back = _to_nhwc(x, data_format)
        attrs = {"strides": _four(strides, "strides"), "padding": pad_attr,
                 "dilations": _four(dilations, "dilations"), "data_format": "NHWC"}
        if explicit:
            attrs["explicit_paddings"] = explicit
        if attrs["dilations"] != (1, 1, 1, 1) and attrs["strides"] != (1, 1, 1, 1):
            raise ValueError("conv2d: strides > 1 with dilations > 1 is not supported (as TF)")
        return back(make_op("Conv2D", [x, f], attrs, name=scope).outputs[0])


# -- atrous, 1-D and N-D convolution, conv2d_backprop_filter (compositions) -----------------------
def atrous_conv2d(value, filters, rate: int, padding: str,
                  name: Optional[str] = None) -> Tensor:
    """`tf.nn.atrous_conv2d`: convolution with the filter taps `rate` pixels apart."""
    if rate < 1:
        raise ValueError(f"rate {rate} cannot be less than one")
    return conv2d(value, filters, [1, 1, 1, 1], padding, dilations=[1, rate, rate, 1],
                  name=name or "atrous_conv2d")


def conv1d(value=None, filters=None, stride=None, padding=None, use_cudnn_on_gpu=None,
           data_format: str = "NWC", name: Optional[str] = None, input=None,  # noqa: A002
           dilations=None) -> Tensor:
    """`tf.nn.conv1d`: [batch, width, in] by [k, in, out], as a 2-D convolution of height 1
    (as TF does)."""
    from jitflow.ops.shape_ops import expand_dims, squeeze
    value = _legacy(value, input, "value", "input")
    if data_format not in ("NWC", "NHWC"):
        raise ValueError(f"data_format {data_format!r} is not supported (only NWC)")
    with name_scope(name, "conv1d", [value, filters]) as scope:
        x = expand_dims(convert_to_tensor(value, name="value"), 1)
        f = expand_dims(convert_to_tensor(filters, name="filters"), 0)
        d = 1 if dilations is None else int(np.reshape(dilations, -1)[-1] if np.ndim(
            dilations) else dilations)
        y = conv2d(x, f, [1, 1, int(stride), 1], padding, dilations=[1, 1, d, 1])
        return squeeze(y, [1], name=scope[:-1])


def convolution(input, filter=None, padding=None, strides=None,  # noqa: A002
                dilation_rate=None, name: Optional[str] = None, data_format=None,
                filters=None, dilations=None) -> Tensor:
    """`tf.nn.convolution` for 1-D and 2-D inputs (channels last)."""
    filter = _legacy(filter, filters, "filter", "filters")  # noqa: A001
    dilation_rate = _legacy(dilation_rate, dilations, "dilation_rate", "dilations")
    x = convert_to_tensor(input, name="input")
    r = x.shape.ndims
    if r == 3:
        return conv1d(x, filter, 1 if strides is None else int(np.reshape(strides, -1)[0]),
                      padding, dilations=None if dilation_rate is None
                      else int(np.reshape(dilation_rate, -1)[0]), name=name)
    if r != 4:
        raise NotImplementedError("convolution supports 1-D and 2-D inputs")
    s = [1, 1] if strides is None else list(np.broadcast_to(strides, 2))
    d = [1, 1] if dilation_rate is None else list(np.broadcast_to(dilation_rate, 2))
    return conv2d(x, filter, [1, *s, 1], padding, dilations=[1, *d, 1],
                  name=name or "convolution")


def conv2d_backprop_filter(input, filter_sizes, out_backprop, strides,  # noqa: A002
                           padding, use_cudnn_on_gpu: bool = True, data_format: str = "NHWC",
                           dilations=(1, 1, 1, 1), name: Optional[str] = None) -> Tensor:
    """`tf.nn.conv2d_backprop_filter`: the gradient of `conv2d` with respect to a filter of
    shape `filter_sizes` (known when the graph is built)."""
    from jitflow.ops.sources import zeros
    if isinstance(filter_sizes, Tensor):
        if filter_sizes.op.type != "Const":
            raise NotImplementedError("conv2d_backprop_filter: filter_sizes must be static")
        filter_sizes = [int(v) for v in np.reshape(filter_sizes.op.attrs["value"], -1)]
    with name_scope(name, "Conv2DBackpropFilter", [input, out_backprop]) as scope:
        x = convert_to_tensor(input, name="input")
        g = convert_to_tensor(out_backprop, name="out_backprop")
        f = zeros([int(v) for v in filter_sizes], dtype=x.dtype)
        pad_attr, explicit = _conv_padding(padding, "NHWC", "Conv2DBackpropFilter")
        attrs = {"strides": _four(strides, "strides"), "padding": pad_attr,
                 "dilations": _four(dilations, "dilations"), "data_format": "NHWC"}
        if explicit:
            attrs["explicit_paddings"] = explicit
        return make_op("Conv2DBackpropFilter", [x, f, g], attrs,
                       name=scope[:-1]).outputs[0]
