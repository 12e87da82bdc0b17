#!/usr/bin/env bash
# Short fuzzing of every parser of outside data (docs/FUZZING.md): builds the
# cargo-fuzz targets in fuzz/ once and runs each for a fixed time, starting
# from seeds made from the repository's inputs. Any crash, panic, failed property, leak or
# timeout fails the script; libFuzzer leaves the input in
# fuzz/artifacts/<target>/ and prints the command that reproduces it.
#
#   FUZZ_SECONDS    seconds per target (default 10)
#   FUZZ_TARGETS    space-separated subset (default: every target)
#   FUZZ_SANITIZER  cargo-fuzz's --sanitizer (default none: the targets are
#                   safe Rust, and an ASan build took 3 min 35 s to build
#                   against 2 min 28 s; `address` for a long campaign)
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH="${FUZZ_SECONDS:-10}"

# libFuzzer's sanitizer coverage needs a nightly compiler.
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
  rustup toolchain install nightly --profile minimal
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked
fi

# Seeds are made from the repository's own inputs each run, so they follow
# every kernel, cases file and recording as it changes.
python3 fuzz/make-seeds.py

TARGETS="${FUZZ_TARGETS:-$(cargo +nightly fuzz list)}"
# One build for every target (release with debug assertions). cargo-fuzz
# makes one codegen unit by default, which leaves every core but one idle on
# the crate; 16 (also given to `run`, or it would build again) took the clean
# build from 4 min 21 s to 3 min 35 s on a 2-core machine, more with more cores.
BUILD_FLAGS=(--codegen-units 16 --sanitizer "${FUZZ_SANITIZER:-none}")
cargo +nightly fuzz build "${BUILD_FLAGS[@]}"

failed=""
for target in $TARGETS; do
  corpus="fuzz/corpus/$target"
  mkdir -p "$corpus" "fuzz/artifacts/$target"
  echo "fuzz: $target for ${SECONDS_EACH}s"
  # Large seeds are kept, but new inputs stay under 64 KiB so every target
  # runs fast; rss_limit catches an allocation driven by a header's claim.
  log="fuzz/artifacts/$target/ci.log"
  # Every input that once crashed a target is replayed first, with the seeds.
  inputs=("$corpus" "fuzz/seeds/$target")
  [ -d "fuzz/regressions/$target" ] && inputs+=("fuzz/regressions/$target")
  if ! cargo +nightly fuzz run "${BUILD_FLAGS[@]}" "$target" "${inputs[@]}" -- \
    -max_total_time="$SECONDS_EACH" -max_len=65536 -rss_limit_mb=2048 \
    -timeout=10 -print_final_stats=1 >"$log" 2>&1; then
    tail -n 80 "$log" >&2
    echo "fuzz: $target FAILED; the input is in fuzz/artifacts/$target/ (log: $log)" >&2
    failed="$failed $target"
    continue
  fi
  grep -E '^(#[0-9]+.*DONE|stat::number_of_executed_units|stat::average_exec_per_sec)' "$log" || true
done
if [ -n "$failed" ]; then
  echo "fuzz: findings in:$failed" >&2
  exit 1
fi
echo "fuzz: every target ran ${SECONDS_EACH}s without a finding"
