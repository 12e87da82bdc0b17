#!/usr/bin/env bash
# Builds the paged-prefill lab's kernels and the check harness with nvcc and
# runs it on the GPU machine. Logs go to $OUT (or /tmp/paged-check-out).
#   bash scripts/paged-check/run.sh [--no-racecheck]
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SRC=$ROOT/kernels/paged-prefill
OUTDIR=${OUT:-/tmp/paged-check-out}
BUILD=${BUILD:-/tmp/paged-check-build}
export PATH=/usr/local/cuda-13.0/bin:$PATH
mkdir -p "$OUTDIR" "$BUILD"
rm -f "$BUILD"/*.cubin "$BUILD"/*.ptxas  # a warm machine keeps the last run's
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUTDIR/device.txt"
nvcc --version | tail -2 >> "$OUTDIR/device.txt"
build() {  # name source [nvcc flags]
    nvcc -O3 -arch=sm_90 -cubin -Xptxas -v -o "$BUILD/$1.cubin" "$2" "${@:3}" > "$BUILD/$1.ptxas" 2>&1 || { cat "$BUILD/$1.ptxas"; return 1; }
}
pids=()
build starter "$SRC/starter.cu" & pids+=($!)
build reference "$SRC/reference.cu" & pids+=($!)
build support "$SRC/support.cu" & pids+=($!)
for f in "$SRC"/bugs/*.cu; do build "$(basename "$f" .cu)" "$f" & pids+=($!); done
nvcc -O3 -arch=sm_90 -Xcompiler -fopenmp -o "$BUILD/paged_check" "$ROOT/scripts/paged-check/paged_check.cu" -lcuda & pids+=($!)
fail=0
for p in "${pids[@]}"; do wait "$p" || fail=1; done
cat "$BUILD"/*.ptxas > "$OUTDIR/ptxas.txt" 2>/dev/null
grep -A3 "paged_prefill\|paged_oracle" "$BUILD/reference.ptxas" "$BUILD"/cand-*.ptxas "$BUILD/starter.ptxas" | grep -i "registers\|spill"
[ $fail = 0 ] || { echo "build failed"; exit 1; }
"$BUILD/paged_check" "$BUILD" "$SRC" 2>&1 | tee "$OUTDIR/check.log"
rc=${PIPESTATUS[0]}
if [ "${1:-}" != "--no-racecheck" ]; then
    compute-sanitizer --tool racecheck "$BUILD/paged_check" "$BUILD" "$SRC" --racecheck 2>&1 | tee "$OUTDIR/racecheck.log" | tail -5
    compute-sanitizer --tool memcheck "$BUILD/paged_check" "$BUILD" "$SRC" --racecheck 2>&1 | tee "$OUTDIR/memcheck.log" | tail -3
fi
exit $rc
