"""`tf.saved_model.loader.load`: load a TF1 SavedModel (written by TensorFlow or jitflow)."""
from __future__ import annotations

import os
from typing import Optional

from jitflow.core import errors

__all__ = ["load", "maybe_saved_model_directory", "read_saved_model"]


def maybe_saved_model_directory(export_dir) -> bool:
    d = os.fspath(export_dir)
    return (os.path.isfile(os.path.join(d, "saved_model.pb"))
            or os.path.isfile(os.path.join(d, "saved_model.pbtxt")))


def read_saved_model(export_dir):
    """The SavedModel message of a directory (binary or text)."""
    from google.protobuf import text_format
    from google.protobuf.message import DecodeError

    from jitflow.serialize import protos
    d = os.fspath(export_dir)
    pb, pbtxt = os.path.join(d, "saved_model.pb"), os.path.join(d, "saved_model.pbtxt")
    sm = protos.SavedModel()
    if os.path.isfile(pb):
        with open(pb, "rb") as f:
            try:
                sm.ParseFromString(f.read())
            except DecodeError as e:
                raise errors.DataLossError(None, None, f"Cannot parse {pb}: {e}") from None
        return sm
    if os.path.isfile(pbtxt):
        with open(pbtxt, encoding="utf-8") as f:
            text_format.Parse(f.read(), sm, allow_unknown_field=True)
        return sm
    raise IOError(f"SavedModel file does not exist at: {d}/{{saved_model.pbtxt|saved_model.pb}}")


def load(sess, tags, export_dir, import_scope: Optional[str] = None, **saver_kwargs):
    """Import the meta graph of `tags` into `sess.graph`, restore its variables and run its
    init op; returns the MetaGraphDef (its `signature_def` names the model's tensors)."""
    from jitflow.saved_model import signature_constants as sc
    from jitflow.serialize.meta_graph import import_meta_graph
    sm = read_saved_model(export_dir)
    want = set([tags] if isinstance(tags, str) else tags)
    found = [m for m in sm.meta_graphs if set(m.meta_info_def.tags) == want]
    if not found:
        have = [sorted(m.meta_info_def.tags) for m in sm.meta_graphs]
        raise RuntimeError(f"MetaGraphDef associated with tags {sorted(want)} could not be "
                           f"found in SavedModel. Available tags: {have}")
    meta = found[0]
    with sess.graph.as_default():
        saver = import_meta_graph(meta, import_scope=import_scope, **saver_kwargs)
        variables = os.path.join(os.fspath(export_dir), "variables", "variables")
        if saver is not None:
            saver.restore(sess, variables)
        init = None
        if sc.INIT_OP_SIGNATURE_KEY in meta.signature_def:
            init = meta.signature_def[sc.INIT_OP_SIGNATURE_KEY].outputs[
                sc.INIT_OP_SIGNATURE_KEY].name
        else:
            for key in ("saved_model_main_op", "legacy_init_op"):
                col = meta.collection_def.get(key) if key in meta.collection_def else None
                if col is not None and col.node_list.value:
                    init = col.node_list.value[0]
                    break
        if init is not None:
            if import_scope:
                init = f"{import_scope}/{init}"
            sess.run(init.split(":")[0] if init.endswith(":0") else init)
    return meta
