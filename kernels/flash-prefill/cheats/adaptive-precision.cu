// HONEST CONTROL (flash-prefill): precision that adapts to the data.
//
// What it is: ladder rung 4 (kernels/flash-prefill/ladder/04-tensor-cores-
// 3xtf32.cu), whose two products go to the tensor cores in 3xTF32, with one
// change: a product is taken in plain TF32 (one tensor-core product instead
// of three) where every operand it meets is at most 1 in magnitude and every
// row of the warp's strip sees at least 1024 keys, and in 3xTF32 otherwise.
// A warp looks at its 16 query rows once; the block looks at each K and V
// tile as it lands (each thread at the 16 bytes it copied, then one
// __syncthreads_or). Long rows of uniform draws in [-1, 1) take the cheap
// path, where TF32's rounding (2^-11 of each operand) averages out over the
// keys; a planted 4.0, a head eight times larger, any value past 1, or a row
// of a few keys (no-prefix's first rows: plain TF32 misses them by about 2x
// the allowance) takes the exact one, wherever it lands and whatever the
// launch.
//
// Why it is here: a kernel may spend precision where its data needs it; the
// precision rule (docs/INTEGRITY.md) must not mistake that for a kernel
// that is exact only where it is checked. Here the checked launch and every
// timed launch get the same rule from their own values, so their random
// rows are equally cheap and their planted rows equally exact.
//
// What the honest timing should report: every case passes, rung 4's
// speedup or a little more, no finding, and its timed classes' shares of
// the allowance within a small factor of the checked launch's.
//
// @flashprof rows_per_block=32 threads=256 dynamic_smem=69632 grid=kv_group

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
// Rows of 64 floats padded to 68: every operand read below then hits 32
// different banks across the warp.
constexpr int kLd = kDim + 4;
constexpr int kStripFloats = kStripRows * kLd;
constexpr int kSharedBytes = (kWarps * kStripFloats + 2 * kTileKeys * kLd) * (int)sizeof(float);
static_assert(kSharedBytes == 69632, "keep the @flashprof dynamic_smem line in step");

// Operands at most this large in magnitude take plain TF32 (ADAPTIVE) ...
constexpr float kCheapBound = 1.0f;
// ... in strips whose every row sees at least this many keys.
constexpr int kCheapMinKeys = 1024;

// 0.125 * log2(e): scores in log2 units, ready for exp2f.
constexpr float kScoreScale = 0.125f * 1.4426950408889634f;

struct SplitValue {
    unsigned hi;
    unsigned lo;
};

// `exact` false: plain TF32, no low part (ADAPTIVE).
__device__ __forceinline__ SplitValue splitTf32(float x, bool exact)
{
    const unsigned hi = (__float_as_uint(x) + 0x1000u) & 0xffffe000u;
    const float rest = x - __uint_as_float(hi);
    return {hi, exact ? __float_as_uint(rest) + 0x1000u : 0u};
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

// d += a * b as hi*hi + hi*lo + lo*hi, the small terms first; hi*hi alone
// when not `exact` (ADAPTIVE: the same value for the whole warp).
__device__ __forceinline__ void mmaSplit(float (&d)[4], const SplitValue (&a)[4], const SplitValue (&b)[2],
                                         bool exact)
{
    if (exact) {
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

// Whether any of the 16-byte chunks this thread copied into `tile` (once
// its copies have landed) holds a value past kCheapBound (ADAPTIVE).
__device__ __forceinline__ bool stagedLarge(const float* tile)
{
    constexpr int kChunksPerKey = kDim / 4;
    bool large = false;
#pragma unroll
    for (int n = 0; n < kTileKeys * kChunksPerKey / kThreads; ++n) {
        const int chunk = threadIdx.x + n * kThreads;
        const float4 v = *reinterpret_cast<const float4*>(tile + (chunk / kChunksPerKey) * kLd + (chunk % kChunksPerKey) * 4);
        large |= fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w))) > kCheapBound;
    }
    return large;
}

