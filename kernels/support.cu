// flashprof's own trusted kernels, compiled once per worker next to the student's.
//
// oracle_f64 recomputes attention in double precision on the GPU. It exists for
// the timing shape (C = P = 2048), where the CPU oracle would take seconds; the
// worker proves it against the CPU oracle on sampled rows of every run before a
// speedup is reported. It takes the plain two-pass route (max, then weighted
// sum) so that it shares no online-softmax logic with the kernels it judges.
//
// clock_probe spins one thread for a fixed wall time and reports the SM cycles
// that elapsed, which gives the SM clock the timed launches actually ran at.

#define ORACLE_HQ 32
#define ORACLE_HKV 8
#define ORACLE_DH 64

extern "C" __global__ void oracle_f64(const float* q, const float* kCache, const float* vCache,
                                      double* out, int chunkLen, int prefixLen)
{
    const int warpId = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    const int row = warpId / ORACLE_HQ;
    const int head = warpId % ORACLE_HQ;
    if (row >= chunkLen) return;
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
    double* outRow = out + ((size_t)row * ORACLE_HQ + head) * ORACLE_DH;
    outRow[lane] = accA / weightSum;
    outRow[lane + 32] = accB / weightSum;
}

extern "C" __global__ void clock_probe(unsigned long long* result, unsigned long long spinNs)
{
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    const long long cyclesStart = clock64();
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < spinNs);
    result[0] = (unsigned long long)(clock64() - cyclesStart);
    result[1] = now - start;
}

// l2_sweep reads a buffer several times the size of L2, evicting whatever the
// last kernel left there. It only reads, so the lines it leaves behind are
// clean: the next kernel's DRAM traffic is its own, with no write-back of
// someone else's dirty lines (which a memset-based flush would cause).
extern "C" __global__ void l2_sweep(const float4* data, unsigned long long count, float* sink)
{
    float acc = 0.0f;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < count;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        const float4 v = data[i];
        acc += v.x + v.y + v.z + v.w;
    }
    // The buffer is zeros, so this never stores; it keeps the loads alive.
    if (acc != 0.0f) sink[0] = acc;
}
