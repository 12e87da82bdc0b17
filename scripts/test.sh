#!/usr/bin/env bash
# The test command: fetches the real NVRTC and CUPTI libraries and the CUDA
# headers of the bf16/FP8 types (PyPI wheels, CUDA 13.0 line, no GPU needed) on
# first use, then runs every test.
# Tests that need a GPU skip themselves, saying so, on machines without one.
set -euo pipefail
cd "$(dirname "$0")/.."
DEPS=.cuda-wheels
if [ ! -e "$DEPS/nvidia/cu13/lib/libnvrtc.so.13" ] || [ ! -e "$DEPS/nvidia/cu13/lib/libcupti.so.13" ] \
  || [ ! -e "$DEPS/nvidia/cu13/include/cuda_fp8.h" ]; then
  echo "fetching NVRTC, CUPTI and the CUDA headers (13.0) from PyPI into $DEPS/ (once)"
  # --target keeps the wheels inside the checkout; the variable lets a distribution's
  # "externally managed" Python accept an install that touches nothing of its own.
  # All three go into a fresh folder that then replaces the old one: pip --target
  # skips (or, with --upgrade, replaces whole) a top folder that is already there,
  # and the three wheels share nvidia/cu13/. The runtime wheel is there for its
  # headers (cuda_bf16.h, cuda_fp8.h, cuda_fp16.h).
  rm -rf "$DEPS.new"
  PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install --quiet --disable-pip-version-check --target "$DEPS.new" \
    "nvidia-cuda-nvrtc==13.0.88" "nvidia-cuda-cupti==13.0.85" "nvidia-cuda-runtime==13.0.96"
  rm -rf "$DEPS" && mv "$DEPS.new" "$DEPS"
fi
# flashprof finds .cuda-wheels by itself; the loader path also lets the tests that
# look for the real libraries (tests/found_libraries.rs, the CUPTI loader's) find them.
export LD_LIBRARY_PATH="$PWD/$DEPS/nvidia/cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Plain `cargo test` (not --all-targets) also builds the examples as programs:
# the worker-protocol tests start examples/stand_in_worker.rs as a process.
exec cargo test "$@"
