// Ladder rung 3: register tiling.
//
// The idea it adds: rung 2 still spends a shuffle butterfly and two expf on
// every (query, key) pair, and reads each operand from shared memory for one
// or two FMAs. Here a pair costs one FMA per dim and little else:
//   - the 256 threads form 32 teams of 8 lanes; a team owns 4 query vectors
//     (vectors team, team+32, team+64, team+96 of the block's 128) and a lane
//     scores its 4 vectors against 8 keys of the 64-key tile (keys lane,
//     lane+8, ...), so every float4 read from shared memory feeds 16 or 32
//     FMAs and no dot product needs a shuffle;
//   - the softmax runs once per tile, not per key: a tile max (3 shuffles
//     across the team), one rescale of l and the accumulator, one exp2f per
//     score. The 1/8 scale and log2(e) are folded into Q once, so scores
//     come out ready for exp2f;
//   - P V is register-tiled the same way: a lane owns 4 vectors x 8 dims of
//     the output, and takes each probability from its owner lane in the team
//     with one shuffle (P never goes through shared memory).
// K and V tiles are still staged synchronously.
//
// Measured on the H200 at C = P = 2048: 1.724 ms, 16.6x the starter's 28.6 ms (docs/LADDER.md).
//
// @flashprof rows_per_block=32 threads=256 dynamic_smem=68608 grid=kv_group

