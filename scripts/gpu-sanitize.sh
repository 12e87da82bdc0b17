#!/usr/bin/env bash
# The compute-sanitizer pass on the H200, in one call: `check --sanitize` on
# the kernels it must fail (the two missing-barrier kernels) and on both
# labs' starter and reference (which must pass clean), with wall times.
# Prints a short table last; logs go to $OUT (or ./sanitize-out).
#
# Usage: scripts/gpu-sanitize.sh [path/to/flashprof]
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-target/release/flashprof}
OUT=${OUT:-sanitize-out}
mkdir -p "$OUT"
: >"$OUT/table.txt"
row() { # name, expected exit, then flashprof arguments
  local name=$1 want=$2; shift 2
  local start wall rc
  start=$(date +%s%N)
  "$BIN" check "$@" --sanitize --no-timing >"$OUT/$name.txt" 2>>"$OUT/sanitize.log"
  rc=$?
  wall=$(awk "BEGIN { printf \"%.1f\", ($(date +%s%N) - $start) / 1e9 }")
  local finding
  finding=$(grep -m1 -E "races with|sanitizer: " "$OUT/$name.txt" | cut -c1-90)
  local verdict=ok
  [ "$rc" = "$want" ] || verdict=WRONG
  printf "%-28s exit %s (want %s) %6s s  %-8s %s\n" "$name" "$rc" "$want" "$wall" "$verdict" "$finding" >>"$OUT/table.txt"
}
row race 1 kernels/flash-prefill/bugs/race.cu
row missing-barrier-after-load 1 kernels/flash-prefill/bugs/missing-barrier-after-load.cu
row flash-starter 0 kernels/flash-prefill/starter.cu
row flash-reference 0 kernels/flash-prefill/reference.cu
row paged-starter 0 kernels/paged-prefill/starter.cu --lab paged-prefill
row paged-reference 0 kernels/paged-prefill/reference.cu --lab paged-prefill
cat "$OUT/table.txt"
! grep -q WRONG "$OUT/table.txt"
