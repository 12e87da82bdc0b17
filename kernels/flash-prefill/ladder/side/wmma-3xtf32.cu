// Beside the ladder: rung 4's idea written with wmma, the C++ face of the
// tensor-core instructions, as most tutorials do. Kept to show why the ladder
// uses mma.sync instead (docs/LADDER.md): wmma leaves a fragment's element
// layout unspecified, so the softmax must go through shared memory, which
// makes this kernel slower than rung 4 (1.651 ms against 1.222 ms on the
// H200) and, measured there, less accurate: on large-values-other-heads its
// worst error sat at 0.66 to 1.21 of the lab's allowance over six runs with
// fresh seeds and failed three of them, where rung 4 stays near 0.4-0.6.
//
// Both products, S = Q K^T and O += P V, are 16x16x8 TF32 wmma tiles in
// 3xTF32 split precision: each fp32 operand x is split into hi = tf32(x) and
// lo = tf32(x - hi) (two integer operations, as in rung 4), and each product
// is taken as hi*hi + hi*lo + lo*hi. kSplitPrecision = false gives plain TF32.
//
// Shape of the work. A block owns 32 rows of one KV group (as in rung 3) and
// a warp one strip of 16 query vectors: 16 rows of one head. Per 64-key tile
// the warp computes its 16 x 64 scores in four 16x16 accumulators, stores them
// to its own scratch strip, runs the online softmax there (two lanes per row),
// rescales its output accumulators and multiplies the probabilities by V.
// To keep the tensor cores busy the K and V tiles travel by cp.async and
// overlap the arithmetic (the next K tile streams in during softmax and P V,
// the next V tile during the next Q K^T), and the heaviest row blocks (the
// last rows, which see the most keys) start first, as in kernels/flash-prefill/reference.cu.
//
// The wmma fragments come from PTX (`wmma.load`, `wmma.mma`, `wmma.store`):
// flashprof compiles single files with no include path, so <mma.h> is not
// available. A fragment's element layout is unspecified, so the kernel asks the
// hardware once: it loads a tile whose every element holds its own row number
// into an accumulator fragment and keeps, per element, which row it belongs
// to; rescaling a row of the output then needs no assumption about layouts.
//
// @flashprof rows_per_block=32 threads=256 dynamic_smem=104960 grid=kv_group

