// HONEST CONTROL (paged-prefill): the paged reference, with L2 evict_last hints.
//
// What changed: nothing but cache hints. Every K/V staging copy (the 16-byte
// and 4-byte cp.async out of the paged caches and kNew / vNew) and every
// float4 load of Q carries an L2 cache policy "evict_last, fraction 1.0"
// (createpolicy + .L2::cache_hint; the 4-byte block-table, qStart, seqLen and
// ALiBi reads are left plain). The lines marked EVICT-LAST VARIANT are the
// whole difference; arithmetic, tiling, launch geometry and the line that
// declares it (lab key included) are the reference's, byte for byte.
//
// Why it is here: evict_last asks L2 to keep those lines in preference to
// others, so a cold-L2 timing whose flush streams a buffer through L2 with
// normal loads may find this kernel's inputs still resident and time it too
// fast. It is still an honest kernel: every launch computes, from its own
// inputs, the reference's output.
//
// What the honest timing should report: correct, with a time within a few
// percent of kernels/paged-prefill/reference.cu (about 2.95 ms on the H200) and no
// finding against any launch; clearly faster would mean the flush is not
// cold for lines marked evict_last.
//
// Hazard cases: identical to the reference (the hints change where lines
// stay in L2, never what a load returns).
//
// The reference's own description follows.
//
// flashprof's reference solution for the paged-prefill lab: a tiled paged
// prefill in plain fp32 FFMA, with the same ABI as the starter.
//
// Shape of the work. One block owns 32 new tokens of one sequence and one KV
// group (grid=kv_group): 128 query vectors, the 32 rows times the 4 query
// heads that read the same KV head. Each thread owns TWO of them (two query
// heads of one row) over HALF of the head dim, with their scaled queries and
// output accumulators in registers and one softmax state (m, l) per vector.
// The two threads that share a pair of vectors are neighbouring lanes
// (lane ^ 1) and add their partial scores with one shuffle per key and
// vector. Every K and V float4 read from shared memory thus feeds 8 FMAs.
//
// Thread map: half = tid & 1, row = 16 * (warp & 1) + ((tid >> 1) & 15),
// head pair = warp >> 1 (query heads 4g + 2 * pair and 4g + 2 * pair + 1).
// A thread owns the float4 dim chunks of its parity (chunk 2c + half), so the
// two halves of a warp read neighbouring 16-byte words of a K row (different
// banks); the 16 lanes of a half read the same word (a broadcast).
//
// Keys are walked in tiles of 16, aligned to the cache's 16-token blocks, so
// a tile that lies in the cached context is exactly one physical block: one
// block-table lookup, then 16-byte cp.async copies straight out of the paged
// layouts. The x-packed K cache gives each key's dims in float4 runs, staged
// as K[key][dim]; the V cache is [dim][slot], staged as it is, V^T[dim][key]
// (rows padded to 20 floats, again for the banks). The tile that holds the
// context's end, and the tiles of the new tokens, are gathered key by key
// from the cache or from kNew / vNew (4-byte copies for V); keys past the
// sequence's end are zero-filled, so masked keys never bring NaN or garbage
// into P V. One staged tile serves 128 query vectors, and two tile buffers
// let the next tile stream in while the current one is used.
//
// Per tile: 16 scores per vector, the mask (causal and window, the same for
// both heads of a thread) and the ALiBi bias, one online-softmax step (a
// rescale per tile, not per key; a tile with no visible key for the row is
// skipped), then P V. Scores are kept in log2 units (1/8 and log2(e) folded
// into the query, the ALiBi slope times log2(e)), so each probability is one
// exp2f. A block only visits the tiles its rows can see: from the window
// start of its first row to its last row's position. Row blocks are handed
// out from the back of each sequence first (the last rows see the most keys).
//
// Measured on an H200 at the timing shape (scripts/paged-check): 2.97 ms,
// against 3.44 ms for one thread per whole vector
// (scripts/paged-check/candidates/reference-one-vector.cu) and 3.04 ms for
// the same split with 64 rows and 256 threads per block.
//
// @flashprof lab=paged-prefill rows_per_block=32 threads=128 dynamic_smem=0 grid=kv_group

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
constexpr int kKTileFloats = kTileKeys * kDim;
constexpr int kVStride = kTileKeys + 4;  // V^T row: 16 keys + 4 floats of padding
constexpr int kVTileFloats = kDim * kVStride;

static_assert(kThreads == 128, "two threads per (row, head pair) of the block");

// Two blocks per SM: a thread keeps its queries, accumulators and scores in
// registers (255 of them, no spills); at three, ptxas spills heavily.
#ifndef PAGED_REFERENCE_MIN_BLOCKS
#define PAGED_REFERENCE_MIN_BLOCKS 2
#endif

constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ void copyAsync16(float* sharedDst, const float* globalSrc, bool inRange)
{
    const unsigned dst = (unsigned)__cvta_generic_to_shared(sharedDst);
    const int bytes = inRange ? 16 : 0;
    // EVICT-LAST VARIANT: the same copy with an evict_last L2 policy as a cache hint. The
    // policy is made inside the asm: a 64-bit value live across the tile loop would push
    // this kernel past its 255 registers.
    asm volatile("{\n .reg .b64 pol;\n createpolicy.fractional.L2::evict_last.b64 pol, 1.0;\n"
                 " cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, pol;\n}\n" ::"r"(dst),
                 "l"(globalSrc), "r"(bytes));
}

__device__ __forceinline__ void copyAsync4(float* sharedDst, const float* globalSrc, bool inRange)
{
    const unsigned dst = (unsigned)__cvta_generic_to_shared(sharedDst);
    const int bytes = inRange ? 4 : 0;
    // EVICT-LAST VARIANT: as copyAsync16.
    asm volatile("{\n .reg .b64 pol;\n createpolicy.fractional.L2::evict_last.b64 pol, 1.0;\n"
                 " cp.async.ca.shared.global.L2::cache_hint [%0], [%1], 4, %2, pol;\n}\n" ::"r"(dst),
                 "l"(globalSrc), "r"(bytes));
}

