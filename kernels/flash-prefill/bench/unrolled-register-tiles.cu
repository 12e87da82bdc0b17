// A kernel that is cheap to write and expensive to optimise, kept for
// `flashprof bench`: it is what a student's first register-tiled attempt
// often looks like, and NVVM's optimizer takes seconds over it.
//
// One block owns 16 query rows of one KV group, that is 64 query vectors
// (16 rows x the 4 heads sharing a KV head), one per thread. Each thread
// keeps its whole query vector and its whole output accumulator in
// registers (64 + 64 floats) and walks the visible keys in tiles of 64
// staged in shared memory. Both inner products are fully unrolled: a tile
// is 64 x 64 FMAs for the scores and as many for P V, straight-line code
// the optimizer schedules and allocates registers for in one piece.
// Correct on every case, slower than the reference: occupancy is low and
// every thread reads each K and V element from shared memory.
//
// Scores are kept in log2 units (1/8 and log2(e) are folded into Q).
//
// @flashprof rows_per_block=16 threads=64 grid=kv_group

namespace {

constexpr int kQueryHeads = 32;
constexpr int kKvHeads = 8;
constexpr int kHeadsPerGroup = kQueryHeads / kKvHeads;
constexpr int kDim = 64;
constexpr int kRowsPerBlock = 16;
constexpr int kThreads = kRowsPerBlock * kHeadsPerGroup;
constexpr int kTileKeys = 64;
constexpr int kPartKeys = 16;
constexpr float kScoreScale = 0.125f * 1.4426950408889634f;

static_assert(kThreads == kDim, "one thread per dim when staging a key");

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
    attention_prefill(const float* q, const float* kCache, const float* vCache, float* out,
                      int chunkLen, int prefixLen)
{
    __shared__ float kTile[kTileKeys][kDim];
    __shared__ float vTile[kTileKeys][kDim];

    const int kvHead = blockIdx.y;
    const int firstRow = blockIdx.x * kRowsPerBlock;
    const int vector = threadIdx.x;
    const int row = firstRow + vector / kHeadsPerGroup;
    const int head = kvHead * kHeadsPerGroup + vector % kHeadsPerGroup;
    const bool live = row < chunkLen;

    float qReg[kDim];
    float acc[kDim];
    const float* qRow = q + ((size_t)(live ? row : 0) * kQueryHeads + head) * kDim;
#pragma unroll
    for (int d = 0; d < kDim; ++d) {
        qReg[d] = live ? qRow[d] * kScoreScale : 0.0f;
        acc[d] = 0.0f;
    }
    float m = -INFINITY;
    float l = 0.0f;

    // One past the last key this thread's row may see, and this block's.
    const int visibleEnd = prefixLen + row + 1;
    const int lastRow = min(firstRow + kRowsPerBlock, chunkLen) - 1;
    const int blockEnd = prefixLen + lastRow + 1;

    for (int tileStart = 0; tileStart < blockEnd; tileStart += kTileKeys) {
        __syncthreads();  // every thread is done with the previous tile
        for (int k = 0; k < kTileKeys; ++k) {
            const int key = tileStart + k;
            const bool inRange = key < blockEnd;
            const size_t at = ((size_t)key * kKvHeads + kvHead) * kDim + threadIdx.x;
            kTile[k][threadIdx.x] = inRange ? kCache[at] : 0.0f;
            vTile[k][threadIdx.x] = inRange ? vCache[at] : 0.0f;
        }
        __syncthreads();

        // The tile is taken 16 keys at a time, each a fully unrolled
        // online-softmax step over 16 scores and 16 x 64 FMAs of P V.
#pragma unroll 1
        for (int part = 0; part < kTileKeys; part += kPartKeys) {
            float score[kPartKeys];
            float partMax = -INFINITY;
#pragma unroll
            for (int k = 0; k < kPartKeys; ++k) {
                float dot = 0.0f;
#pragma unroll
                for (int d = 0; d < kDim; ++d) dot = fmaf(qReg[d], kTile[part + k][d], dot);
                score[k] = tileStart + part + k < visibleEnd ? dot : -INFINITY;
                partMax = fmaxf(partMax, score[k]);
            }
            // Every row sees key 0, so after the first step m is finite; a
            // step wholly past this row leaves alpha at 1 and adds nothing.
            const float mNew = fmaxf(m, partMax);
            const float alpha = exp2f(m - mNew);
            l *= alpha;
#pragma unroll
            for (int d = 0; d < kDim; ++d) acc[d] *= alpha;
#pragma unroll
            for (int k = 0; k < kPartKeys; ++k) {
                const float p = exp2f(score[k] - mNew);
                l += p;
#pragma unroll
                for (int d = 0; d < kDim; ++d) acc[d] = fmaf(p, vTile[part + k][d], acc[d]);
            }
            m = mNew;
        }
    }

    if (!live) return;
    float* outRow = out + ((size_t)row * kQueryHeads + head) * kDim;
    const float invL = 1.0f / l;
#pragma unroll
    for (int d = 0; d < kDim; ++d) outRow[d] = acc[d] * invL;
}
