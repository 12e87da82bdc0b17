#!/usr/bin/env bash
# Records the lecture session that walks up the kernel ladder: the live TUI in
# lecture mode under tmux on a GPU machine, with the starter, then each rung of
# kernels/flash-prefill/ladder/ saved over the watched file in turn, and plain TF32 (the top
# rung without its split, fast and failing) saved just before the top rung.
# Each save waits for its check to land in the history store; the screen is
# captured after each. The store is what ships in assets/recorded-session-ladder
# (packed as $OUT/ladder-session.tgz) for `flashprof replay --ladder --present`.
#
# Usage: scripts/gpu-ladder-session.sh [path/to/flashprof]   (captures go to $OUT)
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "${1:-target/release/flashprof}")
OUT=${OUT:-ladder-session-out}
mkdir -p "$OUT/screens"
REPO=$PWD
WORK=$(mktemp -d)
HISTORY="$WORK/.flashprof/history.jsonl"
cp kernels/flash-prefill/starter.cu "$WORK/prefill.cu"

checks_done() {
  [ -f "$HISTORY" ] && wc -l <"$HISTORY" || echo 0
}
# Waits (at most 90 s) until the history holds $1 checks, then captures the screen as $2.
wait_and_capture() {
  local deadline=$((SECONDS + 90))
  while [ "$(checks_done)" -lt "$1" ] && [ $SECONDS -lt $deadline ]; do sleep 1; done
  sleep 1
  tmux capture-pane -p -t ladder >"$OUT/screens/$2.txt"
}
save() { # kernel file: replaces the watched file the way editors that rename do
  cp "$1" "$WORK/prefill.cu.tmp" && mv "$WORK/prefill.cu.tmp" "$WORK/prefill.cu"
}

top=$(ls kernels/flash-prefill/ladder/*.cu | tail -n 1)
sed 's/kSplitPrecision = true;/kSplitPrecision = false;/' "$top" >"$WORK/plain-tf32.cu"

tmux new-session -d -s ladder -x 120 -y 40 "cd $WORK && $BIN --present prefill.cu 2>$OUT/tui-stderr.log"
step=1
wait_and_capture $step 00-starter
for rung in kernels/flash-prefill/ladder/*.cu; do
  if [ "$rung" = "$top" ]; then
    save "$WORK/plain-tf32.cu"
    step=$((step + 1))
    wait_and_capture $step plain-tf32
  fi
  save "$REPO/$rung"
  step=$((step + 1))
  wait_and_capture $step "$(basename "$rung" .cu)"
done
tmux send-keys -t ladder q
sleep 2
tmux kill-session -t ladder 2>/dev/null
tar czf "$OUT/ladder-session.tgz" -C "$WORK" .flashprof
echo "recorded $(checks_done) checks"
