#!/usr/bin/env bash
# The short GPU checks owed on 2026-12-07, one device call, about 30 s:
# the decode lab's combine bugs rebuilt at splits=4 (each failing case must
# name the bug at the kernel's own split, docs/DIAGNOSIS.md), seeds 11 and
# 29; and a case of each lab that brings its own tensors (the golden
# folders), whose files the sandboxed worker reads through per-file grants
# (docs/SECURITY.md row 40). One line per check.
# Usage: scripts/gpu-owed.sh [path/to/flashprof]
set -uo pipefail
cd "$(dirname "$0")/.."
FP=${1:-target/release/flashprof}
OUT=${OUT:-owed-out}
GPU=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); echo "GPU: $GPU  $(date -u +%FT%TZ)"
mkdir -p "$OUT/decode"
for bug in combine-unscaled combine-all-slots; do
  sed 's/splits=16/splits=4/' kernels/paged-decode/bugs/$bug.cu > $OUT/$bug-4.cu
  for seed in 11 29; do
    $FP check $OUT/$bug-4.cu --lab paged-decode --seed $seed --no-timing --case-timeout 4 --json > $OUT/decode/$bug.$seed.json 2>>$OUT/err.log
    python3 - $OUT/decode/$bug.$seed.json $bug $seed <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); bug = sys.argv[2]
failing = [c for c in r.get("cases", []) if c["status"] != "pass"]
named = sum(1 for c in failing if c.get("cause") == bug)
others = sorted({(c.get("cause") or "-") for c in failing if c.get("cause") != bug})
print(f"splits=4 {bug:<18} seed {sys.argv[3]}: {named} of {len(failing)} failing name it; others {others}; line: {(r.get('diagnosis') or '(none)')[:110]}")
PY
  done
done
# Cases that bring their own tensors, read by the sandboxed worker through file grants (bdf7e72).
# The paged golden case was made with a sliding window of 6, which is not a
# file (windows come from recipes): its case says so.
for spec in "flash-prefill:golden:" "paged-prefill:golden-paged:window = 6" "paged-decode:golden-paged-decode:"; do
  IFS=: read -r lab folder extra <<<"$spec"; dir=$PWD/assets/$folder
  printf '[[case]]\nname = "own-tensors"\nsummary = "the golden folder"\ntensors = "%s"\n%s\n' "$dir" "$extra" > $OUT/$lab-own.toml
  $FP check kernels/$lab/reference.cu --lab $lab --cases $OUT/$lab-own.toml --no-timing --json > $OUT/own-$lab.json 2>>$OUT/err.log
  echo "own tensors $lab rc=$? $(python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print([(c['name'], c['status'], c.get('max_abs_error')) for c in r.get('cases',[])], (r.get('compile') or {}).get('ok'))" $OUT/own-$lab.json 2>&1 | cut -c1-200)"
done
