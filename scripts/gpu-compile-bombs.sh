#!/usr/bin/env bash
# Compile bombs on a worker WITH a GPU (issue 20, items 4 and 6): the GPU
# worker compiles no submission, a builder without a GPU does, under the
# compile memory limit (4 GiB unless FLASHPROF_COMPILE_MEMORY_MB says
# otherwise). Each bomb must end as the submission's compile error
# (`over_limit`, exit 4) with the largest process flashprof started under the
# limit, and a normal check of the reference must still pass. Under 3 min:
# the macro bomb waits out the 60 s compile timeout.
#
# Usage: OUT=dir scripts/gpu-compile-bombs.sh [path/to/flashprof]
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-target/release/flashprof}
OUT=${OUT:-compile-bombs-out}
LIMIT_MB=${FLASHPROF_COMPILE_MEMORY_MB:-4096}
mkdir -p "$OUT/bombs" "$OUT/reports"
LOG="$OUT/bombs.log"
: >"$LOG"
nvidia-smi --query-gpu=name,memory.total --format=csv >>"$LOG" 2>&1 || true

python3 - "$OUT/bombs" <<'PY'
import sys
out = sys.argv[1]
def kernel(prologue, body):
    return (prologue + '\nextern "C" __global__ void attention_prefill(const float* q, '
            'const float* kCache, const float* vCache, float* out, int chunkLen, int prefixLen)\n'
            '{\n    ' + body + '\n}\n')
open(f"{out}/huge-array.cu", "w").write(
    kernel("__device__ char big[1 << 30] = {1};", "out[0] = big[threadIdx.x];"))
warnings = "".join(f"int w{i} = 1 << 40;" for i in range(8192))
open(f"{out}/warnings.cu", "w").write(
    kernel("", warnings + " /*" + "x" * 500000 + "*/ out[0] = 0;"))
defines = "#define STR2(x) #x\n#define STR(x) STR2(x)\n#define E0 xxxxxxxx\n"
defines += "".join(f"#define E{i} E{i-1} E{i-1}\n" for i in range(1, 40))
open(f"{out}/macro.cu", "w").write(
    kernel(defines, "const char* s = STR(E30); out[0] = s[threadIdx.x];"))
PY

: >"$OUT/runs.txt"
run() { # name, file: check with the GPU, the largest RSS of the tree, wall time
  local name=$1 file=$2
  /usr/bin/time -f "%M %e" -o "$OUT/$name.time" \
    "$BIN" check "$file" --json --no-timing --no-counters \
    >"$OUT/reports/$name.json" 2>>"$LOG"
  local rc=$?
  # GNU time writes "Command exited with non-zero status N" first.
  read -r rss_kb wall < <(tail -n 1 "$OUT/$name.time")
  echo "$name $rc $rss_kb $wall" >>"$OUT/runs.txt"
  echo "$name rc=$rc maxrss_kb=$rss_kb wall_s=$wall" >>"$LOG"
}
run huge-array "$OUT/bombs/huge-array.cu"
run warnings "$OUT/bombs/warnings.cu"
run macro "$OUT/bombs/macro.cu"
run reference kernels/flash-prefill/reference.cu

python3 - "$OUT" "$LIMIT_MB" <<'PY'
import json, sys
out, limit_mb = sys.argv[1], int(sys.argv[2])
print(f"compile bombs on a GPU worker (limit {limit_mb} MiB)")
print(f"{'run':<12} {'exit':>4} {'kind':<16} {'peak MiB':>9} {'wall s':>7}  ok")
all_ok = True
for line in open(f"{out}/runs.txt"):
    name, rc, rss_kb, wall = line.split()
    try:
        report = json.load(open(f"{out}/reports/{name}.json"))
    except Exception:
        report = {}
    compile = report.get("compile", {})
    kind = (compile.get("problem") or {}).get("kind", "compiled" if compile.get("ok") else "?")
    peak = int(rss_kb) // 1024
    if name == "reference":
        ok = rc == "0" and report.get("passed") is True
    else:
        ok = rc == "4" and kind == "over_limit" and peak < limit_mb
    all_ok &= ok
    print(f"{name:<12} {rc:>4} {kind:<16} {peak:>9} {float(wall):>7.1f}  {'yes' if ok else 'NO'}")
print("ALL OK" if all_ok else "SOME FAILED")
PY
