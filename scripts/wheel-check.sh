#!/usr/bin/env bash
# The Python wheel, as a student gets it: built with maturin, installed into a
# clean virtualenv, and run by that virtualenv's path without activating it,
# from a folder outside the checkout, with LD_LIBRARY_PATH unset. `doctor`
# must say NVRTC was found in that virtualenv's site-packages.
#
# Usage: scripts/wheel-check.sh [--release]   (CI: a dev-profile build, which
# reuses the test build's dependencies; --release for a wheel to hand out)
set -euo pipefail
cd "$(dirname "$0")/.."
PROFILE=dev
[ "${1:-}" = --release ] && PROFILE=release
WORK=$PWD/target/wheel-check
# The virtualenv lives outside the checkout: inside it, the checkout's own
# .cuda-wheels (beside the binary's ancestors) would answer first.
VENV=$(mktemp -d)/venv
trap 'rm -rf "$(dirname "$VENV")"' EXIT
rm -rf "$WORK/dist"
mkdir -p "$WORK"
if [ ! -x "$WORK/build/bin/maturin" ]; then
  python3 -m venv "$WORK/build"
  "$WORK/build/bin/pip" install --quiet --disable-pip-version-check "maturin>=1.5,<2"
fi
"$WORK/build/bin/maturin" build --quiet --profile "$PROFILE" --out "$WORK/dist"
wheel=$(ls "$WORK"/dist/flashprof_tui-*.whl)
python3 -m venv "$VENV"
start=$(date +%s.%N)
"$VENV/bin/pip" install --quiet --disable-pip-version-check "$wheel"
installed=$(date +%s.%N)
outside=$(mktemp -d)
report=$(cd "$outside" && env -u LD_LIBRARY_PATH -u VIRTUAL_ENV -u PYTHONPATH -u FLASHPROF_CUDA_LIB \
  -u FLASHPROF_CUPTI_PATH -u CUDA_HOME -u CUDA_PATH HOME="$outside" PATH=/usr/bin:/bin \
  "$VENV/bin/flashprof" doctor 2>&1 || true)
done_at=$(date +%s.%N)
rm -rf "$outside"
echo "$report"
site=$(realpath "$VENV")/lib
if ! grep -q "nvrtc.*$site/python3[^/]*/site-packages/nvidia/cu13/lib" <<<"$report"; then
  echo "wheel check FAILED: doctor did not find NVRTC in $site/python3.*/site-packages" >&2
  exit 1
fi
awk -v a="$start" -v b="$installed" -v c="$done_at" \
  'BEGIN { printf "wheel check ok: installed in %.1f s, doctor answered %.2f s later, NVRTC from the virtualenv\n", b - a, c - b }'
