#!/usr/bin/env bash
# GPU validation, run on a machine with an NVIDIA GPU and CuPy installed
# (`pip install -e .[gpu]`), from the repository root:
#   1. NumPy against CuPy on the same draws, every array path (gpu_agreement.py);
#   2. the library's tests with every array aimlib creates on the GPU
#      (AIMLIB_TEST_BACKEND=cupy leaves out the book, browser and notebook tests);
#   3. gradient descent at d = 200, T = 2, alpha = 0.1, 1000 Adam steps;
#   4. time per GAMP-RIE iteration against d (AMP_D), and the error against the SE at each d.
# Each stage runs even if an earlier one fails; the exit status says whether all passed.
# Results land in $RESULTS (default benchmarks/results/).
#
#   bash benchmarks/gpu.sh
#   PYTEST_ARGS="-n 8" STAGE_TIMEOUT=300 bash benchmarks/gpu.sh   # pytest-xdist, time cap per stage
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
RESULTS=${RESULTS:-benchmarks/results}
STAGE_TIMEOUT=${STAGE_TIMEOUT:-1800}
AMP_D=${AMP_D:-500 1000 2000}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$RESULTS"
status=0
stage() { echo "== $1"; shift; timeout "$STAGE_TIMEOUT" "$@" || { echo "== failed ($?)"; status=1; }; }

$PY - <<'PYEOF'
import cupy
p = cupy.cuda.runtime.getDeviceProperties(0)
print("device:", p["name"].decode(), "| memory GiB:", round(p["totalGlobalMem"] / 2**30, 1),
      "| CuPy", cupy.__version__, "| CUDA runtime", cupy.cuda.runtime.runtimeGetVersion())
PYEOF
stage "NumPy against CuPy" $PY benchmarks/gpu_agreement.py --out "$RESULTS/gpu_agreement.json"
# shellcheck disable=SC2086
stage "unit tests on CuPy" env AIMLIB_TEST_BACKEND=cupy $PY -m pytest tests -q -p no:cacheprovider \
    ${PYTEST_ARGS:-} --junitxml="$RESULTS/gpu_tests.xml"
stage "gradient descent" $PY benchmarks/bench_gd.py --backend cupy --out "$RESULTS/gd_cupy.json"
# shellcheck disable=SC2086
stage "GAMP-RIE against d" $PY benchmarks/bench_amp_scaling.py --backend cupy --d $AMP_D --converge \
    --memory-mb "${AMP_MEMORY_MB:-65536}" --out "$RESULTS/amp_scaling_cupy.json"
exit $status
