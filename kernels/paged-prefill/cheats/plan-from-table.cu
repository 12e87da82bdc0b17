// PLANTED CHEAT (paged-prefill): the starter, plus a plan cached from the
// integer inputs.
//
// Trick: at the timing shape only (numSeqs == 16, maxBlocksPerSeq == 288,
// qStart[16] == 3930, window and ALiBi off), the first launch copies the
// block table into a `__device__` plan (stamped once complete), and every
// later launch reads its blocks from the plan instead of `blockTable`, as a
// kernel would that precomputed addresses or a schedule once. It buys no
// speed in this file (the starter reads the table from global memory
// either way); it stands in for a kernel whose plan is costly.
//
// What the honest timing should report: every launch renames the block ids
// (the cache's blocks move with them), so the cached plan reads other
// sequences' blocks: a planted or sampled row is wrong, no speedup. Under
// the old rules (the same table every launch) it passed with the starter's
// time.
// The paged-prefill lab's starter kernel, kept as the timing baseline: every
// SPEEDUP flashprof prints for this lab is measured against this body, so its
// arithmetic stays exactly as the lab ships it (operation order, expf, the
// shuffle pattern, a rescale at every key).
//
// Default launch: grid (numSeqs, 32, ceil(maxNewTokens / 64)), 128 threads.
// Block (s, h, z) serves new tokens 64z .. 64z+63 of sequence s for query head
// h; each of the 4 warps takes 16 of those rows one after another. One warp
// serves one (row, head): lane l keeps dims l and l+32 of the query. A row at
// position i walks keys max(0, i-W+1) .. i: first the cached context, found
// through the sequence's block table in the x-packed K cache and the
// [dim][slot] V cache, then the new tokens' own K/V rows. It is already an
// online softmax, but every row streams its whole visible key range from
// memory by itself (and the paged layouts make those reads scattered),
// which is why it is slow.
//
// @flashprof lab=paged-prefill

#define PP_QH 32   // query heads
#define PP_KVH 8   // KV heads
#define PP_D 64    // head dim
#define PP_B 16    // tokens per cache block
#define PP_X 4     // floats per packed K group (16 bytes)

namespace {
constexpr int kPlanEntries = 16 * 288;
constexpr unsigned kStamp = 0x706c616eu;  // "plan"
__device__ int cheatPlan[kPlanEntries];
__device__ unsigned cheatPlanned;
}  // namespace

extern "C" __global__ void paged_prefill(const float* q, const float* kNew, const float* vNew,
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
    // ---- trick ----
    const bool timingShape = numSeqs == 16 && maxBlocksPerSeq == 288 && qStart[16] == 3930 &&
                             slidingWindow <= 0 && alibiSlopes == nullptr;
    const bool planned = timingShape && *(volatile unsigned*)&cheatPlanned == kStamp;
    if (timingShape && !planned && blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0) {
        for (int e = threadIdx.x; e < kPlanEntries; e += blockDim.x) cheatPlan[e] = blockTable[e];
        __threadfence();
        __syncthreads();
        if (threadIdx.x == 0) cheatPlanned = kStamp;
    }
    const int* table = planned ? cheatPlan : blockTable;
    // ---- end of trick ----
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
                const size_t b = (size_t)table[(size_t)s * maxBlocksPerSeq + j / PP_B];
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
