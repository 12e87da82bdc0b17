// PLANTED CHEAT (flash-prefill): the reference, plus cheaper arithmetic
// on every launch after the first at the timing shape: exact when checked,
// cheaper when only the timing looks (a per-block launch counter, counting
// only at the timing shape, so the hazard cases see the reference).
//
// Trick: every query and key element is cut to TF32 (10 mantissa bits)
// before Q K^T, the precision a single-pass tensor-core kernel keeps, while
// everything else stays the reference's fp32 (so it buys no speed here: the
// file stands in for a tensor-core kernel that would). What the honest
// timing should report: the timed launches carry the cases' hazards (scores
// of 128, a head eight times larger), so the cut fails a planted row, or the
// precision rule names launches far less exact than the checked one; either
// way no speedup, or one within 3% of the reference's (its control).
// flashprof's reference solution: a tiled flash prefill in plain fp32 FFMA.
//
// Shape of the work. One block owns 32 query rows of one KV group, that is
// 128 query vectors (32 rows x the 4 query heads that share a KV head), so a
// K/V tile staged in shared memory once serves four heads at once. Keys are
// walked in tiles of 64. The 256 threads form 16 teams of 16 lanes; a team
// owns 8 query vectors and keeps their softmax state (m, l) and their 8 x 64
// output accumulator spread across its lanes:
//   S = Q K^T  lane owns 8 vectors x 4 keys   (keys lane, lane+16, +32, +48)
//   O += P V   lane owns 8 vectors x 4 dims   (dims 4*lane .. 4*lane+3)
// Both products are register-blocked, so every shared-memory float4 feeds
// 32 FMAs. P goes from the S layout to the O layout through shared memory;
// only the owning team reads it, so no block barrier guards that hand-over.
//
// Scores are kept in log2 units (the 1/8 scale and log2(e) are folded into Q
// once), so each probability is one exp2f. Only tiles that straddle the
// causal diagonal pay for masking, and tiles past the block's last visible
// key are never visited. K and V tiles arrive by cp.async into single buffers
// whose loads are split so that the next K tile streams in during softmax and
// P V, and the next V tile during the next Q K^T.
//
// Row blocks are handed out heaviest first (the last rows see the most keys),
// which evens out the tail of the grid at C = P = 2048.
//
// @flashprof rows_per_block=32 threads=256 dynamic_smem=102400 grid=kv_group

namespace {

constexpr int kQueryHeads = 32;
constexpr int kKvHeads = 8;
constexpr int kHeadsPerGroup = kQueryHeads / kKvHeads;
constexpr int kDim = 64;

constexpr int kRowsPerBlock = 32;
constexpr int kVectorsPerBlock = kRowsPerBlock * kHeadsPerGroup;
constexpr int kTileKeys = 64;
constexpr int kThreads = 256;
constexpr int kTeamLanes = 16;
constexpr int kTeams = kThreads / kTeamLanes;
constexpr int kVectorsPerTeam = kVectorsPerBlock / kTeams;
constexpr int kKeysPerLane = kTileKeys / kTeamLanes;

// Q and K rows carry 4 floats of padding: lanes that read different rows at
// the same dim then land on different banks.
constexpr int kPaddedDim = kDim + 4;
constexpr int kProbStride = kVectorsPerBlock + 4;

constexpr int kQTileFloats = kVectorsPerBlock * kPaddedDim;
constexpr int kKTileFloats = kTileKeys * kPaddedDim;
constexpr int kVTileFloats = kTileKeys * kDim;
constexpr int kProbTileFloats = kTileKeys * kProbStride;
constexpr int kSharedBytes =
    (kQTileFloats + kKTileFloats + kVTileFloats + kProbTileFloats) * (int)sizeof(float);
static_assert(kSharedBytes == 102400, "keep the @flashprof dynamic_smem line in step");
static_assert(kVectorsPerTeam == 8 && kKeysPerLane == 4, "the register blocking below assumes 8 x 4");

// 0.125 * log2(e): scores come out in log2 units, ready for exp2f.
constexpr float kScoreScale = 0.125f * 1.4426950408889634f;

__device__ __forceinline__ float4 loadShared4(const float* p)
{
    return *reinterpret_cast<const float4*>(p);
}

// Copies 16 bytes global -> shared without passing through registers. When
// `inRange` is false nothing is read and the destination is zero-filled: a
// zero V row multiplied by a zero probability stays zero, whereas whatever
// lies past the sequence (NaN in a guard band) would not.
__device__ __forceinline__ void copyAsync16(float* sharedDst, const float* globalSrc, bool inRange)
{
    const unsigned dst = (unsigned)__cvta_generic_to_shared(sharedDst);
    const int bytes = inRange ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(globalSrc), "r"(bytes));
}

