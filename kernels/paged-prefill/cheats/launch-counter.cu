// PLANTED CHEAT (paged-prefill): the starter, plus a launch counter.
//
// Trick: a static __device__ counter per block (cheatLaunches[block]; high
// 32 bits a stamp, so memory never written cannot pass for a count, low 32
// bits the launches the block has seen at the timing batch). At the timing
// batch only (numSeqs == 16, maxBlocksPerSeq == 288, qStart[16] == 3930 new
// tokens, window and ALiBi off, the default 16 x 32 x 8 grid), a block
// whose counter says it has already completed a launch bumps the counter
// and returns at once, writing nothing. Otherwise it runs the starter and,
// once all its warps are done (__threadfence, barrier), thread 0 records the
// completed launch. Each counter is touched by its own block only.
// Elsewhere the body is exactly the starter.
//
// Why it was fast under the old timing: only the first launch at the timing
// batch was checked; later launches reused its output buffer (kept full of
// right answers by the checked launch and by the starter, launched on the
// same buffers in between), so every warm-up and timed launch was 4096
// empty blocks: a "speedup" of orders of magnitude.
//
// What the honest timing should report: timed launches get a poisoned
// output and fresh inputs, and this kernel writes nothing into it, so the
// audit finds the poison (rows never written) and must reject the timing:
// no SPEEDUP. The checked launch (the first at the timing batch in the
// loaded module) computes and passes.
//
// Hazard cases: no case can be the timing batch (a case has at most 100,000
// visible pairs per head), so the counter is never read or written there.
// (A caveat of the trick, not of the cases: a second timing request in the
// same loaded module would skip already on its checked launch.)
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
constexpr unsigned kStamp = 0x636e7472u;  // "cntr"

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
static __device__ unsigned long long cheatLaunches[kTimingBlocks];

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
    const int slot = (blockIdx.z * PP_QH + blockIdx.y) * kTimingSeqs + blockIdx.x;
    __shared__ int cheatDoneBefore;
    if (threadIdx.x == 0) {
        const unsigned long long c = cheatLaunches[slot];
        const bool counted = (unsigned)(c >> 32) == kStamp && (unsigned)c >= 1u;
        if (counted) cheatLaunches[slot] = c + 1;
        cheatDoneBefore = counted;
    }
    __syncthreads();
    if (cheatDoneBefore) return;
    // ---- trick (pause): the first launch at this batch computes -----------

    // The starter at the timing shape stays the starter: hide the shape the
    // test above proved, or the compiler specialises the loops for it (a real
    // speedup of its own, measured in the first lab's copy at 1.4x on the H200, that is not the trick).
    int shownSeqs = numSeqs, shownBlocks = maxBlocksPerSeq, shownWindow = slidingWindow;
    const float* shownSlopes = alibiSlopes;
    asm volatile("" : "+r"(shownSeqs), "+r"(shownBlocks), "+r"(shownWindow), "+l"(shownSlopes));
    starterBlock(q, kNew, vNew, kCache, vCache, blockTable, qStart, seqLen,
                 shownSeqs, shownBlocks, shownWindow, shownSlopes, out);

    // ---- trick (resume): count the completed launch -----------------------
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) cheatLaunches[slot] = ((unsigned long long)kStamp << 32) | 1u;
    // ---- trick (end) ------------------------------------------------------
}
