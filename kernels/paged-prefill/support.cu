// flashprof's trusted kernel for the paged-prefill lab, compiled next to the
// student's.
//
// paged_oracle_f64 recomputes paged prefill in double precision on the GPU,
// for the timing shape, where a CPU oracle would take far too long; every
// timing checks it against the CPU oracle on sampled rows before any speedup
// is reported. It takes the same arguments in the same order as
// paged_prefill, except that it writes doubles, then a row list (null: every
// row; otherwise only the listed rows, one after another in list order: what
// auditing every timed launch on sampled rows needs).
//
// The work is the paged family's tiled body (kernels/paged-family/
// tiled-oracle.cuh, compiled in front of this file), which shares no
// online-softmax code with the kernels it judges: launch it as that file
// says, 256 threads a block, one block per 8 rows and KV head. This file
// only says where element d of a query, key or value is: keys and values
// through the block table for cached positions, from the new tokens after
// them, the K cache packed X = 4 floats to a 16-byte group.

#define PO_QH 32
#define PO_KVH 8
#define PO_D 64
#define PO_B 16
#define PO_X 4

namespace {

struct PagedSource {
    const float* q;
    const float* kNew;
    const float* vNew;
    const float* kCache;
    const float* vCache;
    const int* blockTable;
    int maxBlocksPerSeq;
    double scoreScale;

    __device__ double query(int row, int h, int d) const
    {
        return (double)q[((size_t)row * PO_QH + h) * PO_D + d];
    }

    __device__ double key(int s, int start, int ctx, int g, int j, int d) const
    {
        if (j < ctx) {
            const size_t b = (size_t)blockTable[(size_t)s * maxBlocksPerSeq + j / PO_B];
            const int o = j % PO_B;
            return (double)kCache[(((b * PO_KVH + g) * (PO_D / PO_X) + d / PO_X) * PO_B + o) * PO_X + d % PO_X];
        }
        return (double)kNew[((size_t)(start + j - ctx) * PO_KVH + g) * PO_D + d];
    }

    __device__ double value(int s, int start, int ctx, int g, int j, int d) const
    {
        if (j < ctx) {
            const size_t b = (size_t)blockTable[(size_t)s * maxBlocksPerSeq + j / PO_B];
            const int o = j % PO_B;
            return (double)vCache[((b * PO_KVH + g) * PO_D + d) * PO_B + o];
        }
        return (double)vNew[((size_t)(start + j - ctx) * PO_KVH + g) * PO_D + d];
    }
};

}  // namespace

extern "C" __global__ void __launch_bounds__(tiled_oracle::kThreads)
    paged_oracle_f64(const float* q, const float* kNew, const float* vNew, const float* kCache,
                     const float* vCache, const int* blockTable, const int* qStart, const int* seqLen,
                     int numSeqs, int maxBlocksPerSeq, int slidingWindow, const float* alibiSlopes,
                     double* out, const int* rowList, int rowCount)
{
    const PagedSource source{q, kNew, vNew, kCache, vCache, blockTable, maxBlocksPerSeq, 0.125};
    const tiled_oracle::Batch batch{qStart, seqLen, numSeqs, slidingWindow, alibiSlopes, rowList, rowCount};
    tiled_oracle::attend<PO_QH, PO_KVH, PO_D>(source, batch, out);
}
