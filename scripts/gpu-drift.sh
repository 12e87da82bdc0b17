#!/usr/bin/env bash
# The starter's honest drift on this card (docs/INTEGRITY.md, rule 7): each
# lab's starter and reference checked RUNS times, and per check the drift
# (the starter's median after the student's kernel against after itself),
# the SM clocks read after each side's drift launches, and the speedup.
# What sets DRIFT_LIMIT: the widest honest drift over both cards.
# Stops starting checks after BUDGET_S seconds, so it ends inside one device
# call; prints, last, one row per lab and kernel. JSON reports stay in $OUT.
#
# Usage: OUT=dir [RUNS=5] [BUDGET_S=480] [LABS="flash-prefill ..."] scripts/gpu-drift.sh path/to/flashprof
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${1:?usage: scripts/gpu-drift.sh path/to/flashprof}
OUT=${OUT:-drift-out}
RUNS=${RUNS:-5}
BUDGET_S=${BUDGET_S:-480}
LABS=${LABS:-flash-prefill paged-prefill paged-decode paged-prefill-fp8}
mkdir -p "$OUT/reports"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
start=$(date +%s)
for run in $(seq "$RUNS"); do
  for lab in $LABS; do
    for kernel in starter reference; do
      if [ $(( $(date +%s) - start )) -ge "$BUDGET_S" ]; then
        echo "budget of ${BUDGET_S}s spent before run $run of $lab $kernel" | tee -a "$OUT/drift.log"
        break 3
      fi
      timeout 90 "$BIN" check "kernels/$lab/$kernel.cu" --lab "$lab" --json \
        >"$OUT/reports/$lab.$kernel.$run.json" 2>>"$OUT/drift.log"
    done
  done
done
python3 - "$OUT/reports" <<'PY'
import json, pathlib, sys
from collections import defaultdict
rows = defaultdict(list)
for path in sorted(pathlib.Path(sys.argv[1]).glob("*.json")):
    lab, kernel, _ = path.stem.rsplit(".", 2)
    try:
        timing = json.loads(path.read_text()).get("timing") or {}
    except Exception as error:
        print(f"{path.name}: unreadable ({error})")
        continue
    drift = timing.get("drift") or {}
    if not drift:
        rows[(lab, kernel)].append("no drift")
        continue
    said = f"{drift['after_student_ms'] / drift['after_starter_ms'] - 1:+.1%}"
    clocks = (drift.get("clock_after_starter_mhz"), drift.get("clock_after_student_mhz"))
    if all(clocks):
        said += f" @{clocks[0]:.0f}/{clocks[1]:.0f}"
    speedup = (timing.get("speedup") or {}).get("point")
    said += f" {speedup:.2f}x" if speedup else " withheld"
    rows[(lab, kernel)].append(said)
print("| lab | kernel | each run: drift @ SM MHz after starter/after student, speedup |")
print("|---|---|---|")
for (lab, kernel), said in sorted(rows.items()):
    print(f"| {lab} | {kernel} | {'; '.join(said)} |")
PY
