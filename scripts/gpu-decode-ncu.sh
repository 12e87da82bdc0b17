#!/usr/bin/env bash
# The paged-decode reference's DRAM bytes as flashprof's CUPTI counters read
# them, beside Nsight Compute's on launches of the same kernel on the same
# inputs (issue 23). flashprof profiles one launch of the timing batch after
# evicting L2; ncu profiles the launches of a check's timing phase (counters
# off, so the two profilers never meet), with its cache flush and without,
# and the table reads those at the timing batch (the reference's block size,
# hundreds of MB read): the median of each. A short table comes last; raw
# CSVs and JSON stay in $OUT.
#
# Usage: OUT=dir scripts/gpu-decode-ncu.sh [path/to/flashprof]
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-target/release/flashprof}
OUT=${OUT:-decode-ncu-out}
mkdir -p "$OUT"
LOG="$OUT/decode-ncu.log"
: >"$LOG"
KERNEL=kernels/paged-decode/reference.cu
"$BIN" check "$KERNEL" --counters --json >"$OUT/flashprof.json" 2>>"$LOG"
echo "flashprof check rc=$?" >>"$LOG"
for cache in all none; do
  ncu --clock-control none --cache-control "$cache" --target-processes all \
    --kernel-name paged_decode --launch-count 400 \
    --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum \
    --csv --print-units base --log-file "$OUT/ncu-$cache.csv" \
    "$BIN" check "$KERNEL" --no-counters --case-timeout 120 --json >"$OUT/ncu-run-$cache.json" 2>>"$LOG"
  echo "ncu cache=$cache rc=$?" >>"$LOG"
done
python3 - "$OUT" <<'PY'
import csv, json, sys, pathlib
out = pathlib.Path(sys.argv[1])
report = json.loads((out / "flashprof.json").read_text())
counters = [c.get("Ok") for c in report.get("counters", []) if c.get("Ok")]
dram = ((counters[0].get("student") or {}).get("roofline") or {}).get("dram") or {} if counters else {}
compulsory = (((report.get("timing") or {}).get("shape") or {}).get("work") or {}).get("compulsory_bytes")
rows = [("compulsory bytes (the contract)", compulsory, None, None),
        ("flashprof CUPTI (L2 evicted)", dram.get("read_bytes"), dram.get("write_bytes"), None)]
for cache in ("all", "none"):
    path = out / f"ncu-{cache}.csv"
    launches = {}
    if path.exists():
        lines = [l for l in path.read_text().splitlines() if l.startswith('"')]
        for r in csv.DictReader(lines):
            try:
                launch = launches.setdefault(r["ID"], {"block": r["Block Size"]})
                launch[r["Metric Name"]] = float(r["Metric Value"].replace(",", ""))
            except (KeyError, ValueError):
                pass
    # The reference runs 128 threads a block; its launches at the timing
    # batch read hundreds of MB (the cases read a few MB).
    timed = [l for l in launches.values()
             if l["block"].startswith("(128") and l.get("dram__bytes_read.sum", 0) > 1e8]
    median = lambda key: (sorted(l[key] for l in timed)[len(timed) // 2] if timed else None)
    rows.append((f"ncu --cache-control {cache} ({len(timed)} launches)", median("dram__bytes_read.sum"),
                 median("dram__bytes_write.sum"), median("gpu__time_duration.sum")))
mb = lambda v: "-" if v is None else f"{v / 1e6:.1f}"
print(f"{'source':32} {'read MB':>9} {'write MB':>9} {'time us':>9}")
for name, read, write, ns in rows:
    print(f"{name:32} {mb(read):>9} {mb(write):>9} {'-' if ns is None else f'{ns / 1e3:.1f}':>9}")
PY
