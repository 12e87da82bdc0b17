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

"$BIN" doctor >"$OUT/doctor.txt" 2>>"$LOG"
# What Nsight Compute reads of the compute benchmarks' pipes (flashprof reads
# the same under CUPTI once, as the ceiling a kernel of those instructions
# can reach); each with an empty cache, so the benchmarks run.
for probe in fma_peak tf32_peak bf16_peak; do
  XDG_CACHE_HOME="$OUT/cache-$probe" ncu --clock-control none --kernel-name "$probe" --launch-skip 1 --launch-count 1 \
    --metrics sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum \
    --csv --print-units base --log-file "$OUT/ncu-probe-$probe.csv" "$BIN" doctor >/dev/null 2>>"$LOG"
done

KERNELS=("$@")
[ ${#KERNELS[@]} -eq 0 ] && KERNELS=(starter=kernels/flash-prefill/starter.cu reference=kernels/flash-prefill/reference.cu)
METRICS=$(python3 scripts/fidelity_table.py --ncu-metrics)
names=()
for entry in "${KERNELS[@]}"; do
  name=${entry%%=*}; file=${entry#*=}; names+=("$name")
  "$BIN" check "$file" --counters --json >"$OUT/reports/$name.json" 2>>"$LOG"
  "$BIN" check "$file" --counters >"$OUT/summary-$name.txt" 2>>"$LOG"
  ncu --clock-control none --cache-control all --target-processes all \
    --kernel-name attention_prefill --launch-skip 1 --launch-count 1 --metrics "$METRICS" \
    --csv --print-units base --log-file "$OUT/ncu-$name-all.csv" \
    "$BIN" check "$file" --cases scripts/timing-shape-case.toml \
    --no-timing --case-timeout 120 --json >/dev/null 2>>"$LOG"
done
python3 scripts/fidelity_table.py "$OUT" "${names[@]}" | tee "$OUT/fidelity.txt"
# After the first counters request: the peaks with their pipe loads, from the cache.
"$BIN" doctor >>"$OUT/doctor.txt" 2>>"$LOG"
cp "$XDG_CACHE_HOME/flashprof/peaks.json" "$OUT/peaks.json" 2>>"$LOG"
grep -h -E '"(Metric Name|Kernel Name)"|pipe' "$OUT"/ncu-probe-*.csv | cut -d, -f5,13-16 >"$OUT/probe-pipes.txt" 2>>"$LOG"
