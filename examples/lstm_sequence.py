"""An LSTM (`tf.nn.dynamic_rnn`) learns a sequence task: the majority sign of a noisy sequence.

Each example is a sequence of 5 to 20 steps (padded to 20; `sequence_length` tells the LSTM
where each one ends), every step a sign +1 or -1 plus noise. The label says whether more steps
were positive than negative: the network has to count along the sequence and keep the count in
its state. BasicLSTMCell(32) -> the final state h -> dense 2 -> softmax cross entropy, Adam.
Prints the loss and the held-out accuracy as it learns (the classes are balanced).
"""
from __future__ import annotations

import argparse

import numpy as np
from tqdm import tqdm

import jitflow as tf

MAX_STEPS = 20


def make_data(n: int, rng) -> tuple:
    lengths = rng.integers(5, MAX_STEPS + 1, size=n)
    lengths += (lengths % 2 == 0)           # odd lengths: no ties
    lengths = np.minimum(lengths, MAX_STEPS - 1)
    signs = rng.choice([-1.0, 1.0], size=(n, MAX_STEPS))
    signs[np.arange(MAX_STEPS)[None, :] >= lengths[:, None]] = 0.0   # padding
    x = signs + rng.normal(0.0, 0.3, size=signs.shape) * (signs != 0)
    labels = (signs.sum(1) > 0).astype(np.int32)
    return x[:, :, None].astype(np.float32), lengths.astype(np.int32), labels


def main(steps: int = 200, batch: int = 64, hidden: int = 32, lr: float = 0.01, seed: int = 0,
         verbose: bool = True) -> dict:
    rng = np.random.default_rng(seed)
    train_x, train_len, train_y = make_data(4096, rng)
    test_x, test_len, test_y = make_data(1024, rng)
    graph = tf.Graph()
    with graph.as_default():
        tf.set_random_seed(seed)
        x = tf.placeholder(tf.float32, [None, MAX_STEPS, 1], name="x")
        lengths = tf.placeholder(tf.int32, [None], name="lengths")
        y = tf.placeholder(tf.int32, [None], name="y")
        cell = tf.nn.rnn_cell.BasicLSTMCell(hidden)
        outputs, state = tf.nn.dynamic_rnn(cell, x, sequence_length=lengths, dtype=tf.float32)
        logits = tf.layers.dense(state.h, 2)
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1, output_type=tf.int32),
                                                   y), tf.float32))
        train = tf.train.AdamOptimizer(lr).minimize(loss)
        init = tf.global_variables_initializer()
    if verbose:
        print("variables: " + ", ".join(f"{v.name} {v.shape.as_list()}"
                                        for v in graph.get_collection("variables")))
    test = {x: test_x, lengths: test_len, y: test_y}
    history = []
    with tf.Session(graph=graph) as sess:
        sess.run(init)
        first = sess.run([loss, accuracy], test)
        bar = tqdm(range(steps), desc="training", disable=not verbose)
        for step in bar:
            idx = rng.integers(0, len(train_x), size=batch)
            sess.run(train, {x: train_x[idx], lengths: train_len[idx], y: train_y[idx]})
            if (step + 1) % 50 == 0:
                l_, a_ = sess.run([loss, accuracy], test)
                history.append((step + 1, float(l_), float(a_)))
                bar.set_postfix(loss=f"{l_:.3f}", accuracy=f"{a_:.3f}")
        # outputs past each sequence's end are zeros, and the state stops there
        o = sess.run(outputs, {x: test_x[:2], lengths: test_len[:2]})
        assert not o[0, test_len[0]:].any() and o[0, test_len[0] - 1].any()
    if verbose:
        print(f"before training: loss {first[0]:.4f}, accuracy {first[1]:.3f}")
        for s, l_, a_ in history:
            print(f"step {s:4d}  loss {l_:.4f}  held-out accuracy {a_:.3f}")
    return {"initial": (float(first[0]), float(first[1])), "history": history}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    main(steps=args.steps)
