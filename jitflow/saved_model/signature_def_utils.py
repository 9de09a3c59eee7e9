"""`tf.saved_model.signature_def_utils`: SignatureDef messages (a model's named inputs and
outputs, by tensor name)."""
from __future__ import annotations

from typing import Optional

from jitflow.saved_model import signature_constants as sc
from jitflow.saved_model.utils import build_tensor_info

__all__ = ["build_signature_def", "predict_signature_def", "is_valid_signature"]


def build_signature_def(inputs: Optional[dict] = None, outputs: Optional[dict] = None,
                        method_name: Optional[str] = None):
    """A SignatureDef from {key: TensorInfo} maps and a method name."""
    from jitflow.serialize import protos
    sig = protos.SignatureDef(method_name=method_name or "")
    for k, v in (inputs or {}).items():
        sig.inputs[k].CopyFrom(v)
    for k, v in (outputs or {}).items():
        sig.outputs[k].CopyFrom(v)
    return sig


def predict_signature_def(inputs: dict, outputs: dict):
    """The Predict API's signature of {key: Tensor} inputs and outputs."""
    if not inputs:
        raise ValueError("Prediction inputs cannot be None or empty.")
    if not outputs:
        raise ValueError("Prediction outputs cannot be None or empty.")
    return build_signature_def({k: build_tensor_info(t) for k, t in inputs.items()},
                               {k: build_tensor_info(t) for k, t in outputs.items()},
                               sc.PREDICT_METHOD_NAME)


def is_valid_signature(signature_def) -> bool:
    return bool(signature_def.method_name) and bool(signature_def.outputs)
