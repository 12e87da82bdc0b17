// Decode walk, step 1: the starter's one (query head, sequence) per block,
// but with whole-block loads. Grid (32, numSeqs), 128 threads: the 4 warps
// take every 4th cache block of the sequence, lane l loads K float4s l, l+32,
// ... and V rows 2l, 2l+1 of the block (512 contiguous bytes a warp load),
// one online-softmax step per 16 keys, and the warps merge at the end. Loads
// are now as wide as they go, but each KV head is still read by each of its 4
// query heads (step 2), and a long sequence is still one block (step 3).
//
// @flashprof lab=paged-decode threads=128

namespace {

constexpr int kQueryHeads = 32;
constexpr int kKvHeads = 8;
constexpr int kGroup = kQueryHeads / kKvHeads;
constexpr int kDim = 64;
constexpr int kBlockTokens = 16;
constexpr int kWarps = 4;
constexpr int kServed = 1;  // query heads per block
constexpr float kLog2e = 1.4426950408889634f;

// One cache block's K and V for one lane: 8 float4s of each.
struct Tile {
    float4 k[8];
    float4 v[8];
};

__device__ __forceinline__ void loadTile(Tile& t, const float* kCache, const float* vCache, size_t block,
                                         int g, int lane)
{
    const float4* k4 = reinterpret_cast<const float4*>(kCache + (block * kKvHeads + g) * kDim * kBlockTokens);
    const float4* v4 = reinterpret_cast<const float4*>(vCache + (block * kKvHeads + g) * kDim * kBlockTokens);
#pragma unroll
    for (int i = 0; i < 8; ++i) t.k[i] = __ldcs(k4 + lane + 32 * i);
    // V rows 2*lane and 2*lane+1, 4 float4s each.
#pragma unroll
    for (int i = 0; i < 8; ++i) t.v[i] = __ldcs(v4 + lane * 8 + i);
}

__device__ __forceinline__ float component(const float4& x, int i)
{
    return i == 0 ? x.x : i == 1 ? x.y : i == 2 ? x.z : x.w;
}

}  // namespace

