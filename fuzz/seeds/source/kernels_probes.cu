// flashprof's own measuring kernels, the same for every lab, compiled once per worker.
//
// clock_probe spins one thread for a fixed wall time and reports the SM cycles
// that elapsed, which gives the SM clock the timed launches actually ran at.

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
