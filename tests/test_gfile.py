"""tf.gfile / tf.io.gfile on local files, with TensorFlow's error classes."""
from __future__ import annotations

import pytest

import jitflow as tf


def test_file_operations(tmp_path):
    g = tf.io.gfile
    d = str(tmp_path / "a" / "b")
    g.makedirs(d)
    g.makedirs(d)   # no error when it exists
    assert g.isdir(d) and tf.gfile.IsDirectory(d)
    p = d + "/f.txt"
    with tf.gfile.GFile(p, "w") as f:
        f.write("line1\nline2\n")
    with g.GFile(p) as f:
        assert f.readline() == "line1\n" and list(f) == ["line2\n"]
    with tf.gfile.Open(p, "rb") as f:
        assert f.read() == b"line1\nline2\n" and f.size() == 12
    assert g.exists(p) and tf.gfile.Exists(p)
    assert g.stat(p).length == 12 and not g.stat(p).is_directory
    g.copy(p, d + "/g.txt")
    with pytest.raises(tf.errors.AlreadyExistsError):
        g.copy(p, d + "/g.txt")
    g.rename(d + "/g.txt", d + "/h.txt")
    assert g.listdir(d) == ["f.txt", "h.txt"] == tf.gfile.ListDirectory(d)
    assert tf.gfile.Glob(d + "/*.txt") == [d + "/f.txt", d + "/h.txt"]
    walked = list(g.walk(str(tmp_path)))
    assert walked[0] == (str(tmp_path), ["a"], []) and walked[-1][2] == ["f.txt", "h.txt"]
    g.remove(d + "/h.txt")
    with pytest.raises(tf.errors.NotFoundError, match="h.txt"):
        g.remove(d + "/h.txt")
    with pytest.raises(tf.errors.NotFoundError):
        tf.gfile.GFile(d + "/missing").read()
    tf.gfile.DeleteRecursively(str(tmp_path / "a"))
    assert not g.exists(str(tmp_path / "a"))
    with pytest.raises(tf.errors.UnimplementedError, match="gs://"):
        g.exists("gs://bucket/x")
