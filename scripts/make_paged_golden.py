#!/usr/bin/env python3
"""Builds the golden case that proves the paged lab's float64 oracle.

Three sequences (contexts 0, 19 and 5; 3, 4 and 2 new tokens) in a shuffled
8-block paged cache, with a sliding window of 6 and the standard ALiBi
slopes. The expected output is computed here by the contract's definition,
reading keys through the block table and the x-packed layout with code of
its own, in mpmath at 50 significant digits and without subtracting any
maximum: the Rust oracle shares neither its arithmetic nor its algorithm.
NumPy is not used, not even to write the .npy files.

Run from the repository root:  python3 scripts/make_paged_golden.py
Needs: mpmath (pip install mpmath). Output: assets/golden-paged/*.npy
"""

import random
import struct
from pathlib import Path

import mpmath

QUERY_HEADS, KV_HEADS, HEAD_DIM = 32, 8, 64
GROUP = QUERY_HEADS // KV_HEADS
BLOCK, PACK = 16, 4  # tokens per block; floats packed together in the K cache
SEED = 20261130

CONTEXTS = [0, 19, 5]
NEW = [3, 4, 2]
WINDOW = 6  # must equal GOLDEN_WINDOW in src/lab/paged_prefill/golden.rs
NUM_BLOCKS = 8
# Each sequence's table row (2 entries: ceil(23 / 16)). Sequence 1 owns
# blocks 7 and 0, sequence 2 owns block 3; the other entries point at
# spare blocks (5, 6) or at another sequence's block (7). No owned block
# sits at index seq * 2 + k, where a kernel ignoring the table would look.
BLOCK_TABLE = [[5, 6], [7, 0], [3, 7]]
SENTINEL_K, SENTINEL_V = 2.5, 40.0  # in every slot no context covers

# The planted score: sequence 1, new token 1 (position 20), query head 0,
# against keys of KV head 0 at positions 17 (cached, block 0, slot 1:
# visible), 10 (cached, block 7: outside the window, 20 - 10 >= 6) and 22
# (new token 3: in the future). All are 12 in every dimension:
# 12 * 12 * 64 / 8 = 1152, past float64's exp range (about 709.8).
PLANT_VALUE = 12.0
PLANT_SEQ, PLANT_TOKEN, PLANT_HEAD = 1, 1, 0
PLANT_KEYS = (17, 10, 22)

OUT_DIR = Path(__file__).resolve().parent.parent / "assets" / "golden-paged"


def q_start():
    starts = [0]
    for n in NEW:
        starts.append(starts[-1] + n)
    return starts


def random_value(rng):
    """A multiple of 2^-10 in [-2, 2]: exact in float32, products exact at 50 digits."""
    return rng.randint(-2048, 2048) / 1024


