"""jitflow.dask: predict, gradients and fit over Dask arrays, on Dask's local threads and on a
two-process distributed.LocalCluster, against one-process Session.run on the same rows."""
from __future__ import annotations

import os
import signal

import numpy as np
import pytest

import jitflow as tf

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")
jfd = pytest.importorskip("jitflow.dask")

# one pytest-xdist worker runs them all: they share one cluster (started once per module)
pytestmark = [pytest.mark.xdist_group("dask"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::ResourceWarning")]


@pytest.fixture(scope="module")
def client():
    """Two worker processes of one thread each; not the default client: tests that use it
    make it current (`on_cluster`), the others run on Dask's local threads."""
    cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                       dashboard_address=":0", worker_dashboard_address=None)
    c = distributed.Client(cluster, set_as_default=False)
    try:
        yield c
    finally:
        c.close()
        cluster.close()


@pytest.fixture
def on_cluster(client):
    with client.as_current():
        assert jfd.current_client() is client
        yield client


def _mlp(dtype=tf.float32, seed=0, n_in=6, hidden=12, n_out=3):
    rng = np.random.default_rng(seed)
    npd = dtype.as_numpy_dtype
    x = tf.placeholder(dtype, [None, n_in], name="x")
    y = tf.placeholder(dtype, [None, n_out], name="y")
    w1 = tf.Variable((rng.standard_normal((n_in, hidden)) * 0.5).astype(npd), name="w1")
    b1 = tf.Variable((rng.standard_normal(hidden) * 0.1).astype(npd), name="b1")
    w2 = tf.Variable((rng.standard_normal((hidden, n_out)) * 0.5).astype(npd), name="w2")
    b2 = tf.Variable(np.zeros(n_out, npd), name="b2")
    logits = tf.matmul(tf.tanh(tf.matmul(x, w1) + b1), w2) + b2
    return x, y, [w1, b1, w2, b2], logits


def _rows(n, cols, seed, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal((n, cols)).astype(dtype)


def _worker_pids(client):
    return set(client.run(os.getpid).values())


# -- predict ------------------------------------------------------------------------------------
def test_predict_equals_session_run_on_the_concatenated_data(on_cluster, backend):
    x, _, _, logits = _mlp()
    probs = tf.nn.softmax(logits)
    label = tf.argmax(logits, axis=1)
    xs = _rows(301, 6, seed=1)
    data = da.from_array(xs, chunks=100)          # 100, 100, 100 and a chunk of one row
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        want_p, want_l = sess.run([probs, label], {x: xs})
        got = jfd.predict(sess, probs, x, data)
        both = jfd.predict(sess, [probs, label], x, data)
    assert isinstance(got, da.Array) and got.chunks == ((100, 100, 100, 1), (3,))
    assert got.dtype == np.float32 and got.shape == (301, 3)
    np.testing.assert_allclose(got.compute(), want_p, rtol=1e-5, atol=1e-6)
    assert isinstance(both, tuple) and len(both) == 2
    assert both[1].dtype == want_l.dtype and both[1].chunks == ((100, 100, 100, 1),)
    p, lab = dask.compute(*both)
    np.testing.assert_allclose(p, want_p, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(lab, want_l)


def _stats(client) -> dict:
    return client.run(lambda: dict(__import__("jitflow.dask").dask.STATS))


def test_predict_compiles_once_per_worker_and_reuses_it(on_cluster):
    x, _, vs, logits = _mlp(seed=3)
    xs = _rows(400, 6, seed=4)
    data = da.from_array(xs, chunks=50)           # eight chunks of one shape class
    start = _stats(on_cluster)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        first = jfd.predict(sess, logits, x, data).compute()
        again = jfd.predict(sess, logits, x, data).compute()
        vs[3].load(np.full(3, 2.0, np.float32), sess)     # new state: loaded, not compiled
        moved = jfd.predict(sess, logits, x, data).compute()
    end = _stats(on_cluster)
    delta = {w: {k: end[w][k] - start[w][k] for k in end[w]} for w in end}
    # 24 chunks: each worker compiled the module at most once and loaded each state at most
    # once; every other chunk was served from the worker's cache
    assert all(d["modules"] <= 1 and d["loads"] <= 2 for d in delta.values())
    assert sum(d["loads"] + d["hits"] for d in delta.values()) == 24
    assert sum(d["hits"] for d in delta.values()) >= 20
    # the nanny's MALLOC_TRIM_THRESHOLD_ would make every chunk page-fault its arrays again
    tuned = on_cluster.run(lambda: __import__("jitflow.dask").dask._TUNED)
    env = on_cluster.run(lambda: os.environ.get("MALLOC_TRIM_THRESHOLD_"))
    for w in tuned:
        assert tuned[w] == [env[w] == "65536" and os.uname().sysname == "Linux"]
    np.testing.assert_array_equal(first, again)
    np.testing.assert_allclose(moved, again + 2.0, rtol=1e-5, atol=1e-5)


def test_predict_reads_the_variables_when_called():
    x = tf.placeholder(tf.float64, [None, 2], name="x")
    w = tf.Variable(np.array([[1.0], [2.0]]), name="w")
    y = tf.matmul(x, w)
    xs = np.arange(10.0).reshape(5, 2)
    assert jfd.current_client() is None             # Dask's local threads run it
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        old = jfd.predict(sess, y, x, da.from_array(xs, chunks=2))
        w.load(np.array([[0.0], [-1.0]]), sess)
        new = jfd.predict(sess, y, x, da.from_array(xs, chunks=2))
    # by hand: rows (0,1), (2,3), ... times (1, 2) and then (0, -1)
    np.testing.assert_array_equal(old.compute().ravel(), [2.0, 8.0, 14.0, 20.0, 26.0])
    np.testing.assert_array_equal(new.compute().ravel(), [-1.0, -3.0, -5.0, -7.0, -9.0])


def test_a_signature_is_exported_once_per_session(monkeypatch):
    import jitflow.export as export_module
    calls = []
    real = export_module.export_files

    def counting(*args, **kwargs):
        calls.append(kwargs.get("feed_values")[0].shape)
        return real(*args, **kwargs)

    monkeypatch.setattr(export_module, "export_files", counting)
    x = tf.placeholder(tf.float32, [None, 2], name="x")
    w = tf.Variable(np.ones((2, 2), np.float32), name="w")
    y = tf.matmul(x, w)
    xs = np.arange(10, dtype=np.float32).reshape(5, 2)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        results = []
        for k in range(3):
            w.load(np.eye(2, dtype=np.float32) * k, sess)
            results.append(jfd.predict(sess, y, x, da.from_array(xs, chunks=2)).compute())
    assert sorted(calls) == [(1, 2), (2, 2)]   # a chunk of one row, and rows > 1: once each
    for k, r in enumerate(results):
        np.testing.assert_array_equal(r, xs * k)


def test_predict_feed_dict_ranks_dtypes_and_unknown_dims():
    x = tf.placeholder(tf.float32, [None], name="x")        # rank 1 in, rank 2 out
    scale = tf.placeholder(tf.float32, [], name="scale")
    pair = tf.stack([x * scale, x + scale], axis=1)
    z = tf.placeholder(tf.float32, [None, None], name="z")  # an unknown dim past the rows
    th = tf.tanh(z)
    xs = np.linspace(-1, 1, 7)                               # float64 data, float32 feed
    zs = _rows(9, 5, seed=2)
    with tf.Session() as sess:
        got = jfd.predict(sess, pair, x, da.from_array(xs, chunks=3), feed_dict={scale: 3.0})
        want = sess.run(pair, {x: xs, scale: 3.0})
        zt = jfd.predict(sess, th, z, da.from_array(zs, chunks=(4, 5)))
        total = jfd.predict(sess, x * 2.0, x, da.from_array(xs, chunks=3)).sum()
    assert got.shape == (7, 2) and got.dtype == np.float32 and got.chunks == ((3, 3, 1), (2,))
    np.testing.assert_allclose(got.compute(), want, rtol=1e-6)
    np.testing.assert_allclose(got.compute()[:, 0], (xs * 3.0).astype(np.float32), rtol=1e-6)
    assert zt.chunks == ((4, 4, 1), (5,))
    np.testing.assert_allclose(zt.compute(), np.tanh(zs), rtol=1e-5, atol=1e-6)
    assert float(total.compute()) == pytest.approx(2.0 * xs.sum(), abs=1e-5)


def test_chunks_run_in_pieces_of_rows_without_one_row_pieces(monkeypatch):
    assert jfd._pieces(10, None) == [(0, 10)] and jfd._pieces(10, 16) == [(0, 10)]
    assert jfd._pieces(10, 4) == [(0, 4), (4, 3), (7, 3)]
    assert jfd._pieces(5, 2) == [(0, 3), (3, 2)]            # not 2 + 2 + 1
    assert jfd._pieces(1, 1) == [(0, 1)]
    # the widest per-row tensor of a 6-12-3 MLP is 12 float32: 48 bytes a row
    x, y, vs, logits = _mlp(seed=19)
    assert jfd._rows_per_call([logits], [x]) == jfd._CALL_BYTES // 48
    monkeypatch.setattr(jfd, "_rows_per_call", lambda fetches, feeds: 7)
    loss = tf.reduce_mean(tf.square(logits - y))
    xs, ys = _rows(61, 6, seed=20), _rows(61, 3, seed=21)
    feeds = {x: da.from_array(xs, chunks=30), y: da.from_array(ys, chunks=30)}
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        want = sess.run([logits, tf.gradients(loss, vs)], {x: xs, y: ys})
        got = jfd.predict(sess, logits, x, feeds[x]).compute()
        grads = jfd.gradients(sess, loss, vs, feeds)
    np.testing.assert_allclose(got, want[0], rtol=1e-5, atol=1e-6)
    for g, w in zip(grads, want[1]):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_predict_refuses_reductions_operations_updates_and_bad_data():
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    w = tf.Variable(np.ones((3, 1), np.float32), name="w")
    y = tf.matmul(x, w)
    data = da.from_array(_rows(8, 3, seed=0), chunks=4)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        with pytest.raises(ValueError, match=r"fetch Mean.*batch dim"):
            jfd.predict(sess, tf.reduce_mean(y), x, data)
        with pytest.raises(ValueError, match=r"fetch Sum.*shape '\(1,\)'"):
            jfd.predict(sess, tf.reduce_sum(y, axis=0), x, data)
        with pytest.raises(TypeError, match="is an Operation"):
            jfd.predict(sess, w.initializer, x, data)
        with pytest.raises(ValueError, match="update variables"):
            jfd.predict(sess, y + tf.reduce_sum(tf.assign_add(w, w)), x, data)
        with pytest.raises(ValueError, match=r"shape \(8, 4\) for Tensor 'x:0', which has "
                                             r"shape '\(\?, 3\)'"):
            jfd.predict(sess, y, x, da.zeros((8, 4), chunks=4))
        with pytest.raises(ValueError, match="unknown chunk sizes"):
            masked = da.from_array(_rows(8, 3, seed=0), chunks=4)
            jfd.predict(sess, y, x, masked[masked[:, 0] > 0])


def test_predict_fetch_whose_rows_are_not_the_chunks_fails_clearly():
    x = tf.placeholder(tf.float32, [None, 2], name="x")
    top = tf.reshape(x, [-1])                    # [None] statically, 2 * rows at run time
    with tf.Session() as sess:
        out = jfd.predict(sess, top, x, da.ones((6, 2), chunks=3, dtype=np.float32))
    with pytest.raises(ValueError, match=r"fetch Reshape:0 has shape \(6,\) for a chunk of 3"):
        out.compute()


def test_worker_killed_during_predict_is_recovered(on_cluster, tmp_path):
    x, _, _, logits = _mlp(seed=5)
    xs = _rows(240, 6, seed=6)
    marker = str(tmp_path / "killed")

    def kill_once(block):
        # the first task to get here kills its worker process; Dask reruns it elsewhere
        if block.size == 0 or os.getpid() not in pids:     # never the test's own process
            return block
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return block
        os.close(fd)
        os.kill(os.getpid(), signal.SIGKILL)
        return block   # not reached

    pids = _worker_pids(on_cluster)
    data = da.from_array(xs, chunks=40).map_blocks(kill_once, dtype=xs.dtype,
                                                   meta=np.empty((0, 0), xs.dtype))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        want = sess.run(logits, {x: xs})
        got = jfd.predict(sess, logits, x, data).compute()
    assert os.path.exists(marker)
    on_cluster.wait_for_workers(2, timeout=60)
    assert _worker_pids(on_cluster) != pids          # a worker process was replaced
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# -- gradients ------------------------------------------------------------------------------------
def _one_process_gradients(sess, loss, var_list, feed):
    return sess.run(tf.gradients(loss, var_list), feed)


def test_gradients_of_a_mean_loss_equal_the_one_process_gradients(on_cluster, backend):
    x, y, vs, logits = _mlp(seed=7)
    penalty = 1e-2 * tf.add_n([tf.reduce_sum(tf.square(v)) for v in vs[::2]])
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits_v2(labels=y,
                                                                      logits=logits)) + penalty
    xs = _rows(333, 6, seed=8)
    ys = np.eye(3, dtype=np.float32)[np.random.default_rng(9).integers(0, 3, 333)]
    feeds = {x: da.from_array(xs, chunks=111), y: da.from_array(ys, chunks=50)}  # rechunked
    unused = tf.Variable(1.0, name="unused")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        want = _one_process_gradients(sess, loss, vs, {x: xs, y: ys})
        got = jfd.gradients(sess, loss, vs + [unused], feeds)
    assert got[-1] is None
    for g, w, v in zip(got, want, vs):
        assert g.dtype == np.float32 and g.shape == tuple(v.shape.as_list())
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-6)


def test_gradients_of_a_sum_loss_and_of_uneven_chunks():
    x = tf.placeholder(tf.float64, [None, 2], name="x")
    y = tf.placeholder(tf.float64, [None], name="y")
    w = tf.Variable(np.array([0.5, -1.0]), name="w")
    b = tf.Variable(np.float64(0.25), name="b")
    err = tf.reduce_sum(x * w, axis=1) + b - y
    sum_loss = tf.reduce_sum(tf.square(err))
    mean_loss = tf.reduce_mean(tf.square(err))
    xs = _rows(23, 2, seed=10, dtype=np.float64)
    ys = np.random.default_rng(11).standard_normal(23)
    feeds = {x: da.from_array(xs, chunks=(7, 2)), y: da.from_array(ys, chunks=7)}  # 7,7,7,2
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got_sum = jfd.gradients(sess, sum_loss, [w, b], feeds, loss_reduction="sum")
        got_mean = jfd.gradients(sess, mean_loss, [w, b], feeds)
        wrong = jfd.gradients(sess, sum_loss, [w, b], feeds)   # a sum taken for a mean
    r = xs @ np.array([0.5, -1.0]) + 0.25 - ys               # by hand
    np.testing.assert_allclose(got_sum[0], 2 * xs.T @ r, rtol=1e-12)
    np.testing.assert_allclose(got_sum[1], 2 * r.sum(), rtol=1e-12)
    np.testing.assert_allclose(got_mean[0], 2 * xs.T @ r / 23, rtol=1e-12)
    np.testing.assert_allclose(got_mean[1], 2 * r.sum() / 23, rtol=1e-12)
    assert not np.allclose(wrong[0], got_sum[0])


def test_gradients_check_their_arguments():
    x = tf.placeholder(tf.float32, [None, 2], name="x")
    w = tf.Variable(np.ones(2, np.float32), name="w")
    per_row = tf.reduce_sum(x * w, axis=1)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        data = da.ones((4, 2), chunks=2, dtype=np.float32)
        with pytest.raises(ValueError, match=r"loss Sum:0 has shape '\(\?,\)'.*scalar"):
            jfd.gradients(sess, per_row, [w], {x: data})
        with pytest.raises(ValueError, match="loss_reduction must be 'mean' or 'sum'"):
            jfd.gradients(sess, tf.reduce_sum(per_row), [w], {x: data}, loss_reduction="max")
        with pytest.raises(TypeError, match="feeds must be a dict"):
            jfd.gradients(sess, tf.reduce_sum(per_row), [w], [data])


# -- fit -------------------------------------------------------------------------------------------
def _train_one_process(sess, train, loss, feeds: dict, batch_size: int, epochs: int) -> list:
    rows = len(next(iter(feeds.values())))
    losses = []
    for _ in range(epochs):
        for s in range(0, rows, batch_size):
            _, l = sess.run([train, loss], {t: v[s:s + batch_size] for t, v in feeds.items()})
            losses.append(l)
    return losses


def test_fit_linear_regression_follows_the_one_process_trajectory(on_cluster):
    x = tf.placeholder(tf.float32, [None], name="x")
    y = tf.placeholder(tf.float32, [None], name="y")
    w = tf.Variable(0.5, name="w")
    b = tf.Variable(0.1, name="b")
    loss = tf.reduce_mean(tf.square(w * x + b - y))
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    rng = np.random.default_rng(12)
    xs = rng.uniform(-1, 1, 101).astype(np.float32)
    ys = (3 * xs + 2 + rng.normal(0, 0.1, 101)).astype(np.float32)
    dx, dy = da.from_array(xs, chunks=60), da.from_array(ys, chunks=60)
    with tf.Session() as ref, tf.Session() as sess:
        ref.run(tf.global_variables_initializer())
        sess.run(tf.global_variables_initializer())
        want = _train_one_process(ref, train, loss, {x: xs, y: ys}, 25, 2)   # 25*4 + 1 rows
        got = jfd.fit(sess, train, loss, {x: dx, y: dy}, batch_size=25, epochs=2,
                      progress=False)
        assert got.dtype == np.float32 and len(got) == 10
        np.testing.assert_allclose(got, want, rtol=1e-5)
        np.testing.assert_allclose(sess.run([w, b]), ref.run([w, b]), rtol=1e-5)
        assert got[-1] < got[0] / 4


def test_fit_mlp_with_momentum_follows_the_one_process_trajectory(on_cluster, capsys):
    x, y, vs, logits = _mlp(seed=13)
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits_v2(labels=y, logits=logits))
    opt = tf.train.MomentumOptimizer(0.2, 0.9)
    step = tf.train.get_or_create_global_step()
    train = opt.minimize(loss, global_step=step)
    xs = _rows(128, 6, seed=14)
    ys = np.eye(3, dtype=np.float32)[(xs[:, 0] > 0).astype(int) + (xs[:, 1] > 1)]
    # the driver's sessions on the reference interpreter: the workers' compiled gradients
    # against the oracle (the Adam test below runs the driver on both backends)
    with tf.Session(backend="interpreter") as ref, tf.Session(backend="interpreter") as sess:
        ref.run(tf.global_variables_initializer())
        sess.run(tf.global_variables_initializer())
        want = _train_one_process(ref, train, loss, {x: xs, y: ys}, 32, 2)
        got = jfd.fit(sess, train, loss, {x: da.from_array(xs, chunks=40),
                                          y: da.from_array(ys, chunks=40)},
                      batch_size=32, epochs=2)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
        for v in vs:
            np.testing.assert_allclose(sess.run(v), ref.run(v), rtol=1e-4, atol=1e-6)
            np.testing.assert_allclose(sess.run(opt.get_slot(v, "momentum")),
                                       ref.run(opt.get_slot(v, "momentum")), rtol=1e-4,
                                       atol=1e-6)
        assert sess.run(step) == ref.run(step) == 8
    assert "jitflow.dask.fit" in capsys.readouterr().err      # the tqdm bar


