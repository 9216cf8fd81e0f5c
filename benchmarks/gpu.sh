#!/usr/bin/env bash
# GPU validation, run on a machine with an NVIDIA GPU and CuPy installed
# (`pip install -e .[gpu]`): the unit tests on the CuPy backend, then the AMP
# scaling benchmark and the GD benchmark on the GPU. Results land in
# benchmarks/results/ (copy them into the repo with the date and the device).
#
#   bash benchmarks/gpu.sh                # from the repository root
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
RESULTS=${RESULTS:-benchmarks/results}
mkdir -p "$RESULTS"
$PY - <<'PYEOF'
import cupy
p = cupy.cuda.runtime.getDeviceProperties(0)
print("device:", p["name"].decode(), "| memory GiB:", round(p["totalGlobalMem"] / 2**30, 1))
PYEOF
# Unit tests on the CuPy backend (the book and browser tests are backend-free).
AIMLIB_TEST_BACKEND=cupy $PY -m pytest tests -m "not book" -q -p no:cacheprovider 2>&1 | tee "$RESULTS/gpu_tests.log"
# Time per AMP iteration against d, and convergence (error vs SE) at each d.
$PY benchmarks/bench_amp_scaling.py --backend cupy --d 500 1000 2000 3000 --converge \
    --out "$RESULTS/amp_scaling_cupy.json"
# GD: d = 200, T = 2, alpha = 0.1, 1000 Adam steps, batched restarts on the GPU.
$PY benchmarks/bench_gd.py --backend cupy --out "$RESULTS/gd_cupy.json"
