#!/usr/bin/env python3
"""flashprof's line profile against Nsight Compute's, per line of each kernel
(scripts/gpu-lines-ncu.sh): Nsight Compute's SASS rows are summed per line
through flashprof's line table (examples/line_table's `charged_line`), and
set beside the per-line reading in `check --lines --json`.

Per kernel: how many lines' instructions executed, shared wavefronts and
global sectors agree within 1%, and whether every line above 5% of the
samples in one is among the other's eight hottest with its share within 5
points. Details per line in DIR/NAME.compare.txt.

Usage: lines_ncu_table.py DIR
"""
import csv
import glob
import json
import os
import sys
from collections import defaultdict

COUNTS = (("executed", "Instructions Executed"),
          ("shared_wavefronts", "L1 Wavefronts Shared"),
          ("global_sectors", "L2 Theoretical Sectors Global"))


def table(path):
    rows = {}
    with open(path) as f:
        header = next(f)
        assert header.startswith("offset"), header
        for line in f:
            offset, _file, _line, charged, _through = line.rstrip("\n").split("\t")
            rows[int(offset, 16)] = charged
    return rows


def ncu_lines(csv_path, charged):
    with open(csv_path) as f:
        lines = f.read().splitlines()
    # One section per profiled launch, in the order they ran: the check's
    # own worker's case launches, then the line worker's, last.
    last = max(i for i, l in enumerate(lines) if l.startswith('"Kernel Name"'))
    start = next(i for i, l in enumerate(lines) if i > last and l.startswith('"Address"'))
    sums = defaultdict(lambda: defaultdict(int))
    first = None
    for row in csv.DictReader(lines[start:]):
        address = int(row["Address"], 16)
        first = address if first is None else first
        line = charged.get(address - first, "?")
        num = lambda k: int(row[k]) if row.get(k, "-") not in ("-", "") else 0
        sums[line]["samples"] += num("Warp Stall Sampling (All Samples)")
        for ours, theirs in COUNTS:
            sums[line][ours] += num(theirs)
    return sums


def ours_lines(json_path):
    report = json.load(open(json_path))
    profile = report["lines"]["Ok"]
    out = {}
    for row in profile["lines"]:
        line = row["line"]
        key = str(line["student"]) if isinstance(line, dict) else "own"
        out[key] = dict(share=row["share"], **{k: row["counts"][k] for k, _ in COUNTS})
    return out, profile


def shares(sums):
    total = sum(v["samples"] for v in sums.values()) or 1
    return {line: v["samples"] / total for line, v in sums.items()}


def within(a, b, tolerance=0.01):
    return abs(a - b) <= tolerance * max(a, b, 1)


def compare(d, name):
    try:
        ours, profile = ours_lines(f"{d}/{name}.json")
        theirs = ncu_lines(f"{d}/{name}.ncu.csv", table(f"{d}/{name}.table.tsv"))
    except Exception as e:  # a missing or failed run is a row of the table
        return f"{name:<32} not compared: {type(e).__name__}: {e}"
    ncu_share = shares(theirs)
    lines = sorted(set(ours) | set(theirs), key=lambda l: -ncu_share.get(l, 0))
    counted = [l for l in lines if any(ours.get(l, {}).get(k, 0) or theirs.get(l, {}).get(k, 0) for k, _ in COUNTS)]
    agree = [l for l in counted if all(within(ours.get(l, {}).get(k, 0), theirs.get(l, {}).get(k, 0)) for k, _ in COUNTS)]
    hot_ours = sorted(ours, key=lambda l: -ours[l]["share"])[:8]
    hot_theirs = sorted(ncu_share, key=lambda l: -ncu_share[l])[:8]
    misses, worst = [], 0.0
    for line in set(l for l in ours if ours[l]["share"] > 0.05) | set(l for l in ncu_share if ncu_share[l] > 0.05):
        diff = abs(ours.get(line, {}).get("share", 0) - ncu_share.get(line, 0)) * 100
        worst = max(worst, diff)
        if line not in hot_ours or line not in hot_theirs or diff > 5:
            misses.append(f"{line} ({diff:.1f} pts)")
    with open(f"{d}/{name}.compare.txt", "w") as f:
        f.write(f"{'line':>5} {'share':>6} {'ncu':>6}  " + "  ".join(f"{k:>14} {'ncu':>14}" for k, _ in COUNTS) + "\n")
        for l in lines:
            o, t = ours.get(l, {}), theirs.get(l, {})
            f.write(f"{l:>5} {o.get('share', 0):6.1%} {ncu_share.get(l, 0):6.1%}  "
                    + "  ".join(f"{o.get(k, 0):14d} {t.get(k, 0):14d}" for k, _ in COUNTS) + "\n")
    hottest = hot_ours[0] if hot_ours else "-"
    return (f"{name:<32} {len(agree):>3}/{len(counted):<3} {'yes' if not misses else 'NO: ' + ', '.join(misses):<24}"
            f" {worst:5.1f}  {profile['total_samples']:>7} {hottest:>5} {ours.get(hottest, {}).get('share', 0):6.1%} {ncu_share.get(hottest, 0):6.1%}")


if __name__ == "__main__":
    d = sys.argv[1]
    names = sorted(os.path.basename(p)[:-len(".json")] for p in glob.glob(f"{d}/*.json"))
    print(f"{'kernel':<32} {'counts':>7} {'hot lines agree':<24} {'worst':>5}  {'samples':>7} {'line':>5} {'share':>6} {'ncu':>6}")
    for name in names:
        print(compare(d, name))
