// flashprof-expect: chunk-of-1 timeout
// Bug: the single-token fast path waits for 8 warps to check in, but warp 0 (the one waiting) never checks itself in, so it spins forever.
// Every other chunk length takes the starter's path unchanged. The fast path
// splits one row's keys over the block's 8 warps and merges their partial
// (m, l, acc) in shared memory, a common decode-style optimisation.
const int h = blockIdx.y;
const int g = h / GROUP;
const int warp = threadIdx.x / 32;
const int lane = threadIdx.x % 32;
if (chunkLen == 1) {
    __shared__ float partMax[8], partSum[8], partAcc[8][64];
    __shared__ int arrived;
    if (threadIdx.x == 0) arrived = 0;
    __syncthreads();
    const int pos = prefixLen;
    const float* qRow = q + h * DH;
    const float q0 = qRow[lane];
    const float q1 = qRow[lane + 32];
    float m = -INFINITY, l = 0.0f, acc0 = 0.0f, acc1 = 0.0f;
    for (int j = warp; j <= pos; j += 8) {
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
    partAcc[warp][lane] = acc0;
    partAcc[warp][lane + 32] = acc1;
    if (lane == 0) {
        partMax[warp] = m;
        partSum[warp] = l;
    }
    __threadfence_block();
    if (warp != 0) {
        if (lane == 0) atomicAdd(&arrived, 1);
        return;
    }
    while (atomicAdd(&arrived, 0) < 8) {
    }
    float best = -INFINITY;
    for (int w = 0; w < 8; ++w) best = fmaxf(best, partMax[w]);
    float sum = 0.0f, out0 = 0.0f, out1 = 0.0f;
    for (int w = 0; w < 8; ++w) {
        const float weight = expf(partMax[w] - best);
        sum += weight * partSum[w];
        out0 += weight * partAcc[w][lane];
        out1 += weight * partAcc[w][lane + 32];
    }
    out[h * DH + lane] = out0 / sum;
    out[h * DH + lane + 32] = out1 / sum;
    return;
}
for (int r = 0; r < 8; ++r) {
    const int row = blockIdx.x * 64 + warp * 8 + r;
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
