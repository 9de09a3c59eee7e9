"""Image codecs: PNG round trips and channel/depth conversions (exactly TensorFlow's), JPEG
within the documented tolerance (exact for dct_method="INTEGER_ACCURATE"), GIF, BMP,
decode_image's dispatch, static shapes and TensorFlow's error messages."""
from __future__ import annotations

import io
import subprocess
import sys

import numpy as np
import pytest

import jitflow as tf

Image = pytest.importorskip("PIL.Image")

RNG = np.random.RandomState(0)


def _run(fetches, feed=None):
    with tf.Session() as sess:
        return sess.run(fetches, feed)


def _pil_bytes(img, fmt: str, **kw) -> bytes:
    buf = io.BytesIO()
    (img if isinstance(img, Image.Image) else Image.fromarray(img)).save(buf, fmt, **kw)
    return buf.getvalue()


def _image(c: int, dtype=np.uint8, h: int = 5, w: int = 7) -> np.ndarray:
    return RNG.randint(0, np.iinfo(dtype).max + 1, size=(h, w, c)).astype(dtype)


def _op_message(text: str) -> str:
    skip = ("Graph execution error", "Detected at", "Node:", "Original stack trace")
    lines = [ln for ln in str(text).split("\n") if ln.strip()
             and not ln.startswith((" ", "\t")) and not ln.startswith(skip)]
    return lines[0]


# -- PNG ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
@pytest.mark.parametrize("c", [1, 2, 3, 4])
def test_png_round_trip_is_exact(c, dtype, backend):
    if dtype == np.uint16 and c > 1:
        pytest.importorskip("png")
    img = _image(c, dtype)
    png = tf.image.encode_png(img)
    assert png.shape.as_list() == [] and png.dtype == tf.string
    out = tf.image.decode_png(png, dtype=tf.as_dtype(dtype))
    assert out.shape.as_list() == [None, None, None]
    got = _run(out)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, img)
    assert _run(png)[:8] == b"\x89PNG\r\n\x1a\n"


def test_png_channel_and_depth_conversions_by_hand():
    """libpng's rules with TensorFlow's grey weights, worked out by hand for one pixel."""
    rgb8 = np.array([[[19, 95, 72]]], np.uint8)
    # (9797 * 19 + 19234 * 95 + 3737 * 72) >> 15 = 2282437 >> 15 = 69 (truncated)
    png = tf.image.encode_png(rgb8)
    g = tf.image.decode_png(png, channels=1)
    assert g.shape.as_list() == [None, None, 1]
    assert _run(g).tolist() == [[[69]]]
    assert _run(tf.image.decode_png(png, channels=4)).tolist() == [[[19, 95, 72, 255]]]
    assert _run(tf.image.decode_png(png, dtype=tf.uint16)).tolist() == [[[19 * 257, 95 * 257,
                                                                          72 * 257]]]
    pytest.importorskip("png")
    rgb16 = np.array([[[15939, 10787, 17191]]], np.uint16)
    # (9797 * 15939 + 19234 * 10787 + 3737 * 17191 + 16384) >> 15 = 13058 (rounded)
    png16 = tf.image.encode_png(rgb16)
    assert _run(tf.image.decode_png(png16, channels=1, dtype=tf.uint16)).tolist() == [[[13058]]]
    # to 8 bits: the high byte (15939 >> 8 = 62, 10787 >> 8 = 42, 17191 >> 8 = 67)
    assert _run(tf.image.decode_png(png16)).tolist() == [[[62, 42, 67]]]
    la = np.array([[[53, 133]]], np.uint8)
    png_la = tf.image.encode_png(la)
    assert _run(tf.image.decode_png(png_la, channels=3)).tolist() == [[[53, 53, 53]]]
    assert _run(tf.image.decode_png(png_la, channels=4)).tolist() == [[[53, 53, 53, 133]]]


