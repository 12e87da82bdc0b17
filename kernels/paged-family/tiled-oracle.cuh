// The paged family's float64 reference, tiled: flashprof's trusted kernel
// body that each paged prefill lab's support.cu instantiates with its own
// reading of the cache (a `Source`). It is compiled in front of that file.
//
// Why tiled: the first references gave every (row, head) its own warp and
// looked every key up twice, one element at a time, and ran at a few dozen
// GFLOP/s, seconds per timing. Here one block of 256 threads computes 8 rows
// (consecutive ones, or 8 entries of a row list) for the 4 query heads of one
// KV head (32 (row, head) pairs): each key and value is read and decoded once per block and used by
// all 32 pairs, and the softmax is taken in one pass over tiles of 16 keys
// with the running maximum rescaling the sums (exact arithmetic gives the
// definition's two-pass result; the doubles differ from it by rounding only).
// A CPU port of the same order of work (`lab::paged::tiled`) is tested
// against the CPU oracle.
//
// Threads: the 8 lanes of a pair split its head dimension (lane c keeps dims
// c, c+8, c+16, ...), hold its query and its output in registers, sum a
// score across themselves, and share the tile's weights by shuffles. Staged
// keys and values are doubles in shared memory; a key a row does not see
// never reaches its sums (its weight is skipped, not multiplied by zero, so
// a NaN beyond the row's reach stays out as the definition keeps it out).
//
// Rows: with no row list, block b computes rows 8 (b / KVH) .. +8 for KV
// head b % KVH; with a row list, the same over list entries, written one
// after another in list order. A tile whose rows belong to several
// sequences takes each sequence in turn, its other rows idle meanwhile.
//
// A Source provides, for KV head g of sequence s (whose first new token is
// row `start`, after `ctx` cached keys):
//   double query(int row, int h, int d) const;
//   double key(int s, int start, int ctx, int g, int j, int d) const;
//   double value(int s, int start, int ctx, int g, int j, int d) const;
//   double scoreScale;  // the contract's softmax scale
// Keys and values come back exact in double (a dequantised FP8 byte times its
// float scale is).

