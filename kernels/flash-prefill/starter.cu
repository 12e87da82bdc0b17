// The lab's starter kernel, kept as the timing baseline: every SPEEDUP that
// flashprof prints is measured against this body, so its arithmetic must stay
// exactly as the lab ships it (same operation order, expf, shuffle pattern).
//
// Body-only form with the lab's default launch: one block per 64 query rows of
// one query head (blockIdx.y), 8 warps, each warp finishing its 8 rows one
// after another. One warp serves one (row, head); lane l keeps dims l and l+32.
// It is already an online softmax, but each row streams its whole visible K/V
// range from memory on its own, which is why it is slow.
const int h = blockIdx.y;
const int g = h / GROUP;
const int warp = threadIdx.x / 32;
const int lane = threadIdx.x % 32;
for (int r = 0; r < 8; ++r) {
    const int row = blockIdx.x * 64 + warp * 8 + r;
    // Rows only grow from here on, so the warp has no work left at all.
    if (row >= chunkLen) return;
    const int pos = prefixLen + row;
    const float* qRow = q + (size_t)row * HQ * DH + h * DH;
    const float q0 = qRow[lane];
    const float q1 = qRow[lane + 32];
    float m = -INFINITY, l = 0.0f, acc0 = 0.0f, acc1 = 0.0f;
    for (int j = 0; j <= pos; ++j) {
        const float* kRow = kCache + (size_t)j * HKV * DH + g * DH;
        const float* vRow = vCache + (size_t)j * HKV * DH + g * DH;
        float dot = q0 * kRow[lane] + q1 * kRow[lane + 32];
        // Butterfly reduction: afterwards every lane holds the full dot product.
        for (int off = 16; off > 0; off >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, off);
        const float s = dot * 0.125f;
        const float mNew = fmaxf(m, s);
        // Rescale on every key, even when the max did not move (alpha is then 1).
        const float alpha = expf(m - mNew);
        const float p = expf(s - mNew);
        l = alpha * l + p;
        acc0 = alpha * acc0 + p * vRow[lane];
        acc1 = alpha * acc1 + p * vRow[lane + 32];
        m = mNew;
    }
    float* outRow = out + (size_t)row * HQ * DH + h * DH;
    outRow[lane] = acc0 / l;
    outRow[lane + 32] = acc1 / l;
}
