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
if [ ! -x "$WORK/build/bin/maturin" ] || ! "$WORK/build/bin/python" -m ziglang version >/dev/null 2>&1; then
  python3 -m venv "$WORK/build"
  # zig links against glibc 2.28's symbols, so the wheel installs on
  # RHEL/Rocky 8 login nodes (manylinux_2_28) whatever this machine's glibc.
  "$WORK/build/bin/pip" install --quiet --disable-pip-version-check "maturin>=1.5,<2" "ziglang==0.17.*"
fi
PATH="$WORK/build/bin:$PATH" "$WORK/build/bin/maturin" build --quiet --profile "$PROFILE" \
  --zig --compatibility manylinux_2_28 --out "$WORK/dist"
# maturin refuses to tag a wheel whose binary needs more than the policy allows.
wheel=$(ls "$WORK"/dist/flashprof_tui-*-manylinux_2_28_"$(uname -m)".whl)
python3 -m venv "$VENV"
start=$(date +%s.%N)
"$VENV/bin/pip" install --quiet --disable-pip-version-check "$wheel"
installed=$(date +%s.%N)
outside=$(mktemp -d)
# As a student runs it: nothing of this checkout's or this shell's on any path.
student() {
  (cd "$outside" && env -u LD_LIBRARY_PATH -u VIRTUAL_ENV -u PYTHONPATH -u FLASHPROF_CUDA_LIB \
    -u FLASHPROF_CUPTI_PATH -u CUDA_HOME -u CUDA_PATH -u FLASHPROF_CUDA_INCLUDE HOME="$outside" \
    PATH=/usr/bin:/bin FLASHPROF_GPU=none "$VENV/bin/flashprof" "$@" 2>&1)
}
report=$(student doctor || true)
done_at=$(date +%s.%N)
echo "$report"
site=$(realpath "$VENV")/lib
fail() { echo "wheel check FAILED: $*" >&2; rm -rf "$outside"; exit 1; }
grep -q "nvrtc.*$site/python3[^/]*/site-packages/nvidia/cu13/lib" <<<"$report" \
  || fail "doctor did not find NVRTC in $site/python3.*/site-packages"
grep -q "^ok *cuda_headers.*$site/python3[^/]*/site-packages/nvidia/cu13/include" <<<"$report" \
  || fail "doctor did not find the CUDA headers in $site/python3.*/site-packages"
# The FP8 lab, which includes cuda_bf16.h and cuda_fp8.h, compiles from the
# wheel alone (no GPU asked for: compiled, nothing graded, exit 5).
cp kernels/paged-prefill-fp8/starter.cu "$outside/fp8.cu"
fp8=$(student check fp8.cu --lab paged-prefill-fp8) && rc=0 || rc=$?
echo "$fp8" | tail -3
[ "$rc" -eq 5 ] && grep -q "NOT GRADED (no GPU)" <<<"$fp8" \
  || fail "the FP8 lab's starter did not compile from the wheel (exit $rc)"
rm -rf "$outside"
awk -v a="$start" -v b="$installed" -v c="$done_at" \
  'BEGIN { printf "wheel check ok: installed in %.1f s, doctor answered %.2f s later, NVRTC and the CUDA headers from the virtualenv, the FP8 starter compiled\n", b - a, c - b }'
