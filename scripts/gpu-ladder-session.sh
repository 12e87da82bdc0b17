#!/usr/bin/env bash
# Records a lecture session that walks a lab's kernels from the starter up:
# the live TUI in lecture mode under tmux on a GPU machine, each kernel saved
# over the watched file in turn. Each save waits for its check to land in the
# history store; the screen is captured after each. The store is what ships in
# assets/ for `flashprof replay`, packed as $OUT/<walk>-session.tgz.
#
#   prefill (default): the flash-prefill ladder, the starter then each rung of
#     kernels/flash-prefill/ladder/, plain TF32 (the top rung without its
#     split, fast and failing) saved just before the top rung; ships in
#     assets/recorded-session-ladder (`replay --ladder`).
#   decode: the paged-decode walk, the starter, each step of
#     kernels/paged-decode/walk/, then the reference; ships in
#     assets/recorded-session-decode-walk (`replay --decode-walk`).
#
# Usage: scripts/gpu-ladder-session.sh [path/to/flashprof] [prefill|decode]   (captures go to $OUT)
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "${1:-target/release/flashprof}")
WALK=${2:-prefill}
OUT=${OUT:-ladder-session-out}
mkdir -p "$OUT/screens"
REPO=$PWD
WORK=$(mktemp -d)
HISTORY="$WORK/.flashprof/history.jsonl"
case $WALK in
  prefill)
    WATCHED=prefill.cu
    STARTER=kernels/flash-prefill/starter.cu
    STEPS=(kernels/flash-prefill/ladder/*.cu)
    ;;
  decode)
    WATCHED=decode.cu
    STARTER=kernels/paged-decode/starter.cu
    STEPS=(kernels/paged-decode/walk/*.cu kernels/paged-decode/reference.cu)
    ;;
  *) echo "usage: $0 [flashprof] [prefill|decode]" >&2; exit 2 ;;
esac
cp "$STARTER" "$WORK/$WATCHED"

# shellcheck source=scripts/tmux-capture.sh
. scripts/tmux-capture.sh
checks_done() {
  [ -f "$HISTORY" ] && wc -l <"$HISTORY" || echo 0
}
# Waits (at most 90 s) until the history holds $1 checks, then captures the
# screen as $2 (at 120x40, 80x24 and 200x60).
wait_and_capture() {
  local deadline=$((SECONDS + 90))
  while [ "$(checks_done)" -lt "$1" ] && [ $SECONDS -lt $deadline ]; do sleep 1; done
  sleep 1
  capture_sizes ladder "$OUT/screens/$2"
}
save() { # kernel file: replaces the watched file the way editors that rename do
  cp "$1" "$WORK/$WATCHED.tmp" && mv "$WORK/$WATCHED.tmp" "$WORK/$WATCHED"
}

# Only the prefill ladder has the failing plain-TF32 step before its top rung.
top=none
if [ "$WALK" = prefill ]; then
  top=${STEPS[-1]}
  sed 's/kSplitPrecision = true;/kSplitPrecision = false;/' "$top" >"$WORK/plain-tf32.cu"
fi

tmux new-session -d -s ladder -x 120 -y 40 "cd $WORK && $BIN --present $WATCHED 2>$OUT/tui-stderr.log"
step=1
wait_and_capture $step 00-starter
for rung in "${STEPS[@]}"; do
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
tar czf "$OUT/$WALK-session.tgz" -C "$WORK" .flashprof
echo "recorded $(checks_done) checks"
