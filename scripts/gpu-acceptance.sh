#!/usr/bin/env bash
# GPU acceptance for flashprof, in one call on a machine with an NVIDIA GPU.
#
# Runs `flashprof check` on every shipped kernel, checks each verdict
# against what the kernel is meant to produce (starter and reference pass;
# each planted bug fails its intended case in the intended way), and prints
# a short table last. Full JSON reports and logs go to $OUT (or ./acceptance-out).
#
# Usage: scripts/gpu-acceptance.sh [path/to/flashprof]
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-target/release/flashprof}
OUT=${OUT:-acceptance-out}
mkdir -p "$OUT/reports"
LOG="$OUT/acceptance.log"
: >"$LOG"

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv >>"$LOG" 2>&1 || true

run() { # name, then flashprof arguments; records wall time and exit code
  local name=$1; shift
  local start wall
  start=$(date +%s%N)
  "$BIN" "$@" --json >"$OUT/reports/$name.json" 2>>"$LOG"
  local rc=$?
  wall=$(awk "BEGIN { print ($(date +%s%N) - $start) / 1e9 }")
  echo "$name rc=$rc wall_s=$wall" >>"$LOG"
  echo "$name $rc $wall" >>"$OUT/runs.txt"
}
: >"$OUT/runs.txt"

run starter check kernels/starter.cu
run reference check kernels/reference.cu
for bug in kernels/bugs/*.cu; do
  run "bug-$(basename "$bug" .cu)" check "$bug" --no-timing --case-timeout 4
done

python3 scripts/acceptance_table.py "$OUT" | tee "$OUT/table.txt"
