# `make demo` and `make test` each set up .venv on first use, then run.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-test
BENCH_STAMP := $(VENV)/.installed-bench
export JITFLOW_CACHE_DIR ?= $(CURDIR)/.cache/jitflow
export OPENBLAS_NUM_THREADS ?= 1
export PYTHONHASHSEED ?= 0

.PHONY: all install test demo bench bench-quick lint clean fuzz soak

all: test

$(STAMP): pyproject.toml setup.cfg
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test,dask]'
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadgroup tests

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

bench: $(BENCH_STAMP)
	$(BIN)/python benchmarks/run.py

bench-quick: $(BENCH_STAMP)
	$(BIN)/python benchmarks/run.py --quick

lint: $(STAMP)
	$(BIN)/python -m pip install -q ruff
	$(BIN)/python -m ruff check jitflow tests examples benchmarks

clean:
	rm -rf $(VENV) .cache build *.egg-info .pytest_cache
