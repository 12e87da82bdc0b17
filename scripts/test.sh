#!/usr/bin/env bash
# The test command: fetches the real NVRTC and CUPTI libraries and the CUDA
# headers of the bf16/FP8 types (PyPI wheels, CUDA 13.0 line, no GPU needed) on
# first use, then runs every test.
# Tests that need a GPU, a daemon or a file outside the checkout are marked
# ignored with their reason; the end of the run lists each one by name.
# FLASHPROF_SLURM_TEST=1 / FLASHPROF_SSH_TEST=1 also run the real Slurm and
# sshd tests (they install and start daemons; CI sets both).
set -euo pipefail
cd "$(dirname "$0")/.."
# What the tests run besides cargo, said before a 15-minute build rather than
# as two failures at its end (the README's prerequisites).
missing=()
command -v python3 >/dev/null || missing+=("python3 (with pip): it fetches NVIDIA's wheels")
command -v gcc >/dev/null || missing+=("gcc: the C linker, and a test builds a small library with it")
command -v ssh >/dev/null || missing+=("ssh (OpenSSH's client, e.g. apt-get install openssh-client): the remote-worker tests run it")
if [ ${#missing[@]} -gt 0 ]; then
  echo "scripts/test.sh: missing on this machine:" >&2
  printf '  %s\n' "${missing[@]}" >&2
  exit 2
fi
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
mkdir -p target
LOG=target/test-run.log
# --no-fail-fast: one failing test binary must not hide the ones after it.
# The build's progress goes to the terminal as cargo draws it; the log keeps
# the test lines the summary below is read from.
status=0
cargo test --no-fail-fast "$@" 2> >(tee "$LOG.err" >&2) | tee "$LOG" || status=1
OPTED_IN=()
if [ "${FLASHPROF_SLURM_TEST:-}" = 1 ]; then OPTED_IN+=(--test slurm); fi
if [ "${FLASHPROF_SSH_TEST:-}" = 1 ]; then OPTED_IN+=(--test ssh); fi
if [ ${#OPTED_IN[@]} -gt 0 ]; then
  echo "running the opted-in daemon tests: ${OPTED_IN[*]}"
  cargo test --no-fail-fast "${OPTED_IN[@]}" -- --ignored 2>>"$LOG.err" | tee -a "$LOG" || status=1
fi
# What a green run did not run: every ignored test, less those the opt-ins ran.
# (grep finds nothing in a run of one binary with no ignored test: not an error.)
ignored=$(grep -E '^test .* \.\.\. ignored' "$LOG" | sed -E 's/^test (.*) \.\.\. ignored(, )?(.*)$/\1\t\3/' | sort -u || true)
ran=$(grep -E '^test .* \.\.\. ok$' "$LOG" | sed -E 's/^test (.*) \.\.\. ok$/\1/' | sort -u || true)
not_run=$(printf '%s\n' "$ignored" | awk -F'\t' 'NR==FNR { if ($0 != "") ran[$0] = 1; next } $1 != "" && !($1 in ran)' <(printf '%s\n' "$ran") -)
count=$(printf '%s\n' "$not_run" | grep -c . || true)
echo
echo "ignored, not run here: $count"
printf '%s\n' "$not_run" | awk -F'\t' '$1 != "" { printf "  %s (%s)\n", $1, $2 }'
# One total over every binary, from libtest's own result lines.
totals=$(grep -E '^test result: ' "$LOG" | awk '{ for (i = 1; i <= NF; i++) { if ($i ~ /^passed;?$/) p += $(i-1); if ($i ~ /^failed;?$/) f += $(i-1); if ($i ~ /^ignored;?$/) g += $(i-1) } } END { printf "%d passed, %d failed, %d ignored", p, f, g }')
echo
echo "total: $totals"
if [ "$status" -ne 0 ]; then
  echo "FAILED: these tests failed (each binary ran to its end):"
  grep -E '^test .* \.\.\. FAILED$' "$LOG" | sed -E 's/^test (.*) \.\.\. FAILED$/  \1/' || true
  grep -E '^error: (could not compile|test failed)' "$LOG.err" | sed 's/^/  /' || true
fi
exit "$status"
