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

// The roofs, measured. Each keeps its results alive with a store that
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

// The tensor roofs: four independent products a warp per iteration, enough
// to keep the HMMA pipe fed, on instructions of one shape each:
// tf32_peak: m16n8k8 TF32 (the instruction wmma's TF32 fragments compile
// to), 4 x 2,048 FLOP a warp; bf16_peak: m16n8k16 BF16 with FP32
// accumulate, 4 x 4,096 FLOP a warp. A GPU without them (before sm_80)
// compiles empty bodies and flashprof does not run them there.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
// Both products take four A and two B registers and add into four floats;
// they differ only in the instruction.
#define TENSOR_PRODUCT(Name, instruction)                                              \
    struct Name {                                                                      \
        __device__ __forceinline__ static void run(float (&d)[4], unsigned a, unsigned b) \
        {                                                                              \
            asm(instruction " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"   \
                : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                       \
                : "r"(a), "r"(a), "r"(a), "r"(a), "r"(b), "r"(b));                     \
        }                                                                              \
    };
TENSOR_PRODUCT(Tf32Product, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32")
TENSOR_PRODUCT(Bf16Product, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32")
#undef TENSOR_PRODUCT

template <class Product>
__device__ __forceinline__ void tensor_loop(float* sink, int iterations, unsigned a, unsigned b)
{
    float d[4][4] = {};
    for (int it = 0; it < iterations; ++it) {
#pragma unroll
        for (int k = 0; k < 4; ++k) Product::run(d[k], a, b);
    }
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < 4; ++k) sum += d[k][0] + d[k][1] + d[k][2] + d[k][3];
    if (sum == -1.0f) sink[0] = sum;
}

// Two copies of x's bf16 (its float's high half) in one register.
__device__ __forceinline__ unsigned bf16_pair(float x)
{
    const unsigned half = __float_as_uint(x) >> 16;
    return half << 16 | half;
}
#endif

extern "C" __global__ void tf32_peak(float* sink, int iterations)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    tensor_loop<Tf32Product>(sink, iterations, __float_as_uint(1.0f + threadIdx.x * 1e-3f),
                             __float_as_uint(0.5f));
#endif
}

extern "C" __global__ void bf16_peak(float* sink, int iterations)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    tensor_loop<Bf16Product>(sink, iterations, bf16_pair(1.0f + threadIdx.x * 1e-3f), bf16_pair(0.5f));
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

// Fresh inputs for every timed or profiled launch. A launch is handed a copy
// of each input tensor (guard bands included) made from its pristine copy,
// which no kernel is ever given: elements inside [low, high) are drawn again,
// uniformly over the same range, from a counter-based hash of (seed, index),
// and everything else (the guard bands, sentinels and planted values outside
// the range, int tensors given an empty range) is copied. The same function
// then counts the elements a launch changed, so a kernel that edits its
// inputs (to make the reference agree with it) is found.
namespace {
__device__ __forceinline__ unsigned long long mix64(unsigned long long x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

__device__ __forceinline__ unsigned fresh_bits(const unsigned* pristine, unsigned long long i,
                                               unsigned long long begin, unsigned long long end,
                                               unsigned long long seed, float low, float high)
{
    const unsigned bits = pristine[i];
    const float value = __uint_as_float(bits);
    if (i < begin || i >= end || !(value >= low && value < high)) return bits;
    const float unit = (float)(mix64(seed ^ mix64(i)) >> 40) * (1.0f / 16777216.0f);
    const float drawn = fmaf(high - low, unit, low);
    return __float_as_uint(drawn < high ? drawn : low);
}
}  // namespace

extern "C" __global__ void fresh_inputs(const unsigned* pristine, unsigned* launched,
                                        unsigned long long count, unsigned long long begin,
                                        unsigned long long end, unsigned long long seed, float low,
                                        float high)
{
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < count;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        launched[i] = fresh_bits(pristine, i, begin, end, seed, low, high);
    }
}

extern "C" __global__ void fresh_inputs_changed(const unsigned* pristine, const unsigned* launched,
                                                unsigned long long count, unsigned long long begin,
                                                unsigned long long end, unsigned long long seed,
                                                float low, float high, unsigned long long* changed)
{
    unsigned long long mine = 0;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < count;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        mine += launched[i] != fresh_bits(pristine, i, begin, end, seed, low, high);
    }
    if (mine != 0) atomicAdd(changed, mine);
}

