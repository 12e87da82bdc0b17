"""Checks flashprof's JSON reports against each kernel's expected verdict and prints a table.

Every lab: flash-prefill (kernels/flash-prefill/, reports named starter,
reference, bug-*), paged-prefill (kernels/paged-prefill/, reports named
paged-*) and paged-prefill-fp8 (kernels/paged-prefill-fp8/, reports named fp8-*).

A flash-prefill planted bug's first line says what must happen:
    // flashprof-expect: <case-name> <kind>
kind: fail, nan, unwritten, race, oob-write, input-mutated, timeout, crash.
A planted bug of either paged lab lists on its first line every case it must fail, and
every other case must pass (CI checks the list against the CPU bug models):
    // flashprof-expect-fail: <case-name> ...
Exit status 0 only when every expectation holds.
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
    path = out / "reports" / f"{name}.json"
    try:
        return json.loads(path.read_text())
    except Exception as error:  # a crash of flashprof itself is a failed expectation
        return {"error": str(error)}


def racecheck_hazard(report):
    """Whether the sanitizer pass ran racecheck and it reported a hazard."""
    tools = (report.get("sanitizer") or {}).get("tools") or []
    return any(t.get("tool") == "racecheck" and t.get("status") == "hazards" for t in tools)


def holds(case, kind, report):
    cmp = case.get("comparison") or {}
    integrity = case.get("integrity") or {}
    return {
        "fail": case["status"] == "fail",
        "nan": case["status"] == "fail" and (cmp.get("nan", 0) > 0 or cmp.get("inf", 0) > 0),
        "unwritten": case["status"] == "fail" and cmp.get("unwritten", 0) > 0,
        # Two runs that differ, or racecheck's report on the same case: a
        # race shows as differing bits only on some runs, racecheck every time.
        "race": integrity.get("runs_differ", False) or racecheck_hazard(report),
        "oob-write": integrity.get("out_of_bounds_writes", 0) > 0,
        "input-mutated": bool(integrity.get("inputs_modified")),
        "timeout": case["status"] == "timeout",
        "crash": case["status"] == "crash",
    }[kind]


def counters_problem(report):
    """Why the report's counters fall short (both tiers, every value finite, a roofline each), or None."""
    outcomes = [c.get("Ok") for c in report.get("counters", [])]
    if [o and o["tier"] for o in outcomes] != ["quick", "full"]:
        return "counters: not both tiers"
    for outcome in outcomes:
        for kernel in ("student", "starter"):
            counters = outcome[kernel]
            bad = [m["name"] for m in counters["metrics"] if not isinstance(m["value"], (int, float)) or m["value"] != m["value"]]
            if bad or counters.get("roofline") is None:
                return f"counters: {outcome['tier']} {kernel} NaN in {bad or 'roofline'}"
    return None


rows = []
ok_all = True
for name in ["starter", "reference", "paged-starter", "paged-reference", "fp8-starter", "fp8-reference"]:
    report = load(name)
    rc, wall = runs.get(name, (-1, 0.0))
    timing = report.get("timing") or {}
    speedup = (timing.get("speedup") or {}).get("point")
    # A reference must clear 10x with the lower end of its 95% interval.
    ci_low = (timing.get("speedup") or {}).get("ci_low")
    passed = report.get("passed", False) and rc == 0
    is_starter = name.endswith("starter")
    want_speed = 0.8 if is_starter else 10.0
    counters = counters_problem(report)
    judged = speedup if is_starter else ci_low
    ok = passed and judged is not None and judged >= want_speed and (not is_starter or speedup <= 1.25) and counters is None
    ok_all &= ok
    student = (timing.get("student") or {}).get("median")
    rows.append((name, "all cases pass, counters", f"{sum(c['status']=='pass' for c in report.get('cases', []))}/{len(report.get('cases', []))} pass, "
                 f"{student if student is None else round(student, 3)} ms, speedup {speedup if speedup is None else round(speedup, 2)}x (CI low {ci_low if ci_low is None else round(ci_low, 2)}x), wall {wall:.2f} s, "
                 f"{counters or 'counters ok'}",
                 "ok" if ok else "WRONG"))

for path in sorted(pathlib.Path("kernels/flash-prefill/bugs").glob("*.cu")):
    first = path.read_text().splitlines()[0]
    case_name, kind = first.split("flashprof-expect:", 1)[1].split()[:2]
    name = f"bug-{path.stem}"
    report = load(name)
    rc, wall = runs.get(name, (-1, 0.0))
    case = next((c for c in report.get("cases", []) if c["name"] == case_name), None)
    ok = case is not None and holds(case, kind, report) and rc != 0
    ok_all &= ok
    seen = "missing" if case is None else f"{case['status']}: {case['diagnosis'][:70]}"
    rows.append((path.stem, f"{case_name} {kind}", seen, "ok" if ok else "WRONG"))

