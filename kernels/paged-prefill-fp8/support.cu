// flashprof's trusted kernel for the paged-prefill-fp8 lab, compiled next to
// the student's.
//
// paged_fp8_oracle_f64 recomputes the lab's attention in double precision on
// the GPU, for the timing shape, where the CPU oracle would take far too long;
// every timing checks it against the CPU oracle on sampled rows before any
// speedup is reported. It takes the entry point's arguments in the same
// order, except that it writes doubles, then a row list (null: every row;
// otherwise only the listed rows, one after another in list order).
//
// It includes no CUDA header: bf16 tensors are read as their 16-bit patterns
// (a bf16 value is the top half of a float's bits) and FP8 bytes are decoded
// here from their definition (sign, exponent, mantissa; E4M3 bias 7 with NaN
// at S.1111.111 and no infinities, E5M2 bias 15 with IEEE infinities and
// NaNs), so it shares no conversion code with the kernels it judges. Every
// decoded value times its scale is exact in double.
//
// The work is the paged family's tiled body (kernels/paged-family/
// tiled-oracle.cuh, compiled in front of this file): launch it as that file
// says, 256 threads a block, one block per 8 rows and KV head.

#define PF8_QH 32
#define PF8_KVH 8
#define PF8_D 128
#define PF8_B 16
#define PF8_X 16

namespace {

__device__ double bf16Value(unsigned short bits)
{
    return (double)__uint_as_float((unsigned)bits << 16);
}

// The exact value of an FP8 byte (kvFormat 0: E4M3, 1: E5M2).
__device__ double fp8Value(unsigned char byte, int kvFormat)
{
    const int mantissaBits = kvFormat == 0 ? 3 : 2;
    const int bias = kvFormat == 0 ? 7 : 15;
    const int topExponent = (1 << (7 - mantissaBits)) - 1;
    const int exponent = (byte & 0x7F) >> mantissaBits;
    const int mantissa = byte & ((1 << mantissaBits) - 1);
    const double sign = (byte & 0x80) ? -1.0 : 1.0;
    if (exponent == topExponent) {
        if (kvFormat == 0 && mantissa == (1 << mantissaBits) - 1) return __longlong_as_double(0x7FF8000000000000ll);
        if (kvFormat != 0) return mantissa == 0 ? sign * __longlong_as_double(0x7FF0000000000000ll)
                                               : __longlong_as_double(0x7FF8000000000000ll);
    }
    if (exponent == 0) return sign * ldexp((double)mantissa, 1 - bias - mantissaBits);
    return sign * ldexp((double)((1 << mantissaBits) + mantissa), exponent - bias - mantissaBits);
}

// The FP8 lab's reading of its inputs for the tiled body: bf16 by bit
// pattern; cache bytes through tables of their exact values times the
// scale (in shared memory, filled once per block); the contract's x-packed
// K layout.
struct Fp8Source {
    const unsigned short* q;
    const unsigned short* kNew;
    const unsigned short* vNew;
    const unsigned char* kCache;
    const unsigned char* vCache;
    const int* blockTable;
    int maxBlocksPerSeq;
    const double* scaledKey;
    const double* scaledValue;
    double scoreScale;

    __device__ double query(int row, int h, int d) const
    {
        return bf16Value(q[((size_t)row * PF8_QH + h) * PF8_D + d]);
    }

    __device__ double key(int s, int start, int ctx, int g, int j, int d) const
    {
        if (j < ctx) {
            const size_t b = (size_t)blockTable[(size_t)s * maxBlocksPerSeq + j / PF8_B];
            const int o = j % PF8_B;
            return scaledKey[kCache[(((b * PF8_KVH + g) * (PF8_D / PF8_X) + d / PF8_X) * PF8_B + o) * PF8_X + d % PF8_X]];
        }
        return bf16Value(kNew[((size_t)(start + j - ctx) * PF8_KVH + g) * PF8_D + d]);
    }

    __device__ double value(int s, int start, int ctx, int g, int j, int d) const
    {
        if (j < ctx) {
            const size_t b = (size_t)blockTable[(size_t)s * maxBlocksPerSeq + j / PF8_B];
            const int o = j % PF8_B;
            return scaledValue[vCache[((b * PF8_KVH + g) * PF8_D + d) * PF8_B + o]];
        }
        return bf16Value(vNew[((size_t)(start + j - ctx) * PF8_KVH + g) * PF8_D + d]);
    }
};

}  // namespace

extern "C" __global__ void __launch_bounds__(tiled_oracle::kThreads) paged_fp8_oracle_f64(
    const unsigned short* q, const unsigned short* kNew, const unsigned short* vNew,
    const unsigned char* kCache, const unsigned char* vCache, const int* blockTable, const int* qStart,
    const int* seqLen, int numSeqs, int maxBlocksPerSeq, int slidingWindow, const float* alibiSlopes,
    float kScale, float vScale, int kvFormat, double* out, const int* rowList, int rowCount)
{
    __shared__ double scaledKey[256];
    __shared__ double scaledValue[256];
    for (int byte = threadIdx.x; byte < 256; byte += blockDim.x) {
        scaledKey[byte] = fp8Value((unsigned char)byte, kvFormat) * (double)kScale;
        scaledValue[byte] = fp8Value((unsigned char)byte, kvFormat) * (double)vScale;
    }
    // The contract's score scale, the float nearest 1/sqrt(128).
    const Fp8Source source{q, kNew, vNew, kCache, vCache, blockTable, maxBlocksPerSeq, scaledKey, scaledValue,
                           (double)__uint_as_float(0x3DB504F3u)};
    const tiled_oracle::Batch batch{qStart, seqLen, numSeqs, slidingWindow, alibiSlopes, rowList, rowCount};
    __syncthreads();
    tiled_oracle::attend<PF8_QH, PF8_KVH, PF8_D>(source, batch, out);
}