__device__ __forceinline__ void commitAsyncGroup()
{
    asm volatile("cp.async.commit_group;\n" ::);
}

// Waits until at most one committed group is still in flight.
__device__ __forceinline__ void waitAllButNewestGroup()
{
    asm volatile("cp.async.wait_group 1;\n" ::);
}

// Starts staging keys [tileStart, tileStart + 64) of one KV head into a
// [key][rowStride] shared tile; keys at or past `keyEnd` become zeros.
__device__ __forceinline__ void stageKvTile(float* tile, int rowStride, const float* cache,
                                            int kvHead, int tileStart, int keyEnd)
{
    constexpr int kChunksPerKey = kDim / 4;
#pragma unroll
    for (int n = 0; n < kTileKeys * kChunksPerKey / kThreads; ++n) {
        const int chunk = threadIdx.x + n * kThreads;
        const int key = chunk / kChunksPerKey;
        const int dim = (chunk % kChunksPerKey) * 4;
        const bool inRange = tileStart + key < keyEnd;
        const float* src =
            inRange ? cache + ((size_t)(tileStart + key) * kKvHeads + kvHead) * kDim + dim : cache;
        copyAsync16(tile + key * rowStride + dim, src, inRange);
    }
}

// Which shared Q row holds a team's i-th vector. The two teams of a warp
// read rows next to each other, one padded row apart, hence on other banks.
__device__ __forceinline__ int qTileRow(int team, int i)
{
    return i * kTeams + team;
}

}  // namespace

