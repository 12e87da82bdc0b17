#!/usr/bin/env bash
# Drives the live TUI under tmux on a GPU machine and captures the screen:
# the starter, a compile error, two planted bugs (one with its heatmap open)
# and the tiled reference, saved one after another into the watched file.
# The history store it leaves behind is the recorded session that ships in
# assets/ (packed as session.tgz).
#
# Usage: scripts/gpu-tui-session.sh [path/to/flashprof]   (captures go to $OUT)
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "${1:-target/release/flashprof}")
OUT=${OUT:-tui-session-out}
mkdir -p "$OUT"
REPO=$PWD
WORK=$(mktemp -d)
cp kernels/flash-prefill/starter.cu "$WORK/prefill.cu"
PRESENT=${PRESENT:-}

# shellcheck source=scripts/tmux-capture.sh
. scripts/tmux-capture.sh
capture() { # name, seconds to wait first; at 120x40, 80x24 and 200x60
  sleep "$2"
  capture_sizes fp "$OUT/$1"
}
save() { # a kernel file to save over the watched one
  cp "$REPO/$1" "$WORK/prefill.cu.tmp" && mv "$WORK/prefill.cu.tmp" "$WORK/prefill.cu"
}

tmux new-session -d -s fp -x 120 -y 40 "cd $WORK && $BIN $PRESENT prefill.cu 2>$OUT/tui-stderr.log"
capture 01-starter 12
sed -i '20a flaot broken;' "$WORK/prefill.cu"
capture 02-compile-error 4
save kernels/flash-prefill/bugs/missing-l-rescale.cu
sleep 8
tmux send-keys -t fp Tab
tmux send-keys -t fp Enter
capture 03-missing-l-rescale-heatmap 2
tmux send-keys -t fp Escape
save kernels/flash-prefill/bugs/tile-edge.cu
capture 04-tile-edge 8
save kernels/flash-prefill/reference.cu
capture 05-reference 10
tmux send-keys -t fp q
sleep 2
tmux kill-server 2>/dev/null
tar czf "$OUT/session.tgz" -C "$WORK" .flashprof prefill.cu
# Each save's counters, from the history store: every value must be finite.
python3 - "$WORK/.flashprof/history.jsonl" >"$OUT/counters-per-save.txt" <<'PY'
import json, sys
for number, line in enumerate(open(sys.argv[1]), 1):
    report = json.loads(line)["report"]
    tiers = []
    for outcome in (c.get("Ok") for c in report.get("counters") or []):
        if not outcome:
            tiers.append("unavailable")
            continue
        values = [m["value"] for k in ("student", "starter") for m in outcome[k]["metrics"]]
        bad = sum(not isinstance(v, (int, float)) or v != v for v in values)
        tiers.append(f"{outcome['tier']} {outcome['elapsed_ms']:.0f} ms {'all finite' if bad == 0 else f'{bad} NOT FINITE'}")
    print(f"save {number}: {'; '.join(tiers) or 'no counters'}")
PY
cat "$OUT/counters-per-save.txt"
for f in "$OUT"/0*.txt; do
  case $f in *-80x24.txt | *-200x60.txt) continue ;; esac
  echo "=== $f"
  cat "$f"
done
