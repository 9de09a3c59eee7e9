"""Depthwise convolution: DepthwiseConv2dNative (each input channel convolved with its own
filters) and its gradients, `tf.nn.depthwise_conv2d`, `depthwise_conv2d_native` and
`separable_conv2d` (a depthwise then a 1x1 convolution).
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from jitflow.core.graph import Tensor, convert_to_tensor, make_op, name_scope
from jitflow.ops.math.common import _FLOATS, check_dtype
from jitflow.ops.nn.conv import _np_conv_direct, conv2d
from jitflow.ops.nn.window import (
    _four, _im2col, _np_vjp, _out_size, _padded, _padding, _taps, _to_nhwc, _window_shape,
)
from jitflow.ops.nn.window_lowering import (
    _lower_conv, _lower_conv_filter_grad, _lower_conv_input_grad, _window_lowerable,
)
from jitflow.ops.registry import Example, register
from jitflow.core.shapes import TensorShape, shape_tf_str

__all__: list = []

NAMESPACES = {
    "nn": [
        "depthwise_conv2d", "depthwise_conv2d_native", "separable_conv2d",
    ],
}


# -- depthwise convolution ------------------------------------------------------------------------
def _depthwise_infer(op):
    x, f = op.inputs
    if x.dtype != f.dtype:
        raise TypeError(f"Input 'filter' of '{op.type}' Op has type {f.dtype.name} that does "
                        f"not match type {x.dtype.name} of argument 'input'.")
    check_dtype(op, x, _FLOATS, "input")
    for t, what in ((x, "input"), (f, "filter")):
        if t.shape.ndims not in (None, 4):
            raise ValueError(f"Shape must be rank 4 but is rank {t.shape.ndims} for "
                             f"'{op.name}' (op: '{op.type}') ({what})")
    fd = f.shape.as_tuple() if f.shape.ndims is not None else (None,) * 4
    xd = x.shape.as_tuple() if x.shape.ndims is not None else (None,) * 4
    if xd[3] is not None and fd[2] is not None and xd[3] != fd[2]:
        raise ValueError(f"Dimensions must be equal, but are {xd[3]} and {fd[2]} for "
                         f"'{op.name}' (op: '{op.type}') with input shapes: "
                         f"{shape_tf_str(x.shape)}, {shape_tf_str(f.shape)}.")
    c = xd[3] if xd[3] is not None else fd[2]
    out_c = None if c is None or fd[3] is None else c * fd[3]
    if fd[0] is None or fd[1] is None:
        return [(x.dtype, TensorShape([xd[0], None, None, out_c]))]
    n, oh, ow = _window_shape(op, x.shape, fd[0], fd[1])
    return [(x.dtype, TensorShape([n, oh, ow, out_c]))]


def _depthwise_cols(op, x, f):
    """Patches [n, oh, ow, kh * kw, c] of the padded input, and the padding geometry."""
    kh, kw, c, _ = f.shape
    xp, oh, ow, ph, pw = _padded(op, x, kh, kw)
    if oh == 0 or ow == 0:
        return np.zeros((x.shape[0], oh, ow, kh * kw, c), x.dtype), xp, oh, ow, ph, pw
    cols = _im2col(op, xp, kh, kw, oh, ow)
    return cols.reshape(cols.shape[:3] + (kh * kw, c)), xp, oh, ow, ph, pw


def _depthwise_ref(op, x, f):
    x, f = np.asarray(x), np.asarray(f)
    kh, kw, c, m = f.shape
    cols, *_ = _depthwise_cols(op, x, f)
    out = np.einsum("nyztc,tcq->nyzcq", cols, f.reshape(kh * kw, c, m))
    return out.reshape(out.shape[:3] + (c * m,)).astype(x.dtype, copy=False)


def _depthwise_input_grad_ref(op, x, f, g):
    x, f, g = np.asarray(x), np.asarray(f), np.asarray(g)
    kh, kw, c, m = f.shape
    xp, oh, ow, ph, pw = _padded(op, x, kh, kw)
    dxp = np.zeros_like(xp)
    if g.size:
        gq = g.reshape(g.shape[:3] + (c, m))
        dcols = np.einsum("nyzcq,tcq->nyztc", gq, f.reshape(kh * kw, c, m))
        dcols = dcols.reshape(g.shape[:3] + (kh, kw, c))
        for i, j, sl in _taps(op, kh, kw, oh, ow):
            dxp[sl] += dcols[:, :, :, i, j, :]
    return dxp[:, ph:ph + x.shape[1], pw:pw + x.shape[2], :]


def _depthwise_filter_grad_ref(op, x, f, g):
    x, f, g = np.asarray(x), np.asarray(f), np.asarray(g)
    kh, kw, c, m = f.shape
    cols, *_ = _depthwise_cols(op, x, f)
    if g.size == 0:
        return np.zeros_like(f)
    gq = g.reshape(g.shape[:3] + (c, m))
    df = np.einsum("nyztc,nyzcq->tcq", cols, gq)
    return df.reshape(f.shape).astype(f.dtype, copy=False)


def _depthwise_grad(op, g):
    x, f = op.inputs
    attrs = dict(op.attrs)
    dx = make_op("DepthwiseConv2dNativeBackpropInput", [x, f, g], attrs,
                 name="DepthwiseConv2dNativeBackpropInput")
    df = make_op("DepthwiseConv2dNativeBackpropFilter", [x, f, g], attrs,
                 name="DepthwiseConv2dNativeBackpropFilter")
    return [dx.outputs[0], df.outputs[0]]


def _np_depthwise_direct(x, f, stride, padding):
    """An independent loop-by-loop depthwise convolution for the examples."""
    c, m = f.shape[2], f.shape[3]
    outs = [_np_conv_direct(x[..., k:k + 1], f[:, :, k:k + 1, q:q + 1], stride, padding)
            for k in range(c) for q in range(m)]
    return np.concatenate(outs, axis=3)


def _depthwise_example(stride: int, padding: str, id_: str):
    return Example(lambda x, f: depthwise_conv2d(x, f, [1, stride, stride, 1], padding),
                   [(2, 5, 4, 3), (3, 2, 3, 2)],
                   lambda x, f: _np_depthwise_direct(x, f, stride, padding), id=id_)


def _depthwise_backprop_example(which: int, stride: int, padding: str):
    def build(x, f, g):
        op_type = ("DepthwiseConv2dNativeBackpropInput" if which == 0
                   else "DepthwiseConv2dNativeBackpropFilter")
        attrs = {"strides": (1, stride, stride, 1), "padding": padding,
                 "dilations": (1, 1, 1, 1), "data_format": "NHWC"}
        return make_op(op_type, [x, f, g], attrs).outputs[0]
    out_hw = tuple(_out_size(n, k, stride, 1, padding)[0] for n, k in ((5, 2), (4, 3)))
    return Example(build, [(1, 5, 4, 2), (2, 3, 2, 3), (1,) + out_hw + (6,)],
                   lambda x, f, g: _np_vjp(lambda a, b: _np_depthwise_direct(a, b, stride,
                                                                             padding),
                                           [x, f], which, g),
                   id=f"{padding.lower()}_s{stride}")


register("DepthwiseConv2dNative", infer=_depthwise_infer, ref=_depthwise_ref,
         grad=_depthwise_grad, kind="other", lower=_lower_conv, lowerable=_window_lowerable,
         doc="Depthwise 2-D convolution, NHWC input [n, h, w, c] and filter [kh, kw, c, mult]: "
             "output channel c * mult + q is input channel c convolved with filter[:, :, c, q].",
         examples=[_depthwise_example(1, "SAME", "same"),
                   _depthwise_example(2, "VALID", "valid_s2")])


def _depthwise_input_grad_grad(op, h):
    x, f, g = op.inputs
    attrs = dict(op.attrs)
    return [None,
            make_op("DepthwiseConv2dNativeBackpropFilter", [h, f, g], attrs,
                    name="DepthwiseConv2dNativeBackpropFilter").outputs[0],
            make_op("DepthwiseConv2dNative", [h, f], attrs,
                    name="DepthwiseConv2dNative").outputs[0]]


def _depthwise_filter_grad_grad(op, h):
    x, f, g = op.inputs
    attrs = dict(op.attrs)
    return [make_op("DepthwiseConv2dNativeBackpropInput", [x, h, g], attrs,
                    name="DepthwiseConv2dNativeBackpropInput").outputs[0],
            None,
            make_op("DepthwiseConv2dNative", [x, h], attrs,
                    name="DepthwiseConv2dNative").outputs[0]]


for _t, _r, _w, _gg in (("DepthwiseConv2dNativeBackpropInput", _depthwise_input_grad_ref, 0,
                         _depthwise_input_grad_grad),
                        ("DepthwiseConv2dNativeBackpropFilter", _depthwise_filter_grad_ref, 1,
                         _depthwise_filter_grad_grad)):
    register(_t, infer=(lambda op, w=_w: [(op.inputs[0].dtype, op.inputs[w].shape)]), ref=_r,
             grad=_gg, kind="other", shape_only=(_w,), lowerable=_window_lowerable,
             lower=_lower_conv_input_grad if _w == 0 else _lower_conv_filter_grad,
             doc="Inputs (input, filter, output gradient): the gradient of "
                 "DepthwiseConv2dNative with respect to "
                 + ("its input." if _w == 0 else "its filter."),
             examples=[_depthwise_backprop_example(_w, 2, "SAME"),
                       _depthwise_backprop_example(_w, 1, "VALID")])


def depthwise_conv2d(input, filter, strides, padding, rate=None, name: Optional[str] = None,
                     data_format: Optional[str] = None, dilations=None) -> Tensor:
    """`tf.nn.depthwise_conv2d`: each input channel convolved with its own `mult` filters
    (filter [kh, kw, in, mult], output channels in * mult; op `DepthwiseConv2dNative`)."""
    rate = dilations if rate is None else rate
    with name_scope(name, "depthwise", [input, filter]) as scope:
        x = convert_to_tensor(input, name="input")
        f = convert_to_tensor(filter, dtype=None if isinstance(filter, Tensor) else x.dtype,
                              name="filter")
        x, back = _to_nhwc(x, data_format)
        dil = (1, 1, 1, 1) if rate is None else _four(rate, "rate")
        attrs = {"strides": _four(strides, "strides"), "padding": _padding(padding),
                 "dilations": dil, "data_format": "NHWC"}
        if dil != (1, 1, 1, 1) and attrs["strides"] != (1, 1, 1, 1):
            raise ValueError("depthwise_conv2d: strides > 1 with rate > 1 is not supported "
                             "(as TF)")
        if (dil != (1, 1, 1, 1) and attrs["padding"] == "SAME"
                and not f.shape.is_fully_defined()):
            # TF pads a dilated SAME convolution by the filter's static size, and raises
            # ValueError at graph construction where that size is unknown
            raise ValueError(f"depthwise_conv2d with rate {list(dil[1:3])} and SAME padding "
                             f"needs the filter's full static shape; filter {f.name} has shape "
                             f"{f.shape}")
        return back(make_op("DepthwiseConv2dNative", [x, f], attrs, name=scope).outputs[0])


def separable_conv2d(input, depthwise_filter, pointwise_filter, strides, padding, rate=None,
                     name: Optional[str] = None, data_format: Optional[str] = None,
                     dilations=None) -> Tensor:
    """`tf.nn.separable_conv2d`: a depthwise convolution, then a 1x1 convolution mixing the
    channels (pointwise filter [1, 1, in * mult, out])."""
    with name_scope(name, "separable_conv2d", [input, depthwise_filter, pointwise_filter]):
        x = convert_to_tensor(input, name="input")
        x, back = _to_nhwc(x, data_format)
        dw = depthwise_conv2d(x, depthwise_filter, strides, padding, rate=rate,
                              dilations=dilations, name="depthwise")
        return back(conv2d(dw, pointwise_filter, [1, 1, 1, 1], "VALID", name="pointwise"))


def depthwise_conv2d_native(input, filter, strides, padding, data_format: str = "NHWC",
                            dilations=(1, 1, 1, 1), name: Optional[str] = None) -> Tensor:
    """`tf.nn.depthwise_conv2d_native`: the op itself, with TF's argument order."""
    return depthwise_conv2d(input, filter, strides, padding, name=name,
                            data_format=data_format, dilations=dilations)
