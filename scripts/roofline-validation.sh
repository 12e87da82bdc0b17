#!/usr/bin/env bash
# The roofline's per-unit breakdown against Nsight Compute, on a few kernels,
# plus the peak benchmarks (doctor, twice: measured, then from the cache).
#
# Usage: scripts/roofline-validation.sh BIN NAME=KERNEL.cu ...
# (default kernels: starter and reference). Output under $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-target/release/flashprof}
shift || true
OUT=${OUT:-roofline-out}
mkdir -p "$OUT/reports"
LOG="$OUT/validation.log"
: >"$LOG"
export XDG_CACHE_HOME="$OUT/cache"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv >>"$LOG" 2>&1 || true

{ "$BIN" doctor; echo; "$BIN" doctor; } >"$OUT/doctor.txt" 2>>"$LOG"
cp "$XDG_CACHE_HOME/flashprof/peaks.json" "$OUT/peaks.json" 2>>"$LOG"

KERNELS=("$@")
[ ${#KERNELS[@]} -eq 0 ] && KERNELS=(starter=kernels/starter.cu reference=kernels/reference.cu)
cat >"$OUT/timing-case.toml" <<'CASES'
[[case]]
name = "timing-shape"
summary = "the timing shape, one launch for Nsight Compute"
chunk = 2048
prefix = 2048
CASES
METRICS=$(python3 scripts/fidelity_table.py --ncu-metrics)
names=()
for entry in "${KERNELS[@]}"; do
  name=${entry%%=*}; file=${entry#*=}; names+=("$name")
  "$BIN" check "$file" --counters --json >"$OUT/reports/$name.json" 2>>"$LOG"
  "$BIN" check "$file" --counters >"$OUT/summary-$name.txt" 2>>"$LOG"
  ncu --clock-control none --cache-control all --target-processes all \
    --kernel-name attention_prefill --launch-skip 1 --launch-count 1 --metrics "$METRICS" \
    --csv --print-units base --log-file "$OUT/ncu-$name-all.csv" \
    "$BIN" check "$file" --cases "$OUT/timing-case.toml" \
    --no-timing --case-timeout 120 --json >/dev/null 2>>"$LOG"
done
python3 scripts/fidelity_table.py "$OUT" "${names[@]}" | tee "$OUT/fidelity.txt"
