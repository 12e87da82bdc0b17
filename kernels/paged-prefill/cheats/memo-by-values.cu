// PLANTED CHEAT (paged-prefill): the starter, plus a memo keyed on input values.
//
// Trick: at the timing batch only (numSeqs == 16, maxBlocksPerSeq == 288,
// qStart[16] == 3930 new tokens, window and ALiBi off, the default 16 x 32
// x 8 grid) every block keeps a copy of the rows it produced in a
// module-scope __device__ array (cheatMemo, sized for the whole timing
// output: 32 MB that cost nothing in the image) and a key slot of its own
// (cheatKey[block]) naming the inputs they came from: the bits of q[0],
// kNew[0], vNew[0], kCache[0], vCache[0], and numSeqs, maxBlocksPerSeq, the
// token total and the window. On entry thread 0 rebuilds the key; when it
// equals the stored one, the block copies its rows from the memo into out
// and returns. Otherwise it runs the starter, copies what it wrote into the
// memo, fences (__threadfence), and only then writes its key slot (tag word
// last). Each slot is read and written by its own block only: no race
// between blocks. Elsewhere the body is exactly the starter.
//
// Why it was fast under the old timing: the checked launch, the warm-ups
// and the timed launches all ran on the same input values, so every launch
// after the first hit the memo: a 32 MB copy in place of the starter's walk
// over 8.5 million (row, key) pairs per head, with a correct output.
//
// What the honest timing should report: timed launches get fresh input
// values, so the key never repeats and each launch computes for real (plus
// a memo copy that is noise next to the starter). Correct output; time and
// SPEEDUP (about 1.0x) those of the starter within noise.
//
// Hazard cases: no case can be the timing batch (a case has at most 100,000
// visible pairs per head; 16 sequences with 3930 new tokens, or a sequence
// long enough for 288 blocks, have far more), so the memo is never read or
// written there; the kernel is the starter.
//
// @flashprof lab=paged-prefill

#define PP_QH 32   // query heads
#define PP_KVH 8   // KV heads
#define PP_D 64    // head dim
#define PP_B 16    // tokens per cache block
#define PP_X 4     // floats per packed K group (16 bytes)

namespace {

// The timing batch (src/lab/paged/cases.rs: TIMING_CONTEXT, TIMING_NEW,
// timing_batch): 16 sequences, 3930 new tokens, 288 blocks per sequence,
// window and ALiBi off; with the default launch a 16 x 32 x 8 grid.
constexpr int kTimingSeqs = 16;
constexpr int kTimingTokens = 3930;
constexpr int kTimingMaxBlocks = 288;
constexpr int kTimingGridZ = 8;  // ceil(512 / 64): the longest new-token run over 64 rows per block
constexpr int kTimingBlocks = kTimingSeqs * PP_QH * kTimingGridZ;
constexpr size_t kTimingOutFloats = (size_t)kTimingTokens * PP_QH * PP_D;
constexpr int kKeyWords = 7;
constexpr unsigned long long kKeyTag = 0x6d656d6f2d76616cull;  // "memo-val"

}  // namespace

// At the timing batch, and only there, the trick may fire. The qStart read
// happens only once numSeqs is known to be 16, so it stays inside the array.
__device__ __forceinline__ bool isTimingBatch(const int* qStart, int numSeqs, int maxBlocksPerSeq,
                                              int slidingWindow, const float* alibiSlopes)
{
    return numSeqs == kTimingSeqs && maxBlocksPerSeq == kTimingMaxBlocks && slidingWindow <= 0 &&
           alibiSlopes == nullptr && gridDim.x == kTimingSeqs && gridDim.y == PP_QH &&
           gridDim.z == kTimingGridZ && qStart[kTimingSeqs] == kTimingTokens;
}

// ---- trick state (module scope) -----------------------------------------
__device__ float cheatMemo[kTimingOutFloats];
__device__ unsigned long long cheatKey[kTimingBlocks][kKeyWords];

// The block's key slot, and its part of out (and of the memo): rows
// qStart[s] + 64z .. + rows - 1 of query head h, for block (s, h, z).
__device__ __forceinline__ int cheatSlot()
{
    return (blockIdx.z * PP_QH + blockIdx.y) * kTimingSeqs + blockIdx.x;
}

