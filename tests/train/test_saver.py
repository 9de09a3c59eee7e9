"""tf.train.Saver: save/restore by name, state file, pruning, errors and crash safety."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

import jitflow as tf
from jitflow.train import saver as saver_mod

W = np.arange(6, dtype=np.float32).reshape(2, 3)
B = np.array([0.5, -1.5], np.float64)


def _build(w_value=W, b_value=B, graph=None):
    w = tf.Variable(w_value, name="layer/w")
    b = tf.Variable(b_value, name="b")
    return w, b


def _files(d) -> set:
    return set(os.listdir(d))


def test_save_returns_prefix_and_writes_tf1_file_names(tmp_path, backend):
    w, b = _build()
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        prefix = saver.save(sess, str(tmp_path / "model.ckpt"), write_meta_graph=False)
    assert prefix == str(tmp_path / "model.ckpt")
    assert {"model.ckpt.index", "model.ckpt.data-00000-of-00001", "checkpoint"} == \
        _files(tmp_path)
    text = (tmp_path / "checkpoint").read_text()
    assert f'model_checkpoint_path: "{prefix}"' in text  # absolute save path: kept absolute
    assert "all_model_checkpoint_paths:" in text


def test_restore_into_fresh_session(tmp_path, backend):
    w, b = _build()
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(tf.assign(w, W * 2))
        path = saver.save(sess, str(tmp_path / "m"))
    with tf.Session() as sess:
        saver.restore(sess, path)  # no initializer run: restore initializes
        got_w, got_b = sess.run([w, b])
    np.testing.assert_array_equal(got_w, W * 2)
    np.testing.assert_array_equal(got_b, B)
    assert got_w.dtype == np.float32 and got_b.dtype == np.float64


def test_restore_into_fresh_graph_by_name(tmp_path, backend):
    with tf.Graph().as_default() as g1:
        w, b = _build()
        saver = tf.train.Saver()
        with tf.Session(graph=g1) as sess:
            sess.run(tf.global_variables_initializer())
            path = saver.save(sess, str(tmp_path / "m"), global_step=7)
    with tf.Graph().as_default() as g2:
        # different initial values and creation order: only the names matter
        b2 = tf.Variable(np.zeros(2), name="b")
        w2 = tf.Variable(np.zeros((2, 3), np.float32), name="layer/w")
        with tf.Session(graph=g2) as sess:
            tf.train.Saver().restore(sess, path)
            np.testing.assert_array_equal(sess.run(w2), W)
            np.testing.assert_array_equal(sess.run(b2), B)


def test_scalar_and_integer_variables_round_trip(tmp_path, backend):
    s = tf.Variable(1.5, name="s")
    n = tf.Variable(np.int64(7), name="n")
    flag = tf.Variable(True, name="flag")
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        path = saver.save(sess, str(tmp_path / "m"))
    assert dict(tf.train.list_variables(path)) == {"s": [], "n": [], "flag": []}
    with tf.Session() as sess:
        saver.restore(sess, path)
        got = sess.run([s, n, flag])
    assert got == [1.5, 7, True]
    assert [type(v) for v in got] == [np.float32, np.int64, np.bool_]


def test_global_step_suffix_int_and_tensor(tmp_path, backend):
    w, b = _build()
    gs = tf.train.get_or_create_global_step()
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert saver.save(sess, str(tmp_path / "m"), global_step=3) == str(tmp_path / "m-3")
        gs.load(42, sess)
        assert saver.save(sess, str(tmp_path / "m"), global_step=gs) == str(tmp_path / "m-42")
    assert tf.train.latest_checkpoint(str(tmp_path)) == str(tmp_path / "m-42")
    padded = tf.train.Saver(pad_step_number=True)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert padded.save(sess, str(tmp_path / "p"), global_step=5) == \
            str(tmp_path / "p-00000005")


def test_max_to_keep_prunes_old_files(tmp_path, backend):
    w, b = _build()
    saver = tf.train.Saver(max_to_keep=2)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        paths = [saver.save(sess, str(tmp_path / "m"), global_step=i) for i in range(4)]
    assert saver.last_checkpoints == paths[2:]
    for p in paths[:2]:
        assert not tf.train.checkpoint_exists(p)
        assert not os.path.exists(p + ".data-00000-of-00001")
        assert not os.path.exists(p + ".meta")
    for p in paths[2:]:
        assert tf.train.checkpoint_exists(p)
    state = tf.train.get_checkpoint_state(str(tmp_path))
    assert state.model_checkpoint_path == paths[-1]
    assert state.all_model_checkpoint_paths == paths[2:]


def test_max_to_keep_zero_keeps_everything(tmp_path):
    w, b = _build()
    saver = tf.train.Saver(max_to_keep=0)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        paths = [saver.save(sess, str(tmp_path / "m"), global_step=i,
                            write_meta_graph=False) for i in range(3)]
    assert all(tf.train.checkpoint_exists(p) for p in paths)


def test_latest_checkpoint_and_state(tmp_path):
    assert tf.train.latest_checkpoint(str(tmp_path)) is None
    assert tf.train.get_checkpoint_state(str(tmp_path)) is None
    w, b = _build()
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        saver.save(sess, str(tmp_path / "a"), global_step=1)
        p2 = saver.save(sess, str(tmp_path / "a"), global_step=2)
    assert tf.train.latest_checkpoint(str(tmp_path)) == p2
    assert tf.train.get_checkpoint_state(str(tmp_path)).all_model_checkpoint_paths == [
        str(tmp_path / "a-1"), p2]


def test_save_relative_paths(tmp_path):
    w, b = _build()
    saver = tf.train.Saver(save_relative_paths=True)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        saver.save(sess, str(tmp_path / "r"), write_meta_graph=False)
    assert 'model_checkpoint_path: "r"' in (tmp_path / "checkpoint").read_text()
    # relative paths let the directory move
    moved = tmp_path.parent / (tmp_path.name + "_moved")
    os.rename(tmp_path, moved)
    assert tf.train.latest_checkpoint(str(moved)) == str(moved / "r")


def test_missing_checkpoint(tmp_path):
    # TF1: the Saver says ValueError, the reader (a C++ op in TF) NotFoundError
    w, b = _build()
    saver = tf.train.Saver()
    with tf.Session() as sess:
        with pytest.raises(ValueError, match="not a valid checkpoint: .*nothere") as info:
            saver.restore(sess, str(tmp_path / "nothere"))
        assert type(info.value) is ValueError
        with pytest.raises(ValueError):
            saver.restore(sess, None)
    with pytest.raises(tf.errors.NotFoundError, match="nothere") as info:
        tf.train.NewCheckpointReader(str(tmp_path / "nothere"))
    assert not isinstance(info.value, ValueError)


def test_missing_variable_raises_not_found(tmp_path):
    with tf.Graph().as_default() as g1:
        tf.Variable(W, name="layer/w")
        with tf.Session(graph=g1) as sess:
            sess.run(tf.global_variables_initializer())
            path = tf.train.Saver().save(sess, str(tmp_path / "m"))
    w, b = _build()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(tf.assign(w, W + 1))
        with pytest.raises(tf.errors.NotFoundError, match="Key b not found"):
            tf.train.Saver().restore(sess, path)
        # nothing was written: the restore checks every variable first
        np.testing.assert_array_equal(sess.run(w), W + 1)


def test_shape_mismatch_raises_invalid_argument_naming_both(tmp_path):
    with tf.Graph().as_default() as g1:
        tf.Variable(W, name="layer/w")
        with tf.Session(graph=g1) as sess:
            sess.run(tf.global_variables_initializer())
            path = tf.train.Saver().save(sess, str(tmp_path / "m"))
    w = tf.Variable(np.zeros((3, 2), np.float32), name="layer/w")
    with tf.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError) as info:
            tf.train.Saver().restore(sess, path)
    msg = str(info.value)
    assert "[3, 2]" in msg and "[2, 3]" in msg and "layer/w" in msg
    assert w is not None


def test_dict_var_list_maps_names(tmp_path, backend):
    w, b = _build()
    saver = tf.train.Saver({"weights": w, "bias": b})
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        path = saver.save(sess, str(tmp_path / "m"))
    assert sorted(n for n, _ in tf.train.list_variables(path)) == ["bias", "weights"]
    np.testing.assert_array_equal(tf.train.load_variable(path, "weights"), W)
    with tf.Graph().as_default() as g2:
        other = tf.Variable(np.zeros((2, 3), np.float32), name="renamed")
        with tf.Session(graph=g2) as sess:
            tf.train.Saver({"weights": other}).restore(sess, path)
            np.testing.assert_array_equal(sess.run(other), W)


def test_list_var_list_saves_only_those(tmp_path):
    w, b = _build()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        path = tf.train.Saver([b]).save(sess, str(tmp_path / "m"))
    assert [n for n, _ in tf.train.list_variables(path)] == ["b"]


def test_duplicate_names_and_empty_var_list():
    w, b = _build()
    with pytest.raises(ValueError, match="same name"):
        tf.train.Saver([w, w])
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="No variables to save"):
            tf.train.Saver()


def test_uninitialized_variable_cannot_be_saved(tmp_path):
    w, b = _build()
    with tf.Session() as sess:
        with pytest.raises(tf.errors.FailedPreconditionError, match="layer/w"):
            tf.train.Saver().save(sess, str(tmp_path / "m"))


def test_missing_parent_directory(tmp_path, monkeypatch):
    # as TF 2.21: the checkpoint's own folder is created, a missing folder above it is an error
    w, b = _build()
    monkeypatch.chdir(tmp_path)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        saver = tf.train.Saver()
        assert saver.save(sess, "./model/dnn.ckpt") == "./model/dnn.ckpt"
        assert sorted(os.listdir("model")) == ["checkpoint", "dnn.ckpt.data-00000-of-00001",
                                               "dnn.ckpt.index", "dnn.ckpt.meta"]
        sess.run(tf.assign(w, W + 5))
        saver.restore(sess, "./model/dnn.ckpt")
        np.testing.assert_array_equal(sess.run(w), W)
        with pytest.raises(ValueError, match="Parent directory of .*m doesn't exist") as info:
            saver.save(sess, str(tmp_path / "no" / "more" / "m"))
        assert type(info.value) is ValueError
        assert not os.path.exists(tmp_path / "no")


def test_files_are_tensorflow_v2_bundles(tmp_path):
    from jitflow.serialize import protos
    from jitflow.serialize.table import read_table
    w, b = _build()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        path = tf.train.Saver().save(sess, str(tmp_path / "m"))
    entries = dict(read_table((tmp_path / "m.index").read_bytes()))
    header = protos.BundleHeaderProto.FromString(entries.pop(b""))
    assert header.num_shards == 1 and header.version.producer == 1
    assert sorted(entries) == [b"b", b"layer/w"]
    w_entry = protos.BundleEntryProto.FromString(entries[b"layer/w"])
    assert w_entry.dtype == 1 and [d.size for d in w_entry.shape.dim] == [2, 3]
    data = open(path + ".data-00000-of-00001", "rb").read()
    assert data[w_entry.offset:w_entry.offset + w_entry.size] == W.tobytes()  # little-endian
    b_entry = protos.BundleEntryProto.FromString(entries[b"b"])
    assert b_entry.dtype == 2 and data[b_entry.offset:b_entry.offset + 16] == B.tobytes()


def test_checkpoints_of_jitflow_0_1_still_restore(tmp_path, backend):
    """The JSON-index, sha256-checked .npz format of jitflow 0.1 is still read."""
    saver_mod._write_legacy_checkpoint(str(tmp_path / "old"), [("layer/w", W * 3), ("b", B)])
    assert json.loads((tmp_path / "old.index").read_text())["format"] == "jitflow-checkpoint"
    w, b = _build()
    assert dict(tf.train.list_variables(str(tmp_path / "old"))) == {"layer/w": [2, 3],
                                                                    "b": [2]}
    with tf.Session() as sess:
        tf.train.Saver().restore(sess, str(tmp_path / "old"))
        np.testing.assert_array_equal(sess.run(w), W * 3)
        np.testing.assert_array_equal(sess.run(b), B)
    with open(tmp_path / "old.data-00000-of-00001", "r+b") as f:
        f.seek(60)
        f.write(b"\x00garbage\x00")
    with tf.Session() as sess:
        with pytest.raises(tf.errors.DataLossError):
            tf.train.Saver().restore(sess, str(tmp_path / "old"))


def _saved(tmp_path):
    w, b = _build()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        path = tf.train.Saver().save(sess, str(tmp_path / "m"), write_meta_graph=False)
    return w, b, path


def _restore_fails_and_changes_nothing(w, b, path, match):
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(tf.assign(w, W - 7))
        with pytest.raises(tf.errors.DataLossError, match=match):
            tf.train.Saver().restore(sess, path)
        np.testing.assert_array_equal(sess.run(w), W - 7)   # nothing was written
        np.testing.assert_array_equal(sess.run(b), B)


def test_corrupt_data_file_is_data_loss(tmp_path):
    w, b, path = _saved(tmp_path)
    with open(path + ".data-00000-of-00001", "r+b") as f:
        f.seek(20)
        f.write(b"\xff")
    _restore_fails_and_changes_nothing(w, b, path, "data-00000-of-00001")


def test_truncated_data_file_is_data_loss(tmp_path):
    w, b, path = _saved(tmp_path)
    data = path + ".data-00000-of-00001"
    os.truncate(data, os.path.getsize(data) - 3)
    _restore_fails_and_changes_nothing(w, b, path, "[Tt]runcated")


@pytest.mark.parametrize("where", ["block", "footer", "truncated"])
def test_corrupt_index_file_is_data_loss(tmp_path, where):
    w, b, path = _saved(tmp_path)
    index = path + ".index"
    raw = bytearray(open(index, "rb").read())
    if where == "block":
        raw[12] ^= 0x40          # inside the first data block: its CRC no longer matches
    elif where == "footer":
        raw[-1] ^= 0x01          # the magic number
    else:
        raw = raw[:len(raw) // 2]
    with open(index, "wb") as f:
        f.write(raw)
    _restore_fails_and_changes_nothing(w, b, path, "m.index")
    with pytest.raises(tf.errors.DataLossError):
        tf.train.list_variables(path)


def test_wrong_crc_in_the_index_is_data_loss(tmp_path):
    """An entry whose stored CRC does not match its bytes (a valid table otherwise)."""
    from jitflow.serialize import protos
    from jitflow.serialize.table import TableBuilder, read_table
    w, b, path = _saved(tmp_path)
    pairs = read_table(open(path + ".index", "rb").read())
    table = TableBuilder()
    for k, v in pairs:
        if k == b"layer/w":
            e = protos.BundleEntryProto.FromString(v)
            e.crc32c ^= 1
            v = e.SerializeToString()
        table.add(k, v)
    with open(path + ".index", "wb") as f:
        f.write(table.finish())
    _restore_fails_and_changes_nothing(w, b, path, "layer/w")


def test_crash_during_save_keeps_previous_checkpoint(tmp_path, monkeypatch, backend):
    w, b = _build()
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        good = saver.save(sess, str(tmp_path / "m"), global_step=1)
        sess.run(tf.assign(w, W * 10))

        real_replace = os.replace

        def crashing_replace(src, dst):
            if str(dst).endswith(".data-00000-of-00001"):
                raise OSError("simulated crash")
            return real_replace(src, dst)

        monkeypatch.setattr(os, "replace", crashing_replace)
        with pytest.raises(OSError, match="simulated crash"):
            saver.save(sess, str(tmp_path / "m"), global_step=2)
        monkeypatch.setattr(os, "replace", real_replace)

    assert tf.train.latest_checkpoint(str(tmp_path)) == good
    assert not tf.train.checkpoint_exists(str(tmp_path / "m-2"))
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]
    with tf.Session() as sess:
        saver.restore(sess, tf.train.latest_checkpoint(str(tmp_path)))
        np.testing.assert_array_equal(sess.run(w), W)


def test_crash_before_state_file_keeps_previous_latest(tmp_path, monkeypatch):
    w, b = _build()
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        good = saver.save(sess, str(tmp_path / "m"), global_step=1, write_meta_graph=False)
        real_replace = os.replace

        def crashing_replace(src, dst):
            if os.path.basename(str(dst)) == "checkpoint":
                raise OSError("simulated crash")
            return real_replace(src, dst)

        monkeypatch.setattr(os, "replace", crashing_replace)
        with pytest.raises(OSError):
            saver.save(sess, str(tmp_path / "m"), global_step=2, write_meta_graph=False)
    assert tf.train.latest_checkpoint(str(tmp_path)) == good


def test_write_meta_graph_uses_serialize(tmp_path):
    w, b = _build()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        path = tf.train.Saver().save(sess, str(tmp_path / "m"))
    assert os.path.exists(path + ".meta")


def test_recover_last_checkpoints(tmp_path):
    w, b = _build()
    saver = tf.train.Saver(max_to_keep=2)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        paths = [saver.save(sess, str(tmp_path / "m"), global_step=i,
                            write_meta_graph=False) for i in range(2)]
    fresh = tf.train.Saver(max_to_keep=2)
    fresh.recover_last_checkpoints(
        tf.train.get_checkpoint_state(str(tmp_path)).all_model_checkpoint_paths)
    assert fresh.last_checkpoints == paths


def test_state_file_round_trip_with_odd_characters(tmp_path):
    odd = str(tmp_path / 'we"ird\\name')
    saver_mod.update_checkpoint_state(str(tmp_path), odd, [odd])
    state = tf.train.get_checkpoint_state(str(tmp_path))
    assert state.model_checkpoint_path == odd
    assert state.all_model_checkpoint_paths == [odd]


def test_keep_checkpoint_every_n_hours_preserves_old_files(tmp_path, monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(saver_mod.time, "time", lambda: clock[0])
    w, b = _build()
    saver = tf.train.Saver(max_to_keep=1, keep_checkpoint_every_n_hours=1.0)
    paths = {}
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for t in (1000, 2000, 4000, 5000):
            clock[0] = float(t)
            paths[t] = saver.save(sess, str(tmp_path / "m"), global_step=t,
                                  write_meta_graph=False)
    assert saver.last_checkpoints == [paths[5000]]
    # 1000 and 2000 fall inside the first hour and are deleted; 4000 is the first one past
    # the hour mark, so it is kept on disk although it left the max_to_keep window.
    assert not tf.train.checkpoint_exists(paths[1000])
    assert not tf.train.checkpoint_exists(paths[2000])
    assert tf.train.checkpoint_exists(paths[4000])


def test_meta_graph_round_trip_into_fresh_graph(tmp_path, backend):
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    w, b = _build()
    y = tf.identity(tf.reduce_sum(x * tf.reduce_sum(w, axis=0)), name="y")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(tf.assign(w, W + 1))
        want = sess.run(y, {x: np.ones((2, 3), np.float32)})
        path = tf.train.Saver().save(sess, str(tmp_path / "m"), global_step=1)
    with tf.Graph().as_default() as g:
        saver = tf.train.import_meta_graph(path + ".meta")
        with tf.Session(graph=g) as sess:
            saver.restore(sess, path)
            got = sess.run("y:0", {"x:0": np.ones((2, 3), np.float32)})
    assert got == pytest.approx(want)


def test_relative_save_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.mkdir("ckpt")
    w, b = _build()
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        path = saver.save(sess, os.path.join("ckpt", "model"), global_step=3,
                          write_meta_graph=False)
    assert path == os.path.join("ckpt", "model-3")
    assert 'model_checkpoint_path: "model-3"' in (tmp_path / "ckpt" / "checkpoint").read_text()
    assert tf.train.latest_checkpoint("ckpt") == os.path.join("ckpt", "model-3")
    with tf.Session() as sess:
        saver.restore(sess, tf.train.latest_checkpoint("ckpt"))
        np.testing.assert_array_equal(sess.run(w), W)


def test_init_from_checkpoint_scopes_and_names(tmp_path, backend):
    with tf.Graph().as_default() as g1:
        w, b = _build()
        with tf.Session(graph=g1) as sess:
            sess.run(tf.global_variables_initializer())
            path = tf.train.Saver().save(sess, str(tmp_path / "m"), write_meta_graph=False)
    with tf.variable_scope("new"):
        w2 = tf.Variable(np.zeros((2, 3), np.float32), name="w")
    b2 = tf.Variable(np.zeros(2), name="bias")
    untouched = tf.Variable(5.0, name="untouched")
    tf.train.init_from_checkpoint(path, {"layer/": "new/", "b": b2})
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_array_equal(sess.run(w2), W)
        np.testing.assert_array_equal(sess.run(b2), B)
        assert sess.run(untouched) == 5.0
    with pytest.raises(ValueError, match="not found"):
        tf.train.init_from_checkpoint(path, {"nothere": b2})


# -- temporary files of crashed saves; file modes -------------------------------------------------
_CRASHING_SAVE = r'''
import os, sys
import numpy as np
import jitflow as tf
w = tf.Variable(np.arange(6, dtype=np.float32).reshape(2, 3), name="layer/w")
saver = tf.train.Saver()
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    saver.save(sess, sys.argv[1], global_step=1)
    real_fsync = os.fsync
    def dying_fsync(fd):          # the process dies with a temp file written, not yet renamed
        if sys.argv[2] in os.readlink(f"/proc/self/fd/{fd}"):
            os._exit(9)
        return real_fsync(fd)
    os.fsync = dying_fsync
    saver.save(sess, sys.argv[1], global_step=2)
'''


@pytest.mark.parametrize("dies_writing", [".data-", ".index", ".meta", "checkpoint"])
def test_next_save_removes_temp_files_a_crashed_process_left(tmp_path, dies_writing):
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-c", _CRASHING_SAVE, str(tmp_path / "m"),
                           dies_writing], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 9, proc.stderr
    left = [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]
    assert len(left) == 1 and dies_writing in left[0]
    w, b = _build()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        tf.train.Saver().save(sess, str(tmp_path / "m"), global_step=3)
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]
    # the last checkpoint the crashed process completed still restores
    with tf.Session() as sess:
        tf.train.Saver([w]).restore(sess, str(tmp_path / "m-1"))
        np.testing.assert_array_equal(sess.run(w), W)


def test_temp_files_of_live_writers_and_other_files_are_kept(tmp_path):
    import subprocess
    import sys
    import time
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    live = os.getppid()   # a process that is still running: it could be saving right now
    host = saver_mod._host_tag()
    names = {
        "dead": f".m-7.index.jftmp-{host}-{dead}-abcd1234.tmp",
        "dead_state": f".checkpoint.jftmp-{host}-{dead}-efgh5678.tmp",
        "live": f".m-7.data-00000-of-00001.jftmp-{host}-{live}-ijkl9012.tmp",
        "other_host_fresh": f".m-7.index.jftmp-0badc0de-{dead}-mnop3456.tmp",
        "other_host_old": f".m-6.index.jftmp-0badc0de-{dead}-qrst7890.tmp",
        "old_style_old": ".m-5.index.a1b2c3d4.tmp",
        "old_style_fresh": ".m-5.data-00000-of-00001.e5f6g7h8.tmp",
        "unrelated_old": ".notes.z9y8x7w6.tmp",
        "other_prefix": f".other-1.index.jftmp-{host}-{dead}-uvwx1234.tmp",
    }
    for name in names.values():
        (tmp_path / name).write_bytes(b"partial")
    hours_ago = time.time() - 2 * 3600
    for key in ("other_host_old", "old_style_old", "unrelated_old"):
        os.utime(tmp_path / names[key], (hours_ago, hours_ago))
    w, b = _build()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        tf.train.Saver().save(sess, str(tmp_path / "m"), global_step=8)
    gone = {k for k, n in names.items() if not (tmp_path / n).exists()}
    assert gone == {"dead", "dead_state", "other_host_old", "old_style_old"}


def test_meta_file_is_written_like_the_data_and_index(tmp_path):
    w, b = _build()
    old = os.umask(0o022)
    try:
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            prefix = tf.train.Saver().save(sess, str(tmp_path / "m"))
    finally:
        os.umask(old)

    def mode(p):
        return os.stat(p).st_mode & 0o777

    data = mode(prefix + ".data-00000-of-00001")
    assert data == 0o600
    assert mode(prefix + ".index") == mode(prefix + ".meta") == mode(tmp_path / "checkpoint") \
        == data
    # still the meta graph jitflow.serialize reads
    tf.reset_default_graph()
    restorer = tf.train.import_meta_graph(prefix + ".meta")
    with tf.Session() as sess:
        restorer.restore(sess, prefix)
        np.testing.assert_array_equal(sess.run("layer/w:0"), W)


def test_graph_and_event_writers_create_their_folders(tmp_path):
    # as TF 2.21: write_graph, export_meta_graph and FileWriter make every missing folder
    w, b = _build()
    with tf.Session() as sess:
        g = sess.graph
        text = tf.train.write_graph(g, str(tmp_path / "g" / "h"), "g.pbtxt")
        binary = tf.io.write_graph(g.as_graph_def(), str(tmp_path / "gb" / "x"), "g.pb",
                                   as_text=False)
        tf.train.Saver().export_meta_graph(str(tmp_path / "meta" / "deep" / "m.meta"))
        tf.summary.FileWriter(str(tmp_path / "logs" / "run1")).close()
    assert text == str(tmp_path / "g" / "h" / "g.pbtxt") and os.path.isfile(text)
    assert os.path.isfile(binary) and os.path.isfile(tmp_path / "meta" / "deep" / "m.meta")
    assert len(os.listdir(tmp_path / "logs" / "run1")) == 1
    with open(binary, "rb") as f:
        nodes = {n.name for n in tf.GraphDef.FromString(f.read()).node}
    assert {"layer/w", "layer/w/Assign", "b", "b/read"} <= nodes


def test_checkpoint_folders_match_tensorflow(tmp_path):
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    tf1.disable_eager_execution()

    def attempt(t, sess, saver, path):
        try:
            saver.save(sess, path)
            return "saved", sorted(os.listdir(os.path.dirname(path)))
        except ValueError as e:
            return "ValueError", str(e)

    results = {}
    for name, t in (("tf", tf1), ("jitflow", tf)):
        with t.Graph().as_default():
            v = t.Variable(np.float32(1.0), name="v")
            with t.Session() as sess:
                sess.run(v.initializer)
                saver = t.train.Saver()
                root = tmp_path / name
                root.mkdir()
                results[name] = [attempt(t, sess, saver, str(root / "one" / "m.ckpt")),
                                 attempt(t, sess, saver, str(root / "a" / "b" / "m.ckpt"))]
                try:
                    saver.restore(sess, str(root / "none" / "m.ckpt"))
                except ValueError as e:
                    results[name].append(("ValueError", str(e)))
    assert [r[0] for r in results["jitflow"]] == ["saved", "ValueError", "ValueError"]
    assert results["jitflow"][0] == results["tf"][0]
    assert [r[1].replace(str(tmp_path / "jitflow"), "") for r in results["jitflow"][1:]] == \
        [r[1].replace(str(tmp_path / "tf"), "") for r in results["tf"][1:]]
