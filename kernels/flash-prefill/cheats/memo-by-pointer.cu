// PLANTED CHEAT (flash-prefill): the starter, plus a memo keyed on pointers.
//
// Trick: the same memo as memo-by-values.cu (a module-scope __device__ copy
// of the whole timing output, cheatMemo, and one key slot per block,
// cheatKey[block], written by that block only, after a __threadfence that
// follows its memo part), but the key is WHERE the data lives rather than
// what it is: the q, kCache, vCache and out pointers, and chunkLen,
// prefixLen. At the timing shape (chunkLen == 2048, prefixLen == 2048, the
// default 32 x 32 grid) a block whose key matches copies its 64 rows x 64
// dims from the memo into out and returns; otherwise it runs the starter,
// copies its rows into the memo and then writes its key (tag word last).
// Outside the timing shape the trick is off and the body is the starter.
//
// Why it was fast under the old timing: the checked launch, the warm-ups
// and the timed launches all used one workspace, so every launch after the
// first saw the same pointers, hit the memo and did a 16 MiB copy instead of
// the starter's walk: a very large "speedup", and the output was right
// because the values had not changed either.
//
// What the honest timing should report: timed launches keep the pointers
// (same buffers, same shape) but get fresh values and a poisoned output.
// The key still matches, so every timed launch writes the memo of the
// checked launch's inputs: a full, finite output that is wrong for this
// launch's inputs and repeats the previous launch bit for bit. The grader
// must reject the timing (stale output, wrong rows) and print no SPEEDUP.
//
// Hazard cases: no case has the timing shape, so the memo is never read or
// written there; the kernel is the starter. (Caveat of the trick itself, not
// of the cases: a second timing request in the same loaded module whose new
// workspace happens to land at the same addresses would already fail its
// checked launch.)

namespace {

constexpr int kTimingChunk = 2048;
constexpr int kTimingPrefix = 2048;
constexpr int kRowsPerBlock = 64;  // the lab's default launch, which this file keeps
constexpr int kTimingBlocksX = kTimingChunk / kRowsPerBlock;
constexpr int kTimingBlocks = kTimingBlocksX * HQ;
constexpr size_t kTimingOutFloats = (size_t)kTimingChunk * HQ * DH;
constexpr int kKeyWords = 6;
constexpr unsigned long long kKeyTag = 0x6d656d6f2d707472ull;  // "memo-ptr"

}  // namespace

// ---- trick state (module scope) -----------------------------------------
__device__ float cheatMemo[kTimingOutFloats];
__device__ unsigned long long cheatKey[kTimingBlocks][kKeyWords];

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
    // This block's part of out (and of the memo): rows 64*blockIdx.x .. +63, head blockIdx.y.
    const size_t base = (size_t)blockIdx.x * kRowsPerBlock * HQ * DH + (size_t)blockIdx.y * DH;

    __shared__ int cheatHit;
    unsigned long long key[kKeyWords];
    if (threadIdx.x == 0) {
        key[0] = kKeyTag;
        key[1] = (unsigned long long)q;
        key[2] = (unsigned long long)kCache;
        key[3] = (unsigned long long)vCache;
        key[4] = (unsigned long long)out;
        key[5] = ((unsigned long long)(unsigned)chunkLen << 32) | (unsigned)prefixLen;
        int hit = 1;
        for (int w = 0; w < kKeyWords; ++w) hit &= cheatKey[slot][w] == key[w];
        cheatHit = hit;
    }
    __syncthreads();
    if (cheatHit) {
        for (int e = threadIdx.x; e < kRowsPerBlock * DH; e += blockDim.x) {
            const size_t i = base + (size_t)(e / DH) * HQ * DH + e % DH;
            out[i] = cheatMemo[i];
        }
        return;
    }
    // ---- trick (pause): the starter computes the block's rows -------------

    // The starter at the timing shape stays the starter: hide the shape the
    // test above proved, or the compiler specialises the loops for it (a real
    // speedup of its own, measured at 1.4x on the H200, that is not the trick).
    int shownChunk = chunkLen, shownPrefix = prefixLen;
    asm volatile("" : "+r"(shownChunk), "+r"(shownPrefix));
    starterBlock(q, kCache, vCache, out, shownChunk, shownPrefix);

    // ---- trick (resume): remember what was written, then the key ----------
    __syncthreads();  // every warp's rows are in out
    for (int e = threadIdx.x; e < kRowsPerBlock * DH; e += blockDim.x) {
        const size_t i = base + (size_t)(e / DH) * HQ * DH + e % DH;
        cheatMemo[i] = out[i];
    }
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < kKeyWords; ++w) cheatKey[slot][w] = key[w];
        __threadfence();
        cheatKey[slot][0] = key[0];
    }
    // ---- trick (end) ------------------------------------------------------
}
