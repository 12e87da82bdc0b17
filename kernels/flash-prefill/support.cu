// The flash-prefill lab's trusted float64 reference, compiled once per worker next to the student's.
//
// oracle_f64 recomputes attention in double precision on the GPU. It exists for
// the timing shape (C = P = 2048), where the CPU oracle would take seconds; the
// worker proves it against the CPU oracle on sampled rows of every run before a
// speedup is reported. It takes the plain two-pass route (max, then weighted
// sum) so that it shares no online-softmax logic with the kernels it judges.
//
// With a row list it computes only those rows, written one after another in
// list order: what auditing every timed launch on sampled rows needs. One warp
// per (listed row, head); a null list means every row.

#define ORACLE_HQ 32
#define ORACLE_HKV 8
#define ORACLE_DH 64

extern "C" __global__ void oracle_f64(const float* q, const float* kCache, const float* vCache,
                                      double* out, int chunkLen, int prefixLen, const int* rowList,
                                      int rowCount)
{
    const int warpId = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    const int listed = warpId / ORACLE_HQ;
    const int head = warpId % ORACLE_HQ;
    if (listed >= (rowList != nullptr ? rowCount : chunkLen)) return;
    const int row = rowList != nullptr ? rowList[listed] : listed;
    const int kvHead = head / (ORACLE_HQ / ORACLE_HKV);
    const int lastKey = prefixLen + row;

    const float* qRow = q + ((size_t)row * ORACLE_HQ + head) * ORACLE_DH;
    const double qa = qRow[lane];
    const double qb = qRow[lane + 32];

    double best = -1.0e300;
    for (int j = 0; j <= lastKey; ++j) {
        const float* kRow = kCache + ((size_t)j * ORACLE_HKV + kvHead) * ORACLE_DH;
        double s = qa * (double)kRow[lane] + qb * (double)kRow[lane + 32];
        for (int offset = 16; offset > 0; offset >>= 1) s += __shfl_xor_sync(0xffffffffu, s, offset);
        best = fmax(best, s * 0.125);
    }

    double weightSum = 0.0, accA = 0.0, accB = 0.0;
    for (int j = 0; j <= lastKey; ++j) {
        const float* kRow = kCache + ((size_t)j * ORACLE_HKV + kvHead) * ORACLE_DH;
        const float* vRow = vCache + ((size_t)j * ORACLE_HKV + kvHead) * ORACLE_DH;
        double s = qa * (double)kRow[lane] + qb * (double)kRow[lane + 32];
        for (int offset = 16; offset > 0; offset >>= 1) s += __shfl_xor_sync(0xffffffffu, s, offset);
        const double w = exp(s * 0.125 - best);
        weightSum += w;
        accA += w * (double)vRow[lane];
        accB += w * (double)vRow[lane + 32];
    }
    double* outRow = out + ((size_t)listed * ORACLE_HQ + head) * ORACLE_DH;
    outRow[lane] = accA / weightSum;
    outRow[lane + 32] = accB / weightSum;
}
