"""Image codecs (`tf.image.decode_png`, `decode_jpeg`, `decode_gif`, `decode_bmp`,
`decode_image`, `encode_png`, `encode_jpeg`, `is_jpeg`, `extract_jpeg_shape`,
`decode_and_crop_jpeg`) as host ops, through Pillow (and pypng for 16-bit colour PNGs, which
Pillow reads and writes only at 8 bits): the optional `image` extra.

What matches TensorFlow 2.21 and what does not:
- The decoders look at the data, as TensorFlow's do: decode_png, decode_jpeg and decode_gif
  read PNG, JPEG and GIF alike (decode_gif as frames [n, h, w, 3]); decode_bmp reads BMP only.
- PNG pixels equal TensorFlow's (libpng's) exactly: palettes expanded (alpha from tRNS), low bit
  depths scaled to 8 bits; `channels=1` from colour as libpng's rgb_to_gray with TensorFlow's
  weights (0.299, 0.587: 9797, 19234 and 3737 / 32768; truncated at 8 bits, rounded at 16);
  `dtype=uint16` from 8 bits multiplies by 257, `uint8` from 16 bits keeps the high byte.
- JPEG: Pillow's libjpeg-turbo decodes with the accurate integer DCT and fancy upsampling,
  which is TensorFlow's `dct_method="INTEGER_ACCURATE"` exactly. TensorFlow's default
  (`dct_method=""`, which it maps to INTEGER_FAST) differs by a few levels per pixel (at most
  about 10 on noise at quality 95, 1-2 on average); jitflow always uses the accurate DCT, and
  always upsamples chroma smoothly (`fancy_upscaling=False` is accepted but not honoured).
  `channels=1` of a colour JPEG is libjpeg's luminance, as TensorFlow's; uint16 is value * 256.
- GIF frames are composited by Pillow: equal to TensorFlow's for full frames; frames with
  transparency or partial frames may differ.
"""
from __future__ import annotations

import io
from typing import Optional

import numpy as np

from jitflow.core import dtypes as _dtypes
from jitflow.core import errors
from jitflow.core.graph import Tensor, convert_to_tensor, make_op, name_scope
from jitflow.core.shapes import TensorShape
from jitflow.ops.registry import register

__all__: list = []

_NAMES = ["decode_png", "decode_jpeg", "decode_gif", "decode_bmp", "decode_image",
          "encode_png", "encode_jpeg", "is_jpeg", "extract_jpeg_shape", "decode_and_crop_jpeg"]
NAMESPACES = {"image": _NAMES, "io": _NAMES}

_EXTRA = "pip install 'jitflow[image]'"


def _pil():
    try:
        from PIL import Image
    except ImportError:
        raise ImportError(f"jitflow's image codecs need Pillow (the `image` extra: {_EXTRA})") \
            from None
    return Image


def _pypng():
    try:
        import png
    except ImportError:
        raise ImportError(f"16-bit colour PNG images need pypng (the `image` extra: {_EXTRA})") \
            from None
    return png


# -- sniffing and errors ----------------------------------------------------------------------
def _format(data: bytes) -> str:
    if data[:3] == b"\xff\xd8\xff":
        return "jpeg"
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return "png"
    if data[:4] == b"GIF8":
        return "gif"
    if data[:2] == b"BM":
        return "bmp"
    return ""


def _invalid(op, msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, op, f"{msg}\n\t [[node {op.name} ({op.type})]]")


def _unknown(op) -> errors.InvalidArgumentError:
    return _invalid(op, "Unknown image file format. One of JPEG, JPEG XL, PNG, GIF, BMP, WebP "
                        "required.")


def _contents(op, value) -> bytes:
    v = np.asarray(value, dtype=object)
    if v.ndim != 0:
        raise _invalid(op, f"contents must be scalar, got shape {list(v.shape)}")
    v = v.item()
    return v if isinstance(v, bytes) else str(v).encode()


def _open(op, data: bytes, fmt: str):
    Image = _pil()
    try:
        im = Image.open(io.BytesIO(data))
        im.load()
    except Exception as e:   # Pillow raises OSError, SyntaxError, ValueError... on bad data
        raise _invalid(op, _BAD[fmt] + f" ({e})") from None
    return im