def test_fit_with_an_adam_optimizer_object_updates_its_slots(backend):
    # float64: Adam divides by sqrt(v), so float32 rounding would blur the comparison
    x, y, vs, logits = _mlp(dtype=tf.float64, seed=15)
    loss = tf.reduce_mean(tf.square(logits - y))
    ref_opt = tf.train.AdamOptimizer(0.05)
    ref_train = ref_opt.minimize(loss)
    opt = tf.train.AdamOptimizer(0.05)
    xs = _rows(64, 6, seed=16, dtype=np.float64)
    ys = _rows(64, 3, seed=17, dtype=np.float64)
    feeds = {x: da.from_array(xs, chunks=16), y: da.from_array(ys, chunks=16)}
    with tf.Session() as ref, tf.Session() as sess:
        ref.run(tf.global_variables_initializer())
        sess.run(tf.global_variables_initializer())
        want = _train_one_process(ref, ref_train, loss, {x: xs, y: ys}, 20, 3)
        first = jfd.fit(sess, opt, loss, feeds, batch_size=20, epochs=1, progress=False)
        rest = jfd.fit(sess, opt, loss, feeds, batch_size=20, epochs=2, progress=False,
                       n_shards=3)                      # the same slots carry on
        np.testing.assert_allclose(np.concatenate([first, rest]), want, rtol=1e-9)
        for v in vs:
            for name in ("m", "v"):
                np.testing.assert_allclose(sess.run(opt.get_slot(v, name)),
                                           ref.run(ref_opt.get_slot(v, name)), rtol=1e-9,
                                           atol=1e-15)
        # beta^(t+1) after t = 12 steps, float32 accumulators as TF1 keeps them
        b1, b2 = opt._get_beta_accumulators()
        assert b1.dtype == b2.dtype == tf.float32
        assert sess.run(b1) == np.float32(0.9) ** 13
        assert sess.run(b2) == np.float32(0.999) ** 13


