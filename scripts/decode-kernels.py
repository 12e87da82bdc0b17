#!/usr/bin/env python3
"""Checks and times the paged-decode lab's kernels on a GPU, standalone.

Compiles every kernel of kernels/paged-decode/ with NVRTC (through CuPy),
then:
  1. runs the starter, the reference, the walk and the eight planted bugs on
     the lab's hazard cases (the recipes of src/lab/paged_decode/cases.rs,
     laid out here by the contract's rules: shuffled tables, block 0 in use,
     no block where the table-ignored bug looks, NaN past every sequence's
     end and in spare blocks), two seeds, against a numpy float64 oracle;
     the workspace is NaN-filled, the semaphores zeroed and the output
     poisoned before every launch. A correct kernel must pass every case; a
     planted one must fail exactly the cases its first line lists
     (flashprof-expect-fail), and the smallest worst-element miss factor
     over its failing cases is reported;
  2. builds the timing shape on the GPU, checks the starter, reference and
     walk there against the float64 GPU oracle of support.cu;
  3. times each of them (median of timed launches, L2 flushed before each)
     and measures, in the same call, a device-to-device copy and support.cu's
     read-only streaming probe; achieved bandwidth is the compulsory bytes
     over the median, and its share is of the larger roof.
Writes a log and decode-kernels.json to $OUT (or /tmp/decode-kernels-out).
Usage: python3 scripts/decode-kernels.py
"""

import json
import math
import os
import re
import sys
import time
from pathlib import Path

import cupy as cp
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "kernels" / "paged-decode"
OUT = Path(os.environ.get("OUT") or "/tmp/decode-kernels-out")
HQ, HKV, D, B, X = 32, 8, 64, 16, 4
GROUP = HQ // HKV
MAX_SPLITS, SLOT = 16, D + 2
SPARE = 4
PRELUDE = (
    "#ifndef INFINITY\n#define INFINITY __builtin_bit_cast(float, 0x7f800000u)\n#endif\n"
    "#ifndef NAN\n#define NAN __builtin_bit_cast(float, 0x7fc00000u)\n#endif\n"
)

# The hazard cases: (name, seqLen list, alibi, shared prefix, plants) as in
# src/lab/paged_decode/cases.rs (a Rust test checks that they agree).
CASES = [
    ("block-edges", [1, 15, 16, 17, 2], False, (2, 3), []),
    ("partition-edges", [511, 512, 513, 5], False, None, []),
    ("longest-sequence", [8192, 3], False, None, []),
    ("overflow-in-far-block", [1200, 9], False, None, [(0, 5, [1000], 4.0)]),
    ("last-key-is-max", [700, 14], False, None, [(0, 9, "last", 3.0), (1, 30, "last", 3.0)]),
    ("alibi", [1, 16, 600, 40, 7], True, None, []),
    ("gqa-heads", [300, 12], False, None,
     [(0, 0, [3], 2.0), (0, 13, [150], 2.0), (0, 22, [299], 2.0), (1, 31, [4], 2.0)]),
    ("shared-prefix", [40, 33, 8], False, (0, 1), []),
    ("many-sequences", [1, 2, 3, 5, 8, 13, 16, 17, 31, 32, 33, 64, 100, 255, 256, 1100], False, None, []),
]
# The timing shape: TIMING_SEQ_LEN of src/lab/paged_decode/cases.rs.
TIMING = [
    3968, 2500, 8192, 100, 4095, 8192, 2000, 1024, 3000, 8191, 7, 3333, 3072, 4096, 17, 4000,
    3700, 7500, 5120, 6000, 1, 7424, 8192, 256, 6144, 2, 7000, 400, 64, 7168, 7680, 15, 6912,
    2222, 2800, 1536, 2048, 3900, 5632, 7777, 8000, 3584, 8192, 1800, 33, 513, 200, 2560, 3500,
    512, 3200, 16, 511, 1000, 700, 6656, 7936, 3800, 1500, 2900, 3456, 255, 4608, 6400,
]

LOG = []


def say(text=""):
    print(text, flush=True)
    LOG.append(text)


def slopes():
    return np.array([2.0 ** (-(h + 1) / 4) for h in range(HQ)], dtype=np.float32)


def directive(text):
    found = re.search(r"^\s*//\s*@flashprof(.*)$", text, re.M)
    keys = dict(p.split("=", 1) for p in (found.group(1).split() if found else []))
    return {
        "threads": int(keys.get("threads", 128)),
        "gridx": HKV if keys.get("grid") == "kv_group" else HQ,
        "splits": int(keys.get("splits", 1)),
    }


def compile_kernel(path, entry="paged_decode"):
    text = path.read_text()
    module = cp.RawModule(code=PRELUDE + text,
                          options=("--gpu-architecture=sm_90", "-default-device", "--std=c++17"))
    return module.get_function(entry), directive(text), text