_BAD = {"png": "Invalid PNG. Failed to initialize decoder.",
        "jpeg": "jpeg::Uncompress failed. Invalid JPEG data or crop window.",
        "gif": "Failed to decode gif.", "bmp": "Invalid BMP data."}


# -- PNG ----------------------------------------------------------------------------------------
def _gray(rgb: np.ndarray) -> np.ndarray:
    """libpng's rgb_to_gray with TensorFlow's weights: truncated at 8 bits, rounded at 16."""
    r, g, b = (rgb[..., k].astype(np.int64) for k in range(3))
    s = 9797 * r + 19234 * g + 3737 * b
    if rgb.dtype == np.uint16:
        s = s + 16384
    return (s >> 15).astype(rgb.dtype)[..., None]


def _png16(op, data: bytes) -> np.ndarray:
    png = _pypng()
    try:
        w, h, rows, info = png.Reader(bytes=data).asDirect()
        arr = np.array([np.asarray(r, dtype=np.uint16) for r in rows], dtype=np.uint16)
    except Exception as e:   # pypng's FormatError, ChunkError, ...
        raise _invalid(op, _BAD["png"] + f" ({e})") from None
    return arr.reshape(h, w, info["planes"])


def _png(op, data: bytes, channels: int) -> np.ndarray:
    """The pixels of a PNG [h, w, c] at its own depth (uint8 or uint16), `channels` made."""
    depth = data[24] if len(data) >= 26 else 8
    if depth == 16 and data[25] in (2, 4, 6):
        a = _png16(op, data)   # 16-bit grey+alpha, RGB or RGBA: beyond Pillow
        alpha = None
    else:
        im = _open(op, data, "png")
        key = im.info.get("transparency")
        if im.mode == "P":
            im = im.convert("RGBA" if key is not None else "RGB")
            key = None
        elif im.mode == "1":
            im = im.convert("L")
        alpha = None
        if channels == 4 and im.mode in ("L", "RGB"):
            if key is not None:   # a colour key (tRNS) becomes the alpha channel
                alpha = np.asarray(im.convert("LA" if im.mode == "L" else "RGBA"))[..., -1:]
            elif depth < 8:
                # libpng adds its filler at the file's bit depth: 1, 3 or 15, not 255
                alpha = np.full(im.size[::-1] + (1,), (1 << depth) - 1, np.uint8)
        a = np.asarray(im)
        if a.dtype != np.uint8:
            a = a.astype(np.uint16)   # 16-bit grey ("I;16" or "I")
        if a.ndim == 2:
            a = a[..., None]
    return _png_channels(a, channels, alpha)


def _png_channels(a: np.ndarray, want: int, added_alpha=None) -> np.ndarray:
    """libpng's channel changes: grey from colour (see _gray), grey to colour by copying,
    alpha dropped or added (`added_alpha`, else opaque)."""
    c = a.shape[2]
    if want in (0, c):
        return a
    gray = a[..., :1] if c <= 2 else _gray(a[..., :3])
    if want == 1:
        return gray
    rgb = a[..., :3] if c >= 3 else np.repeat(a[..., :1], 3, axis=2)
    if want == 3:
        return rgb
    if c in (2, 4):
        alpha = a[..., -1:]
    elif added_alpha is not None:
        alpha = added_alpha.astype(a.dtype)
    else:
        alpha = np.full(a.shape[:2] + (1,), np.iinfo(a.dtype).max, a.dtype)
    return np.concatenate([rgb, alpha], axis=2)


