// flashprof-expect: prefix-31 crash
// Bug: the warm-up stripe starts at prefixLen - 32 in unsigned arithmetic, which wraps to about 4 billion when the prefix is shorter than 32 keys, and lane 0 then loads a key terabytes past kCache.
// The warm-up (row blocks after the first seed the running max with the 32
// newest cached keys, one key per lane, so that it rarely moves afterwards)
// is harmless for prefixes of 32 keys or more and is skipped when there is no
// prefix; only a short prefix with a chunk longer than 64 rows reaches it.
const int h = blockIdx.y;
const int g = h / GROUP;
const int warp = threadIdx.x / 32;
const int lane = threadIdx.x % 32;
float warmMax = -INFINITY;
if (blockIdx.x > 0 && prefixLen > 0) {
    const unsigned stripeStart = prefixLen - 32u;
    const float* kStripe = kCache + ((size_t)(stripeStart + lane) * HKV + g) * DH;
    const float* qFirst = q + (size_t)(blockIdx.x * 64) * HQ * DH + h * DH;
    float dot = 0.0f;
    for (int d = 0; d < DH; ++d) dot += qFirst[d] * kStripe[d];
    warmMax = dot * 0.125f;
    for (int off = 16; off > 0; off >>= 1) warmMax = fmaxf(warmMax, __shfl_xor_sync(0xffffffffu, warmMax, off));
}
for (int r = 0; r < 8; ++r) {
    const int row = blockIdx.x * 64 + warp * 8 + r;
    if (row >= chunkLen) return;
    const int pos = prefixLen + row;
    const float* qRow = q + (size_t)row * HQ * DH + h * DH;
    const float q0 = qRow[lane];
    const float q1 = qRow[lane + 32];
    // Any finite starting max is fine for an online softmax: l and acc start at 0.
    float m = warmMax, l = 0.0f, acc0 = 0.0f, acc1 = 0.0f;
    for (int j = 0; j <= pos; ++j) {
        const float* kRow = kCache + (size_t)j * HKV * DH + g * DH;
        const float* vRow = vCache + (size_t)j * HKV * DH + g * DH;
        float dot = q0 * kRow[lane] + q1 * kRow[lane + 32];
        for (int off = 16; off > 0; off >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, off);
        const float s = dot * 0.125f;
        const float mNew = fmaxf(m, s);
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
