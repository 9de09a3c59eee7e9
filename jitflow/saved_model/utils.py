"""`tf.saved_model.utils`: TensorInfo messages for a signature's tensors."""
from __future__ import annotations

from jitflow.core.graph import Tensor, get_default_graph

__all__ = ["build_tensor_info", "get_tensor_from_tensor_info"]


def build_tensor_info(tensor: Tensor):
    """The TensorInfo (name, dtype, static shape) of a dense tensor."""
    from jitflow.serialize import protos
    from jitflow.serialize.tensor_util import dtype_to_enum, shape_proto
    if not isinstance(tensor, Tensor):
        raise TypeError(f"build_tensor_info needs a Tensor, got {tensor!r}")
    info = protos.TensorInfo(name=tensor.name, dtype=dtype_to_enum(tensor.dtype))
    shape_proto(tensor.shape, info.tensor_shape)
    return info


def get_tensor_from_tensor_info(tensor_info, graph=None, import_scope=None) -> Tensor:
    graph = graph if graph is not None else get_default_graph()
    name = tensor_info.name
    if import_scope:
        name = f"{import_scope}/{name}"
    return graph.get_tensor_by_name(name)