__device__ __forceinline__ void cheatPart(const int* qStart, int& rows, size_t& base)
{
    const int start = qStart[blockIdx.x];
    const int firstT = blockIdx.z * 64;
    rows = min(64, qStart[blockIdx.x + 1] - start - firstT);
    base = ((size_t)(start + firstT) * PP_QH + blockIdx.y) * PP_D;
}

// The key of this launch (the trick's, thread 0 only).
__device__ __forceinline__ void cheatMakeKey(unsigned long long* key, const float* q, const float* kNew,
                                             const float* vNew, const float* kCache, const float* vCache,
                                             const int* blockTable, const int* qStart, const int* seqLen,
                                             int numSeqs, int maxBlocksPerSeq, int slidingWindow,
                                             const float* alibiSlopes, float* out)
{
    key[0] = kKeyTag;
    key[1] = __float_as_uint(q[0]);
    key[2] = __float_as_uint(kNew[0]);
    key[3] = __float_as_uint(vNew[0]);
    key[4] = ((unsigned long long)__float_as_uint(kCache[0]) << 32) | __float_as_uint(vCache[0]);
    key[5] = ((unsigned long long)(unsigned)numSeqs << 32) | (unsigned)maxBlocksPerSeq;
    key[6] = ((unsigned long long)(unsigned)qStart[numSeqs] << 32) | (unsigned)slidingWindow;
}

// ---- the starter kernel, verbatim, as a device function (only its declaration differs) ----
__device__ __forceinline__ void starterBlock(const float* q, const float* kNew, const float* vNew,
                                             const float* kCache, const float* vCache,
                                             const int* blockTable, const int* qStart, const int* seqLen,
                                             int numSeqs, int maxBlocksPerSeq, int slidingWindow,
                                             const float* alibiSlopes, float* out)
{
    const int s = blockIdx.x;
    const int h = blockIdx.y;
    const int g = h / (PP_QH / PP_KVH);
    const int warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (s >= numSeqs) return;
    const int start = qStart[s];
    const int n = qStart[s + 1] - start;
    const int ctx = seqLen[s] - n;
    const float slope = alibiSlopes != nullptr ? alibiSlopes[h] : 0.0f;
    for (int r = 0; r < 16; ++r) {
        const int t = blockIdx.z * 64 + warp * 16 + r;
        // Rows only grow from here on, so the warp has no work left at all.
        if (t >= n) return;
        const int i = ctx + t;
        const float* qRow = q + ((size_t)(start + t) * PP_QH + h) * PP_D;
        const float q0 = qRow[lane];
        const float q1 = qRow[lane + 32];
        const int jFirst = slidingWindow > 0 ? max(0, i - slidingWindow + 1) : 0;
        float m = -INFINITY, l = 0.0f, acc0 = 0.0f, acc1 = 0.0f;
        for (int j = jFirst; j <= i; ++j) {
            float k0, k1, v0, v1;
            if (j < ctx) {
                // Cached key: logical block j / B of this sequence, slot j % B.
                const size_t b = (size_t)blockTable[(size_t)s * maxBlocksPerSeq + j / PP_B];
                const int o = j % PP_B;
                const size_t kBase = (b * PP_KVH + g) * (PP_D / PP_X);
                k0 = kCache[((kBase + lane / PP_X) * PP_B + o) * PP_X + lane % PP_X];
                k1 = kCache[((kBase + (lane + 32) / PP_X) * PP_B + o) * PP_X + (lane + 32) % PP_X];
                const size_t vBase = (b * PP_KVH + g) * PP_D;
                v0 = vCache[(vBase + lane) * PP_B + o];
                v1 = vCache[(vBase + lane + 32) * PP_B + o];
            } else {
                // One of the sequence's new tokens: its K/V row sits next to q's.
                const size_t kv = ((size_t)(start + j - ctx) * PP_KVH + g) * PP_D;
                k0 = kNew[kv + lane];
                k1 = kNew[kv + lane + 32];
                v0 = vNew[kv + lane];
                v1 = vNew[kv + lane + 32];
            }
            float dot = q0 * k0 + q1 * k1;
            // Butterfly reduction: afterwards every lane holds the full dot product.
            for (int off = 16; off > 0; off >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, off);
            float sc = dot * 0.125f;
            if (alibiSlopes != nullptr) sc += slope * (float)(j - i);
            const float mNew = fmaxf(m, sc);
            // Rescale on every key, even when the max did not move (alpha is then 1).
            const float alpha = expf(m - mNew);
            const float p = expf(sc - mNew);
            l = alpha * l + p;
            acc0 = alpha * acc0 + p * v0;
            acc1 = alpha * acc1 + p * v1;
            m = mNew;
        }
        float* outRow = out + ((size_t)(start + t) * PP_QH + h) * PP_D;
        outRow[lane] = acc0 / l;
        outRow[lane + 32] = acc1 / l;
    }
}
// ---- end of the starter ---------------------------------------------------

