#!/usr/bin/env bash
# The line profile on the GPU machine (docs/LINE-PROFILE.md): the collector's
# own test (a bank conflict and a strided load on their own lines), then
# `flashprof check --lines` on the four labs' references and the flash
# starter, each once with --lines and once without, so the cost of the
# profile is the difference. Logs under $OUT; a short table last.
# Usage: OUT=dir scripts/gpu-lines.sh [path/to/flashprof]
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-target/release/flashprof}
OUT=${OUT:-gpu-lines-out}
mkdir -p "$OUT"
if [ -x target/gpu-tests/line_profile_gpu ]; then
  target/gpu-tests/line_profile_gpu --ignored --nocapture >"$OUT/collector-test.log" 2>&1
  echo "collector test rc=$? $(grep -E '^test result' "$OUT/collector-test.log")"
fi
seconds() { python3 -c "import time; print(f'{time.time() - $1:.2f}')"; }
printf '%-34s %-18s %9s %9s  %s\n' kernel lab "plain s" "lines s" "hottest line"
for pair in flash-prefill:kernels/flash-prefill/reference.cu flash-prefill:kernels/flash-prefill/starter.cu \
  paged-prefill:kernels/paged-prefill/reference.cu paged-prefill-fp8:kernels/paged-prefill-fp8/reference.cu \
  paged-decode:kernels/paged-decode/reference.cu; do
  lab=${pair%%:*}; file=${pair#*:}; name=$(echo "$file" | tr '/' '_')
  start=$(date +%s.%N)
  "$BIN" check "$file" --lab "$lab" --no-timing --seed 7 >"$OUT/$name.txt" 2>&1
  plain=$(seconds "$start")
  start=$(date +%s.%N)
  echo "=== with --lines" >>"$OUT/$name.txt"
  "$BIN" check "$file" --lab "$lab" --no-timing --seed 7 --lines >>"$OUT/$name.txt" 2>&1
  lines=$(seconds "$start")
  hot=$(grep -A1 '^lines:' "$OUT/$name.txt" | tail -1 | cut -c1-70)
  printf '%-34s %-18s %9s %9s  %s\n' "$file" "$lab" "$plain" "$lines" "$hot"
done
