#!/usr/bin/env python3
"""GPU check of the FP8 lab's kernels, and the seed beside them (run by fp8-kernels.sh on the H200).

1. Every case folder under CASES (written by the Rust cases, `dump_the_cases`): each kernel's
   output against a float64 attention computed here with torch from the same bytes (its own code,
   not the Rust oracle), with the lab's tolerance 4e-3 max(1, |v|max of the row) + 2e-2 |ref|:
   the worst miss factor per case and kernel, and whether each planted kernel fails exactly the
   cases on its first line, each by at least 10 tolerances.
2. The timing batch (the second lab's lengths, head dim 128, N(0, 1) data, kScale 0.5, vScale 2.0,
   E4M3 and E5M2): median of 20 launches with L2 flushed, for the starter, the reference and the
   seed's own Triton kernel on the same tensors, with each one's worst miss factor.
Usage: fp8-kernels.py REPO CASES OUTDIR
"""
import math, os, sys, types
from pathlib import Path

import numpy as np
import torch
import cupy as cp

REPO, CASES, OUT = (Path(a) for a in sys.argv[1:4])
KDIR = REPO / "kernels" / "paged-prefill-fp8"
HQ, HKV, D, B, X = 32, 8, 128, 16, 16
SCALE = float.fromhex("0x1.6a09e6p-4")
dev = "cuda"
log = open(OUT / "fp8-kernels.log", "w")


def say(*a):
    text = " ".join(str(x) for x in a)
    print(text, flush=True)
    log.write(text + "\n")
    log.flush()


def include_dir():
    import importlib.util
    for name in ("nvidia.cu13", "nvidia.cuda_runtime"):
        try:
            spec = importlib.util.find_spec(name)
        except ModuleNotFoundError:
            continue
        for base in (spec.submodule_search_locations or []) if spec else []:
            if (Path(base) / "include" / "cuda_fp8.h").is_file():
                return str(Path(base) / "include")
    for base in ("/usr/local/cuda/include", "/usr/local/cuda/targets/x86_64-linux/include"):
        if (Path(base) / "cuda_fp8.h").is_file():
            return base
    raise SystemExit("no cuda_fp8.h found")


STANDIN = OUT / "standin"
STANDIN.mkdir(exist_ok=True)
# What flashprof's prelude gives every file: <cstdint> and INFINITY.
(STANDIN / "cstdint").write_text("#pragma once\ntypedef unsigned char uint8_t; typedef unsigned int uint32_t;\n"
                                 "typedef unsigned short uint16_t; typedef int int32_t;\n")
OPTIONS = ("-std=c++17", "--gpu-architecture=sm_90", "-I" + include_dir(), "-I" + str(STANDIN),
           "-DINFINITY=__int_as_float(0x7f800000)")


class Kernel:
    def __init__(self, path):
        self.path = path
        text = path.read_text()
        self.fn = cp.RawModule(code=text, options=OPTIONS, backend="nvrtc").get_function("paged_prefill_fp8")
        line = next(l for l in text.splitlines() if "@flashprof" in l)
        keys = dict(kv.split("=") for kv in line.split()[2:] if "=" in kv)
        self.rows = int(keys.get("rows_per_block", 64))
        self.threads = int(keys.get("threads", 128))
        self.kv_group = keys.get("grid") == "kv_group"
        first = text.splitlines()[0]
        self.expect = first.split(":", 1)[1].split() if first.startswith("// flashprof-expect-fail:") else None

    def launch(self, c, out):
        grid = (c["S"], HKV if self.kv_group else HQ, math.ceil(c["max_new"] / self.rows))
        alibi = c["alibi"].data_ptr() if c["alibi"] is not None else 0
        args = [cp.uint64(t.data_ptr()) for t in (c["q"], c["kn"], c["vn"], c["kc"], c["vc"], c["table"], c["qs"], c["sl"])]
        args += [np.int32(c["S"]), np.int32(c["M"]), np.int32(c["window"]), cp.uint64(alibi),
                 np.float32(c["ks"]), np.float32(c["vs"]), np.int32(c["fmt"]), cp.uint64(out.data_ptr())]
        self.fn(grid, (self.threads,), tuple(args))


def fp8_dtype(fmt):
    return torch.float8_e4m3fn if fmt == 0 else torch.float8_e5m2


