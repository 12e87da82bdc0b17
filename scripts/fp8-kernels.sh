#!/usr/bin/env bash
# The FP8 lab's GPU check on an H200 (scripts/fp8-kernels.py says what it does).
# Needs: torch, cupy and Triton there; the case folders written here first with
#   FP8_CASES_OUT=fp8-cases cargo test --lib dump_the_cases -- --ignored
# and the seed's prefix_prefill.py in peers/ (docs/labs/paged-prefill-fp8.md).
# Usage: scripts/fp8-kernels.sh [CASES_DIR] [OUT_DIR]; the tables come last.
set -euo pipefail
cd "$(dirname "$0")/.."
CASES=${1:-fp8-cases}
OUT=${2:-${OUT:-fp8-out}}
mkdir -p "$OUT"
PYTHONUNBUFFERED=1 python3 scripts/fp8-kernels.py "$PWD" "$CASES" "$OUT"
