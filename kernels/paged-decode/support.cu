// flashprof's trusted kernel for the paged-decode lab, compiled next to the
// student's.
//
// paged_decode_oracle_f64 recomputes paged decode in double precision on the
// GPU, for the timing shape (64 sequences up to 8192 keys), where the CPU
// oracle is too slow to check every timed launch; like the other labs' GPU
// oracles it is proven against the CPU oracle on the hazard cases before any
// speedup is reported. It takes paged_decode's arguments in the same order,
// the workspace and semaphores included (the engine passes every argument;
// this kernel never touches them), with doubles for the output.
//
// Launch: one warp per (listed sequence, query head), any block size that is
// a multiple of 32, at least rowCount * 32 warps (extra warps return). A row
// here is a sequence: with a row list it computes only those sequences,
// written one after another in list order; a null list means every one.
// Lane l keeps dims l and l+32. It takes the two-pass route (the max over
// all scores, then the weighted sum) and looks every key up through the
// block table one at a time: no partitions, no online softmax, nothing it
// shares with the kernels it judges.

#define DO_QH 32
#define DO_KVH 8
#define DO_D 64
#define DO_B 16
#define DO_X 4

namespace {

__device__ double oracleKey(const float* kCache, const int* row, int g, int j, int d)
{
    const size_t b = (size_t)row[j / DO_B];
    return (double)kCache[(((b * DO_KVH + g) * (DO_D / DO_X) + d / DO_X) * DO_B + j % DO_B) * DO_X + d % DO_X];
}

__device__ double oracleValue(const float* vCache, const int* row, int g, int j, int d)
{
    const size_t b = (size_t)row[j / DO_B];
    return (double)vCache[((b * DO_KVH + g) * DO_D + d) * DO_B + j % DO_B];
}

__device__ double oracleScore(const float* kCache, const int* row, int g, int j, double qa, double qb,
                              int lane, double slope, int last)
{
    double sc = qa * oracleKey(kCache, row, g, j, lane) + qb * oracleKey(kCache, row, g, j, lane + 32);
    for (int offset = 16; offset > 0; offset >>= 1) sc += __shfl_xor_sync(0xffffffffu, sc, offset);
    return sc * 0.125 + slope * (double)(j - last);
}

}  // namespace

extern "C" __global__ void paged_decode_oracle_f64(const float* q, const float* kCache, const float* vCache,
                                                   const int* blockTable, const int* seqLen, int numSeqs,
                                                   int maxBlocksPerSeq, const float* alibiSlopes,
                                                   float* workspace, unsigned* semaphores, double* out,
                                                   const int* rowList, int rowCount)
{
    const long long warpId = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    const int total = rowList != nullptr ? rowCount : numSeqs;
    if (warpId >= (long long)total * DO_QH) return;
    const int listed = (int)(warpId / DO_QH);
    const int s = rowList != nullptr ? rowList[listed] : listed;
    const int h = (int)(warpId % DO_QH);
    const int g = h / (DO_QH / DO_KVH);
    const int len = seqLen[s];
    const int* row = blockTable + (size_t)s * maxBlocksPerSeq;
    const double slope = alibiSlopes != nullptr ? (double)alibiSlopes[h] : 0.0;
    const float* qRow = q + ((size_t)s * DO_QH + h) * DO_D;
    const double qa = qRow[lane];
    const double qb = qRow[lane + 32];

    double best = -1.0e300;
    for (int j = 0; j < len; ++j) best = fmax(best, oracleScore(kCache, row, g, j, qa, qb, lane, slope, len - 1));
    double weightSum = 0.0, accA = 0.0, accB = 0.0;
    for (int j = 0; j < len; ++j) {
        const double w = exp(oracleScore(kCache, row, g, j, qa, qb, lane, slope, len - 1) - best);
        weightSum += w;
        accA += w * oracleValue(vCache, row, g, j, lane);
        accB += w * oracleValue(vCache, row, g, j, lane + 32);
    }
    double* outRow = out + ((size_t)listed * DO_QH + h) * DO_D;
    outRow[lane] = accA / weightSum;
    outRow[lane + 32] = accB / weightSum;
}

// The read-only streaming probe: sums `count` floats (a multiple of 4,
// 16-byte aligned) with 16-byte streaming loads and writes one float per
// block, so that its time is the DRAM read rate and nothing else. Beside a
// device-to-device copy it is the roof the lab's bandwidth share is taken of
// (the larger of the two: decode only reads).
extern "C" __global__ void paged_decode_read_probe(const float* data, unsigned long long count, float* sums)
{
    const float4* v = reinterpret_cast<const float4*>(data);
    const unsigned long long threads = (unsigned long long)gridDim.x * blockDim.x;
    float acc = 0.0f;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < count / 4; i += threads) {
        const float4 x = __ldcs(v + i);
        acc += x.x + x.y + x.z + x.w;
    }
    for (int offset = 16; offset > 0; offset >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, offset);
    if (threadIdx.x % 32 == 0) atomicAdd(sums + blockIdx.x, acc);
}
