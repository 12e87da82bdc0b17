#!/usr/bin/env bash
# Where a check's time goes, lab by lab (the speed issue's table), for one or
# more builds of flashprof on the same card: each lab's reference checked by
# each build in turn, ROUNDS times (before, after, before, ...), so clock
# drift falls on all alike. Prints, last, one row per lab and build: the
# median of each phase over the rounds, the pairs timed, the speedup and how
# closely the GPU float64 reference matched the CPU oracle. JSON reports and
# the log stay in $OUT.
#
# Usage: OUT=dir [ROUNDS=3] [LABS="flash-prefill ..."] scripts/gpu-speed.sh tag=path/to/flashprof ...
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-speed-out}
ROUNDS=${ROUNDS:-3}
LABS=${LABS:-flash-prefill paged-prefill paged-prefill-fp8 paged-decode}
mkdir -p "$OUT/reports"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
for round in $(seq "$ROUNDS"); do
  for lab in $LABS; do
    for build in "$@"; do
      tag=${build%%=*}
      bin=${build#*=}
      start=$(date +%s%N)
      "$bin" check "kernels/$lab/reference.cu" --lab "$lab" --json \
        >"$OUT/reports/$lab.$tag.$round.json" 2>>"$OUT/speed.log"
      echo "$lab $tag $round rc=$? wall_ms=$(( ($(date +%s%N) - start) / 1000000 ))" >>"$OUT/speed.log"
    done
  done
done
python3 - "$OUT" <<'PY'
import json, pathlib, statistics, sys
from collections import defaultdict
out = pathlib.Path(sys.argv[1])
runs = defaultdict(list)
for path in sorted((out / "reports").glob("*.json")):
    lab, tag, _ = path.stem.rsplit(".", 2)
    try:
        runs[(lab, tag)].append(json.loads(path.read_text()))
    except Exception as error:
        print(f"{path.name}: unreadable ({error})")
def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else float("nan")
print(f"{'lab':<18} {'build':<8} {'check s':>8} {'timing s':>8} {'inputs':>7} {'refer.':>7} {'launch':>7} {'audits':>7} {'pairs':>5} {'speedup':>8} {'ref diff':>8}")
for (lab, tag), reports in runs.items():
    timing = [r.get("timing") or {} for r in reports]
    phases = [t.get("phases") or {} for t in timing]
    speedups = [(t.get("speedup") or {}).get("point") for t in timing]
    print(f"{lab:<18} {tag:<8} {median([r['phases']['total_ms'] for r in reports]) / 1e3:8.2f} "
          f"{median([r['phases']['timing_ms'] for r in reports]) / 1e3:8.2f} "
          + " ".join(f"{median([p.get(k) for p in phases]):7.0f}" for k in ("inputs_ms", "reference_ms", "launches_ms", "audits_ms"))
          + f" {median([(t.get('student') or {}).get('n') for t in timing]):5.0f}"
          + f" {median(speedups):7.2f}x"
          + f" {max((t.get('reference_check') or {}).get('max_rel_diff', float('nan')) for t in timing):8.1e}")
PY
