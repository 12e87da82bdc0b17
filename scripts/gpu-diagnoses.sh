#!/usr/bin/env bash
# Every planted bug of both labs checked on a GPU, with each case's diagnosis
# and the check's one line collected into one Markdown file (docs/DIAGNOSIS.md
# records a run). Reports go to $OUT/reports, the summary to $OUT/diagnoses.md.
#
# Usage: scripts/gpu-diagnoses.sh [path/to/flashprof]
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-target/release/flashprof}
OUT=${OUT:-diagnoses-out}
mkdir -p "$OUT/reports"
check() { # name, then flashprof arguments
  local name=$1; shift
  "$BIN" check "$@" --no-timing --case-timeout 4 --json >"$OUT/reports/$name.json" 2>>"$OUT/stderr.log"
  echo "$name rc=$?" >>"$OUT/runs.txt"
}
for kernel in kernels/flash-prefill/starter.cu kernels/flash-prefill/reference.cu kernels/flash-prefill/bugs/*.cu; do
  check "flash-$(basename "$kernel" .cu)" "$kernel"
done
for kernel in kernels/paged-prefill/starter.cu kernels/paged-prefill/reference.cu kernels/paged-prefill/bugs/*.cu; do
  check "paged-$(basename "$kernel" .cu)" "$kernel" --lab paged-prefill
done
python3 - "$OUT" >"$OUT/diagnoses.md" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
for path in sorted((out / "reports").glob("*.json")):
    try:
        report = json.loads(path.read_text())
    except Exception as error:
        print(f"### {path.stem}\n\nno report: {error}\n")
        continue
    print(f"### {path.stem}\n")
    print(f"verdict line: {report.get('diagnosis', '(none)')}\n")
    print("| case | result | cause | diagnosis |")
    print("|---|---|---|---|")
    for case in report.get("cases", []):
        if case["status"] == "pass":
            continue
        text = case["diagnosis"].replace("|", "\\|")
        print(f"| {case['name']} | {case['status']} | {case.get('cause', '')} | {text} |")
    passing = sum(1 for c in report.get("cases", []) if c["status"] == "pass")
    print(f"\n{passing} of {len(report.get('cases', []))} cases pass.\n")
PY
