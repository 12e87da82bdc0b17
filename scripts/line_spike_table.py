#!/usr/bin/env python3
"""Per-line tables of the line-profile spike (scripts/gpu-line-spike.sh).

Both profilers' per-instruction readings are summed per line through the
same line table (flashprof's, examples/line_table): the spike's own PC
Sampling and SASS Metrics beside Nsight Compute's source page for the spike
kernel, and Nsight Compute's alone for the flash reference as the worker
builds it.

Usage: line_spike_table.py DIR   (the folder of the script's $OUT)
"""
import csv
import sys
from collections import defaultdict


def line_table(path):
    """offset -> (innermost line, charged line) from examples/line_table."""
    rows = {}
    with open(path) as f:
        next(f)
        for line in f:
            offset, _file, inner, charged, _through = line.rstrip("\n").split("\t")
            rows[int(offset, 16)] = (inner, charged)
    return rows


def ncu_sass(path):
    """Per instruction in order: samples, executed, shared wavefronts (and ideal), global sectors (and ideal)."""
    with open(path) as f:
        lines = f.read().splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith('"Address"'))
    reader = csv.DictReader(lines[start:])
    out = []
    first = None
    for row in reader:
        address = int(row["Address"], 16)
        first = address if first is None else first
        num = lambda k: int(row[k]) if row.get(k, "-") not in ("-", "") else 0
        out.append((address - first, {
            "samples": num("Warp Stall Sampling (All Samples)"),
            "executed": num("Instructions Executed"),
            "shared": num("L1 Wavefronts Shared"),
            "shared_ideal": num("L1 Wavefronts Shared Ideal"),
            "sectors": num("L2 Theoretical Sectors Global"),
            "sectors_ideal": num("L2 Theoretical Sectors Global Ideal"),
        }))
    return out


def spike_readings(path):
    """offset -> the spike's own samples and SASS metric values (first PC sampling pass)."""
    per = defaultdict(lambda: defaultdict(int))
    names = {
        "smsp__sass_inst_executed": "executed",
        "smsp__sass_l1tex_pipe_lsu_wavefronts_mem_shared": "shared",
        "smsp__sass_l1tex_pipe_lsu_wavefronts_mem_shared_ideal": "shared_ideal",
        "smsp__sass_sectors_mem_global": "sectors",
        "smsp__sass_sectors_mem_global_ideal": "sectors_ideal",
    }
    passes = 0
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if parts[0] == "step" and parts[1] == "pc-sampling":
                passes += 1
            # Stall reasons only, each once: the "_not_issued" ones are a
            # subset of their reason's samples (grade::lines::is_stall_reason).
            if parts[0] == "pc-sample" and passes == 0 \
                    and parts[3].startswith("smsp__pcsamp_warps_issue_stalled_") \
                    and not parts[3].endswith("_not_issued"):
                per[int(parts[2], 16)]["samples"] += int(parts[4])
            if parts[0] == "sass-value" and parts[3] in names:
                per[int(parts[2], 16)][names[parts[3]]] += int(parts[4])
    return per


def by_line(table, readings, column):
    sums = defaultdict(lambda: defaultdict(int))
    for offset, values in readings:
        line = table.get(offset, ("?", "?"))[column]
        for k, v in values.items():
            sums[line][k] += v
    return sums


def shares(sums):
    total = sum(v["samples"] for v in sums.values()) or 1
    return {line: v["samples"] / total for line, v in sums.items()}


def print_spike(d):
    table = line_table(f"{d}/spike-lines.tsv")
    ours = by_line(table, spike_readings(f"{d}/spike.tsv").items(), 0)
    ncu = by_line(table, ncu_sass(f"{d}/ncu-spike-sass.csv"), 0)
    a, b = shares(ours), shares(ncu)
    print("spike kernel, per line of spike.cu (flashprof's CUPTI reading | Nsight Compute's), through flashprof's line table")
    print(f"{'line':>4}  {'share':>6} {'ncu':>6}  {'executed':>9} {'ncu':>9}  {'shared wf':>9} {'ideal':>8} {'ncu':>9}  {'sectors':>9} {'ideal':>8} {'ncu':>9}")
    for line in sorted(set(ours) | set(ncu), key=lambda l: -a.get(l, 0)):
        o, n = ours.get(line, {}), ncu.get(line, {})
        print(f"{line:>4}  {a.get(line, 0):6.1%} {b.get(line, 0):6.1%}  {o.get('executed', 0):9d} {n.get('executed', 0):9d}"
              f"  {o.get('shared', 0):9d} {o.get('shared_ideal', 0):8d} {n.get('shared', 0):9d}"
              f"  {o.get('sectors', 0):9d} {o.get('sectors_ideal', 0):8d} {n.get('sectors', 0):9d}")


def print_flash(d):
    table = line_table(f"{d}/flash-lines.tsv")
    ncu = by_line(table, ncu_sass(f"{d}/ncu-flash-sass.csv"), 1)
    b = shares(ncu)
    print("\nflash reference (one case), Nsight Compute's samples per line of reference.cu charged by flashprof's table; top 10")
    print(f"{'line':>5}  {'share':>6}  {'executed':>9}  {'shared wf':>9} {'ideal':>8}  {'sectors':>8} {'ideal':>8}")
    for line in sorted(ncu, key=lambda l: -b[l])[:10]:
        n = ncu[line]
        print(f"{line:>5}  {b[line]:6.1%}  {n['executed']:9d}  {n['shared']:9d} {n['shared_ideal']:8d}  {n['sectors']:8d} {n['sectors_ideal']:8d}")


if __name__ == "__main__":
    print_spike(sys.argv[1])
    print_flash(sys.argv[1])
