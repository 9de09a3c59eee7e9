"""`tf.saved_model` (TF1): write and load SavedModels that TensorFlow reads too.

    tf.saved_model.simple_save(sess, export_dir, inputs={"x": x}, outputs={"y": y})
    meta = tf.saved_model.loader.load(sess, [tf.saved_model.tag_constants.SERVING], export_dir)
    sig = meta.signature_def["serving_default"]       # sig.inputs["x"].name == "x:0"
"""
from __future__ import annotations

from jitflow.saved_model import (builder, loader, signature_constants,  # noqa: F401
                                 signature_def_utils, tag_constants, utils)
from jitflow.saved_model.builder import SavedModelBuilder
from jitflow.saved_model.loader import load, maybe_saved_model_directory
from jitflow.saved_model.signature_def_utils import (build_signature_def,
                                                     predict_signature_def)
from jitflow.saved_model.utils import build_tensor_info, get_tensor_from_tensor_info

Builder = SavedModelBuilder
SERVING = tag_constants.SERVING
TRAINING = tag_constants.TRAINING
DEFAULT_SERVING_SIGNATURE_DEF_KEY = signature_constants.DEFAULT_SERVING_SIGNATURE_DEF_KEY
PREDICT_METHOD_NAME = signature_constants.PREDICT_METHOD_NAME

__all__ = ["simple_save", "builder", "loader", "load", "SavedModelBuilder", "Builder",
           "signature_constants", "signature_def_utils", "tag_constants", "utils",
           "build_tensor_info", "get_tensor_from_tensor_info", "build_signature_def",
           "predict_signature_def", "maybe_saved_model_directory", "SERVING", "TRAINING",
           "DEFAULT_SERVING_SIGNATURE_DEF_KEY", "PREDICT_METHOD_NAME"]


def simple_save(session, export_dir, inputs: dict, outputs: dict, legacy_init_op=None) -> None:
    """Save a serving SavedModel: the session's variables and one "serving_default" predict
    signature over `inputs` and `outputs` ({key: Tensor}), tagged "serve"."""
    sig = {signature_constants.DEFAULT_SERVING_SIGNATURE_DEF_KEY:
           predict_signature_def(inputs, outputs)}
    b = SavedModelBuilder(export_dir)
    b.add_meta_graph_and_variables(session, tags=[tag_constants.SERVING],
                                   signature_def_map=sig, legacy_init_op=legacy_init_op)
    b.save()
