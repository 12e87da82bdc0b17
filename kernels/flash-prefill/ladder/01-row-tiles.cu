// Ladder rung 1: tile the rows.
//
// The idea it adds: the starter's 64 rows of a block read the same keys, yet
// each row fetches every key from memory on its own. Here the block stages 64
// keys at a time (a K tile and a V tile) in shared memory once, and all of its
// rows read that copy. Memory traffic for K/V falls 64-fold.
//
// Everything else is still the starter's arithmetic: one warp per query row,
// lane l holds dims l and l+32, the dot product is a shuffle butterfly, and
// the running max, denominator and accumulators are rescaled by expf on every
// key. A warp walks its 8 rows side by side (each key is read from shared
// memory once for all 8), since every row now advances one tile at a time.
//
// Measured on the H200 at C = P = 2048: 14.228 ms, 2.0x the starter's 28.6 ms (docs/LADDER.md).
//
// @flashprof rows_per_block=64 threads=256 grid=head

namespace {

constexpr int kQueryHeads = 32;
constexpr int kKvHeads = 8;
constexpr int kHeadsPerGroup = kQueryHeads / kKvHeads;
constexpr int kDim = 64;

constexpr int kRowsPerBlock = 64;
constexpr int kThreads = 256;
constexpr int kRowsPerWarp = kRowsPerBlock / (kThreads / 32);
constexpr int kTileKeys = 64;

// Copies keys [tileStart, tileStart + 64) of one KV head into `tile`; keys at
// or past `keyEnd` become zeros, so nothing past the sequence is ever read.
__device__ __forceinline__ void stageTile(float (*tile)[kDim], const float* cache, int kvHead,
                                          int tileStart, int keyEnd)
{
    constexpr int kChunksPerKey = kDim / 4;
    for (int chunk = threadIdx.x; chunk < kTileKeys * kChunksPerKey; chunk += kThreads) {
        const int key = chunk / kChunksPerKey;
        const int dim = (chunk % kChunksPerKey) * 4;
        float4 value = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (tileStart + key < keyEnd)
            value = *reinterpret_cast<const float4*>(
                cache + ((size_t)(tileStart + key) * kKvHeads + kvHead) * kDim + dim);
        *reinterpret_cast<float4*>(&tile[key][dim]) = value;
    }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
    attention_prefill(const float* q, const float* kCache, const float* vCache, float* out,
                      int chunkLen, int prefixLen)
{
    __shared__ __align__(16) float kTile[kTileKeys][kDim];
    __shared__ __align__(16) float vTile[kTileKeys][kDim];

    const int head = blockIdx.y;
    const int kvHead = head / kHeadsPerGroup;
    const int warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    const int firstRow = blockIdx.x * kRowsPerBlock;
    const int rowsHere = min(kRowsPerBlock, chunkLen - firstRow);
    // One past the last key any row of this block may see.
    const int keyEnd = prefixLen + firstRow + rowsHere;

    float q0[kRowsPerWarp], q1[kRowsPerWarp];
    float m[kRowsPerWarp], l[kRowsPerWarp], acc0[kRowsPerWarp], acc1[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
        const int row = firstRow + warp * kRowsPerWarp + r;
        // A row past the chunk computes on zeros and is never stored.
        const bool inChunk = row < chunkLen;
        const float* qRow = q + ((size_t)row * kQueryHeads + head) * kDim;
        q0[r] = inChunk ? qRow[lane] : 0.0f;
        q1[r] = inChunk ? qRow[lane + 32] : 0.0f;
        m[r] = -INFINITY;
        l[r] = 0.0f;
        acc0[r] = 0.0f;
        acc1[r] = 0.0f;
    }

    for (int tileStart = 0; tileStart < keyEnd; tileStart += kTileKeys) {
        __syncthreads();  // every warp is done with the previous tile
        stageTile(kTile, kCache, kvHead, tileStart, keyEnd);
        stageTile(vTile, vCache, kvHead, tileStart, keyEnd);
        __syncthreads();

        const int keysHere = min(kTileKeys, keyEnd - tileStart);
        for (int k = 0; k < keysHere; ++k) {
            const int key = tileStart + k;
            const float k0 = kTile[k][lane], k1 = kTile[k][lane + 32];
            const float v0 = vTile[k][lane], v1 = vTile[k][lane + 32];
#pragma unroll
            for (int r = 0; r < kRowsPerWarp; ++r) {
                float dot = q0[r] * k0 + q1[r] * k1;
                for (int offset = 16; offset > 0; offset >>= 1)
                    dot += __shfl_xor_sync(0xffffffffu, dot, offset);
                // The whole warp serves one row, so this branch never diverges.
                if (key > prefixLen + firstRow + warp * kRowsPerWarp + r) continue;
                const float s = dot * 0.125f;
                const float mNew = fmaxf(m[r], s);
                const float alpha = expf(m[r] - mNew);
                const float p = expf(s - mNew);
                l[r] = alpha * l[r] + p;
                acc0[r] = alpha * acc0[r] + p * v0;
                acc1[r] = alpha * acc1[r] + p * v1;
                m[r] = mNew;
            }
        }
    }

#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
        const int row = firstRow + warp * kRowsPerWarp + r;
        if (row >= chunkLen) continue;
        float* outRow = out + ((size_t)row * kQueryHeads + head) * kDim;
        outRow[lane] = acc0[r] / l[r];
        outRow[lane + 32] = acc1[r] / l[r];
    }
}
