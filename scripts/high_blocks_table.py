"""The high-blocks table from scripts/gpu-high-blocks.sh's reports.

Per kernel of each paged prefill lab: what each high-blocks case did (status,
cause), whether it failed exactly the cases its first line lists (the starter
and the reference: none), the cost of each high-blocks case in the check
(`elapsed_ms` of the case, against all cases together), and the SASS of the
planted bugs' cache loads (whether the offset reaches the load as a 32-bit
value widened by IMAD.WIDE, sign- or zero-extended).
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
HIGH = ["high-blocks-past-2-31", "high-blocks-past-2-32"]
rows, ok_all = [], True
for lab in ["paged-prefill", "paged-prefill-fp8"]:
    for kernel in ["starter", "reference", "int32-offset-signed", "int32-offset-unsigned", "block-table-ignored", "x-assumed-8"]:
        name = f"{lab}-{kernel}"
        path = out / "reports" / f"{name}.json"
        if not path.exists():
            continue
        try:
            report = json.loads(path.read_text())
        except ValueError:
            report = {}
        cases = {c["name"]: c for c in report.get("cases", [])}
        source = pathlib.Path("kernels") / lab / ("bugs" if kernel not in ("starter", "reference") else "") / f"{kernel}.cu"
        first = source.read_text().splitlines()[0]
        listed = set(first.split("flashprof-expect-fail:", 1)[1].split()) if "flashprof-expect-fail:" in first else set()
        failed = {n for n, c in cases.items() if c["status"] != "pass"}
        named = all(cases.get(n, {}).get("cause") == kernel for n in listed & set(HIGH)) if kernel.startswith("int32") else True
        ok = bool(cases) and failed == listed and named
        ok_all &= ok
        total_ms = sum(c.get("elapsed_ms", 0) for c in cases.values())
        seen = []
        for case in HIGH:
            c = cases.get(case)
            if c is None:
                seen.append(f"{case[-4:]}: missing")
                continue
            seen.append(f"{case[-4:]}: {c['status']}" + (f" ({c.get('cause')})" if c["status"] != "pass" else "") + f" {c.get('elapsed_ms', 0):.0f} ms")
        rows.append((name, f"fails {len(failed)}/{len(cases)} (listed {len(listed)})", "; ".join(seen), f"{total_ms:.0f} ms all cases", "ok" if ok else "WRONG"))
        if kernel.startswith("int32") or kernel == "block-table-ignored":
            for case in HIGH:
                if case in cases and cases[case]["status"] != "pass":
                    print(f"  {name} {case}: {cases[case]['diagnosis'][:400]}")
for row in rows:
    print("  ".join(row))
for sass in sorted((out / "sass").glob("*.sass")):
    text = sass.read_text()
    loads = len(re.findall(r"LDG\.E", text))
    wide = len(re.findall(r"IMAD\.WIDE(?!\.U32)", text))
    wide_u = len(re.findall(r"IMAD\.WIDE\.U32", text))
    print(f"{sass.stem}: LDG {loads}, IMAD.WIDE (sign-extending) {wide}, IMAD.WIDE.U32 {wide_u}")
print("ALL OK" if ok_all else "SOME WRONG")
sys.exit(0 if ok_all else 1)