namespace {

constexpr int kQueryHeads = 32;
constexpr int kKvHeads = 8;
constexpr int kHeadsPerGroup = kQueryHeads / kKvHeads;
constexpr int kDim = 64;

constexpr int kRowsPerBlock = 32;
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kStripRows = 16;
constexpr int kTileKeys = 64;
constexpr int kFragments = kTileKeys / 16;  // 16-wide accumulators across a tile (or across the dims)
constexpr int kSteps = 64 / 8;              // 8-deep products across the dims (or across the keys)
// Every shared tile has rows of 64 floats padded to 68: the rows of one
// fragment then start on different banks.
constexpr int kLd = kDim + 4;
constexpr int kStripFloats = kStripRows * kLd;
constexpr int kSharedBytes =
    (2 * kWarps * kStripFloats + 2 * kTileKeys * kLd + kWarps * kStripRows) * (int)sizeof(float);
static_assert(kSharedBytes == 104960, "keep the @flashprof dynamic_smem line in step");

// false: plain TF32 (one product per tile, fast, outside the lab's tolerance).
constexpr bool kSplitPrecision = true;

// 0.125 * log2(e): scores in log2 units, ready for exp2f.
constexpr float kScoreScale = 0.125f * 1.4426950408889634f;

// One 16x8 (A) or 8x16 (B) TF32 operand split into its high and low parts.
struct SplitOperand {
    unsigned hi[4];
    unsigned lo[4];
};

// One 16x16 fp32 accumulator.
struct Accumulator {
    float x[8];
};

__device__ __forceinline__ unsigned sharedAddress(const float* p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void split(const unsigned (&raw)[4], SplitOperand& out)
{
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const float x = __uint_as_float(raw[i]);
        out.hi[i] = (raw[i] + 0x1000u) & 0xffffe000u;
        out.lo[i] = kSplitPrecision ? __float_as_uint(x - __uint_as_float(out.hi[i])) + 0x1000u : 0u;
    }
}

// A: 16 rows x 8 columns, row-major with stride kLd.
__device__ __forceinline__ void loadA(SplitOperand& out, const float* p)
{
    unsigned raw[4];
    asm volatile("wmma.load.a.sync.aligned.row.m16n16k8.shared.tf32 {%0, %1, %2, %3}, [%4], %5;"
                 : "=r"(raw[0]), "=r"(raw[1]), "=r"(raw[2]), "=r"(raw[3])
                 : "r"(sharedAddress(p)), "r"(kLd)
                 : "memory");
    split(raw, out);
}

// B: 8 x 16 read column-major (element (k, n) at p[n * kLd + k]): K tile rows are keys.
__device__ __forceinline__ void loadBColumns(SplitOperand& out, const float* p)
{
    unsigned raw[4];
    asm volatile("wmma.load.b.sync.aligned.col.m16n16k8.shared.tf32 {%0, %1, %2, %3}, [%4], %5;"
                 : "=r"(raw[0]), "=r"(raw[1]), "=r"(raw[2]), "=r"(raw[3])
                 : "r"(sharedAddress(p)), "r"(kLd)
                 : "memory");
    split(raw, out);
}

// B: 8 x 16 read row-major (element (k, n) at p[k * kLd + n]): V tile rows are keys.
__device__ __forceinline__ void loadBRows(SplitOperand& out, const float* p)
{
    unsigned raw[4];
    asm volatile("wmma.load.b.sync.aligned.row.m16n16k8.shared.tf32 {%0, %1, %2, %3}, [%4], %5;"
                 : "=r"(raw[0]), "=r"(raw[1]), "=r"(raw[2]), "=r"(raw[3])
                 : "r"(sharedAddress(p)), "r"(kLd)
                 : "memory");
    split(raw, out);
}

__device__ __forceinline__ void storeAccumulator(float* p, const Accumulator& c)
{
    asm volatile("wmma.store.d.sync.aligned.row.m16n16k8.shared.f32 [%0], {%1, %2, %3, %4, %5, %6, %7, %8}, %9;"
                 ::"r"(sharedAddress(p)), "f"(c.x[0]), "f"(c.x[1]), "f"(c.x[2]), "f"(c.x[3]), "f"(c.x[4]),
                 "f"(c.x[5]), "f"(c.x[6]), "f"(c.x[7]), "r"(kLd)
                 : "memory");
}

__device__ __forceinline__ void loadAccumulator(Accumulator& c, const float* p)
{
    asm volatile("wmma.load.c.sync.aligned.row.m16n16k8.shared.f32 {%0, %1, %2, %3, %4, %5, %6, %7}, [%8], %9;"
                 : "=f"(c.x[0]), "=f"(c.x[1]), "=f"(c.x[2]), "=f"(c.x[3]), "=f"(c.x[4]), "=f"(c.x[5]),
                   "=f"(c.x[6]), "=f"(c.x[7])
                 : "r"(sharedAddress(p)), "r"(kLd)
                 : "memory");
}

// d += a * b on the tensor cores, one TF32 product; B column- or row-major.
template <bool kBColumns>
__device__ __forceinline__ void mmaTf32(Accumulator& d, const unsigned (&a)[4], const unsigned (&b)[4])
{
    if constexpr (kBColumns) {
        asm("wmma.mma.sync.aligned.row.col.m16n16k8.f32.tf32.tf32.f32 "
            "{%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, {%12, %13, %14, %15}, "
            "{%0, %1, %2, %3, %4, %5, %6, %7};"
            : "+f"(d.x[0]), "+f"(d.x[1]), "+f"(d.x[2]), "+f"(d.x[3]), "+f"(d.x[4]), "+f"(d.x[5]),
              "+f"(d.x[6]), "+f"(d.x[7])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]));
    } else {
        asm("wmma.mma.sync.aligned.row.row.m16n16k8.f32.tf32.tf32.f32 "
            "{%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, {%12, %13, %14, %15}, "
            "{%0, %1, %2, %3, %4, %5, %6, %7};"
            : "+f"(d.x[0]), "+f"(d.x[1]), "+f"(d.x[2]), "+f"(d.x[3]), "+f"(d.x[4]), "+f"(d.x[5]),
              "+f"(d.x[6]), "+f"(d.x[7])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]));
    }
}

// d += a * b as hi*hi + hi*lo + lo*hi, the small terms first.
template <bool kBColumns>
__device__ __forceinline__ void mmaSplit(Accumulator& d, const SplitOperand& a, const SplitOperand& b)
{
    if (kSplitPrecision) {
        mmaTf32<kBColumns>(d, a.lo, b.hi);
        mmaTf32<kBColumns>(d, a.hi, b.lo);
    }
    mmaTf32<kBColumns>(d, a.hi, b.hi);
}

// Copies 16 bytes global -> shared without passing through registers; when
// `inRange` is false nothing is read and the 16 bytes become zeros.
__device__ __forceinline__ void copyAsync16(float* sharedDst, const float* globalSrc, bool inRange)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(sharedAddress(sharedDst)), "l"(globalSrc),
                 "r"(inRange ? 16 : 0)
                 : "memory");
}

__device__ __forceinline__ void commitAsyncGroup()
{
    asm volatile("cp.async.commit_group;" ::: "memory");
}

