#!/usr/bin/env bash
# The TA workflows that need more than the single-GPU run of gpu-ta.sh:
# `grade` over every GPU of the machine (one worker per GPU, utilisation
# sampled so both can be seen working, each submission's device read back
# from its report), and `compare --watch` driven under tmux with the screen
# captured as B is saved over.
# Usage: scripts/gpu-ta-multi.sh [path/to/flashprof]   (output to $OUT)
set -uo pipefail
cd "$(dirname "$0")/.."
F=$(realpath "${1:-target/release/flashprof}")
OUT=${OUT:-ta-multi-out}
mkdir -p "$OUT"
REPO=$PWD
GPUS=$(nvidia-smi -L | wc -l)
LIST=$(seq -s, 0 $((GPUS - 1)))

# A class of 28: the shipped kernels twice, under two folder names.
CLASS=$(mktemp -d)
for copy in week1 week2; do
  mkdir -p "$CLASS/$copy"
  cp kernels/flash-prefill/starter.cu kernels/flash-prefill/reference.cu kernels/flash-prefill/bugs/*.cu "$CLASS/$copy/"
done
nvidia-smi --query-gpu=timestamp,index,utilization.gpu,memory.used --format=csv,noheader -lms 250 >"$OUT/utilisation.csv" &
SAMPLER=$!
{
  echo "### grade on $GPUS GPUs (--gpus $LIST)"
  start=$(date +%s.%N)
  "$F" grade "$CLASS" --out "$OUT/gradebook" --gpus "$LIST" --seed 7 --case-timeout 4
  echo "exit $? after $(awk "BEGIN { print $(date +%s.%N) - $start }") s"
} >"$OUT/grade.txt" 2>&1
kill "$SAMPLER"
python3 - "$OUT" >>"$OUT/grade.txt" <<'PY'
import collections, csv, glob, json, sys
out = sys.argv[1]
per_gpu = collections.Counter()
for path in glob.glob(f"{out}/gradebook/runs/*.json"):
    entry = json.load(open(path))
    gpu = (entry.get("report") or {}).get("gpu") or {}
    per_gpu[gpu.get("Ok", {}).get("ordinal", "none")] += 1
print("submissions graded per GPU ordinal:", dict(per_gpu))
busy = collections.Counter()
for row in csv.reader(open(f"{out}/utilisation.csv")):
    if len(row) >= 3 and row[2].strip().rstrip(" %").isdigit() and int(row[2].strip().rstrip(" %")) > 0:
        busy[row[1].strip()] += 1
print("utilisation samples above 0% per GPU:", dict(busy))
PY
cut -c1-200 <"$OUT/gradebook/gradebook.csv" >>"$OUT/grade.txt"
cp "$OUT/gradebook/gradebook.csv" "$OUT/gradebook.csv"
rm -rf "$OUT/gradebook"

# compare --watch: A is the reference, B starts as the starter, then a planted
# bug and then the reference are saved over B.
WORK=$(mktemp -d)
cp kernels/flash-prefill/reference.cu "$WORK/a.cu"
cp kernels/flash-prefill/starter.cu "$WORK/b.cu"
capture() { sleep "$2"; tmux capture-pane -p -t cmp >"$OUT/compare-$1.txt"; }
save_b() { cp "$REPO/$1" "$WORK/b.cu.tmp" && mv "$WORK/b.cu.tmp" "$WORK/b.cu"; }
tmux new-session -d -s cmp -x 120 -y 40 "cd $WORK && $F compare a.cu b.cu --watch --seed 7 2>$OUT/compare-stderr.log"
capture 1-reference-vs-starter 20
save_b kernels/flash-prefill/bugs/tile-edge.cu
capture 2-reference-vs-tile-edge 15
save_b kernels/flash-prefill/reference.cu
capture 3-reference-vs-reference 15
tmux send-keys -t cmp q
sleep 2
tmux kill-server 2>/dev/null
cat "$OUT/grade.txt"
for f in "$OUT"/compare-*.txt; do echo "=== $f"; cat "$f"; done