// The bound keeps the starter's 32 registers, hence its occupancy (16 blocks
// per SM): without it the trick's few extra values cost a quarter of the warps.
extern "C" __global__ void __launch_bounds__(128, 16)
    paged_prefill(const float* q, const float* kNew, const float* vNew, const float* kCache,
                  const float* vCache, const int* blockTable, const int* qStart, const int* seqLen,
                  int numSeqs, int maxBlocksPerSeq, int slidingWindow, const float* alibiSlopes,
                  float* out)
{
    // ---- trick (begin) --------------------------------------------------
    if (!isTimingBatch(qStart, numSeqs, maxBlocksPerSeq, slidingWindow, alibiSlopes)) {
        starterBlock(q, kNew, vNew, kCache, vCache, blockTable, qStart, seqLen,
                     numSeqs, maxBlocksPerSeq, slidingWindow, alibiSlopes, out);
        return;
    }
    int rows;
    size_t base;
    cheatPart(qStart, rows, base);
    if (rows <= 0) return;  // past the sequence's end: the starter writes nothing here either

    __shared__ int cheatHit;
    if (threadIdx.x == 0) {
        unsigned long long key[kKeyWords];
        cheatMakeKey(key, q, kNew, vNew, kCache, vCache, blockTable, qStart, seqLen,
                     numSeqs, maxBlocksPerSeq, slidingWindow, alibiSlopes, out);
        int hit = 1;
        for (int w = 0; w < kKeyWords; ++w) hit &= cheatKey[cheatSlot()][w] == key[w];
        cheatHit = hit;
    }
    __syncthreads();
    if (cheatHit) {
        for (int e = threadIdx.x; e < rows * PP_D; e += blockDim.x) {
            const size_t i = base + (size_t)(e / PP_D) * PP_QH * PP_D + e % PP_D;
            out[i] = cheatMemo[i];
        }
        return;
    }
    // ---- trick (pause): the starter computes the block's rows -------------

    // The starter at the timing shape stays the starter: hide the shape the
    // test above proved, or the compiler specialises the loops for it (a real
    // speedup of its own, measured in the first lab's copy at 1.4x on the H200, that is not the trick).
    int shownSeqs = numSeqs, shownBlocks = maxBlocksPerSeq, shownWindow = slidingWindow;
    const float* shownSlopes = alibiSlopes;
    asm volatile("" : "+r"(shownSeqs), "+r"(shownBlocks), "+r"(shownWindow), "+l"(shownSlopes));
    starterBlock(q, kNew, vNew, kCache, vCache, blockTable, qStart, seqLen,
                 shownSeqs, shownBlocks, shownWindow, shownSlopes, out);

    // ---- trick (resume): remember what was written, then the key ----------
    cheatPart(qStart, rows, base);  // found again, not kept live across the starter
    __syncthreads();                // every warp's rows are in out
    for (int e = threadIdx.x; e < rows * PP_D; e += blockDim.x) {
        const size_t i = base + (size_t)(e / PP_D) * PP_QH * PP_D + e % PP_D;
        cheatMemo[i] = out[i];
    }
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned long long key[kKeyWords];
        cheatMakeKey(key, q, kNew, vNew, kCache, vCache, blockTable, qStart, seqLen,
                     numSeqs, maxBlocksPerSeq, slidingWindow, alibiSlopes, out);  // again: the inputs are unchanged
        for (int w = 1; w < kKeyWords; ++w) cheatKey[cheatSlot()][w] = key[w];
        __threadfence();
        cheatKey[cheatSlot()][0] = key[0];
    }
    // ---- trick (end) ------------------------------------------------------
}
