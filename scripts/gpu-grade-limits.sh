#!/usr/bin/env bash
# A TA raises a limit and grades the class again, on a GPU. A class of the
# starter and the planted hang (kernels/flash-prefill/bugs/hang.cu) is graded
# with --case-timeout 2, again under the same limit (both rows must be
# reused), then with --case-timeout 3 (only the hung submission, which the
# old limit cut short, is graded again). Prints each run's lines, then a table.
# Usage: OUT=dir scripts/gpu-grade-limits.sh [path/to/flashprof]
set -uo pipefail
cd "$(dirname "$0")/.."
F=$(realpath "${1:-target/release/flashprof}")
OUT=${OUT:-grade-limits-out}
mkdir -p "$OUT"
CLASS=$(mktemp -d)
mkdir -p "$CLASS/ada" "$CLASS/mallory"
cp kernels/flash-prefill/starter.cu "$CLASS/ada/prefill.cu"
cp kernels/flash-prefill/bugs/hang.cu "$CLASS/mallory/prefill.cu"
BOOK=$(mktemp -d)/book
LOG="$OUT/grade-limits.log"
: >"$LOG"
: >"$OUT/rows.txt"
grade() { # name, case timeout
  local start wall
  start=$(date +%s%N)
  "$F" grade "$CLASS" --out "$BOOK" --seed 7 --no-timing --case-timeout "$2" >"$OUT/$1.out" 2>&1
  local rc=$?
  wall=$(awk "BEGIN { printf \"%.1f\", ($(date +%s%N) - $start) / 1e9 }")
  { echo "### $1 (--case-timeout $2): exit $rc, $wall s"; cat "$OUT/$1.out"; } >>"$LOG"
  local now reused said
  now=$(grep -o 'graded [0-9]* submissions now' "$OUT/$1.out" | grep -o '[0-9]*')
  reused=$(grep -o '[0-9]* already in the journal' "$OUT/$1.out" | grep -o '^[0-9]*')
  said=$(grep -c 'a limit cut each short' "$OUT/$1.out")
  echo "$1 $2 $rc $wall ${now:-?} ${reused:-?} $said" >>"$OUT/rows.txt"
}
grade first 2
grade same-limit 2
grade raised-limit 3
cp "$BOOK/gradebook.csv" "$OUT/gradebook.csv"
python3 - "$BOOK/journal.jsonl" >>"$LOG" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    e = json.loads(line)
    hung = [c["name"] for c in (e.get("report") or {}).get("cases", []) if c["status"] == "timeout"]
    print(e["id"], e["status"], e.get("limits"), "timed out:", hung)
PY
cat "$LOG"
echo
printf '%-13s %-14s %-5s %-7s %-10s %-7s %s\n' run case-timeout exit wall_s graded_now reused "says why"
while read -r name limit rc wall now reused said; do
  printf '%-13s %-14s %-5s %-7s %-10s %-7s %s\n' "$name" "$limit s" "$rc" "$wall" "$now" "$reused" "$([ "$said" -gt 0 ] && echo yes || echo no)"
done <"$OUT/rows.txt"
ok=$(awk '($1=="first" && $5==2) || ($1=="same-limit" && $5==0 && $6==2 && $7==0) || ($1=="raised-limit" && $5==1 && $6==1 && $7>0) {n++} END {print n+0}' "$OUT/rows.txt")
[ "$ok" = 3 ] && echo "GRADE LIMITS PASSED" || { echo "GRADE LIMITS FAILED"; exit 1; }
