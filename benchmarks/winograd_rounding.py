"""Float32 rounding of the convolution routines on random Winograd-eligible layers.

    python benchmarks/winograd_rounding.py [--cases 60] [--seed 0] [--tf] [--out FILE.md]

Each case draws a layer the Winograd routines accept (3x3 or 5x5, stride 1, 16-128 channels in
and out, SAME or VALID, odd sizes, inputs of three scales, half of them after a ReLU) and runs
nnlib's Winograd entry points (`conv2d_w` and its two gradients) and the im2col routines on the
same float32 data. The error of each is measured against float64 sums, as the largest absolute
difference in float32 ulps of the result's largest magnitude ("ulps of scale"), together with
the differential fuzzer's float comparison (`tests/fuzz/runner.py: _float_mismatch`, no
perturbation allowance). With `--tf` the same layers also run through TensorFlow's compat.v1
session, and the table gains the jitflow-against-TF error of each path (TF as the reference).

A row per routine and filter size: cases, the largest and median error of each path, and how
many results the fuzzer's comparison rejects.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]

EPS = float(np.finfo(np.float32).eps)


def _tf_results(t1, x, f, g, same):
    """TF's forward and both gradients (the output gradient fed as g)."""
    padding = "SAME" if same else "VALID"
    graph = t1.Graph()
    with graph.as_default():
        xt = t1.placeholder(t1.float32, x.shape)
        y = t1.nn.conv2d(xt, t1.constant(f), [1, 1, 1, 1], padding)
        dx = t1.gradients(y, [xt], grad_ys=t1.constant(g))[0]
        df = t1.nn.conv2d_backprop_filter(xt, f.shape, t1.constant(g), [1, 1, 1, 1], padding)
        with t1.Session(graph=graph) as sess:
            return sess.run([y, dx, df], {xt: x})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tf", action="store_true", help="also against TensorFlow compat.v1")
    ap.add_argument("--out", default=None, help="write the table here too (markdown)")
    args = ap.parse_args(argv)
    from tqdm import tqdm

    from fuzz.runner import _float_mismatch
    from helpers import conv_direct_sums
    from jitflow.backends.numba_cpu import nnlib
    t1 = None
    if args.tf:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        import tensorflow.compat.v1 as t1
        t1.disable_eager_execution()
    rng = np.random.default_rng(args.seed)
    one, zero = np.int64(1), np.int64(0)   # zero: no EXPLICIT padding
    stats: dict = {}
    for _ in tqdm(range(args.cases), desc="layers", file=sys.stderr):
        r = int(rng.choice([3, 5, 5]))
        c, k = (int(v) for v in rng.choice([16, 24, 32, 48, 64, 96, 128], 2))
        h, w = (int(v) for v in rng.integers(r + 2, 30, 2))
        same = int(rng.integers(0, 2))
        pad = (r - 1) // 2 if same else 0
        oh, ow = (h, w) if same else (h - r + 1, w - r + 1)
        n = max(1, -(-1100 // (oh * ow)))
        x = rng.standard_normal((n, h, w, c)) * float(rng.choice([1e-3, 1.0, 30.0]))
        if rng.integers(0, 2):
            x = np.maximum(x, 0)
        x = x.astype(np.float32)
        f = (rng.standard_normal((r, r, c, k)) / np.sqrt(r * r * c)).astype(np.float32)
        g = rng.standard_normal((n, oh, ow, k)).astype(np.float32)
        exact = conv_direct_sums(x, f, g, pad)
        paths = {}
        for name, fns in (("winograd", (nnlib.conv2d_w, nnlib.conv2d_input_grad_w,
                                         nnlib.conv2d_filter_grad_w)),
                          ("im2col", (nnlib.conv2d, nnlib.conv2d_input_grad,
                                      nnlib.conv2d_filter_grad))):
            y, dx, df = np.empty(g.shape, np.float32), np.empty_like(x), np.empty_like(f)
            fns[0](x, f, y, one, one, one, one, np.int64(same), zero, zero)
            fns[1](f, g, dx, one, one, one, one, np.int64(same), zero, zero)
            fns[2](x, g, df, one, one, one, one, np.int64(same), zero, zero)
            paths[name] = (y, dx, df)
        refs = {"exact": exact}
        if t1 is not None:
            refs["TF"] = _tf_results(t1, x, f, g, same)
        for ref_name, ref in refs.items():
            for i, routine in enumerate(("forward", "input gradient", "filter gradient")):
                want = np.asarray(ref[i], np.float64)
                scale = max(float(np.abs(want).max()), 1e-300)
                row = stats.setdefault((ref_name, f"{r}x{r}", routine), {})
                for name, got in paths.items():
                    err = float(np.abs(got[i] - want).max()) / scale / EPS
                    bad = _float_mismatch(got[i], want.astype(np.float32), None, "float32")
                    errs, rejected = row.setdefault(name, ([], [0]))
                    errs.append(err)
                    rejected[0] += bad is not None
    lines = [f"`python benchmarks/winograd_rounding.py --cases {args.cases} --seed {args.seed}"
             f"{' --tf' if args.tf else ''}`: float32 error in ulps of each result's largest "
             "magnitude, largest / median over the cases, and results the fuzzer's comparison "
             "rejects.", "",
             "| against | filter | routine | cases | Winograd max / median | rejected | "
             "im2col max / median | rejected |", "|---|---|---|---|---|---|---|---|"]
    for (ref_name, size, routine), row in sorted(stats.items()):
        cells = []
        for name in ("winograd", "im2col"):
            errs, rejected = row[name]
            cells += [f"{max(errs):.1f} / {float(np.median(errs)):.1f}", str(rejected[0])]
        lines.append(f"| {ref_name} | {size} | {routine} | {len(row['winograd'][0])} | "
                     + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
