#!/usr/bin/env bash
# The cases at the scale production serves, on a GPU (issue 37, docs/CASES.md
# "High blocks" and "Long cases"). High blocks: the starter and the reference
# of both paged prefill labs pass them and every other case; each planted
# 32-bit offset bug (int, unsigned) fails exactly its listed cases with its
# own cause and passes every other case; a kernel that ignores the block table
# faults on them and only them (the fault kept to its case, the rest of the
# check run by a fresh worker); the SASS of the planted bugs is kept. Long
# cases: the starter and the reference of flash-prefill and paged-prefill pass
# the 16k prefix and the 32k sequence, graded against the GPU float64
# reference the CPU oracle agrees with on sampled rows. With ALL_BUGS=1 every
# planted bug of both paged labs runs too (each must fail exactly its listed
# cases). The sanitizer runs the starter and two planted bugs on the fp32
# high-blocks case: it sees only what the worker maps. A short table comes
# last; JSON reports, the SASS and the log stay in $OUT. BUGS="a b" names the
# planted bugs to run instead of the usual four.
#
# Usage: OUT=dir [ALL_BUGS=1 | BUGS="..."] scripts/gpu-scale.sh [path/to/flashprof]
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-target/release/flashprof}
OUT=${OUT:-scale-out}
mkdir -p "$OUT/reports" "$OUT/sass"
LOG="$OUT/scale.log"
: >"$LOG"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv >>"$LOG" 2>&1 || true
: >"$OUT/runs.txt"

run() { # name, then flashprof arguments
  local name=$1; shift
  local start=$(date +%s%N)
  "$BIN" "$@" --json >"$OUT/reports/$name.json" 2>>"$LOG"
  local rc=$?
  echo "$name $rc $(awk "BEGIN { print ($(date +%s%N) - $start) / 1e9 }")" >>"$OUT/runs.txt"
}

run flash-prefill-starter check kernels/flash-prefill/starter.cu --no-timing
run flash-prefill-reference check kernels/flash-prefill/reference.cu --no-timing
run flash-prefill-no-max-subtraction check kernels/flash-prefill/bugs/no-max-subtraction.cu --no-timing --case-timeout 4
for lab in paged-prefill paged-prefill-fp8; do
  dir=kernels/$lab
  run "$lab-starter" check "$dir/starter.cu" --lab "$lab" --no-timing
  run "$lab-reference" check "$dir/reference.cu" --lab "$lab" --no-timing
  read -ra bugs <<<"${BUGS:-int32-offset-signed int32-offset-unsigned block-table-ignored x-assumed-8}"
  if [ "${ALL_BUGS:-0}" = 1 ]; then
    bugs=()
    for file in "$dir"/bugs/*.cu; do bugs+=("$(basename "$file" .cu)"); done
  fi
  for bug in "${bugs[@]}"; do
    [ -f "$dir/bugs/$bug.cu" ] || continue
    run "$lab-$bug" check "$dir/bugs/$bug.cu" --lab "$lab" --no-timing --case-timeout 4
  done
  # What the compiler made of the 32-bit offsets: the int variant's loads.
  for bug in int32-offset-signed int32-offset-unsigned; do
    nvcc -arch=sm_90 -cubin -lineinfo -o "$OUT/sass/$lab-$bug.cubin" "$dir/bugs/$bug.cu" >>"$LOG" 2>&1 &&
      cuobjdump -sass "$OUT/sass/$lab-$bug.cubin" >"$OUT/sass/$lab-$bug.sass" 2>>"$LOG"
  done
done
# The sanitizer on a placed cache: memcheck and the other tools over the
# worker that maps only the extents.
for kernel in starter.cu bugs/int32-offset-signed.cu bugs/block-table-ignored.cu; do
  name=$(basename "$kernel" .cu)
  run "sanitize-paged-prefill-$name" check "kernels/paged-prefill/$kernel" --lab paged-prefill \
    --case high-blocks-past-2-31 --sanitize --no-timing
done
python3 scripts/scale_table.py "$OUT"
