#!/usr/bin/env bash
# Copies the TUI snapshots that the docs show into docs/screens/ as plain
# text: each snapshot's quoted rows, unquoted, trailing spaces dropped. Run it
# after `cargo insta accept` when one of these screens changed. (The other
# files there are captured live on a GPU by scripts/gpu-tui-session.sh and
# scripts/gpu-ladder-session.sh.)
set -euo pipefail
cd "$(dirname "$0")/.."
copy() {
  sed -n '/^"/{s/^"//;s/"$//;s/ *$//;p}' "tests/snapshots/$1.snap" >"docs/screens/$2.txt"
}
for size in 80x24 120x40 160x50; do
  copy "tui_recorded__ladder_top_rung_$size" "tui-ladder-top-rung-$size"
done
copy tui_recorded__ladder_top_rung_present_120x40 tui-ladder-top-rung-present-120x40
# The lecture replay (`flashprof replay --ladder --present`), rung by rung.
for rung in starter rung_1 plain_tf32 top_rung; do
  for size in 80x24 120x40 200x60; do
    copy "tui_recorded__ladder_present_${rung}_$size" "tui-ladder-present-${rung//_/-}-$size"
  done
done
copy tui_view__counters_overlay_120x40 tui-counters-overlay-120x40
