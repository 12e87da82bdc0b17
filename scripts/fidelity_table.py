"""Compares flashprof's hardware counters (JSON reports) with Nsight Compute's CSV.

Tolerances from the project's issues: SM throughput and each unit's share of
its peak within 2 percentage points, DRAM bytes within 3 %, duration within 5 %.

Usage: fidelity_table.py OUT [--block THREADS] [KERNEL...]   (default kernels: starter reference)
       fidelity_table.py --ncu-metrics     (the metric list to give ncu)

Each ncu CSV may hold several launches (scripts/gpu-lab-ncu.sh profiles one of
each launch configuration): the one compared is, of those with THREADS a block
when given, the one that reads the most DRAM bytes (the timing batch).
"""
import csv
import json
import pathlib
import sys

UNIT = "avg.pct_of_peak_sustained_elapsed"
METRICS = {
    f"sm__throughput.{UNIT}": ("SM throughput %", "points", 2.0),
    "dram_bytes": ("DRAM bytes", "percent", 3.0),
    "gpu__time_duration.sum": ("duration ns", "percent", 5.0),
    # The per-unit breakdown the roofline verdict names its busiest unit from
    # (src/facts/metrics.rs, UNIT_METRICS).
    f"sm__pipe_fma_cycles_active.{UNIT}": ("FMA pipe %", "points", 2.0),
    f"sm__pipe_tensor_op_hmma_cycles_active.{UNIT}": ("tensor HMMA %", "points", 2.0),
    f"sm__pipe_tensor_cycles_active.{UNIT}": ("tensor pipe %", "points", 2.0),
    f"sm__pipe_alu_cycles_active.{UNIT}": ("ALU pipe %", "points", 2.0),
    f"sm__pipe_fp64_cycles_active.{UNIT}": ("FP64 pipe %", "points", 2.0),
    f"sm__inst_executed_pipe_xu.{UNIT}": ("XU inst %", "points", 2.0),
    f"sm__inst_executed_pipe_lsu.{UNIT}": ("LSU inst %", "points", 2.0),
    f"sm__inst_executed.{UNIT}": ("issue %", "points", 2.0),
    f"l1tex__data_pipe_lsu_wavefronts_mem_shared.{UNIT}": ("shared mem %", "points", 2.0),
    f"l1tex__throughput.{UNIT}": ("L1/TEX %", "points", 2.0),
    f"lts__throughput.{UNIT}": ("L2 %", "points", 2.0),
    f"dram__throughput.{UNIT}": ("DRAM %", "points", 2.0),
}
RAW = ["dram__bytes_read.sum", "dram__bytes_write.sum"]

if sys.argv[1:] == ["--ncu-metrics"]:
    print(",".join([m for m in METRICS if m != "dram_bytes"] + RAW))
    sys.exit(0)

out = pathlib.Path(sys.argv[1])
args = sys.argv[2:]
BLOCK = None
if args[:1] == ["--block"]:
    BLOCK, args = f"({args[1]}, 1, 1)", args[2:]
KERNELS = args or ["starter", "reference"]


def ncu_values(path):
    launches = {}
    try:
        lines = [l for l in path.read_text().splitlines() if l.startswith('"')]
    except OSError:
        return {}
    for row in csv.DictReader(lines):
        if BLOCK is not None and row.get("Block Size") != BLOCK:
            continue
        try:
            launch = launches.setdefault(row["ID"], {})
            launch[row["Metric Name"]] = float(row["Metric Value"].replace(",", ""))
        except (KeyError, ValueError):
            pass
    if not launches:
        return {}
    values = max(launches.values(), key=lambda l: l.get("dram__bytes_read.sum", 0.0))
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


# The kernel column is as wide as the longest name given (lab references are long).
W = max([len("kernel")] + [len(k) for k in KERNELS])
print(f"{'kernel':<{W}} {'metric':<16} {'flashprof':>14} {'ncu cache=all':>14} {'ncu cache=none':>15} {'diff (all)':>12}  within")
for kernel in KERNELS:
    ours = flashprof_values(kernel)
    ncu_all = ncu_values(out / f"ncu-{kernel}-all.csv")
    ncu_none = ncu_values(out / f"ncu-{kernel}-none.csv")
    for key, (label, kind, bound) in METRICS.items():
        a, b, c = ours.get(key), ncu_all.get(key), ncu_none.get(key)
        if a is None or b is None:
            print(f"{kernel:<{W}} {label:<16} {a!s:>14} {b!s:>14} {c!s:>15} {'-':>12}  missing")
            continue
        # flashprof flushes L2 before a profiled launch, as ncu's default cache control does.
        diff = a - b if kind == "points" else (a - b) / b * 100.0
        ok = abs(diff) <= bound
        unit = "pt" if kind == "points" else "%"
        print(f"{kernel:<{W}} {label:<16} {a:>14.4g} {b:>14.4g} {c if c is None else round(c, 4)!s:>15} {diff:>+11.2f}{unit}  {'yes' if ok else 'NO'}")

# The verdict flashprof gave, next to the busiest unit by ncu's figures.
UNIT_ROWS = [k for k, (label, kind, _) in METRICS.items() if kind == "points" and not k.startswith("sm__throughput")]
for kernel in KERNELS:
    try:
        report = json.loads((out / "reports" / f"{kernel}.json").read_text())
        full = [c["Ok"] for c in report.get("counters", []) if "Ok" in c and c["Ok"]["tier"] == "full"]
        verdict = full[0]["student"]["roofline"]["verdict"]
        said = f"{verdict['bound']}: {verdict['reason']}"
    except Exception as e:  # a missing or partial report
        said = f"no verdict ({e.__class__.__name__})"
    ncu_all = ncu_values(out / f"ncu-{kernel}-all.csv")
    ranked = sorted(((ncu_all[k], METRICS[k][0]) for k in UNIT_ROWS if k in ncu_all), reverse=True)
    busiest = ", ".join(f"{label} {value:.1f}" for value, label in ranked[:3]) or "-"
    print(f"{kernel}: flashprof says {said}\n{' ' * len(kernel)}  ncu's busiest units: {busiest}")

# The bytes the contract says a kernel must read and write at the timing shape,
# beside what each profiler counted (a DRAM-bound kernel's floor).
for kernel in KERNELS:
    try:
        report = json.loads((out / "reports" / f"{kernel}.json").read_text())
        compulsory = report["timing"]["shape"]["work"]["compulsory_bytes"]
    except Exception:
        continue
    ours = flashprof_values(kernel).get("dram_bytes")
    theirs = ncu_values(out / f"ncu-{kernel}-all.csv").get("dram_bytes")
    mb = lambda v: "-" if v is None else f"{v / 1e6:.1f} MB"
    print(f"{kernel}: compulsory {mb(compulsory)}, flashprof DRAM {mb(ours)}, ncu DRAM {mb(theirs)}")