// Waits until at most one committed group is still in flight.
__device__ __forceinline__ void waitAllButNewestGroup()
{
    asm volatile("cp.async.wait_group 1;" ::: "memory");
}

// Starts copying keys [tileStart, tileStart + 64) of one KV head into a
// [key][kLd] tile; keys at or past `keyEnd` become zeros.
__device__ __forceinline__ void stageTileAsync(float* tile, const float* cache, int kvHead, int tileStart, int keyEnd)
{
    constexpr int kChunksPerKey = kDim / 4;
#pragma unroll
    for (int n = 0; n < kTileKeys * kChunksPerKey / kThreads; ++n) {
        const int chunk = threadIdx.x + n * kThreads;
        const int key = chunk / kChunksPerKey;
        const int dim = (chunk % kChunksPerKey) * 4;
        const bool inRange = tileStart + key < keyEnd;
        const float* src = inRange ? cache + ((size_t)(tileStart + key) * kKvHeads + kvHead) * kDim + dim : cache;
        copyAsync16(tile + key * kLd + dim, src, inRange);
    }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads, 2)
    attention_prefill(const float* q, const float* kCache, const float* vCache, float* out,
                      int chunkLen, int prefixLen)
{
    extern __shared__ float4 sharedRaw[];
    float* qStrips = reinterpret_cast<float*>(sharedRaw);
    float* kTile = qStrips + kWarps * kStripFloats;
    float* vTile = kTile + kTileKeys * kLd;
    float* scratchStrips = vTile + kTileKeys * kLd;
    float* alphaStrips = scratchStrips + kWarps * kStripFloats;

    const int kvHead = blockIdx.y;
    // Heaviest first: block 0 takes the last rows, which see the most keys.
    const int firstRow = (gridDim.x - 1 - blockIdx.x) * kRowsPerBlock;
    const int rowsHere = min(kRowsPerBlock, chunkLen - firstRow);
    const int keyEnd = prefixLen + firstRow + rowsHere;

    const int tileCount = (keyEnd + kTileKeys - 1) / kTileKeys;

    stageTileAsync(kTile, kCache, kvHead, 0, keyEnd);
    commitAsyncGroup();
    stageTileAsync(vTile, vCache, kvHead, 0, keyEnd);
    commitAsyncGroup();

    const int warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    // This warp's strip: rows stripFirst .. stripFirst+15 of the block, one head.
    const int head = kvHead * kHeadsPerGroup + warp % kHeadsPerGroup;
    const int stripFirst = (warp / kHeadsPerGroup) * kStripRows;
    float* myQ = qStrips + warp * kStripFloats;
    float* myScratch = scratchStrips + warp * kStripFloats;
    float* myAlpha = alphaStrips + warp * kStripRows;

    // The strip's queries, scaled; rows past the chunk are zeros, never stored.
#pragma unroll
    for (int n = 0; n < kStripRows * (kDim / 4) / 32; ++n) {
        const int chunk = lane + n * 32;
        const int r = chunk / (kDim / 4);
        const int dim = (chunk % (kDim / 4)) * 4;
        float4 value = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (stripFirst + r < rowsHere) {
            value = *reinterpret_cast<const float4*>(q + ((size_t)(firstRow + stripFirst + r) * kQueryHeads + head) * kDim + dim);
            value.x *= kScoreScale;
            value.y *= kScoreScale;
            value.z *= kScoreScale;
            value.w *= kScoreScale;
        }
        *reinterpret_cast<float4*>(myQ + r * kLd + dim) = value;
    }

    // Which strip row each of this lane's 8 accumulator elements belongs to,
    // 4 bits per element: read back from a tile holding row numbers.
    for (int i = lane; i < kStripRows * 16; i += 32) myScratch[(i / 16) * kLd + i % 16] = (float)(i / 16);
    __syncwarp();
    unsigned rowOfElement = 0;
    {
        Accumulator rows;
        loadAccumulator(rows, myScratch);
#pragma unroll
        for (int i = 0; i < 8; ++i) rowOfElement |= (unsigned)rows.x[i] << (4 * i);
    }
    __syncwarp();

    // The softmax gives two lanes to each strip row; each takes every other key.
    const int softmaxRow = lane / 2;
    const int softmaxHalf = lane % 2;
    const int lastVisible = prefixLen + firstRow + stripFirst + softmaxRow;
    float rowMax = -INFINITY;
    float rowSum = 0.0f;

    Accumulator o[kFragments];
#pragma unroll
    for (int f = 0; f < kFragments; ++f)
#pragma unroll
        for (int i = 0; i < 8; ++i) o[f].x[i] = 0.0f;

    for (int t = 0; t < tileCount; ++t) {
        const int tileStart = t * kTileKeys;
        waitAllButNewestGroup();  // K tile t has landed (V tile t may still be in flight)
        __syncthreads();

        // S = Q K^T for the strip: 16 x 64 in four accumulators.
        Accumulator s[kFragments];
#pragma unroll
        for (int f = 0; f < kFragments; ++f)
#pragma unroll
            for (int i = 0; i < 8; ++i) s[f].x[i] = 0.0f;
#pragma unroll 2  // a full unroll needs more than 128 registers and spills
        for (int step = 0; step < kSteps; ++step) {
            SplitOperand a;
            loadA(a, myQ + step * 8);
#pragma unroll
            for (int f = 0; f < kFragments; ++f) {
                SplitOperand b;
                loadBColumns(b, kTile + f * 16 * kLd + step * 8);
                mmaSplit<true>(s[f], a, b);
            }
        }
#pragma unroll
        for (int f = 0; f < kFragments; ++f) storeAccumulator(myScratch + f * 16, s[f]);
        __syncthreads();  // every warp is done with K tile t: the next one may stream in
        if (t + 1 < tileCount) stageTileAsync(kTile, kCache, kvHead, tileStart + kTileKeys, keyEnd);
        commitAsyncGroup();  // an empty group on the last tile keeps the wait counts uniform

        // Online softmax of the strip, in place: scores become probabilities.
        float* scoreRow = myScratch + softmaxRow * kLd;
        const bool straddlesDiagonal = tileStart + kTileKeys - 1 > prefixLen + firstRow + stripFirst;
        float tileMax = -INFINITY;
#pragma unroll
        for (int c = 0; c < kTileKeys / 2; ++c) {
            const int key = 2 * c + softmaxHalf;
            if (!straddlesDiagonal || tileStart + key <= lastVisible) tileMax = fmaxf(tileMax, scoreRow[key]);
        }
        tileMax = fmaxf(tileMax, __shfl_xor_sync(0xffffffffu, tileMax, 1));
        // Key 0 is in the first tile and visible to every row, so the max is
        // finite from the first tile on (alpha is exactly 0 there).
        const float newMax = fmaxf(rowMax, tileMax);
        const float alpha = exp2f(rowMax - newMax);
        rowMax = newMax;
        float tileSum = 0.0f;
#pragma unroll
        for (int c = 0; c < kTileKeys / 2; ++c) {
            const int key = 2 * c + softmaxHalf;
            const bool visible = !straddlesDiagonal || tileStart + key <= lastVisible;
            const float p = visible ? exp2f(scoreRow[key] - newMax) : 0.0f;
            scoreRow[key] = p;
            tileSum += p;
        }
        tileSum += __shfl_xor_sync(0xffffffffu, tileSum, 1);
        rowSum = rowSum * alpha + tileSum;
        if (softmaxHalf == 0) myAlpha[softmaxRow] = alpha;
        __syncwarp();

#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const float rowAlpha = myAlpha[(rowOfElement >> (4 * i)) & 15u];
#pragma unroll
            for (int f = 0; f < kFragments; ++f) o[f].x[i] *= rowAlpha;
        }

        waitAllButNewestGroup();  // V tile t has landed (K tile t+1 may still be in flight)
        __syncthreads();

        // O += P V: P is the strip's 16 x 64 probabilities, V the 64 x 64 tile.
#pragma unroll 2  // a full unroll needs more than 128 registers and spills
        for (int step = 0; step < kSteps; ++step) {
            SplitOperand a;
            loadA(a, myScratch + step * 8);
#pragma unroll
            for (int f = 0; f < kFragments; ++f) {
                SplitOperand b;
                loadBRows(b, vTile + step * 8 * kLd + f * 16);
                mmaSplit<false>(o[f], a, b);
            }
        }
        __syncthreads();  // every warp is done with V tile t (and with its P)
        if (t + 1 < tileCount) stageTileAsync(vTile, vCache, kvHead, tileStart + kTileKeys, keyEnd);
        commitAsyncGroup();
    }

    // Through the scratch strip once more: the output rows, divided by l.
#pragma unroll
    for (int f = 0; f < kFragments; ++f) storeAccumulator(myScratch + f * 16, o[f]);
    __syncwarp();
    if (stripFirst + softmaxRow < rowsHere) {
        const float* src = myScratch + softmaxRow * kLd + softmaxHalf * 32;
        float* dst = out + ((size_t)(firstRow + stripFirst + softmaxRow) * kQueryHeads + head) * kDim + softmaxHalf * 32;
#pragma unroll
        for (int c = 0; c < 32; c += 4) {
            const float4 value = *reinterpret_cast<const float4*>(src + c);
            *reinterpret_cast<float4*>(dst + c) =
                make_float4(value.x / rowSum, value.y / rowSum, value.z / rowSum, value.w / rowSum);
        }
    }
}
