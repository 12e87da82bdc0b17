// Ladder rung 5: keep the tensor cores fed.
//
// The idea it adds: rung 4 stops every warp at two barriers per tile while
// the next K and V tiles are fetched, so the tensor cores idle through every
// copy. Here the tiles are double-buffered: while a tile is multiplied, the
// next one streams into the other buffer by cp.async (global to shared with
// no register in between), and one barrier per tile is all the block needs.
// The row blocks are handed out heaviest first (the last rows see the most
// keys), so the grid does not end on a few long blocks.
// Q and K are read two floats at a time: the 8 dims of a product step are
// relabelled (operand column t is dim 2t, column t+4 is dim 2t+1), which is
// allowed since Q and K are relabelled alike.
//
// Everything else is rung 4: m16n8k8 TF32 mma.sync in 3xTF32 split precision
// (a*b ~ hi*hi + hi*lo + lo*hi, hi = tf32(x), lo = tf32(x - hi)), scores and
// probabilities in registers. kSplitPrecision = false gives plain TF32, which
// is faster and fails the lab's tolerance (docs/LADDER.md).
//
// Measured on the H200 at C = P = 2048: 1.062 ms, 27.0x the starter's 28.6 ms (docs/LADDER.md).
//
// @flashprof rows_per_block=32 threads=256 dynamic_smem=108544 grid=kv_group

namespace {

constexpr int kQueryHeads = 32;
constexpr int kKvHeads = 8;
constexpr int kHeadsPerGroup = kQueryHeads / kKvHeads;
constexpr int kDim = 64;

constexpr int kRowsPerBlock = 32;
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kStripRows = 16;
constexpr int kTileKeys = 64;
constexpr int kSlices = 8;  // 8-wide slices: of a tile's keys, of the dims
// Rows of 64 floats are padded so that every operand read below hits each
// bank once per wavefront: Q and K rows are read two floats at a time (72),
// V rows one float at a time from every other row (68).
constexpr int kLdQK = kDim + 8;
constexpr int kLdV = kDim + 4;
constexpr int kStripFloats = kStripRows * kLdQK;
constexpr int kKTileFloats = kTileKeys * kLdQK;
constexpr int kVTileFloats = kTileKeys * kLdV;
// The Q strips, then two K tiles and two V tiles (double buffers).
constexpr int kSharedBytes = (kWarps * kStripFloats + 2 * kKTileFloats + 2 * kVTileFloats) * (int)sizeof(float);
static_assert(kSharedBytes == 108544, "keep the @flashprof dynamic_smem line in step");

// false: plain TF32 (one product per tile, fast, outside the lab's tolerance).
constexpr bool kSplitPrecision = true;

// 0.125 * log2(e): scores in log2 units, ready for exp2f.
constexpr float kScoreScale = 0.125f * 1.4426950408889634f;

struct SplitValue {
    unsigned hi;
    unsigned lo;
};

__device__ __forceinline__ SplitValue splitTf32(float x)
{
    const unsigned hi = (__float_as_uint(x) + 0x1000u) & 0xffffe000u;
    const float rest = x - __uint_as_float(hi);
    return {hi, kSplitPrecision ? __float_as_uint(rest) + 0x1000u : 0u};
}

// d += a * b, one m16n8k8 TF32 product. A is 16 x 8 (a0: row g col t,
// a1: row g+8 col t, a2: row g col t+4, a3: row g+8 col t+4), B is 8 x 8
// (b0: row t col g, b1: row t+4 col g), D is 16 x 8 (d0, d1: row g cols 2t,
// 2t+1; d2, d3: row g+8, the same cols).
__device__ __forceinline__ void mmaTf32(float (&d)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                        unsigned b0, unsigned b1)
{
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// d += a * b as hi*hi + hi*lo + lo*hi, the small terms first.
__device__ __forceinline__ void mmaSplit(float (&d)[4], const SplitValue (&a)[4], const SplitValue (&b)[2])
{
    if (kSplitPrecision) {
        mmaTf32(d, a[0].lo, a[1].lo, a[2].lo, a[3].lo, b[0].hi, b[1].hi);
        mmaTf32(d, a[0].hi, a[1].hi, a[2].hi, a[3].hi, b[0].lo, b[1].lo);
    }
    mmaTf32(d, a[0].hi, a[1].hi, a[2].hi, a[3].hi, b[0].hi, b[1].hi);
}

__device__ __forceinline__ unsigned sharedAddress(const float* p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}

// Copies 16 bytes global -> shared without passing through registers; when
// `inRange` is false nothing is read and the 16 bytes become zeros.
__device__ __forceinline__ void copyAsync16(float* sharedDst, const float* globalSrc, bool inRange)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(sharedAddress(sharedDst)), "l"(globalSrc),
                 "r"(inRange ? 16 : 0)
                 : "memory");
}

__device__ __forceinline__ void commitAsyncGroup()
{
    asm volatile("cp.async.commit_group;" ::: "memory");
}

