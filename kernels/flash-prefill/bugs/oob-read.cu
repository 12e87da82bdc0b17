// flashprof-expect: chunk-of-1 nan
// Bug: keys go in pairs and the second key of the last pair is masked by zeroing its weight instead of skipping its loads, so when P+C is odd the last row reads key P+C (past the end) and 0 * NaN poisons it.
// A two-keys-per-iteration variant of the starter (two independent shuffle
// chains in flight); rows that end inside the sequence read a real key there
// and stay correct, so only the very last row can go wrong.
const int h = blockIdx.y;
const int g = h / GROUP;
const int warp = threadIdx.x / 32;
const int lane = threadIdx.x % 32;
for (int r = 0; r < 8; ++r) {
    const int row = blockIdx.x * 64 + warp * 8 + r;
    if (row >= chunkLen) return;
    const int pos = prefixLen + row;
    const float* qRow = q + (size_t)row * HQ * DH + h * DH;
    const float q0 = qRow[lane];
    const float q1 = qRow[lane + 32];
    float m = -INFINITY, l = 0.0f, acc0 = 0.0f, acc1 = 0.0f;
    for (int j = 0; j <= pos; j += 2) {
        const float* kRowA = kCache + (size_t)j * HKV * DH + g * DH;
        const float* kRowB = kRowA + HKV * DH;
        const float* vRowA = vCache + (size_t)j * HKV * DH + g * DH;
        const float* vRowB = vRowA + HKV * DH;
        float dotA = q0 * kRowA[lane] + q1 * kRowA[lane + 32];
        float dotB = q0 * kRowB[lane] + q1 * kRowB[lane + 32];
        for (int off = 16; off > 0; off >>= 1) {
            dotA += __shfl_xor_sync(0xffffffffu, dotA, off);
            dotB += __shfl_xor_sync(0xffffffffu, dotB, off);
        }
        const float sA = dotA * 0.125f;
        const float sB = (j + 1 <= pos) ? dotB * 0.125f : -INFINITY;
        const float mNew = fmaxf(m, fmaxf(sA, sB));
        const float alpha = expf(m - mNew);
        const float pA = expf(sA - mNew);
        const float pB = expf(sB - mNew);
        l = alpha * l + pA + pB;
        acc0 = alpha * acc0 + pA * vRowA[lane] + pB * vRowB[lane];
        acc1 = alpha * acc1 + pA * vRowA[lane + 32] + pB * vRowB[lane + 32];
        m = mNew;
    }
    float* outRow = out + (size_t)row * HQ * DH + h * DH;
    outRow[lane] = acc0 / l;
    outRow[lane + 32] = acc1 / l;
}
