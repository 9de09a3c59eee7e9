"""Skip-gram word2vec trained with `tf.nn.nce_loss`, in the style of TF1's word2vec_basic.

The corpus is synthetic: sentences about one of a few topics, each mixing that topic's words
with common filler words, so words of a topic share contexts. (word, context) pairs within a
window are the training data; each step looks up the batch's word embeddings and scores the
true context against classes drawn by the log-uniform sampler. The sampler runs on the host,
the step compiles, and the 580 x 128 tables are updated only at the looked-up rows. Prints the
average loss as it falls, then the nearest neighbours of a few words (mostly of their topic).
"""
from __future__ import annotations

import argparse

import numpy as np

import jitflow as tf

try:
    from tqdm import tqdm
    say = tqdm.write
except ImportError:  # the progress bar is optional
    def tqdm(it, **kwargs):
        return it
    say = print


def make_corpus(rng, topics: int = 8, words_per_topic: int = 60, fillers: int = 100,
                sentences: int = 12000, length: int = 10) -> tuple:
    """Word ids of the corpus (filler words first, as word2vec sorts by frequency), the
    vocabulary and each word's topic (-1 for fillers)."""
    vocab = [f"the{i}" for i in range(fillers)] + [
        f"t{t}w{i}" for t in range(topics) for i in range(words_per_topic)]
    topic_of = np.array([-1] * fillers + [t for t in range(topics)
                                          for _ in range(words_per_topic)])
    zipf = 1.0 / np.arange(1, fillers + 1)
    topic = rng.integers(topics, size=(sentences, 1))
    topical = fillers + topic * words_per_topic + rng.integers(words_per_topic,
                                                               size=(sentences, length))
    filler = rng.choice(fillers, size=(sentences, length), p=zipf / zipf.sum())
    words = np.where(rng.random((sentences, length)) < 0.25, filler, topical)
    return words.reshape(-1).astype(np.int32), vocab, topic_of


def skipgram_pairs(corpus: np.ndarray, window: int) -> tuple:
    """All (word, context) pairs at distance 1..window."""
    xs, ys = [], []
    for d in range(1, window + 1):
        xs += [corpus[:-d], corpus[d:]]
        ys += [corpus[d:], corpus[:-d]]
    return np.concatenate(xs), np.concatenate(ys).astype(np.int64)


def main(steps: int = 3000, batch_size: int = 128, dim: int = 128, num_sampled: int = 16,
         lr: float = 8.0, seed: int = 0, verbose: bool = True) -> dict:
    rng = np.random.default_rng(seed)
    corpus, vocab, topic_of = make_corpus(rng)
    xs, ys = skipgram_pairs(corpus, window=2)
    v = len(vocab)
    graph = tf.Graph()
    with graph.as_default():
        tf.set_random_seed(seed)
        train_inputs = tf.placeholder(tf.int32, shape=[batch_size])
        train_labels = tf.placeholder(tf.int64, shape=[batch_size, 1])
        embeddings = tf.Variable(tf.random_uniform([v, dim], -1.0, 1.0), name="embeddings")
        embed = tf.nn.embedding_lookup(embeddings, train_inputs)
        nce_weights = tf.Variable(tf.truncated_normal([v, dim], stddev=1.0 / np.sqrt(dim)),
                                  name="nce_weights")
        nce_biases = tf.Variable(tf.zeros([v]), name="nce_biases")
        loss = tf.reduce_mean(tf.nn.nce_loss(weights=nce_weights, biases=nce_biases,
                                             labels=train_labels, inputs=embed,
                                             num_sampled=num_sampled, num_classes=v))
        optimizer = tf.train.GradientDescentOptimizer(lr).minimize(loss)
        norm = tf.sqrt(tf.reduce_sum(tf.square(embeddings), 1, keepdims=True))
        normalized = embeddings / norm
        probe = tf.placeholder(tf.int32, [None])
        similarity = tf.matmul(tf.nn.embedding_lookup(normalized, probe), normalized,
                               transpose_b=True)
        init = tf.global_variables_initializer()

    report_every = max(steps // 6, 1)
    averages = []
    with tf.Session(graph=graph) as sess:
        sess.run(init)
        order = rng.permutation(len(xs))
        pos, running = 0, 0.0
        for step in tqdm(range(1, steps + 1), desc="steps", disable=not verbose,
                         mininterval=1.0):
            if pos + batch_size > len(order):
                order, pos = rng.permutation(len(xs)), 0
            idx = order[pos:pos + batch_size]
            pos += batch_size
            _, lv = sess.run([optimizer, loss], {train_inputs: xs[idx],
                                                 train_labels: ys[idx, None]})
            running += float(lv)
            if step % report_every == 0:
                averages.append(running / report_every)
                running = 0.0
                if verbose:
                    say(f"step {step:5d}  average loss {averages[-1]:.3f}")
        probes = np.array([0, 100 + 60 * 3 + 5, 100 + 60 * 6 + 9], np.int32)
        sim = sess.run(similarity, {probe: probes})
    same_topic = []
    for p, row in zip(probes, sim):
        nearest = [i for i in np.argsort(-row) if i != p][:8]
        same_topic.append(float(np.mean(topic_of[nearest] == topic_of[p])))
        if verbose:
            print(f"nearest to {vocab[p]}: {', '.join(vocab[i] for i in nearest)}")
    if verbose:
        print(f"final: average loss {averages[0]:.3f} -> {averages[-1]:.3f}; the topic words' "
              f"neighbours share their topic {100 * np.mean(same_topic[1:]):.0f}% of the time")
    return {"averages": averages, "same_topic": same_topic}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    main(steps=args.steps, seed=args.seed)
