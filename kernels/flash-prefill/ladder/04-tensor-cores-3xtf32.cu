// Ladder rung 4: tensor cores, in 3xTF32 split precision.
//
// The idea it adds: both products, S = Q K^T and O += P V, go to the tensor
// cores, as m16n8k8 TF32 `mma.sync` tiles. TF32 keeps 10 of fp32's 23
// mantissa bits, which alone misses the lab's fp32 tolerance (docs/LADDER.md),
// so every fp32 operand x is split into hi = tf32(x) and lo = tf32(x - hi),
// and each product is taken as hi*hi + hi*lo + lo*hi: three tensor-core
// products for one, with nearly fp32 accuracy (lo*lo, about 2^-22 of the
// product, is left out). kSplitPrecision = false gives plain TF32.
//
// The split costs two integer operations: tensor cores read only the top 19
// bits of a TF32 operand, so hi is x plus half a TF32 unit with the low 13
// bits cleared, and lo = x - hi, plus half a unit, is rounded by that
// truncation.
//
// Shape of the work. A block owns 32 rows of one KV group (as in rung 3) and
// a warp one strip of 16 query vectors: 16 rows of one head. `mma.sync`
// documents which lane holds which element, so nothing leaves the registers:
//   - lane (g = lane / 4, t = lane % 4) holds the scores of rows g and g+8 for
//     keys 2t and 2t+1 of each 8-key slice; a row's max and sum are two
//     shuffles among its 4 lanes;
//   - those probabilities are already the A operand of P V once the keys of
//     each slice are relabelled (operand column t is key 2t, column t+4 is key
//     2t+1), and V's rows are read in the same order;
//   - every operand is read at a fixed per-lane offset, with no address
//     arithmetic per load.
// (wmma, the C++ face of the same instructions, leaves fragment layouts
// unspecified and so forces a shared-memory round trip for the softmax:
// kernels/flash-prefill/ladder/side/wmma-3xtf32.cu, slower and less accurate, see
// docs/LADDER.md.) K and V tiles are staged as in rungs 1-3: copy, barrier,
// compute.
//
// Measured on the H200 at C = P = 2048: 1.222 ms, 23.4x the starter's 28.6 ms (docs/LADDER.md).
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
        *reinterpret_cast<float4*>(myQ + r * kLd + dim) = value;
    }
    __syncwarp();

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
        __syncthreads();

        // S = Q K^T: slice j holds keys 8j .. 8j+7.
        float s[kSlices][4];
#pragma unroll
        for (int j = 0; j < kSlices; ++j)
#pragma unroll
            for (int i = 0; i < 4; ++i) s[j][i] = 0.0f;
#pragma unroll
        for (int step = 0; step < kSlices; ++step) {
            const SplitValue a[4] = {splitTf32(qLane[step * 8]), splitTf32(qLane[step * 8 + 8 * kLd]),
                                     splitTf32(qLane[step * 8 + 4]), splitTf32(qLane[step * 8 + 8 * kLd + 4])};
#pragma unroll
            for (int j = 0; j < kSlices; ++j) {
                const SplitValue b[2] = {splitTf32(kLane[j * 8 * kLd + step * 8]),
                                         splitTf32(kLane[j * 8 * kLd + step * 8 + 4])};
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
                const SplitValue b[2] = {splitTf32(vLane[j * 8 * kLd + n * 8]),
                                         splitTf32(vLane[j * 8 * kLd + kLd + n * 8])};
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
