#!/usr/bin/env bash
# The tests marked `#[ignore = "needs a GPU ..."]`, run where the GPU is.
#
# The GPU machine has no Rust, so the test programs are built here and
# carried there with the release binary:
#   scripts/gpu-tests.sh build        # here: target/gpu-tests/<test> programs
#   scripts/gpu-tests.sh run [BIN]    # there: each program with --ignored
# `run` points the programs at the carried flashprof and at this checkout
# (FLASHPROF_TEST_BIN, FLASHPROF_TEST_ROOT) and prints one line a program.
set -uo pipefail
cd "$(dirname "$0")/.."
TESTS=(gpu_check sanitize line_profile_gpu gpu_oracle)
DIR=target/gpu-tests
case ${1:-} in
  build)
    set -e
    mkdir -p "$DIR"
    args=(); for t in "${TESTS[@]}"; do args+=(--test "$t"); done
    cargo test --no-run --message-format=json "${args[@]}" \
      | python3 -c '
import json, shutil, subprocess, sys
for line in sys.stdin:
    message = json.loads(line)
    if message.get("reason") == "compiler-artifact" and message.get("executable") and message["target"]["kind"] == ["test"]:
        shutil.copy(message["executable"], sys.argv[1] + "/" + message["target"]["name"])
        # Stripped, so they fit beside the binary in what a device call carries.
        subprocess.run(["strip", sys.argv[1] + "/" + message["target"]["name"]], check=True)
        print(sys.argv[1] + "/" + message["target"]["name"])
' "$DIR"
    ;;
  run)
    BIN=$(realpath "${2:-target/release/flashprof}")
    OUT=${OUT:-acceptance-out}
    mkdir -p "$OUT"
    status=0
    for t in "${TESTS[@]}"; do
      FLASHPROF_TEST_BIN=$BIN FLASHPROF_TEST_ROOT=$PWD "$DIR/$t" --ignored --test-threads 1 --nocapture >"$OUT/gpu-tests-$t.log" 2>&1
      rc=$?
      [ $rc -ne 0 ] && status=1
      echo "gpu-tests $t rc=$rc $(grep -E '^test result' "$OUT/gpu-tests-$t.log" | tail -1)"
    done
    exit $status
    ;;
  *)
    echo "usage: scripts/gpu-tests.sh build | run [path/to/flashprof]" >&2
    exit 2
    ;;
esac
