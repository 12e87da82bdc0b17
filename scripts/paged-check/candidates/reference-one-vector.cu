// An earlier reference for the paged-prefill lab, kept as a candidate that
// scripts/paged-check checks and times beside kernels/paged/reference.cu:
// a tiled paged prefill in plain fp32 FFMA, same ABI and geometry.
//
// Shape of the work. One block owns 32 new tokens of one sequence and one KV
// group (grid=kv_group): 128 query vectors, the 32 rows times the 4 query
// heads that read the same KV head, one per thread (warp w serves query head
// 4g + w, lane r serves row r of the block). Each thread keeps its scaled
// query (64 floats) and its output accumulator (64 floats) in registers, with
// its own softmax state (m, l).
//
// Keys are walked in tiles of 16, aligned to the cache's 16-token blocks, so
// a tile that lies in the cached context is exactly one physical block: one
// block-table lookup, then 16-byte cp.async copies straight out of the paged
// layouts. The x-packed K cache gives each key's dims in float4 runs, staged
// as K[key][dim]; the V cache is [dim][slot], staged as it is, V^T[dim][key].
// The tile that holds the context's end, and the tiles of the new tokens, are
// gathered key by key from the cache or from kNew / vNew (4-byte copies for
// V); keys past the sequence's end are zero-filled, so masked keys never
// bring NaN or garbage into P V. Every thread of the block reads the same
// K/V element at the same time (shared-memory broadcast, no bank conflicts),
// and one staged tile serves 128 query vectors. Two tile buffers let the next
// tile stream in while the current one is used.
//
// Per tile and per thread: 16 scores (16 independent FMA chains), the mask
// (causal and window) and the ALiBi bias, one online-softmax step (a rescale
// per tile, not per key; a tile with no visible key for the row is skipped),
// then P V. Scores are kept in log2 units (1/8 and log2(e) folded into the
// query, the ALiBi slope times log2(e)), so each probability is one exp2f.
// A block only visits the tiles its rows can see: from the window start of
// its first row to its last row's position.
//
// Row blocks are handed out from the back of each sequence first (the last
// rows see the most keys), which evens out the tail of the grid.
//
// @flashprof rows_per_block=32 threads=128 dynamic_smem=0 grid=kv_group

namespace {

constexpr int kQueryHeads = 32;
constexpr int kKvHeads = 8;
constexpr int kGroup = kQueryHeads / kKvHeads;
constexpr int kDim = 64;
constexpr int kBlockTokens = 16;  // B
constexpr int kPack = 4;          // X
constexpr int kRowsPerBlock = 32;
constexpr int kThreads = kRowsPerBlock * kGroup;
constexpr int kTileKeys = kBlockTokens;
constexpr int kTileFloats = kTileKeys * kDim;

static_assert(kThreads == 128, "one thread per (row, head) of the block");

// Blocks per SM the register budget is cut for. At 2 a thread keeps its
// query, accumulator and scores in registers (about 254 of them, no spills).
// At 3 ptxas caps it at 168 and spills about 100 bytes inside the tile loop;
// measured on an H200 at the timing shape: 3.45 ms at 2, 6.09 ms at 3.
#ifndef PAGED_REFERENCE_MIN_BLOCKS
#define PAGED_REFERENCE_MIN_BLOCKS 2
#endif

constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ void copyAsync16(float* sharedDst, const float* globalSrc, bool inRange)
{
    const unsigned dst = (unsigned)__cvta_generic_to_shared(sharedDst);
    const int bytes = inRange ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(globalSrc), "r"(bytes));
}

__device__ __forceinline__ void copyAsync4(float* sharedDst, const float* globalSrc, bool inRange)
{
    const unsigned dst = (unsigned)__cvta_generic_to_shared(sharedDst);
    const int bytes = inRange ? 4 : 0;
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(globalSrc), "r"(bytes));
}

__device__ __forceinline__ void commitAsyncGroup()
{
    asm volatile("cp.async.commit_group;\n" ::);
}

__device__ __forceinline__ void waitAllButNewestGroup()
{
    asm volatile("cp.async.wait_group 1;\n" ::);
}

__device__ __forceinline__ float4 loadShared4(const float* p)
{
    return *reinterpret_cast<const float4*>(p);
}

// What a block needs to find the keys of its sequence.
struct SeqView {
    const float* kNew;
    const float* vNew;
    const float* kCache;
    const float* vCache;
    const int* tableRow;  // this sequence's block table
    int start;            // first row of the sequence in q / kNew / vNew / out
    int ctx;              // cached context length
    int seqEnd;           // ctx + new tokens
    int kvHead;
};

