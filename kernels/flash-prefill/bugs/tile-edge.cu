// flashprof-expect: prefix-31 fail
// Bug: the key-tile count is (lastKey + 1) / 64, rounded down, so the partial tile at the end of each block's key range is never staged and its rows miss their newest keys.
// A first tiled step from the starter, lab geometry: the block stages each
// 64-key K/V tile of its KV head in shared memory once, and every warp then
// runs its 8 rows over the tile the starter's way, with per-row state in
// registers. The same count rounded up ((lastKey + 64) / 64) is correct.
const int h = blockIdx.y;
const int g = h / GROUP;
const int warp = threadIdx.x / 32;
const int lane = threadIdx.x % 32;
__shared__ float kTile[64][DH];
__shared__ float vTile[64][DH];
const int firstRow = blockIdx.x * 64;
const int lastKey = prefixLen + min(firstRow + 64, chunkLen) - 1;
const int tileCount = (lastKey + 1) / 64;

float q0[8], q1[8], m[8], l[8], acc0[8], acc1[8];
for (int r = 0; r < 8; ++r) {
    const int row = min(firstRow + warp * 8 + r, chunkLen - 1);
    q0[r] = q[((size_t)row * HQ + h) * DH + lane];
    q1[r] = q[((size_t)row * HQ + h) * DH + lane + 32];
    m[r] = -INFINITY;
    l[r] = 0.0f;
    acc0[r] = 0.0f;
    acc1[r] = 0.0f;
}
for (int t = 0; t < tileCount; ++t) {
    const int tileStart = t * 64;
    __syncthreads();
    for (int i = threadIdx.x; i < 64 * DH; i += blockDim.x) {
        const int key = tileStart + i / DH;
        const bool inRange = key <= lastKey;
        kTile[i / DH][i % DH] = inRange ? kCache[((size_t)key * HKV + g) * DH + i % DH] : 0.0f;
        vTile[i / DH][i % DH] = inRange ? vCache[((size_t)key * HKV + g) * DH + i % DH] : 0.0f;
    }
    __syncthreads();
    for (int r = 0; r < 8; ++r) {
        const int pos = prefixLen + firstRow + warp * 8 + r;
        for (int jj = 0; jj < 64 && tileStart + jj <= pos; ++jj) {
            float dot = q0[r] * kTile[jj][lane] + q1[r] * kTile[jj][lane + 32];
            for (int off = 16; off > 0; off >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, off);
            const float s = dot * 0.125f;
            const float mNew = fmaxf(m[r], s);
            const float alpha = expf(m[r] - mNew);
            const float p = expf(s - mNew);
            l[r] = alpha * l[r] + p;
            acc0[r] = alpha * acc0[r] + p * vTile[jj][lane];
            acc1[r] = alpha * acc1[r] + p * vTile[jj][lane + 32];
            m[r] = mNew;
        }
    }
}
for (int r = 0; r < 8; ++r) {
    const int row = firstRow + warp * 8 + r;
    if (row < chunkLen) {
        out[((size_t)row * HQ + h) * DH + lane] = acc0[r] / l[r];
        out[((size_t)row * HQ + h) * DH + lane + 32] = acc1[r] / l[r];
    }
}