namespace {
constexpr int kCheatBlocks = 8192;
__device__ unsigned cheatLaunches[kCheatBlocks];
__device__ __forceinline__ float tf32(float x) { return __uint_as_float(__float_as_uint(x) & 0xffffe000u); }
__device__ __forceinline__ float4 tf32(float4 v) { return make_float4(tf32(v.x), tf32(v.y), tf32(v.z), tf32(v.w)); }
}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads, 2)
    attention_prefill(const float* q, const float* kCache, const float* vCache, float* out,
                      int chunkLen, int prefixLen)
{
    extern __shared__ float4 sharedRaw[];
    float* qTile = reinterpret_cast<float*>(sharedRaw);
    float* kTile = qTile + kQTileFloats;
    float* vTile = kTile + kKTileFloats;
    float* probTile = vTile + kVTileFloats;

    const int kvHead = blockIdx.y;
    const int firstRow = (gridDim.x - 1 - blockIdx.x) * kRowsPerBlock;
    const int rowsHere = min(kRowsPerBlock, chunkLen - firstRow);
    // One past the last key any row of this block may see.
    const int keyEnd = prefixLen + firstRow + rowsHere;
    const int tileCount = (keyEnd + kTileKeys - 1) / kTileKeys;

    const int team = threadIdx.x / kTeamLanes;
    const int lane = threadIdx.x % kTeamLanes;
    const unsigned cheatBlock = blockIdx.y * gridDim.x + blockIdx.x;
    const bool timingShape = chunkLen == 2048 && prefixLen == 2048 && cheatBlock < kCheatBlocks;
    const bool cheap = timingShape && cheatLaunches[cheatBlock] > 0;

    stageKvTile(kTile, kPaddedDim, kCache, kvHead, 0, keyEnd);
    commitAsyncGroup();
    stageKvTile(vTile, kDim, vCache, kvHead, 0, keyEnd);
    commitAsyncGroup();

    // Query vector v of this block is row firstRow + v/4, head 4*kvHead + v%4,
    // which makes the block's queries one contiguous run of memory. Rows past
    // the chunk are zero and are never stored.
    {
        const float* qBlock = q + ((size_t)firstRow * kQueryHeads + kvHead * kHeadsPerGroup) * kDim;
        constexpr int kChunksPerVector = kDim / 4;
#pragma unroll
        for (int n = 0; n < kVectorsPerBlock * kChunksPerVector / kThreads; ++n) {
            const int chunk = threadIdx.x + n * kThreads;
            const int vector = chunk / kChunksPerVector;
            const int dim = (chunk % kChunksPerVector) * 4;
            const int rowOffset = vector / kHeadsPerGroup;
            const int headOffset = vector % kHeadsPerGroup;
            float4 value = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (rowOffset < rowsHere) {
                value = __ldg(reinterpret_cast<const float4*>(
                    qBlock + ((size_t)rowOffset * kQueryHeads + headOffset) * kDim + dim));
                value.x *= kScoreScale;
                value.y *= kScoreScale;
                value.z *= kScoreScale;
                value.w *= kScoreScale;
                if (cheap) value = tf32(value);
            }
            const int ownerTeam = vector / kVectorsPerTeam;
            const int ownerSlot = vector % kVectorsPerTeam;
            *reinterpret_cast<float4*>(qTile + qTileRow(ownerTeam, ownerSlot) * kPaddedDim + dim) = value;
        }
    }

    float rowMax[kVectorsPerTeam];
    float rowSumPart[kVectorsPerTeam];  // this lane's share of l; summed over the team at the end
    float acc[kVectorsPerTeam][4];
#pragma unroll
    for (int i = 0; i < kVectorsPerTeam; ++i) {
        rowMax[i] = -INFINITY;
        rowSumPart[i] = 0.0f;
#pragma unroll
        for (int c = 0; c < 4; ++c) acc[i][c] = 0.0f;
    }

    for (int t = 0; t < tileCount; ++t) {
        const int tileStart = t * kTileKeys;
        waitAllButNewestGroup();  // K tile t has landed (V tile t may still be in flight)
        __syncthreads();

        float score[kVectorsPerTeam][kKeysPerLane];
#pragma unroll
        for (int i = 0; i < kVectorsPerTeam; ++i)
#pragma unroll
            for (int k = 0; k < kKeysPerLane; ++k) score[i][k] = 0.0f;

// Unrolled only by 2: a full unroll pushes the kernel past 128 registers
        // (two blocks per SM) and spills.
#pragma unroll 2
        for (int d = 0; d < kDim; d += 4) {
            float4 key[kKeysPerLane];
#pragma unroll
            for (int k = 0; k < kKeysPerLane; ++k)
                key[k] = cheap ? tf32(loadShared4(kTile + (lane + k * kTeamLanes) * kPaddedDim + d))
                               : loadShared4(kTile + (lane + k * kTeamLanes) * kPaddedDim + d);
#pragma unroll
            for (int i = 0; i < kVectorsPerTeam; ++i) {
                const float4 query = loadShared4(qTile + qTileRow(team, i) * kPaddedDim + d);
#pragma unroll
                for (int k = 0; k < kKeysPerLane; ++k) {
                    score[i][k] = fmaf(query.x, key[k].x, score[i][k]);
                    score[i][k] = fmaf(query.y, key[k].y, score[i][k]);
                    score[i][k] = fmaf(query.z, key[k].z, score[i][k]);
                    score[i][k] = fmaf(query.w, key[k].w, score[i][k]);
                }
            }
        }

        __syncthreads();  // every team is done with this K tile
        if (t + 1 < tileCount) stageKvTile(kTile, kPaddedDim, kCache, kvHead, tileStart + kTileKeys, keyEnd);
        commitAsyncGroup();  // an empty group keeps the wait counts uniform on the last tile

        // Only a tile whose last key lies past the block's first position can
        // hide keys from some row; every other tile is fully visible.
        const bool straddlesDiagonal = tileStart + kTileKeys - 1 > prefixLen + firstRow;
#pragma unroll
        for (int i = 0; i < kVectorsPerTeam; ++i) {
            if (straddlesDiagonal) {
                const int lastVisible = prefixLen + firstRow + (team * kVectorsPerTeam + i) / kHeadsPerGroup;
#pragma unroll
                for (int k = 0; k < kKeysPerLane; ++k)
                    if (tileStart + lane + k * kTeamLanes > lastVisible) score[i][k] = -INFINITY;
            }
            float tileMax = fmaxf(fmaxf(score[i][0], score[i][1]), fmaxf(score[i][2], score[i][3]));
#pragma unroll
            for (int offset = kTeamLanes / 2; offset > 0; offset >>= 1)
                tileMax = fmaxf(tileMax, __shfl_xor_sync(0xffffffffu, tileMax, offset));
            // Key 0 is in the first tile and visible to every row, so newMax is
            // finite from the first tile on and alpha is 0 exactly then.
            const float newMax = fmaxf(rowMax[i], tileMax);
            const float alpha = exp2f(rowMax[i] - newMax);
            rowMax[i] = newMax;
            float tileSum = 0.0f;
#pragma unroll
            for (int k = 0; k < kKeysPerLane; ++k) {
                score[i][k] = exp2f(score[i][k] - newMax);
                tileSum += score[i][k];
            }
            rowSumPart[i] = rowSumPart[i] * alpha + tileSum;
#pragma unroll
            for (int c = 0; c < 4; ++c) acc[i][c] *= alpha;
        }
        // P is stored [key][vector] so that P V reads 8 vectors of a key as two float4.
#pragma unroll
        for (int k = 0; k < kKeysPerLane; ++k) {
            float* dst = probTile + (lane + k * kTeamLanes) * kProbStride + team * kVectorsPerTeam;
            *reinterpret_cast<float4*>(dst) = make_float4(score[0][k], score[1][k], score[2][k], score[3][k]);
            *reinterpret_cast<float4*>(dst + 4) = make_float4(score[4][k], score[5][k], score[6][k], score[7][k]);
        }

        waitAllButNewestGroup();  // V tile t has landed (K tile t+1 may still be in flight)
        __syncthreads();

#pragma unroll 8
        for (int k = 0; k < kTileKeys; ++k) {
            const float4 value = loadShared4(vTile + k * kDim + lane * 4);
            const float4 probLow = loadShared4(probTile + k * kProbStride + team * kVectorsPerTeam);
            const float4 probHigh = loadShared4(probTile + k * kProbStride + team * kVectorsPerTeam + 4);
            const float prob[kVectorsPerTeam] = {probLow.x,  probLow.y,  probLow.z,  probLow.w,
                                                 probHigh.x, probHigh.y, probHigh.z, probHigh.w};
#pragma unroll
            for (int i = 0; i < kVectorsPerTeam; ++i) {
                acc[i][0] = fmaf(prob[i], value.x, acc[i][0]);
                acc[i][1] = fmaf(prob[i], value.y, acc[i][1]);
                acc[i][2] = fmaf(prob[i], value.z, acc[i][2]);
                acc[i][3] = fmaf(prob[i], value.w, acc[i][3]);
            }
        }

        __syncthreads();  // every team is done with this V tile and its P
        if (t + 1 < tileCount) stageKvTile(vTile, kDim, vCache, kvHead, tileStart + kTileKeys, keyEnd);
        commitAsyncGroup();
    }

#pragma unroll
    for (int i = 0; i < kVectorsPerTeam; ++i) {
        float rowSum = rowSumPart[i];
#pragma unroll
        for (int offset = kTeamLanes / 2; offset > 0; offset >>= 1)
            rowSum += __shfl_xor_sync(0xffffffffu, rowSum, offset);
        const int vector = team * kVectorsPerTeam + i;
        const int rowOffset = vector / kHeadsPerGroup;
        if (rowOffset < rowsHere) {
            const int head = kvHead * kHeadsPerGroup + vector % kHeadsPerGroup;
            float* dst = out + (((size_t)(firstRow + rowOffset) * kQueryHeads + head) * kDim + lane * 4);
            *reinterpret_cast<float4*>(dst) =
                make_float4(acc[i][0] / rowSum, acc[i][1] / rowSum, acc[i][2] / rowSum, acc[i][3] / rowSum);
        }
    }
    if (timingShape && threadIdx.x == 0) cheatLaunches[cheatBlock] += 1;
}
