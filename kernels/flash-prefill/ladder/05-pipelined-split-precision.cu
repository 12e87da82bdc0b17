// Ladder rung 5: keep the tensor cores fed, and pay for precision only where
// it is needed.
//
// The first idea it adds: rung 4 stops every warp at two barriers per tile
// while the next K and V tiles are fetched, so the tensor cores idle through
// every copy. Here the tiles are double-buffered: while a tile is multiplied,
// the next one streams into the other buffer by cp.async (global to shared
// with no register in between), and one barrier per tile is all the block
// needs. The row blocks are handed out heaviest first (the last rows see the
// most keys), so the grid does not end on a few long blocks. Q and K are read
// two floats at a time: the 8 dims of a product step are relabelled (operand
// column t is dim 2t, column t+4 is dim 2t+1), which is allowed since Q and K
// are relabelled alike.
//
// The second: the split costs less. Tensor cores read only the top 19 bits of
// a TF32 operand, so x itself is its own high part (no rounding, no masking
// for the hardware to undo) and the rest is x minus x with its low 13 bits
// cleared: two instructions a value instead of four. And the two products
// need different precision. An error in Q K^T is multiplied by exp2 (scores
// reach ~100 in log2 units on large inputs), so it keeps three TF32 products.
// In P V the probabilities lie in [0, 1] and nothing amplifies an error, so
// its two small cross terms go into one BF16 product (twice the TF32 rate,
// bf16's 8 bits being plenty for terms 2^-11 of the result), next to one TF32
// product of the high parts: 1.5 products' worth of tensor time instead of 3.
// (BF16 cross terms in Q K^T too were 0.83 ms but failed large-values-other-
// heads at 2-2.5x the allowance; docs/LADDER.md.)
//
// Everything else is rung 4: m16n8k8 mma.sync, scores and probabilities in
// registers. kSplitPrecision = false gives plain TF32, which is faster and
// fails the lab's tolerance (docs/LADDER.md).
//
// Measured on the H200 at C = P = 2048: 0.904 ms, 31.2x the starter (docs/LADDER.md).
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

// false: plain TF32 (one product per step, fast, outside the lab's tolerance).
constexpr bool kSplitPrecision = true;

// 0.125 * log2(e): scores in log2 units, ready for exp2.
constexpr float kScoreScale = 0.125f * 1.4426950408889634f;

// x with its low 13 bits cleared: the TF32 value the tensor cores read from
// x's register. x - tf32Truncated(x) is exact, the rest of the split.
__device__ __forceinline__ float tf32Truncated(float x)
{
    return __uint_as_float(__float_as_uint(x) & 0xffffe000u);
}

// Two floats as one register of two bf16 (round to nearest), `low` in the low half.
__device__ __forceinline__ unsigned packBf16(float low, float high)
{
    unsigned packed;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(high), "f"(low));
    return packed;
}

// d += a * b, one m16n8k8 TF32 product from raw fp32 registers (the tensor
// cores read the top 19 bits). A is 16 x 8 (a0: row g col t, a1: row g+8
// col t, a2: row g col t+4, a3: row g+8 col t+4), B is 8 x 8 (b0: row t
// col g, b1: row t+4 col g), D is 16 x 8 (d0, d1: row g cols 2t, 2t+1; d2,
// d3: row g+8, the same cols).
__device__ __forceinline__ void mmaTf32(float (&d)[4], float a0, float a1, float a2, float a3, float b0, float b1)
{
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(__float_as_uint(a0)), "r"(__float_as_uint(a1)), "r"(__float_as_uint(a2)), "r"(__float_as_uint(a3)),
          "r"(__float_as_uint(b0)), "r"(__float_as_uint(b1)));
}

