// flashprof's trusted kernel for the paged-prefill lab, compiled next to the
// student's.
//
// paged_oracle_f64 recomputes paged prefill in double precision on the GPU,
// for the timing shape, where a CPU oracle would take far too long; like the
// first lab's oracle_f64 it is proven against the CPU oracle on the hazard
// cases before any speedup is reported. It takes the same arguments in the
// same order as paged_prefill, except that it writes doubles.
//
// Launch: one warp per (new token, query head), any block size that is a
// multiple of 32, at least qStart[numSeqs] * 32 warps in all (extra warps
// return). Lane l keeps dims l and l+32. The warp finds its sequence by a
// plain scan of qStart, then takes the two-pass route (max over the visible
// scores, then the weighted sum) and shares no online-softmax logic with the
// kernels it judges. Visibility is written out as the contract states it:
// j <= i and (window off or i - j < W). Every key is looked up one at a time
// through the block table, with no tiling of any kind.
//
// With a row list (two arguments past the entry point's) it computes only
// those rows, written one after another in list order, one warp per (listed
// row, head): what auditing every timed launch on sampled rows needs. A null
// list means every row.

#define PO_QH 32
#define PO_KVH 8
#define PO_D 64
#define PO_B 16
#define PO_X 4

namespace {

// Element d of key j (position in sequence s) of KV head g, from the cache or
// from the new tokens.
__device__ double oracleKey(const float* kNew, const float* kCache, const int* blockTable,
                            int maxBlocksPerSeq, int s, int start, int ctx, int g, int j, int d)
{
    if (j < ctx) {
        const size_t b = (size_t)blockTable[(size_t)s * maxBlocksPerSeq + j / PO_B];
        const int o = j % PO_B;
        return (double)kCache[(((b * PO_KVH + g) * (PO_D / PO_X) + d / PO_X) * PO_B + o) * PO_X + d % PO_X];
    }
    return (double)kNew[((size_t)(start + j - ctx) * PO_KVH + g) * PO_D + d];
}

__device__ double oracleValue(const float* vNew, const float* vCache, const int* blockTable,
                              int maxBlocksPerSeq, int s, int start, int ctx, int g, int j, int d)
{
    if (j < ctx) {
        const size_t b = (size_t)blockTable[(size_t)s * maxBlocksPerSeq + j / PO_B];
        const int o = j % PO_B;
        return (double)vCache[((b * PO_KVH + g) * PO_D + d) * PO_B + o];
    }
    return (double)vNew[((size_t)(start + j - ctx) * PO_KVH + g) * PO_D + d];
}

}  // namespace

extern "C" __global__ void paged_oracle_f64(const float* q, const float* kNew, const float* vNew,
                                            const float* kCache, const float* vCache,
                                            const int* blockTable, const int* qStart, const int* seqLen,
                                            int numSeqs, int maxBlocksPerSeq, int slidingWindow,
                                            const float* alibiSlopes, double* out, const int* rowList,
                                            int rowCount)
{
    const long long warpId = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    const int totalRows = rowList != nullptr ? rowCount : qStart[numSeqs];
    if (warpId >= (long long)totalRows * PO_QH) return;
    const int listed = (int)(warpId / PO_QH);
    const int row = rowList != nullptr ? rowList[listed] : listed;
    const int h = (int)(warpId % PO_QH);
    const int g = h / (PO_QH / PO_KVH);

    int s = 0;
    while (s + 1 < numSeqs && qStart[s + 1] <= row) ++s;
    const int start = qStart[s];
    const int n = qStart[s + 1] - start;
    const int ctx = seqLen[s] - n;
    const int i = ctx + (row - start);
    const double slope = alibiSlopes != nullptr ? (double)alibiSlopes[h] : 0.0;

    const float* qRow = q + ((size_t)row * PO_QH + h) * PO_D;
    const double qa = qRow[lane];
    const double qb = qRow[lane + 32];

    double best = -1.0e300;
    for (int j = 0; j <= i; ++j) {
        if (slidingWindow > 0 && !(i - j < slidingWindow)) continue;
        double sc = qa * oracleKey(kNew, kCache, blockTable, maxBlocksPerSeq, s, start, ctx, g, j, lane) +
                    qb * oracleKey(kNew, kCache, blockTable, maxBlocksPerSeq, s, start, ctx, g, j, lane + 32);
        for (int offset = 16; offset > 0; offset >>= 1) sc += __shfl_xor_sync(0xffffffffu, sc, offset);
        sc = sc * 0.125 + slope * (double)(j - i);
        best = fmax(best, sc);
    }

    double weightSum = 0.0, accA = 0.0, accB = 0.0;
    for (int j = 0; j <= i; ++j) {
        if (slidingWindow > 0 && !(i - j < slidingWindow)) continue;
        double sc = qa * oracleKey(kNew, kCache, blockTable, maxBlocksPerSeq, s, start, ctx, g, j, lane) +
                    qb * oracleKey(kNew, kCache, blockTable, maxBlocksPerSeq, s, start, ctx, g, j, lane + 32);
        for (int offset = 16; offset > 0; offset >>= 1) sc += __shfl_xor_sync(0xffffffffu, sc, offset);
        sc = sc * 0.125 + slope * (double)(j - i);
        const double w = exp(sc - best);
        weightSum += w;
        accA += w * oracleValue(vNew, vCache, blockTable, maxBlocksPerSeq, s, start, ctx, g, j, lane);
        accB += w * oracleValue(vNew, vCache, blockTable, maxBlocksPerSeq, s, start, ctx, g, j, lane + 32);
    }
    double* outRow = out + ((size_t)listed * PO_QH + h) * PO_D;
    outRow[lane] = accA / weightSum;
    outRow[lane + 32] = accB / weightSum;
}
