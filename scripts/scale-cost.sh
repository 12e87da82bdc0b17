#!/usr/bin/env bash
# What the cases at scale cost a check (issue 37, docs/PERFORMANCE.md "Cases
# at scale"): each lab's reference checked in full (timing on) with its
# embedded cases, then with the same cases less the high-blocks and long
# ones, alternating, ROUNDS times. A graded file pays what a check pays.
# Prints one line per check and a table of medians last.
#
# Usage: OUT=dir ROUNDS=3 scripts/scale-cost.sh [path/to/flashprof]
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-target/release/flashprof}
OUT=${OUT:-scale-cost-out}
ROUNDS=${ROUNDS:-3}
mkdir -p "$OUT/reports"
: >"$OUT/runs.txt"
without_scale() { # cases file -> the same file less the cases at scale
  python3 - "$1" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
parts = re.split(r"(?m)^(?=\[\[case\]\]$)", text)
keep = [p for p in parts if not re.search(r'(?m)^name = "(high-blocks-past-2-3[12]|long-context-32k|long-prefix-16k)"', p)]
sys.stdout.write("".join(keep))
PY
}
for spec in flash-prefill:assets/cases.toml paged-prefill:assets/paged-cases.toml paged-prefill-fp8:assets/paged-prefill-fp8-cases.toml; do
  lab=${spec%%:*}
  cases=${spec#*:}
  without_scale "$cases" >"$OUT/$lab-without.toml"
  for round in $(seq 1 "$ROUNDS"); do
    for set in with without; do
      extra=()
      [ $set = without ] && extra=(--cases "$OUT/$lab-without.toml")
      start=$(date +%s%N)
      "$BIN" check "kernels/$lab/reference.cu" --lab "$lab" "${extra[@]}" --json >"$OUT/reports/$lab-$set-$round.json" 2>>"$OUT/log.txt"
      rc=$?
      echo "$lab $set $round $rc $(awk "BEGIN { print ($(date +%s%N) - $start) / 1e9 }")" | tee -a "$OUT/runs.txt"
    done
  done
done
python3 - "$OUT" <<'PY'
import json, pathlib, statistics, sys
out = pathlib.Path(sys.argv[1])
rows = {}
for line in (out / "runs.txt").read_text().splitlines():
    lab, which, rnd, rc, wall = line.split()
    report = json.loads((out / "reports" / f"{lab}-{which}-{rnd}.json").read_text() or "{}")
    phases = report.get("phases") or {}
    rows.setdefault((lab, which), []).append((float(wall), phases.get("cases_ms", 0.0), phases.get("timing_ms", 0.0), len(report.get("cases", [])), int(rc)))
print(f"{'lab':<20} {'cases':>5} {'check s':>8} {'cases ms':>9} {'timing ms':>10} {'rc':>3}")
for (lab, which), runs in sorted(rows.items()):
    med = lambda k: statistics.median(r[k] for r in runs)
    print(f"{lab + ' ' + which:<20} {runs[0][3]:>5} {med(0):>8.2f} {med(1):>9.0f} {med(2):>10.0f} {max(r[4] for r in runs):>3}")
PY
