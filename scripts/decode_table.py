"""The paged-decode lab's GPU acceptance, read from flashprof's JSON reports.

Reports in OUT/reports (scripts/gpu-decode.sh): decode-starter and
decode-reference must pass every case; each decode-bug-NAME must fail
exactly the cases on the first line of kernels/paged-decode/bugs/NAME.cu
(`// flashprof-expect-fail: ...`, the CPU models' lists, checked in CI),
every failing case naming the bug (`cause`). For the reference: its
timed speedup over the starter, not withheld, and its achieved bandwidth
(compulsory bytes over the median timed launch) as a share of the larger
of the measured copy and read-only rates, at least 80%; DRAM bytes read
from its counters against the compulsory bytes. Prints a table; exit 0
only when every expectation holds.
"""
import json
import pathlib
import sys

out = pathlib.Path(sys.argv[1])
runs = {}
for line in (out / "runs.txt").read_text().splitlines():
    name, rc, wall = line.split()
    runs[name] = (int(rc), float(wall))


def load(name):
    try:
        return json.loads((out / "reports" / f"{name}.json").read_text())
    except Exception as error:  # flashprof's own crash fails the expectation
        return {"error": str(error)}


def cases_line(report):
    cases = report.get("cases", [])
    return f"{sum(c['status'] == 'pass' for c in cases)}/{len(cases)} pass"


rows, ok_all = [], True


def row(kernel, expected, seen, ok):
    global ok_all
    ok_all &= ok
    rows.append((kernel, expected, seen, "ok" if ok else "WRONG"))


starter = load("decode-starter")
row("starter", "all cases pass", cases_line(starter), starter.get("passed", False))

reference = load("decode-reference")
timing = reference.get("timing") or {}
speedup = timing.get("speedup") or {}
median = (timing.get("student") or {}).get("median")
starter_median = (timing.get("starter") or {}).get("median")
compulsory = ((timing.get("shape") or {}).get("work") or {}).get("compulsory_bytes")
bandwidth = timing.get("bandwidth") or {}
counters = [c.get("Ok") for c in reference.get("counters", []) if c.get("Ok")]
copy = bandwidth.get("copy_bytes_per_s") or (counters[0]["peaks"]["dram_bytes"]["per_s"] if counters else None)
read_only = bandwidth.get("read_bytes_per_s")
roof = max(r for r in (copy, read_only) if r) if (copy or read_only) else None
achieved = compulsory / (median * 1e-3) if compulsory and median else None
share = achieved / roof if achieved and roof else None
point = speedup.get("point")
finding = timing.get("finding") or timing.get("impossible")
row("reference", "all cases pass", cases_line(reference), reference.get("passed", False))
row("reference timing", "speedup shown, no finding",
    f"{median and round(median, 4)} ms vs starter {starter_median and round(starter_median, 4)} ms: "
    f"{point and round(point, 2)}x (CI {speedup.get('ci_low') and round(speedup['ci_low'], 2)}.."
    f"{speedup.get('ci_high') and round(speedup['ci_high'], 2)})" + (f", finding {str(finding)[:60]}" if finding else ""),
    point is not None and finding is None)
row("reference bandwidth", ">= 80% of max(copy, read-only)",
    f"{achieved and round(achieved / 1e9)} GB/s of {compulsory} B = {share and round(100 * share, 1)}% of "
    f"{roof and round(roof / 1e9)} GB/s (copy {copy and round(copy / 1e9)}, read-only {read_only and round(read_only / 1e9)})",
    share is not None and share >= 0.8)
for outcome in counters:
    dram = ((outcome.get("student") or {}).get("roofline") or {}).get("dram") or {}
    read = dram.get("read_bytes")
    row(f"reference DRAM ({outcome['tier']})", "reads ~ compulsory bytes",
        f"{read and round(read / 1e6, 1)} MB read, {dram.get('write_bytes') and round(dram['write_bytes'] / 1e6, 1)} MB written, "
        f"compulsory {compulsory and round(compulsory / 1e6, 1)} MB ({read and compulsory and round(read / compulsory, 3)}x)",
        bool(read))

for path in sorted(pathlib.Path("kernels/paged-decode/bugs").glob("*.cu")):
    must_fail = set(path.read_text().splitlines()[0].split("flashprof-expect-fail:", 1)[1].split())
    name = f"decode-bug-{path.stem}"
    report = load(name)
    rc, _ = runs.get(name, (-1, 0.0))
    cases = report.get("cases", [])
    failed = {c["name"] for c in cases if c["status"] != "pass"}
    named = all(c.get("cause") == path.stem for c in cases if c["name"] in failed)
    extra, missed = sorted(failed - must_fail), sorted(must_fail - failed)
    seen = f"fails {len(failed)}/{len(cases)}" + (f", also {extra}" if extra else "") + (f", not {missed}" if missed else "")
    seen += f"; {'named' if named else 'NOT named'}: {(report.get('diagnosis') or '')[:70]}"
    row(f"bugs/{path.stem}", f"fails exactly {len(must_fail)}, named", seen,
        bool(cases) and failed == must_fail and named and rc != 0)

calibrated = out / "calibrate.txt"
if calibrated.exists():
    print(calibrated.read_text().strip())
width = [max(len(r[i]) for r in rows) for i in range(3)]
print(f"{'kernel':<{width[0]}}  {'expected':<{width[1]}}  {'seen':<{width[2]}}  verdict")
for r in rows:
    print(f"{r[0]:<{width[0]}}  {r[1]:<{width[1]}}  {r[2]:<{width[2]}}  {r[3]}")
print("DECODE ACCEPTANCE", "PASSED" if ok_all else "FAILED")
sys.exit(0 if ok_all else 1)
