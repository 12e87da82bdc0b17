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

// Fresh inputs for every timed, profiled and checked launch. A launch is
// handed a copy of each input tensor (guard bands included) made from its
// pristine copy, which no kernel is ever given, by one rule (`FreshRule`,
// laid out as `gpu::device::FreshRule` on the host):
//
// 1. Guard bands are copied.
// 2. A planted span (sorted, never overlapping, in the launched tensor's own
//    indices) wins: its elements are a constant, or drawn over the span's own
//    range (large values no format holds exactly, so precision matters).
// 3. A block-indexed cache reads its pristine element from the block the
//    launch's permutation put there (`block_source`), so block ids move from
//    launch to launch with their contents; a block table's entries are mapped
//    through the same permutation (`block_map`).
// 4. By the tensor's mode: a float inside [low, high) is drawn again,
//    uniformly over that range, from a counter-based hash of (seed, index); a
//    bf16 the same, cut to bf16 toward zero (kept if that leaves the range);
//    an FP8 byte whose magnitude code is below 0x7C (finite in E4M3 and E5M2
//    alike) gets a fresh sign and fresh two lowest mantissa bits, so it stays
//    in its binade and never becomes a NaN or an infinity; everything else
//    (sentinels, the NaN byte 0x7F, int tensors) is copied.
//
// The same function then counts the elements a launch changed, so a kernel
// that edits its inputs (to make the reference agree with it) is found.
namespace {
__device__ __forceinline__ unsigned long long mix64(unsigned long long x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

struct PlantSpan {
    unsigned long long start, end;
    float low, high;
    unsigned bits;
    unsigned constant;
};

enum FreshMode : unsigned { COPY = 0, FLOAT = 1, BF16 = 2, FP8 = 3 };

struct FreshRule {
    unsigned long long count, begin, end, seed;
    float low, high;
    unsigned mode;
    unsigned span_count;
    const PlantSpan* spans;
    const unsigned* block_source;
    const unsigned* block_map;
    unsigned long long block_elems;
    unsigned long long block_count;
};

// Element i's 64 random bits: SplitMix64's i-th output from the rule's seed
// (one mix an element; lab::counter_draw draws a timing shape's values on
// the CPU by the same function).
__device__ __forceinline__ unsigned long long element_bits(const FreshRule& r, unsigned long long i)
{
    return mix64(r.seed + i * 0x9E3779B97F4A7C15ull);
}

__device__ __forceinline__ float unit_draw(const FreshRule& r, unsigned long long i)
{
    return (float)(element_bits(r, i) >> 40) * (1.0f / 16777216.0f);
}

__device__ __forceinline__ float float_draw(const FreshRule& r, unsigned long long i, float low, float high)
{
    const float drawn = fmaf(high - low, unit_draw(r, i), low);
    return drawn < high ? drawn : low;
}

__device__ __forceinline__ unsigned bf16_draw(const FreshRule& r, unsigned long long i, float low, float high,
                                              unsigned kept)
{
    const unsigned drawn = __float_as_uint(fmaf(high - low, unit_draw(r, i), low)) >> 16;
    const float back = __uint_as_float(drawn << 16);
    return back >= low && back < high ? drawn : kept;
}

__device__ __forceinline__ const PlantSpan* span_of(const FreshRule& r, unsigned long long e)
{
    unsigned lo = 0, hi = r.span_count;
    while (lo < hi) {
        const unsigned mid = (lo + hi) / 2;
        if (r.spans[mid].end <= e) lo = mid + 1;
        else hi = mid;
    }
    return lo < r.span_count && r.spans[lo].start <= e ? &r.spans[lo] : nullptr;
}

// The launched element `i` (as bits of its own width).
template <typename T>
__device__ __forceinline__ T fresh_element(const T* pristine, unsigned long long i, const FreshRule& r)
{
    if (i < r.begin || i >= r.end) return pristine[i];
    const unsigned long long e = i - r.begin;
    if (r.span_count != 0) {
        if (const PlantSpan* span = span_of(r, e)) {
            if (span->constant || r.mode == FP8) return (T)span->bits;
            // Cut toward zero, a planted bf16 may sit one bf16 step below `low`.
            if (r.mode == BF16) return (T)(__float_as_uint(float_draw(r, i, span->low, span->high)) >> 16);
            return (T)__float_as_uint(float_draw(r, i, span->low, span->high));
        }
    }
    unsigned long long source = i;
    if (r.block_source != nullptr) {
        const unsigned long long block = e / r.block_elems;
        source = r.begin + r.block_source[block] * r.block_elems + e % r.block_elems;
    }
    const T bits = pristine[source];
    switch (r.mode) {
    case FLOAT: {
        const float value = __uint_as_float((unsigned)bits);
        if (!(value >= r.low && value < r.high)) return bits;
        return (T)__float_as_uint(float_draw(r, i, r.low, r.high));
    }
    case BF16: {
        const float value = __uint_as_float((unsigned)bits << 16);
        if (!(value >= r.low && value < r.high)) return bits;
        return (T)bf16_draw(r, i, r.low, r.high, bits);
    }
    case FP8: {
        if (!(r.low < r.high) || (bits & 0x7F) >= 0x7C) return bits;
        const unsigned fresh = (unsigned)(element_bits(r, i) >> 61);  // 3 bits: sign, 2 mantissa
        return (T)((bits & 0x7C) | ((fresh & 4u) << 5) | (fresh & 3u));
    }
    default: {
        const int id = (int)(unsigned)bits;
        if (r.block_map != nullptr && id >= 0 && (unsigned long long)id < r.block_count)
            return (T)r.block_map[id];
        return bits;
    }
    }
}

template <typename T>
__device__ void fresh_fill(const T* pristine, T* launched, const FreshRule& r)
{
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < r.count;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        launched[i] = fresh_element(pristine, i, r);
    }
}

template <typename T>
__device__ void fresh_count(const T* pristine, const T* launched, const FreshRule& r,
                            unsigned long long* changed)
{
    unsigned long long mine = 0;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < r.count;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        mine += launched[i] != fresh_element(pristine, i, r);
    }
    if (mine != 0) atomicAdd(changed, mine);
}
}  // namespace

