// flashprof-expect-fail: mixed-lengths-e4m3 mixed-lengths-e5m2 long-context-e4m3 long-context-e5m2 decode-steps window-b-minus-1 window-b window-b-plus-1 window-longer-than-sequence alibi-with-context alibi-and-window overflow-in-far-cached-block overflow-in-new-tokens last-cached-key last-key-of-sequence gqa-heads high-blocks-past-2-31 high-blocks-past-2-32
// Bug: the cached value is the decoded FP8 byte itself; the multiplication by
// vScale is left out (keys keep their kScale).
// Otherwise the starter, line for line.
//
// @flashprof lab=paged-prefill-fp8

#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#define PF_QH 32   // query heads
#define PF_KVH 8   // KV heads
#define PF_D 128   // head dim
#define PF_B 16    // tokens per cache block
#define PF_X 16    // FP8 bytes per packed K group (16 bytes)

// One FP8 byte as a float: kvFormat 0 is E4M3, 1 is E5M2.
__device__ __forceinline__ float pf_fp8(uint8_t byte, int kvFormat)
{
    const __half_raw h = __nv_cvt_fp8_to_halfraw(byte, kvFormat == 0 ? __NV_E4M3 : __NV_E5M2);
    return __half2float(__half(h));
}

extern "C" __global__ void paged_prefill_fp8(
    const __nv_bfloat16* q, const __nv_bfloat16* kNew, const __nv_bfloat16* vNew,
    const uint8_t* kCache, const uint8_t* vCache,
    const int* blockTable, const int* qStart, const int* seqLen,
    int numSeqs, int maxBlocksPerSeq, int slidingWindow, const float* alibiSlopes,
    float kScale, float vScale, int kvFormat, __nv_bfloat16* out)
{
    const int s = blockIdx.x;
    const int h = blockIdx.y;
    const int g = h / (PF_QH / PF_KVH);
    const int warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (s >= numSeqs) return;
    const int start = qStart[s];
    const int n = qStart[s + 1] - start;
    const int ctx = seqLen[s] - n;
    const float slope = alibiSlopes != nullptr ? alibiSlopes[h] : 0.0f;
    const int d0 = lane * 4;
    for (int r = 0; r < 16; ++r) {
        const int t = blockIdx.z * 64 + warp * 16 + r;
        if (t >= n) return;
        const int i = ctx + t;
        const __nv_bfloat16* qRow = q + ((size_t)(start + t) * PF_QH + h) * PF_D;
        float qv[4], acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int e = 0; e < 4; ++e) qv[e] = __bfloat162float(qRow[d0 + e]);
        const int jFirst = slidingWindow > 0 ? max(0, i - slidingWindow + 1) : 0;
        float m = -INFINITY, l = 0.0f;
        for (int j = jFirst; j <= i; ++j) {
            float k[4], v[4];
            if (j < ctx) {
                const size_t b = (size_t)blockTable[(size_t)s * maxBlocksPerSeq + j / PF_B];
                const int o = j % PF_B;
                for (int e = 0; e < 4; ++e) {
                    const int d = d0 + e;
                    const size_t kAt = (((b * PF_KVH + g) * (PF_D / PF_X) + d / PF_X) * PF_B + o) * PF_X + d % PF_X;
                    k[e] = pf_fp8(kCache[kAt], kvFormat) * kScale;
                    v[e] = pf_fp8(vCache[((b * PF_KVH + g) * PF_D + d) * PF_B + o], kvFormat);  // BUG: no vScale
                }
            } else {
                const size_t kv = ((size_t)(start + j - ctx) * PF_KVH + g) * PF_D + d0;
                for (int e = 0; e < 4; ++e) {
                    k[e] = __bfloat162float(kNew[kv + e]);
                    v[e] = __bfloat162float(vNew[kv + e]);
                }
            }
            float dot = qv[0] * k[0] + qv[1] * k[1] + qv[2] * k[2] + qv[3] * k[3];
            for (int off = 16; off > 0; off >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, off);
            float sc = dot * 0x1.6a09e6p-4f;
            if (alibiSlopes != nullptr) sc += slope * (float)(j - i);
            const float mNew = fmaxf(m, sc);
            const float alpha = expf(m - mNew);
            const float p = expf(sc - mNew);
            l = alpha * l + p;
            for (int e = 0; e < 4; ++e) acc[e] = alpha * acc[e] + p * v[e];
            m = mNew;
        }
        __nv_bfloat16* outRow = out + ((size_t)(start + t) * PF_QH + h) * PF_D;
        for (int e = 0; e < 4; ++e) outRow[d0 + e] = __float2bfloat16_rn(acc[e] / l);
    }
}
