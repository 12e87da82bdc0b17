#!/usr/bin/env bash
# Loop latency on the GPU: verdicts before the optimizer (docs/PERFORMANCE.md).
# `flashprof bench` on the heavy kernel kept for it
# (kernels/flash-prefill/bench/unrolled-register-tiles.cu) with each quick build and with
# none, on the reference with the default quick build, and nvcc on the heavy
# kernel for comparison. Prints a short table last; logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-loop-out}
mkdir -p "$OUT"
BIN=${FLASHPROF_BIN:-target/release/flashprof}
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/cuda-13.0/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
HEAVY=kernels/flash-prefill/bench/unrolled-register-tiles.cu
LOG=$OUT/loop.log
: >"$LOG"

for quick in fast-compile debug off; do
  "$BIN" bench "$HEAVY" --rounds 4 --quick-build "$quick" --markdown "$OUT/heavy-$quick.md" >/dev/null 2>>"$LOG"
  echo "bench heavy $quick: exit $?" >>"$LOG"
done
"$BIN" bench kernels/flash-prefill/reference.cu --rounds 10 --markdown "$OUT/reference-fast-compile.md" >/dev/null 2>>"$LOG"
echo "bench reference fast-compile: exit $?" >>"$LOG"

# nvcc on the same file, for scale (the student's own toolchain).
nvcc_ms=()
for i in 1 2 3; do
  start=$(date +%s%N)
  nvcc -cubin -arch=sm_90 -o "$OUT/heavy.cubin" "$HEAVY" -DINFINITY=__int_as_float\(0x7f800000\) >>"$LOG" 2>&1
  nvcc_ms+=($(( ($(date +%s%N) - start) / 1000000 )))
done
echo "nvcc -cubin -arch=sm_90 on $HEAVY: ${nvcc_ms[*]} ms" >"$OUT/nvcc.txt"

{
  for f in "$OUT"/heavy-*.md "$OUT"/reference-fast-compile.md; do
    echo "### $(basename "$f" .md)"
    grep -E "^\| (quick build|request to|cases given|optimized build|hazard cases|final verdict|compile \+ load|all hazard)" "$f"
    grep -E "^Quick and optimized|^Every warm" "$f"
  done
  cat "$OUT/nvcc.txt"
} >"$OUT/table.txt"
grep -E "exit" "$LOG"
cat "$OUT/table.txt"
