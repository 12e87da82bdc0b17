#!/usr/bin/env bash
# Honest timing on a GPU machine, one lab per call (well under 8 minutes on an H200).
#
# Checks, with timing, every shipped kernel of the lab that has a speedup
# (starter, reference, ladder rungs, planted bugs), the planted cheats in
# kernels/**/cheats/ and the paged lab's streaming-read probe of the floor,
# with the build under test and, when given, an earlier build in the same
# call, so the two speedups of every kernel are measured side by side.
# Prints a table last: speedup before and after, their ratio, what the
# audit or the floor said, the floor's margin and the timing phase's wall
# time. JSON reports and logs go to $OUT/integrity (or ./integrity-out).
#
# fp8 and decode time the starter and the reference only (a check of the
# FP8 lab's starter takes about 14 s).
#
# Usage: scripts/gpu-integrity.sh flash|paged|fp8|decode [path/to/flashprof] [path/to/earlier/flashprof]
set -uo pipefail
cd "$(dirname "$0")/.."
LAB=${1:?flash, paged, fp8 or decode}
BIN=${2:-target/release/flashprof}
BEFORE=${3:-}
OUT=${OUT:-integrity-out}
REPORTS="$OUT/integrity/$LAB"
mkdir -p "$REPORTS"
LOG="$OUT/integrity/$LAB.log"
: >"$LOG"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv >>"$LOG" 2>&1 || true

case $LAB in
  flash)
    ARGS=(--lab flash-prefill)
    KERNELS=(kernels/flash-prefill/starter.cu kernels/flash-prefill/reference.cu kernels/flash-prefill/ladder/*.cu kernels/flash-prefill/bugs/*.cu kernels/flash-prefill/cheats/*.cu) ;;
  paged)
    ARGS=(--lab paged-prefill)
    KERNELS=(kernels/paged-prefill/starter.cu kernels/paged-prefill/reference.cu kernels/paged-prefill/bugs/*.cu kernels/paged-prefill/cheats/*.cu
      kernels/paged-prefill/stream-read-probe.cu) ;;
  fp8)
    ARGS=(--lab paged-prefill-fp8)
    KERNELS=(kernels/paged-prefill-fp8/starter.cu kernels/paged-prefill-fp8/reference.cu kernels/paged-prefill-fp8/cheats/*.cu) ;;
  decode)
    ARGS=(--lab paged-decode)
    KERNELS=(kernels/paged-decode/starter.cu kernels/paged-decode/reference.cu kernels/paged-decode/cheats/*.cu) ;;
  *) echo "unknown lab $LAB" >&2; exit 2 ;;
esac

for kernel in "${KERNELS[@]}"; do
  name=$(echo "${kernel#kernels/}" | tr '/' '_' | sed 's/\.cu$//')
  case $kernel in *hang.cu|*illegal-address.cu) continue ;; esac
  for side in after before; do
    bin=$BIN
    [ "$side" = before ] && bin=$BEFORE
    [ -n "$bin" ] || continue
    "$bin" check "$kernel" "${ARGS[@]}" --case-timeout 4 --json >"$REPORTS/$name.$side.json" 2>>"$LOG"
    echo "$name $side rc=$?" >>"$LOG"
  done
done
# A control for each memo keyed on values: the same file with the memo never
# consulted. Its speed next to the cheat's shows what the trick itself bought.
for memo in kernels/flash-prefill/cheats/memo-by-values.cu kernels/paged-prefill/cheats/memo-by-values.cu; do
  case $memo in kernels/paged-prefill/*) [ "$LAB" = paged ] || continue ;; *) [ "$LAB" = flash ] || continue ;; esac
  control="$REPORTS/memo-by-values-control.cu"
  sed 's/cheatHit = hit;/cheatHit = 0;/' "$memo" >"$control"
  "$BIN" check "$control" "${ARGS[@]}" --case-timeout 4 --json >"$REPORTS/control_memo-by-values.after.json" 2>>"$LOG"
done
python3 scripts/integrity_table.py "$REPORTS" | tee "$OUT/integrity/$LAB-table.txt"
