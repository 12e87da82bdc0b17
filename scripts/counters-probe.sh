#!/usr/bin/env bash
# Which CUPTI metric sets come back with values on this GPU: runs
# `flashprof check --metrics` over a few sets and prints passes and values.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release/flashprof}
KERNEL=${1:-kernels/flash-prefill/reference.cu}
for set in \
  sm__throughput.avg.pct_of_peak_sustained_elapsed \
  sm__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum \
  lts__t_sector_hit_rate.pct \
  lts__t_sectors_lookup_hit.sum,lts__t_sectors_lookup_miss.sum \
  sm__inst_executed.avg.pct_of_peak_sustained_elapsed,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed \
  gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed; do
  "$BIN" check "$KERNEL" --no-timing --metrics "$set" --json 2>/dev/null | python3 scripts/counters_values.py
done
