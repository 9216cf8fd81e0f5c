#!/usr/bin/env bash
# The prepared GPU run: one script, under 10 minutes in all, on a machine with an NVIDIA GPU and
# CuPy (`pip install -e .[gpu]`), from the repository root.  Stages, the open questions first,
# each under its own time cap (seconds; the caps add up to 530 of TOTAL_S = 560):
#   1. hardmax, T = 2, rho = 0.5, alpha = 1, stop='drift', d = 1000 then 1200     HARDMAX_S=170
#   2. two hardmax layers, alpha = 0.5, Wishart and centred teachers, d = 500, 1000  DEEP_S=130
#   3. float32 against float64 products, softmax alpha = 0.1, d = 2000 (one data set)  FLOAT32_S=55
#   4. regenerated tokens at d = 5000 (stored ones: 200 GB), 3 iterations in float32   REGEN_S=130
#   5. NumPy against CuPy on the same draws, every array path (gpu_agreement.py)       AGREE_S=45
# Stages 1-4 are benchmarks/gpu_validate.py (sizes and what each row holds: its docstring); each
# writes $RESULTS/gpu_<stage>.json as each of its runs ends, so a stage stopped by its cap keeps
# its finished runs (the run it was in is the row with status "running").  A stage gets its cap
# or what is left of TOTAL_S, whichever is less.  Expected on one H200 with 16 host cores (cost
# model 4 n T d^2 flops per iteration at ~30 TFLOP/s, host draws and hardmax g_out on 16 threads):
# about 110 s for d = 1000 in stage 1 (d = 1200 needs ~170 s more: it lands only on a fast run),
# 120, 40, 100 and 35 s for stages 2-5.
# DRIFT_D="400 600" adds, before stage 1, three-layer GAMP-RIE at alpha = 1 taken to exactly 200
# iterations (scripts/deep_three_trace.py; book chapter "Three layers: why GAMP-RIE leaves its state
# evolution", section "The drift across sizes"): one run per size and seed of DRIFT_SEEDS (default
# 0 1 2), each capped at DRIFT_S = 240 s and written, as it ends, to
# $RESULTS/deep_three_trace_long_d<d>_s<seed>.csv; the output function runs on HOST_THREADS (16) host
# threads, the rows those of one.  A d = 300 run took 42 minutes on one CPU core; at d = 150 half of a
# run's time is that function (its cost grows as d^2, the products' as d^4).  These runs share
# TOTAL_S with the stages after them, which a second call can run.
# GPU_EXTRA=1 adds, after these, the unit tests on CuPy (87 s with -n 12 on an H200, TESTS_S),
# gradient descent at d = 200, GAMP-RIE time per iteration against d (AMP_D) and the minimum-trace
# ADMM solver against d (MINTRACE_S): raise TOTAL_S.
# Everything printed is also written to $RESULTS/gpu_run.log.  The exit status says whether all
# stages passed.
#
#   bash benchmarks/gpu.sh
#   RESULTS="$OUT" bash benchmarks/gpu.sh                 # on the lent device: records come back
#   HARDMAX_D="1000" REGEN_D="4000 5000" bash benchmarks/gpu.sh
#   DRIFT_D=400 bash benchmarks/gpu.sh                      # the three-layer drift first
#   VALIDATE_ARGS=--smoke bash benchmarks/gpu.sh          # stages 1-4 at tiny d on NumPy (a dry run)
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
RESULTS=${RESULTS:-benchmarks/results}
TOTAL_S=${TOTAL_S:-560}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$RESULTS"
exec > >(tee "$RESULTS/gpu_run.log") 2>&1
status=0
# stage NAME CAP COMMAND...: run COMMAND for at most min(CAP, what is left of TOTAL_S) seconds
stage() {
    local name=$1 cap=$2 left=$((TOTAL_S - SECONDS))
    shift 2
    ((cap > left)) && cap=$left
    if ((cap < 20)); then echo "== $name: skipped (cap ${cap}s; ${left}s left of TOTAL_S=$TOTAL_S)"; status=1; return; fi
    echo "== $name (cap ${cap}s, at ${SECONDS}s)"
    timeout --kill-after=10 "$cap" "$@" || { echo "== $name failed or stopped at its cap ($?)"; status=1; }
}
# shellcheck disable=SC2206
validate=($PY benchmarks/gpu_validate.py --out-dir "$RESULTS" ${VALIDATE_ARGS:-})

$PY - <<'PYEOF'
import cupy
p = cupy.cuda.runtime.getDeviceProperties(0)
print("device:", p["name"].decode(), "| memory GiB:", round(p["totalGlobalMem"] / 2**30, 1),
      "| CuPy", cupy.__version__, "| CUDA runtime", cupy.cuda.runtime.runtimeGetVersion())
PYEOF
for d in ${DRIFT_D:-}; do
    for seed in ${DRIFT_SEEDS:-0 1 2}; do
        stage "three layers, d = $d, seed $seed, 200 iterations" "${DRIFT_S:-240}" $PY scripts/deep_three_trace.py \
            --d "$d" --seeds "$seed" --iterations 200 --host-threads "${HOST_THREADS:-16}" \
            --out "$RESULTS/deep_three_trace_long_d${d}_s${seed}.csv"
    done
done
# shellcheck disable=SC2086
stage "hardmax alpha = 1" "${HARDMAX_S:-170}" "${validate[@]}" --stage hardmax --hardmax-d ${HARDMAX_D:-1000 1200}
# shellcheck disable=SC2086
stage "two layers" "${DEEP_S:-130}" "${validate[@]}" --stage deep --deep-d ${DEEP_D:-500 1000}
# shellcheck disable=SC2086
stage "float32 against float64" "${FLOAT32_S:-55}" "${validate[@]}" --stage float32 --float32-d ${FLOAT32_D:-2000}
# shellcheck disable=SC2086
stage "regenerated tokens" "${REGEN_S:-130}" "${validate[@]}" --stage regenerate --regen-d ${REGEN_D:-5000}
stage "NumPy against CuPy" "${AGREE_S:-45}" $PY benchmarks/gpu_agreement.py --out "$RESULTS/gpu_agreement.json"
if [[ ${GPU_EXTRA:-0} == 1 ]]; then
    # shellcheck disable=SC2086
    stage "unit tests on CuPy" "${TESTS_S:-180}" env AIMLIB_TEST_BACKEND=cupy $PY -m pytest tests -q \
        -p no:cacheprovider ${PYTEST_ARGS:--n 12} --junitxml="$RESULTS/gpu_tests.xml"
    stage "gradient descent" "${GD_S:-120}" $PY benchmarks/bench_gd.py --backend cupy --out "$RESULTS/gd_cupy.json"
    # shellcheck disable=SC2086
    stage "GAMP-RIE against d" "${AMP_S:-300}" $PY benchmarks/bench_amp_scaling.py --backend cupy \
        --d ${AMP_D:-500 1000 2000} --converge --memory-mb "${AMP_MEMORY_MB:-65536}" \
        --out "$RESULTS/amp_scaling_cupy.json"
    stage "minimum trace against d" "${MINTRACE_S:-120}" $PY benchmarks/bench_min_trace.py --backend cupy \
        --out "$RESULTS/min_trace_cupy.json"
fi
echo "== done in ${SECONDS}s (status $status)"
exit $status
