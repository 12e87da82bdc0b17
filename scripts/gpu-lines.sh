#!/usr/bin/env bash
# The line profile on the GPU machine (docs/LINE-PROFILE.md): the collector's
# own test (a bank conflict and a strided load on their own lines), then the
# cost per save of each lab's reference (and the flash starter) through
# `flashprof bench`: a check with `--lines` on a fresh line worker (the
# first save, the starter's profile included) and then saves on the line
# worker kept between them, as the TUI keeps it. Logs under $OUT; a short
# table last.
# Usage: OUT=dir scripts/gpu-lines.sh [path/to/flashprof]
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-target/release/flashprof}
OUT=${OUT:-gpu-lines-out}
mkdir -p "$OUT"
if [ -x target/gpu-tests/line_profile_gpu ]; then
  target/gpu-tests/line_profile_gpu --ignored --nocapture >"$OUT/collector-test.log" 2>&1
  echo "collector test rc=$? $(grep -E '^test result' "$OUT/collector-test.log")"
fi
for pair in flash-prefill:kernels/flash-prefill/reference.cu flash-prefill:kernels/flash-prefill/starter.cu \
  paged-prefill:kernels/paged-prefill/reference.cu paged-prefill-fp8:kernels/paged-prefill-fp8/reference.cu \
  paged-decode:kernels/paged-decode/reference.cu; do
  lab=${pair%%:*}; file=${pair#*:}; name=$(echo "$file" | tr '/' '_')
  "$BIN" bench "$file" --lab "$lab" --rounds 1 --markdown "$OUT/$name.md" >/dev/null 2>"$OUT/$name.err" \
    || echo "$file: bench failed: $(tail -1 "$OUT/$name.err")"
done
echo
echo "| kernel | first save ms | later saves, median ms | max ms | waiting for the worker | worker request | CUPTI setup | launches | sampled | counted | charging |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for md in "$OUT"/*.md; do
  python3 - "$md" <<'PY'
import sys, re
text = open(sys.argv[1]).read()
name = re.search(r"Loop latency: `([^`]*)`", text)
rows = {}
names = ("added to the save (the lines phase)", "waiting for the line worker started ahead",
         "the line worker's request", "CUPTI's line APIs set up", "the profile's three launches",
         "the sampled launch (PC Sampling)", "the counted launch (SASS Metrics)",
         "charging the samples to lines")
for line in text.splitlines():
    cells = [c.strip() for c in line.strip("|").split("|")]
    if len(cells) == 4 and cells[0] in names:
        rows[cells[0]] = cells[1:]
if not rows:
    why = re.search(r"Line profile on a save: (.*)", text)
    print(f"| {name.group(1) if name else sys.argv[1]} | {why.group(1) if why else 'no line rounds'} |")
else:
    a, r, w, u, l, s, c, h = (rows.get(n, ["-"] * 3) for n in names)
    print(f"| {name.group(1)} | {a[0]} | {a[1]} | {a[2]} | {r[1]} | {w[1]} | {u[1]} | {l[1]} | {s[1]} | {c[1]} | {h[1]} |")
PY
done