def test_png_palettes_low_depths_and_transparency():
    rgb = (RNG.randint(0, 4, (4, 5, 3)) * 80).astype(np.uint8)
    pal = Image.fromarray(rgb).convert("P", palette=Image.ADAPTIVE, colors=4)
    want = np.asarray(pal.convert("RGB"))
    np.testing.assert_array_equal(_run(tf.image.decode_png(_pil_bytes(pal, "PNG"))), want)
    with_alpha = _run(tf.image.decode_png(_pil_bytes(pal, "PNG", transparency=0)))
    assert with_alpha.shape == (4, 5, 4)
    np.testing.assert_array_equal(with_alpha[..., 3], np.where(np.asarray(pal) == 0, 0, 255))
    bits = rgb[..., 0] > 100
    one_bit = _pil_bytes(Image.fromarray(bits), "PNG")
    one = _run(tf.image.decode_png(one_bit))
    np.testing.assert_array_equal(one[..., 0], np.where(bits, 255, 0))
    # libpng's filler for an added alpha is the file's largest value: 1 at one bit, 3 at two
    assert (_run(tf.image.decode_png(one_bit, channels=4))[..., 3] == 1).all()
    assert (_run(tf.image.decode_png(_pil_bytes(pal, "PNG"), channels=4))[..., 3] == 3).all()
    # a grey colour key: alpha only when four channels are asked for (as libpng)
    keyed = _pil_bytes(rgb[..., 0], "PNG", transparency=0)
    assert _run(tf.image.decode_png(keyed)).shape == (4, 5, 1)
    four = _run(tf.image.decode_png(keyed, channels=4))
    np.testing.assert_array_equal(four[..., 3], np.where(rgb[..., 0] == 0, 0, 255))


def test_encode_png_errors_and_compression():
    img = _smooth(40, 40)
    small = _run(tf.image.encode_png(img, compression=9))
    stored = _run(tf.image.encode_png(img, compression=0))
    assert len(stored) > img.size > len(small)   # level 0 stores, level 9 compresses
    np.testing.assert_array_equal(_run(tf.image.decode_png(stored)), img)
    with pytest.raises(TypeError, match="DataType float32 not in list of allowed values: "
                                        "uint8, uint16"):
        tf.image.encode_png(img.astype(np.float32))
    with pytest.raises(ValueError, match="Shape must be rank 3 but is rank 2"):
        tf.image.encode_png(img[..., 0])
    for bad, msg in ((np.zeros((2, 2, 5), np.uint8), "image must have 1, 2, 3, or 4 channels, "
                                                     "got 5"),):
        with pytest.raises(tf.errors.InvalidArgumentError, match=msg):
            _run(tf.image.encode_png(bad))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"compression should be in "
                                                             r"\[-1,9\], got 10"):
        _run(tf.image.encode_png(img, compression=10))
    with pytest.raises(tf.errors.InvalidArgumentError, match="at least one pixel"):
        _run(tf.image.encode_png(np.zeros((0, 2, 3), np.uint8)))


def test_decode_errors():
    png = _pil_bytes(_image(3), "PNG")
    bmp = _pil_bytes(_image(3), "BMP")
    with pytest.raises(tf.errors.InvalidArgumentError, match="^Unknown image file format. "
                                                             "One of JPEG, JPEG XL, PNG, GIF, "
                                                             "BMP, WebP required."):
        _run(tf.image.decode_png(b"hello world"))
    with pytest.raises(tf.errors.InvalidArgumentError, match="^Invalid PNG"):
        _run(tf.image.decode_png(png[:40]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="^`channels` must be 0, 1, 3 or 4 "
                                                             "but got 2"):
        _run(tf.image.decode_png(png, channels=2))
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="^Trying to decode PNG format using DecodeBmp op. Use "
                             "`decode_png` or `decode_image` instead."):
        _run(tf.image.decode_bmp(png))
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="^Trying to decode BMP format using a wrong op. Use `decode_bmp` "
                             "or `decode_image` instead. Op used: DecodePng"):
        _run(tf.image.decode_png(bmp))
    with pytest.raises(TypeError, match="parameter 'dtype' has DataType float32"):
        tf.image.decode_png(png, dtype=tf.float32)
    with pytest.raises(ValueError, match="Shape must be rank 0 but is rank 1"):
        tf.image.decode_png([png])


# -- JPEG ---------------------------------------------------------------------------------------
def _smooth(h: int = 37, w: int = 53) -> np.ndarray:
    yy, xx = np.mgrid[0:h, 0:w]
    return np.stack([(xx * 4) % 256, (yy * 6) % 256, ((xx + yy) * 3) % 256],
                    -1).astype(np.uint8)