extern "C" __global__ void __launch_bounds__(128) paged_decode(
    const float* q, const float* kCache, const float* vCache,
    const int* blockTable, const int* seqLen, int numSeqs, int maxBlocksPerSeq,
    const float* alibiSlopes, float* workspace, unsigned* semaphores, float* out)
{
    const int h0 = blockIdx.x;  // the one query head served
    const int g = h0 / kGroup;
    const int s = blockIdx.y;
    const int z = blockIdx.z;  // always 0: one block per (KV head, sequence)
    if (s >= numSeqs) return;
    const int len = seqLen[s];
    if (z > 0) return;
    const int jBegin = 0;
    const int jEnd = len;

    const int warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    __shared__ float4 qS[kServed][kDim / 4];
    __shared__ float pS[kWarps][kServed][kBlockTokens];
    __shared__ float mergeS[kWarps][kServed][kDim + 2];

    // The 4 queries, scaled into log2 units.
    for (int i = threadIdx.x; i < kServed * kDim; i += blockDim.x) {
        const float x = q[((size_t)s * kQueryHeads + h0) * kDim + i] * (0.125f * kLog2e);
        reinterpret_cast<float*>(qS)[i] = x;
    }
    float slope[kServed];
#pragma unroll
    for (int hh = 0; hh < kServed; ++hh)
        slope[hh] = alibiSlopes != nullptr ? alibiSlopes[h0 + hh] * kLog2e : 0.0f;
    __syncthreads();

    const int* table = blockTable + (size_t)s * maxBlocksPerSeq;
    const int slot = lane % kBlockTokens;
    const int half = lane / kBlockTokens;
    float m[kServed], l[kServed], acc[kServed][2];
#pragma unroll
    for (int hh = 0; hh < kServed; ++hh) {
        m[hh] = -INFINITY;
        l[hh] = 0.0f;
        acc[hh][0] = acc[hh][1] = 0.0f;
    }

    const int firstBlock = jBegin / kBlockTokens + warp;
    const int endBlock = (jEnd + kBlockTokens - 1) / kBlockTokens;
    for (int b = firstBlock; b < endBlock; b += kWarps) {
        Tile cur;
        loadTile(cur, kCache, vCache, (size_t)table[b], g, lane);
        const int j = b * kBlockTokens + slot;
        const bool valid = j < jEnd;
        // Scores of this lane's slot: its 32 dims, then the other half-warp's.
        float sc[kServed];
#pragma unroll
        for (int hh = 0; hh < kServed; ++hh) {
            float dot = 0.0f;
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                const float4 qv = qS[hh][half + 2 * i];
                const float4 kv = cur.k[i];
                dot = fmaf(qv.x, kv.x, dot);
                dot = fmaf(qv.y, kv.y, dot);
                dot = fmaf(qv.z, kv.z, dot);
                dot = fmaf(qv.w, kv.w, dot);
            }
            dot += __shfl_xor_sync(0xffffffffu, dot, 16);
            if (alibiSlopes != nullptr) dot += slope[hh] * (float)(j - (len - 1));
            sc[hh] = valid ? dot : -INFINITY;
        }
        // One online-softmax step per head for these 16 keys.
#pragma unroll
        for (int hh = 0; hh < kServed; ++hh) {
            float blockMax = sc[hh];
#pragma unroll
            for (int off = 8; off > 0; off >>= 1) blockMax = fmaxf(blockMax, __shfl_xor_sync(0xffffffffu, blockMax, off));
            const float mNew = fmaxf(m[hh], blockMax);
            const float alpha = exp2f(m[hh] - mNew);
            const float p = exp2f(sc[hh] - mNew);
            if (half == 0) pS[warp][hh][slot] = p;
            float sum = p;
#pragma unroll
            for (int off = 8; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
            l[hh] = alpha * l[hh] + sum;
            acc[hh][0] *= alpha;
            acc[hh][1] *= alpha;
            m[hh] = mNew;
        }
        __syncwarp();
        // P V: V rows 2*lane (cur.v[0..3]) and 2*lane+1 (cur.v[4..7]); masked
        // slots hold NaN in the cache and weigh 0, so they are skipped.
        const bool full = b * kBlockTokens + kBlockTokens <= jEnd;
#pragma unroll
        for (int hh = 0; hh < kServed; ++hh) {
            const float4* p4 = reinterpret_cast<const float4*>(pS[warp][hh]);
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                const float4 p = p4[c];
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int o = 4 * c + e;
                    const float w = component(p, e);
                    const float va = component(cur.v[c], e);
                    const float vb = component(cur.v[4 + c], e);
                    const bool use = full || b * kBlockTokens + o < jEnd;
                    acc[hh][0] = fmaf(w, use ? va : 0.0f, acc[hh][0]);
                    acc[hh][1] = fmaf(w, use ? vb : 0.0f, acc[hh][1]);
                }
            }
        }
        __syncwarp();
    }

    // Merge the 4 warps' states: lane 0 keeps m and l, every lane its 2 dims.
#pragma unroll
    for (int hh = 0; hh < kServed; ++hh) {
        mergeS[warp][hh][2 * lane] = acc[hh][0];
        mergeS[warp][hh][2 * lane + 1] = acc[hh][1];
        if (lane == 0) {
            mergeS[warp][hh][kDim] = m[hh];
            mergeS[warp][hh][kDim + 1] = l[hh];
        }
    }
    __syncthreads();
    // Threads 0..63 finish the head's 64 dims.
    const int d = threadIdx.x % kDim;
    for (int hh = threadIdx.x / kDim; hh < kServed; hh += blockDim.x) {
        float mAll = -INFINITY;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) mAll = fmaxf(mAll, mergeS[w][hh][kDim]);
        float lAll = 0.0f, o = 0.0f;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) {
            const float mw = mergeS[w][hh][kDim];
            // A warp that had no cache block of this partition has m = -inf.
            const float f = mw == -INFINITY ? 0.0f : exp2f(mw - mAll);
            lAll += f * mergeS[w][hh][kDim + 1];
            o += f * mergeS[w][hh][d];
        }
        const int h = h0 + hh;
        out[((size_t)s * kQueryHeads + h) * kDim + d] = o / lAll;
    }
}
