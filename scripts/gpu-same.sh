#!/usr/bin/env bash
# Two builds of flashprof on the same card, side by side: every shipped
# kernel of every lab checked by both (same seed), the verdicts compared case
# by case, and each lab's reference timed three times by each build in turn
# (before, after, before, ...) so clock drift falls on both alike. For a
# refactor that must change nothing a student sees (issue 34). A short table
# comes last; JSON reports and the log stay in $OUT.
#
# Usage: OUT=dir scripts/gpu-same.sh path/to/flashprof-before path/to/flashprof-after
set -uo pipefail
cd "$(dirname "$0")/.."
BEFORE=$1
AFTER=$2
OUT=${OUT:-same-out}
mkdir -p "$OUT/reports"
LOG="$OUT/same.log"
: >"$LOG"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >"$OUT/gpu.txt" 2>>"$LOG" || true

check() { # build name, report name, then flashprof arguments
  local bin=$1 tag=$2 name=$3
  shift 3
  "$bin" check "$@" --seed 7 --json >"$OUT/reports/$tag-$name.json" 2>>"$LOG"
  echo "$tag $name rc=$?" >>"$LOG"
}

for lab in flash-prefill paged-prefill paged-prefill-fp8 paged-decode; do
  for kernel in kernels/$lab/starter.cu kernels/$lab/bugs/*.cu; do
    name="$lab-$(basename "$kernel" .cu)"
    # A racing kernel's output differs from run to run: the earlier build
    # checks it twice, so what differs between two runs of one build shows.
    builds=("before $BEFORE" "after $AFTER")
    head -1 "$kernel" | grep -q ' race$' && builds+=("control $BEFORE")
    for pair in "${builds[@]}"; do
      set -- $pair
      check "$2" "$1" "$name" "$kernel" --lab "$lab" --no-timing --case-timeout 4
    done
  done
  for round in 1 2 3; do
    for pair in "before $BEFORE" "after $AFTER"; do
      set -- $pair
      check "$2" "$1" "$lab-reference-$round" "kernels/$lab/reference.cu" --lab "$lab"
    done
  done
done

python3 - "$OUT" <<'PY'
import json, pathlib, statistics, sys
out = pathlib.Path(sys.argv[1])
def load(tag, name):
    try:
        return json.loads((out / "reports" / f"{tag}-{name}.json").read_text())
    except Exception as error:
        return {"error": str(error)}
def verdict(report):
    cases = [(c["name"], c["status"], c.get("cause")) for c in report.get("cases", [])]
    return (report.get("passed"), report.get("diagnosis"), cases, report.get("error"))
names = sorted({p.name.split("-", 1)[1][:-5] for p in (out / "reports").glob("before-*.json")})
rows, same = [], 0
for name in names:
    if "reference-" in name:
        continue
    a, b = verdict(load("before", name)), verdict(load("after", name))
    failed = sum(s != "pass" for _, s, _ in b[2])
    ok = a == b and b[3] is None
    control = load("control", name)
    if not ok and "error" not in control:
        # A racing kernel: the same build differs from itself too.
        c = verdict(control)
        fails = lambda v: sum(s != "pass" for _, s, _ in v[2])
        if c != a:
            ok = True
            rows.append(f"racy      {name:<48} fails {fails(a)}, {fails(c)} (before, twice), {fails(b)} (after) of {len(b[2])}")
            same += 1
            continue
    same += ok
    rows.append(f"{'same' if ok else 'DIFFERENT':<9} {name:<48} {failed}/{len(b[2])} cases fail")
print(open(out / "gpu.txt").read().strip())
print(f"verdicts: {same} of {len(rows)} kernels the same, case by case (status, cause, diagnosis line)")
for row in rows:
    if not row.startswith("same"):
        print("  " + row)
print("(racy: a racing kernel whose two runs of the earlier build differ as much)")
print(f"{'lab':<20} {'before (3 runs)':<26} {'after (3 runs)':<26} {'median after/before':>20}")
worst = 0.0
for lab in ["flash-prefill", "paged-prefill", "paged-prefill-fp8", "paged-decode"]:
    def speedups(tag):
        got = []
        for r in (1, 2, 3):
            rep = load(tag, f"{lab}-reference-{r}")
            same_cases = all(c["status"] == "pass" for c in rep.get("cases", [])) and rep.get("cases")
            point = ((rep.get("timing") or {}).get("speedup") or {}).get("point")
            got.append(point if same_cases else None)
        return got
    before, after = speedups("before"), speedups("after")
    fmt = lambda xs: " ".join("-" if x is None else f"{x:.2f}x" for x in xs)
    if None in before or None in after:
        ratio = "missing"
        worst = float("inf")
    else:
        r = statistics.median(after) / statistics.median(before)
        worst = max(worst, abs(r - 1))
        ratio = f"{r:.3f}"
    print(f"{lab:<20} {fmt(before):<26} {fmt(after):<26} {ratio:>20}")
print(f"largest change of a median speedup: {worst * 100:.1f}%")
sys.exit(0 if same == len(rows) and worst <= 0.03 else 1)
PY