def test_jpeg_round_trip_within_tolerance_and_channels(backend):
    img = _smooth()
    jpg = tf.image.encode_jpeg(img, quality=95)
    rgb = tf.image.decode_jpeg(jpg)
    gray = tf.image.decode_jpeg(jpg, channels=1)
    assert rgb.shape.as_list() == [None, None, None] and gray.shape.as_list() == [None, None, 1]
    raw, a, g = _run([jpg, rgb, gray])
    assert raw[:3] == b"\xff\xd8\xff" and a.shape == img.shape and a.dtype == np.uint8
    assert np.abs(a.astype(int) - img).mean() < 4
    # one channel is the JPEG's luminance: 0.299 R + 0.587 G + 0.114 B of its colours
    lum = a.astype(float) @ np.array([0.299, 0.587, 0.114])
    assert np.abs(g[..., 0] - lum).max() < 3
    grey_jpg = _run(tf.image.encode_jpeg(img[..., :1], format="grayscale"))
    three = _run(tf.image.decode_jpeg(grey_jpg, channels=3))
    assert three.shape == img.shape and (three[..., 0] == three[..., 2]).all()
    half = _run(tf.image.decode_jpeg(raw, ratio=2))
    assert half.shape == (19, 27, 3)   # ceil(37 / 2), ceil(53 / 2)
    assert _run(tf.image.extract_jpeg_shape(raw)).tolist() == [37, 53, 3]
    assert _run(tf.image.is_jpeg(raw)) and not _run(tf.image.is_jpeg(b"\x89PNG"))
    crop = _run(tf.image.decode_and_crop_jpeg(raw, [2, 3, 10, 20]))
    np.testing.assert_array_equal(crop, a[2:12, 3:23])


def test_jpeg_encode_options_and_errors():
    img = _smooth()
    a = _run(tf.image.encode_jpeg(img, quality=30, progressive=True, optimize_size=True,
                                  chroma_downsampling=False))
    b = _run(tf.image.encode_jpeg(img, quality=100))
    assert len(a) < len(b)
    assert Image.open(io.BytesIO(b)).info.get("dpi") == (300, 300)
    with pytest.raises(TypeError, match="DataType uint16 not in list of allowed values: uint8"):
        tf.image.encode_jpeg(img.astype(np.uint16))
    with pytest.raises(ValueError, match="Attr 'format' of 'EncodeJpeg' Op passed string 'bgr'"):
        tf.image.encode_jpeg(img, format="bgr")
    for build, msg in (
            (lambda: tf.image.encode_jpeg(np.zeros((2, 2, 4), np.uint8)),
             r"image must have 1 or 3 channels, got \[2,2,4\]"),
            (lambda: tf.image.encode_jpeg(img, format="grayscale"),
             r"format grayscale expects 1 channels, got \[37,53,3\]"),
            (lambda: tf.image.encode_jpeg(img, quality=101), r"quality must be in \[0,100\]"),
            (lambda: tf.image.decode_jpeg(_pil_bytes(img, "JPEG"), channels=4),
             "JPEG does not support 4 channels"),
            (lambda: tf.image.decode_jpeg(_pil_bytes(img, "JPEG")[:100]),
             "jpeg::Uncompress failed")):
        with pytest.raises(tf.errors.InvalidArgumentError, match=msg):
            _run(build())
    with pytest.raises(ValueError, match="ratio must be 1, 2, 4, or 8"):
        tf.image.decode_jpeg(b"", ratio=3)


# -- GIF, BMP, decode_image -------------------------------------------------------------------
def _animated_gif(n: int = 3) -> tuple:
    frames = [(RNG.randint(0, 4, (4, 5, 3)) * 60).astype(np.uint8) for _ in range(n)]
    buf = io.BytesIO()
    ims = [Image.fromarray(f) for f in frames]
    ims[0].save(buf, "GIF", save_all=True, append_images=ims[1:], duration=10, loop=0)
    return buf.getvalue(), np.stack(frames)


def test_gif_frames_and_decode_image(backend):
    gif, frames = _animated_gif()
    out = tf.image.decode_gif(gif)
    assert out.shape.as_list() == [None, None, None, 3]
    np.testing.assert_array_equal(_run(out), frames)
    img = tf.image.decode_image(gif)
    assert img.shape.ndims is None
    np.testing.assert_array_equal(_run(img), frames)
    first = tf.image.decode_image(gif, expand_animations=False)
    assert first.shape.as_list() == [None, None, None]
    np.testing.assert_array_equal(_run(first), frames[0])
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="^Got 3 frames, but animated gifs can only be decoded by "
                             "tf.io.decode_gif or tf.io.decode_image"):
        _run(tf.image.decode_png(gif))
    with pytest.raises(tf.errors.InvalidArgumentError, match="^channels must be 0 or 3 for "
                                                             "GIF, got 1"):
        _run(tf.image.decode_image(gif, channels=1))
    png = _pil_bytes(frames[0], "PNG")
    assert _run(tf.image.decode_gif(png)).shape == (1, 4, 5, 3)   # any format, as TF
    as_float = tf.image.decode_image(png, dtype=tf.float32)
    np.testing.assert_allclose(_run(as_float), frames[0] / 255.0, rtol=1e-6)
    assert _run(tf.image.decode_image(png, channels=4)).shape == (4, 5, 4)