# -- JPEG, GIF, BMP -------------------------------------------------------------------------------
def _jpeg(op, data: bytes, channels: int, ratio: int = 1) -> np.ndarray:
    Image = _pil()
    try:
        im = Image.open(io.BytesIO(data))
        w, h = im.size
        mode = "L" if channels == 1 else im.mode
        if ratio > 1 or mode != im.mode:
            # libjpeg scales by 1/ratio and converts to grey (its luminance) while decoding
            im.draft(mode, (max(1, w // ratio), max(1, h // ratio)))
        im.load()
    except Exception as e:   # Pillow raises OSError, SyntaxError, ValueError... on bad data
        raise _invalid(op, _BAD["jpeg"] + f" ({e})") from None
    if im.mode == "CMYK":
        im = im.convert("RGB")
    if channels == 1 and im.mode != "L":
        im = im.convert("L")
    elif channels == 3 and im.mode != "RGB":
        im = im.convert("RGB")
    a = np.asarray(im)
    return a[..., None] if a.ndim == 2 else a


def _gif_frames(op, data: bytes) -> np.ndarray:
    im = _open(op, data, "gif")
    frames = []
    for i in range(getattr(im, "n_frames", 1)):
        im.seek(i)
        frames.append(np.asarray(im.convert("RGB")))
    return np.stack(frames)


def _bmp(op, data: bytes, channels: int) -> np.ndarray:
    Image = _pil()
    im = _open(op, data, "bmp")
    bits = int.from_bytes(data[28:30], "little") if len(data) >= 34 else 0
    compression = int.from_bytes(data[30:34], "little") if len(data) >= 34 else -1
    if bits == 32 and compression == 0 and im.mode in ("RGB", "RGBA"):
        # 32-bit BMP: TensorFlow keeps the fourth byte as alpha (Pillow drops it)
        offset = int.from_bytes(data[10:14], "little")
        height = int.from_bytes(data[22:26], "little", signed=True)
        w, h = im.size
        raw = data[offset:offset + 4 * w * h]
        im = Image.frombuffer("RGBA", (w, h), raw, "raw", "BGRA", 0, -1 if height > 0 else 1)
    a = np.asarray(im)
    if a.ndim == 2:
        a = a[..., None]   # 8-bit BMP: the pixel values (palette indices), as TensorFlow
    c = a.shape[2]
    if channels in (0, c):
        return a
    rgb = np.repeat(a, 3, axis=2) if c == 1 else a[..., :3]
    if channels == 3:
        return rgb
    return np.concatenate([rgb, np.full(a.shape[:2] + (1,), 255, np.uint8)], axis=2)


def _depth(a: np.ndarray, dtype, fmt: str) -> np.ndarray:
    want = np.dtype(dtype.as_numpy_dtype)
    if a.dtype == want:
        return a
    if want == np.uint16:   # libpng expands 8 to 16 bits by * 257; the others shift by 8
        return a.astype(np.uint16) * np.uint16(257 if fmt == "png" else 256)
    return (a >> 8).astype(np.uint8)


def _check_channels(op, fmt: str, channels: int) -> None:
    if channels not in (0, 1, 3, 4):
        raise _invalid(op, f"`channels` must be 0, 1, 3 or 4 but got {channels}")
    if fmt == "jpeg" and channels == 4:
        raise _invalid(op, "JPEG does not support 4 channels")
    if fmt == "gif" and channels not in (0, 3):
        raise _invalid(op, f"channels must be 0 or 3 for GIF, got {channels}")
    if fmt == "bmp" and channels not in (0, 3, 4):
        raise _invalid(op, f"`channels` must be 0, 3 or 4 for BMP, but got {channels}")


def _decode_any(op, data: bytes, channels: int, dtype, frames: str, ratio: int = 1):
    """Decode by the data's format. frames: "one" (3-D; an animated GIF is an error), "first"
    (3-D, a GIF's first frame), "all" (4-D), "gif" (4-D for GIF, 3-D for the others)."""
    fmt = _format(data)
    if not fmt:
        raise _unknown(op)
    _check_channels(op, fmt, channels)
    if fmt == "png":
        a = _png(op, data, channels)
    elif fmt == "jpeg":
        a = _jpeg(op, data, channels, ratio)
    elif fmt == "bmp":
        a = _bmp(op, data, channels)
    else:
        a = _gif_frames(op, data)
        if frames == "first":
            a = a[0]
        elif frames == "one":
            if a.shape[0] != 1:
                raise _invalid(op, f"Got {a.shape[0]} frames, but animated gifs can only be "
                                   f"decoded by tf.io.decode_gif or tf.io.decode_image")
            a = a[0]
        return _depth(a, dtype, fmt)
    if frames == "all":
        a = a[None]
    return _depth(a, dtype, fmt)


# -- the decode ops ---------------------------------------------------------------------------
def _contents_infer(op) -> None:
    t = op.inputs[0]
    if t.dtype != _dtypes.string:
        raise TypeError(f"contents of '{op.name}' must be a string tensor, got {t.dtype.name}")
    if t.shape.ndims not in (None, 0):
        raise ValueError(f"Shape must be rank 0 but is rank {t.shape.ndims} for '{op.name}' "
                         f"(op: '{op.type}') with input shapes: {t.shape}.")


def _decode3_infer(op):
    _contents_infer(op)
    c = op.attrs.get("channels", 0)
    return [(op.attrs.get("dtype", _dtypes.uint8), TensorShape([None, None, c or None]))]


def _decode_ref(op, contents):
    data = _contents(op, contents)
    a = op.attrs
    t = op.type
    if t == "DecodeBmp":
        fmt = _format(data)
        if fmt != "bmp":
            if not fmt:
                raise _unknown(op)
            raise _invalid(op, f"Trying to decode {fmt.upper()} format using DecodeBmp op. "
                               f"Use `decode_{fmt}` or `decode_image` instead.")
        return _decode_any(op, data, a["channels"], _dtypes.uint8, "one")
    if _format(data) == "bmp" and t != "DecodeImage":
        raise _invalid(op, f"Trying to decode BMP format using a wrong op. Use `decode_bmp` or "
                           f"`decode_image` instead. Op used: {t}")
    if t == "DecodeGif":
        out = _decode_any(op, data, 0, _dtypes.uint8, "all")
        return out if out.shape[-1] == 3 else _gif_rgb(out)
    if t == "DecodeImage":
        return _decode_any(op, data, a["channels"], a["dtype"],
                           "gif" if a["expand_animations"] else "first")
    return _decode_any(op, data, a["channels"], a.get("dtype", _dtypes.uint8), "one",
                       a.get("ratio", 1))


def _gif_rgb(frames: np.ndarray) -> np.ndarray:
    """decode_gif of a PNG or JPEG: its single frame as RGB."""
    c = frames.shape[-1]
    if c == 1 or c == 2:
        return np.repeat(frames[..., :1], 3, axis=-1)
    return frames[..., :3]


register("DecodePng", infer=_decode3_infer, ref=_decode_ref, differentiable=False,
         kind="host", doc="The pixels [h, w, channels] of a PNG (or JPEG, GIF) image.")
register("DecodeJpeg", infer=_decode3_infer, ref=_decode_ref, differentiable=False,
         kind="host", doc="The pixels [h, w, channels] of a JPEG (or PNG, GIF) image.")
register("DecodeBmp", infer=_decode3_infer, ref=_decode_ref, differentiable=False,
         kind="host", doc="The pixels [h, w, channels] of a BMP image.")
register("DecodeGif", infer=lambda op: (_contents_infer(op), [
    (_dtypes.uint8, TensorShape([None, None, None, 3]))])[1], ref=_decode_ref,
    differentiable=False, kind="host",
    doc="The frames [n, h, w, 3] of a GIF (or PNG, JPEG) image.")


def _decode_image_infer(op):
    _contents_infer(op)
    a = op.attrs
    if a["expand_animations"]:
        return [(a["dtype"], TensorShape(None))]
    return [(a["dtype"], TensorShape([None, None, a["channels"] or None]))]


register("DecodeImage", infer=_decode_image_infer, ref=_decode_ref, differentiable=False,
         kind="host", doc="The pixels of a PNG, JPEG, BMP or GIF image ([n, h, w, 3] for a "
                          "GIF when attr expand_animations).")


def _decode_and_crop_ref(op, contents, window):
    data = _contents(op, contents)
    y, x, h, w = (int(v) for v in np.asarray(window).reshape(-1)[:4])
    a = _decode_ref(op, data)
    if y < 0 or x < 0 or h <= 0 or w <= 0 or y + h > a.shape[0] or x + w > a.shape[1]:
        raise _invalid(op, _BAD["jpeg"])
    return np.ascontiguousarray(a[y:y + h, x:x + w])


register("DecodeAndCropJpeg", infer=_decode3_infer, ref=_decode_and_crop_ref,
         differentiable=False, kind="host",
         doc="Inputs (contents, crop_window [y, x, height, width]): the window's pixels.")


def _shape_ref(op, contents):
    data = _contents(op, contents)
    if _format(data) != "jpeg":
        raise _invalid(op, "Not a JPEG image: " + _BAD["jpeg"])
    Image = _pil()
    try:
        im = Image.open(io.BytesIO(data))
    except Exception as e:   # Pillow raises OSError, SyntaxError, ValueError... on bad data
        raise _invalid(op, _BAD["jpeg"] + f" ({e})") from None
    c = {"L": 1, "RGB": 3, "CMYK": 4}.get(im.mode, len(im.getbands()))
    return np.array([im.size[1], im.size[0], c], dtype=op.attrs["output_type"].as_numpy_dtype)


register("ExtractJpegShape", infer=lambda op: (_contents_infer(op), [
    (op.attrs["output_type"], TensorShape([3]))])[1], ref=_shape_ref, differentiable=False,
    kind="host", doc="The [height, width, channels] of a JPEG image, without decoding it.")


def _contents_tensor(contents) -> Tensor:
    return convert_to_tensor(contents, dtype=_dtypes.string, name="contents")


def _channels_attr(channels) -> int:
    return 0 if channels is None else int(channels)


def _image_dtype(dtype, what: str = "dtype"):
    d = _dtypes.as_dtype(dtype)
    if d not in (_dtypes.uint8, _dtypes.uint16):
        raise TypeError(f"Value passed to parameter '{what}' has DataType {d.name} not in list "
                        f"of allowed values: uint8, uint16")
    return d


def decode_png(contents, channels: int = 0, dtype=_dtypes.uint8,
               name: Optional[str] = None) -> Tensor:
    """`tf.image.decode_png`: a PNG's pixels [h, w, channels] (0: the image's own), uint8
    or uint16."""
    attrs = {"channels": _channels_attr(channels), "dtype": _image_dtype(dtype)}
    return make_op("DecodePng", [_contents_tensor(contents)], attrs,
                   name=name or "DecodePng").outputs[0]


def _jpeg_attrs(channels, ratio, fancy_upscaling, try_recover_truncated, acceptable_fraction,
                dct_method) -> dict:
    if dct_method not in ("", "INTEGER_FAST", "INTEGER_ACCURATE"):
        raise ValueError(f"dct_method must be '', 'INTEGER_FAST' or 'INTEGER_ACCURATE', got "
                         f"{dct_method!r}")
    if int(ratio) not in (1, 2, 4, 8):
        raise ValueError(f"ratio must be 1, 2, 4, or 8, got {ratio}")
    return {"channels": _channels_attr(channels), "ratio": int(ratio),
            "fancy_upscaling": bool(fancy_upscaling),
            "try_recover_truncated": bool(try_recover_truncated),
            "acceptable_fraction": float(acceptable_fraction), "dct_method": dct_method}


def decode_jpeg(contents, channels: int = 0, ratio: int = 1, fancy_upscaling: bool = True,
                try_recover_truncated: bool = False, acceptable_fraction: float = 1,
                dct_method: str = "", name: Optional[str] = None) -> Tensor:
    """`tf.image.decode_jpeg`: a JPEG's pixels [h, w, channels] (uint8), scaled down by
    `ratio`. Decoded with the accurate integer DCT (see the module's notes)."""
    attrs = _jpeg_attrs(channels, ratio, fancy_upscaling, try_recover_truncated,
                        acceptable_fraction, dct_method)
    return make_op("DecodeJpeg", [_contents_tensor(contents)], attrs,
                   name=name or "DecodeJpeg").outputs[0]


def decode_and_crop_jpeg(contents, crop_window, channels: int = 0, ratio: int = 1,
                         fancy_upscaling: bool = True, try_recover_truncated: bool = False,
                         acceptable_fraction: float = 1, dct_method: str = "",
                         name: Optional[str] = None) -> Tensor:
    """`tf.image.decode_and_crop_jpeg`: the pixels of `crop_window` [y, x, height, width]."""
    attrs = _jpeg_attrs(channels, ratio, fancy_upscaling, try_recover_truncated,
                        acceptable_fraction, dct_method)
    w = convert_to_tensor(crop_window, dtype=_dtypes.int32, name="crop_window")
    return make_op("DecodeAndCropJpeg", [_contents_tensor(contents), w], attrs,
                   name=name or "DecodeAndCropJpeg").outputs[0]


def decode_bmp(contents, channels: int = 0, name: Optional[str] = None) -> Tensor:
    """`tf.image.decode_bmp`: a BMP's pixels [h, w, channels] (uint8)."""
    return make_op("DecodeBmp", [_contents_tensor(contents)],
                   {"channels": _channels_attr(channels)}, name=name or "DecodeBmp").outputs[0]


def decode_gif(contents, name: Optional[str] = None) -> Tensor:
    """`tf.image.decode_gif`: a GIF's frames [n, h, w, 3] (uint8)."""
    return make_op("DecodeGif", [_contents_tensor(contents)], {},
                   name=name or "DecodeGif").outputs[0]


def decode_image(contents, channels=None, dtype=_dtypes.uint8, name: Optional[str] = None,
                 expand_animations: bool = True) -> Tensor:
    """`tf.image.decode_image`: the pixels of a PNG, JPEG, BMP or GIF ([n, h, w, 3] for a GIF
    unless `expand_animations=False`, which takes its first frame). A float `dtype` scales
    to [0, 1] (`convert_image_dtype`)."""
    d = _dtypes.as_dtype(dtype)
    with name_scope(name, "decode_image"):
        raw = d if d in (_dtypes.uint8, _dtypes.uint16) else _dtypes.uint8
        attrs = {"channels": _channels_attr(channels), "dtype": raw,
                 "expand_animations": bool(expand_animations)}
        out = make_op("DecodeImage", [_contents_tensor(contents)], attrs,
                      name="DecodeImage").outputs[0]
        if raw != d:
            from jitflow.ops.image_ops import convert_image_dtype
            out = convert_image_dtype(out, d)
    return out


def is_jpeg(contents, name: Optional[str] = None) -> Tensor:
    """`tf.image.is_jpeg`: whether the bytes start as a JPEG does."""
    from jitflow.ops.strings import substr
    from jitflow.ops.math.compare import equal
    with name_scope(name, "is_jpeg"):
        return equal(substr(_contents_tensor(contents), 0, 3), b"\xff\xd8\xff", name="is_jpeg")


def extract_jpeg_shape(contents, output_type=_dtypes.int32,
                       name: Optional[str] = None) -> Tensor:
    """`tf.image.extract_jpeg_shape`: [height, width, channels] of a JPEG, not decoding it."""
    return make_op("ExtractJpegShape", [_contents_tensor(contents)],
                   {"output_type": _dtypes.as_dtype(output_type)},
                   name=name or "ExtractJpegShape").outputs[0]


# -- the encode ops -----------------------------------------------------------------------------
def _encode_infer(op):
    t = op.inputs[0]
    if t.shape.ndims not in (None, 3):
        raise ValueError(f"Shape must be rank 3 but is rank {t.shape.ndims} for '{op.name}' "
                         f"(op: '{op.type}') with input shapes: {t.shape}.")
    return [(_dtypes.string, TensorShape([]))]


def _encode_png_ref(op, image):
    a = np.ascontiguousarray(image)
    level = op.attrs["compression"]
    if not -1 <= level <= 9:
        raise _invalid(op, f"compression should be in [-1,9], got {level}")
    h, w, c = a.shape
    if c not in (1, 2, 3, 4):
        raise _invalid(op, f"image must have 1, 2, 3, or 4 channels, got {c}")
    if h == 0 or w == 0:
        raise _invalid(op, f"image must have at least one pixel, got shape {list(a.shape)}")
    level = 6 if level == -1 else level   # zlib's default level
    buf = io.BytesIO()
    if a.dtype == np.uint16 and c > 1:
        png = _pypng()
        writer = png.Writer(w, h, greyscale=c < 3, alpha=c in (2, 4), bitdepth=16,
                            compression=level)
        writer.write_array(buf, a.reshape(-1))
        return np.array(buf.getvalue(), dtype=object)
    Image = _pil()
    # Pillow takes the mode from the array: I;16, L, LA, RGB or RGBA
    im = Image.fromarray(np.ascontiguousarray(a[..., 0]) if c == 1 else a)
    im.save(buf, "PNG", compress_level=level)
    return np.array(buf.getvalue(), dtype=object)


def _encode_jpeg_ref(op, image):
    a = np.ascontiguousarray(image)
    at = op.attrs
    h, w, c = a.shape
    if c not in (1, 3):
        raise _invalid(op, f"image must have 1 or 3 channels, got [{h},{w},{c}]")
    fmt = at["format"]
    if fmt == "grayscale" and c != 1:
        raise _invalid(op, f"format grayscale expects 1 channels, got [{h},{w},{c}]")
    if fmt == "rgb" and c != 3:
        raise _invalid(op, f"format rgb expects 3 channels, got [{h},{w},{c}]")
    if not 0 <= at["quality"] <= 100:
        raise _invalid(op, f"quality must be in [0,100], got {at['quality']}")
    if h == 0 or w == 0:
        raise _invalid(op, f"image must have at least one pixel, got shape {list(a.shape)}")
    Image = _pil()
    im = Image.fromarray(np.ascontiguousarray(a[..., 0]) if c == 1 else a)   # L or RGB
    per_inch = 2.54 if at["density_unit"] == "cm" else 1.0
    kw = {"quality": at["quality"], "progressive": at["progressive"],
          "optimize": at["optimize_size"], "subsampling": 2 if at["chroma_downsampling"] else 0,
          "dpi": (at["x_density"] * per_inch, at["y_density"] * per_inch)}
    if at["xmp_metadata"]:
        kw["xmp"] = at["xmp_metadata"].encode()
    buf = io.BytesIO()
    im.save(buf, "JPEG", **kw)
    return np.array(buf.getvalue(), dtype=object)


register("EncodePng", infer=_encode_infer, ref=_encode_png_ref, differentiable=False,
         kind="host", doc="A PNG of an image [h, w, 1-4] (uint8 or uint16).")
register("EncodeJpeg", infer=_encode_infer, ref=_encode_jpeg_ref, differentiable=False,
         kind="host", doc="A JPEG of an image [h, w, 1 or 3] (uint8).")


def encode_png(image, compression: int = -1, name: Optional[str] = None) -> Tensor:
    """`tf.image.encode_png`: a PNG (string scalar) of an image [h, w, 1-4], uint8 or uint16;
    `compression` is zlib's level (-1: its default)."""
    x = convert_to_tensor(image, name="image")
    _image_dtype(x.dtype, "image")
    return make_op("EncodePng", [x], {"compression": int(compression)},
                   name=name or "EncodePng").outputs[0]


def encode_jpeg(image, format: str = "", quality: int = 95,  # noqa: A002  (TF's name)
                progressive: bool = False, optimize_size: bool = False,
                chroma_downsampling: bool = True, density_unit: str = "in",
                x_density: int = 300, y_density: int = 300, xmp_metadata: str = "",
                name: Optional[str] = None) -> Tensor:
    """`tf.image.encode_jpeg`: a JPEG (string scalar) of a uint8 image [h, w, 1 or 3]."""
    x = convert_to_tensor(image, name="image")
    if x.dtype != _dtypes.uint8:
        raise TypeError(f"Value passed to parameter 'image' has DataType {x.dtype.name} not in "
                        f"list of allowed values: uint8")
    if format not in ("", "grayscale", "rgb"):
        raise ValueError(f"Attr 'format' of 'EncodeJpeg' Op passed string '{format}' not in: "
                         f"\"\", \"grayscale\", \"rgb\".")
    if density_unit not in ("in", "cm"):
        raise ValueError(f"Attr 'density_unit' of 'EncodeJpeg' Op passed string "
                         f"'{density_unit}' not in: \"in\", \"cm\".")
    attrs = {"format": format, "quality": int(quality), "progressive": bool(progressive),
             "optimize_size": bool(optimize_size),
             "chroma_downsampling": bool(chroma_downsampling), "density_unit": density_unit,
             "x_density": int(x_density), "y_density": int(y_density),
             "xmp_metadata": xmp_metadata}
    return make_op("EncodeJpeg", [x], attrs, name=name or "EncodeJpeg").outputs[0]
