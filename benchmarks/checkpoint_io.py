"""Checkpoint save and restore in TensorFlow's V2 format: jitflow's Saver against TensorFlow's
compat.v1 Saver on the same variables, side by side in one process (one BLAS thread).

    python benchmarks/checkpoint_io.py [--mb 64] [--variables 16] [--repeat 5] [--numpy-crc]

Prints the median seconds of save (data, index, meta graph, state file) and restore for each
peer, the ratio jitflow/TensorFlow, and jitflow's CRC-32C throughput (the NumPy lanes, or
google-crc32c when it is installed; `--numpy-crc` forces the lanes).
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402


def _values(mb: float, n: int) -> dict:
    rng = np.random.default_rng(0)
    per = max(1, int(mb * 2 ** 20 / 4 / n))
    return {f"layer{i}/w": rng.standard_normal(per).astype(np.float32) for i in range(n)}


def measure(tf, values: dict, repeat: int, folder: str) -> dict:
    with tf.Graph().as_default() as g:
        variables = [tf.Variable(v, name=k) for k, v in values.items()]
        saver = tf.train.Saver(max_to_keep=1)
        with tf.Session(graph=g) as sess:
            sess.run(tf.global_variables_initializer())
            saves, restores = [], []
            for i in range(repeat):
                t = time.perf_counter()
                path = saver.save(sess, os.path.join(folder, "m"), global_step=i)
                saves.append(time.perf_counter() - t)
                t = time.perf_counter()
                saver.restore(sess, path)
                restores.append(time.perf_counter() - t)
            got = sess.run(variables[0])
    assert np.array_equal(got, next(iter(values.values())))
    return {"save": statistics.median(saves), "restore": statistics.median(restores)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=64)
    ap.add_argument("--variables", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--numpy-crc", action="store_true", help="ignore google-crc32c")
    args = ap.parse_args()
    if args.numpy_crc:
        from jitflow.serialize import crc32c as _crc
        _crc._accelerator = lambda: None
    values = _values(args.mb, args.variables)
    import jitflow
    peers = {"jitflow": jitflow}
    try:
        import tensorflow.compat.v1 as tf1
        tf1.disable_v2_behavior()
        peers["tf1"] = tf1
    except ImportError:
        pass
    results = {}
    for name, mod in peers.items():
        folder = tempfile.mkdtemp()
        try:
            results[name] = measure(mod, values, args.repeat, folder)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    print(f"{args.mb:g} MB in {args.variables} float32 variables, median of {args.repeat}")
    for name, r in results.items():
        print(f"  {name:8s} save {r['save'] * 1e3:8.1f} ms   restore {r['restore'] * 1e3:8.1f} ms")
    if "tf1" in results:
        j, t = results["jitflow"], results["tf1"]
        print(f"  ratio jitflow/tf1: save {j['save'] / t['save']:.2f}, restore "
              f"{j['restore'] / t['restore']:.2f} (below 1: jitflow faster)")
    from jitflow.serialize import crc32c
    data = np.random.default_rng(1).integers(0, 256, 64 << 20, dtype=np.uint8)
    t = time.perf_counter()
    crc32c.value(data)
    dt = time.perf_counter() - t
    which = "google-crc32c" if crc32c._accelerator() is not None else "NumPy lanes"
    print(f"  CRC-32C ({which}): {64 / dt:.0f} MB/s")


if __name__ == "__main__":
    main()