def test_fit_with_a_sum_loss_and_grouped_train_ops():
    x = tf.placeholder(tf.float64, [None, 2], name="x")
    w = tf.Variable(np.array([1.0, -1.0]), name="w")
    counter = tf.Variable(0, name="counter", trainable=False)
    loss = tf.reduce_sum(tf.square(tf.reduce_sum(x * w, axis=1) - 1.0))
    train = tf.group(tf.train.GradientDescentOptimizer(0.01).minimize(loss),
                     tf.assign_add(counter, 1))
    xs = _rows(9, 2, seed=18, dtype=np.float64)
    with tf.Session() as ref, tf.Session() as sess:
        ref.run(tf.global_variables_initializer())
        sess.run(tf.global_variables_initializer())
        want = _train_one_process(ref, train, loss, {x: xs}, 4, 1)
        got = jfd.fit(sess, train, loss, {x: da.from_array(xs, chunks=3)}, batch_size=4,
                      loss_reduction="sum", progress=False)
        np.testing.assert_allclose(got, want, rtol=1e-12)
        np.testing.assert_allclose(sess.run(w), ref.run(w), rtol=1e-12)
        assert sess.run(counter) == 3


def test_fit_refuses_what_it_cannot_combine():
    x = tf.placeholder(tf.float32, [None, 2], name="x")
    w = tf.Variable(np.ones(2, np.float32), name="w")
    loss = tf.reduce_mean(tf.reduce_sum(x * w, axis=1))
    plain = tf.assign_sub(w, [0.1, 0.1])
    data = {x: da.ones((4, 2), chunks=2, dtype=np.float32)}
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        with pytest.raises(TypeError, match="applies no gradients made by an optimizer"):
            jfd.fit(sess, plain, loss, data, batch_size=2)
        train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
        with pytest.raises(ValueError, match="batch_size must be a positive integer"):
            jfd.fit(sess, train, loss, data, batch_size=0)
        with pytest.raises(ValueError, match="var_list goes with an optimizer"):
            jfd.fit(sess, train, loss, data, batch_size=2, var_list=[w])
        # an update that reads the batch outside the gradients cannot be combined
        with tf.control_dependencies([tf.assign(w, tf.reduce_mean(x, axis=0))]):
            reads_batch = tf.group(train)
        with pytest.raises(tf.errors.InvalidArgumentError, match="still needs data"):
            jfd.fit(sess, reads_batch, loss, data, batch_size=2, progress=False)


