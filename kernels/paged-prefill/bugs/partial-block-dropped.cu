// flashprof-expect-fail: mixed-lengths long-context decode-steps window-b-minus-1 window-b window-b-plus-1 window-longer-than-sequence alibi-with-context alibi-and-window overflow-in-far-cached-block overflow-in-new-tokens last-cached-key last-key-of-sequence gqa-heads high-blocks-past-2-31 high-blocks-past-2-32 long-context-32k
// Bug: the walk over cached keys covers whole blocks only: the last, partial
// block of every context (positions ctx / B * B .. ctx - 1) is skipped.
//
// Planted from the paged-prefill starter (kernels/paged-prefill/starter.cu) with this
// one defect; everything else, the default launch included, is the starter's.
//
// @flashprof lab=paged-prefill

#define PP_QH 32   // query heads
#define PP_KVH 8   // KV heads
#define PP_D 64    // head dim
#define PP_B 16    // tokens per cache block
#define PP_X 4     // floats per packed K group (16 bytes)

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
            if (j >= ctx / PP_B * PP_B && j < ctx) continue;  // BUG: whole blocks only
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