# A paged bug fails exactly its listed cases, and the check's one line names
# its defect (the report's `diagnosis` names the bug whose model reproduces
# the failing cases; each case's `cause` is that bug's name where it is sure).
for short, prefix, folder in [("paged", "paged-bug", "kernels/paged-prefill/bugs"), ("fp8", "fp8-bug", "kernels/paged-prefill-fp8/bugs")]:
    for path in sorted(pathlib.Path(folder).glob("*.cu")):
        first = path.read_text().splitlines()[0]
        must_fail = set(first.split("flashprof-expect-fail:", 1)[1].split())
        name = f"{prefix}-{path.stem}"
        report = load(name)
        rc, wall = runs.get(name, (-1, 0.0))
        cases = report.get("cases", [])
        failed = {c["name"] for c in cases if c["status"] != "pass"}
        ran = {c["name"] for c in cases}
        named = sum(c.get("cause") == path.stem for c in cases if c["name"] in failed)
        ok = bool(cases) and failed == must_fail and rc != 0 and named > 0
        ok_all &= ok
        extra, missed = sorted(failed - must_fail), sorted(must_fail - failed)
        seen = f"fails {len(failed)}/{len(ran)}, {named} named {path.stem}" + (f", also {extra}" if extra else "") + (f", not {missed}" if missed else "")
        seen += f": {(report.get('diagnosis') or '')[:60]}"
        rows.append((f"{short}/{path.stem}", f"fails exactly {len(must_fail)} listed", seen, "ok" if ok else "WRONG"))

# Honest timing: a cheat either has its speedup withheld with the launch and
# the reason, or shows the starter's own speed, 1.0x within 3% (the trick
# bought nothing; a memo keyed on values against its control, the same file
# with the memo never consulted, whose code may compile faster or slower);
# none passes the gate. The evict-last reference keeps the reference's speed
# and shows its hints.
def speed(report):
    return ((report.get("timing") or {}).get("speedup") or {}).get("point")


for lab, prefix, folder in [("flash-prefill", "cheat", "kernels/flash-prefill/cheats"), ("paged-prefill", "paged-cheat", "kernels/paged-prefill/cheats")]:
    reference = speed(load("reference" if prefix == "cheat" else "paged-reference"))
    # The starter timed against itself in the same call: what "the trick bought nothing" reads.
    own = speed(load("starter" if prefix == "cheat" else "paged-starter")) or 1.0
    for path in sorted(pathlib.Path(folder).glob("*.cu")):
        report = load(f"{prefix}-{path.stem}")
        timing = report.get("timing") or {}
        point = speed(report)
        finding = timing.get("finding") or timing.get("impossible")
        gate = ((report.get("gate") or {}).get("verdict")) or "-"
        if path.stem == "reference-evict-last":
            facts = (report.get("compile") or {}).get("kernel_facts") or {}
            hints = facts.get("eviction_hints") or []
            ok = point is not None and reference is not None and abs(point / reference - 1) <= 0.03 and bool(hints)
            expected, seen = "reference's speed, hints shown", f"{point and round(point, 2)}x vs {reference and round(reference, 2)}x, hints {hints}"
        elif path.stem == "adaptive-precision":
            # The precision rule's honest control, precision chosen from the
            # data: every case passes and the speedup stands; the worst
            # timed class's share against the checked launch's is the
            # margin shown.
            cases = report.get("cases") or []
            passed = bool(cases) and all(c.get("status") == "pass" for c in cases)
            shares = timing.get("precision") or {}
            checked = max((c["share"] for c in shares.get("checked", [])), default=0.0)
            timed = max((c["share"] for c in shares.get("timed", [])), default=0.0)
            ok = passed and point is not None and finding is None
            expected = "every case, a speedup, no finding"
            seen = f"{point and round(point, 2)}x" if point else f"withheld: {str(finding)[:60]}"
            seen += f", worst share timed {timed:.3f} / checked {checked:.3f}"
        elif path.stem == "writes-pristine":
            # Named for what it wrote, not only without a speedup (a scan
            # that faults also has none, but proves nothing of the rule).
            ok = point is None and "HarnessWritten" in json.dumps(finding)
            expected, seen = "withheld: harness written", f"{point and round(point, 2)}x" if point else f"withheld: {str(finding)[:70]}"
        else:
            # Against the file with its trick never taken, when there is one.
            control = speed(load(f"{prefix}-control-{path.stem}")) if path.stem == "memo-by-values" else None
            base = control or 1.0
            ok = gate != "pass" and ((point is None and finding is not None) or (point is not None and abs(point / base - 1) <= 0.03))
            expected = f"withheld, or its control's {base:.2f}x" if control else f"withheld, or 1.00x (starter {own:.2f}x)"
            seen = f"{point and round(point, 2)}x" if point else f"withheld: {str(finding)[:70]}"
        ok_all &= ok
        rows.append((f"{lab}/{path.stem}", expected, seen, "ok" if ok else "WRONG"))

width = [max(len(r[i]) for r in rows) for i in range(3)]
print(f"{'kernel':<{width[0]}}  {'expected':<{width[1]}}  {'seen':<{width[2]}}  verdict")
for r in rows:
    print(f"{r[0]:<{width[0]}}  {r[1]:<{width[1]}}  {r[2]:<{width[2]}}  {r[3]}")
print("ACCEPTANCE", "PASSED" if ok_all else "FAILED")
sys.exit(0 if ok_all else 1)