// The same for 2- and 1-byte elements, with the same arguments.
//
// bf16 (16-bit patterns, the top half of a float's bits): an element whose
// value lies inside [low, high) is drawn again over the range, then cut to
// bf16 toward zero, so it is exactly a bf16 value and, the range holding
// zero, still inside it (a drawn value that would leave it keeps the
// pristine one). Everything else is copied.
//
// FP8 bytes (E4M3 or E5M2, one rule for both, so no format is passed): a byte
// whose magnitude code is below 0x7C, finite in both formats, gets a fresh
// sign and fresh two lowest mantissa bits: its magnitude stays in its binade
// (within a factor of 2 of the pristine value), so no score leaves the range
// the case was built for, and never becomes a NaN or an infinity. The NaN
// byte 0x7F (the guard bands and every slot a kernel must not read), E5M2's
// infinities and NaNs and E4M3's top codes are copied.
namespace {
__device__ __forceinline__ unsigned short fresh_bf16_bits(const unsigned short* pristine,
                                                          unsigned long long i, unsigned long long begin,
                                                          unsigned long long end, unsigned long long seed,
                                                          float low, float high)
{
    const unsigned short bits = pristine[i];
    const float value = __uint_as_float((unsigned)bits << 16);
    if (i < begin || i >= end || !(value >= low && value < high)) return bits;
    const float unit = (float)(mix64(seed ^ mix64(i)) >> 40) * (1.0f / 16777216.0f);
    const unsigned short drawn = (unsigned short)(__float_as_uint(fmaf(high - low, unit, low)) >> 16);
    const float back = __uint_as_float((unsigned)drawn << 16);
    return back >= low && back < high ? drawn : bits;
}

__device__ __forceinline__ unsigned char fresh_fp8_byte(const unsigned char* pristine, unsigned long long i,
                                                        unsigned long long begin, unsigned long long end,
                                                        unsigned long long seed, bool draws)
{
    const unsigned char byte = pristine[i];
    if (!draws || i < begin || i >= end || (byte & 0x7F) >= 0x7C) return byte;
    const unsigned fresh = (unsigned)(mix64(seed ^ mix64(i)) >> 61);  // 3 bits: sign, 2 mantissa
    return (unsigned char)((byte & 0x7C) | ((fresh & 4u) << 5) | (fresh & 3u));
}
}  // namespace

extern "C" __global__ void fresh_bf16(const unsigned short* pristine, unsigned short* launched,
                                      unsigned long long count, unsigned long long begin,
                                      unsigned long long end, unsigned long long seed, float low, float high)
{
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < count;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        launched[i] = fresh_bf16_bits(pristine, i, begin, end, seed, low, high);
    }
}

extern "C" __global__ void fresh_bf16_changed(const unsigned short* pristine, const unsigned short* launched,
                                              unsigned long long count, unsigned long long begin,
                                              unsigned long long end, unsigned long long seed, float low,
                                              float high, unsigned long long* changed)
{
    unsigned long long mine = 0;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < count;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        mine += launched[i] != fresh_bf16_bits(pristine, i, begin, end, seed, low, high);
    }
    if (mine != 0) atomicAdd(changed, mine);
}

// FP8 bytes are drawn by their own rule (above); the range only says whether
// to draw at all: an empty one (the checked launch's copy) copies every byte.
extern "C" __global__ void fresh_fp8(const unsigned char* pristine, unsigned char* launched,
                                     unsigned long long count, unsigned long long begin,
                                     unsigned long long end, unsigned long long seed, float low, float high)
{
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < count;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        launched[i] = fresh_fp8_byte(pristine, i, begin, end, seed, low < high);
    }
}

extern "C" __global__ void fresh_fp8_changed(const unsigned char* pristine, const unsigned char* launched,
                                             unsigned long long count, unsigned long long begin,
                                             unsigned long long end, unsigned long long seed, float low,
                                             float high, unsigned long long* changed)
{
    unsigned long long mine = 0;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < count;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        mine += launched[i] != fresh_fp8_byte(pristine, i, begin, end, seed, low < high);
    }
    if (mine != 0) atomicAdd(changed, mine);
}

// The shortest launch there is: what no kernel's median can be below.
extern "C" __global__ void empty_launch() {}
