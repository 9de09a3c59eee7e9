"""GPU figures for the cuda backend: `make bench-cuda` (needs an NVIDIA GPU).

- fused chain `sigmoid(x*w+b)*tanh(x)-exp(-x*x)+0.5*x` at 1e7 and 1e8 float32: the cuda backend
  against the numba CPU backend and CuPy's fused elementwise kernel (`cupy.fuse`) where CuPy
  installs; the cuda figure includes uploading the feed and downloading the result, as a
  `Session.run` does, and is also given with a device-resident input (a variable);
- MLP 784-128-10 SGD training step at batch 1024 and 8192 (steps per second), cuda against
  numba CPU and the same step hand-written in CuPy;
- LeNet-style CNN + Adam training step at batch 128, cuda against numba CPU;
- pinned host copies of 1e7 and 1e8 float32 in and out: what a fed and fetched chain can reach.

Writes benchmarks/results/cuda-<UTC stamp>.md naming the device, and prints it. Targets
(DESIGN.md section 7): chain at 1e7 >= 10x the CPU backend, within 2x of CuPy.
"""
from __future__ import annotations

import os
import statistics
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("JITFLOW_COMPILE", "sync")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

import jitflow as tf  # noqa: E402


def _median_time(fn, reps: int = 10, warm: int = 2) -> float:
    for _ in range(warm):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def chain_case(n: int, backend: str, resident: bool = False) -> float:
    g = tf.Graph()
    with g.as_default():
        xv = np.random.default_rng(0).standard_normal(n).astype(np.float32)
        x = tf.Variable(xv) if resident else tf.placeholder(tf.float32, [None])
        y = tf.sigmoid(x * 0.7 + 0.1) * tf.tanh(x) - tf.exp(-x * x) + 0.5 * x
        out = tf.reduce_sum(y) if resident else y
        with tf.Session(graph=g, backend=backend) as sess:
            if resident:
                sess.run(x.initializer)
                return _median_time(lambda: sess.run(out))
            return _median_time(lambda: sess.run(out, {x: xv}))


def cupy_chain(n: int, resident: bool = False):
    """CuPy's fused kernel on a device-resident input (the sum of it when `resident`, as the
    resident jitflow case fetches); None where CuPy does not import or finds no GPU."""
    try:
        import cupy as cp
        cp.cuda.runtime.getDeviceCount()
    except Exception:  # noqa: BLE001  (not installed, or no usable GPU)
        return None

    @cp.fuse()
    def chain(x):
        return (1 / (1 + cp.exp(-(x * np.float32(0.7) + np.float32(0.1)))) * cp.tanh(x)
                - cp.exp(-x * x) + np.float32(0.5) * x)

    @cp.fuse()
    def chain_sum(x):
        return cp.sum(chain(x))
    x = cp.asarray(np.random.default_rng(0).standard_normal(n).astype(np.float32))
    fn = chain_sum if resident else chain

    def run():
        fn(x)
        cp.cuda.Device().synchronize()
    return _median_time(run)


def mlp_case(batch: int, backend: str) -> float:
    g = tf.Graph()
    rng = np.random.default_rng(0)
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 784])
        y = tf.placeholder(tf.int64, [None])
        w1 = tf.Variable(rng.standard_normal((784, 128)).astype(np.float32) * 0.05)
        b1 = tf.Variable(np.zeros(128, np.float32))
        w2 = tf.Variable(rng.standard_normal((128, 10)).astype(np.float32) * 0.05)
        b2 = tf.Variable(np.zeros(10, np.float32))
        logits = tf.matmul(tf.nn.relu(tf.matmul(x, w1) + b1), w2) + b2
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=y, logits=logits))
        train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
        feed = {x: rng.standard_normal((batch, 784)).astype(np.float32),
                y: rng.integers(0, 10, batch)}
        with tf.Session(graph=g, backend=backend) as sess:
            sess.run(tf.global_variables_initializer())
            return 1.0 / _median_time(lambda: sess.run(train, feed), reps=20)


def cnn_case(batch: int, backend: str, reps: int = 10) -> float:
    """Steps per second of a LeNet-style CNN + Adam training step on 28x28x1 images (conv 5x5x6
    SAME, relu, max-pool 2, conv 5x5x16 VALID, relu, max-pool 2, dense 400-120-84-10)."""
    g = tf.Graph()
    rng = np.random.default_rng(0)
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 28, 28, 1])
        y = tf.placeholder(tf.int64, [None])

        def var(*shape, scale=0.1):
            return tf.Variable(rng.standard_normal(shape).astype(np.float32) * scale)
        h = tf.nn.relu(tf.nn.conv2d(x, var(5, 5, 1, 6), [1, 1, 1, 1], "SAME") + var(6))
        h = tf.nn.max_pool(h, [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
        h = tf.nn.relu(tf.nn.conv2d(h, var(5, 5, 6, 16), [1, 1, 1, 1], "VALID") + var(16))
        h = tf.reshape(tf.nn.max_pool(h, [1, 2, 2, 1], [1, 2, 2, 1], "VALID"), [-1, 400])
        h = tf.nn.relu(tf.matmul(h, var(400, 120)) + var(120))
        h = tf.nn.relu(tf.matmul(h, var(120, 84)) + var(84))
        logits = tf.matmul(h, var(84, 10)) + var(10)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=y, logits=logits))
        train = tf.train.AdamOptimizer(1e-3).minimize(loss)
        feed = {x: rng.standard_normal((batch, 28, 28, 1)).astype(np.float32),
                y: rng.integers(0, 10, batch)}
        with tf.Session(graph=g, backend=backend) as sess:
            sess.run(tf.global_variables_initializer())
            return 1.0 / _median_time(lambda: sess.run(train, feed), reps=reps)


