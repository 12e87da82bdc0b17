"""Prints the kernel ladder's table from `flashprof check --json` reports.

One report per kernel in the folder given: starter.json, reference.json, one
per rung (named after kernels/flash-prefill/ladder/NN-*.cu) and plain-tf32.json. Exit status
0 only when every rung passes every case and its timed output, and plain TF32
fails (a case or the timed output): the ladder's claim that 3xTF32 is needed.
"""
import json
import pathlib
import sys

folder = pathlib.Path(sys.argv[1])


def load(name):
    try:
        return json.loads((folder / f"{name}.json").read_text())
    except Exception as error:  # a crash of flashprof itself counts as a failure
        return {"error": str(error)}


def metric(report, name):
    """The full-tier (else quick-tier) value of one counter for the student kernel, or None."""
    for outcome in reversed([c.get("Ok") for c in report.get("counters") or []]):
        for m in (outcome or {}).get("student", {}).get("metrics", []):
            if m["name"] == name and isinstance(m["value"], (int, float)):
                return m["value"]
    return None


def roofline(report):
    for outcome in reversed([c.get("Ok") for c in report.get("counters") or []]):
        line = (outcome or {}).get("student", {}).get("roofline")
        if line:
            return line
    return None


def row(name, report):
    if "error" in report:
        return f"{name:30} no report ({report['error']})", False
    cases = report.get("cases", [])
    passed = sum(c["status"] == "pass" for c in cases)
    timing = report.get("timing") or {}
    student = (timing.get("student") or {}).get("median")
    starter = (timing.get("starter") or {}).get("median")
    timed_ok = (timing.get("output_check") or {}).get("passed", False)
    resources = (report.get("compile") or {}).get("resources") or {}
    sm = metric(report, "sm__throughput.avg.pct_of_peak_sustained_elapsed")
    fma = metric(report, "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed")
    line = roofline(report)
    time = f"{student:8.3f} ms" if student else "    -     "
    speedup = f"{starter / student:6.1f}x" if student and starter else "    - "
    counters = ""
    if line:
        counters = f"{line['verdict']['bound']:9} {line['achieved_gflops']:7.0f} GFLOP/s"
        if sm is not None:
            counters += f", SM {sm:4.1f}%"
        if fma is not None:
            counters += f", FMA pipe {fma:4.1f}%"
    everything = passed == len(cases) and len(cases) > 0 and timed_ok
    verdict = "pass" if everything else "FAIL"
    text = (
        f"{name:30} {passed:2}/{len(cases):<2} {verdict:4} {time} {speedup} "
        f"{resources.get('registers', '-'):>4} regs {resources.get('spill_store_bytes', 0):>4} B spill  {counters}"
    )
    return text, everything


rungs = sorted(p.stem for p in folder.glob("[0-9][0-9]-*.json"))
print(f"{'kernel':30} cases      median    speedup  registers         counters (student)")
ok = True
for name in ["starter", "reference", *rungs]:
    text, passed = row(name, load(name))
    print(text)
    ok &= passed
text, tf32_passed = row("plain-tf32 (top rung, no split)", load("plain-tf32"))
print(text)
if tf32_passed:
    print("UNEXPECTED: plain TF32 passed every case; the ladder's 3xTF32 claim does not hold here")
ok &= not tf32_passed
if not rungs:
    print("no rung reports found")
    ok = False
print("ladder: every rung passes, plain TF32 fails" if ok else "ladder: EXPECTATION FAILED")
sys.exit(0 if ok else 1)
