"""Compares flashprof's hardware counters (JSON reports) with Nsight Compute's CSV.

Tolerances from the project's issue: SM throughput within 2 percentage points,
DRAM bytes within 3 %, duration within 5 %.
"""
import csv
import json
import pathlib
import sys

out = pathlib.Path(sys.argv[1])
METRICS = {
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": ("SM throughput %", "points", 2.0),
    "dram_bytes": ("DRAM bytes", "percent", 3.0),
    "gpu__time_duration.sum": ("duration ns", "percent", 5.0),
}


def ncu_values(path):
    values = {}
    try:
        lines = [l for l in path.read_text().splitlines() if l.startswith('"')]
    except OSError:
        return values
    for row in csv.DictReader(lines):
        try:
            values[row["Metric Name"]] = float(row["Metric Value"].replace(",", ""))
        except (KeyError, ValueError):
            pass
    if "dram__bytes_read.sum" in values and "dram__bytes_write.sum" in values:
        values["dram_bytes"] = values["dram__bytes_read.sum"] + values["dram__bytes_write.sum"]
    return values


def flashprof_values(kernel):
    try:
        report = json.loads((out / "reports" / f"{kernel}.json").read_text())
    except Exception:
        return {}
    full = [c["Ok"] for c in report.get("counters", []) if "Ok" in c and c["Ok"]["tier"] == "full"]
    if not full:
        return {}
    metrics = {m["name"]: float(m["value"]) for m in full[0]["student"]["metrics"]}
    if "dram__bytes_read.sum" in metrics and "dram__bytes_write.sum" in metrics:
        metrics["dram_bytes"] = metrics["dram__bytes_read.sum"] + metrics["dram__bytes_write.sum"]
    return metrics


print(f"{'kernel':<10} {'metric':<16} {'flashprof':>14} {'ncu cache=all':>14} {'ncu cache=none':>15} {'diff (all)':>12}  within")
for kernel in ["starter", "reference"]:
    ours = flashprof_values(kernel)
    ncu_all = ncu_values(out / f"ncu-{kernel}-all.csv")
    ncu_none = ncu_values(out / f"ncu-{kernel}-none.csv")
    for key, (label, kind, bound) in METRICS.items():
        a, b, c = ours.get(key), ncu_all.get(key), ncu_none.get(key)
        if a is None or b is None:
            print(f"{kernel:<10} {label:<16} {a!s:>14} {b!s:>14} {c!s:>15} {'-':>12}  missing")
            continue
        # flashprof flushes L2 before a profiled launch, as ncu's default cache control does.
        diff = a - b if kind == "points" else (a - b) / b * 100.0
        ok = abs(diff) <= bound
        unit = "pt" if kind == "points" else "%"
        print(f"{kernel:<10} {label:<16} {a:>14.4g} {b:>14.4g} {c if c is None else round(c, 4)!s:>15} {diff:>+11.2f}{unit}  {'yes' if ok else 'NO'}")
