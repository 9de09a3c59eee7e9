#!/usr/bin/env bash
# The real-GPU checks in one go, for a session lent an NVIDIA GPU (< 8 minutes on an H100/H200):
# 1. the fast-path tests (pinned transfers, vendor GEMM dispatch and CuPy's cuBLAS where CuPy
#    is installed, convolutions and pooling on the device, the LeNet-style CNN);
# 2. the whole cuda test folder on the GPU (every registry example in every dtype);
# 3. benchmarks/cuda_bench.py (make bench-cuda's table: chains, pinned copies, MLP against a
#    CuPy step, LeNet-style CNN + Adam at batch 128).
# Logs and the results table go to ${OUT:-gpu-check}/. The device machine has no network: CuPy
# is used only when already installed (`pip install 'jitflow[cuda-libs]'` beforehand where a
# network is at hand); without it the tiled kernel runs and the CuPy columns read "-".
# numba-cuda 0.30.4 calls np.row_stack on import, which numpy 2.5 removed: where the machine's
# numpy is 2.5, put numpy 2.4 first on PYTHONPATH (the H100 run of 2026-11-26 did).
set -u
cd "$(dirname "$0")/.."
OUTDIR=${OUT:-gpu-check}; mkdir -p "$OUTDIR"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 JITFLOW_CUDA_REAL=1
export NUMBA_ENABLE_CUDASIM=0 OPENBLAS_NUM_THREADS=1 JITFLOW_COMPILE=sync
export JITFLOW_CACHE_DIR=${JITFLOW_CACHE_DIR:-/tmp/jitflow-gpu-check}
PY=${PYTHON:-python3}
START=$(date +%s)
nvidia-smi -L
$PY -c "import sys, numpy, numba, numba.cuda; print(sys.version.split()[0], 'numpy', numpy.__version__, 'numba', numba.__version__); numba.cuda.detect()"
$PY -c "import cupy; print('cupy', cupy.__version__, cupy.cuda.runtime.getDeviceCount(), 'GPU(s)')" \
  || echo "cupy: not usable here (tiled products; CuPy columns empty)"
timeout "${FAST_TIMEOUT:-90}" $PY -m pytest -q -n "${TEST_JOBS:-8}" -p no:cacheprovider \
  tests/backends/numba_cuda/test_cuda_fast_paths.py 2>&1 | tee "$OUTDIR/cuda_fast_tests.log" | tail -30
echo "fast-path tests exit: ${PIPESTATUS[0]} ($(( $(date +%s) - START )) s so far)"
timeout "${TEST_TIMEOUT:-180}" $PY -m pytest -q -n "${TEST_JOBS:-8}" -p no:cacheprovider \
  tests/backends/numba_cuda 2>&1 | tee "$OUTDIR/cuda_tests.log" | tail -30
echo "tests exit: ${PIPESTATUS[0]} ($(( $(date +%s) - START )) s so far)"
timeout "${BENCH_TIMEOUT:-180}" $PY benchmarks/cuda_bench.py 2>&1 | tee "$OUTDIR/cuda_bench.log"
echo "bench exit: ${PIPESTATUS[0]} ($(( $(date +%s) - START )) s in all)"
cp benchmarks/results/cuda-*.md "$OUTDIR/" 2>/dev/null
exit 0
