"""jitflow's benchmark suite: jitflow against NumPy, TF1 and JAX (see `benchmarks/run.py`)."""
