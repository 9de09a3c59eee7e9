"""Run-time state: what a session owns and passes to the executables its backend compiled.

- `state.py`: `VariableStore`, the values of a session's variables (host arrays, with device
  copies where a GPU backend keeps them resident) and its random generators.
"""
