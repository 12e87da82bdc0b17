// flashprof's trusted kernel for the paged-prefill-fp8 lab, compiled next to
// the student's.
//
// paged_fp8_oracle_f64 recomputes the lab's attention in double precision on
// the GPU, for the timing shape, where the CPU oracle would take far too long;
// it is proven against the CPU oracle on the hazard cases before any speedup
// is reported. It takes the entry point's arguments in the same order, except
// that it writes doubles, then a row list.
//
// It includes no CUDA header: bf16 tensors are read as their 16-bit patterns
// (a bf16 value is the top half of a float's bits) and FP8 bytes are decoded
// here from their definition (sign, exponent, mantissa; E4M3 bias 7 with NaN
// at S.1111.111 and no infinities, E5M2 bias 15 with IEEE infinities and
// NaNs), so it shares no conversion code with the kernels it judges. Every
// decoded value times its scale is exact in double.
//
// Launch: one warp per (new token, query head), any block size that is a
// multiple of 32, at least qStart[numSeqs] * 32 warps in all (extra warps
// return). Lane l keeps dims l, l+32, l+64, l+96. Two passes (the max of the
// visible scores, then the weighted sum), every key looked up one at a time
// through the block table; visibility as the contract states it: j <= i and
// (window off or i - j < W).
//
// With a row list (two arguments past the entry point's) it computes only
// those rows, written one after another in list order; a null list means
// every row.

#define PF8_QH 32
#define PF8_KVH 8
#define PF8_D 128
#define PF8_B 16
#define PF8_X 16
#define PF8_LANE_DIMS (PF8_D / 32)

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

struct Walk {
    const unsigned short* kNew;
    const unsigned short* vNew;
    const unsigned char* kCache;
    const unsigned char* vCache;
    const int* blockTable;
    int maxBlocksPerSeq, s, start, ctx, g, kvFormat;
    double kScale, vScale;

    __device__ double key(int j, int d) const
    {
        if (j < ctx) {
            const size_t b = (size_t)blockTable[(size_t)s * maxBlocksPerSeq + j / PF8_B];
            const int o = j % PF8_B;
            const size_t at = (((b * PF8_KVH + g) * (PF8_D / PF8_X) + d / PF8_X) * PF8_B + o) * PF8_X + d % PF8_X;
            return fp8Value(kCache[at], kvFormat) * kScale;
        }
        return bf16Value(kNew[((size_t)(start + j - ctx) * PF8_KVH + g) * PF8_D + d]);
    }

    __device__ double value(int j, int d) const
    {
        if (j < ctx) {
            const size_t b = (size_t)blockTable[(size_t)s * maxBlocksPerSeq + j / PF8_B];
            const int o = j % PF8_B;
            return fp8Value(vCache[((b * PF8_KVH + g) * PF8_D + d) * PF8_B + o], kvFormat) * vScale;
        }
        return bf16Value(vNew[((size_t)(start + j - ctx) * PF8_KVH + g) * PF8_D + d]);
    }
};

}  // namespace

extern "C" __global__ void paged_fp8_oracle_f64(
    const unsigned short* q, const unsigned short* kNew, const unsigned short* vNew,
    const unsigned char* kCache, const unsigned char* vCache, const int* blockTable, const int* qStart,
    const int* seqLen, int numSeqs, int maxBlocksPerSeq, int slidingWindow, const float* alibiSlopes,
    float kScale, float vScale, int kvFormat, double* out, const int* rowList, int rowCount)
{
    const long long warpId = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    const int totalRows = rowList != nullptr ? rowCount : qStart[numSeqs];
    if (warpId >= (long long)totalRows * PF8_QH) return;
    const int listed = (int)(warpId / PF8_QH);
    const int row = rowList != nullptr ? rowList[listed] : listed;
    const int h = (int)(warpId % PF8_QH);

    int s = 0;
    while (s + 1 < numSeqs && qStart[s + 1] <= row) ++s;
    const int start = qStart[s];
    const int n = qStart[s + 1] - start;
    const int ctx = seqLen[s] - n;
    const int i = ctx + (row - start);
    const double slope = alibiSlopes != nullptr ? (double)alibiSlopes[h] : 0.0;
    // The contract's score scale, the float nearest 1/sqrt(128).
    const double scale = (double)__uint_as_float(0x3DB504F3u);
    const Walk walk{kNew, vNew, kCache, vCache, blockTable, maxBlocksPerSeq, s, start, ctx,
                    h / (PF8_QH / PF8_KVH), kvFormat, (double)kScale, (double)vScale};

    double qd[PF8_LANE_DIMS];
    for (int k = 0; k < PF8_LANE_DIMS; ++k) qd[k] = bf16Value(q[((size_t)row * PF8_QH + h) * PF8_D + lane + 32 * k]);

    double best = -1.0e300;
    for (int j = 0; j <= i; ++j) {
        if (slidingWindow > 0 && !(i - j < slidingWindow)) continue;
        double sc = 0.0;
        for (int k = 0; k < PF8_LANE_DIMS; ++k) sc += qd[k] * walk.key(j, lane + 32 * k);
        for (int offset = 16; offset > 0; offset >>= 1) sc += __shfl_xor_sync(0xffffffffu, sc, offset);
        sc = sc * scale + slope * (double)(j - i);
        best = fmax(best, sc);
    }

    double weightSum = 0.0;
    double acc[PF8_LANE_DIMS] = {};
    for (int j = 0; j <= i; ++j) {
        if (slidingWindow > 0 && !(i - j < slidingWindow)) continue;
        double sc = 0.0;
        for (int k = 0; k < PF8_LANE_DIMS; ++k) sc += qd[k] * walk.key(j, lane + 32 * k);
        for (int offset = 16; offset > 0; offset >>= 1) sc += __shfl_xor_sync(0xffffffffu, sc, offset);
        sc = sc * scale + slope * (double)(j - i);
        const double w = exp(sc - best);
        weightSum += w;
        for (int k = 0; k < PF8_LANE_DIMS; ++k) acc[k] += w * walk.value(j, lane + 32 * k);
    }
    double* outRow = out + ((size_t)listed * PF8_QH + h) * PF8_D;
    for (int k = 0; k < PF8_LANE_DIMS; ++k) outRow[lane + 32 * k] = acc[k] / weightSum;
}
