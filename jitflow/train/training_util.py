"""The global step: a scalar int64 variable named `global_step` in the GLOBAL_STEP collection."""
from __future__ import annotations

from typing import Optional

import numpy as np

from jitflow.core.graph import GraphKeys, Tensor, get_default_graph

__all__ = ["global_step", "get_global_step", "create_global_step", "get_or_create_global_step",
           "assert_global_step"]


def global_step(sess, global_step_tensor) -> int:
    """The current value of the global step as a Python int."""
    return int(sess.run(global_step_tensor))


def get_global_step(graph=None):
    """The global step variable of `graph` (default graph), or None if there is none."""
    graph = graph if graph is not None else get_default_graph()
    found = graph.get_collection(GraphKeys.GLOBAL_STEP)
    if len(found) > 1:
        raise TypeError("Multiple tensors in global_step collection.")
    if found:
        return found[0]
    try:
        return graph.get_tensor_by_name("global_step:0")
    except KeyError:
        return None


def assert_global_step(global_step_tensor) -> None:
    """Raise TypeError unless the argument is a scalar integer variable or tensor."""
    from jitflow.ops.state import Variable
    if not isinstance(global_step_tensor, (Variable, Tensor)):
        raise TypeError(f"Existing \"global_step\" must be a Variable or Tensor: "
                        f"{global_step_tensor}.")
    if not global_step_tensor.dtype.is_integer:
        raise TypeError(f"Existing \"global_step\" does not have integer type: "
                        f"{global_step_tensor.dtype}")
    if global_step_tensor.shape.ndims != 0 and global_step_tensor.shape.is_fully_defined():
        raise TypeError(f"Existing \"global_step\" is not scalar: "
                        f"{global_step_tensor.shape}")


def create_global_step(graph=None):
    """Create the global step variable; ValueError if the graph already has one."""
    graph = graph if graph is not None else get_default_graph()
    if get_global_step(graph) is not None:
        raise ValueError("\"global_step\" already exists.")
    from jitflow.ops.state import Variable
    with graph.as_default(), graph.name_scope(""), graph.control_dependencies(None):
        return Variable(np.int64(0), name="global_step", trainable=False,
                        collections=[GraphKeys.GLOBAL_VARIABLES, GraphKeys.GLOBAL_STEP])


def get_or_create_global_step(graph=None):
    """The global step variable of `graph`, created on first use."""
    graph = graph if graph is not None else get_default_graph()
    step: Optional[object] = get_global_step(graph)
    if step is None:
        step = create_global_step(graph)
    return step
