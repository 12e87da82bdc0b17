#!/usr/bin/env bash
# The line-profile spike on the GPU machine (docs/LINE-PROFILE.md):
#  1. builds scripts/line-profile/spike.cu with nvcc and runs it: the SASS
#     metrics this GPU offers, PC Sampling, then SASS Metrics, then PC
#     Sampling again, in one process on one context;
#  2. runs Nsight Compute on the same spike kernel (CUPTI off) and on the
#     flash reference as flashprof's worker builds it, and prints their
#     per-SASS source pages;
#  3. prints flashprof's own line table for the same builds (examples/line_table).
# Usage: OUT=dir scripts/gpu-line-spike.sh [path/to/flashprof] [path/to/line_table]
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-target/release/flashprof}
TABLE=${2:-target/release/examples/line_table}
OUT=${OUT:-line-spike-out}
CUDA=/usr/local/cuda-13.0
LIB=$CUDA/targets/x86_64-linux/lib
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$LIB:/usr/local/nvidia/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
SPIKE=/tmp/line-spike
BUILD=/tmp/line-spike-build.log
nvcc -O3 -lineinfo -arch=sm_90 -I"$CUDA/include" scripts/line-profile/spike.cu -o "$SPIKE" \
  -L"$LIB" -lcupti -lcuda >"$BUILD" 2>&1 || { cat "$BUILD"; exit 1; }
nvcc -O3 -lineinfo -arch=sm_90 -cubin scripts/line-profile/spike.cu -o /tmp/spike.cubin 2>>"$BUILD"
seconds() { python3 -c "import time; print(f'{time.time() - $1:.1f}')"; }
start=$(date +%s.%N)
"$SPIKE" >"$OUT/spike.tsv" 2>&1
echo "spike rc=$? in $(seconds "$start") s"
[ "${SPIKE_ONLY:-}" = 1 ] && { grep -v '^sass-metric	\|^pc-sample	\|^sass-value	' "$OUT/spike.tsv"; exit 0; }
"$TABLE" --cubin /tmp/spike.cubin _Z5tiledPKfPfi >"$OUT/spike-lines.tsv" 2>&1
# ncu on the spike kernel alone: the spike with CUPTI off ("plain").
start=$(date +%s.%N)
ncu --set full --import-source yes --kernel-name tiled --launch-skip 1 --launch-count 1 \
  --export /tmp/spike-ncu --force-overwrite "$SPIKE" plain >"$OUT/ncu-spike.log" 2>&1
echo "ncu spike rc=$? in $(seconds "$start") s"
ncu -i /tmp/spike-ncu.ncu-rep --page source --csv --print-source sass >"$OUT/ncu-spike-sass.csv" 2>&1
# The flash reference as the worker builds it, one case.
start=$(date +%s.%N)
ncu --section SourceCounters --section WarpStateStats --import-source yes --target-processes all \
  --kernel-name attention_prefill --launch-count 1 --export /tmp/flash-ncu --force-overwrite \
  "$BIN" check kernels/flash-prefill/reference.cu --case random-small --no-timing --no-counters \
  >"$OUT/ncu-flash.log" 2>&1
echo "ncu flash rc=$? in $(seconds "$start") s"
ncu -i /tmp/flash-ncu.ncu-rep --page source --csv --print-source sass >"$OUT/ncu-flash-sass.csv" 2>&1
"$TABLE" flash-prefill kernels/flash-prefill/reference.cu >"$OUT/flash-lines.tsv" 2>&1
echo
echo "== spike steps =="
grep -E '^(step|chip|plain|pc-sampling|sass-metrics)\b' "$OUT/spike.tsv"
echo "== SASS metrics offered: $(grep -c '^sass-metric	' "$OUT/spike.tsv"); stall reasons: $(grep -c '^stall-reason' "$OUT/spike.tsv")"
echo "== rows: spike lines $(wc -l <"$OUT/spike-lines.tsv"), ncu spike $(wc -l <"$OUT/ncu-spike-sass.csv"), flash lines $(wc -l <"$OUT/flash-lines.tsv"), ncu flash $(wc -l <"$OUT/ncu-flash-sass.csv")"
head -3 "$OUT/ncu-spike-sass.csv" | cut -c1-400
