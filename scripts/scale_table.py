"""The scale table from scripts/gpu-scale.sh's reports.

Per kernel: what each high-blocks and long case did (status, cause, its
`elapsed_ms` in the check, and for a long case the rows on which the CPU
oracle proved the GPU float64 reference), whether the kernel failed exactly
the cases its first line lists (the starter and the reference: none), the
whole check's case time, and the SASS of the planted bugs' cache loads
(IMAD.WIDE sign-extends a 32-bit offset, IMAD.WIDE.U32 zero-extends it).
"""
import json
import pathlib
import re
import sys

out = pathlib.Path(sys.argv[1])
runs = {}
for line in (out / "runs.txt").read_text().splitlines():
    name, rc, wall = line.split()
    runs[name] = (int(rc), float(wall))
SCALE = ["high-blocks-past-2-31", "high-blocks-past-2-32", "long-context-32k", "long-prefix-16k"]
LABS = ["flash-prefill", "paged-prefill-fp8", "paged-prefill"]
rows, ok_all = [], True
for path in sorted((out / "reports").glob("*.json")):
    name = path.stem
    if name.startswith("sanitize-"):
        continue
    lab = next(l for l in LABS if name.startswith(l + "-"))
    kernel = name[len(lab) + 1:]
    if True:
        try:
            report = json.loads(path.read_text())
        except ValueError:
            report = {}
        cases = {c["name"]: c for c in report.get("cases", [])}
        source = pathlib.Path("kernels") / lab / ("bugs" if kernel not in ("starter", "reference") else "") / f"{kernel}.cu"
        first = source.read_text().splitlines()[0]
        failed = {n for n, c in cases.items() if c["status"] != "pass"}
        if "flashprof-expect-fail:" in first:
            listed = set(first.split("flashprof-expect-fail:", 1)[1].split())
        elif "flashprof-expect:" in first:
            # A flash bug names one case it must fail; it may fail others.
            listed = failed | {first.split("flashprof-expect:", 1)[1].split()[0]}
        else:
            listed = set()
        named = all(cases.get(n, {}).get("cause") == kernel for n in listed & set(SCALE)) if kernel.startswith("int32") else True
        ok = bool(cases) and failed == listed and named
        ok_all &= ok
        total_ms = sum(c.get("elapsed_ms", 0) for c in cases.values())
        seen = []
        for case in SCALE:
            c = cases.get(case)
            if c is None:
                continue
            proof = c.get("reference_check")
            proved = f", proven on {proof['rows_checked']} rows (diff {proof['max_rel_diff']:.1e})" if proof else ""
            seen.append(f"{case}: {c['status']}" + (f" ({c.get('cause')})" if c["status"] != "pass" else "") + f" {c.get('elapsed_ms', 0):.0f} ms{proved}")
        rows.append((name, f"fails {len(failed)}/{len(cases)} (listed {len(listed)})", "; ".join(seen), f"{total_ms:.0f} ms all cases", "ok" if ok else "WRONG"))
        if kernel not in ("starter", "reference"):
            for case in SCALE:
                if case in cases and cases[case]["status"] != "pass":
                    print(f"  {name} {case}: {cases[case]['diagnosis'][:400]}")
for row in rows:
    print("  ".join(row))
for path in sorted((out / "reports").glob("sanitize-*.json")):
    try:
        report = json.loads(path.read_text())
    except ValueError:
        report = {}
    sanitizer = report.get("sanitizer") or {}
    cases = report.get("cases", [])
    status = ", ".join(f"{c['name']}: {c['status']}" for c in cases)
    print(f"{path.stem}: rc {runs.get(path.stem, ('?',))[0]}, {status}; sanitizer: {json.dumps(sanitizer)[:300]}")
for sass in sorted((out / "sass").glob("*.sass")):
    text = sass.read_text()
    loads = len(re.findall(r"LDG\.E", text))
    wide = len(re.findall(r"IMAD\.WIDE(?!\.U32)", text))
    wide_u = len(re.findall(r"IMAD\.WIDE\.U32", text))
    print(f"{sass.stem}: LDG {loads}, IMAD.WIDE (sign-extending) {wide}, IMAD.WIDE.U32 {wide_u}")
print("ALL OK" if ok_all else "SOME WRONG")
sys.exit(0 if ok_all else 1)
