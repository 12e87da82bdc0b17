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
// out and returns. Otherwise it stores the new key and runs the starter's
// body verbatim, which also writes each finished row into the memo. Launches
// on one stream run one after another, so a later launch that finds the key
// finds the whole memo part written. Each slot is read and written by its own
// block only: no race between blocks. Outside the timing shape the trick is
// off and the body is exactly the starter (the trick sits before the body and
// on its last store only, so the starter's loop compiles as the starter's: a
// first version with the body in a helper ran 1.4x faster on the H200 for
// reasons of code layout alone).
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

extern "C" __global__ void attention_prefill(const float* q, const float* kCache, const float* vCache, float* out,
                                             int chunkLen, int prefixLen)
{
    // ---- trick (begin) --------------------------------------------------
    const bool cheatMemoOn = chunkLen == kTimingChunk && prefixLen == kTimingPrefix &&
                             gridDim.x == kTimingBlocksX && gridDim.y == HQ && gridDim.z == 1;
    __shared__ int cheatHit;
    if (cheatMemoOn) {
        const int slot = blockIdx.y * kTimingBlocksX + blockIdx.x;
        if (threadIdx.x == 0) {
            const unsigned long long key[kKeyWords] = {
                kKeyTag, __float_as_uint(q[0]), __float_as_uint(kCache[0]), __float_as_uint(vCache[0]),
                (unsigned)chunkLen, (unsigned)prefixLen};
            int hit = 1;
            for (int w = 0; w < kKeyWords; ++w) hit &= cheatKey[slot][w] == key[w];
            if (!hit) {
                for (int w = 0; w < kKeyWords; ++w) cheatKey[slot][w] = key[w];
            }
            cheatHit = hit;
        }
        __syncthreads();
        if (cheatHit) {
            const size_t base = (size_t)blockIdx.x * kRowsPerBlock * HQ * DH + (size_t)blockIdx.y * DH;
            for (int e = threadIdx.x; e < kRowsPerBlock * DH; e += blockDim.x) {
                const size_t i = base + (size_t)(e / DH) * HQ * DH + e % DH;
                out[i] = cheatMemo[i];
            }
            return;
        }
    }
    // ---- trick (end); from here on the starter's body, verbatim, but for
    // the memo store after its last line ----------------------------------

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
    // ---- trick: remember the row for a launch on the same key ------------
    if (cheatMemoOn) {
        cheatMemo[(size_t)row * HQ * DH + h * DH + lane] = acc0 / l;
        cheatMemo[(size_t)row * HQ * DH + h * DH + lane + 32] = acc1 / l;
    }
}
}