def reference(c):
    """float64 attention and the value scale of each (row, head), from the case's own bytes."""
    f8 = fp8_dtype(c["fmt"])
    kc = c["kc"].view(f8).double() * c["ks"]  # [N][8][D/X][B][X]
    vc = c["vc"].view(f8).double() * c["vs"]  # [N][8][D][B]
    kc = kc.permute(0, 1, 2, 4, 3).reshape(-1, HKV, D, B)  # [N][8][D][B]
    q, kn, vn = c["q"].double(), c["kn"].double(), c["vn"].double()
    out = torch.zeros_like(q)
    vscale = torch.zeros(q.shape[0], HQ, dtype=torch.float64, device=dev)
    qs, sl = c["qs"].tolist(), c["sl"].tolist()
    for s in range(c["S"]):
        a, n = qs[s], qs[s + 1] - qs[s]
        ctx = sl[s] - n
        blocks = c["table"][s, : math.ceil(ctx / B)].long()
        kctx = kc[blocks].permute(0, 3, 1, 2).reshape(-1, HKV, D)[:ctx]
        vctx = vc[blocks].permute(0, 3, 1, 2).reshape(-1, HKV, D)[:ctx]
        K = torch.cat([kctx, kn[a:a + n]]).repeat_interleave(HQ // HKV, dim=1)
        V = torch.cat([vctx, vn[a:a + n]]).repeat_interleave(HQ // HKV, dim=1)
        i = torch.arange(n, device=dev)[:, None] + ctx
        j = torch.arange(ctx + n, device=dev)[None, :]
        visible = j <= i
        if c["window"] > 0:
            visible &= (i - j) < c["window"]
        sc = torch.einsum("ihd,jhd->hij", q[a:a + n], K) * SCALE
        if c["alibi"] is not None:
            sc = sc + c["alibi"].double()[:, None, None] * (j - i)[None].double()
        sc = sc.masked_fill(~visible[None], float("-inf"))
        out[a:a + n] = torch.einsum("hij,jhd->ihd", torch.softmax(sc, dim=-1), V)
        vmax = V.abs().amax(dim=2)  # [L][Hq]
        vscale[a:a + n] = torch.where(visible[:, :, None], vmax[None], 0).amax(dim=1)
    return out, vscale


def miss(got, ref, vscale):
    got = got.double()
    tol = 4e-3 * vscale.clamp_min(1.0)[:, :, None] + 2e-2 * ref.abs()
    ratio = (got - ref).abs() / tol
    ratio = torch.where(torch.isfinite(got), ratio, torch.full_like(ratio, float("inf")))
    return ratio.max().item()


def run_case(kernel, c, poison=True):
    out = torch.full_like(c["q"], float("nan"))
    kernel.launch(c, out)
    torch.cuda.synchronize()
    return out


def load_case(folder):
    t = lambda name: torch.from_numpy(np.load(folder / name)).to(dev)
    meta = dict(line.split() for line in (folder / "meta.txt").read_text().splitlines())
    c = dict(q=t("q.npy").bfloat16(), kn=t("k_new.npy").bfloat16(), vn=t("v_new.npy").bfloat16(),
             kc=t("k_cache.npy").contiguous(), vc=t("v_cache.npy").contiguous(), table=t("block_table.npy").int(),
             qs=t("q_start.npy").int(), sl=t("seq_len.npy").int(),
             alibi=t("alibi_slopes.npy").float() if (folder / "alibi_slopes.npy").exists() else None,
             window=int(meta["window"]), fmt=int(meta["format"]), ks=float(meta["k_scale"]), vs=float(meta["v_scale"]))
    c["S"], c["M"] = c["table"].shape
    c["max_new"] = int((c["qs"][1:] - c["qs"][:-1]).max())
    return c


def check_cases(kernels):
    names = sorted(p.name for p in CASES.iterdir() if p.is_dir())
    failing = {k.path.stem: [] for k in kernels}
    worst = {}
    for name in names:
        c = load_case(CASES / name)
        ref, vscale = reference(c)
        for k in kernels:
            m = miss(run_case(k, c), ref, vscale)
            worst[(k.path.stem, name)] = m
            if m > 1.0:
                failing[k.path.stem].append(name)
    say("\n## cases: worst miss factor (|err| / tolerance) per kernel")
    say("| case | " + " | ".join(k.path.stem for k in kernels) + " |")
    for name in names:
        say(f"| {name} | " + " | ".join(f"{worst[(k.path.stem, name)]:.3g}" for k in kernels) + " |")
    ok = True
    for k in kernels:
        if k.expect is None:
            good = not failing[k.path.stem]
            say(f"{k.path.stem}: {'passes every case' if good else 'FAILS ' + ' '.join(failing[k.path.stem])}")
        else:
            order = [n for n in names if n in k.expect]
            least = min((worst[(k.path.stem, n)] for n in failing[k.path.stem]), default=float("inf"))
            good = sorted(failing[k.path.stem]) == sorted(order) and least >= 10
            say(f"{k.path.stem}: fails {len(failing[k.path.stem])} cases, least miss {least:.3g}, "
                f"{'exactly its list' if good else 'NOT its list: extra ' + str(sorted(set(failing[k.path.stem]) - set(order))) + ' missing ' + str(sorted(set(order) - set(failing[k.path.stem])))}")
        ok &= good
    return ok


CTX = [4096, 3584, 3072, 2816, 2560, 2048, 2048, 1792, 1536, 1280, 1024, 1000, 768, 640, 512, 4000]
NEW = [512, 64, 256, 128, 384, 512, 1, 200, 448, 96, 320, 160, 512, 64, 256, 17]


def timing_batch(fmt, seed=0):
    g = torch.Generator(device="cpu").manual_seed(seed)
    S, T = len(CTX), sum(NEW)
    M = max(math.ceil((c + n) / B) for c, n in zip(CTX, NEW))
    N = S * M
    perm = torch.randperm(N, generator=g)
    table = torch.zeros(S, M, dtype=torch.int32)
    owned = torch.zeros(N, B, dtype=torch.bool)
    used = 0
    for s, ctx in enumerate(CTX):
        for b in range(M):
            table[s, b] = int(perm[used]); used += 1
            if b * B < ctx:
                owned[table[s, b], : min(B, ctx - b * B)] = True
    f8 = fp8_dtype(fmt)
    ks, vs = 0.5, 2.0
    kc = (torch.randn(N, HKV, D, B, generator=g) / ks).to(f8).view(torch.uint8)  # [N][8][D][B]
    vc = (torch.randn(N, HKV, D, B, generator=g) / vs).to(f8).view(torch.uint8)
    nan = torch.tensor(0x7F, dtype=torch.uint8)
    kc = torch.where(owned[:, None, None, :], kc, nan)
    vc = torch.where(owned[:, None, None, :], vc, nan)
    kc = kc.reshape(N, HKV, D // X, X, B).permute(0, 1, 2, 4, 3).contiguous()
    qs = torch.tensor([0] + list(np.cumsum(NEW)), dtype=torch.int32)
    c = dict(q=torch.randn(T, HQ, D, generator=g).bfloat16(), kn=torch.randn(T, HKV, D, generator=g).bfloat16(),
             vn=torch.randn(T, HKV, D, generator=g).bfloat16(), kc=kc, vc=vc, table=table, qs=qs,
             sl=torch.tensor([c + n for c, n in zip(CTX, NEW)], dtype=torch.int32), alibi=None, window=0,
             fmt=fmt, ks=ks, vs=vs, S=S, M=M, max_new=max(NEW))
    return {k: (v.to(dev) if torch.is_tensor(v) else v) for k, v in c.items()}


def seed_kernel():
    plat = types.ModuleType("vllm.platforms")

    class Platform:
        def has_device_capability(self, cap):
            major, minor = torch.cuda.get_device_capability()
            return major * 10 + minor >= cap

    plat.current_platform = Platform()
    sys.modules["vllm"] = types.ModuleType("vllm")
    sys.modules["vllm.platforms"] = plat
    sys.path.insert(0, str(REPO / "peers"))
    import prefix_prefill
    return prefix_prefill.context_attention_fwd


def median_ms(launch):
    flush = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.float32, device=dev)
    times = []
    for it in range(25):
        flush.fill_(float(it))
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); launch(); b.record(); b.synchronize()
        if it >= 5:
            times.append(a.elapsed_time(b))
    return float(np.median(times))


def timing(kernels):
    fwd = seed_kernel()
    say("\n## timing batch (16 sequences, 3930 new tokens, D 128, kScale 0.5, vScale 2.0): median of 20, L2 flushed")
    say("| format | kernel | median ms | worst miss factor |")
    for fmt, kv in ((0, "fp8"), (1, "fp8_e5m2")):
        c = timing_batch(fmt)
        ref, vscale = reference(c)
        for k in kernels:
            out = torch.empty_like(c["q"])
            m = miss(run_case(k, c), ref, vscale)
            say(f"| {kv} | {k.path.stem} | {median_ms(lambda: k.launch(c, out)):.3f} | {m:.3g} |")
        o = torch.full_like(c["q"], float("nan"))
        ctx = torch.tensor(CTX, dtype=torch.int32, device=dev)
        args = (c["q"], c["kn"], c["vn"], o, kv, c["kc"], c["vc"], c["table"], c["qs"][:-1], c["sl"], ctx,
                max(NEW), c["ks"], c["vs"])
        fwd(*args)
        torch.cuda.synchronize()
        m = miss(o, ref, vscale)
        say(f"| {kv} | seed (Triton context_attention_fwd) | {median_ms(lambda: fwd(*args)):.3f} | {m:.3g} |")


if __name__ == "__main__":
    say("device:", torch.cuda.get_device_name(), "torch", torch.__version__, "cupy", cp.__version__, "include", OPTIONS[2])
    main = [Kernel(KDIR / "starter.cu"), Kernel(KDIR / "reference.cu")]
    bugs = [Kernel(p) for p in sorted((KDIR / "bugs").glob("*.cu"))]
    ok = check_cases(main + bugs)
    timing(main)
    say("\nall case checks as expected" if ok else "\nSOME CASE CHECKS ARE NOT AS EXPECTED")