namespace {

constexpr int kQueryHeads = 32;
constexpr int kKvHeads = 8;
constexpr int kHeadsPerGroup = kQueryHeads / kKvHeads;
constexpr int kDim = 64;

constexpr int kRowsPerBlock = 32;
constexpr int kVectorsPerBlock = kRowsPerBlock * kHeadsPerGroup;
constexpr int kThreads = 256;
constexpr int kTileKeys = 64;
constexpr int kTeamLanes = 8;
constexpr int kTeams = kThreads / kTeamLanes;
constexpr int kVectorsPerLane = kVectorsPerBlock / kTeams;  // 4
constexpr int kKeysPerLane = kTileKeys / kTeamLanes;        // 8
constexpr int kDimsPerLane = kDim / kTeamLanes;             // 8

// Q and K rows are padded by 4 floats so that the rows a warp reads at the
// same dim start on different banks.
constexpr int kPaddedDim = kDim + 4;
constexpr int kSharedBytes =
    (kVectorsPerBlock * kPaddedDim + kTileKeys * kPaddedDim + kTileKeys * kDim) * (int)sizeof(float);
static_assert(kSharedBytes == 68608, "keep the @flashprof dynamic_smem line in step");

// 0.125 * log2(e): scores in log2 units, ready for exp2f.
constexpr float kScoreScale = 0.125f * 1.4426950408889634f;

__device__ __forceinline__ float4 load4(const float* p)
{
    return *reinterpret_cast<const float4*>(p);
}

// Copies keys [tileStart, tileStart + 64) of one KV head into a [key][rowStride]
// tile; keys at or past `keyEnd` become zeros.
__device__ __forceinline__ void stageTile(float* tile, int rowStride, const float* cache, int kvHead,
                                          int tileStart, int keyEnd)
{
    constexpr int kChunksPerKey = kDim / 4;
#pragma unroll
    for (int n = 0; n < kTileKeys * kChunksPerKey / kThreads; ++n) {
        const int chunk = threadIdx.x + n * kThreads;
        const int key = chunk / kChunksPerKey;
        const int dim = (chunk % kChunksPerKey) * 4;
        float4 value = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (tileStart + key < keyEnd)
            value = load4(cache + ((size_t)(tileStart + key) * kKvHeads + kvHead) * kDim + dim);
        *reinterpret_cast<float4*>(tile + key * rowStride + dim) = value;
    }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads, 2)
    attention_prefill(const float* q, const float* kCache, const float* vCache, float* out,
                      int chunkLen, int prefixLen)
{
    extern __shared__ float4 sharedRaw[];
    float* qTile = reinterpret_cast<float*>(sharedRaw);
    float* kTile = qTile + kVectorsPerBlock * kPaddedDim;
    float* vTile = kTile + kTileKeys * kPaddedDim;

    const int kvHead = blockIdx.y;
    const int firstRow = blockIdx.x * kRowsPerBlock;
    const int rowsHere = min(kRowsPerBlock, chunkLen - firstRow);
    const int keyEnd = prefixLen + firstRow + rowsHere;
    const int team = threadIdx.x / kTeamLanes;
    const int lane = threadIdx.x % kTeamLanes;

    // Block vector v is row firstRow + v/4 of head 4*kvHead + v%4; rows past
    // the chunk are zeros and never stored.
    constexpr int kChunksPerVector = kDim / 4;
#pragma unroll
    for (int n = 0; n < kVectorsPerBlock * kChunksPerVector / kThreads; ++n) {
        const int chunk = threadIdx.x + n * kThreads;
        const int vector = chunk / kChunksPerVector;
        const int dim = (chunk % kChunksPerVector) * 4;
        const int rowOffset = vector / kHeadsPerGroup;
        float4 value = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (rowOffset < rowsHere) {
            const int head = kvHead * kHeadsPerGroup + vector % kHeadsPerGroup;
            value = load4(q + ((size_t)(firstRow + rowOffset) * kQueryHeads + head) * kDim + dim);
            value.x *= kScoreScale;
            value.y *= kScoreScale;
            value.z *= kScoreScale;
            value.w *= kScoreScale;
        }
        *reinterpret_cast<float4*>(qTile + vector * kPaddedDim + dim) = value;
    }

    float rowMax[kVectorsPerLane], rowSumPart[kVectorsPerLane];
    float acc[kVectorsPerLane][kDimsPerLane];
#pragma unroll
    for (int i = 0; i < kVectorsPerLane; ++i) {
        rowMax[i] = -INFINITY;
        rowSumPart[i] = 0.0f;
#pragma unroll
        for (int d = 0; d < kDimsPerLane; ++d) acc[i][d] = 0.0f;
    }

    for (int tileStart = 0; tileStart < keyEnd; tileStart += kTileKeys) {
        __syncthreads();  // every team is done with the previous tile
        stageTile(kTile, kPaddedDim, kCache, kvHead, tileStart, keyEnd);
        stageTile(vTile, kDim, vCache, kvHead, tileStart, keyEnd);
        __syncthreads();

        // S = Q K^T: 4 vectors x 8 keys per lane, the 4 query float4s held
        // while the 8 keys stream past.
        float score[kVectorsPerLane][kKeysPerLane];
#pragma unroll
        for (int i = 0; i < kVectorsPerLane; ++i)
#pragma unroll
            for (int j = 0; j < kKeysPerLane; ++j) score[i][j] = 0.0f;
#pragma unroll 2
        for (int d = 0; d < kDim; d += 4) {
            float4 query[kVectorsPerLane];
#pragma unroll
            for (int i = 0; i < kVectorsPerLane; ++i) query[i] = load4(qTile + (team + i * kTeams) * kPaddedDim + d);
#pragma unroll
            for (int j = 0; j < kKeysPerLane; ++j) {
                const float4 key = load4(kTile + (lane + j * kTeamLanes) * kPaddedDim + d);
#pragma unroll
                for (int i = 0; i < kVectorsPerLane; ++i) {
                    score[i][j] = fmaf(query[i].x, key.x, score[i][j]);
                    score[i][j] = fmaf(query[i].y, key.y, score[i][j]);
                    score[i][j] = fmaf(query[i].z, key.z, score[i][j]);
                    score[i][j] = fmaf(query[i].w, key.w, score[i][j]);
                }
            }
        }

        // Online softmax, once per tile. Only a tile reaching past the block's
        // first position can hide keys from one of its rows.
        const bool straddlesDiagonal = tileStart + kTileKeys - 1 > prefixLen + firstRow;
#pragma unroll
        for (int i = 0; i < kVectorsPerLane; ++i) {
            if (straddlesDiagonal) {
                const int lastVisible = prefixLen + firstRow + (team + i * kTeams) / kHeadsPerGroup;
#pragma unroll
                for (int j = 0; j < kKeysPerLane; ++j)
                    if (tileStart + lane + j * kTeamLanes > lastVisible) score[i][j] = -INFINITY;
            }
            float tileMax = score[i][0];
#pragma unroll
            for (int j = 1; j < kKeysPerLane; ++j) tileMax = fmaxf(tileMax, score[i][j]);
#pragma unroll
            for (int offset = kTeamLanes / 2; offset > 0; offset >>= 1)
                tileMax = fmaxf(tileMax, __shfl_xor_sync(0xffffffffu, tileMax, offset));
            // Key 0 is in the first tile and visible to every row, so the max is
            // finite from the first tile on (alpha is exactly 0 there).
            const float newMax = fmaxf(rowMax[i], tileMax);
            const float alpha = exp2f(rowMax[i] - newMax);
            rowMax[i] = newMax;
            float tileSum = 0.0f;
#pragma unroll
            for (int j = 0; j < kKeysPerLane; ++j) {
                score[i][j] = exp2f(score[i][j] - newMax);
                tileSum += score[i][j];
            }
            rowSumPart[i] = rowSumPart[i] * alpha + tileSum;
#pragma unroll
            for (int d = 0; d < kDimsPerLane; ++d) acc[i][d] *= alpha;
        }

        // O += P V: key 8j + src's probability lives in lane src of the team.
#pragma unroll
        for (int j = 0; j < kKeysPerLane; ++j) {
#pragma unroll
            for (int src = 0; src < kTeamLanes; ++src) {
                const int key = j * kTeamLanes + src;
                const float4 vLow = load4(vTile + key * kDim + lane * 4);
                const float4 vHigh = load4(vTile + key * kDim + 32 + lane * 4);
#pragma unroll
                for (int i = 0; i < kVectorsPerLane; ++i) {
                    const float p = __shfl_sync(0xffffffffu, score[i][j], src, kTeamLanes);
                    acc[i][0] = fmaf(p, vLow.x, acc[i][0]);
                    acc[i][1] = fmaf(p, vLow.y, acc[i][1]);
                    acc[i][2] = fmaf(p, vLow.z, acc[i][2]);
                    acc[i][3] = fmaf(p, vLow.w, acc[i][3]);
                    acc[i][4] = fmaf(p, vHigh.x, acc[i][4]);
                    acc[i][5] = fmaf(p, vHigh.y, acc[i][5]);
                    acc[i][6] = fmaf(p, vHigh.z, acc[i][6]);
                    acc[i][7] = fmaf(p, vHigh.w, acc[i][7]);
                }
            }
        }
    }

#pragma unroll
    for (int i = 0; i < kVectorsPerLane; ++i) {
        float rowSum = rowSumPart[i];
#pragma unroll
        for (int offset = kTeamLanes / 2; offset > 0; offset >>= 1)
            rowSum += __shfl_xor_sync(0xffffffffu, rowSum, offset);
        const int vector = team + i * kTeams;
        const int rowOffset = vector / kHeadsPerGroup;
        if (rowOffset >= rowsHere) continue;
        const int head = kvHead * kHeadsPerGroup + vector % kHeadsPerGroup;
        float* dst = out + ((size_t)(firstRow + rowOffset) * kQueryHeads + head) * kDim;
        *reinterpret_cast<float4*>(dst + lane * 4) =
            make_float4(acc[i][0] / rowSum, acc[i][1] / rowSum, acc[i][2] / rowSum, acc[i][3] / rowSum);
        *reinterpret_cast<float4*>(dst + 32 + lane * 4) =
            make_float4(acc[i][4] / rowSum, acc[i][5] / rowSum, acc[i][6] / rowSum, acc[i][7] / rowSum);
    }
}
