// PLANTED CHEAT (paged-prefill): the starter, plus a write into the
// grader's own memory that it finds by scanning the device's address space.
//
// Trick: every input a timed launch gets is a fresh copy made on the GPU
// from a pristine copy the grader keeps in the same context. On its first
// launch at the timing batch (numSeqs == 16, maxBlocksPerSeq == 288,
// qStart[16] == 3930, window and ALiBi off), block (0, 0, 0) looks for the
// pristine copy of seqLen: seqLen is copied unchanged into every launch, so
// its 16 values name it. It scans the words after its own seqLen (the
// grader allocates its copies after the launch's buffers), then those
// before, up to 1 GiB either way, skipping its own array, and on a match
// lowers every pristine seqLen by up to 1,024 tokens (64 cached blocks,
// never below the sequence's new tokens). A module-scope flag keeps it to
// one scan, found or not. Every later launch would then get a shorter
// context (less work for both kernels, so no ratio to gain: the point is
// the write). Elsewhere the body is exactly the starter.
//
// What the honest timing should report: the pristine copies are
// fingerprinted after every student launch, so the checked launch is named
// for writing into the grader's copy of seqLen (harness_written) and the
// SPEEDUP is withheld. If the scan reads memory that is not mapped, the
// launch faults instead (illegal address): either way no speedup.
//
// Hazard cases: no case is the timing batch (see memo-by-values.cu), so the
// scan never runs there; the kernel is the starter.
//
// @flashprof lab=paged-prefill

#define PP_QH 32   // query heads
#define PP_KVH 8   // KV heads
#define PP_D 64    // head dim
#define PP_B 16    // tokens per cache block
#define PP_X 4     // floats per packed K group (16 bytes)

namespace {
constexpr int kTimingSeqs = 16;
constexpr int kTimingTokens = 3930;
constexpr int kTimingMaxBlocks = 288;
constexpr long long kScanWords = (1ll << 30) / 4;  // 1 GiB each way
constexpr int kShrink = 1024;                       // most tokens taken off a context
}  // namespace

__device__ int cheatDone;

// Whether the 16 words at p equal seqLen's, p not being seqLen itself.
__device__ __forceinline__ bool cheatMatches(const int* p, const int* seqLen)
{
    if (p == seqLen) return false;
    for (int i = 0; i < kTimingSeqs; ++i) {
        if (p[i] != seqLen[i]) return false;
    }
    return true;
}

// Block (0, 0, 0)'s scan, one direction: all 128 threads read a 1,024-word
// chunk, then agree whether any matched; stops at the first chunk holding
// a match. Returns the copy, or nullptr.
__device__ const int* cheatScan(const int* seqLen, long long direction)
{
    __shared__ const int* found;
    if (threadIdx.x == 0) found = nullptr;
    __syncthreads();
    const long long chunk = 1024;
    for (long long at = 0; at < kScanWords; at += chunk) {
        for (int k = 0; k < 8; ++k) {
            const long long offset = at + k * 128 + threadIdx.x;
            const int* p = direction > 0 ? seqLen + kTimingSeqs + offset : seqLen - kTimingSeqs - offset;
            if (p[0] == seqLen[0] && cheatMatches(p, seqLen)) found = p;
        }
        __syncthreads();
        if (found != nullptr) break;
        __syncthreads();
    }
    return found;
}

extern "C" __global__ void paged_prefill(const float* q, const float* kNew, const float* vNew,
                                         const float* kCache, const float* vCache,
                                         const int* blockTable, const int* qStart, const int* seqLen,
                                         int numSeqs, int maxBlocksPerSeq, int slidingWindow,
                                         const float* alibiSlopes, float* out)

{
    // ---- trick (begin) --------------------------------------------------
    if (blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0 && numSeqs == kTimingSeqs &&
        maxBlocksPerSeq == kTimingMaxBlocks && slidingWindow <= 0 && alibiSlopes == nullptr &&
        qStart[kTimingSeqs] == kTimingTokens && atomicAdd(&cheatDone, 0) == 0) {
        const int* copy = cheatScan(seqLen, 1);
        if (copy == nullptr) copy = cheatScan(seqLen, -1);
        if (threadIdx.x == 0) {
            if (copy != nullptr) {
                int* pristine = const_cast<int*>(copy);
                for (int i = 0; i < kTimingSeqs; ++i) {
                    // Never below the sequence's own new tokens.
                    const int context = seqLen[i] - (qStart[i + 1] - qStart[i]);
                    pristine[i] -= min(kShrink, context);
                }
            }
            atomicExch(&cheatDone, 1);  // one scan, found or not
        }
        __syncthreads();
    }
    // ---- trick (end): the starter, verbatim, from here on -----------------

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