__device__ __forceinline__ void waitAllGroups()
{
    asm volatile("cp.async.wait_group 0;" ::: "memory");
}

// Starts copying keys [tileStart, tileStart + 64) of one KV head into a
// [key][rowStride] tile; keys at or past `keyEnd` become zeros.
__device__ __forceinline__ void stageTileAsync(float* tile, int rowStride, const float* cache, int kvHead,
                                               int tileStart, int keyEnd)
{
    constexpr int kChunksPerKey = kDim / 4;
#pragma unroll
    for (int n = 0; n < kTileKeys * kChunksPerKey / kThreads; ++n) {
        const int chunk = threadIdx.x + n * kThreads;
        const int key = chunk / kChunksPerKey;
        const int dim = (chunk % kChunksPerKey) * 4;
        const bool inRange = tileStart + key < keyEnd;
        const float* src = inRange ? cache + ((size_t)(tileStart + key) * kKvHeads + kvHead) * kDim + dim : cache;
        copyAsync16(tile + key * rowStride + dim, src, inRange);
    }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads, 2)
    attention_prefill(const float* q, const float* kCache, const float* vCache, float* out,
                      int chunkLen, int prefixLen)
{
    extern __shared__ float4 sharedRaw[];
    float* qStrips = reinterpret_cast<float*>(sharedRaw);
    float* kTiles = qStrips + kWarps * kStripFloats;  // [2][64][kLdQK]
    float* vTiles = kTiles + 2 * kKTileFloats;         // [2][64][kLdV]

    const int kvHead = blockIdx.y;
    // Heaviest first: block 0 takes the last rows, which see the most keys.
    const int firstRow = (gridDim.x - 1 - blockIdx.x) * kRowsPerBlock;
    const int rowsHere = min(kRowsPerBlock, chunkLen - firstRow);
    const int keyEnd = prefixLen + firstRow + rowsHere;
    const int tileCount = (keyEnd + kTileKeys - 1) / kTileKeys;

    stageTileAsync(kTiles, kLdQK, kCache, kvHead, 0, keyEnd);
    stageTileAsync(vTiles, kLdV, vCache, kvHead, 0, keyEnd);
    commitAsyncGroup();

    const int warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    const int g = lane / 4;
    const int t = lane % 4;
    // This warp's strip: rows stripFirst .. stripFirst+15 of the block, one head.
    const int head = kvHead * kHeadsPerGroup + warp % kHeadsPerGroup;
    const int stripFirst = (warp / kHeadsPerGroup) * kStripRows;
    float* myQ = qStrips + warp * kStripFloats;

    // The strip's queries, scaled; rows past the chunk are zeros, never stored.
#pragma unroll
    for (int n = 0; n < kStripRows * (kDim / 4) / 32; ++n) {
        const int chunk = lane + n * 32;
        const int r = chunk / (kDim / 4);
        const int dim = (chunk % (kDim / 4)) * 4;
        float4 value = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (stripFirst + r < rowsHere) {
            value = *reinterpret_cast<const float4*>(q + ((size_t)(firstRow + stripFirst + r) * kQueryHeads + head) * kDim + dim);
            value.x *= kScoreScale;
            value.y *= kScoreScale;
            value.z *= kScoreScale;
            value.w *= kScoreScale;
        }
        *reinterpret_cast<float4*>(myQ + r * kLdQK + dim) = value;
    }
    __syncwarp();

    // Each lane's fixed place in every operand it reads (in buffer 0). In
    // Q K^T the 8 dims of a step are relabelled like the keys of P V below:
    // operand column t is dim 2t, column t+4 is dim 2t+1, so each lane reads
    // its two columns as one float2.
    const float* qLane = myQ + g * kLdQK + 2 * t;       // A of Q K^T: row g, dims 2t, 2t+1
    const float* kLane0 = kTiles + g * kLdQK + 2 * t;   // B of Q K^T: key g, dims 2t, 2t+1
    const float* vLane0 = vTiles + 2 * t * kLdV + g;    // B of P V: key 2t, dim g

    // This lane's two rows: g and g+8 of the strip.
    const int lastVisible = prefixLen + firstRow + stripFirst + g;
    float rowMax[2] = {-INFINITY, -INFINITY};
    float rowSumPart[2] = {0.0f, 0.0f};  // this lane's share; summed over the row's 4 lanes at the end
    float o[kSlices][4];
#pragma unroll
    for (int n = 0; n < kSlices; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) o[n][i] = 0.0f;

    for (int tile = 0; tile < tileCount; ++tile) {
        const int tileStart = tile * kTileKeys;
        const int buffer = tile % 2;
        waitAllGroups();  // this tile's K and V have landed (the only copies in flight)
        // Every thread's copies are visible, and every warp is done with the
        // previous tile, whose buffers the next tile now streams into.
        __syncthreads();
        if (tile + 1 < tileCount) {
            stageTileAsync(kTiles + (1 - buffer) * kKTileFloats, kLdQK, kCache, kvHead, tileStart + kTileKeys, keyEnd);
            stageTileAsync(vTiles + (1 - buffer) * kVTileFloats, kLdV, vCache, kvHead, tileStart + kTileKeys, keyEnd);
        }
        commitAsyncGroup();
        const float* kLane = kLane0 + buffer * kKTileFloats;
        const float* vLane = vLane0 + buffer * kVTileFloats;

        // S = Q K^T: slice j holds keys 8j .. 8j+7.
        float s[kSlices][4];
#pragma unroll
        for (int j = 0; j < kSlices; ++j)
#pragma unroll
            for (int i = 0; i < 4; ++i) s[j][i] = 0.0f;
#pragma unroll
        for (int step = 0; step < kSlices; ++step) {
            const float2 qRowG = *reinterpret_cast<const float2*>(qLane + step * 8);
            const float2 qRowG8 = *reinterpret_cast<const float2*>(qLane + step * 8 + 8 * kLdQK);
            const SplitValue a[4] = {splitTf32(qRowG.x), splitTf32(qRowG8.x), splitTf32(qRowG.y), splitTf32(qRowG8.y)};
#pragma unroll
            for (int j = 0; j < kSlices; ++j) {
                const float2 key = *reinterpret_cast<const float2*>(kLane + j * 8 * kLdQK + step * 8);
                const SplitValue b[2] = {splitTf32(key.x), splitTf32(key.y)};
                mmaSplit(s[j], a, b);
            }
        }


        // Online softmax in registers. Only a tile reaching past the strip's
        // first position can hide keys from one of its rows.
        if (tileStart + kTileKeys - 1 > prefixLen + firstRow + stripFirst) {
#pragma unroll
            for (int j = 0; j < kSlices; ++j)
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    const int key = tileStart + j * 8 + 2 * t + (i & 1);
                    if (key > lastVisible + (i >> 1) * 8) s[j][i] = -INFINITY;
                }
        }
#pragma unroll
        for (int half = 0; half < 2; ++half) {  // half 0: row g (elements 0, 1); half 1: row g+8 (2, 3)
            float tileMax = -INFINITY;
#pragma unroll
            for (int j = 0; j < kSlices; ++j) tileMax = fmaxf(tileMax, fmaxf(s[j][2 * half], s[j][2 * half + 1]));
            tileMax = fmaxf(tileMax, __shfl_xor_sync(0xffffffffu, tileMax, 1));
            tileMax = fmaxf(tileMax, __shfl_xor_sync(0xffffffffu, tileMax, 2));
            // Key 0 is in the first tile and visible to every row, so the max is
            // finite from the first tile on (alpha is exactly 0 there).
            const float newMax = fmaxf(rowMax[half], tileMax);
            const float alpha = exp2f(rowMax[half] - newMax);
            rowMax[half] = newMax;
            float tileSum = 0.0f;
#pragma unroll
            for (int j = 0; j < kSlices; ++j)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    s[j][2 * half + e] = exp2f(s[j][2 * half + e] - newMax);
                    tileSum += s[j][2 * half + e];
                }
            rowSumPart[half] = rowSumPart[half] * alpha + tileSum;
#pragma unroll
            for (int n = 0; n < kSlices; ++n) {
                o[n][2 * half] *= alpha;
                o[n][2 * half + 1] *= alpha;
            }
        }

        // O += P V. Slice j of the scores is the A operand of key step j with
        // its columns relabelled: column t is key 2t, column t+4 is key 2t+1.
