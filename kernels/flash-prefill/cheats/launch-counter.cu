// PLANTED CHEAT (flash-prefill): the starter, plus a launch counter.
//
// Trick: a static __device__ counter per block (cheatLaunches[block]; the
// high 32 bits a stamp, so memory that was never written cannot pass for a
// count, the low 32 bits the number of launches the block has seen at the
// timing shape). At the timing shape only (chunkLen == 2048, prefixLen ==
// 2048, the default 32 x 32 grid), a block whose counter says it has
// already completed one launch bumps the counter and returns at once,
// without writing anything. Otherwise it runs the starter and, after all its
// warps are done (barrier, __threadfence), thread 0 records the completed
// launch. Each counter is touched by its own block only. Outside the timing
// shape the trick is off and the body is the starter.
//
// Why it was fast under the old timing: only the first launch at the timing
// shape was checked, and later launches reused its output buffer (which the
// starter, launched on the same buffers in between, also kept filled with
// the right answer). Every warm-up and timed launch after the first was
// 1024 empty blocks: a "speedup" of orders of magnitude.
//
// What the honest timing should report: timed launches get a poisoned
// output and fresh inputs; this kernel writes nothing into it, so the audit
// finds the poison (rows never written) and must reject the timing: no
// SPEEDUP. The checked launch itself (the first at this shape in the loaded
// module) computes and passes.
//
// Hazard cases: no case has the timing shape, so the counter is never read
// or written there; the kernel is the starter. (A caveat of the trick, not
// of the cases: a second timing request in the same loaded module would
// skip already on its checked launch.)

namespace {

constexpr int kTimingChunk = 2048;
constexpr int kTimingPrefix = 2048;
constexpr int kTimingBlocksX = kTimingChunk / 64;  // the lab's default launch, which this file keeps
constexpr int kTimingBlocks = kTimingBlocksX * HQ;
constexpr unsigned kStamp = 0x636e7472u;  // "cntr"

}  // namespace

// ---- trick state (module scope) -----------------------------------------
static __device__ unsigned long long cheatLaunches[kTimingBlocks];

// ---- the starter's body, verbatim (unindented so that it diffs clean) ----
__device__ __forceinline__ void starterBlock(const float* q, const float* kCache, const float* vCache, float* out,
                                             int chunkLen, int prefixLen)
{
const int h = blockIdx.y;
const int g = h / GROUP;
const int warp = threadIdx.x / 32;
const int lane = threadIdx.x % 32;
for (int r = 0; r < 8; ++r) {
    const int row = blockIdx.x * 64 + warp * 8 + r;
    // Rows only grow from here on, so the warp has no work left at all.
    if (row >= chunkLen) return;
    const int pos = prefixLen + row;
    const float* qRow = q + (size_t)row * HQ * DH + h * DH;
    const float q0 = qRow[lane];
    const float q1 = qRow[lane + 32];
    float m = -INFINITY, l = 0.0f, acc0 = 0.0f, acc1 = 0.0f;
    for (int j = 0; j <= pos; ++j) {
        const float* kRow = kCache + (size_t)j * HKV * DH + g * DH;
        const float* vRow = vCache + (size_t)j * HKV * DH + g * DH;
        float dot = q0 * kRow[lane] + q1 * kRow[lane + 32];
        // Butterfly reduction: afterwards every lane holds the full dot product.
        for (int off = 16; off > 0; off >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, off);
        const float s = dot * 0.125f;
        const float mNew = fmaxf(m, s);
        // Rescale on every key, even when the max did not move (alpha is then 1).
        const float alpha = expf(m - mNew);
        const float p = expf(s - mNew);
        l = alpha * l + p;
        acc0 = alpha * acc0 + p * vRow[lane];
        acc1 = alpha * acc1 + p * vRow[lane + 32];
        m = mNew;
    }
    float* outRow = out + (size_t)row * HQ * DH + h * DH;
    outRow[lane] = acc0 / l;
    outRow[lane + 32] = acc1 / l;
}
}
// ---- end of the starter's body -------------------------------------------

extern "C" __global__ void attention_prefill(const float* q, const float* kCache, const float* vCache, float* out,
                                             int chunkLen, int prefixLen)
{
    // ---- trick (begin) --------------------------------------------------
    const bool timingShape = chunkLen == kTimingChunk && prefixLen == kTimingPrefix &&
                             gridDim.x == kTimingBlocksX && gridDim.y == HQ && gridDim.z == 1;
    if (!timingShape) {
        starterBlock(q, kCache, vCache, out, chunkLen, prefixLen);
        return;
    }
    const int slot = blockIdx.y * kTimingBlocksX + blockIdx.x;
    __shared__ int cheatDoneBefore;
    if (threadIdx.x == 0) {
        const unsigned long long c = cheatLaunches[slot];
        const bool counted = (unsigned)(c >> 32) == kStamp && (unsigned)c >= 1u;
        if (counted) cheatLaunches[slot] = c + 1;
        cheatDoneBefore = counted;
    }
    __syncthreads();
    if (cheatDoneBefore) return;
    // ---- trick (pause): the first launch at this shape computes -----------

    // The starter at the timing shape stays the starter: hide the shape the
    // test above proved, or the compiler specialises the loops for it (a real
    // speedup of its own, measured at 1.4x on the H200, that is not the trick).
    int shownChunk = chunkLen, shownPrefix = prefixLen;
    asm volatile("" : "+r"(shownChunk), "+r"(shownPrefix));
    starterBlock(q, kCache, vCache, out, shownChunk, shownPrefix);

    // ---- trick (resume): count the completed launch -----------------------
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) cheatLaunches[slot] = ((unsigned long long)kStamp << 32) | 1u;
    // ---- trick (end) ------------------------------------------------------
}
