"""Run frozen TensorFlow graphs with jitflow: an MNIST-style CNN and an MLP.

The `.pb` files in examples/data were trained and frozen by TensorFlow
(examples/data/make_frozen_graphs.py); jitflow imports them with `tf.import_graph_def` and runs
them without TensorFlow (the Numba backend by default), then compares with the probabilities
TensorFlow computed for the same images.
"""
import os
import sys
import time
import warnings

import numpy as np
from tqdm import tqdm

import jitflow as tf

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
sys.path.insert(0, DATA)
from make_frozen_graphs import digits  # noqa: E402  (the test images, made again)

GRAPHS = (("mnist_cnn.pb", 28, "cnn"), ("mlp.pb", 8, "mlp"))


def run_frozen(name: str, size: int, batch: int = 16) -> tuple:
    """(probabilities, labels, op types, seconds) of the frozen graph on its test images."""
    with open(os.path.join(DATA, name), "rb") as f:
        graph_def = tf.GraphDef.FromString(f.read())
    images, labels = digits(64, size, 2)
    with tf.Graph().as_default() as g:
        probs, = tf.import_graph_def(graph_def, return_elements=["probs:0"], name="")
        ops = sorted({op.type for op in g.get_operations()})
        with tf.Session(graph=g) as sess:
            start = time.perf_counter()
            out = [sess.run(probs, {"images:0": images[i:i + batch]})
                   for i in tqdm(range(0, len(images), batch), desc=name, leave=False)]
            seconds = time.perf_counter() - start
    return np.concatenate(out), labels, ops, seconds


def main() -> dict:
    expected = np.load(os.path.join(DATA, "frozen_expected.npz"))
    results = {}
    for name, size, key in GRAPHS:
        got, labels, ops, seconds = run_frozen(name, size)
        want = expected[f"{key}_probs"]
        diff = float(np.abs(got - want).max())
        print(f"{name}: ops {', '.join(ops)}")
        print(f"  accuracy {np.mean(got.argmax(1) == labels):.3f}; predictions equal "
              f"TensorFlow's: {np.array_equal(got.argmax(1), want.argmax(1))}; "
              f"max |jitflow - TensorFlow| = {diff:.1e} ({seconds:.2f} s for 64 images)")
        results[key] = {"probs": got, "expected": want, "max_diff": diff}
    return results


if __name__ == "__main__":
    warnings.filterwarnings("ignore", message=".*has no code generator")
    main()
