// flashprof-expect: prefix-1000 race
// Bug: two blocks split each row's keys in half (split-K) but both store their half's result straight into out with no merge, so whichever block finishes last wins and the winner changes from run to run.
// @flashprof rows_per_block=32
// Starter arithmetic; the declared 32 rows per block doubles gridDim.x, and
// block pairs (2b, 2b+1) share row tile b: the even block takes keys
// [0, (pos+1)/2), the odd one the rest. The planned merge of the two partial
// (m, l, acc) states was never written.
const int h = blockIdx.y;
const int g = h / GROUP;
const int warp = threadIdx.x / 32;
const int lane = threadIdx.x % 32;
const int rowTile = blockIdx.x / 2;
const bool upperHalf = blockIdx.x % 2 == 1;
for (int r = 0; r < 8; ++r) {
    const int row = rowTile * 64 + warp * 8 + r;
    if (row >= chunkLen) return;
    const int pos = prefixLen + row;
    const int split = (pos + 1) / 2;
    const int firstKey = upperHalf ? split : 0;
    const int endKey = upperHalf ? pos + 1 : split;
    const float* qRow = q + (size_t)row * HQ * DH + h * DH;
    const float q0 = qRow[lane];
    const float q1 = qRow[lane + 32];
    float m = -INFINITY, l = 0.0f, acc0 = 0.0f, acc1 = 0.0f;
    for (int j = firstKey; j < endKey; ++j) {
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
