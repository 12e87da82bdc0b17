// Ladder rung 2: share K/V across a KV group.
//
// The idea it adds: query heads 4g .. 4g+3 all read KV head g. Rung 1 gave
// each query head its own blocks, so every K/V tile was staged four times and
// every key value in a register fed one head. Here a block owns 32 rows of a
// whole KV group (128 query vectors) and a warp owns 4 rows with all 4 heads:
//   - a K/V tile is staged once for 4 heads, twice the rows of rung 1;
//   - a lane's two K values feed the dot products of all 4 heads;
//   - the 4 heads share one butterfly: the first two shuffle steps trade whole
//     heads instead of adding copies (after them lanes 8h .. 8h+7 hold head h),
//     so 4 dot products cost 6 shuffles instead of 20;
//   - each lane then runs the online softmax of its own head only (4 heads at
//     once across the warp, no lane repeating another's expf), and keeps the
//     accumulator of 8 dims of that head: lane 8h + j owns dims 8j .. 8j+7.
// The softmax arithmetic is still the starter's: expf, rescaled every key.
//
// Measured on the H200 at C = P = 2048: 6.288 ms, 4.6x the starter's 28.6 ms (docs/LADDER.md).
//
// @flashprof rows_per_block=32 threads=256 grid=kv_group

namespace {

constexpr int kQueryHeads = 32;
constexpr int kKvHeads = 8;
constexpr int kHeadsPerGroup = kQueryHeads / kKvHeads;
constexpr int kDim = 64;

constexpr int kRowsPerBlock = 32;
constexpr int kThreads = 256;
constexpr int kRowsPerWarp = kRowsPerBlock / (kThreads / 32);
constexpr int kTileKeys = 64;
// Dims of one head's output that a lane accumulates.
constexpr int kDimsPerLane = kDim / 8;

// Copies keys [tileStart, tileStart + 64) of one KV head into `tile`; keys at
// or past `keyEnd` become zeros, so nothing past the sequence is ever read.
__device__ __forceinline__ void stageTile(float (*tile)[kDim], const float* cache, int kvHead,
                                          int tileStart, int keyEnd)
{
    constexpr int kChunksPerKey = kDim / 4;
    for (int chunk = threadIdx.x; chunk < kTileKeys * kChunksPerKey; chunk += kThreads) {
        const int key = chunk / kChunksPerKey;
        const int dim = (chunk % kChunksPerKey) * 4;
        float4 value = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (tileStart + key < keyEnd)
            value = *reinterpret_cast<const float4*>(
                cache + ((size_t)(tileStart + key) * kKvHeads + kvHead) * kDim + dim);
        *reinterpret_cast<float4*>(&tile[key][dim]) = value;
    }
}

// Sums four per-lane partial dot products (one per head of the group) over the
// warp. Returns the full dot product of head lane / 8.
__device__ __forceinline__ float reduceFourHeads(const float (&part)[kHeadsPerGroup], int lane)
{
    // Step 16: lanes 0..15 keep heads 0 and 1, lanes 16..31 heads 2 and 3;
    // each sends the pair it drops to its partner, which adds it.
    const bool upperHalf = lane & 16;
    float first = upperHalf ? part[2] : part[0];
    float second = upperHalf ? part[3] : part[1];
    first += __shfl_xor_sync(0xffffffffu, upperHalf ? part[0] : part[2], 16);
    second += __shfl_xor_sync(0xffffffffu, upperHalf ? part[1] : part[3], 16);
    // Step 8: of that pair, lanes with bit 3 set keep the second head.
    const bool bit3 = lane & 8;
    float mine = bit3 ? second : first;
    mine += __shfl_xor_sync(0xffffffffu, bit3 ? first : second, 8);
    // Now the 8 lanes of a head hold partial sums that together cover the warp.
    for (int offset = 4; offset > 0; offset >>= 1) mine += __shfl_xor_sync(0xffffffffu, mine, offset);
    return mine;
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads, 2)
    attention_prefill(const float* q, const float* kCache, const float* vCache, float* out,
                      int chunkLen, int prefixLen)
{
    __shared__ __align__(16) float kTile[kTileKeys][kDim];
    __shared__ __align__(16) float vTile[kTileKeys][kDim];

    const int kvHead = blockIdx.y;
    const int warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    // After the butterfly a lane serves one head of the group and 8 of its dims.
    const int myHead = kvHead * kHeadsPerGroup + lane / 8;
    const int myDims = (lane % 8) * kDimsPerLane;
    const int firstRow = blockIdx.x * kRowsPerBlock;
    const int rowsHere = min(kRowsPerBlock, chunkLen - firstRow);
    const int keyEnd = prefixLen + firstRow + rowsHere;
    const int warpFirstRow = firstRow + warp * kRowsPerWarp;

    // Every lane holds dims lane and lane+32 of all 4 heads' queries.
    float q0[kRowsPerWarp][kHeadsPerGroup], q1[kRowsPerWarp][kHeadsPerGroup];
    float m[kRowsPerWarp], l[kRowsPerWarp], acc[kRowsPerWarp][kDimsPerLane];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
        const int row = warpFirstRow + r;
        const bool inChunk = row < chunkLen;  // rows past the chunk compute on zeros, never stored
#pragma unroll
        for (int h = 0; h < kHeadsPerGroup; ++h) {
            const float* qRow = q + ((size_t)row * kQueryHeads + kvHead * kHeadsPerGroup + h) * kDim;
            q0[r][h] = inChunk ? qRow[lane] : 0.0f;
            q1[r][h] = inChunk ? qRow[lane + 32] : 0.0f;
        }
        m[r] = -INFINITY;
        l[r] = 0.0f;
#pragma unroll
        for (int d = 0; d < kDimsPerLane; ++d) acc[r][d] = 0.0f;
    }

