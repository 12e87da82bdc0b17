#!/usr/bin/env bash
# The line profile against Nsight Compute on the labs' kernels
# (docs/LINE-PROFILE.md): for the four references, the flash starter and two
# ladder rungs, `flashprof check --lines --json` gives flashprof's per-line
# reading; then Nsight Compute, in a separate run with flashprof's collector
# off (FLASHPROF_LINES_LAUNCH_ONLY: the line worker launches the kernel once
# on the profile's inputs, seed 7, and collects nothing), profiles that very
# launch, and its SASS rows are summed per line through the same line table
# (examples/line_table, the same NVRTC build). A table per kernel last.
# Usage: OUT=dir scripts/gpu-lines-ncu.sh [flashprof] [line_table]
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-target/release/flashprof}
TABLE=${2:-target/release/examples/line_table}
OUT=${OUT:-gpu-lines-ncu-out}
mkdir -p "$OUT"
seconds() { python3 -c "import time; print(f'{time.time() - $1:.1f}')"; }
# lab:entry:one small case:file
for k in \
  flash-prefill:attention_prefill:random-small:kernels/flash-prefill/reference.cu \
  flash-prefill:attention_prefill:random-small:kernels/flash-prefill/starter.cu \
  flash-prefill:attention_prefill:random-small:kernels/flash-prefill/ladder/01-row-tiles.cu \
  flash-prefill:attention_prefill:random-small:kernels/flash-prefill/ladder/03-register-tiles.cu \
  paged-prefill:paged_prefill:decode-steps:kernels/paged-prefill/reference.cu \
  paged-prefill-fp8:paged_prefill_fp8:decode-steps:kernels/paged-prefill-fp8/reference.cu \
  paged-decode:paged_decode:block-edges:kernels/paged-decode/reference.cu; do
  IFS=: read -r lab entry case file <<<"$k"
  name=$(basename "$(dirname "$file")")-$(basename "$file" .cu)
  start=$(date +%s.%N)
  "$BIN" check "$file" --lab "$lab" --no-timing --seed 7 --lines --json >"$OUT/$name.json" 2>"$OUT/$name.err"
  ours=$(seconds "$start")
  rep=/tmp/lines-ncu-$name.ncu-rep
  rm -f "$rep"
  start=$(date +%s.%N)
  # One report for the whole run: the check's own worker launches the
  # kernel on one small case, the line worker (started last) once on the
  # profile's inputs; the table reads the last launch.
  FLASHPROF_LINES_LAUNCH_ONLY=1 ncu --target-processes all -k "regex:^${entry}\$" \
    --section SourceCounters --section WarpStateStats --import-source yes \
    --export "$rep" --force-overwrite \
    "$BIN" check "$file" --lab "$lab" --no-timing --seed 7 --lines --case "$case" >"$OUT/$name.ncu.log" 2>&1
  theirs=$(seconds "$start")
  [ -f "$rep" ] && ncu -i "$rep" --page source --csv --print-source sass >"$OUT/$name.ncu.csv" 2>&1
  "$TABLE" "$lab" "$file" >"$OUT/$name.table.tsv" 2>&1
  echo "$name: flashprof --lines ${ours}s, ncu run ${theirs}s"
done
python3 scripts/lines_ncu_table.py "$OUT"
