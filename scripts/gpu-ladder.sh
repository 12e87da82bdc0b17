#!/usr/bin/env bash
# The kernel ladder on a GPU machine, in one call (about a minute on an H200).
#
# Checks every rung of kernels/flash-prefill/ladder/ with counters, then plain TF32 (the top
# rung with kSplitPrecision = false, made here, not shipped), and prints a
# table last: cases passed, median time, speedup over the starter, registers,
# the roofline verdict. Every rung must pass every case; plain TF32 must fail
# one (it is the reason the top rungs split their operands). The JSON reports
# go to $OUT/ladder (or ./ladder-out/ladder). docs/LADDER.md holds a run.
#
# Usage: scripts/gpu-ladder.sh [path/to/flashprof]
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-target/release/flashprof}
OUT=${OUT:-ladder-out}
REPORTS="$OUT/ladder"
mkdir -p "$REPORTS"
LOG="$OUT/ladder.log"
: >"$LOG"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv >>"$LOG" 2>&1 || true

check() { # report name, kernel file, extra flashprof arguments
  local name=$1 file=$2
  shift 2
  "$BIN" check "$file" --json "$@" >"$REPORTS/$name.json" 2>>"$LOG"
  echo "$name rc=$?" >>"$LOG"
}

check starter kernels/flash-prefill/starter.cu --counters
check reference kernels/flash-prefill/reference.cu --counters
for rung in kernels/flash-prefill/ladder/*.cu; do
  check "$(basename "$rung" .cu)" "$rung" --counters
done

top=$(ls kernels/flash-prefill/ladder/*.cu | tail -n 1)
sed 's/kSplitPrecision = true;/kSplitPrecision = false;/' "$top" >"$REPORTS/plain-tf32.cu"
if cmp -s "$top" "$REPORTS/plain-tf32.cu"; then
  echo "the top rung has no kSplitPrecision switch" >>"$LOG"
fi
check plain-tf32 "$REPORTS/plain-tf32.cu"

python3 scripts/ladder_table.py "$REPORTS" | tee "$OUT/table.txt"