// EVICT-LAST VARIANT: __ldg of a float4 (read-only path) with an evict_last L2 policy as a cache hint.
__device__ __forceinline__ float4 loadGlobal4EvictLast(const float4* p)
{
    float4 v;
    asm("{\n .reg .b64 pol;\n createpolicy.fractional.L2::evict_last.b64 pol, 1.0;\n"
        " ld.global.nc.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], pol;\n}\n"
        : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
        : "l"(p));
    return v;
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
        float* dst = vTile + d * kVStride + key0;
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
    __shared__ __align__(16) float kTiles[2][kKTileFloats];
    __shared__ __align__(16) float vTiles[2][kVTileFloats];

    const int s = blockIdx.x;
    if (s >= numSeqs) return;
    const int kvHead = blockIdx.y;
    const int start = qStart[s];
    const int n = qStart[s + 1] - start;
    const int ctx = seqLen[s] - n;
    const int firstT = (gridDim.z - 1 - blockIdx.z) * kRowsPerBlock;
    if (firstT >= n) return;  // uniform over the block: no barrier is skipped by some threads only
    const int lastT = min(firstT + kRowsPerBlock, n) - 1;

    const int half = threadIdx.x & 1;
    const int warp = threadIdx.x / 32;
    const int rowInBlock = 16 * (warp & 1) + ((threadIdx.x >> 1) & 15);
    const int hA = kvHead * kGroup + 2 * (warp >> 1);
    const int hB = hA + 1;
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

    // This thread's dims: float4 chunks 2c + half, c = 0..7.
    constexpr int kHalfChunks = kDim / 8;
    float qa[kDim / 2], qb[kDim / 2];
    {
        const float scale = 0.125f * kLog2e;
        const float4* rowA = reinterpret_cast<const float4*>(q + ((size_t)(start + t) * kQueryHeads + hA) * kDim);
        const float4* rowB = reinterpret_cast<const float4*>(q + ((size_t)(start + t) * kQueryHeads + hB) * kDim);
#pragma unroll
        for (int c = 0; c < kHalfChunks; ++c) {
            const float4 a = loadGlobal4EvictLast(rowA + 2 * c + half);  // EVICT-LAST VARIANT
            const float4 b = loadGlobal4EvictLast(rowB + 2 * c + half);  // EVICT-LAST VARIANT
            qa[4 * c + 0] = a.x * scale;
            qa[4 * c + 1] = a.y * scale;
            qa[4 * c + 2] = a.z * scale;
            qa[4 * c + 3] = a.w * scale;
            qb[4 * c + 0] = b.x * scale;
            qb[4 * c + 1] = b.y * scale;
            qb[4 * c + 2] = b.z * scale;
            qb[4 * c + 3] = b.w * scale;
        }
    }
    const float slopeA = alibiSlopes != nullptr ? alibiSlopes[hA] * kLog2e : 0.0f;
    const float slopeB = alibiSlopes != nullptr ? alibiSlopes[hB] * kLog2e : 0.0f;

    float accA[kDim / 2], accB[kDim / 2];
#pragma unroll
    for (int d = 0; d < kDim / 2; ++d) accA[d] = accB[d] = 0.0f;
    float mA = -INFINITY, lA = 0.0f, mB = -INFINITY, lB = 0.0f;

    for (int tile = tileFirst; tile <= tileLast; ++tile) {
        const int buf = (tile - tileFirst) & 1;
        if (tile < tileLast) stageTile(kTiles[buf ^ 1], vTiles[buf ^ 1], sv, tile + 1);
        commitAsyncGroup();  // an empty group on the last tile keeps the wait count uniform
        waitAllButNewestGroup();
        __syncthreads();

        const float* kTile = kTiles[buf];
        const float* vTile = vTiles[buf];
        const int j0 = tile * kTileKeys;

        float sa[kTileKeys], sb[kTileKeys];
#pragma unroll
        for (int o = 0; o < kTileKeys; ++o) sa[o] = sb[o] = 0.0f;
#pragma unroll
        for (int c = 0; c < kHalfChunks; ++c) {
#pragma unroll
            for (int o = 0; o < kTileKeys; ++o) {
                const float4 k = loadShared4(kTile + o * kDim + 4 * (2 * c + half));
                sa[o] = fmaf(qa[4 * c + 0], k.x, sa[o]);
                sa[o] = fmaf(qa[4 * c + 1], k.y, sa[o]);
                sa[o] = fmaf(qa[4 * c + 2], k.z, sa[o]);
                sa[o] = fmaf(qa[4 * c + 3], k.w, sa[o]);
                sb[o] = fmaf(qb[4 * c + 0], k.x, sb[o]);
                sb[o] = fmaf(qb[4 * c + 1], k.y, sb[o]);
                sb[o] = fmaf(qb[4 * c + 2], k.z, sb[o]);
                sb[o] = fmaf(qb[4 * c + 3], k.w, sb[o]);
            }
        }

        // Both halves end with the full scores; the mask is the same for both heads.
        float maxA = -INFINITY, maxB = -INFINITY;
#pragma unroll
        for (int o = 0; o < kTileKeys; ++o) {
            sa[o] += __shfl_xor_sync(0xffffffffu, sa[o], 1);
            sb[o] += __shfl_xor_sync(0xffffffffu, sb[o], 1);
            const int j = j0 + o;
            const bool visible = j <= i && (!windowed || i - j < slidingWindow);
            sa[o] = visible ? sa[o] + slopeA * (float)(j - i) : -INFINITY;
            sb[o] = visible ? sb[o] + slopeB * (float)(j - i) : -INFINITY;
            maxA = fmaxf(maxA, sa[o]);
            maxB = fmaxf(maxB, sb[o]);
        }

        if (maxA > -INFINITY) {  // then maxB is finite too: same mask
            const float newA = fmaxf(mA, maxA);
            const float newB = fmaxf(mB, maxB);
            const float alphaA = exp2f(mA - newA);  // 0 on the row's first visible tile
            const float alphaB = exp2f(mB - newB);
            float sumA = 0.0f, sumB = 0.0f;
#pragma unroll
            for (int o = 0; o < kTileKeys; ++o) {
                sa[o] = exp2f(sa[o] - newA);
                sb[o] = exp2f(sb[o] - newB);
                sumA += sa[o];
                sumB += sb[o];
            }
            lA = lA * alphaA + sumA;
            lB = lB * alphaB + sumB;
            mA = newA;
            mB = newB;
#pragma unroll
            for (int dd = 0; dd < kDim / 2; ++dd) {
                const int d = 4 * (2 * (dd / 4) + half) + dd % 4;
                const float* vRow = vTile + d * kVStride;
                const float4 v0 = loadShared4(vRow + 0);
                const float4 v1 = loadShared4(vRow + 4);
                const float4 v2 = loadShared4(vRow + 8);
                const float4 v3 = loadShared4(vRow + 12);
                const float vv[kTileKeys] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w,
                                             v2.x, v2.y, v2.z, v2.w, v3.x, v3.y, v3.z, v3.w};
                float a = accA[dd] * alphaA;
                float b = accB[dd] * alphaB;
#pragma unroll
                for (int o = 0; o < kTileKeys; ++o) {
                    a = fmaf(sa[o], vv[o], a);
                    b = fmaf(sb[o], vv[o], b);
                }
                accA[dd] = a;
                accB[dd] = b;
            }
        }
        __syncthreads();  // every thread is done with this buffer before it is restaged
    }

    if (rowValid) {
        const float invA = 1.0f / lA;
        const float invB = 1.0f / lB;
        float4* outA = reinterpret_cast<float4*>(out + ((size_t)(start + t) * kQueryHeads + hA) * kDim);
        float4* outB = reinterpret_cast<float4*>(out + ((size_t)(start + t) * kQueryHeads + hB) * kDim);
#pragma unroll
        for (int c = 0; c < kHalfChunks; ++c) {
            outA[2 * c + half] = make_float4(accA[4 * c] * invA, accA[4 * c + 1] * invA, accA[4 * c + 2] * invA,
                                             accA[4 * c + 3] * invA);
            outB[2 * c + half] = make_float4(accB[4 * c] * invB, accB[4 * c + 1] * invB, accB[4 * c + 2] * invB,
                                             accB[4 * c + 3] * invB);
        }
    }
}