// d += a * b, one m16n8k16 BF16 product: A registers hold (row g, k 2t and
// 2t+1), (row g+8, the same), (row g, k 2t+8 and 2t+9), (row g+8, the same);
// B registers hold (k 2t and 2t+1, col g), (k 2t+8 and 2t+9, col g).
__device__ __forceinline__ void mmaBf16(float (&d)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                        unsigned b0, unsigned b1)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// P V's A operand for one 8-key step, split. With a = ta + la and b = tb + lb
// (t: TF32-truncated, l: the rest), a*b = ta*tb + (ta*lb + la*b): ta*tb on
// the TF32 pipe, the two smaller terms in one BF16 product whose 16-deep k
// holds [ta(u), ta(w)] x [lb(u), lb(w)], then [la(u), la(w)] x [b(u), b(w)]
// (u, w: the lane's two columns of A, its k t and t+4; the rows of B alike).
struct SplitOperand {
    float raw[4];      // a0..a3 as the TF32 product reads them
    unsigned bf16[4];  // the BF16 product's A registers
};

// The operand from the lane's values: rows g and g+8, columns u (k t) and w (k t+4).
__device__ __forceinline__ SplitOperand splitOperand(float gU, float g8U, float gW, float g8W)
{
    SplitOperand a;
    a.raw[0] = gU;
    a.raw[1] = g8U;
    a.raw[2] = gW;
    a.raw[3] = g8W;
    const float tGU = tf32Truncated(gU), tG8U = tf32Truncated(g8U);
    const float tGW = tf32Truncated(gW), tG8W = tf32Truncated(g8W);
    a.bf16[0] = packBf16(tGU, tGW);
    a.bf16[1] = packBf16(tG8U, tG8W);
    a.bf16[2] = packBf16(gU - tGU, gW - tGW);
    a.bf16[3] = packBf16(g8U - tG8U, g8W - tG8W);
    return a;
}

// Q K^T's product, three TF32 products: d += la*b + a*lb + a*b (the tensor
// cores truncate a and b to ta and tb themselves), small terms first.
__device__ __forceinline__ void mmaThreeTf32(float (&d)[4], const float (&a)[4], float bU, float bW)
{
    if (kSplitPrecision) {
        mmaTf32(d, a[0] - tf32Truncated(a[0]), a[1] - tf32Truncated(a[1]), a[2] - tf32Truncated(a[2]),
                a[3] - tf32Truncated(a[3]), bU, bW);
        mmaTf32(d, a[0], a[1], a[2], a[3], bU - tf32Truncated(bU), bW - tf32Truncated(bW));
    }
    mmaTf32(d, a[0], a[1], a[2], a[3], bU, bW);
}

// P V's product: d += a * b for B's rows u (b0) and w (b1) of column g, as
// one BF16 product of the cross terms and one TF32 product.
__device__ __forceinline__ void mmaTf32WithBf16Cross(float (&d)[4], const SplitOperand& a, float bU, float bW)
{
    if (kSplitPrecision) {
        const unsigned restB = packBf16(bU - tf32Truncated(bU), bW - tf32Truncated(bW));
        mmaBf16(d, a.bf16[0], a.bf16[1], a.bf16[2], a.bf16[3], restB, packBf16(bU, bW));
    }
    mmaTf32(d, a.raw[0], a.raw[1], a.raw[2], a.raw[3], bU, bW);
}

// 2^x as one MUFU instruction, subnormal results flushed to zero (exp2f adds
// a rescale around it for them; a probability under 2^-126 adds nothing here).
__device__ __forceinline__ float fastExp2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
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
            const float a[4] = {qRowG.x, qRowG8.x, qRowG.y, qRowG8.y};
#pragma unroll
            for (int j = 0; j < kSlices; ++j) {
                const float2 key = *reinterpret_cast<const float2*>(kLane + j * 8 * kLdQK + step * 8);
                mmaThreeTf32(s[j], a, key.x, key.y);
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
            const float alpha = fastExp2(rowMax[half] - newMax);
            rowMax[half] = newMax;
            float tileSum = 0.0f;
#pragma unroll
            for (int j = 0; j < kSlices; ++j)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    s[j][2 * half + e] = fastExp2(s[j][2 * half + e] - newMax);
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
            const SplitOperand a = splitOperand(s[j][0], s[j][2], s[j][1], s[j][3]);
#pragma unroll
            for (int n = 0; n < kSlices; ++n) {
                mmaTf32WithBf16Cross(o[n], a, vLane[j * 8 * kLdV + n * 8], vLane[j * 8 * kLdV + kLdV + n * 8]);
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