namespace tiled_oracle {

constexpr int kThreads = 256;
constexpr int kRows = 8;
constexpr int kKeys = 16;
constexpr int kLanesPerPair = 8;

__device__ inline double negativeInfinity()
{
    return __longlong_as_double(0xFFF0000000000000ll);
}

// What every launch shares: the batch's layout and the visibility rule.
struct Batch {
    const int* qStart;
    const int* seqLen;
    int numSeqs;
    int slidingWindow;
    const float* alibiSlopes;
    const int* rowList;
    int rowCount;
};

template <int D>
struct Staged {
    double key[kKeys][D];
    double value[kKeys][D];
    int rowSeq[kRows];
};

template <int QH, int KVH, int D, class Source>
__device__ void attend(const Source& source, const Batch& batch, double* out)
{
    constexpr int G = QH / KVH;
    constexpr int kDimsPerLane = D / kLanesPerPair;
    static_assert(kRows * G * kLanesPerPair == kThreads, "one pair per 8 lanes fills the block");
    static_assert(kKeys == 2 * kLanesPerPair, "each lane weighs two keys of a tile");
    __shared__ Staged<D> staged;

    const int totalRows = batch.rowList != nullptr ? batch.rowCount : batch.qStart[batch.numSeqs];
    const int g = blockIdx.x % KVH;
    const int firstListed = (blockIdx.x / KVH) * kRows;
    if (firstListed >= totalRows) return;

    const int t = threadIdx.x;
    const int pair = t / kLanesPerPair;
    const int lane = t % kLanesPerPair;
    const int r = pair / G;
    const int h = g * G + pair % G;
    const int listed = firstListed + r;
    const bool hasRow = listed < totalRows;
    const int row = hasRow ? (batch.rowList != nullptr ? batch.rowList[listed] : listed) : 0;
    int seq = -1;
    int position = 0;
    if (hasRow) {
        seq = 0;
        while (seq + 1 < batch.numSeqs && batch.qStart[seq + 1] <= row) ++seq;
        const int start = batch.qStart[seq];
        const int ctx = batch.seqLen[seq] - (batch.qStart[seq + 1] - start);
        position = ctx + (row - start);
    }
    if (t % (G * kLanesPerPair) == 0) staged.rowSeq[r] = seq;
    const double slope = batch.alibiSlopes != nullptr ? (double)batch.alibiSlopes[h] : 0.0;
    const unsigned pairMask = 0xFFu << (t % 32 / kLanesPerPair * kLanesPerPair);

    double q[kDimsPerLane];
    double acc[kDimsPerLane];
    for (int i = 0; i < kDimsPerLane; ++i) {
        q[i] = hasRow ? source.query(row, h, lane + kLanesPerPair * i) : 0.0;
        acc[i] = 0.0;
    }
    double runningMax = negativeInfinity();
    double weightSum = 0.0;
    __syncthreads();

    // Each sequence of the tile in turn, in increasing order.
    for (int done = -1;;) {
        int s = batch.numSeqs;
        for (int k = 0; k < kRows; ++k)
            if (staged.rowSeq[k] > done && staged.rowSeq[k] < s) s = staged.rowSeq[k];
        if (s == batch.numSeqs) break;
        done = s;
        const int start = batch.qStart[s];
        const int ctx = batch.seqLen[s] - (batch.qStart[s + 1] - start);
        // The keys any row of this sequence in the tile sees.
        int low = batch.seqLen[s], high = -1;
        for (int k = 0; k < kRows && firstListed + k < totalRows; ++k) {
            if (staged.rowSeq[k] != s) continue;
            const int listedRow = batch.rowList != nullptr ? batch.rowList[firstListed + k] : firstListed + k;
            const int i = ctx + (listedRow - start);
            high = max(high, i);
            low = min(low, batch.slidingWindow > 0 ? max(0, i - batch.slidingWindow + 1) : 0);
        }
        const bool mine = seq == s;

        for (int first = low; first <= high; first += kKeys) {
            __syncthreads();
            for (int e = t; e < kKeys * D; e += kThreads) {
                const int k = e / D, d = e % D, j = first + k;
                staged.key[k][d] = j <= high ? source.key(s, start, ctx, g, j, d) : 0.0;
                staged.value[k][d] = j <= high ? source.value(s, start, ctx, g, j, d) : 0.0;
            }
            __syncthreads();

            double score[kKeys];
            unsigned seen = 0;
            double tileMax = negativeInfinity();
            for (int k = 0; k < kKeys; ++k) {
                double dot = 0.0;
                for (int i = 0; i < kDimsPerLane; ++i) dot += q[i] * staged.key[k][lane + kLanesPerPair * i];
                for (int offset = kLanesPerPair / 2; offset > 0; offset >>= 1)
                    dot += __shfl_xor_sync(pairMask, dot, offset, kLanesPerPair);
                const int j = first + k;
                const bool visible =
                    mine && j <= position && (batch.slidingWindow <= 0 || position - j < batch.slidingWindow);
                score[k] = dot * source.scoreScale + slope * (double)(j - position);
                if (visible) {
                    seen |= 1u << k;
                    tileMax = fmax(tileMax, score[k]);
                }
            }
            if (seen == 0) continue;
            const double newMax = fmax(runningMax, tileMax);
            const double rescale = runningMax == negativeInfinity() ? 0.0 : exp(runningMax - newMax);
            runningMax = newMax;
            // Weights against the running maximum; while every score seen
            // is -inf they are exp(-inf) = 0, as the definition's are
            // against its finite maximum (not exp(-inf + inf), a NaN).
            const double shift = newMax == negativeInfinity() ? 0.0 : newMax;
            // This lane's two weights; the pair's others come by shuffle.
            double mine0 = 0.0, mine1 = 0.0;
            if (seen >> (2 * lane) & 1u) mine0 = exp(score[2 * lane] - shift);
            if (seen >> (2 * lane + 1) & 1u) mine1 = exp(score[2 * lane + 1] - shift);
            double tileSum = mine0 + mine1;
            for (int offset = kLanesPerPair / 2; offset > 0; offset >>= 1)
                tileSum += __shfl_xor_sync(pairMask, tileSum, offset, kLanesPerPair);
            weightSum = weightSum * rescale + tileSum;
            for (int i = 0; i < kDimsPerLane; ++i) acc[i] *= rescale;
            for (int k = 0; k < kKeys; ++k) {
                const double weight = __shfl_sync(pairMask, k % 2 == 0 ? mine0 : mine1, k / 2, kLanesPerPair);
                if (!(seen >> k & 1u)) continue;
                for (int i = 0; i < kDimsPerLane; ++i) acc[i] += weight * staged.value[k][lane + kLanesPerPair * i];
            }
        }
    }
    if (!hasRow) return;
    double* outRow = out + ((size_t)listed * QH + h) * D;
    for (int i = 0; i < kDimsPerLane; ++i) outRow[lane + kLanesPerPair * i] = acc[i] / weightSum;
}

}  // namespace tiled_oracle
