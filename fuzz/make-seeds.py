#!/usr/bin/env python3
"""Writes fuzz/seeds/<target>/ from the repository's real inputs.

Run from anywhere: python3 fuzz/make-seeds.py. scripts/fuzz-ci.sh runs it
before every fuzzing run, so the seeds are never committed and never stale.
"""
import glob, json, os, struct, shutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "fuzz", "seeds")


def put(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def read(path, mode="rb"):
    with open(os.path.join(ROOT, path), mode) as f:
        return f.read()


shutil.rmtree(OUT, ignore_errors=True)

# source: every kernel in the repository, and a few small bodies.
for path in sorted(glob.glob("kernels/**/*.cu", root_dir=ROOT, recursive=True)):
    put("source", path.replace("/", "_"), read(path))
put("source", "body_directive.cu",
    "// @flashprof rows_per_block=32 threads=128 dynamic_smem=4096 grid=kv_group\n"
    "#include <math.h>\nint r = blockIdx.x; out[r] = INFINITY;\n")
put("source", "body_paged.cu", "// @flashprof lab=paged-prefill threads=64\nint i = 0;\n")
put("source", "include_refused.cu", '#include "/etc/passwd"\n#if __has_include("x")\n#endif\n')
put("source", "bom_comment.cu", "\ufeff/* c */ // x\n#define A(x) x ## 1\nR\"(raw)\" 'c' \"s\\\"\"\n")

# geometry: the declaration lines the kernels use, and edge values.
lines = set()
for path in glob.glob("kernels/**/*.cu", root_dir=ROOT, recursive=True):
    for line in read(path).decode().splitlines():
        if "@flashprof" in line:
            lines.add(line)
for i, line in enumerate(sorted(lines)):
    put("geometry", f"kernel_{i}", line + "\n")
put("geometry", "limits", "// @flashprof rows_per_block=4294967295 threads=1024 dynamic_smem=232448 grid=head\n")
put("geometry", "two", "//@flashprof threads=1\n  // @flashprof lab=x\n")
put("geometry", "bad", "// @flashprof threads=0 rows_per_block grid=diagonal\n")

# compile_log: the first byte picks the lab and the file (compile_log.rs).
log = read("src/facts/diagnostics.rs").decode()
start = log.index('const LOG: &str = "\\\n') + len('const LOG: &str = "\\\n')
log = log[start:log.index('";', start)].replace('\\"', '"')
for pick in (0, 1, 0x80, 0xC1):
    name_log = log.replace("my (1)/k.cu", "student.cu" if pick & 0x40 == 0 else "dir (1)/a(2).cu")
    put("compile_log", f"test_log_{pick:02x}", bytes([pick]) + name_log.encode())
put("compile_log", "ptxas", b"\x00ptxas error   : Entry function 'attention_prefill' uses too much shared data (0x44580 bytes, 0xc000 max)\n")
put("compile_log", "caret", b"\x00student.cu(1): error: x\n" + b" " * 300 + b"^\n")

# npy: the small golden tensors (the large ones only slow the fuzzer down).
for path in sorted(glob.glob("assets/golden*/*.npy", root_dir=ROOT)):
    data = read(path)
    if len(data) <= 20000:
        put("npy", path.replace("/", "_"), data)
hdr = b"{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }"
hdr += b" " * ((-(12 + len(hdr) + 1)) % 64) + b"\n"
put("npy", "v2_f64", b"\x93NUMPY\x02\x00" + struct.pack("<I", len(hdr)) + hdr + struct.pack("<2d", 1.5, -2.0))
put("npy", "encode_side", bytes([2, 3, 2]) + struct.pack("<6f", *range(6)))

# cases: byte 0 picks flash-prefill, byte 1 paged-prefill (registry order).
put("cases", "flash_prefill", b"\x00" + read("assets/cases.toml"))
put("cases", "paged_prefill", b"\x01" + read("assets/paged-cases.toml"))
put("cases", "tensors", b'\x00[[case]]\nname = "t"\nsummary = "s"\ntensors = "golden"\n')

# history: the recorded H200 session's records small enough to be useful seeds,
# and one with a torn line and a hostile hash.
records = read("assets/recorded-session/history.jsonl").split(b"\n")
small = [r for r in records if r and len(r) <= 65536]
for i, r in enumerate(small):
    put("history", f"recorded_{i}", r + b"\n")
put("history", "torn", small[0] + b"\n" + b'{"unix_ms":1,"source_hash":"../../etc","report":null}\n\xff\n' + small[0][:100])
put("history", "snapshot", b'{"unix_ms":1,"source_hash":"0123456789abcdef","report":null}\n')

# journal: entries around a recorded report.
report = json.loads(small[0])["report"]
entry = {"id": "alice/prefill.cu", "file": "alice/prefill.cu", "content_hash": "0123456789abcdef",
         "lab": "flash-prefill", "cases_hash": "fedcba9876543210", "mode": "full", "seed": 7,
         "status": "compile_error", "gate": None, "error": None, "report": report, "finished_unix_ms": 1}
bare = dict(entry, id="bob/x.cu", status="rejected", report=None, error="is a FIFO", mode="compile_only")
put("journal", "entries", json.dumps(entry) + "\n" + json.dumps(bare) + "\n")
put("journal", "rerun", json.dumps(bare) + "\n" + json.dumps(dict(bare, status="error")) + "\n{\"id\":")

# framing: requests and events as the two sides send them.
flash = {"name": "flash-prefill", "contract": "attention-v1"}
paged = {"name": "paged-prefill", "contract": "paged-prefill-v1"}
geometry = {"rows_per_block": 64, "threads": 256, "dynamic_smem_bytes": 0, "grid_y": "query_head"}
case = {"name": "random-small", "summary": "s", "recipe": {"name": "random-small", "summary": "s", "chunk": 64, "prefix": 64}}
line = lambda m: json.dumps(m).encode() + b"\n"
put("framing", "compile", line({"request": "compile", "lab": flash, "source_path": "a.cu",
                                 "source_text": read("kernels/flash-prefill/starter.cu").decode()}))
put("framing", "load_frame", b"#frames 4\n\x7fELF" + line({"request": "load", "lab": paged, "image": 0, "geometry": geometry}))
put("framing", "load_base64", line({"request": "load", "lab": flash, "image": "f0VMRg==", "geometry": geometry}))
put("framing", "load_array", line({"request": "load", "lab": flash, "image": [127, 69, 76, 70], "geometry": geometry}))
put("framing", "run_time_counters", line({"request": "run_case", "case": case, "seed": 1})
    + line({"request": "time", "case": case, "seed": 2, "config": {"warmup": 2, "repetitions": 15, "cold_l2": True}})
    + line({"request": "counters", "case": case, "seed": 3, "tier": "custom", "metrics": ["sm__cycles_elapsed.avg"]})
    + line({"request": "shutdown"}))
compiled = json.loads(records[2])["report"]["compile"]
put("framing", "compiled_frame", b"#frames 3 2\nabcde" + line(dict(compiled, event="compiled", image=1)))
put("framing", "events", line({"event": "loaded", "load_ms": 0.5}) + line({"event": "failed", "message": "m", "fatal": True}))
put("framing", "two_frames_one_unused", b"#frames 1 1\nxy" + line({"event": "compiled", **compiled, "image": 0}))