// Starts staging keys 16t .. 16t+15 into K[key][dim] and V^T[dim][key].
__device__ __forceinline__ void stageTile(float* kTile, float* vTile, const SeqView& sv, int t)
{
    const int j0 = t * kTileKeys;
    // A tile aligned to B that starts inside the context is one cache block.
    const size_t block = j0 < sv.ctx ? (size_t)sv.tableRow[t] : 0;
    const size_t kBlockBase = (block * kKvHeads + sv.kvHead) * (kDim / kPack);
    const size_t vBlockBase = (block * kKvHeads + sv.kvHead) * kDim;

    // K: 16 keys x 16 float4 chunks.
#pragma unroll
    for (int n = 0; n < kTileKeys * (kDim / 4) / kThreads; ++n) {
        const int c = threadIdx.x + n * kThreads;
        const int key = c / (kDim / 4);
        const int chunk = c % (kDim / 4);
        const int j = j0 + key;
        float* dst = kTile + key * kDim + chunk * 4;
        if (j < sv.ctx) {
            copyAsync16(dst, sv.kCache + ((kBlockBase + chunk) * kBlockTokens + key) * kPack, true);
        } else {
            const bool isNew = j < sv.seqEnd;
            const float* src = isNew ? sv.kNew + ((size_t)(sv.start + j - sv.ctx) * kKvHeads + sv.kvHead) * kDim + chunk * 4
                                     : sv.kNew;
            copyAsync16(dst, src, isNew);
        }
    }
    // V^T: 64 dims x 4 runs of 4 keys.
#pragma unroll
    for (int n = 0; n < kDim * (kTileKeys / 4) / kThreads; ++n) {
        const int c = threadIdx.x + n * kThreads;
        const int d = c / (kTileKeys / 4);
        const int key0 = (c % (kTileKeys / 4)) * 4;
        const int j = j0 + key0;
        float* dst = vTile + d * kTileKeys + key0;
        if (j + 3 < sv.ctx) {
            copyAsync16(dst, sv.vCache + (vBlockBase + d) * kBlockTokens + key0, true);
        } else {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int jj = j + e;
                if (jj < sv.ctx) {
                    copyAsync4(dst + e, sv.vCache + (vBlockBase + d) * kBlockTokens + key0 + e, true);
                } else {
                    const bool isNew = jj < sv.seqEnd;
                    const float* src = isNew ? sv.vNew + ((size_t)(sv.start + jj - sv.ctx) * kKvHeads + sv.kvHead) * kDim + d
                                             : sv.vNew;
                    copyAsync4(dst + e, src, isNew);
                }
            }
        }
    }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads, PAGED_REFERENCE_MIN_BLOCKS)
    paged_prefill(const float* q, const float* kNew, const float* vNew, const float* kCache,
                  const float* vCache, const int* blockTable, const int* qStart, const int* seqLen,
                  int numSeqs, int maxBlocksPerSeq, int slidingWindow, const float* alibiSlopes,
                  float* out)
{
    __shared__ __align__(16) float kTiles[2][kTileFloats];
    __shared__ __align__(16) float vTiles[2][kTileFloats];

    const int s = blockIdx.x;
    if (s >= numSeqs) return;
    const int kvHead = blockIdx.y;
    const int start = qStart[s];
    const int n = qStart[s + 1] - start;
    const int ctx = seqLen[s] - n;
    const int firstT = (gridDim.z - 1 - blockIdx.z) * kRowsPerBlock;
    if (firstT >= n) return;  // uniform over the block: no barrier is skipped by some threads only
    const int lastT = min(firstT + kRowsPerBlock, n) - 1;

    const int headInGroup = threadIdx.x / 32;
    const int h = kvHead * kGroup + headInGroup;
    const int rowInBlock = threadIdx.x % 32;
    const int tRow = firstT + rowInBlock;
    const bool rowValid = tRow <= lastT;
    // A thread past the sequence's end runs the last row again and stores nothing.
    const int t = rowValid ? tRow : lastT;
    const int i = ctx + t;
    const bool windowed = slidingWindow > 0;

    const int iLo = ctx + firstT;
    const int iHi = ctx + lastT;
    const int jLo = windowed ? max(0, iLo - slidingWindow + 1) : 0;
    const int tileFirst = jLo / kTileKeys;
    const int tileLast = iHi / kTileKeys;

    SeqView sv;
    sv.kNew = kNew;
    sv.vNew = vNew;
    sv.kCache = kCache;
    sv.vCache = vCache;
    sv.tableRow = blockTable + (size_t)s * maxBlocksPerSeq;
    sv.start = start;
    sv.ctx = ctx;
    sv.seqEnd = ctx + n;
    sv.kvHead = kvHead;

    stageTile(kTiles[0], vTiles[0], sv, tileFirst);
    commitAsyncGroup();

    float qr[kDim];
    {
        const float scale = 0.125f * kLog2e;
        const float4* qRow = reinterpret_cast<const float4*>(q + ((size_t)(start + t) * kQueryHeads + h) * kDim);
#pragma unroll
        for (int c = 0; c < kDim / 4; ++c) {
            const float4 v = __ldg(qRow + c);
            qr[4 * c + 0] = v.x * scale;
            qr[4 * c + 1] = v.y * scale;
            qr[4 * c + 2] = v.z * scale;
            qr[4 * c + 3] = v.w * scale;
        }
    }
    const float slopeLog2 = alibiSlopes != nullptr ? alibiSlopes[h] * kLog2e : 0.0f;

    float acc[kDim];
#pragma unroll
    for (int d = 0; d < kDim; ++d) acc[d] = 0.0f;
    float m = -INFINITY, l = 0.0f;

    for (int tile = tileFirst; tile <= tileLast; ++tile) {
        const int buf = (tile - tileFirst) & 1;
        if (tile < tileLast) stageTile(kTiles[buf ^ 1], vTiles[buf ^ 1], sv, tile + 1);
        commitAsyncGroup();  // an empty group on the last tile keeps the wait count uniform
        waitAllButNewestGroup();
        __syncthreads();

        const float* kTile = kTiles[buf];
        const float* vTile = vTiles[buf];
        const int j0 = tile * kTileKeys;

        float sc[kTileKeys];
#pragma unroll
        for (int o = 0; o < kTileKeys; ++o) sc[o] = 0.0f;
#pragma unroll
        for (int c = 0; c < kDim / 4; ++c) {
#pragma unroll
            for (int o = 0; o < kTileKeys; ++o) {
                const float4 k = loadShared4(kTile + o * kDim + 4 * c);
                sc[o] = fmaf(qr[4 * c + 0], k.x, sc[o]);
                sc[o] = fmaf(qr[4 * c + 1], k.y, sc[o]);
                sc[o] = fmaf(qr[4 * c + 2], k.z, sc[o]);
                sc[o] = fmaf(qr[4 * c + 3], k.w, sc[o]);
            }
        }

        float tileMax = -INFINITY;
#pragma unroll
        for (int o = 0; o < kTileKeys; ++o) {
            const int j = j0 + o;
            const bool visible = j <= i && (!windowed || i - j < slidingWindow);
            const float biased = sc[o] + slopeLog2 * (float)(j - i);
            sc[o] = visible ? biased : -INFINITY;
            tileMax = fmaxf(tileMax, sc[o]);
        }

        if (tileMax > -INFINITY) {
            const float mNew = fmaxf(m, tileMax);
            const float alpha = exp2f(m - mNew);  // 0 on the row's first visible tile
            float tileSum = 0.0f;
#pragma unroll
            for (int o = 0; o < kTileKeys; ++o) {
                sc[o] = exp2f(sc[o] - mNew);
                tileSum += sc[o];
            }
            l = l * alpha + tileSum;
            m = mNew;
#pragma unroll
            for (int d = 0; d < kDim; ++d) {
                const float4 v0 = loadShared4(vTile + d * kTileKeys + 0);
                const float4 v1 = loadShared4(vTile + d * kTileKeys + 4);
                const float4 v2 = loadShared4(vTile + d * kTileKeys + 8);
                const float4 v3 = loadShared4(vTile + d * kTileKeys + 12);
                float a = acc[d] * alpha;
                a = fmaf(sc[0], v0.x, a);
                a = fmaf(sc[1], v0.y, a);
                a = fmaf(sc[2], v0.z, a);
                a = fmaf(sc[3], v0.w, a);
                a = fmaf(sc[4], v1.x, a);
                a = fmaf(sc[5], v1.y, a);
                a = fmaf(sc[6], v1.z, a);
                a = fmaf(sc[7], v1.w, a);
                a = fmaf(sc[8], v2.x, a);
                a = fmaf(sc[9], v2.y, a);
                a = fmaf(sc[10], v2.z, a);
                a = fmaf(sc[11], v2.w, a);
                a = fmaf(sc[12], v3.x, a);
                a = fmaf(sc[13], v3.y, a);
                a = fmaf(sc[14], v3.z, a);
                a = fmaf(sc[15], v3.w, a);
                acc[d] = a;
            }
        }
        __syncthreads();  // every thread is done with this buffer before it is restaged
    }

    if (rowValid) {
        const float inv = 1.0f / l;
        float4* outRow = reinterpret_cast<float4*>(out + ((size_t)(start + t) * kQueryHeads + h) * kDim);
#pragma unroll
        for (int c = 0; c < kDim / 4; ++c)
            outRow[c] = make_float4(acc[4 * c] * inv, acc[4 * c + 1] * inv, acc[4 * c + 2] * inv, acc[4 * c + 3] * inv);
    }
}
