#!/usr/bin/env bash
# Everything that needs the GPU, in one device call: acceptance (verdicts,
# loop latency, counter fidelity), the lecture-mode TUI session and the TA
# workflows. Packs all output into $OUT/all.tgz and prints the summaries.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=${OUT:-final-out}
OUT=$ROOT/acceptance scripts/gpu-acceptance.sh >/dev/null 2>&1
OUT=$ROOT/present PRESENT=--present scripts/gpu-tui-session.sh >/dev/null 2>&1
OUT=$ROOT/ta scripts/gpu-ta.sh >/dev/null 2>&1
rm -f "$ROOT/acceptance/raw.tgz"   # raw JSON reports: large, and summarised below
tar czf "$ROOT/all.tgz" -C "$ROOT" acceptance present ta
cat "$ROOT/acceptance/fidelity.txt" "$ROOT/acceptance/table.txt"
grep -E "^counters|^exit" "$ROOT/acceptance/counters-under-ncu.txt"
grep -A3 "### calibrate" "$ROOT/ta/ta.txt"; grep -E "speed gate|^exit|graded" "$ROOT/ta/ta.txt"
rm -rf "$ROOT/acceptance" "$ROOT/present" "$ROOT/ta"
