// flashprof's reference solution for the FP8 paged-prefill lab: bf16 tensor
// cores (mma.sync m16n8k16, fp32 accumulation), the same ABI as the starter.
//
// Shape of the work. One block owns 32 new tokens of one sequence and one KV
// group (grid=kv_group): 8 warps, warp w serving query head 4g + (w & 3) for
// rows 16 (w >> 2) .. +15, so one dequantised K/V tile in shared memory
// feeds all four heads that read it. Each warp keeps its 16 query rows as
// mma A fragments in registers (loaded once from global memory), its 16 x 128
// output accumulators and one softmax state per row.
//
// Keys are walked in tiles of 32, aligned to pairs of cache blocks. A tile
// inside the cached context is two physical blocks: one table lookup each,
// then every thread reads 16 contiguous K bytes (16 dims of one key) and 16
// contiguous V bytes (16 slots of one dim), decodes them with the hardware's
// FP8-pair conversion, multiplies by kScale or vScale and stores bf16: K as
// K[key][dim], V as V^T[dim][key], the B operands of the two products. Tiles
// that reach past the context take those positions from kNew / vNew and
// zero-fill past the sequence, so no NaN byte of an unused slot ever enters
// a product (a masked key's probability is 0, but 0 * NaN is NaN).
//
// Per tile: S = Q K^T (8 k-steps x 4 key columns of mma), scale, ALiBi and
// the mask (causal and window) in fp32, one online-softmax step per row
// (max and sum reduced over the 4 lanes that share a row), P rounded to
// bf16 straight from the S accumulators into A fragments, O += P V (2
// k-steps x 16 dim columns). A block visits only the tiles its rows can see.
// The arithmetic is the seed's (bf16 operands, fp32 sums), which uses well
// under the lab's tolerance (docs/labs/paged-prefill-fp8.md has the figures).
//
// @flashprof lab=paged-prefill-fp8 rows_per_block=32 threads=256 dynamic_smem=0 grid=kv_group

#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

namespace {

constexpr int kQueryHeads = 32;
constexpr int kKvHeads = 8;
constexpr int kGroup = kQueryHeads / kKvHeads;
constexpr int kDim = 128;
constexpr int kBlockTokens = 16;
constexpr int kPack = 16;
constexpr int kRows = 32;          // new tokens per block
constexpr int kTile = 32;          // keys per tile: two cache blocks
constexpr int kThreads = 256;
constexpr int kKStride = kDim + 8;  // bf16 per staged key row (bank spread)
constexpr int kVStride = kTile + 8; // bf16 per staged V^T row
constexpr float kScale = 0x1.6a09e6p-4f;
constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi)
{
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
}

// Two FP8 bytes (low byte first) as two floats.
__device__ __forceinline__ float2 fp8x2(uint16_t pair, int kvFormat)
{
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(pair, kvFormat == 0 ? __NV_E4M3 : __NV_E5M2);
    return __half22float2(__half2(h));
}

