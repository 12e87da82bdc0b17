// A probe of the physical floor, not a solution: it reads exactly the bytes
// the lab counts as compulsory (q, kNew, vNew and every K and V cache block a
// context owns, found through the block table) once, as fast as DRAM serves
// them, and writes every output element once. It computes no attention, so
// its output is wrong and it never gets a speedup; what it shows is its
// median beside the floor's DRAM term (compulsory bytes over the best
// bandwidth known, with headroom): a kernel moving only its compulsory bytes
// at the DRAM roof must sit above that floor (docs/INTEGRITY.md).
//
// @flashprof lab=paged-prefill

#define SP_KVH 8
#define SP_D 64
#define SP_B 16
#define SP_QH 32

namespace {
// Sums `count` floats (a multiple of 4, 16-byte aligned) with every thread of
// the grid taking float4s in turn.
__device__ float stream_sum(const float* data, size_t count, size_t thread, size_t threads)
{
    const float4* v = reinterpret_cast<const float4*>(data);
    float acc = 0.0f;
    for (size_t i = thread; i < count / 4; i += threads) {
        const float4 x = __ldcs(v + i);
        acc += x.x + x.y + x.z + x.w;
    }
    return acc;
}
}  // namespace

extern "C" __global__ void paged_prefill(const float* q, const float* kNew, const float* vNew,
                                         const float* kCache, const float* vCache,
                                         const int* blockTable, const int* qStart, const int* seqLen,
                                         int numSeqs, int maxBlocksPerSeq, int slidingWindow,
                                         const float* alibiSlopes, float* out)
{
    const size_t block = blockIdx.x + (size_t)gridDim.x * (blockIdx.y + (size_t)gridDim.y * blockIdx.z);
    const size_t threads = (size_t)gridDim.x * gridDim.y * gridDim.z * blockDim.x;
    const size_t thread = block * blockDim.x + threadIdx.x;
    const size_t rows = (size_t)qStart[numSeqs];
    float acc = stream_sum(q, rows * SP_QH * SP_D, thread, threads);
    acc += stream_sum(kNew, rows * SP_KVH * SP_D, thread, threads);
    acc += stream_sum(vNew, rows * SP_KVH * SP_D, thread, threads);
    // Every owned context block: K and V are each SP_KVH * SP_D * SP_B floats a block.
    const size_t blockFloats = (size_t)SP_KVH * SP_D * SP_B;
    for (int s = 0; s < numSeqs; ++s) {
        const int ctx = seqLen[s] - (qStart[s + 1] - qStart[s]);
        const int blocks = (ctx + SP_B - 1) / SP_B;
        for (size_t i = thread; i < (size_t)blocks * blockFloats / 4; i += threads) {
            const size_t b = (size_t)blockTable[(size_t)s * maxBlocksPerSeq + i / (blockFloats / 4)];
            const size_t at = b * blockFloats / 4 + i % (blockFloats / 4);
            const float4 k = __ldcs(reinterpret_cast<const float4*>(kCache) + at);
            const float4 v = __ldcs(reinterpret_cast<const float4*>(vCache) + at);
            acc += k.x + k.y + k.z + k.w + v.x + v.y + v.z + v.w;
        }
    }
    float4* o = reinterpret_cast<float4*>(out);
    for (size_t i = thread; i < rows * SP_QH * SP_D / 4; i += threads) {
        __stcs(o + i, make_float4(acc, acc, acc, acc));
    }
}