extern "C" __global__ void fresh_words(const unsigned* pristine, unsigned* launched, FreshRule rule)
{
    fresh_fill(pristine, launched, rule);
}

extern "C" __global__ void fresh_words_changed(const unsigned* pristine, const unsigned* launched, FreshRule rule,
                                               unsigned long long* changed)
{
    fresh_count(pristine, launched, rule, changed);
}

extern "C" __global__ void fresh_halves(const unsigned short* pristine, unsigned short* launched, FreshRule rule)
{
    fresh_fill(pristine, launched, rule);
}

extern "C" __global__ void fresh_halves_changed(const unsigned short* pristine, const unsigned short* launched,
                                                FreshRule rule, unsigned long long* changed)
{
    fresh_count(pristine, launched, rule, changed);
}

extern "C" __global__ void fresh_bytes(const unsigned char* pristine, unsigned char* launched, FreshRule rule)
{
    fresh_fill(pristine, launched, rule);
}

extern "C" __global__ void fresh_bytes_changed(const unsigned char* pristine, const unsigned char* launched,
                                               FreshRule rule, unsigned long long* changed)
{
    fresh_count(pristine, launched, rule, changed);
}

// An order-free fingerprint of a buffer's bytes (a sum of hashed
// (index, byte) pairs): the pristine copies are fingerprinted once and again
// after every launch, so a kernel that writes into harness memory it can
// reach (to make later inputs constant, say) is found.
extern "C" __global__ void fingerprint_bytes(const unsigned char* bytes, unsigned long long count,
                                             unsigned long long* sum)
{
    unsigned long long mine = 0;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < count;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        mine += mix64((i << 8) | bytes[i]);
    }
    if (mine != 0) atomicAdd(sum, mine);
}

// The shortest launch there is: what no kernel's median can be below.
extern "C" __global__ void empty_launch() {}