__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads, 2) paged_prefill_fp8(
    const __nv_bfloat16* q, const __nv_bfloat16* kNew, const __nv_bfloat16* vNew,
    const uint8_t* kCache, const uint8_t* vCache,
    const int* blockTable, const int* qStart, const int* seqLen,
    int numSeqs, int maxBlocksPerSeq, int slidingWindow, const float* alibiSlopes,
    float kScaleArg, float vScaleArg, int kvFormat, __nv_bfloat16* out)
{
    __shared__ __align__(16) __nv_bfloat16 ks[kTile * kKStride];
    __shared__ __align__(16) __nv_bfloat16 vt[kDim * kVStride];

    const int s = blockIdx.x;
    const int g = blockIdx.y;
    if (s >= numSeqs) return;
    const int start = qStart[s];
    const int n = qStart[s + 1] - start;
    const int ctx = seqLen[s] - n;
    const int len = ctx + n;
    const int t0 = blockIdx.z * kRows;
    if (t0 >= n) return;
    const int tid = threadIdx.x;
    const int warp = tid >> 5, lane = tid & 31;
    const int head = g * kGroup + (warp & 3);
    const int rowBase = t0 + 16 * (warp >> 2);  // this warp's first token
    const int quad = lane >> 2, pairIdx = lane & 3;
    const float slope = alibiSlopes != nullptr ? alibiSlopes[head] * kLog2e : 0.0f;

    // Query A fragments: rows quad and quad + 8 of the warp's 16, 8 k-steps.
    uint32_t qa[8][4];
    {
        const int ra = min(rowBase + quad, n - 1), rb = min(rowBase + quad + 8, n - 1);
        const uint32_t* qr0 = reinterpret_cast<const uint32_t*>(q + ((size_t)(start + ra) * kQueryHeads + head) * kDim);
        const uint32_t* qr1 = reinterpret_cast<const uint32_t*>(q + ((size_t)(start + rb) * kQueryHeads + head) * kDim);
        for (int kk = 0; kk < 8; ++kk) {
            qa[kk][0] = qr0[kk * 8 + pairIdx];
            qa[kk][1] = qr1[kk * 8 + pairIdx];
            qa[kk][2] = qr0[kk * 8 + 4 + pairIdx];
            qa[kk][3] = qr1[kk * 8 + 4 + pairIdx];
        }
    }
    // The positions of this thread's two rows (a row past n is computed, never stored).
    const int pos0 = ctx + rowBase + quad, pos1 = pos0 + 8;

    float o[16][4];
    for (int c = 0; c < 16; ++c) o[c][0] = o[c][1] = o[c][2] = o[c][3] = 0.0f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;

    const int tLast = min(t0 + kRows, n) - 1;
    const int jFirst = slidingWindow > 0 ? max(0, ctx + t0 - slidingWindow + 1) : 0;
    const int jLast = ctx + tLast;
    const size_t groupBytes = (size_t)kDim * kBlockTokens;  // one block's K (or V) of one KV head

    for (int tile = jFirst / kTile; tile * kTile <= jLast; ++tile) {
        const int p0 = tile * kTile;
        // ---- stage K and V^T of positions p0 .. p0 + 31 as bf16 ----
        {
            const int half = tid >> 7;  // which cache block of the tile
            const int off = (tid & 127) * 16;
            const int hp0 = p0 + half * kBlockTokens;
            // K: 16 dims (chunk off / 256) of slot (off % 256) / 16.
            const int kChunk = off >> 8, kSlot = (off >> 4) & 15;
            const int kPos = hp0 + kSlot;
            __nv_bfloat16* kDst = ks + (half * kBlockTokens + kSlot) * kKStride + kChunk * kPack;
            // V: 16 slots of dim off / 16.
            const int vDim = off >> 4;
            __nv_bfloat16* vDst = vt + vDim * kVStride + half * kBlockTokens;
            if (hp0 + kBlockTokens <= ctx) {
                const size_t b = (size_t)blockTable[(size_t)s * maxBlocksPerSeq + hp0 / kBlockTokens];
                const uint4 kb = *reinterpret_cast<const uint4*>(kCache + (b * kKvHeads + g) * groupBytes + off);
                const uint4 vb = *reinterpret_cast<const uint4*>(vCache + (b * kKvHeads + g) * groupBytes + off);
                const uint32_t kw[4] = {kb.x, kb.y, kb.z, kb.w}, vw[4] = {vb.x, vb.y, vb.z, vb.w};
                uint32_t kOut[8], vOut[8];
                for (int e = 0; e < 4; ++e) {
                    const float2 k01 = fp8x2((uint16_t)(kw[e] & 0xFFFF), kvFormat);
                    const float2 k23 = fp8x2((uint16_t)(kw[e] >> 16), kvFormat);
                    kOut[2 * e] = pack_bf16(k01.x * kScaleArg, k01.y * kScaleArg);
                    kOut[2 * e + 1] = pack_bf16(k23.x * kScaleArg, k23.y * kScaleArg);
                    const float2 v01 = fp8x2((uint16_t)(vw[e] & 0xFFFF), kvFormat);
                    const float2 v23 = fp8x2((uint16_t)(vw[e] >> 16), kvFormat);
                    vOut[2 * e] = pack_bf16(v01.x * vScaleArg, v01.y * vScaleArg);
                    vOut[2 * e + 1] = pack_bf16(v23.x * vScaleArg, v23.y * vScaleArg);
                }
                reinterpret_cast<uint4*>(kDst)[0] = make_uint4(kOut[0], kOut[1], kOut[2], kOut[3]);
                reinterpret_cast<uint4*>(kDst)[1] = make_uint4(kOut[4], kOut[5], kOut[6], kOut[7]);
                reinterpret_cast<uint4*>(vDst)[0] = make_uint4(vOut[0], vOut[1], vOut[2], vOut[3]);
                reinterpret_cast<uint4*>(vDst)[1] = make_uint4(vOut[4], vOut[5], vOut[6], vOut[7]);
            } else {
                // The context's end or the new tokens: position by position.
                const bool cached = hp0 < ctx;
                const size_t b = cached ? (size_t)blockTable[(size_t)s * maxBlocksPerSeq + hp0 / kBlockTokens] : 0;
                for (int e = 0; e < 16; ++e) {
                    float kv = 0.0f;
                    if (kPos < ctx) {
                        kv = fp8x2(kCache[(b * kKvHeads + g) * groupBytes + off + e], kvFormat).x * kScaleArg;
                    } else if (kPos < len) {
                        kv = __bfloat162float(kNew[((size_t)(start + kPos - ctx) * kKvHeads + g) * kDim + kChunk * kPack + e]);
                    }
                    kDst[e] = __float2bfloat16_rn(kv);
                    const int vPos = hp0 + e;
                    float vv = 0.0f;
                    if (vPos < ctx) {
                        vv = fp8x2(vCache[(b * kKvHeads + g) * groupBytes + off + e], kvFormat).x * vScaleArg;
                    } else if (vPos < len) {
                        vv = __bfloat162float(vNew[((size_t)(start + vPos - ctx) * kKvHeads + g) * kDim + vDim]);
                    }
                    vDst[e] = __float2bfloat16_rn(vv);
                }
            }
        }
        __syncthreads();

        // ---- S = Q K^T for the warp's 16 rows and the tile's 32 keys ----
        float sc[4][4];
        for (int c = 0; c < 4; ++c) sc[c][0] = sc[c][1] = sc[c][2] = sc[c][3] = 0.0f;
        for (int kk = 0; kk < 8; ++kk) {
            for (int c = 0; c < 4; ++c) {
                const __nv_bfloat16* kr = ks + (c * 8 + quad) * kKStride + kk * 16 + 2 * pairIdx;
                const uint32_t b0 = *reinterpret_cast<const uint32_t*>(kr);
                const uint32_t b1 = *reinterpret_cast<const uint32_t*>(kr + 8);
                mma_bf16(sc[c], qa[kk], b0, b1);
            }
        }
        // Scale (log2 units), bias, mask; row maxima.
        float tileMax0 = -INFINITY, tileMax1 = -INFINITY;
        for (int c = 0; c < 4; ++c) {
            for (int e = 0; e < 4; ++e) {
                const int j = p0 + c * 8 + 2 * pairIdx + (e & 1);
                const int i = e < 2 ? pos0 : pos1;
                const bool visible = j <= i && (slidingWindow <= 0 || i - j < slidingWindow);
                float v = sc[c][e] * (kScale * kLog2e) + slope * (float)(j - i);
                v = visible ? v : -INFINITY;
                sc[c][e] = v;
                if (e < 2) tileMax0 = fmaxf(tileMax0, v); else tileMax1 = fmaxf(tileMax1, v);
            }
        }
        for (int off = 1; off < 4; off <<= 1) {
            tileMax0 = fmaxf(tileMax0, __shfl_xor_sync(0xffffffffu, tileMax0, off));
            tileMax1 = fmaxf(tileMax1, __shfl_xor_sync(0xffffffffu, tileMax1, off));
        }
        const float mNew0 = fmaxf(m0, tileMax0), mNew1 = fmaxf(m1, tileMax1);
        // A row that has seen nothing yet keeps m = -inf; its terms are all 0.
        const float base0 = mNew0 == -INFINITY ? 0.0f : mNew0;
        const float base1 = mNew1 == -INFINITY ? 0.0f : mNew1;
        const float alpha0 = exp2f(m0 - base0), alpha1 = exp2f(m1 - base1);
        m0 = mNew0;
        m1 = mNew1;
        float sum0 = 0.0f, sum1 = 0.0f;
        uint32_t pa[2][4];
        for (int c = 0; c < 4; ++c) {
            const float e0 = exp2f(sc[c][0] - base0), e1 = exp2f(sc[c][1] - base0);
            const float e2 = exp2f(sc[c][2] - base1), e3 = exp2f(sc[c][3] - base1);
            sum0 += e0 + e1;
            sum1 += e2 + e3;
            // S accumulator layout = A fragment layout: key columns c pair up into k16 steps.
            pa[c >> 1][(c & 1) * 2 + 0] = pack_bf16(e0, e1);
            pa[c >> 1][(c & 1) * 2 + 1] = pack_bf16(e2, e3);
        }
        for (int off = 1; off < 4; off <<= 1) {
            sum0 += __shfl_xor_sync(0xffffffffu, sum0, off);
            sum1 += __shfl_xor_sync(0xffffffffu, sum1, off);
        }
        l0 = l0 * alpha0 + sum0;
        l1 = l1 * alpha1 + sum1;
        for (int c = 0; c < 16; ++c) {
            o[c][0] *= alpha0;
            o[c][1] *= alpha0;
            o[c][2] *= alpha1;
            o[c][3] *= alpha1;
        }
        // ---- O += P V ----
        for (int kk = 0; kk < 2; ++kk) {
            for (int c = 0; c < 16; ++c) {
                const __nv_bfloat16* vr = vt + (c * 8 + quad) * kVStride + kk * 16 + 2 * pairIdx;
                const uint32_t b0 = *reinterpret_cast<const uint32_t*>(vr);
                const uint32_t b1 = *reinterpret_cast<const uint32_t*>(vr + 8);
                mma_bf16(o[c], pa[kk], b0, b1);
            }
        }
        __syncthreads();
    }

    // ---- out = O / l, as bf16 ----
    const int r0 = rowBase + quad, r1 = r0 + 8;
    const float inv0 = 1.0f / l0, inv1 = 1.0f / l1;
    for (int c = 0; c < 16; ++c) {
        const int d = c * 8 + 2 * pairIdx;
        if (r0 < n) {
            *reinterpret_cast<uint32_t*>(out + ((size_t)(start + r0) * kQueryHeads + head) * kDim + d) =
                pack_bf16(o[c][0] * inv0, o[c][1] * inv0);
        }
        if (r1 < n) {
            *reinterpret_cast<uint32_t*>(out + ((size_t)(start + r1) * kQueryHeads + head) * kDim + d) =
                pack_bf16(o[c][2] * inv1, o[c][3] * inv1);
        }
    }
}
