"""`tf.saved_model.builder.SavedModelBuilder`: write a TF1 SavedModel.

Layout, as TensorFlow writes and reads it: `<export_dir>/saved_model.pb` (a `SavedModel`
message: one MetaGraphDef per tag set, each with its signatures) and
`<export_dir>/variables/variables.{index,data-00000-of-00001}` (a V2 checkpoint of the global
variables). The meta graphs carry no saver_def: TensorFlow's loader builds its own Saver over
the variables, jitflow's loader uses `tf.train.Saver`.
"""
from __future__ import annotations

import os

__all__ = ["SavedModelBuilder"]

SAVED_MODEL_FILENAME_PB = "saved_model.pb"
SAVED_MODEL_FILENAME_PBTXT = "saved_model.pbtxt"
VARIABLES_DIRECTORY = "variables"
VARIABLES_FILENAME = "variables"
MAIN_OP_KEY = "saved_model_main_op"
LEGACY_INIT_OP_KEY = "legacy_init_op"


class SavedModelBuilder:
    """Collects meta graphs (the first with the variables), then `save()` writes them."""

    def __init__(self, export_dir: str) -> None:
        from jitflow.serialize import protos
        self._export_dir = os.fspath(export_dir)
        if os.path.exists(self._export_dir) and os.listdir(self._export_dir):
            raise AssertionError(f"Export directory already exists, and isn't empty. Please "
                                 f"choose a different export directory, or delete all the "
                                 f"contents of the specified directory: {self._export_dir}")
        os.makedirs(self._export_dir, exist_ok=True)
        self._saved_model = protos.SavedModel(saved_model_schema_version=1)
        self._has_saved_variables = False

    def _meta_graph(self, graph, tags, signature_def_map, main_op):
        from jitflow.serialize.meta_graph import export_meta_graph
        if main_op is not None:
            graph.add_to_collection(MAIN_OP_KEY, main_op)
        meta = export_meta_graph(graph=graph)
        if main_op is not None:
            graph.clear_collection(MAIN_OP_KEY)
        meta.meta_info_def.tags.extend(tags if not isinstance(tags, str) else [tags])
        for key, sig in (signature_def_map or {}).items():
            meta.signature_def[key].CopyFrom(sig)
        self._saved_model.meta_graphs.add().CopyFrom(meta)

    def add_meta_graph_and_variables(self, sess, tags, signature_def_map=None,
                                     assets_collection=None, legacy_init_op=None,
                                     clear_devices: bool = False, main_op=None,
                                     strip_default_attrs: bool = False, saver=None) -> None:
        """Save the session's variables and add the graph as the meta graph of `tags`."""
        if self._has_saved_variables:
            raise AssertionError("Graph state including variables and assets has already been "
                                 "saved. Please invoke `add_meta_graph()` instead.")
        from jitflow.core.graph import GraphKeys
        from jitflow.train.saver import Saver
        graph = sess.graph
        variables_dir = os.path.join(self._export_dir, VARIABLES_DIRECTORY)
        os.makedirs(variables_dir, exist_ok=True)
        if graph.get_collection(GraphKeys.GLOBAL_VARIABLES):
            saver = saver or Saver(var_list=graph.get_collection(GraphKeys.GLOBAL_VARIABLES),
                                   allow_empty=True)
            saver.save(sess, os.path.join(variables_dir, VARIABLES_FILENAME),
                       write_meta_graph=False, write_state=False)
        self._meta_graph(graph, tags, signature_def_map, main_op or legacy_init_op)
        self._has_saved_variables = True

    def add_meta_graph(self, tags, signature_def_map=None, assets_collection=None,
                       legacy_init_op=None, clear_devices: bool = False, main_op=None,
                       strip_default_attrs: bool = False, saver=None) -> None:
        """Add the default graph as one more meta graph (the variables are already saved)."""
        if not self._has_saved_variables:
            raise AssertionError("Graph state including variables and assets has not been "
                                 "saved yet. Please invoke `add_meta_graph_and_variables()` "
                                 "first.")
        from jitflow.core.graph import get_default_graph
        self._meta_graph(get_default_graph(), tags, signature_def_map,
                         main_op or legacy_init_op)

    def save(self, as_text: bool = False) -> str:
        """Write saved_model.pb (or .pbtxt) atomically; returns its path."""
        from google.protobuf import text_format

        from jitflow.train.saver import _atomic_write
        if as_text:
            path = os.path.join(self._export_dir, SAVED_MODEL_FILENAME_PBTXT)
            data = text_format.MessageToString(self._saved_model).encode()
        else:
            path = os.path.join(self._export_dir, SAVED_MODEL_FILENAME_PB)
            data = self._saved_model.SerializeToString()
        _atomic_write(path, data)
        os.chmod(path, 0o644)
        return path