def test_bmp():
    rgba = _image(4)
    b32 = _pil_bytes(Image.fromarray(rgba), "BMP")   # 32 bits: the fourth byte is alpha
    np.testing.assert_array_equal(_run(tf.image.decode_bmp(b32)), rgba)
    b24 = _pil_bytes(rgba[..., :3], "BMP")
    got = _run(tf.image.decode_bmp(b24, channels=4))
    np.testing.assert_array_equal(got[..., :3], rgba[..., :3])
    assert (got[..., 3] == 255).all()
    np.testing.assert_array_equal(_run(tf.image.decode_image(b24)), rgba[..., :3])
    with pytest.raises(tf.errors.InvalidArgumentError, match="must be 0, 3 or 4 for BMP, but "
                                                             "got 1"):
        _run(tf.image.decode_bmp(b24, channels=1))


def test_decode_png_in_a_dataset_map(backend):
    imgs = [_image(3, h=4, w=4) for _ in range(3)]
    pngs = [_pil_bytes(i, "PNG") for i in imgs]
    ds = tf.data.Dataset.from_tensor_slices(pngs).map(
        lambda s: tf.cast(tf.image.decode_png(s, channels=3), tf.float32) / 255.0)
    assert ds.output_shapes.as_list() == [None, None, 3]
    nxt = ds.make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        for img in imgs:
            np.testing.assert_allclose(sess.run(nxt), img / 255.0, rtol=1e-6)


def test_missing_pillow_names_the_extra():
    code = ("import sys; sys.modules['PIL'] = None\n"
            "import jitflow as tf\n"
            "try:\n"
            "    tf.Session().run(tf.image.decode_png(b'\\x89PNG\\r\\n\\x1a\\n'))\n"
            "except ImportError as e:\n"
            "    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert "jitflow[image]" in out.stdout and "Pillow" in out.stdout, out.stderr


# -- TensorFlow parity ----------------------------------------------------------------------
def _tf():
    return pytest.importorskip("tensorflow.compat.v1")


def _tf_run(tf_ref, fetches_fn):
    g = tf_ref.Graph()
    with g.as_default():
        fetches = fetches_fn(tf_ref)
        with tf_ref.Session(graph=g) as sess:
            try:
                return sess.run(fetches)
            except tf_ref.errors.OpError as e:
                return _op_message(e.message)


def _ours(fetches_fn):
    try:
        return _run(fetches_fn(tf))
    except tf.errors.OpError as e:
        return _op_message(e.message)


@pytest.mark.parametrize("bits", [8, 16])
@pytest.mark.parametrize("c", [1, 2, 3, 4])
def test_png_decoding_equals_tensorflows(c, bits):
    tf_ref = _tf()
    if bits == 16 and c > 1:
        pytest.importorskip("png")
    dtype = np.uint8 if bits == 8 else np.uint16
    img = _image(c, dtype, h=9, w=11)
    png = _tf_run(tf_ref, lambda m: m.image.encode_png(img))

    def build(m):
        return [m.image.decode_png(png, channels=ch, dtype=d)
                for ch in (0, 1, 3, 4) for d in (m.uint8, m.uint16)]
    want, got = _tf_run(tf_ref, build), _ours(build)
    for w, g in zip(want, got):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)
    # and TensorFlow reads our PNGs as we do
    ours = _run(tf.image.encode_png(img))
    np.testing.assert_array_equal(_tf_run(tf_ref, lambda m: m.image.decode_png(
        ours, dtype=m.as_dtype(dtype))), img)


def test_pillow_made_pngs_gifs_and_bmps_decode_as_tensorflow():
    tf_ref = _tf()
    rgb = (RNG.randint(0, 4, (6, 7, 3)) * 80).astype(np.uint8)
    pal = Image.fromarray(rgb).convert("P", palette=Image.ADAPTIVE, colors=4)
    gif, _ = _animated_gif()
    files = {"palette": _pil_bytes(pal, "PNG"),
             "palette_trns": _pil_bytes(pal, "PNG", transparency=0),
             "one_bit": _pil_bytes(Image.fromarray(rgb[..., 0] > 100), "PNG"),
             "grey_key": _pil_bytes(rgb[..., 0], "PNG", transparency=0),
             "rgb_key": _pil_bytes(rgb, "PNG", transparency=(80, 0, 0)),
             "gif": _pil_bytes(rgb, "GIF"), "bmp24": _pil_bytes(rgb, "BMP"),
             "bmp32": _pil_bytes(Image.fromarray(_image(4)), "BMP"),
             "bmp8": _pil_bytes(pal, "BMP")}
    for name, data in files.items():
        def build(m, data=data, name=name):
            if name.startswith("bmp"):
                return [m.image.decode_bmp(data, channels=ch) for ch in (0, 3, 4)]
            chans = (0, 3) if name == "gif" else (0, 1, 3, 4)
            return [m.image.decode_png(data, channels=ch) for ch in chans] + [
                m.image.decode_image(data), m.image.decode_gif(data)]
        want, got = _tf_run(tf_ref, build), _ours(build)
        assert len(want) == len(got)
        for w, g in zip(want, got):
            np.testing.assert_array_equal(g, w, err_msg=name)
    def frames(m):
        return m.image.decode_gif(gif), m.image.decode_image(gif, expand_animations=False)
    for w, g in zip(_tf_run(tf_ref, frames), _ours(frames)):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("quality,subsample", [(95, True), (75, False), (50, True)])