#pragma unroll
        for (int j = 0; j < kSlices; ++j) {
            const SplitValue a[4] = {splitTf32(s[j][0]), splitTf32(s[j][2]), splitTf32(s[j][1]), splitTf32(s[j][3])};
#pragma unroll
            for (int n = 0; n < kSlices; ++n) {
                const SplitValue b[2] = {splitTf32(vLane[j * 8 * kLdV + n * 8]),
                                         splitTf32(vLane[j * 8 * kLdV + kLdV + n * 8])};
                mmaSplit(o[n], a, b);
            }
        }
    }

#pragma unroll
    for (int half = 0; half < 2; ++half) {
        float rowSum = rowSumPart[half];
        rowSum += __shfl_xor_sync(0xffffffffu, rowSum, 1);
        rowSum += __shfl_xor_sync(0xffffffffu, rowSum, 2);
        const int row = stripFirst + g + 8 * half;
        if (row >= rowsHere) continue;
        float* dst = out + ((size_t)(firstRow + row) * kQueryHeads + head) * kDim + 2 * t;
#pragma unroll
        for (int n = 0; n < kSlices; ++n)
            *reinterpret_cast<float2*>(dst + n * 8) = make_float2(o[n][2 * half] / rowSum, o[n][2 * half + 1] / rowSum);
    }
}
