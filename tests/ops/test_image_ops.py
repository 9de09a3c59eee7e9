"""tf.image: values and gradients against TensorFlow, plus hand-computed cases."""
from __future__ import annotations

import numpy as np
import pytest

import jitflow as tf

RNG = np.random.default_rng(0)
IMG = RNG.uniform(0, 255, (2, 5, 7, 3)).astype(np.float32)
U8 = RNG.integers(0, 256, (4, 6, 3)).astype(np.uint8)

CASES = {
    "resize_bilinear": lambda t: t.image.resize_images(t.constant(IMG), [8, 4]),
    "resize_align": lambda t: t.image.resize_images(t.constant(IMG), [3, 10],
                                                    align_corners=True),
    "resize_nearest": lambda t: t.image.resize_images(
        t.constant(IMG), [9, 9], method=t.image.ResizeMethod.NEAREST_NEIGHBOR),
    "nearest_align": lambda t: t.image.resize_nearest_neighbor(t.constant(IMG), [4, 3],
                                                               align_corners=True),
    "bilinear_uint8": lambda t: t.image.resize_bilinear(t.constant(U8[None]), [7, 5]),
    "flip_lr": lambda t: t.image.flip_left_right(t.constant(IMG)),
    "flip_ud": lambda t: t.image.flip_up_down(t.constant(U8)),
    "transpose": lambda t: t.image.transpose_image(t.constant(IMG)),
    "rot90": lambda t: t.image.rot90(t.constant(U8), 3),
    "standardize": lambda t: t.image.per_image_standardization(t.constant(U8)),
    "to_float": lambda t: t.image.convert_image_dtype(t.constant(U8), t.float32),
    "to_uint8": lambda t: t.image.convert_image_dtype(t.constant(IMG / 255.0), t.uint8,
                                                      saturate=True),
    "brightness": lambda t: t.image.adjust_brightness(t.constant(U8), 0.1),
    "contrast": lambda t: t.image.adjust_contrast(t.constant(IMG), 1.7),
    "gamma": lambda t: t.image.adjust_gamma(t.constant(IMG / 255.0), 2.0),
    "central_crop": lambda t: t.image.central_crop(t.constant(IMG), 0.5),
    "crop_box": lambda t: t.image.crop_to_bounding_box(t.constant(IMG), 1, 2, 3, 4),
    "pad_box": lambda t: t.image.pad_to_bounding_box(t.constant(IMG), 1, 2, 8, 10),
    "crop_or_pad": lambda t: t.image.resize_image_with_crop_or_pad(t.constant(IMG), 3, 10),
    "grayscale": lambda t: t.image.rgb_to_grayscale(t.constant(IMG)),
    "gray_to_rgb": lambda t: t.image.grayscale_to_rgb(t.constant(IMG[..., :1])),
    "total_variation": lambda t: t.image.total_variation(t.constant(IMG)),
    "gradients_dx": lambda t: t.image.image_gradients(t.constant(IMG))[1],
    "psnr": lambda t: t.image.psnr(t.constant(IMG), t.constant(IMG + 1.0), 255.0),
    "resize_grad": lambda t: _resize_grad(t),
}


def _resize_grad(t):
    x = t.constant(IMG)
    return t.gradients(t.reduce_sum(t.square(t.image.resize_images(x, [8, 4]))), x)[0]


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_tensorflow(name):
    tf_ref = pytest.importorskip("tensorflow.compat.v1")
    g = tf_ref.Graph()
    with g.as_default():
        want = tf_ref.Session(graph=g).run(CASES[name](tf_ref))
    for backend in ("interpreter", "numba"):
        tf.reset_default_graph()
        with tf.Session(backend=backend) as sess:
            got = sess.run(CASES[name](tf))
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol=1e-4, atol=1e-3)


def test_resize_by_hand(backend):
    x = np.arange(4, dtype=np.float32).reshape(1, 2, 2, 1)  # [[0, 1], [2, 3]]
    up = tf.image.resize_images(x, [4, 4])
    near = tf.image.resize_nearest_neighbor(x, [4, 4])
    with tf.Session() as sess:
        u, n = sess.run([up, near])
    # legacy sampling: source row of output i is i * 2 / 4; row 1.5 clamps to row 1
    np.testing.assert_allclose(u[0, :, :, 0], [[0, 0.5, 1, 1], [1, 1.5, 2, 2], [2, 2.5, 3, 3],
                                               [2, 2.5, 3, 3]])
    np.testing.assert_array_equal(n[0, :, :, 0], [[0, 0, 1, 1], [0, 0, 1, 1], [2, 2, 3, 3],
                                                  [2, 2, 3, 3]])


def test_flips_crops_and_random_ops(backend):
    x = np.arange(12, dtype=np.float32).reshape(2, 3, 2)
    tf.set_random_seed(3)
    rf = tf.image.random_flip_left_right(x, seed=1)
    rc = tf.random_crop(x, [2, 2, 2], seed=2)
    with tf.Session() as sess:
        flips = [sess.run(rf) for _ in range(40)]
        crops = [sess.run(rc) for _ in range(20)]
        lr = sess.run(tf.image.flip_left_right(x))
    np.testing.assert_array_equal(lr, x[:, ::-1])
    kinds = {bool(np.array_equal(f, x[:, ::-1])) for f in flips}
    assert kinds == {True, False}
    assert all(np.array_equal(f, x) or np.array_equal(f, x[:, ::-1]) for f in flips)
    starts = {int(c[0, 0, 0]) // 2 for c in crops}
    assert starts == {0, 1}
    assert all(np.array_equal(c, x[:, s:s + 2]) for c, s in
               zip(crops, [int(c[0, 0, 0]) // 2 for c in crops]))
    with pytest.raises(ValueError, match="larger"):
        tf.random_crop(x, [3, 2, 2])
