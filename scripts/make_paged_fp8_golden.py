#!/usr/bin/env python3
"""Builds the two golden cases that prove the FP8 lab's float64 oracle.

One per cache format (E4M3, E5M2), the same batch otherwise: three sequences
(contexts 0, 19 and 5; 3, 4 and 2 new tokens) in a shuffled 8-block cache,
a window of 6, the standard ALiBi slopes, scales that are not powers of two
(kScale 0.3f, vScale 1.7f), FP8 NaN bytes in every slot no context covers,
and a planted score past float64's exp range with two more planted keys
that must stay hidden (one in the row's future, one outside its window).

The bytes are decoded here from the formats' definitions (sign, biased
exponent, mantissa; E4M3 without infinities), keys reached through the block
table and the x-packed layout with code of its own, and the attention taken
at 50 significant digits with mpmath, without subtracting any maximum: the
Rust oracle shares neither its arithmetic nor its algorithm. NumPy is not used.

Run from the repository root:  python3 scripts/make_paged_fp8_golden.py
Needs: mpmath. Output: assets/golden-paged-fp8/{e4m3,e5m2}/*.npy
"""

import random
import struct
from pathlib import Path

import mpmath

QUERY_HEADS, KV_HEADS, HEAD_DIM = 32, 8, 128
GROUP = QUERY_HEADS // KV_HEADS
BLOCK, PACK = 16, 16  # tokens per block; FP8 bytes packed together in the K cache
CONTEXTS, NEW = [0, 19, 5], [3, 4, 2]
WINDOW = 6  # GOLDEN_WINDOW in src/lab/paged_prefill_fp8/golden.rs
NUM_BLOCKS = 8
BLOCK_TABLE = [[5, 6], [7, 0], [3, 7]]  # no owned block at seq * 2 + k
NAN_BYTE = 0x7F
SEED = 20261202


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


K_SCALE, V_SCALE = f32(0.3), f32(1.7)  # GOLDEN_SCALES in golden.rs
# sqrt(1/128) rounded to float: the contract's 0x1.6a09e6p-4.
SCALE = mpmath.mpf(float.fromhex("0x1.6a09e6p-4"))
# Plant: sequence 1, token 1 (position 20), query head 0, all dims 12; keys of
# KV head 0 at 17 (cached: visible), 10 (cached: outside the window) and 22
# (new: the future) hold a byte of value 24 (cached: times kScale = 7.2) or
# 7.1875 (new, bf16). 12 * 7.2 * 128 * scale = 977, past exp's 709.8.
PLANT_SEQ, PLANT_TOKEN, PLANT_HEAD, PLANT_KEYS = 1, 1, 0, (17, 10, 22)
PLANT_Q, PLANT_KEY_VALUE, PLANT_NEW_KEY = 12.0, 24.0, 7.1875

FORMATS = {"e4m3": (4, 3, False), "e5m2": (5, 2, True)}  # exponent bits, mantissa bits, IEEE specials


def decode(byte, fmt):
    """An FP8 byte's value by its format's definition; None for NaN."""
    e_bits, m_bits, ieee = FORMATS[fmt]
    sign = -1 if byte & 0x80 else 1
    e = (byte >> m_bits) & ((1 << e_bits) - 1)
    m = byte & ((1 << m_bits) - 1)
    bias = (1 << (e_bits - 1)) - 1
    if e == (1 << e_bits) - 1 and (ieee or m == (1 << m_bits) - 1):
        return None if (m or not ieee) else sign * mpmath.inf
    if e == 0:
        return sign * mpmath.mpf(2) ** (1 - bias) * m / (1 << m_bits)
    return sign * mpmath.mpf(2) ** (e - bias) * (1 + mpmath.mpf(m) / (1 << m_bits))


def code_of(value, fmt):
    """The byte whose value is exactly `value`."""
    return next(b for b in range(256) if decode(b, fmt) == value)


def bf16_value(rng):
    """A multiple of 2^-7 in [-2, 2]: exactly bf16."""
    return rng.randint(-256, 256) / 128