def test_jpeg_decoding_against_tensorflow(quality, subsample):
    """Exact with dct_method="INTEGER_ACCURATE"; TensorFlow's default INTEGER_FAST DCT within
    the documented tolerance."""
    tf_ref = _tf()
    for img in (_smooth(), RNG.randint(0, 256, (37, 53, 3)).astype(np.uint8)):
        jpg = _tf_run(tf_ref, lambda m, img=img: m.image.encode_jpeg(
            img, quality=quality, chroma_downsampling=subsample))
        ours = _run(tf.image.encode_jpeg(img, quality=quality, chroma_downsampling=subsample))
        for data in (jpg, ours):
            def exact(m, data=data):
                return [m.image.decode_jpeg(data, channels=c, dct_method="INTEGER_ACCURATE")
                        for c in (0, 1, 3)]
            for w, g in zip(_tf_run(tf_ref, exact), _ours(exact)):
                np.testing.assert_array_equal(g, w)
            fast = _tf_run(tf_ref, lambda m, data=data: m.image.decode_jpeg(data))
            diff = np.abs(_run(tf.image.decode_jpeg(data)).astype(int) - fast)
            assert diff.max() <= 16 and diff.mean() < 2.5
        def half(m, jpg=jpg):
            return m.image.decode_jpeg(jpg, ratio=2, dct_method="INTEGER_ACCURATE")
        w, g = _tf_run(tf_ref, half), _ours(half)
        assert g.shape == w.shape and np.abs(g.astype(int) - w).max() <= 16


def test_static_shapes_and_errors_match_tensorflow():
    tf_ref = _tf()
    png = _pil_bytes(_image(3), "PNG")
    bmp = _pil_bytes(_image(3), "BMP")
    gif, _ = _animated_gif()
    shapes = []
    for m in (tf_ref, tf):
        with m.Graph().as_default():
            s = m.placeholder(m.string, [])
            outs = [m.image.decode_png(s), m.image.decode_png(s, channels=3),
                    m.image.decode_jpeg(s, channels=1), m.image.decode_bmp(s, channels=4),
                    m.image.decode_gif(s), m.image.decode_image(s),
                    m.image.decode_image(s, channels=3, expand_animations=False),
                    m.image.decode_image(s, expand_animations=False),
                    m.image.encode_png(m.placeholder(m.uint8, [None, None, 3])),
                    m.image.extract_jpeg_shape(s), m.image.is_jpeg(s)]
            shapes.append([o.shape.as_list() if o.shape.ndims is not None else None
                           for o in outs] + [[o.dtype.name for o in outs]])
    assert shapes[0] == shapes[1]
    cases = [lambda m: m.image.decode_png(b"hello world"),
             lambda m: m.image.decode_bmp(png), lambda m: m.image.decode_jpeg(bmp),
             lambda m: m.image.decode_png(gif), lambda m: m.image.decode_image(gif, channels=1),
             lambda m: m.image.decode_png(png, channels=2),
             lambda m: m.image.decode_jpeg(_pil_bytes(_image(3), "JPEG"), channels=4),
             lambda m: m.image.decode_bmp(bmp, channels=1),
             lambda m: m.image.encode_png(np.zeros((2, 2, 5), np.uint8)),
             lambda m: m.image.encode_png(_image(3), compression=10),
             lambda m: m.image.encode_jpeg(np.zeros((2, 2, 2), np.uint8)),
             lambda m: m.image.encode_jpeg(_image(3), format="grayscale"),
             lambda m: m.image.encode_jpeg(_image(3), quality=101)]
    for build in cases:
        want, got = _tf_run(tf_ref, build), _ours(build)
        assert isinstance(want, str) and got.startswith(want), (want, got)
