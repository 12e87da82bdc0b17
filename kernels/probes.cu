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

// The three roofs, measured. Each keeps its results alive with a store that
// never happens (the sums cannot equal the sentinel), so nothing is optimised
// away, and each runs a few milliseconds at the peak it measures.
//
// fma_peak: every thread runs eight independent FMA chains, enough to hide
// the pipe's latency; 16 FLOP a thread per iteration.
extern "C" __global__ void fma_peak(float* sink, int iterations)
{
    float acc[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[i] = threadIdx.x * 1e-3f + i;
    const float scale = 0.999f, shift = 1e-4f;
#pragma unroll 4
    for (int it = 0; it < iterations; ++it) {
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[i] = fmaf(acc[i], scale, shift);
    }
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) sum += acc[i];
    if (sum == -1.0f) sink[0] = sum;
}

// tf32_peak: four independent m16n8k8 TF32 products a warp per iteration, the
// instruction wmma's TF32 fragments compile to (HMMA): 4 x 2,048 FLOP a warp.
// A GPU without TF32 tensor cores (before sm_80) compiles an empty body and
// flashprof does not run it there.
extern "C" __global__ void tf32_peak(float* sink, int iterations)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned a = __float_as_uint(1.0f + threadIdx.x * 1e-3f);
    const unsigned b = __float_as_uint(0.5f);
    float d[4][4] = {};
    for (int it = 0; it < iterations; ++it) {
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                : "+f"(d[k][0]), "+f"(d[k][1]), "+f"(d[k][2]), "+f"(d[k][3])
                : "r"(a), "r"(a), "r"(a), "r"(a), "r"(b), "r"(b));
        }
    }
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < 4; ++k) sum += d[k][0] + d[k][1] + d[k][2] + d[k][3];
    if (sum == -1.0f) sink[0] = sum;
#endif
}

// stream_copy: a grid-stride float4 copy of buffers larger than L2, so every
// byte crosses DRAM once each way.
extern "C" __global__ void stream_copy(const float4* in, float4* out, unsigned long long count)
{
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < count;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        out[i] = in[i];
    }
}
