"""Pooling (NHWC): MaxPool, AvgPool (padding not counted in the mean), their gradients
MaxPoolGrad and AvgPoolGrad, `tf.nn.max_pool`, `tf.nn.avg_pool`, their aliases (`max_pool2d`,
`max_pool_v2`, ...) and 1-D pooling (`max_pool1d`, `avg_pool1d`).
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from jitflow.core.graph import Tensor, convert_to_tensor, make_op, name_scope
from jitflow.ops.math.common import _FLOATS, check_dtype
from jitflow.ops.nn.window import (
    _four, _nchw_four, _np_vjp, _padded, _padding, _taps, _to_nhwc, _window_shape,
)
from jitflow.ops.nn.window_lowering import (
    _lower_avg_pool_grad, _lower_max_pool_grad, _lower_pool, _window_lowerable,
)
from jitflow.ops.reduce import _legacy, _no_second_order
from jitflow.ops.registry import Example, register
from jitflow.core.shapes import TensorShape

__all__: list = []

NAMESPACES = {
    "nn": [
        "max_pool", "avg_pool", "max_pool2d", "avg_pool2d", "max_pool_v2", "avg_pool_v2",
        "max_pool1d", "avg_pool1d",
    ],
}


def _pool_infer(op):
    x = op.inputs[0]
    check_dtype(op, x, _FLOATS, "value")
    if x.shape.ndims not in (None, 4):
        raise ValueError(f"Shape must be rank 4 but is rank {x.shape.ndims} for '{op.name}' "
                         f"(op: '{op.type}')")
    _, kh, kw, _ = op.attrs["ksize"]
    n, oh, ow = _window_shape(op, x.shape, kh, kw)
    c = x.shape.as_tuple()[3] if x.shape.ndims is not None else None
    return [(x.dtype, TensorShape([n, oh, ow, c]))]


def _max_pool_ref(op, x):
    x = np.asarray(x)
    _, kh, kw, _ = op.attrs["ksize"]
    xp, oh, ow, _, _ = _padded(op, x, kh, kw, -np.inf)
    out = np.full((x.shape[0], oh, ow, x.shape[3]), -np.inf, dtype=x.dtype)
    for _, _, sl in _taps(op, kh, kw, oh, ow):
        np.maximum(out, xp[sl], out=out)
    return out


def _max_pool_grad_ref(op, x, y, g):
    """Each output's gradient goes to the first maximal element of its window."""
    x, y, g = np.asarray(x), np.asarray(y), np.asarray(g)
    _, kh, kw, _ = op.attrs["ksize"]
    xp, oh, ow, ph, pw = _padded(op, x, kh, kw, -np.inf)
    dxp = np.zeros(xp.shape, dtype=g.dtype)
    taken = np.zeros(y.shape, dtype=bool)
    for _, _, sl in _taps(op, kh, kw, oh, ow):
        hit = (xp[sl] == y) & ~taken
        dxp[sl] += np.where(hit, g, 0)
        taken |= hit
    return dxp[:, ph:ph + x.shape[1], pw:pw + x.shape[2], :]


def _avg_counts(op, x_shape, kh, kw):
    ones = np.ones((1,) + tuple(x_shape[1:3]) + (1,))
    op_pad, oh, ow, _, _ = _padded(op, ones, kh, kw)
    cnt = np.zeros((1, oh, ow, 1))
    for _, _, sl in _taps(op, kh, kw, oh, ow):
        cnt += op_pad[sl]
    return cnt


def _avg_pool_ref(op, x):
    """The mean over each window's elements inside the input (padding is not counted)."""
    x = np.asarray(x)
    _, kh, kw, _ = op.attrs["ksize"]
    xp, oh, ow, _, _ = _padded(op, x, kh, kw)
    total = np.zeros((x.shape[0], oh, ow, x.shape[3]), dtype=np.float64)
    for _, _, sl in _taps(op, kh, kw, oh, ow):
        total += xp[sl]
    return (total / _avg_counts(op, x.shape, kh, kw)).astype(x.dtype)