def k_offset(block, g, d, slot):
    return (((block * KV_HEADS + g) * (HEAD_DIM // PACK) + d // PACK) * BLOCK + slot) * PACK + d % PACK


def v_offset(block, g, d, slot):
    return ((block * KV_HEADS + g) * HEAD_DIM + d) * BLOCK + slot


def row_offset(row, heads, head, d):
    return (row * heads + head) * HEAD_DIM + d


def starts():
    out = [0]
    for n in NEW:
        out.append(out[-1] + n)
    return out


def make_inputs(fmt):
    rng = random.Random(SEED)
    finite = [b for b in range(256) if decode(b, fmt) is not None and abs(decode(b, fmt)) < mpmath.inf]
    # Bytes of magnitude at most 4 (E4M3) or 8 (E5M2), so no unplanted score is large.
    small = [b for b in finite if abs(decode(b, fmt)) <= (4 if fmt == "e4m3" else 8)]
    total = sum(NEW)
    q = [bf16_value(rng) for _ in range(total * QUERY_HEADS * HEAD_DIM)]
    k_new = [bf16_value(rng) for _ in range(total * KV_HEADS * HEAD_DIM)]
    v_new = [bf16_value(rng) for _ in range(total * KV_HEADS * HEAD_DIM)]
    size = NUM_BLOCKS * KV_HEADS * HEAD_DIM * BLOCK
    k_cache, v_cache = [NAN_BYTE] * size, [NAN_BYTE] * size
    for seq, ctx in enumerate(CONTEXTS):
        for pos in range(ctx):
            block, slot = BLOCK_TABLE[seq][pos // BLOCK], pos % BLOCK
            for g in range(KV_HEADS):
                for d in range(HEAD_DIM):
                    k_cache[k_offset(block, g, d, slot)] = rng.choice(small)
                    # Values may take any finite byte, the format's largest included.
                    v_cache[v_offset(block, g, d, slot)] = rng.choice(finite)
    row = starts()[PLANT_SEQ] + PLANT_TOKEN
    g = PLANT_HEAD // GROUP
    ctx = CONTEXTS[PLANT_SEQ]
    for d in range(HEAD_DIM):
        q[row_offset(row, QUERY_HEADS, PLANT_HEAD, d)] = PLANT_Q
        for pos in PLANT_KEYS:
            if pos < ctx:
                block = BLOCK_TABLE[PLANT_SEQ][pos // BLOCK]
                k_cache[k_offset(block, g, d, pos % BLOCK)] = code_of(PLANT_KEY_VALUE, fmt)
            else:
                k_new[row_offset(starts()[PLANT_SEQ] + pos - ctx, KV_HEADS, g, d)] = PLANT_NEW_KEY
    slopes = [f32(2.0 ** (-(h + 1) / 4)) for h in range(QUERY_HEADS)]
    return q, k_new, v_new, k_cache, v_cache, slopes


def key_and_value(inputs, fmt, seq, pos, g):
    _, k_new, v_new, k_cache, v_cache, _ = inputs
    ctx = CONTEXTS[seq]
    if pos < ctx:
        block, slot = BLOCK_TABLE[seq][pos // BLOCK], pos % BLOCK
        key = [decode(k_cache[k_offset(block, g, d, slot)], fmt) * mpmath.mpf(K_SCALE) for d in range(HEAD_DIM)]
        value = [decode(v_cache[v_offset(block, g, d, slot)], fmt) * mpmath.mpf(V_SCALE) for d in range(HEAD_DIM)]
        return key, value
    row = starts()[seq] + pos - ctx
    key = [mpmath.mpf(k_new[row_offset(row, KV_HEADS, g, d)]) for d in range(HEAD_DIM)]
    value = [mpmath.mpf(v_new[row_offset(row, KV_HEADS, g, d)]) for d in range(HEAD_DIM)]
    return key, value


def exact_attention(inputs, fmt):
    mpmath.mp.dps = 50
    q, slopes = inputs[0], inputs[5]
    out = [0.0] * len(q)
    for seq, ctx in enumerate(CONTEXTS):
        for token in range(NEW[seq]):
            row, i = starts()[seq] + token, ctx + token
            visible = [j for j in range(i + 1) if i - j < WINDOW]
            for head in range(QUERY_HEADS):
                kv = [key_and_value(inputs, fmt, seq, j, head // GROUP) for j in visible]
                weights = []
                for j, (key, _) in zip(visible, kv):
                    score = mpmath.fsum(mpmath.mpf(q[row_offset(row, QUERY_HEADS, head, d)]) * key[d]
                                        for d in range(HEAD_DIM))
                    weights.append(mpmath.exp(score * SCALE + mpmath.mpf(slopes[head]) * (j - i)))
                total = mpmath.fsum(weights)
                for d in range(HEAD_DIM):
                    numerator = mpmath.fsum(w * value[d] for w, (_, value) in zip(weights, kv))
                    out[row_offset(row, QUERY_HEADS, head, d)] = float(mpmath.nstr(numerator / total, 40))
    return out


def npy_bytes(shape, values, type_code, descr):
    """A NumPy format 1.0 file, header padded to 64 bytes."""
    dims = ", ".join(str(n) for n in shape) + ("," if len(shape) == 1 else "")
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, dims)
    padding = -(10 + len(header) + 1) % 64
    header = (header + " " * padding + "\n").encode("ascii")
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + struct.pack(
        "<%d%s" % (len(values), type_code), *values)


def main():
    root = Path(__file__).resolve().parent.parent / "assets" / "golden-paged-fp8"
    for fmt in FORMATS:
        inputs = make_inputs(fmt)
        expected = exact_attention(inputs, fmt)
        q, k_new, v_new, k_cache, v_cache, slopes = inputs
        total, seqs = sum(NEW), len(CONTEXTS)
        files = {
            "q.npy": npy_bytes((total, QUERY_HEADS, HEAD_DIM), q, "f", "<f4"),
            "k_new.npy": npy_bytes((total, KV_HEADS, HEAD_DIM), k_new, "f", "<f4"),
            "v_new.npy": npy_bytes((total, KV_HEADS, HEAD_DIM), v_new, "f", "<f4"),
            "k_cache.npy": npy_bytes((NUM_BLOCKS, KV_HEADS, HEAD_DIM // PACK, BLOCK, PACK), k_cache, "B", "|u1"),
            "v_cache.npy": npy_bytes((NUM_BLOCKS, KV_HEADS, HEAD_DIM, BLOCK), v_cache, "B", "|u1"),
            "block_table.npy": npy_bytes((seqs, 2), [b for r in BLOCK_TABLE for b in r], "i", "<i4"),
            "q_start.npy": npy_bytes((seqs + 1,), starts(), "i", "<i4"),
            "seq_len.npy": npy_bytes((seqs,), [c + n for c, n in zip(CONTEXTS, NEW)], "i", "<i4"),
            "alibi_slopes.npy": npy_bytes((QUERY_HEADS,), slopes, "f", "<f4"),
            "expected.npy": npy_bytes((total, QUERY_HEADS, HEAD_DIM), expected, "d", "<f8"),
        }
        out = root / fmt
        out.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            (out / name).write_bytes(data)
        print("wrote", out, sum(len(d) for d in files.values()), "bytes")


if __name__ == "__main__":
    main()
