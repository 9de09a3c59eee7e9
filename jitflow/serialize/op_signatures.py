"""How TensorFlow names the outputs of its op types, which FunctionDefs need.

In a GraphDef a node's input names an output by its flat position ("node:1"); inside a
FunctionDef it names the output argument of the producing op and the position within that
argument ("node:output:1", "split:output:2", "unique:idx:0"). Converting between the two needs
each op type's output arguments: their names and how many tensors each holds (one, an integer
attribute's value such as Split's `num_split`, or the length of a type-list attribute such as
While's `T`). `_op_signatures.py` holds them for the op types jitflow reads and writes;
`python -m jitflow.serialize.op_signatures` regenerates it from TensorFlow's op registry (needs
TensorFlow; a development step, like `protos.regenerate`).
"""
from __future__ import annotations

import os
import re
from typing import Optional

__all__ = ["output_args", "flat_index", "arg_index", "has_signature"]

# jitflow's own nodes ("jitflow.<type>") name all their outputs as one list argument
NATIVE_OUTPUT = "output"


def _table() -> dict:
    from jitflow.serialize._op_signatures import OUTPUTS
    return OUTPUTS


def has_signature(op_type: str) -> bool:
    return op_type in _table()


def output_args(op_type: str, attrs) -> list:
    """[(argument name, number of tensors)] of a node of `op_type` with attributes `attrs`
    (a NodeDef's attr map). A jitflow node or an unknown type is one list argument `output`
    of `None` tensors (any number)."""
    spec = _table().get(op_type)
    if spec is None:
        return [(NATIVE_OUTPUT, None)]
    out = []
    for part in spec.split():
        name, _, count = part.partition("*")
        if not count:
            out.append((name, 1))
        elif count.startswith("["):
            key = count[1:-1]
            out.append((name, len(attrs[key].list.type) if key in attrs else None))
        else:
            out.append((name, int(attrs[count].i) if count in attrs else None))
    return out


def flat_index(op_type: str, attrs, arg: str, index: int, where: str = "") -> int:
    """The flat output position of output `index` of argument `arg` (FunctionDef naming)."""
    start = 0
    for name, n in output_args(op_type, attrs):
        if name == arg:
            return start + index
        if n is None:
            break
        start += n
    raise ValueError(f"{where}: op {op_type} has no output argument '{arg}' (or its position "
                     "cannot be known)")


def arg_index(op_type: str, attrs, flat: int) -> tuple:
    """(argument name, index within it) of flat output position `flat`."""
    start = 0
    for name, n in output_args(op_type, attrs):
        if n is None or flat < start + n:
            return name, flat - start
        start += n
    raise ValueError(f"op {op_type} has no output {flat}")


# -- regeneration ---------------------------------------------------------------------------------
_EXTRA = ("While", "StatelessWhile", "If", "StatelessIf", "Case", "StatelessCase",
          "PartitionedCall", "StatefulPartitionedCall", "EmptyTensorList", "TensorListReserve",
          "TensorListFromTensor", "TensorListGetItem", "TensorListSetItem", "TensorListStack",
          "TensorListGather", "TensorListScatterIntoExistingList", "TensorListScatterV2",
          "TensorListScatter", "TensorListLength", "TensorListPushBack", "TensorListPopBack",
          "TensorListElementShape", "TensorListConcatV2", "TensorListConcat", "TensorListSplit",
          "TensorListResize", "OptionalFromValue", "OptionalGetValue", "OptionalNone",
          "OptionalHasValue", "Enter", "Exit", "Merge", "Switch", "NextIteration", "LoopCond",
          "RefEnter", "RefExit", "RefMerge", "RefSwitch", "RefNextIteration", "ControlTrigger",
          "TensorArrayV3", "TensorArrayReadV3", "TensorArrayWriteV3", "TensorArrayGatherV3",
          "TensorArrayScatterV3", "TensorArraySizeV3", "TensorArrayConcatV3",
          "TensorArraySplitV3", "TensorArrayCloseV3", "Shape", "ZerosLike", "AddN", "NoOp",
          "Identity", "LogicalAnd", "LogicalOr", "Less", "Greater", "AddV2", "Sub")


def _op_types_named_in_sources() -> set:
    """Quoted CamelCase words in jitflow's serialize modules: candidate TF op type names."""
    here = os.path.dirname(os.path.abspath(__file__))
    names: set = set()
    for fn in os.listdir(here):
        if fn.endswith(".py") and not fn.startswith("_"):
            with open(os.path.join(here, fn), encoding="utf-8") as f:
                names.update(re.findall(r'"([A-Z][A-Za-z0-9]+)"', f.read()))
    return names


def _spec(op_def) -> str:
    parts = []
    for a in op_def.output_arg:
        if a.number_attr:
            parts.append(f"{a.name}*{a.number_attr}")
        elif a.type_list_attr:
            parts.append(f"{a.name}*[{a.type_list_attr}]")
        else:
            parts.append(a.name)
    return " ".join(parts)


def generate(names: Optional[set] = None) -> str:
    """The text of `_op_signatures.py` (imports TensorFlow and jitflow)."""
    from tensorflow.python.framework import op_def_registry

    import jitflow  # noqa: F401  (registers the importers and exporters)
    from jitflow.serialize import tf_ops
    if names is None:
        names = set(tf_ops.IMPORTERS) | set(tf_ops.EXPORTERS) | set(_EXTRA) \
            | _op_types_named_in_sources()
    table = {}
    for name in sorted(names):
        d = op_def_registry.get(name)
        if d is not None:
            table[name] = _spec(d)
    lines = [f"    {k!r}: {v!r}," for k, v in table.items()]
    head = ('"""Generated by `python -m jitflow.serialize.op_signatures` from TensorFlow\'s op '
            'registry: the\noutput arguments of each op type ("name", "name*count_attr", '
            '"name*[type_list_attr]").\nDo not edit."""\n# ruff: noqa: E501\n\n')
    return head + "OUTPUTS = {\n" + "\n".join(lines) + "\n}\n"


def main() -> None:
    import tempfile
    here = os.path.dirname(os.path.abspath(__file__))
    text = generate()
    target = os.path.join(here, "_op_signatures.py")
    fd, tmp = tempfile.mkstemp(dir=here, suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, target)
    print(f"wrote {target} ({text.count(chr(10))} lines)")


if __name__ == "__main__":
    main()