# ---- case layout (the contract's grader rules) and the float64 oracle ----

def block_table(lens, per_seq, num_blocks, share, rng):
    seqs = len(lens)
    free = list(rng.permutation(num_blocks))
    owned = [[] for _ in range(seqs)]
    a, b = (min(share), max(share)) if share else (None, None)
    for s, n in enumerate(lens):
        for k in range((n + B - 1) // B):
            if share and s == b and k == 0:
                owned[s].append(owned[a][0])
                continue
            bad = {s * per_seq + k} | ({b * per_seq} if share and s == a and k == 0 else set())
            at = max(i for i, ident in enumerate(free) if ident not in bad)
            owned[s].append(int(free.pop(at)))
    if 0 in free:
        entries = [(s, k) for s in range(seqs) for k in range(len(owned[s]))
                   if (s, k) != (0, 0) and not (share and k == 0 and s in (a, b))]
        s, k = entries[-1]
        free.remove(0)
        free.append(owned[s][k])
        owned[s][k] = 0
    table = np.zeros((seqs, per_seq), dtype=np.int32)
    for s in range(seqs):
        for k in range(per_seq):
            if k < len(owned[s]):
                table[s, k] = owned[s][k]
            else:
                while True:
                    ident = int(rng.integers(num_blocks))
                    if ident not in owned[s]:
                        table[s, k] = ident
                        break
    return table, owned


def make_case(lens, alibi, share, plants, seed):
    rng = np.random.default_rng(seed)
    per_seq = max((n + B - 1) // B for n in lens)
    num_blocks = len(lens) * per_seq + SPARE
    table, owned = block_table(lens, per_seq, num_blocks, share, rng)
    k = np.full((num_blocks, HKV, D // X, B, X), np.nan, dtype=np.float32)
    v = np.full((num_blocks, HKV, D, B), np.nan, dtype=np.float32)
    filled = set()
    for s, n in enumerate(lens):
        for kk, blk in enumerate(owned[s]):
            if blk in filled:
                continue
            filled.add(blk)
            slots = min(B, n - kk * B)
            k[blk, :, :, :slots, :] = rng.uniform(-1, 1, (HKV, D // X, slots, X))
            v[blk, :, :, :slots] = rng.uniform(-1, 1, (HKV, D, slots))
    q = rng.uniform(-1, 1, (len(lens), HQ, D)).astype(np.float32)
    for s, h, keys, value in plants:
        q[s, h, :] = value
        for j in ([lens[s] - 1] if keys == "last" else keys):
            k[table[s, j // B], h // GROUP, :, j % B, :] = value
    return dict(q=q, k=k, v=v, table=table, lens=np.array(lens, dtype=np.int32),
                slopes=slopes() if alibi else None)


def oracle(case):
    q, k, v, table, lens = case["q"], case["k"], case["v"], case["table"], case["lens"]
    out = np.zeros(q.shape, dtype=np.float64)
    for s, n in enumerate(lens):
        j = np.arange(n)
        blocks = table[s, j // B]
        keys = k[blocks, :, :, j % B, :].astype(np.float64).reshape(n, HKV, D)
        values = v[blocks, :, :, j % B].astype(np.float64)
        for h in range(HQ):
            sc = keys[:, h // GROUP, :] @ q[s, h].astype(np.float64) * 0.125
            if case["slopes"] is not None:
                sc = sc + float(case["slopes"][h]) * (j - (n - 1))
            w = np.exp(sc - sc.max())
            out[s, h] = w @ values[:, h // GROUP, :] / w.sum()
    return out


def miss_factor(out, ref):
    err = np.abs(out.astype(np.float64) - ref) / (1e-4 + 1e-3 * np.abs(ref))
    err[~np.isfinite(out)] = np.inf
    return float(err.max())


# ---- launching ----

class Device:
    """A case's inputs on the GPU, with the scratch buffers reset per launch."""

    def __init__(self, case):
        self.q = cp.asarray(case["q"])
        self.k = cp.asarray(case["k"])
        self.v = cp.asarray(case["v"])
        self.table = cp.asarray(case["table"])
        self.lens = cp.asarray(case["lens"])
        self.slopes = cp.asarray(case["slopes"]) if case["slopes"] is not None else None
        self.seqs, self.per_seq = case["table"].shape
        self.workspace = cp.empty(self.seqs * HQ * MAX_SPLITS * SLOT, dtype=cp.float32)
        self.semaphores = cp.empty(self.seqs * HQ, dtype=cp.uint32)
        self.out = cp.empty((self.seqs, HQ, D), dtype=cp.float32)

    def reset(self):
        self.workspace.fill(np.nan)
        self.semaphores.fill(0)
        self.out.fill(np.nan)

    def launch(self, fn, geo):
        grid = (geo["gridx"], self.seqs, geo["splits"])
        slopes = self.slopes if self.slopes is not None else np.uint64(0)
        fn(grid, (geo["threads"],), (self.q, self.k, self.v, self.table, self.lens, np.int32(self.seqs),
                                     np.int32(self.per_seq), slopes, self.workspace, self.semaphores, self.out))


def run_cases(kernels, seeds):
    """For each kernel: {case: worst miss factor} per seed."""
    results = {name: [] for name in kernels}
    for seed in seeds:
        for index, (cname, lens, alibi, share, plants) in enumerate(CASES):
            case = make_case(lens, alibi, share, plants, seed * 1000 + index)
            ref = oracle(case)
            dev = Device(case)
            for name, (fn, geo, _) in kernels.items():
                dev.reset()
                dev.launch(fn, geo)
                cp.cuda.Device().synchronize()
                if len(results[name]) <= seeds.index(seed):
                    results[name].append({})
                results[name][seeds.index(seed)][cname] = miss_factor(cp.asnumpy(dev.out), ref)
    return results


# ---- the timing shape ----

def timing_inputs(seed):
    rng = np.random.default_rng(seed)
    per_seq = 8192 // B
    counts = [(n + B - 1) // B for n in TIMING]
    num_blocks = sum(counts) + SPARE
    ids = rng.permutation(num_blocks)
    table = rng.integers(0, num_blocks, (len(TIMING), per_seq), dtype=np.int32)
    at = 0
    last = []
    for s, c in enumerate(counts):
        table[s, :c] = ids[at:at + c]
        at += c
        last.append(int(ids[at - 1]))
    cp.random.seed(seed)
    k = cp.random.uniform(-1, 1, (num_blocks, HKV, D // X, B, X), dtype=cp.float32)
    v = cp.random.uniform(-1, 1, (num_blocks, HKV, D, B), dtype=cp.float32)
    for s, n in enumerate(TIMING):
        if n % B:
            k[last[s], :, :, n % B:, :] = np.nan
            v[last[s], :, :, n % B:] = np.nan
    for spare in ids[at:]:
        k[int(spare)] = np.nan
        v[int(spare)] = np.nan
    q = rng.uniform(-1, 1, (len(TIMING), HQ, D)).astype(np.float32)
    case = dict(q=q, k=None, v=None, table=table, lens=np.array(TIMING, dtype=np.int32), slopes=None)
    dev = Device.__new__(Device)
    dev.q, dev.k, dev.v = cp.asarray(q), k, v
    dev.table, dev.lens, dev.slopes = cp.asarray(table), cp.asarray(case["lens"]), None
    dev.seqs, dev.per_seq = table.shape
    dev.workspace = cp.empty(dev.seqs * HQ * MAX_SPLITS * SLOT, dtype=cp.float32)
    dev.semaphores = cp.empty(dev.seqs * HQ, dtype=cp.uint32)
    dev.out = cp.empty((dev.seqs, HQ, D), dtype=cp.float32)
    compulsory = 4 * (2 * len(TIMING) * HQ * D + 2 * sum(counts) * HKV * D * B)
    return dev, compulsory


def median_ms(launch, reps, flush, before=None):
    times = []
    start, end = cp.cuda.Event(), cp.cuda.Event()
    for i in range(reps + 1):
        if before:
            before()
        flush.fill(i % 7)  # 512 MB written: the 60 MB L2 holds nothing of the inputs
        start.record()
        launch()
        end.record()
        end.synchronize()
        if i:  # the first launch warms the module up
            times.append(cp.cuda.get_elapsed_time(start, end))
    return float(np.median(times))


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    props = cp.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    say(f"device: {name}, {props['multiProcessorCount']} SMs, "
        f"L2 {props['l2CacheSize'] >> 20} MiB; CuPy {cp.__version__}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    t0 = time.time()
    files = {"starter": KERNELS / "starter.cu", "reference": KERNELS / "reference.cu"}
    for path in sorted((KERNELS / "walk").glob("*.cu")):
        files["walk/" + path.stem] = path
    for path in sorted((KERNELS / "bugs").glob("*.cu")):
        files["bugs/" + path.stem] = path
    kernels = {name: compile_kernel(path) for name, path in files.items()}
    support = cp.RawModule(code=PRELUDE + (KERNELS / "support.cu").read_text(),
                           options=("--gpu-architecture=sm_90", "-default-device", "--std=c++17"))
    for name, (fn, geo, _) in kernels.items():
        say(f"compiled {name:<28} {geo}  regs {fn.num_regs}  local {fn.local_size_bytes} B")
    say(f"compile: {time.time() - t0:.1f} s")

    # 1. The hazard cases.
    seeds = [1, 2]
    t0 = time.time()
    results = run_cases(kernels, seeds)
    say(f"cases: {len(CASES)} x {len(seeds)} seeds in {time.time() - t0:.1f} s")
    summary = {"cases": {}, "timing": {}}
    ok = True
    for name, per_seed in results.items():
        text = kernels[name][2]
        expect_line = text.splitlines()[0]
        expected = expect_line.split(":", 1)[1].split() if expect_line.startswith("// flashprof-expect-fail:") else []
        for seed, misses in zip(seeds, per_seed):
            failing = [c for c, m in misses.items() if m > 1.0]
            least = min((misses[c] for c in failing), default=None)
            good = failing == expected and (least is None or least >= 10.0)
            ok &= good
            say(f"{'ok ' if good else 'BAD'} {name:<28} seed {seed}: fails {len(failing)}/{len(CASES)}"
                f" {' '.join(failing) or '-'}; least miss {('inf' if least == math.inf else f'{least:.3g}x') if least is not None else '-'}"
                f"; worst passing {max((m for c, m in misses.items() if m <= 1.0), default=0):.3g}")
            summary["cases"].setdefault(name, []).append(
                {"seed": seed, "failing": failing, "expected": expected,
                 "misses": {c: (None if m == math.inf else m) for c, m in misses.items()}})

    # 2. The timing shape: correctness against the GPU float64 oracle.
    t0 = time.time()
    dev, compulsory = timing_inputs(2026)
    say(f"timing shape: 64 sequences, {sum(TIMING)} keys, compulsory {compulsory / 1e9:.4f} GB "
        f"(built in {time.time() - t0:.1f} s)")
    ref = cp.empty((dev.seqs, HQ, D), dtype=cp.float64)
    oracle_fn = support.get_function("paged_decode_oracle_f64")
    warps = dev.seqs * HQ
    oracle_fn(((warps * 32 + 127) // 128,), (128,),
              (dev.q, dev.k, dev.v, dev.table, dev.lens, np.int32(dev.seqs), np.int32(dev.per_seq),
               np.uint64(0), dev.workspace, dev.semaphores, ref, np.uint64(0), np.int32(0)))
    ref_host = cp.asnumpy(ref)
    timed = ["starter", "reference"] + [n for n in kernels if n.startswith("walk/")]
    for name in timed:
        fn, geo, _ = kernels[name]
        dev.reset()
        dev.launch(fn, geo)
        miss = miss_factor(cp.asnumpy(dev.out), ref_host)
        ok &= miss <= 1.0
        say(f"{'ok ' if miss <= 1.0 else 'BAD'} timing shape {name:<24} worst miss {miss:.3g} of the tolerance")

    # 3. Roofs and medians, in the same call.
    flush = cp.empty(512 << 20, dtype=cp.uint8)
    n_bytes = 1 << 30
    src = cp.ones(n_bytes // 4, dtype=cp.float32)
    dst = cp.empty_like(src)
    copy_ms = median_ms(lambda: dst.data.copy_from_device_async(src.data, n_bytes), 10, flush)
    probe = support.get_function("paged_decode_read_probe")
    sums = cp.zeros(132 * 8, dtype=cp.float32)
    read_ms = median_ms(lambda: probe((132 * 8,), (512,), (src, np.uint64(src.size), sums)), 10, flush)
    copy_rate = 2 * n_bytes / copy_ms / 1e6  # GB/s, bytes read + written
    read_rate = n_bytes / read_ms / 1e6
    roof = max(copy_rate, read_rate)
    say(f"roofs: device-to-device copy {copy_rate:.0f} GB/s (1 GiB, read + written), "
        f"read-only probe {read_rate:.0f} GB/s; roof {roof:.0f} GB/s")
    del src, dst
    reps = {"starter": 5}
    medians = {}
    for name in timed:
        fn, geo, _ = kernels[name]
        medians[name] = median_ms(lambda: dev.launch(fn, geo), reps.get(name, 50), flush, before=dev.reset)
    say("")
    say(f"{'kernel':<26} {'median ms':>10} {'GB/s':>8} {'of roof':>8} {'speedup':>8}")
    for name in timed:
        rate = compulsory / medians[name] / 1e6
        say(f"{name:<26} {medians[name]:>10.4f} {rate:>8.0f} {rate / roof:>8.1%} "
            f"{medians['starter'] / medians[name]:>7.2f}x")
        summary["timing"][name] = {"median_ms": medians[name], "gb_s": rate, "share": rate / roof}
    summary["roof"] = {"copy_gb_s": copy_rate, "read_gb_s": read_rate, "roof_gb_s": roof,
                       "compulsory_bytes": compulsory}
    say("")
    say("ALL OK" if ok else "SOME CHECKS FAILED")
    (OUT / "decode-kernels.json").write_text(json.dumps(summary, indent=1))
    (OUT / "decode-kernels.log").write_text("\n".join(LOG) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