def _avg_pool_grad_ref(op, x, g):
    x, g = np.asarray(x), np.asarray(g)
    _, kh, kw, _ = op.attrs["ksize"]
    xp, oh, ow, ph, pw = _padded(op, x, kh, kw)
    share = g / _avg_counts(op, x.shape, kh, kw)
    dxp = np.zeros(xp.shape, dtype=np.float64)
    for _, _, sl in _taps(op, kh, kw, oh, ow):
        dxp[sl] += share
    return dxp[:, ph:ph + x.shape[1], pw:pw + x.shape[2], :].astype(g.dtype)


def _np_pool_direct(x, k, stride, padding, reduce):
    n, h, w, c = x.shape
    if padding == "SAME":
        oh, ow = -(-h // stride), -(-w // stride)
        ph = max((oh - 1) * stride + k - h, 0) // 2
        pw = max((ow - 1) * stride + k - w, 0) // 2
    else:
        oh, ow, ph, pw = (h - k) // stride + 1, (w - k) // stride + 1, 0, 0
    out = np.zeros((n, oh, ow, c))
    for y in range(oh):
        for z in range(ow):
            r0, q0 = y * stride - ph, z * stride - pw
            win = x[:, max(r0, 0):r0 + k, max(q0, 0):q0 + k, :]
            out[:, y, z, :] = reduce(win, axis=(1, 2))
    return out


register("MaxPool", infer=_pool_infer, ref=_max_pool_ref,
         grad=lambda op, g: [make_op("MaxPoolGrad", [op.inputs[0], op.outputs[0], g],
                                     dict(op.attrs), name="MaxPoolGrad").outputs[0]],
         kind="other", lower=_lower_pool, lowerable=_window_lowerable,
         doc="Max over windows (attrs ksize, strides, padding), NHWC.",
         examples=[Example(lambda x: max_pool(x, [1, 2, 2, 1], [1, 2, 2, 1], "VALID"),
                           [(2, 4, 5, 3)], lambda x: _np_pool_direct(x, 2, 2, "VALID", np.max),
                           id="valid"),
                   Example(lambda x: max_pool(x, 3, 2, "SAME"), [(1, 5, 4, 2)],
                           lambda x: _np_pool_direct(x, 3, 2, "SAME", np.max), id="same")])


def _np_max_pool_grad(x, g, k, stride):
    """VALID max pooling's gradient by looping over windows (first maximum wins)."""
    out = np.zeros(x.shape)
    for b in range(x.shape[0]):
        for c in range(x.shape[3]):
            for y in range(g.shape[1]):
                for z in range(g.shape[2]):
                    win = x[b, y * stride:y * stride + k, z * stride:z * stride + k, c]
                    i, j = np.unravel_index(np.argmax(win), win.shape)
                    out[b, y * stride + i, z * stride + j, c] += g[b, y, z, c]
    return out


register("MaxPoolGrad",
         infer=lambda op: [(op.inputs[2].dtype, op.inputs[0].shape)],
         ref=_max_pool_grad_ref, grad=lambda op, h: _no_second_order(op), kind="other",
         lower=_lower_max_pool_grad, lowerable=_window_lowerable,
         doc="Inputs (input, output, output gradient) of MaxPool: the input gradient.",
         examples=[Example(lambda x, g: make_op("MaxPoolGrad", [x, max_pool(x, 2, 1, "VALID"), g],
                                                dict(max_pool(x, 2, 1, "VALID").op.attrs)
                                                ).outputs[0],
                           [(1, 4, 3, 2), (1, 3, 2, 2)],
                           lambda x, g: _np_max_pool_grad(x, g, 2, 1), grad=False)])
register("AvgPool", infer=_pool_infer, ref=_avg_pool_ref,
         grad=lambda op, g: [make_op("AvgPoolGrad", [op.inputs[0], g], dict(op.attrs),
                                     name="AvgPoolGrad").outputs[0]],
         kind="other", lower=_lower_pool, lowerable=_window_lowerable,
         doc="Mean over windows, padding excluded (attrs ksize, strides, "
                           "padding), NHWC.",
         examples=[Example(lambda x: avg_pool(x, [1, 2, 2, 1], [1, 2, 2, 1], "VALID"),
                           [(2, 4, 5, 3)], lambda x: _np_pool_direct(x, 2, 2, "VALID", np.mean),
                           id="valid"),
                   Example(lambda x: avg_pool(x, 3, 2, "SAME"), [(1, 5, 4, 2)],
                           lambda x: _np_pool_direct(x, 3, 2, "SAME", np.mean), id="same")])
register("AvgPoolGrad", infer=lambda op: [(op.inputs[1].dtype, op.inputs[0].shape)],
         ref=_avg_pool_grad_ref, kind="other", lower=_lower_avg_pool_grad,
         lowerable=_window_lowerable, shape_only=(0,),
         grad=lambda op, h: [None, make_op("AvgPool", [h], dict(op.attrs),
                                           name="AvgPool").outputs[0]],
         doc="Inputs (input, output gradient) of AvgPool: the input gradient.",
         examples=[Example(lambda x, g: make_op("AvgPoolGrad", [x, g], dict(
                               avg_pool(x, 3, 2, "SAME").op.attrs)).outputs[0],
                           [(1, 5, 4, 2), (1, 3, 2, 2)],
                           lambda x, g: _np_vjp(lambda a: _np_pool_direct(a, 3, 2, "SAME",
                                                                          np.mean), [x], 0, g))])


def _pool(op_type, value, ksize, strides, padding, data_format, name, default):
    if data_format == "NCHW":
        ksize, strides = _nchw_four(ksize, "ksize"), _nchw_four(strides, "strides")
    with name_scope(name, default, [value]) as scope:
        x = convert_to_tensor(value, name="input")
        x, back = _to_nhwc(x, data_format)
        attrs = {"ksize": _four(ksize, "ksize"), "strides": _four(strides, "strides"),
                 "padding": _padding(padding), "data_format": "NHWC"}
        return back(make_op(op_type, [x], attrs, name=scope).outputs[0])


def max_pool(value, ksize, strides, padding, data_format: str = "NHWC",
             name: Optional[str] = None, input=None) -> Tensor:
    """`tf.nn.max_pool`: the maximum over each ksize window (op `MaxPool`)."""
    value = _legacy(value, input, "value", "input")
    return _pool("MaxPool", value, ksize, strides, padding, data_format, name, "MaxPool")


def avg_pool(value, ksize, strides, padding, data_format: str = "NHWC",
             name: Optional[str] = None, input=None) -> Tensor:
    """`tf.nn.avg_pool`: the mean over each ksize window, padding not counted (op `AvgPool`)."""
    value = _legacy(value, input, "value", "input")
    return _pool("AvgPool", value, ksize, strides, padding, data_format, name, "AvgPool")


# -- aliases (max_pool2d, ...) --------------------------------------------------------------------
def max_pool2d(input, ksize, strides, padding, data_format: str = "NHWC",  # noqa: A002
               name: Optional[str] = None) -> Tensor:
    """`tf.nn.max_pool2d`: `max_pool` of a 4-D input."""
    return max_pool(input, ksize, strides, padding, data_format, name)


def avg_pool2d(input, ksize, strides, padding, data_format: str = "NHWC",  # noqa: A002
               name: Optional[str] = None) -> Tensor:
    """`tf.nn.avg_pool2d`: `avg_pool` of a 4-D input."""
    return avg_pool(input, ksize, strides, padding, data_format, name)


max_pool_v2 = max_pool2d
avg_pool_v2 = avg_pool2d


# -- 1-D pooling ----------------------------------------------------------------------------------
def _pool1d(fn, input, ksize, strides, padding, name):  # noqa: A002
    from jitflow.ops.shape_ops import expand_dims, squeeze
    k = int(np.reshape(ksize, -1)[-2 if np.size(ksize) == 3 else 0])
    s = int(np.reshape(strides, -1)[-2 if np.size(strides) == 3 else 0])
    x = expand_dims(convert_to_tensor(input, name="input"), 1)
    return squeeze(fn(x, [1, 1, k, 1], [1, 1, s, 1], padding), [1], name=name)


def max_pool1d(input, ksize, strides, padding, data_format: str = "NWC",  # noqa: A002
               name: Optional[str] = None) -> Tensor:
    """`tf.nn.max_pool1d`: max pooling over [batch, width, channels]."""
    return _pool1d(max_pool, input, ksize, strides, padding, name)


def avg_pool1d(input, ksize, strides, padding, data_format: str = "NWC",  # noqa: A002
               name: Optional[str] = None) -> Tensor:
    """`tf.nn.avg_pool1d`: average pooling over [batch, width, channels]."""
    return _pool1d(avg_pool, input, ksize, strides, padding, name)
