#!/usr/bin/env bash
# Runs scripts/decode-kernels.py on the GPU machine: checks every kernel of
# kernels/paged-decode/ on the hazard cases and the timing shape, and times
# them against the measured copy and read roofs. The log and a JSON summary
# go to $OUT (or /tmp/decode-kernels-out); the short table comes last.
#   bash scripts/decode-kernels.sh
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export OUT=${OUT:-/tmp/decode-kernels-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee "$OUT/device.txt"
PYTHONUNBUFFERED=1 python3 "$ROOT/scripts/decode-kernels.py" 2>&1 | tee "$OUT/run.txt"
exit "${PIPESTATUS[0]}"