def k_cache_offset(block, kv_head, dim, slot):
    packs = HEAD_DIM // PACK
    return (((block * KV_HEADS + kv_head) * packs + dim // PACK) * BLOCK + slot) * PACK + dim % PACK


def v_cache_offset(block, kv_head, dim, slot):
    return ((block * KV_HEADS + kv_head) * HEAD_DIM + dim) * BLOCK + slot


def row_offset(row, heads, head, dim):
    return (row * heads + head) * HEAD_DIM + dim


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def make_inputs():
    rng = random.Random(SEED)
    total = sum(NEW)
    q = [random_value(rng) for _ in range(total * QUERY_HEADS * HEAD_DIM)]
    k_new = [random_value(rng) for _ in range(total * KV_HEADS * HEAD_DIM)]
    v_new = [random_value(rng) for _ in range(total * KV_HEADS * HEAD_DIM)]
    cache_len = NUM_BLOCKS * KV_HEADS * HEAD_DIM * BLOCK
    k_cache = [SENTINEL_K] * cache_len
    v_cache = [SENTINEL_V] * cache_len
    for seq, ctx in enumerate(CONTEXTS):
        for pos in range(ctx):
            block, slot = BLOCK_TABLE[seq][pos // BLOCK], pos % BLOCK
            for g in range(KV_HEADS):
                for d in range(HEAD_DIM):
                    k_cache[k_cache_offset(block, g, d, slot)] = random_value(rng)
                    v_cache[v_cache_offset(block, g, d, slot)] = random_value(rng)
    starts = q_start()
    row = starts[PLANT_SEQ] + PLANT_TOKEN
    kv_head = PLANT_HEAD // GROUP
    ctx = CONTEXTS[PLANT_SEQ]
    for d in range(HEAD_DIM):
        q[row_offset(row, QUERY_HEADS, PLANT_HEAD, d)] = PLANT_VALUE
        for pos in PLANT_KEYS:
            if pos < ctx:
                block = BLOCK_TABLE[PLANT_SEQ][pos // BLOCK]
                k_cache[k_cache_offset(block, kv_head, d, pos % BLOCK)] = PLANT_VALUE
            else:
                new_row = starts[PLANT_SEQ] + pos - ctx
                k_new[row_offset(new_row, KV_HEADS, kv_head, d)] = PLANT_VALUE
    slopes = [f32(2.0 ** (-(h + 1) / 4)) for h in range(QUERY_HEADS)]
    return q, k_new, v_new, k_cache, v_cache, slopes


def key_and_value(inputs, seq, pos, kv_head):
    """Key and value vectors at a position of a sequence, by the contract."""
    q, k_new, v_new, k_cache, v_cache, _ = inputs
    ctx = CONTEXTS[seq]
    if pos < ctx:
        block, slot = BLOCK_TABLE[seq][pos // BLOCK], pos % BLOCK
        key = [k_cache[k_cache_offset(block, kv_head, d, slot)] for d in range(HEAD_DIM)]
        value = [v_cache[v_cache_offset(block, kv_head, d, slot)] for d in range(HEAD_DIM)]
    else:
        row = q_start()[seq] + pos - ctx
        key = [k_new[row_offset(row, KV_HEADS, kv_head, d)] for d in range(HEAD_DIM)]
        value = [v_new[row_offset(row, KV_HEADS, kv_head, d)] for d in range(HEAD_DIM)]
    return key, value


def exact_attention(inputs):
    mpmath.mp.dps = 50
    q, slopes = inputs[0], inputs[5]
    scale = mpmath.mpf(1) / 8
    starts = q_start()
    out = [0.0] * len(q)
    for seq, ctx in enumerate(CONTEXTS):
        for token in range(NEW[seq]):
            row, i = starts[seq] + token, ctx + token
            visible = [j for j in range(i + 1) if i - j < WINDOW]
            for head in range(QUERY_HEADS):
                kv_head = head // GROUP
                weights, values = [], []
                for j in visible:
                    key, value = key_and_value(inputs, seq, j, kv_head)
                    score = mpmath.fsum(
                        mpmath.mpf(q[row_offset(row, QUERY_HEADS, head, d)]) * mpmath.mpf(key[d])
                        for d in range(HEAD_DIM)
                    )
                    score = score * scale + mpmath.mpf(slopes[head]) * (j - i)
                    weights.append(mpmath.exp(score))
                    values.append(value)
                total = mpmath.fsum(weights)
                for d in range(HEAD_DIM):
                    numerator = mpmath.fsum(w * mpmath.mpf(v[d]) for w, v in zip(weights, values))
                    out[row_offset(row, QUERY_HEADS, head, d)] = float(mpmath.nstr(numerator / total, 40))
    return out


def npy_bytes(shape, values, type_code, descr):
    """A NumPy format 1.0 file, header padded to 64 bytes."""
    dims = ", ".join(str(n) for n in shape) + ("," if len(shape) == 1 else "")
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, dims)
    padding = -(10 + len(header) + 1) % 64
    header = (header + " " * padding + "\n").encode("ascii")
    body = struct.pack("<%d%s" % (len(values), type_code), *values)
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + body


def main():
    inputs = make_inputs()
    expected = exact_attention(inputs)
    q, k_new, v_new, k_cache, v_cache, slopes = inputs
    total, seqs = sum(NEW), len(CONTEXTS)
    seq_len = [c + n for c, n in zip(CONTEXTS, NEW)]
    table = [entry for row in BLOCK_TABLE for entry in row]
    files = {
        "q.npy": npy_bytes((total, QUERY_HEADS, HEAD_DIM), q, "f", "<f4"),
        "k_new.npy": npy_bytes((total, KV_HEADS, HEAD_DIM), k_new, "f", "<f4"),
        "v_new.npy": npy_bytes((total, KV_HEADS, HEAD_DIM), v_new, "f", "<f4"),
        "k_cache.npy": npy_bytes(
            (NUM_BLOCKS, KV_HEADS, HEAD_DIM // PACK, BLOCK, PACK), k_cache, "f", "<f4"
        ),
        "v_cache.npy": npy_bytes((NUM_BLOCKS, KV_HEADS, HEAD_DIM, BLOCK), v_cache, "f", "<f4"),
        "block_table.npy": npy_bytes((seqs, len(BLOCK_TABLE[0])), table, "i", "<i4"),
        "q_start.npy": npy_bytes((seqs + 1,), q_start(), "i", "<i4"),
        "seq_len.npy": npy_bytes((seqs,), seq_len, "i", "<i4"),
        "alibi_slopes.npy": npy_bytes((QUERY_HEADS,), slopes, "f", "<f4"),
        "expected.npy": npy_bytes((total, QUERY_HEADS, HEAD_DIM), expected, "d", "<f8"),
    }
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (OUT_DIR / name).write_bytes(data)
        print("wrote", OUT_DIR / name, len(data), "bytes")


if __name__ == "__main__":
    main()
