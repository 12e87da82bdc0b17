#!/usr/bin/env bash
# The paged-decode lab on a GPU, through flashprof itself (issue 23): the
# starter and the reference pass every case, each planted bug fails exactly
# the cases its first line lists (the CPU models' lists) with its named
# diagnosis, the reference's timing phase (scratch reset before every launch,
# audited) gives its speedup and its achieved bandwidth against the measured
# roofs, and, with CALIBRATE=1, the speed gate is calibrated. A short table
# comes last; JSON reports and the log stay in $OUT.
#
# Usage: OUT=dir scripts/gpu-decode.sh [path/to/flashprof]
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-target/release/flashprof}
OUT=${OUT:-decode-out}
mkdir -p "$OUT/reports"
LOG="$OUT/decode.log"
: >"$LOG"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv >>"$LOG" 2>&1 || true
: >"$OUT/runs.txt"

run() { # name, then flashprof arguments
  local name=$1; shift
  local start=$(date +%s%N)
  "$BIN" "$@" --json >"$OUT/reports/$name.json" 2>>"$LOG"
  local rc=$?
  echo "$name $rc $(awk "BEGIN { print ($(date +%s%N) - $start) / 1e9 }")" >>"$OUT/runs.txt"
}

run decode-starter check kernels/paged-decode/starter.cu --no-timing
run decode-reference check kernels/paged-decode/reference.cu --counters
for bug in kernels/paged-decode/bugs/*.cu; do
  run "decode-bug-$(basename "$bug" .cu)" check "$bug" --no-timing --case-timeout 4
done
"$BIN" check kernels/paged-decode/reference.cu --counters >"$OUT/reference.txt" 2>>"$LOG"
if [ "${CALIBRATE:-0}" = 1 ]; then
  "$BIN" calibrate --lab paged-decode --runs 3 --out "$OUT/gates.toml" >>"$OUT/calibrate.txt" 2>&1
  echo "calibrate rc=$?" >>"$OUT/calibrate.txt"
fi
python3 scripts/decode_table.py "$OUT"
