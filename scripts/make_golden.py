#!/usr/bin/env python3
"""Builds the golden case that proves flashprof's float64 oracle.

The expected output is computed with mpmath at 50 significant digits and,
unlike the oracle, without subtracting the row maximum: mpmath's exponent
range takes exp(1152) in its stride, so the two computations share neither
arithmetic nor algorithm. NumPy is deliberately not used (not even to write
the .npy files), so nothing here leans on float64 attention.

Run from the repository root:  python3 scripts/make_golden.py
Needs: mpmath (pip install mpmath). Output: assets/golden/{q,k,v,expected}.npy
"""

import random
import struct
from pathlib import Path

import mpmath

CHUNK_LEN, PREFIX_LEN = 5, 3
SEQ_LEN = PREFIX_LEN + CHUNK_LEN
QUERY_HEADS, KV_HEADS, HEAD_DIM = 32, 8, 64
GROUP = QUERY_HEADS // KV_HEADS
SEED = 20240611

# A planted pair whose score, 12 * 12 * 64 / 8 = 1152, is past float64's exp
# range (about 709.8): only a max-subtracting softmax survives it. The same
# large key sits at position 6 too, which row 2 (position 5) must not see.
PLANT_VALUE = 12.0
PLANT_QUERY = (2, 0)  # (row, query head)
PLANT_KEYS = (1, 6)  # positions in KV head 0
PLANT_KV_HEAD = 0

OUT_DIR = Path(__file__).resolve().parent.parent / "assets" / "golden"


def random_tensor(rng, count):
    """Multiples of 2^-10 in [-2, 2]: exact in float32 and short enough that
    every product q*k is exact at 50 digits."""
    return [rng.randint(-2048, 2048) / 1024 for _ in range(count)]


def q_index(row, head, dim):
    return (row * QUERY_HEADS + head) * HEAD_DIM + dim


def kv_index(pos, kv_head, dim):
    return (pos * KV_HEADS + kv_head) * HEAD_DIM + dim


def make_inputs():
    rng = random.Random(SEED)
    q = random_tensor(rng, CHUNK_LEN * QUERY_HEADS * HEAD_DIM)
    k = random_tensor(rng, SEQ_LEN * KV_HEADS * HEAD_DIM)
    v = random_tensor(rng, SEQ_LEN * KV_HEADS * HEAD_DIM)
    row, head = PLANT_QUERY
    for d in range(HEAD_DIM):
        q[q_index(row, head, d)] = PLANT_VALUE
        for pos in PLANT_KEYS:
            k[kv_index(pos, PLANT_KV_HEAD, d)] = PLANT_VALUE
    return q, k, v


def exact_attention(q, k, v):
    """Softmax-weighted values by the definition, at high precision."""
    mpmath.mp.dps = 50
    scale = mpmath.mpf(1) / 8
    out = [0.0] * (CHUNK_LEN * QUERY_HEADS * HEAD_DIM)
    for row in range(CHUNK_LEN):
        visible = range(PREFIX_LEN + row + 1)
        for head in range(QUERY_HEADS):
            kv_head = head // GROUP
            weights = []
            for pos in visible:
                score = mpmath.fsum(
                    mpmath.mpf(q[q_index(row, head, d)]) * mpmath.mpf(k[kv_index(pos, kv_head, d)])
                    for d in range(HEAD_DIM)
                )
                weights.append(mpmath.exp(score * scale))
            total = mpmath.fsum(weights)
            for d in range(HEAD_DIM):
                numerator = mpmath.fsum(
                    w * mpmath.mpf(v[kv_index(pos, kv_head, d)]) for w, pos in zip(weights, visible)
                )
                # Through a 40-digit decimal string: Python's float() rounds it correctly.
                out[q_index(row, head, d)] = float(mpmath.nstr(numerator / total, 40))
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
    q, k, v = make_inputs()
    expected = exact_attention(q, k, v)
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    query_shape = (CHUNK_LEN, QUERY_HEADS, HEAD_DIM)
    cache_shape = (SEQ_LEN, KV_HEADS, HEAD_DIM)
    files = {
        "q.npy": npy_bytes(query_shape, q, "f", "<f4"),
        "k.npy": npy_bytes(cache_shape, k, "f", "<f4"),
        "v.npy": npy_bytes(cache_shape, v, "f", "<f4"),
        "expected.npy": npy_bytes(query_shape, expected, "d", "<f8"),
    }
    for name, data in files.items():
        (OUT_DIR / name).write_bytes(data)
        print("wrote", OUT_DIR / name, len(data), "bytes")


if __name__ == "__main__":
    main()
