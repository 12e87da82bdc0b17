// flashprof-expect: random-small input-mutated
// Bug: the 1/8 scale is folded into q by writing it back through a cast-away const, which changes the caller's input (and a second launch scales it again).
// Planted from the starter: "saving" one multiply per key.
const int h = blockIdx.y;
const int g = h / GROUP;
const int warp = threadIdx.x / 32;
const int lane = threadIdx.x % 32;
for (int r = 0; r < 8; ++r) {
    const int row = blockIdx.x * 64 + warp * 8 + r;
    if (row >= chunkLen) return;
    const int pos = prefixLen + row;
    float* qRow = const_cast<float*>(q) + (size_t)row * HQ * DH + h * DH;
    qRow[lane] *= 0.125f;
    qRow[lane + 32] *= 0.125f;
    const float q0 = qRow[lane];
    const float q1 = qRow[lane + 32];
    float m = -INFINITY, l = 0.0f, acc0 = 0.0f, acc1 = 0.0f;
    for (int j = 0; j <= pos; ++j) {
        const float* kRow = kCache + (size_t)j * HKV * DH + g * DH;
        const float* vRow = vCache + (size_t)j * HKV * DH + g * DH;
        float s = q0 * kRow[lane] + q1 * kRow[lane + 32];
        for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
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