    for (int tileStart = 0; tileStart < keyEnd; tileStart += kTileKeys) {
        __syncthreads();  // every warp is done with the previous tile
        stageTile(kTile, kCache, kvHead, tileStart, keyEnd);
        stageTile(vTile, vCache, kvHead, tileStart, keyEnd);
        __syncthreads();

        const int keysHere = min(kTileKeys, keyEnd - tileStart);
        for (int k = 0; k < keysHere; ++k) {
            const int key = tileStart + k;
            const float k0 = kTile[k][lane], k1 = kTile[k][lane + 32];
            const float4 vLow = *reinterpret_cast<const float4*>(&vTile[k][myDims]);
            const float4 vHigh = *reinterpret_cast<const float4*>(&vTile[k][myDims + 4]);
            const float v[kDimsPerLane] = {vLow.x, vLow.y, vLow.z, vLow.w, vHigh.x, vHigh.y, vHigh.z, vHigh.w};
#pragma unroll
            for (int r = 0; r < kRowsPerWarp; ++r) {
                float part[kHeadsPerGroup];
#pragma unroll
                for (int h = 0; h < kHeadsPerGroup; ++h) part[h] = q0[r][h] * k0 + q1[r][h] * k1;
                const float dot = reduceFourHeads(part, lane);
                // All lanes serve the same row, so this branch never diverges.
                if (key > prefixLen + warpFirstRow + r) continue;
                const float s = dot * 0.125f;
                const float mNew = fmaxf(m[r], s);
                const float alpha = expf(m[r] - mNew);
                const float p = expf(s - mNew);
                l[r] = alpha * l[r] + p;
#pragma unroll
                for (int d = 0; d < kDimsPerLane; ++d) acc[r][d] = alpha * acc[r][d] + p * v[d];
                m[r] = mNew;
            }
        }
    }

#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
        const int row = warpFirstRow + r;
        if (row >= chunkLen) continue;
        float* dst = out + ((size_t)row * kQueryHeads + myHead) * kDim + myDims;
        const float inverse = 1.0f / l[r];
        *reinterpret_cast<float4*>(dst) =
            make_float4(acc[r][0] * inverse, acc[r][1] * inverse, acc[r][2] * inverse, acc[r][3] * inverse);
        *reinterpret_cast<float4*>(dst + 4) =
            make_float4(acc[r][4] * inverse, acc[r][5] * inverse, acc[r][6] * inverse, acc[r][7] * inverse);
    }
}
