#!/usr/bin/env bash
# Copies the TUI snapshots that the docs show into docs/screens/ as plain
# text: each snapshot's quoted rows, unquoted, trailing spaces dropped. Run it
# after `cargo insta accept` when one of these screens changed. (The files in
# docs/screens/live/ are captured live on a GPU by scripts/gpu-tui-session.sh,
# scripts/gpu-ladder-session.sh and scripts/gpu-ta-multi.sh.)
set -euo pipefail
cd "$(dirname "$0")/.."
# SCREENS_DIR: where the copies go (tests/tui_recorded.rs writes them
# elsewhere to check that docs/screens/ holds the current ones).
SCREENS_DIR=${SCREENS_DIR:-docs/screens}
copy() {
  sed -n '/^"/{s/^"//;s/"$//;s/ *$//;p}' "tests/snapshots/$1.snap" >"$SCREENS_DIR/$2.txt"
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
# The source view (`l`) of two profiled saves (tests/line_profile_report.rs).
for size in 80x24 120x40 200x60; do
  copy "line_profile_report__source_view_$size" "source-view-$size"
done
# The walkthrough recorded on the H200 (`flashprof replay`), save by save.
for save in starter compile_error missing_l_rescale tile_edge reference; do
  for size in 80x24 120x40 200x60; do
    copy "tui_recorded__walkthrough_${save}_$size" "walkthrough-${save//_/-}-$size"
  done
  copy "tui_recorded__walkthrough_${save}_present_120x40" "walkthrough-${save//_/-}-present-120x40"
done
copy tui_recorded__walkthrough_missing_l_rescale_heatmap_120x40 walkthrough-missing-l-rescale-heatmap-120x40
# The decode walk on the projector (`flashprof replay --decode-walk --present`).
for step in starter coalesced_head kv_group split reference; do
  for size in 80x24 120x40 200x60; do
    copy "tui_recorded__decode_walk_${step}_present_$size" "decode-walk-${step//_/-}-present-$size"
  done
done
copy tui_view__counters_overlay_120x40 tui-counters-overlay-120x40
