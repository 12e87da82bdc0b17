// PLANTED CHEAT (paged-decode): the starter, plus a plan cached from the
// integer inputs.
//
// Trick: at the timing shape only (64 sequences, 512 blocks a table row, ALiBi off), the first launch copies
// the block table into a `__device__` plan (stamped once complete), and every
// later launch reads its blocks from the plan instead of `blockTable`, as a
// kernel would that precomputed addresses or a schedule once. It buys no
// speed in this file; it stands in for a kernel whose plan is costly.
//
// What the honest timing should report: every launch renames the block ids
// (the cache's blocks move with them), so the cached plan reads other
// blocks: a planted or sampled row is wrong, no speedup. Under timing rules
// 2 (the same table every launch) it passed with the starter's time.
// The paged-decode lab's starter kernel, kept as the timing baseline: every
// SPEEDUP flashprof prints for this lab is measured against this body, so its
// arithmetic stays exactly as the lab ships it (operation order, expf, the
// shuffle pattern, a rescale at every key).
//
// One warp per (query head, sequence): grid (32, numSeqs), 32 threads. Lane l
// keeps dims l and l+32 of the head's query and walks keys 0 .. seqLen-1 one
// at a time, each found through the sequence's block table in the x-packed K
// cache and the [dim][slot] V cache, with an online softmax. Every query head
// reads its KV head's whole cache again (4 times the bytes), with 4-byte
// loads scattered over the packed layouts, and one warp per SM slot walks a
// sequence of 8192 keys alone: that is why it is slow. It uses neither the
// workspace nor the semaphores.
//
// @flashprof lab=paged-decode threads=32

#define PD_QH 32   // query heads
#define PD_KVH 8   // KV heads
#define PD_D 64    // head dim
#define PD_B 16    // tokens per cache block
#define PD_X 4     // floats per packed K group (16 bytes)

namespace {
constexpr int kPlanEntries = 32768;
constexpr unsigned kStamp = 0x706c616eu;  // "plan"
__device__ int cheatPlan[kPlanEntries];
__device__ unsigned cheatPlanned;
}  // namespace

extern "C" __global__ void paged_decode(const float* q, const float* kCache, const float* vCache,
                                        const int* blockTable, const int* seqLen, int numSeqs,
                                        int maxBlocksPerSeq, const float* alibiSlopes, float* workspace,
                                        unsigned* semaphores, float* out)
{
    const int h = blockIdx.x;
    const int s = blockIdx.y;
    const int g = h / (PD_QH / PD_KVH);
    const int lane = threadIdx.x % 32;
    // ---- trick ----
    const bool timingShape = numSeqs == 64 && maxBlocksPerSeq == 512 && alibiSlopes == nullptr && numSeqs * maxBlocksPerSeq <= kPlanEntries;
    const bool planned = timingShape && *(volatile unsigned*)&cheatPlanned == kStamp;
    if (timingShape && !planned && blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0) {
        for (int e = threadIdx.x; e < numSeqs * maxBlocksPerSeq; e += blockDim.x) cheatPlan[e] = blockTable[e];
        __threadfence();
        __syncthreads();
        if (threadIdx.x == 0) cheatPlanned = kStamp;
    }
    const int* table = planned ? cheatPlan : blockTable;
    // ---- end of trick ----
    if (s >= numSeqs) return;
    const int n = seqLen[s];
    const float slope = alibiSlopes != nullptr ? alibiSlopes[h] : 0.0f;
    const float* qRow = q + ((size_t)s * PD_QH + h) * PD_D;
    const float q0 = qRow[lane];
    const float q1 = qRow[lane + 32];
    float m = -INFINITY, l = 0.0f, acc0 = 0.0f, acc1 = 0.0f;
    for (int j = 0; j < n; ++j) {
        // Key j: logical block j / B of this sequence, slot j % B.
        const size_t b = (size_t)table[(size_t)s * maxBlocksPerSeq + j / PD_B];
        const int o = j % PD_B;
        const size_t kBase = (b * PD_KVH + g) * (PD_D / PD_X);
        const float k0 = kCache[((kBase + lane / PD_X) * PD_B + o) * PD_X + lane % PD_X];
        const float k1 = kCache[((kBase + (lane + 32) / PD_X) * PD_B + o) * PD_X + (lane + 32) % PD_X];
        const size_t vBase = (b * PD_KVH + g) * PD_D;
        const float v0 = vCache[(vBase + lane) * PD_B + o];
        const float v1 = vCache[(vBase + lane + 32) * PD_B + o];
        float dot = q0 * k0 + q1 * k1;
        // Butterfly reduction: afterwards every lane holds the full dot product.
        for (int off = 16; off > 0; off >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, off);
        float sc = dot * 0.125f;
        // ALiBi, relative to the token's own position n - 1.
        if (alibiSlopes != nullptr) sc += slope * (float)(j - (n - 1));
        const float mNew = fmaxf(m, sc);
        // Rescale on every key, even when the max did not move (alpha is then 1).
        const float alpha = expf(m - mNew);
        const float p = expf(sc - mNew);
        l = alpha * l + p;
        acc0 = alpha * acc0 + p * v0;
        acc1 = alpha * acc1 + p * v1;
        m = mNew;
    }
    float* outRow = out + ((size_t)s * PD_QH + h) * PD_D;
    outRow[lane] = acc0 / l;
    outRow[lane + 32] = acc1 / l;
}
