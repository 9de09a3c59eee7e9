"""Write tf1_api.txt: every public name of TensorFlow's `tf.compat.v1`, one dotted path a line.

Run once with TensorFlow installed (not a jitflow dependency), from the repository root:

    TF_USE_LEGACY_KERAS=1 python jitflow/tools/make_tf1_api.py > jitflow/tools/tf1_api.txt

Modules are walked breadth first, so a module reachable by several paths is listed under its
shortest one; `compat.v1`/`compat.v2` (the namespace itself again) and Keras (a library of its
own) are not walked. `tf.layers` and `tf.nn.rnn_cell` (TF1's legacy Keras modules, which need
TF_USE_LEGACY_KERAS=1 and tf-keras) are.
"""
from __future__ import annotations

import collections
import sys
import types

# module names whose contents belong to tf.compat.v1's API
_OWN = ("tensorflow._api.v2.compat.v1.", "tensorflow.compat.v1.",
        "tf_keras.api._v1.keras.__internal__.legacy")
_SKIP = ("compat.v1", "compat.v2")


def public_names(tf) -> list:
    """The dotted paths of every public non-module attribute under `tf` (sorted)."""
    out = []
    seen = {id(tf)}
    queue = collections.deque([(tf, "")])
    while queue:
        mod, prefix = queue.popleft()
        for name in sorted(dir(mod)):
            if name.startswith("_"):
                continue
            try:
                obj = getattr(mod, name)
            except Exception:  # noqa: BLE001  (a lazy module that fails to load: not listed)
                continue
            path = prefix + name
            if isinstance(obj, types.ModuleType):
                if (getattr(obj, "__name__", "").startswith(_OWN) and id(obj) not in seen
                        and path not in _SKIP):
                    seen.add(id(obj))
                    queue.append((obj, path + "."))
                continue
            out.append(path)
    return sorted(out)


if __name__ == "__main__":
    import tensorflow.compat.v1 as tf1
    names = public_names(tf1)
    print(f"{len(names)} names from TensorFlow {tf1.VERSION}", file=sys.stderr)
    print("\n".join(names))
