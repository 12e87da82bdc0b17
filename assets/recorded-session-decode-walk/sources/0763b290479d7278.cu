// flashprof's reference solution for the paged-decode lab: split-K paged
// decode in plain fp32, near the DRAM roof.
//
// Decode does about 2 flops per cached byte when each KV head is read once
// for its 4 query heads, so the work is bytes: read every K/V byte of every
// sequence once, with enough loads in flight, and spread the long sequences
// over the whole GPU.
//
// Grid (8 KV heads, numSeqs, 16 partitions), 128 threads. Block (g, s, z)
// serves the 4 query heads of KV head g over partition z of sequence s: keys
// z*P .. z*P+P-1 with P = max(512, ceil(seqLen / 16) rounded up to whole
// cache blocks), the lab's partition rule; blocks past the sequence's end
// return at once. Each of the 4 warps takes every 4th cache block of the
// partition. A cache block of one KV head is 4 KiB of K ([16 dim groups][16
// slots][4]) and 4 KiB of V ([64 dims][16 slots]), both contiguous: lane l
// loads K float4s l, l+32, ..., l+224 (slot l % 16, dim groups l / 16 + 2i)
// and V rows 2l and 2l+1, so every load instruction of the warp is 512
// contiguous bytes. What keeps enough bytes in flight is occupancy: at most
// 128 registers a thread (__launch_bounds__(128, 4)), so 4 blocks (16 warps)
// share an SM, each warp with a whole cache block's 8 KiB of loads issued at
// once. (Loading the next cache block ahead into registers was measured too:
// 168 registers, 3 blocks an SM, 78% of the roof against this file's 83%.)
//
// Per cache block: each lane dots its 32 dims of K with the 4 scaled queries
// (kept in shared memory, read as broadcast float4s), one shuffle across the
// half-warps completes the 16 scores of each head, slots past the sequence's
// end (NaN in the cache) are masked, a shuffle max gives the block's max,
// and one online-softmax step (a rescale per 16 keys) takes the 16
// probabilities, shared through a small per-warp buffer, into the lane's 8
// accumulators (4 heads x dims 2l, 2l+1). Only the block holding a
// sequence's end zeroes its V slots past the end (NaN in the cache) before
// P V; full blocks run no select at all. Scores are in log2 units (1/8 and
// log2(e) folded into the query, the ALiBi slope times log2(e)), so a
// probability is one exp2f.
//
// The 4 warps merge their states through shared memory. A sequence of one
// partition writes out directly. Otherwise the partition writes its
// normalized output, max and sum into its workspace slot, fences, and bumps
// the group's semaphore (semaphores[s][4g]); the block that bumps it last
// combines the partitions the sequence used: out = sum_p e^(m_p - m) l_p o_p
// / sum_p e^(m_p - m) l_p. The workspace arrives NaN and the semaphores zero
// before every launch, as the contract promises, so nothing is reset here.
//
// Measured on an H200 (scripts/decode-kernels.sh, docs/labs/paged-decode.md):
// 0.266 ms at the timing shape, 3.50 TB/s of compulsory bytes, 82.6% of the
// measured device-to-device copy rate; the starter takes 3.22 ms.
//
// @flashprof lab=paged-decode threads=128 grid=kv_group splits=16

namespace {

constexpr int kQueryHeads = 32;
constexpr int kKvHeads = 8;
constexpr int kGroup = kQueryHeads / kKvHeads;
constexpr int kDim = 64;
constexpr int kBlockTokens = 16;
constexpr int kMinPartition = 512;
constexpr int kMaxSplits = 16;
constexpr int kSlotFloats = kDim + 2;
constexpr int kWarps = 4;
constexpr float kLog2e = 1.4426950408889634f;

// Keys per partition: the lab's rule (src/lab/paged_decode/mod.rs, partition_len).
__device__ __forceinline__ int partitionLen(int len, int splits)
{
    const int perSplit = (len + splits - 1) / splits;
    const int whole = (perSplit + kBlockTokens - 1) / kBlockTokens * kBlockTokens;
    return max(whole, kMinPartition);
}

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

// Zeroes the components of x (keys first .. first+3) at or past end: those
// slots hold NaN in the cache, and 0 * NaN would poison the accumulators.
__device__ __forceinline__ void zeroPast(float4& x, int first, int end)
{
    if (first >= end) x.x = 0.0f;
    if (first + 1 >= end) x.y = 0.0f;
    if (first + 2 >= end) x.z = 0.0f;
    if (first + 3 >= end) x.w = 0.0f;
}

}  // namespace

