// HONEST CONTROL (flash-prefill): each row's keys split over the block's
// warps, the parts summed with shared-memory atomics.
//
// What it is: the starter's arithmetic (the same online softmax, expf and
// butterfly dot product), with one row at a time per block and the row's
// keys dealt out over the 8 warps (warp w takes keys w, w+8, ...). Each warp
// keeps its own max, sum and two accumulators; the block then takes the
// row's max over the warps, and every warp adds its sum and accumulators,
// rescaled to that max, into shared memory with atomicAdd. The order those
// adds land in is whichever warp gets there first, so the output's last
// bits change from launch to launch: a split-K reduction's usual rounding,
// nothing more.
//
// Why it is here: the precision rule (docs/INTEGRITY.md) compares every
// timed launch's error with the checked launch's. A kernel whose rounding
// moves between launches must stay clear of it; this one shows by how much.
//
// What the honest timing should report: every case passes, a speedup over
// the starter (its own, whatever it is), no finding, and its timed classes'
// shares of the allowance close to its checked launch's.
const int h = blockIdx.y;
const int g = h / GROUP;
const int warp = threadIdx.x / 32;
const int lane = threadIdx.x % 32;
const int warps = blockDim.x / 32;
__shared__ float warpMax[32];
__shared__ float rowSum;
__shared__ float rowAcc[DH];
for (int r = 0; r < 64; ++r) {
    const int row = blockIdx.x * 64 + r;
    // The same for every thread of the block, so no barrier is left waiting.
    if (row >= chunkLen) return;
    const int pos = prefixLen + row;
    const float* qRow = q + (size_t)row * HQ * DH + h * DH;
    const float q0 = qRow[lane];
    const float q1 = qRow[lane + 32];
    float m = -INFINITY, l = 0.0f, acc0 = 0.0f, acc1 = 0.0f;
    for (int j = warp; j <= pos; j += warps) {
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
    if (threadIdx.x < DH) rowAcc[threadIdx.x] = 0.0f;
    if (threadIdx.x == 0) rowSum = 0.0f;
    if (lane == 0) warpMax[warp] = m;
    __syncthreads();
    // Key 0 is every row's, and warp 0's: the row's max is finite.
    float rowMax = warpMax[0];
    for (int w = 1; w < warps; ++w) rowMax = fmaxf(rowMax, warpMax[w]);
    // A warp with no key of this row (pos < warp) has nothing to add.
    if (m != -INFINITY) {
        const float scale = expf(m - rowMax);
        if (lane == 0) atomicAdd(&rowSum, l * scale);
        atomicAdd(&rowAcc[lane], acc0 * scale);
        atomicAdd(&rowAcc[lane + 32], acc1 * scale);
    }
    __syncthreads();
    float* outRow = out + (size_t)row * HQ * DH + h * DH;
    if (threadIdx.x < DH) outRow[threadIdx.x] = rowAcc[threadIdx.x] / rowSum;
    // Every thread has read the sums before the next row clears them.
    __syncthreads();
}
