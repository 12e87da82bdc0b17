// PLANTED CHEAT (flash-prefill): the starter, plus a memo keyed on input values.
//
// Trick: at the timing shape (chunkLen == 2048, prefixLen == 2048, the
// default launch's 32 x 32 grid) every block keeps a copy of the part of the
// output it produced in a module-scope __device__ array (cheatMemo, sized for
// the whole timing output: 16 MiB that cost nothing in the image), and a key
// slot of its own (cheatKey[block]) describing the inputs it was computed
// from: the bits of q[0], kCache[0], vCache[0], and chunkLen, prefixLen. On
// entry, thread 0 rebuilds the key from the current launch; when it equals
// the stored one, the block copies its 64 rows x 64 dims from the memo into
// out and returns. Otherwise it runs the starter, copies what it wrote into
// the memo, fences (__threadfence), and only then writes its key slot (the
// tag word last), so a slot never names a memo part that is not all there.
// Each slot is read and written by its own block only: no race between
// blocks. Outside the timing shape the trick is off and the body is exactly
// the starter.
//
// Why it was fast under the old timing: the checked launch, the warm-ups and
// the timed launches all ran on the same input values, so every launch after
// the first hit the memo and replaced the starter's O(C * (P + C)) walk with
// a 16 MiB copy: a very large "speedup", with a correct output.
//
// What the honest timing should report: every timed launch gets fresh input
// values, so q[0] (and kCache[0], vCache[0]) change, the key never repeats,
// and each launch computes for real (plus a 16 MiB memo copy, noise next to
// the starter's walk). The output is correct; the time, and a SPEEDUP of
// about 1.0x, should match the starter's within noise.
//
// Hazard cases: no case has the timing shape, so the memo is never read or
// written there; the kernel is the starter.

namespace {

constexpr int kTimingChunk = 2048;
constexpr int kTimingPrefix = 2048;
constexpr int kRowsPerBlock = 64;  // the lab's default launch, which this file keeps
constexpr int kTimingBlocksX = kTimingChunk / kRowsPerBlock;
constexpr int kTimingBlocks = kTimingBlocksX * HQ;
constexpr size_t kTimingOutFloats = (size_t)kTimingChunk * HQ * DH;
constexpr int kKeyWords = 6;
constexpr unsigned long long kKeyTag = 0x6d656d6f2d76616cull;  // "memo-val"

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
        key[1] = __float_as_uint(q[0]);
        key[2] = __float_as_uint(kCache[0]);
        key[3] = __float_as_uint(vCache[0]);
        key[4] = (unsigned)chunkLen;
        key[5] = (unsigned)prefixLen;
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
