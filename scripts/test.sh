#!/usr/bin/env bash
# The test command: fetches the real NVRTC and CUPTI libraries (PyPI wheels,
# CUDA 13.0 line, no GPU needed) on first use, then runs every test.
# Tests that need a GPU skip themselves, saying so, on machines without one.
set -euo pipefail
cd "$(dirname "$0")/.."
DEPS=.cuda-wheels
if [ ! -e "$DEPS/nvidia/cu13/lib/libnvrtc.so.13" ] || [ ! -e "$DEPS/nvidia/cu13/lib/libcupti.so.13" ]; then
  echo "fetching NVRTC and CUPTI 13.0 from PyPI into $DEPS/ (once)"
  # --target keeps the wheels inside the checkout; the variable lets a distribution's
  # "externally managed" Python accept an install that touches nothing of its own.
  PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install --quiet --disable-pip-version-check --target "$DEPS" \
    "nvidia-cuda-nvrtc==13.0.88" "nvidia-cuda-cupti==13.0.85"
fi
# flashprof finds .cuda-wheels by itself; the loader path also lets the tests that
# look for the real libraries (tests/found_libraries.rs, the CUPTI loader's) find them.
export LD_LIBRARY_PATH="$PWD/$DEPS/nvidia/cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Plain `cargo test` (not --all-targets) also builds the examples as programs:
# the worker-protocol tests start examples/stand_in_worker.rs as a process.
exec cargo test "$@"