// Starts copying keys [tileStart, tileStart + 64) of one KV head into a
// [key][kLd] tile; keys at or past `keyEnd` become zeros.
__device__ __forceinline__ void stageTileAsync(float* tile, const float* cache, int kvHead, int tileStart, int keyEnd)
{
    constexpr int kChunksPerKey = kDim / 4;
#pragma unroll
    for (int n = 0; n < kTileKeys * kChunksPerKey / kThreads; ++n) {
        const int chunk = threadIdx.x + n * kThreads;
        const int key = chunk / kChunksPerKey;
        const int dim = (chunk % kChunksPerKey) * 4;
        const bool inRange = tileStart + key < keyEnd;
        const float* src = inRange ? cache + ((size_t)(tileStart + key) * kKvHeads + kvHead) * kDim + dim : cache;
        copyAsync16(tile + key * kLd + dim, src, inRange);
    }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads, 2)
    attention_prefill(const float* q, const float* kCache, const float* vCache, float* out,
                      int chunkLen, int prefixLen)
{
    extern __shared__ float4 sharedRaw[];
    float* qStrips = reinterpret_cast<float*>(sharedRaw);
    float* kTile = qStrips + kWarps * kStripFloats;
    float* vTile = kTile + kTileKeys * kLd;

    const int kvHead = blockIdx.y;
    const int firstRow = blockIdx.x * kRowsPerBlock;
    const int rowsHere = min(kRowsPerBlock, chunkLen - firstRow);
    const int keyEnd = prefixLen + firstRow + rowsHere;
    const int tileCount = (keyEnd + kTileKeys - 1) / kTileKeys;

    const int warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    const int g = lane / 4;
    const int t = lane % 4;
    // This warp's strip: rows stripFirst .. stripFirst+15 of the block, one head.
    const int head = kvHead * kHeadsPerGroup + warp % kHeadsPerGroup;
    const int stripFirst = (warp / kHeadsPerGroup) * kStripRows;
    float* myQ = qStrips + warp * kStripFloats;

    // The strip's queries, scaled; rows past the chunk are zeros, never stored.
    bool qLarge = false;  // ADAPTIVE: any of the strip's queries past kCheapBound
#pragma unroll
    for (int n = 0; n < kStripRows * (kDim / 4) / 32; ++n) {
        const int chunk = lane + n * 32;
        const int r = chunk / (kDim / 4);
        const int dim = (chunk % (kDim / 4)) * 4;
        float4 value = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (stripFirst + r < rowsHere) {
            value = *reinterpret_cast<const float4*>(q + ((size_t)(firstRow + stripFirst + r) * kQueryHeads + head) * kDim + dim);
            qLarge |= fmaxf(fmaxf(fabsf(value.x), fabsf(value.y)), fmaxf(fabsf(value.z), fabsf(value.w))) > kCheapBound;
            value.x *= kScoreScale;
            value.y *= kScoreScale;
            value.z *= kScoreScale;
            value.w *= kScoreScale;
        }
        *reinterpret_cast<float4*>(myQ + r * kLd + dim) = value;
    }
    __syncwarp();
    // The strip's first row sees the fewest keys (ADAPTIVE).
    const bool shortRows = prefixLen + firstRow + stripFirst + 1 < kCheapMinKeys;
    const bool stripExact = __any_sync(0xffffffffu, qLarge) || shortRows;

    // Each lane's fixed place in every operand it reads.
    const float* qLane = myQ + g * kLd + t;     // A of Q K^T: row g, col t
    const float* kLane = kTile + g * kLd + t;   // B of Q K^T: key g, dim t
    const float* vLane = vTile + 2 * t * kLd + g;  // B of P V: key 2t, dim g

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
        __syncthreads();  // every warp is done with the previous tile
        stageTileAsync(kTile, kCache, kvHead, tileStart, keyEnd);
        stageTileAsync(vTile, vCache, kvHead, tileStart, keyEnd);
        commitAsyncGroup();
        waitAllGroups();
        // ADAPTIVE: the barrier that publishes the tiles also says whether
        // any thread copied a large value.
        const bool tileLarge = __syncthreads_or(stagedLarge(kTile) || stagedLarge(vTile));
        const bool exact = stripExact || tileLarge;

        // S = Q K^T: slice j holds keys 8j .. 8j+7.
        float s[kSlices][4];
#pragma unroll
        for (int j = 0; j < kSlices; ++j)
#pragma unroll
            for (int i = 0; i < 4; ++i) s[j][i] = 0.0f;
#pragma unroll
        for (int step = 0; step < kSlices; ++step) {
            const SplitValue a[4] = {splitTf32(qLane[step * 8], exact), splitTf32(qLane[step * 8 + 8 * kLd], exact),
                                     splitTf32(qLane[step * 8 + 4], exact),
                                     splitTf32(qLane[step * 8 + 8 * kLd + 4], exact)};
#pragma unroll
            for (int j = 0; j < kSlices; ++j) {
                const SplitValue b[2] = {splitTf32(kLane[j * 8 * kLd + step * 8], exact),
                                         splitTf32(kLane[j * 8 * kLd + step * 8 + 4], exact)};
                mmaSplit(s[j], a, b, exact);
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
            const SplitValue a[4] = {splitTf32(s[j][0], exact), splitTf32(s[j][2], exact), splitTf32(s[j][1], exact),
                                     splitTf32(s[j][3], exact)};
#pragma unroll
            for (int n = 0; n < kSlices; ++n) {
                const SplitValue b[2] = {splitTf32(vLane[j * 8 * kLd + n * 8], exact),
                                         splitTf32(vLane[j * 8 * kLd + kLd + n * 8], exact)};
                mmaSplit(o[n], a, b, exact);
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