extern "C" __global__ void __launch_bounds__(128, 4) paged_decode(
    const float* q, const float* kCache, const float* vCache,
    const int* blockTable, const int* seqLen, int numSeqs, int maxBlocksPerSeq,
    const float* alibiSlopes, float* workspace, unsigned* semaphores, float* out)
{
    const int g = blockIdx.x;
    const int s = blockIdx.y;
    const int z = blockIdx.z;
    if (s >= numSeqs) return;
    const int len = seqLen[s];
    const int part = partitionLen(len, gridDim.z);
    const int parts = (len + part - 1) / part;
    if (z >= parts) return;
    const int jBegin = z * part;
    const int jEnd = min(len, jBegin + part);

    const int warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    __shared__ float4 qS[kGroup][kDim / 4];
    __shared__ float pS[kWarps][kGroup][kBlockTokens];
    __shared__ float mergeS[kWarps][kGroup][kDim + 2];
    __shared__ bool lastS;

    // The 4 queries, scaled into log2 units.
    for (int i = threadIdx.x; i < kGroup * kDim; i += blockDim.x) {
        const float x = q[((size_t)s * kQueryHeads + g * kGroup) * kDim + i] * (0.125f * kLog2e);
        reinterpret_cast<float*>(qS)[i] = x;
    }
    float slope[kGroup];
#pragma unroll
    for (int hh = 0; hh < kGroup; ++hh)
        slope[hh] = alibiSlopes != nullptr ? alibiSlopes[g * kGroup + hh] * kLog2e : 0.0f;
    __syncthreads();

    const int* table = blockTable + (size_t)s * maxBlocksPerSeq;
    const int slot = lane % kBlockTokens;
    const int half = lane / kBlockTokens;
    float m[kGroup], l[kGroup], acc[kGroup][2];
#pragma unroll
    for (int hh = 0; hh < kGroup; ++hh) {
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
        float sc[kGroup];
#pragma unroll
        for (int hh = 0; hh < kGroup; ++hh) {
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
        for (int hh = 0; hh < kGroup; ++hh) {
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
        if (b * kBlockTokens + kBlockTokens > jEnd) {
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                zeroPast(cur.v[c], b * kBlockTokens + 4 * c, jEnd);
                zeroPast(cur.v[4 + c], b * kBlockTokens + 4 * c, jEnd);
            }
        }
#pragma unroll
        for (int hh = 0; hh < kGroup; ++hh) {
            const float4* p4 = reinterpret_cast<const float4*>(pS[warp][hh]);
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                const float4 p = p4[c];
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const float w = component(p, e);
                    acc[hh][0] = fmaf(w, component(cur.v[c], e), acc[hh][0]);
                    acc[hh][1] = fmaf(w, component(cur.v[4 + c], e), acc[hh][1]);
                }
            }
        }
        __syncwarp();
    }

    // Merge the 4 warps' states: lane 0 keeps m and l, every lane its 2 dims.
#pragma unroll
    for (int hh = 0; hh < kGroup; ++hh) {
        mergeS[warp][hh][2 * lane] = acc[hh][0];
        mergeS[warp][hh][2 * lane + 1] = acc[hh][1];
        if (lane == 0) {
            mergeS[warp][hh][kDim] = m[hh];
            mergeS[warp][hh][kDim + 1] = l[hh];
        }
    }
    __syncthreads();
    // Thread t finishes dims t % 64 of heads t / 64 and t / 64 + 2.
    const int d = threadIdx.x % kDim;
    for (int hh = threadIdx.x / kDim; hh < kGroup; hh += blockDim.x / kDim) {
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
        const int h = g * kGroup + hh;
        if (parts == 1) {
            out[((size_t)s * kQueryHeads + h) * kDim + d] = o / lAll;
        } else {
            float* slotP = workspace + (((size_t)s * kQueryHeads + h) * kMaxSplits + z) * kSlotFloats;
            slotP[d] = o / lAll;
            if (d == 0) {
                slotP[kDim] = mAll;
                slotP[kDim + 1] = lAll;
            }
        }
    }
    if (parts == 1) return;

    // The last partition to finish combines them all.
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        const unsigned done = atomicAdd(semaphores + (size_t)s * kQueryHeads + g * kGroup, 1u);
        lastS = done == (unsigned)(parts - 1);
    }
    __syncthreads();
    if (!lastS) return;
    __threadfence();
    for (int hh = threadIdx.x / kDim; hh < kGroup; hh += blockDim.x / kDim) {
        const int h = g * kGroup + hh;
        const float* slots = workspace + ((size_t)s * kQueryHeads + h) * kMaxSplits * kSlotFloats;
        float mAll = -INFINITY;
        for (int p = 0; p < parts; ++p) mAll = fmaxf(mAll, __ldcg(slots + p * kSlotFloats + kDim));
        float lAll = 0.0f, o = 0.0f;
        for (int p = 0; p < parts; ++p) {
            const float f = exp2f(__ldcg(slots + p * kSlotFloats + kDim) - mAll) * __ldcg(slots + p * kSlotFloats + kDim + 1);
            lAll += f;
            o += f * __ldcg(slots + p * kSlotFloats + d);
        }
        out[((size_t)s * kQueryHeads + h) * kDim + d] = o / lAll;
    }
}
