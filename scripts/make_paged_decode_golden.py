#!/usr/bin/env python3
"""Builds the golden case that proves the paged-decode lab's float64 oracle.

Three sequences of 1, 19 and 37 keys (the token's own included) in a
shuffled 10-block paged cache, with the standard ALiBi slopes, a prefix
block shared by sequences 1 and 2, NaN in every slot no sequence owns, and
a score of 1152 (past float64's exp range) at a key in the middle of the
longest sequence. The expected output is the contract's definition taken
in mpmath at 50 significant digits, with no maximum subtracted, reading
keys through the block table and the x-packed layout; the Rust oracle
shares neither its arithmetic nor its algorithm. NumPy is not used.

Run from the repository root:  python3 scripts/make_paged_decode_golden.py
Needs: mpmath. Output: assets/golden-paged-decode/*.npy
"""

import math
import random
from pathlib import Path

import mpmath

# The second lab's golden script already spells out the x-packed K and the
# V layouts, the exact-in-f32 value draw and the .npy writer: one copy each.
from make_paged_golden import (
    BLOCK,
    GROUP,
    HEAD_DIM,
    KV_HEADS,
    PACK,
    QUERY_HEADS,
    f32,
    k_cache_offset,
    npy_bytes,
    random_value,
    row_offset,
    v_cache_offset,
)

SEED = 20261202
SEQ_LEN = [1, 19, 37]
NUM_BLOCKS = 10
# Sequence 0 owns block 6 (slot 0 only); 1 owns 9 and 0; 2 owns 9 (shared
# with 1), 1 and 7. Entries past a sequence's end name spare blocks (8, 2)
# or another sequence's (6). No owned block sits at seq * 3 + k, where a
# kernel ignoring the table would look; block 0 is in use.
BLOCK_TABLE = [[6, 8, 2], [9, 0, 6], [9, 1, 7]]
SHARED = (1, 2)  # sequence 2's first block is sequence 1's

# Sequence 2's token, query head 0, against its key 20 (block 1, slot 4) of
# KV head 0: 12 in every dimension, 12 * 12 * 64 / 8 = 1152.
PLANT_VALUE = 12.0
PLANT_SEQ, PLANT_HEAD, PLANT_KEY = 2, 0, 20

OUT_DIR = Path(__file__).resolve().parent.parent / "assets" / "golden-paged-decode"


def make_inputs():
    rng = random.Random(SEED)
    seqs = len(SEQ_LEN)
    q = [random_value(rng) for _ in range(seqs * QUERY_HEADS * HEAD_DIM)]
    cache_len = NUM_BLOCKS * KV_HEADS * HEAD_DIM * BLOCK
    k_cache = [math.nan] * cache_len
    v_cache = [math.nan] * cache_len
    for seq, length in enumerate(SEQ_LEN):
        for pos in range(length):
            if seq == SHARED[1] and pos < BLOCK:
                continue  # filled by the block's first owner
            block, slot = BLOCK_TABLE[seq][pos // BLOCK], pos % BLOCK
            for g in range(KV_HEADS):
                for d in range(HEAD_DIM):
                    k_cache[k_cache_offset(block, g, d, slot)] = random_value(rng)
                    v_cache[v_cache_offset(block, g, d, slot)] = random_value(rng)
    block = BLOCK_TABLE[PLANT_SEQ][PLANT_KEY // BLOCK]
    for d in range(HEAD_DIM):
        q[row_offset(PLANT_SEQ, QUERY_HEADS, PLANT_HEAD, d)] = PLANT_VALUE
        k_cache[k_cache_offset(block, PLANT_HEAD // GROUP, d, PLANT_KEY % BLOCK)] = PLANT_VALUE
    slopes = [f32(2.0 ** (-(h + 1) / 4)) for h in range(QUERY_HEADS)]
    return q, k_cache, v_cache, slopes


def exact_attention(inputs):
    mpmath.mp.dps = 50
    q, k_cache, v_cache, slopes = inputs
    out = [0.0] * len(q)
    for seq, length in enumerate(SEQ_LEN):
        last = length - 1  # the token's own position
        for head in range(QUERY_HEADS):
            g = head // GROUP
            weights, values = [], []
            for j in range(length):
                block, slot = BLOCK_TABLE[seq][j // BLOCK], j % BLOCK
                score = mpmath.fsum(
                    mpmath.mpf(q[row_offset(seq, QUERY_HEADS, head, d)])
                    * mpmath.mpf(k_cache[k_cache_offset(block, g, d, slot)])
                    for d in range(HEAD_DIM)
                )
                score = score / 8 + mpmath.mpf(slopes[head]) * (j - last)
                weights.append(mpmath.exp(score))
                values.append([v_cache[v_cache_offset(block, g, d, slot)] for d in range(HEAD_DIM)])
            total = mpmath.fsum(weights)
            for d in range(HEAD_DIM):
                numerator = mpmath.fsum(w * mpmath.mpf(v[d]) for w, v in zip(weights, values))
                out[row_offset(seq, QUERY_HEADS, head, d)] = float(mpmath.nstr(numerator / total, 40))
    return out


def main():
    inputs = make_inputs()
    expected = exact_attention(inputs)
    q, k_cache, v_cache, slopes = inputs
    seqs = len(SEQ_LEN)
    files = {
        "q.npy": npy_bytes((seqs, QUERY_HEADS, HEAD_DIM), q, "f", "<f4"),
        "k_cache.npy": npy_bytes(
            (NUM_BLOCKS, KV_HEADS, HEAD_DIM // PACK, BLOCK, PACK), k_cache, "f", "<f4"
        ),
        "v_cache.npy": npy_bytes((NUM_BLOCKS, KV_HEADS, HEAD_DIM, BLOCK), v_cache, "f", "<f4"),
        "block_table.npy": npy_bytes(
            (seqs, len(BLOCK_TABLE[0])), [b for row in BLOCK_TABLE for b in row], "i", "<i4"
        ),
        "seq_len.npy": npy_bytes((seqs,), SEQ_LEN, "i", "<i4"),
        "alibi_slopes.npy": npy_bytes((QUERY_HEADS,), slopes, "f", "<f4"),
        "expected.npy": npy_bytes((seqs, QUERY_HEADS, HEAD_DIM), expected, "d", "<f8"),
    }
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (OUT_DIR / name).write_bytes(data)
        print("wrote", OUT_DIR / name, len(data), "bytes")


if __name__ == "__main__":
    main()
