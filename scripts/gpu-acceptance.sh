#!/usr/bin/env bash
# GPU acceptance for flashprof, in one call on a machine with an NVIDIA GPU.
#
# Runs `flashprof check` on every shipped kernel of every lab, checks each verdict
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

run starter check kernels/flash-prefill/starter.cu --counters
run reference check kernels/flash-prefill/reference.cu --counters
for bug in kernels/flash-prefill/bugs/*.cu; do
  # A race does not show as differing runs on every call; racecheck names it
  # every time, so the kernels expected to race also get the sanitizer pass.
  extra=()
  head -1 "$bug" | grep -q ' race$' && extra=(--sanitize)
  run "bug-$(basename "$bug" .cu)" check "$bug" --no-timing --case-timeout 4 "${extra[@]}"
done

# The second lab, paged-prefill: the same checks on its kernels.
run paged-starter check kernels/paged-prefill/starter.cu --lab paged-prefill --counters
run paged-reference check kernels/paged-prefill/reference.cu --lab paged-prefill --counters
for bug in kernels/paged-prefill/bugs/*.cu; do
  run "paged-bug-$(basename "$bug" .cu)" check "$bug" --lab paged-prefill --no-timing --case-timeout 4
done

# The third lab, paged-prefill-fp8 (bf16 queries, FP8 cache): its kernels the same way.
run fp8-starter check kernels/paged-prefill-fp8/starter.cu --lab paged-prefill-fp8 --counters
run fp8-reference check kernels/paged-prefill-fp8/reference.cu --lab paged-prefill-fp8 --counters
for bug in kernels/paged-prefill-fp8/bugs/*.cu; do
  run "fp8-bug-$(basename "$bug" .cu)" check "$bug" --lab paged-prefill-fp8 --no-timing --case-timeout 4
done

# Honest timing (docs/INTEGRITY.md): every planted cheat of both labs, timed.
for cheat in kernels/flash-prefill/cheats/*.cu; do
  run "cheat-$(basename "$cheat" .cu)" check "$cheat" --case-timeout 4
done
for cheat in kernels/paged-prefill/cheats/*.cu; do
  run "paged-cheat-$(basename "$cheat" .cu)" check "$cheat" --lab paged-prefill --case-timeout 4
done
# Each memo keyed on values beside its control: the same file with the memo
# never consulted, so any speed the trick bought shows as a gap between them
# (the file's own code layout may differ from the starter's: docs/INTEGRITY.md).
sed 's/cheatHit = hit;/cheatHit = 0;/' kernels/flash-prefill/cheats/memo-by-values.cu >"$OUT/memo-control.cu"
run cheat-control-memo-by-values check "$OUT/memo-control.cu" --lab flash-prefill --case-timeout 4
sed 's/cheatHit = hit;/cheatHit = 0;/' kernels/paged-prefill/cheats/memo-by-values.cu >"$OUT/paged-memo-control.cu"
run paged-cheat-control-memo-by-values check "$OUT/paged-memo-control.cu" --lab paged-prefill --case-timeout 4
rm -f "$OUT/memo-control.cu" "$OUT/paged-memo-control.cu"
# A class holding the cheats, graded: each must be marked in its row.
for lab in flash-prefill paged-prefill; do
  class="$OUT/class-$lab"
  rm -rf "$class" "$OUT/gradebook-$lab"
  case $lab in
    flash-prefill) dir=kernels/flash-prefill ;;
    paged-prefill) dir=kernels/paged-prefill ;;
  esac
  for kernel in "$dir"/starter.cu "$dir"/cheats/*.cu; do
    mkdir -p "$class/$(basename "$kernel" .cu)"
    cp "$kernel" "$class/$(basename "$kernel" .cu)/prefill.cu"
  done
  "$BIN" grade "$class" --lab "$lab" --out "$OUT/gradebook-$lab" >>"$LOG" 2>&1
  echo "grade $lab rc=$?" >>"$LOG"
  cp "$OUT/gradebook-$lab/gradebook.csv" "$OUT/gradebook-$lab.csv" 2>>"$LOG"
  rm -rf "$class" "$OUT/gradebook-$lab"
done

# The human-readable reports of the two reference points, for docs/.
for kernel in starter reference; do
  "$BIN" check "kernels/flash-prefill/$kernel.cu" --counters >>"$OUT/summary.txt" 2>>"$LOG"
  "$BIN" check "kernels/paged-prefill/$kernel.cu" --lab paged-prefill --counters >>"$OUT/summary.txt" 2>>"$LOG"
  "$BIN" check "kernels/paged-prefill-fp8/$kernel.cu" --lab paged-prefill-fp8 --counters >>"$OUT/summary.txt" 2>>"$LOG"
done

# Loop latency, phase by phase.
"$BIN" bench kernels/flash-prefill/reference.cu --rounds 10 --markdown "$OUT/bench.md" >/dev/null 2>>"$LOG"

python3 scripts/acceptance_table.py "$OUT" >"$OUT/table.txt"
status=$?
# The fourth lab, paged-decode, graded on bytes: starter and reference pass,
# each planted bug fails exactly its listed cases with its name, the
# reference's speedup and its bandwidth share (scripts/gpu-decode.sh).
OUT="$OUT/decode" scripts/gpu-decode.sh "$BIN" >"$OUT/decode-table.txt" 2>>"$LOG" || status=1
# The Rust tests that need a GPU (ignored on CI), when their programs were
# carried (scripts/gpu-tests.sh build).
if [ -d target/gpu-tests ]; then
  scripts/gpu-tests.sh run "$BIN" >>"$OUT/table.txt" || status=1
fi

# Counter fidelity: flashprof's CUPTI values against Nsight Compute on the same
# kernel and shape (C = P = 2048). ncu runs flashprof itself (counters off, so
# the two profilers never meet) with one case at the timing shape, and profiles
# the second launch of attention_prefill (the case runs twice on the same
# inputs, so L2 is as warm as after flashprof's unprofiled warm-up launch),
# with clocks left alone as CUPTI leaves them, with ncu's cache flush and without.
# SM throughput, DRAM bytes, duration and each unit the roofline verdict names.
METRICS=$(python3 scripts/fidelity_table.py --ncu-metrics)
for kernel in starter reference; do
  for cache in all none; do
    ncu --clock-control none --cache-control "$cache" --target-processes all \
      --kernel-name attention_prefill --launch-skip 1 --launch-count 1 --metrics "$METRICS" \
      --csv --print-units base --log-file "$OUT/ncu-$kernel-$cache.csv" \
      "$BIN" check "kernels/flash-prefill/$kernel.cu" --cases scripts/timing-shape-case.toml \
      --no-timing --case-timeout 120 --json >/dev/null 2>>"$LOG"
  done
done
python3 scripts/fidelity_table.py "$OUT" >"$OUT/fidelity.txt"

# Counters held by another profiler: flashprof's own CUPTI session inside
# ncu must degrade to "unavailable" with a reason, while grading carries on.
ncu --target-processes all --kernel-name clock_probe --launch-count 1 --metrics gpu__time_duration.sum \
  "$BIN" check kernels/flash-prefill/reference.cu --counters >"$OUT/counters-under-ncu.txt" 2>>"$LOG"
echo "exit $?" >>"$OUT/counters-under-ncu.txt"

# Few files come back from the device: pack the raw material.
python3 - "$OUT" >"$OUT/gradebooks.txt" <<'PY'
import csv, pathlib, sys
for book in sorted(pathlib.Path(sys.argv[1]).glob("gradebook-*.csv")):
    print(book.stem)
    for row in csv.DictReader(book.open()):
        print(f"  {row['id']:<34} {row['status']:<8} {row['speedup'] or '-':>8}  {row['gate']:<10} {row['timing_integrity'][:90]}")
PY
tar czf "$OUT/raw.tgz" -C "$OUT" reports runs.txt $(cd "$OUT" && ls ncu-*.csv gradebook-*.csv 2>/dev/null) && rm -rf "$OUT/reports" "$OUT"/ncu-*.csv "$OUT/runs.txt" "$OUT"/gradebook-*.csv
grep -E "^counters|fix:|^PASS|^FAIL|^exit" "$OUT/counters-under-ncu.txt"
cat "$OUT/bench.md" "$OUT/fidelity.txt" "$OUT/gradebooks.txt" "$OUT/decode-table.txt" "$OUT/table.txt"
exit "$status"
