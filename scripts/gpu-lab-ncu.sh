#!/usr/bin/env bash
# A lab reference's counters as flashprof's CUPTI reads them, beside Nsight
# Compute's on a launch of the same kernel at the same timing batch (the FP8
# lab's and the decode lab's batches are larger than any case file may be, so
# ncu profiles flashprof's own timing phase rather than a one-case file).
#
# flashprof profiles one launch of the timing batch after evicting L2 (`check
# --counters`). ncu then runs `check --no-counters` (so the two profilers never
# meet) and profiles the second launch of every launch configuration of the
# lab's kernel (--filter-mode per-launch-config): each case's and the timing
# batch's, with its cache flush and without. scripts/fidelity_table.py takes
# the reference's block size and, of those launches, the one that reads the
# most DRAM bytes (the timing batch; cases read a few MB), and prints each
# metric with the bounds the other labs hold. Raw CSVs and JSON stay in $OUT.
#
# Usage: OUT=dir scripts/gpu-lab-ncu.sh LAB [path/to/flashprof]
#   LAB: flash-prefill | paged-prefill | paged-prefill-fp8 | paged-decode
set -uo pipefail
cd "$(dirname "$0")/.."
LAB=${1:?usage: scripts/gpu-lab-ncu.sh LAB [path/to/flashprof]}
BIN=${2:-target/release/flashprof}
OUT=${OUT:-lab-ncu-out}
case $LAB in
  flash-prefill) ENTRY=attention_prefill ;;
  paged-prefill) ENTRY=paged_prefill ;;
  paged-prefill-fp8) ENTRY=paged_prefill_fp8 ;;
  paged-decode) ENTRY=paged_decode ;;
  *) echo "scripts/gpu-lab-ncu.sh: unknown lab $LAB" >&2; exit 2 ;;
esac
KERNEL=kernels/$LAB/reference.cu
THREADS=$(grep -o '@flashprof.*threads=[0-9]*' "$KERNEL" | grep -o 'threads=[0-9]*' | cut -d= -f2)
NAME=$LAB-reference
mkdir -p "$OUT/reports"
LOG="$OUT/$NAME.log"
: >"$LOG"
"$BIN" check "$KERNEL" --lab "$LAB" --counters --json >"$OUT/reports/$NAME.json" 2>>"$LOG"
echo "flashprof check --counters rc=$?" >>"$LOG"
METRICS=$(python3 scripts/fidelity_table.py --ncu-metrics)
for cache in all none; do
  ncu --clock-control none --cache-control "$cache" --target-processes all \
    --kernel-name "$ENTRY" --filter-mode per-launch-config --launch-skip 1 --launch-count 1 \
    --metrics "$METRICS" --csv --print-units base --log-file "$OUT/ncu-$NAME-$cache.csv" \
    "$BIN" check "$KERNEL" --lab "$LAB" --no-counters --case-timeout 120 --json \
    >"$OUT/ncu-run-$cache.json" 2>>"$LOG"
  echo "ncu cache=$cache rc=$?" >>"$LOG"
done
python3 scripts/fidelity_table.py "$OUT" --block "$THREADS" "$NAME"
