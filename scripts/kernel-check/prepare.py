#!/usr/bin/env python3
"""Packs kernel files for the device harness: wrapped sources plus a manifest.

Each kernel becomes `<out>/src/<name>.cu` (wrapped exactly as nvrtc_check.py
wraps it), `<out>/nvrtc/<name>.cubin` (what flashprof's NVRTC 13 makes of it,
used on the device when nvcc is missing and timed next to nvcc's build) and
one manifest line:
    name rows_per_block threads dynamic_smem grid expected_case expected_kind
The geometry comes from the file's `@flashprof` comment (lab defaults
otherwise); the expectation from a planted bug's `flashprof-expect` line
(`-` for both when there is none).

Usage: prepare.py OUT_DIR FILE...
"""

import os
import re
import sys

from nvrtc_check import compile_file, load_nvrtc, wrap

DEFAULT_GEOMETRY = {"rows_per_block": "64", "threads": "256", "dynamic_smem": "0", "grid": "head"}


def geometry(source: str) -> dict:
    found = dict(DEFAULT_GEOMETRY)
    for line in source.splitlines():
        match = re.match(r"\s*//\s*@flashprof\b(.*)", line)
        if match:
            for pair in match.group(1).split():
                key, value = pair.split("=", 1)
                found[key] = value
    return found


def expectation(source: str) -> tuple:
    match = re.search(r"//\s*flashprof-expect:\s*(\S+)\s+(\S+)", source)
    return match.groups() if match else ("-", "-")


def main() -> int:
    out_dir, files = sys.argv[1], sys.argv[2:]
    nvrtc = load_nvrtc()
    if nvrtc is None:
        return 1
    for sub in ("src", "nvrtc"):
        os.makedirs(os.path.join(out_dir, sub), exist_ok=True)
    lines = []
    for path in files:
        name = os.path.splitext(os.path.basename(path))[0]
        with open(path, encoding="utf-8") as handle:
            source = handle.read()
        with open(os.path.join(out_dir, "src", name + ".cu"), "w", encoding="utf-8") as handle:
            handle.write(wrap(source))
        if not compile_file(nvrtc, path, os.path.join(out_dir, "nvrtc", name + ".cubin")):
            return 1
        g = geometry(source)
        case, kind = expectation(source)
        lines.append(
            f"{name} {g['rows_per_block']} {g['threads']} {g['dynamic_smem']} {g['grid']} {case} {kind}"
        )
    with open(os.path.join(out_dir, "manifest.txt"), "w", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
