#!/usr/bin/env python3
"""The table of scripts/gpu-integrity.sh: one row per kernel, both builds."""
import json
import pathlib
import sys


def load(path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def timing(report):
    return (report or {}).get("timing") or {}


def speedup(report):
    s = timing(report).get("speedup")
    return s["point"] if s else None


def withheld(report):
    t = timing(report)
    if not t:
        return (report or {}).get("timing_error") or "not timed"
    if t.get("speedup"):
        return "ok"
    drift = t.get("drift")
    if drift and drift["after_student_ms"] / drift["after_starter_ms"] - 1 > 0.10:
        return f"starter drift {drift['after_student_ms'] / drift['after_starter_ms'] - 1:+.1%}"
    for key in ("finding", "impossible", "profile_refused", "starter_finding"):
        if t.get(key):
            value = t[key]
            if key == "finding":
                return f"{value['finding']} at {value['launch']['phase']} {value['launch']['number']}"
            return key
    return "output wrong"


def floor_margin(report):
    t = timing(report)
    floor = t.get("floor")
    if not floor:
        return "-", "-"
    median = t["student"]["median"]
    dram = floor["work"]["compulsory_bytes"] / floor["ceilings"]["dram_bytes_per_s"] * 1e3
    return f"{median / floor['ms']:.1f}", f"{median / dram:.2f}"


def precision(report):
    """Worst timed share of the allowance over the checked launch's, class by class."""
    p = timing(report).get("precision")
    if not p:
        return "-"
    checked = {c["class"]: c["share"] for c in p["checked"]}
    return " ".join(f"{c['class']}:{c['share']:.3f}/{checked.get(c['class'], 0):.3f}" for c in p["timed"])


def drift(report):
    """The starter's drift, with the SM clocks after each side where read."""
    d = timing(report).get("drift")
    if not d:
        return "-"
    said = f"{d['after_student_ms'] / d['after_starter_ms'] - 1:+.1%}"
    if d.get("clock_after_starter_mhz") and d.get("clock_after_student_mhz"):
        said += f"@{d['clock_after_starter_mhz']:.0f}/{d['clock_after_student_mhz']:.0f}MHz"
    return said


def main():
    folder = pathlib.Path(sys.argv[1])
    names = sorted({p.name.split(".")[0] for p in folder.glob("*.json")})
    print(f"{'kernel':<34} {'before':>9} {'after':>9} {'ratio':>6} {'floor x':>8} {'dram x':>7} "
          f"{'t_before':>8} {'t_after':>8} {'audits':>6} {'drift':>18}  after says; worst share timed/checked")
    for name in names:
        after = load(folder / f"{name}.after.json")
        before = load(folder / f"{name}.before.json")
        a, b = speedup(after), speedup(before)
        ratio = f"{a / b:.3f}" if a and b else "-"
        fmt = lambda x: f"{x:.2f}x" if x else "-"
        margin, dram = floor_margin(after)
        ms = lambda r: f"{timing(r)['elapsed_ms'] / 1e3:.2f}s" if timing(r) else "-"
        print(f"{name:<34} {fmt(b):>9} {fmt(a):>9} {ratio:>6} {margin:>8} {dram:>7} "
              f"{ms(before):>8} {ms(after):>8} {timing(after).get('audited_launches', '-'):>6} {drift(after):>18}  "
              f"{withheld(after)}; {precision(after)}")


if __name__ == "__main__":
    main()
