#!/usr/bin/env bash
# The real-GPU checks in one go (for a machine with an NVIDIA GPU and numba-cuda installed):
# the cuda backend's tests on the GPU, then benchmarks/cuda_bench.py. Logs and the results
# table go to ${OUT:-gpu-check}/.
# numba-cuda 0.30.4 calls np.row_stack on import, which numpy 2.5 removed: where the machine's
# numpy is 2.5, put numpy 2.4 first on PYTHONPATH (the H100 run of 2026-11-26 did).
set -u
cd "$(dirname "$0")/.."
OUTDIR=${OUT:-gpu-check}; mkdir -p "$OUTDIR"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 JITFLOW_CUDA_REAL=1
export NUMBA_ENABLE_CUDASIM=0 OPENBLAS_NUM_THREADS=1 JITFLOW_COMPILE=sync
export JITFLOW_CACHE_DIR=${JITFLOW_CACHE_DIR:-/tmp/jitflow-gpu-check}
PY=${PYTHON:-python3}
nvidia-smi -L
$PY -c "import sys, numpy, numba, numba.cuda; print(sys.version.split()[0], 'numpy', numpy.__version__, 'numba', numba.__version__); numba.cuda.detect()"
timeout "${TEST_TIMEOUT:-240}" $PY -m pytest -q -n "${TEST_JOBS:-8}" -p no:cacheprovider \
  tests/backends/numba_cuda 2>&1 | tee "$OUTDIR/cuda_tests.log" | tail -40
echo "tests exit: ${PIPESTATUS[0]}"
timeout "${BENCH_TIMEOUT:-240}" $PY benchmarks/cuda_bench.py 2>&1 | tee "$OUTDIR/cuda_bench.log"
echo "bench exit: ${PIPESTATUS[0]}"
cp benchmarks/results/cuda-*.md "$OUTDIR/" 2>/dev/null
exit 0
