// flashprof-expect-fail: block-edges partition-edges longest-sequence overflow-in-far-block last-key-is-max alibi gqa-heads shared-prefix many-sequences
// Bug: the K cache is unpacked with X = 8, bf16's 16 bytes, though fp32 packs
// X = 4 floats: each key's dims are read from the wrong slots and groups.
// Otherwise the starter.
//
// @flashprof lab=paged-decode threads=32

#define PD_QH 32   // query heads
#define PD_KVH 8   // KV heads
#define PD_D 64    // head dim
#define PD_B 16    // tokens per cache block
#define PD_X 8     // BUG: fp32 packs 4 floats per 16-byte group

extern "C" __global__ void paged_decode(const float* q, const float* kCache, const float* vCache,
                                        const int* blockTable, const int* seqLen, int numSeqs,
                                        int maxBlocksPerSeq, const float* alibiSlopes, float* workspace,
                                        unsigned* semaphores, float* out)
{
    const int h = blockIdx.x;
    const int s = blockIdx.y;
    const int g = h / (PD_QH / PD_KVH);
    const int lane = threadIdx.x % 32;
    if (s >= numSeqs) return;
    const int n = seqLen[s];
    const float slope = alibiSlopes != nullptr ? alibiSlopes[h] : 0.0f;
    const float* qRow = q + ((size_t)s * PD_QH + h) * PD_D;
    const float q0 = qRow[lane];
    const float q1 = qRow[lane + 32];
    float m = -INFINITY, l = 0.0f, acc0 = 0.0f, acc1 = 0.0f;
    for (int j = 0; j < n; ++j) {
        // Key j: logical block j / B of this sequence, slot j % B.
        const size_t b = (size_t)blockTable[(size_t)s * maxBlocksPerSeq + j / PD_B];
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
