"""What the window ops (Conv2D, DepthwiseConv2dNative, MaxPool, AvgPool and their gradients)
share: their arguments (`_four`: strides, ksize, dilations as NHWC 4-tuples; `_padding`,
`_conv_padding` with TF's explicit [before, after] pairs (attr `explicit_paddings`);
`_to_nhwc`/`_nchw_four` for NCHW), the output geometry TF computes (`_out_size`,
`_window_shape`), and the helpers of their NumPy references and examples (`_padded`, `_taps`,
`_im2col`, `_np_vjp`).
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from jitflow.core.graph import Tensor
from jitflow.core.shapes import shape_tf_str

__all__: list = []


# -- convolution and pooling (NHWC) ---------------------------------------------------------------
def _four(v, what: str) -> tuple:
    """A TF1 strides/ksize/dilations argument as 4 ints (an int or 2 ints mean H and W)."""
    v = [int(a) for a in ([v] if isinstance(v, (int, np.integer)) else v)]
    if len(v) == 1:
        v = [1, v[0], v[0], 1]
    elif len(v) == 2:
        v = [1, v[0], v[1], 1]
    if len(v) != 4 or v[0] != 1 or v[3] != 1:
        raise ValueError(f"{what} must be 1, 2 or 4 ints with 1 for the batch and channel "
                         f"dimensions (NHWC), got {v}")
    return tuple(v)


def _out_size(n, k, stride, dilation, padding, pads=(0, 0)):
    """(output size, padding before) of one spatial dimension, as TF computes them; `pads`
    are the (before, after) amounts of EXPLICIT padding (a VALID window over the padded
    axis)."""
    if n is None:
        return None, None
    ek = (k - 1) * dilation + 1
    if padding == "SAME":
        out = -(-n // stride)
        total = max((out - 1) * stride + ek - n, 0)
        return out, total // 2
    if padding == "EXPLICIT":
        return max(-(-(n + pads[0] + pads[1] - ek + 1) // stride), 0), pads[0]
    return max(-(-(n - ek + 1) // stride), 0), 0


def _explicit_pads(op) -> tuple:
    """((before, after) of H, (before, after) of W) of a window op: EXPLICIT padding's
    amounts (attr `explicit_paddings`, 8 ints NHWC), zeros otherwise."""
    p = op.attrs.get("explicit_paddings") or ()
    if op.attrs.get("padding") != "EXPLICIT" or not p:
        return (0, 0), (0, 0)
    return (int(p[2]), int(p[3])), (int(p[4]), int(p[5]))


def _padding(padding) -> str:
    p = padding.decode() if isinstance(padding, bytes) else str(padding)
    if p not in ("SAME", "VALID"):
        raise ValueError(f"padding must be 'SAME' or 'VALID', got {padding!r}")
    return p


def _conv_padding(padding, data_format: Optional[str], op_type: str = "Conv2D") -> tuple:
    """A convolution's `padding`: "SAME", "VALID", or TF's explicit form, a list of 4
    [before, after] pairs in the order of `data_format`. Returns (padding attr, explicit
    paddings as 8 ints in NHWC order, () unless "EXPLICIT"), with TF's errors."""
    if isinstance(padding, np.ndarray):
        padding = padding.tolist()
    if not isinstance(padding, (list, tuple)):
        p = padding.decode() if isinstance(padding, bytes) else str(padding)
        if p not in ("SAME", "VALID"):
            raise ValueError(f"Attr 'padding' of '{op_type}' Op passed string '{p}' not in: "
                             f'"SAME", "VALID", "EXPLICIT".')
        return p, ()
    if len(padding) != 4:
        raise ValueError(f"When padding is a list, it must be of size 4. Received: "
                         f"padding={padding} of size {len(padding)}")
    for i, pair in enumerate(padding):
        if not isinstance(pair, (list, tuple)):
            raise ValueError(f"When `padding` is a list, each element of `padding` must be a "
                             f"list/tuple of size 2. Received: padding={padding} with element "
                             f"at index {i} of type {type(pair)}")
        if len(pair) != 2:
            raise ValueError(f"When `padding` is a list, each element of `padding` must be a "
                             f"list/tuple of size 2. Received: padding={padding} with element "
                             f"at index {i} of size {len(pair)}")
    flat = [int(v) for pair in padding for v in pair]
    fmt = data_format.decode() if isinstance(data_format, bytes) else data_format
    if fmt == "NCHW":
        flat = flat[:2] + flat[4:] + flat[2:4]
    if any(v < 0 for v in flat):
        raise ValueError(f"All elements of explicit_paddings must be nonnegative for "
                         f"'{op_type}' (explicit_paddings={flat})")
    if any(flat[i] for i in (0, 1, 6, 7)):
        raise ValueError(f"Nonzero explicit padding in the batch or depth dimensions is not "
                         f"supported for '{op_type}' (explicit_paddings={flat})")
    return "EXPLICIT", tuple(flat)


