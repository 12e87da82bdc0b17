#!/usr/bin/env bash
# The TA workflows on a GPU machine, in one go: calibrate the speed gate,
# check and compare with the gate shown, grade a class folder made of the
# shipped kernels (then grade it again: everything must be skipped).
# Usage: scripts/gpu-ta.sh [path/to/flashprof]   (output to $OUT)
set -uo pipefail
cd "$(dirname "$0")/.."
F=$(realpath "${1:-target/release/flashprof}")
OUT=${OUT:-ta-out}
mkdir -p "$OUT"
CLASS=$(mktemp -d)
cp kernels/flash-prefill/starter.cu kernels/flash-prefill/reference.cu "$CLASS/" && cp -r kernels/flash-prefill/bugs "$CLASS/"
{
  echo "### calibrate"; "$F" calibrate --out "$OUT/gates.toml" --runs 5; cat "$OUT/gates.toml"
  echo "### check with the gate"; "$F" check kernels/flash-prefill/reference.cu --seed 7 --no-counters | tail -4
  echo "### compare reference vs starter"; "$F" compare kernels/flash-prefill/reference.cu kernels/flash-prefill/starter.cu --seed 7
  echo "### compare starter vs oob-write"; "$F" compare kernels/flash-prefill/starter.cu kernels/flash-prefill/bugs/oob-write.cu --seed 7 --no-timing
  echo "### grade"; "$F" grade "$CLASS" --out "$OUT/gradebook" --seed 7; echo "exit $?"
  cut -c1-220 <"$OUT/gradebook/gradebook.csv"
  echo "### grade again (resume)"; "$F" grade "$CLASS" --out "$OUT/gradebook" --seed 7; echo "exit $?"
} >"$OUT/ta.txt" 2>&1
cp "$OUT/gradebook/gradebook.csv" "$OUT/gradebook.csv"
# The per-run reports carry full heatmaps: too large to bring back, and not needed here.
rm -rf "$OUT/gradebook"
cat "$OUT/ta.txt"