def test_feed_dict_values_go_to_every_shard_and_to_the_update():
    x = tf.placeholder(tf.float64, [None, 2], name="x")
    lr = tf.placeholder(tf.float64, [], name="lr")            # read by the update only
    scale = tf.placeholder(tf.float64, [], name="scale")      # read by the gradients
    w = tf.Variable(np.array([1.0, -1.0]), name="w")
    loss = scale * tf.reduce_mean(tf.square(tf.reduce_sum(x * w, axis=1) - 1.0))
    train = tf.train.GradientDescentOptimizer(lr).minimize(loss)
    xs = _rows(9, 2, seed=22, dtype=np.float64)
    feed = {lr: 0.1, scale: 2.0}
    with tf.Session(backend="interpreter") as ref, tf.Session() as sess:
        ref.run(tf.global_variables_initializer())
        sess.run(tf.global_variables_initializer())
        r = xs @ np.array([1.0, -1.0]) - 1.0                   # by hand, at the start
        grad = jfd.gradients(sess, loss, [w], {x: da.from_array(xs, chunks=4)},
                             feed_dict={scale: 2.0})
        np.testing.assert_allclose(grad[0], 2.0 * 2 * xs.T @ r / 9, rtol=1e-12)
        want = [ref.run([train, loss], {x: xs[s:s + 4], **feed})[1] for s in range(0, 9, 4)]
        got = jfd.fit(sess, train, loss, {x: da.from_array(xs, chunks=3)}, batch_size=4,
                      feed_dict=feed, progress=False)
        np.testing.assert_allclose(got, want, rtol=1e-12)
        np.testing.assert_allclose(sess.run(w), ref.run(w), rtol=1e-12)
