"""The engine: what every TF1 program touches, below the ops and above nothing.

- `dtypes.py`, `shapes.py`: dtypes and static shapes (`None` dims, unknown rank);
- `graph.py`: Graph, Operation, Tensor, names, scopes, collections, control dependencies;
- `errors.py`: TF1's error classes;
- `fold.py`: static values and shapes computable while the graph is built;
- `gradients.py`: `tf.gradients`, walking the registry's gradient rules;
- `structure.py`: nested structures (lists, tuples, dicts, namedtuples) flattened and rebuilt;
- `session.py`: `Session.run`: fetch mapping, feed checks, plans, a backend's executables.
"""
