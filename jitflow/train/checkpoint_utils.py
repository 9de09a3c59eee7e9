"""`tf.train.init_from_checkpoint`: make variables' initializers load values from a checkpoint."""
from __future__ import annotations

from jitflow.core.graph import GraphKeys, get_default_graph

__all__ = ["init_from_checkpoint"]


def _variables_by_name() -> dict:
    graph = get_default_graph()
    return {v.op.name: v for v in graph.get_collection(GraphKeys.GLOBAL_VARIABLES)}


def init_from_checkpoint(ckpt_dir_or_file, assignment_map) -> None:
    """Replace the initializers of the mapped variables with assignments of checkpoint values.

    `assignment_map` maps checkpoint names or scopes to variables, variable names or scopes:
    `{"old/w": "new/w"}`, `{"old/w": w}`, `{"old_scope/": "new_scope/"}`, `{"/": "scope/"}`.
    The values are read now and stored as constants, as TF1 reads them when the graph is built.
    """
    from jitflow.ops.sources import constant
    from jitflow.ops.state import Variable, assign
    from jitflow.train.saver import load_checkpoint
    reader = load_checkpoint(ckpt_dir_or_file)
    shapes = reader.get_variable_to_shape_map()
    variables = _variables_by_name()
    pairs = []  # (checkpoint name, Variable)
    for ckpt_key, current in assignment_map.items():
        if isinstance(current, Variable):
            pairs.append((ckpt_key, current))
            continue
        if not isinstance(current, str):
            raise TypeError(f"Unsupported assignment target {current!r}")
        if not current.endswith("/"):
            if current not in variables:
                raise ValueError(f"Tensor {current} is not found in the graph's variables")
            pairs.append((ckpt_key, variables[current]))
            continue
        scope = current
        ckpt_scope = "" if ckpt_key == "/" else ckpt_key
        if ckpt_scope and not ckpt_scope.endswith("/"):
            raise ValueError(f"Assignment map with scope only name {scope} should map to scope "
                             f"only {ckpt_key}. Should be 'scope/': 'other_scope/'.")
        for name, v in variables.items():
            if name.startswith(scope):
                full = ckpt_scope + name[len(scope):]
                if full in shapes:
                    pairs.append((full, v))
    for ckpt_name, v in pairs:
        if ckpt_name not in shapes:
            raise ValueError(f"Tensor {ckpt_name} is not found in {ckpt_dir_or_file} checkpoint")
        value = reader.get_tensor(ckpt_name)
        if not v.shape.is_compatible_with(value.shape):
            raise ValueError(f"Shape of variable {v.op.name} ({v.shape}) doesn't match with "
                             f"shape of tensor {ckpt_name} ({list(value.shape)}) from checkpoint "
                             "reader.")
        graph = v.graph
        with graph.as_default(), graph.name_scope(v.op.name + "/"), \
                graph.control_dependencies(None):
            init = assign(v, constant(value.astype(v.dtype.as_numpy_dtype), name="checkpoint"),
                          name="init_from_checkpoint", read_value=False)
        v._initializer_op = init  # TF1 swaps the initializer the same way
