#!/usr/bin/env bash
# The source view live (docs/TUI.md, `l`): the TUI under tmux on a GPU
# machine, watching a flash file saved as the starter, a ladder rung and the
# reference; after each save that passes, the line profile comes in. The
# view is captured open (`l`, at 120x40, 80x24 and 200x60) and hottest first
# (`o`). Last, from the session's history store: each save's verdict and
# what its line profile added (`phases.lines_ms`; the first save pays the
# line worker's start and the starter's profile).
# Usage: OUT=dir scripts/gpu-tui-lines.sh [path/to/flashprof]
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "${1:-target/release/flashprof}")
OUT=${OUT:-tui-lines-out}
mkdir -p "$OUT"
REPO=$PWD
WORK=$(mktemp -d)
cp kernels/flash-prefill/starter.cu "$WORK/prefill.cu"
# shellcheck source=scripts/tmux-capture.sh
. scripts/tmux-capture.sh
save() { cp "$REPO/$1" "$WORK/prefill.cu.tmp" && mv "$WORK/prefill.cu.tmp" "$WORK/prefill.cu"; }
# Waits until the history store holds N runs (at most 60 s).
runs() { for _ in $(seq 120); do [ "$(wc -l <"$WORK/.flashprof/history.jsonl" 2>/dev/null || echo 0)" -ge "$1" ] && return; sleep 0.5; done; }
tmux new-session -d -s fl -x 120 -y 40 "cd $WORK && $BIN prefill.cu 2>$OUT/tui-stderr.log"
runs 1
save kernels/flash-prefill/ladder/03-register-tiles.cu
runs 2
save kernels/flash-prefill/reference.cu
runs 3
sleep 1
tmux send-keys -t fl l
sleep 1
capture_sizes fl "$OUT/source-view"
tmux send-keys -t fl o
sleep 1
tmux capture-pane -p -t fl >"$OUT/source-view-hottest.txt"
tmux send-keys -t fl q
sleep 2
tmux kill-server 2>/dev/null
python3 - "$WORK/.flashprof/history.jsonl" <<'PY'
import json, sys
print(f"{'save':>4}  {'passed':>7}  {'speedup':>8}  {'lines ms':>9}  {'profile launches ms':>19}  hottest line")
for number, line in enumerate(open(sys.argv[1]), 1):
    report = json.loads(line).get("report") or {}
    cases = report.get("cases") or []
    passed = sum(c.get("status") == "pass" for c in cases)
    timing = report.get("timing") or {}
    speedup = (timing.get("speedup") or {}).get("point")
    lines = report.get("lines") or {}
    profile = lines.get("Ok")
    top = (profile or {}).get("lines") or [{}]
    line = top[0].get("line")
    line = line.get("student", line) if isinstance(line, dict) else line
    hot = f"{line} {100 * top[0].get('share', 0):.1f}%" if profile else lines.get("Err", "-")
    launches = f"{profile['collect_ms']:.0f}" if profile else "-"
    print(f"{number:>4}  {passed:>3}/{len(cases):<3}  {speedup or 0:>7.2f}x  {report.get('phases', {}).get('lines_ms', 0):>9.0f}  {launches:>19}  {hot}")
PY
cat "$OUT/source-view.txt"