def _window_shape(op, x_shape, kh, kw):
    """The NHW output dims of a window op with attrs strides, padding, dilations."""
    _, sh, sw, _ = op.attrs["strides"]
    _, dh, dw, _ = op.attrs.get("dilations", (1, 1, 1, 1))
    dims = x_shape.as_tuple() if x_shape.ndims is not None else (None,) * 4
    pad_h, pad_w = _explicit_pads(op)
    if op.attrs["padding"] != "SAME":
        for n, k, d, p in ((dims[1], kh, dh, pad_h), (dims[2], kw, dw, pad_w)):
            ek = None if k is None else (k - 1) * d + 1
            if n is not None and ek is not None and n + sum(p) < ek:
                raise ValueError(f"Negative dimension size caused by subtracting {ek} from "
                                 f"{n + sum(p)} for '{op.name}' (op: '{op.type}') with input "
                                 f"shapes: {shape_tf_str(x_shape)}.")
    oh, _ = _out_size(dims[1], kh, sh, dh, op.attrs["padding"], pad_h)
    ow, _ = _out_size(dims[2], kw, sw, dw, op.attrs["padding"], pad_w)
    return dims[0], oh, ow


def _padded(op, x, kh, kw, value=0.0):
    """x padded for SAME or EXPLICIT padding (with `value`), the output size and the padding
    before (as far as the windows read: the padding after is cut to what they reach)."""
    _, sh, sw, _ = op.attrs["strides"]
    _, dh, dw, _ = op.attrs.get("dilations", (1, 1, 1, 1))
    n, h, w, c = x.shape
    pad_h, pad_w = _explicit_pads(op)
    oh, ph = _out_size(h, kh, sh, dh, op.attrs["padding"], pad_h)
    ow, pw = _out_size(w, kw, sw, dw, op.attrs["padding"], pad_w)
    need_h = (oh - 1) * sh + (kh - 1) * dh + 1 if oh > 0 else 0
    need_w = (ow - 1) * sw + (kw - 1) * dw + 1 if ow > 0 else 0
    pad = ((0, 0), (ph, max(need_h - h - ph, 0)), (pw, max(need_w - w - pw, 0)), (0, 0))
    return np.pad(x, pad, constant_values=value), oh, ow, ph, pw


def _taps(op, kh, kw, oh, ow):
    """For each kernel tap (i, j): the strided slices of the padded input it reads."""
    _, sh, sw, _ = op.attrs["strides"]
    _, dh, dw, _ = op.attrs.get("dilations", (1, 1, 1, 1))
    for i in range(kh):
        for j in range(kw):
            yield i, j, (slice(None), slice(i * dh, i * dh + (oh - 1) * sh + 1, sh),
                         slice(j * dw, j * dw + (ow - 1) * sw + 1, sw), slice(None))


def _im2col(op, xp, kh, kw, oh, ow):
    """Patches of the padded input: [n, oh, ow, kh * kw * c], taps in (i, j) order."""
    cols = np.stack([xp[sl] for _, _, sl in _taps(op, kh, kw, oh, ow)], axis=3)
    return cols.reshape(cols.shape[:3] + (-1,))


def _np_vjp(fn, args, which: int, g):
    """g^T J for a function linear in args[which], J built column by column from `fn`."""
    base = [np.asarray(a, dtype=np.float64) for a in args]
    x = base[which]
    out = np.zeros(x.shape)
    for idx in np.ndindex(x.shape):
        unit = np.zeros(x.shape)
        unit[idx] = 1.0
        call = list(base)
        call[which] = unit
        out[idx] = np.sum(fn(*call) * g)
    return out


def _to_nhwc(x: Tensor, data_format: Optional[str]):
    """(x as NHWC, a function taking an NHWC result back to `data_format`): NCHW is computed
    by transposing around the NHWC op (the transposes compile into the kernels' indexing)."""
    fmt = data_format.decode() if isinstance(data_format, bytes) else data_format
    if fmt in (None, "NHWC"):
        return x, lambda t: t
    if fmt != "NCHW":
        raise ValueError(f"data_format must be 'NHWC' or 'NCHW', got {data_format!r}")
    from jitflow.ops.shape_ops import transpose
    return (transpose(x, [0, 2, 3, 1], name="to_NHWC"),
            lambda t: transpose(t, [0, 3, 1, 2], name="to_NCHW"))


def _nchw_four(v, what: str) -> tuple:
    """An NCHW strides/ksize argument (4 ints [1, 1, h, w]) as NHWC."""
    if isinstance(v, (int, np.integer)) or len(v) != 4:
        return v
    v = [int(a) for a in v]
    if v[0] != 1 or v[1] != 1:
        raise ValueError(f"{what} must have 1 for the batch and channel dimensions (NCHW), "
                         f"got {v}")
    return [1, v[2], v[3], 1]