def cupy_mlp(batch: int):
    """Steps per second of the MLP SGD step written in CuPy (cuBLAS products, elementwise
    kernels, device-resident data): what the vendor path can reach; None without CuPy."""
    try:
        import cupy as cp
        cp.cuda.runtime.getDeviceCount()
    except Exception:  # noqa: BLE001  (not installed, or no usable GPU)
        return None
    rng = np.random.default_rng(0)
    x = cp.asarray(rng.standard_normal((batch, 784)).astype(np.float32))
    lab = cp.asarray(rng.integers(0, 10, batch))
    w1 = cp.asarray(rng.standard_normal((784, 128)).astype(np.float32) * 0.05)
    b1 = cp.zeros(128, cp.float32)
    w2 = cp.asarray(rng.standard_normal((128, 10)).astype(np.float32) * 0.05)
    b2 = cp.zeros(10, cp.float32)
    lr = np.float32(0.1)

    def step():
        h = cp.maximum(x @ w1 + b1, 0)
        z = h @ w2 + b2
        z = z - z.max(axis=1, keepdims=True)
        p = cp.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        p[cp.arange(batch), lab] -= 1
        p /= batch
        gh = (p @ w2.T) * (h > 0)
        w2[...] -= lr * (h.T @ p)
        b2[...] -= lr * p.sum(axis=0)
        w1[...] -= lr * (x.T @ gh)
        b1[...] -= lr * gh.sum(axis=0)
        cp.cuda.Device().synchronize()
    return 1.0 / _median_time(step, reps=20)


def copy_bytes(n: int):
    """Seconds to copy n float32 in from and back to pinned host memory (the bus's speed)."""
    from numba import cuda
    h = cuda.pinned_array(n, np.float32)
    h[:] = 1
    s = cuda.stream()

    def run():
        d = cuda.to_device(h, stream=s)
        d.copy_to_host(h, stream=s)
        s.synchronize()
    return _median_time(run)


def main() -> int:
    from numba import cuda
    device = cuda.get_current_device().name
    device = device.decode() if isinstance(device, bytes) else str(device)
    rows = ["| case | cuda | numba CPU | cuda vs CPU | CuPy fused | cuda vs CuPy |",
            "|---|---|---|---|---|---|"]
    for n in (10 ** 7, 10 ** 8):
        gpu = chain_case(n, "cuda")
        res = chain_case(n, "cuda", resident=True)
        cpu = chain_case(n, "numba")
        cpu_res = chain_case(n, "numba", resident=True)
        cp_t = cupy_chain(n)
        cp_res = cupy_chain(n, resident=True)
        rows.append(f"| chain 1e{len(str(n)) - 1} f32 (feed in, result out) | {gpu * 1e3:.2f} ms "
                    f"| {cpu * 1e3:.2f} ms | {cpu / gpu:.1f}x | "
                    + (f"{cp_t * 1e3:.2f} ms (resident) | {cp_t / gpu:.2f}x |" if cp_t
                       else "- | - |"))
        rows.append(f"| chain 1e{len(str(n)) - 1} f32 (resident input, sum out) | "
                    f"{res * 1e3:.2f} ms | {cpu_res * 1e3:.2f} ms | {cpu_res / res:.1f}x | "
                    + (f"{cp_res * 1e3:.2f} ms | {cp_res / res:.2f}x |" if cp_res
                       else "- | - |"))
    for n in (10 ** 7, 10 ** 8):
        rows.append(f"| pinned copy in + out, 1e{len(str(n)) - 1} f32 (the bus) | "
                    f"{copy_bytes(n) * 1e3:.2f} ms | - | - | - | - |")
    from jitflow.backends.numba_cuda import vendor
    blas = vendor.choose(False)
    for batch in (1024, 8192):
        gpu = mlp_case(batch, "cuda")
        cpu = mlp_case(batch, "numba")
        cp_s = cupy_mlp(batch)
        rows.append(f"| MLP 784-128-10 SGD step, batch {batch} | {gpu:,.0f} steps/s | "
                    f"{cpu:,.0f} steps/s | {gpu / cpu:.1f}x | "
                    + (f"{cp_s:,.0f} steps/s (hand-written) | {gpu / cp_s:.2f}x |" if cp_s
                       else "- | - |"))
    gpu = cnn_case(128, "cuda")
    cpu = cnn_case(128, "numba", reps=5)
    rows.append(f"| LeNet-style CNN + Adam step, batch 128 | {gpu:,.0f} steps/s | "
                f"{cpu:,.0f} steps/s | {gpu / cpu:.1f}x | - | - |")
    rows.append("")
    rows.append(f"Products: {'vendor GEMM ' + blas.name if blas else 'tiled kernel'} "
                "(JITFLOW_CUDA_BLAS); convolutions and pooling: windowlib.py kernels.")
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    text = (f"# cuda backend on {device}\n\nRun {stamp}, medians; OPENBLAS_NUM_THREADS="
            f"{os.environ['OPENBLAS_NUM_THREADS']} for the CPU backend.\n\n" + "\n".join(rows)
            + "\n\nTargets (resident input): chain 1e7 >= 10x the CPU backend; within 2x of "
            "CuPy's fused kernel.\n")
    out = os.path.join(ROOT, "benchmarks", "results", f"cuda-{stamp}.md")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, out)
    print(text)
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
