# `make demo` and `make test` each set up .venv on first use, then run.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-test
BENCH_STAMP := $(VENV)/.installed-bench
export JITFLOW_CACHE_DIR ?= $(CURDIR)/.cache/jitflow
export OPENBLAS_NUM_THREADS ?= 1
export PYTHONHASHSEED ?= 0

.PHONY: all install test test-cuda demo bench bench-quick bench-cold bench-cold-quick exit-check \
	bench-cuda lint clean fuzz soak

all: test

$(STAMP): pyproject.toml setup.cfg
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test,dask]'
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadgroup tests

# the cuda backend's tests alone: on Numba's CUDA simulator, or with JITFLOW_CUDA_REAL=1 on
# the machine's NVIDIA GPU (needs the cuda extra: numba-cuda)
test-cuda: $(STAMP)
	$(BIN)/python -m pip install -q -e '.[test,cuda]'
	$(BIN)/python -m pytest -q -n 2 tests/backends/numba_cuda

demo: $(STAMP)
	@for f in examples/*.py; do \
	  echo "== $$f"; $(BIN)/python $$f || exit 1; \
	done

# the differential fuzzer: N random TF1 programs from seed START, compiled vs interpreter
# (FUZZFLAGS=--tf also against TensorFlow, which needs the bench extra); failures are shrunk
# into fuzz-failures/
N ?= 2000
START ?= 0
FUZZFLAGS ?=
fuzz: $(STAMP)
	cd tests && $(CURDIR)/$(BIN)/python -m fuzz -n $(N) --start $(START) \
	  --out $(CURDIR)/fuzz-failures $(FUZZFLAGS)

# soak test (not in CI): random programs, threads sharing a session, kill -9 during
# Saver.save, for SOAK_MINUTES; prints counts, exits 1 on any failure
SOAK_MINUTES ?= 20
SOAKFLAGS ?=
soak: $(STAMP)
	$(BIN)/python benchmarks/soak.py --minutes $(SOAK_MINUTES) $(SOAKFLAGS)

$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install -q -e '.[test,bench,dask]'
	touch $(BENCH_STAMP)

# the peer table, then compile time: first results from 10 to 1,000 ops (fresh processes, empty
# and warm kernel cache, against TF1 and JAX), the first steps of the RNN and CNN models with an
# empty cache, and the cold workloads (results in benchmarks/results/)
bench: $(BENCH_STAMP)
	$(BIN)/python benchmarks/run.py
	OPENBLAS_NUM_THREADS=1 $(BIN)/python benchmarks/compile_scaling.py \
		--sizes 10,50,200,1000 --modes forward,train \
		--peers jitflow,jitflow-quick,jitflow-sync,jitflow-cached,tf1,jax \
		--out benchmarks/results/compile_scaling
	OPENBLAS_NUM_THREADS=1 $(BIN)/python benchmarks/rnn_first_step.py --model rnn
	OPENBLAS_NUM_THREADS=1 $(BIN)/python benchmarks/rnn_first_step.py --model cnn
	$(MAKE) bench-cold

# what a user waits for: a fixed amount of work per case, each peer (jitflow's default mode with
# an empty and with a warm kernel cache, NumPy, JAX, TF1) in a fresh process, whole-program wall
# time and ratios (~10 min; bench-cold-quick: a 1-3 minute smoke). JAX and TF1 run in
# BENCH_PYTHON (default: this venv, which the bench extra gives both)
BENCH_PYTHON ?= $(BIN)/python
bench-cold: $(BENCH_STAMP)
	$(BIN)/python benchmarks/cold_workloads.py --bench-python $(BENCH_PYTHON) \
		--out benchmarks/results

bench-cold-quick: $(STAMP)
	$(BIN)/python benchmarks/cold_workloads.py --quick --bench-python $(BENCH_PYTHON)

# a short CNN program 100 times in fresh processes (empty and warm kernel cache), exiting while
# the compiler thread works: counts unclean exits, requires bit-identical results (~4 min on an
# idle 2-core machine, 20 under load 11)
EXIT_RUNS ?= 100
exit-check: $(STAMP)
	$(BIN)/python benchmarks/exit_check.py --runs $(EXIT_RUNS) \
		--out benchmarks/results/exit_check.md

bench-quick: $(BENCH_STAMP)
	$(BIN)/python benchmarks/run.py --quick

# GPU figures (needs an NVIDIA GPU): fused chain 1e7/1e8 f32, pinned copies, MLP steps at batch
# 1024/8192 and a LeNet-style CNN + Adam step at batch 128, cuda against the numba CPU backend
# and CuPy where it installs (the cuda-libs extra: also the vendor GEMM products call);
# results in benchmarks/results/. benchmarks/gpu_check.sh runs the GPU tests and this at once.
bench-cuda: $(BENCH_STAMP)
	$(BIN)/python -m pip install -q -e '.[cuda]'
	-$(BIN)/python -m pip install -q -e '.[cuda-libs]'
	JITFLOW_CUDA_REAL=1 NUMBA_ENABLE_CUDASIM=0 $(BIN)/python benchmarks/cuda_bench.py

lint: $(STAMP)
	$(BIN)/python -m pip install -q ruff
	$(BIN)/python -m ruff check jitflow tests examples benchmarks

clean:
	rm -rf $(VENV) .cache build *.egg-info .pytest_cache
