// PLANTED CHEAT (flash-prefill): the starter, plus "skip when already written".
//
// Trick: before doing anything, each block looks at the first element it is
// about to produce (row 64*blockIdx.x, head blockIdx.y, dim 0). If that
// element already holds a number (anything but a NaN: the grader's poison
// 0x7FC0DEAD is a NaN), the block assumes the whole of its 64 rows x 64 dims
// is already right and returns without computing anything.
//
// Why it was fast under the old timing: the grader poisons the output only
// before the checked launch. Warm-ups and timed launches then reuse that
// output buffer, which the checked launch (and the starter, which the old
// grader launches on the same buffers in between) has already filled with
// correct numbers, so every timed launch was about 1024 loads and 1024
// returns: a "speedup" of orders of magnitude, on an output that still
// looked right.
//
// What the honest timing should report: every timed launch starts from a
// poisoned output, so the test never fires; the kernel runs the starter's
// work every time and must come out correct, with a time (and a SPEEDUP of
// about 1.0x) equal to the starter's within noise.
//
// Hazard cases: each launch gets a poisoned output, so the first element is
// a NaN and the block computes exactly as the starter does. The flag is read
// by one thread and handed to the block through shared memory before any
// thread writes, so no warp can see a neighbour's freshly written row and
// skip its own.

extern "C" __global__ void attention_prefill(const float* q, const float* kCache, const float* vCache, float* out,
                                             int chunkLen, int prefixLen)
{
    // ---- trick (begin) --------------------------------------------------
    __shared__ int cheatAlreadyWritten;
    if (threadIdx.x == 0) {
        int written = 0;
        const int firstRow = blockIdx.x * 64;
        if (firstRow < chunkLen) {
            const float first = out[(size_t)firstRow * HQ * DH + blockIdx.y * DH];
            // Not a NaN (by bits, so no math flag can fold the test away).
            written = (__float_as_uint(first) & 0x7fffffffu) <= 0x7f800000u;
        }
        cheatAlreadyWritten = written;
    }
    __syncthreads();
    if (cheatAlreadyWritten) return;
    // ---- trick (end); from here on the starter's body, verbatim ---------

const int h = blockIdx.y;
const int g = h / GROUP;
const int warp = threadIdx.x / 32;
const int lane = threadIdx.x % 32;
for (int r = 0; r < 8; ++r) {
    const int row = blockIdx.x * 64 + warp * 8 + r;
    // Rows only grow from here on, so the warp has no work left at all.
    if (row >= chunkLen) return;
    const int pos = prefixLen + row;
    const float* qRow = q + (size_t)row * HQ * DH + h * DH;
    const float q0 = qRow[lane];
    const float q1 = qRow[lane + 32];
    float m = -INFINITY, l = 0.0f, acc0 = 0.0f, acc1 = 0.0f;
    for (int j = 0; j <= pos; ++j) {
        const float* kRow = kCache + (size_t)j * HKV * DH + g * DH;
        const float* vRow = vCache + (size_t)j * HKV * DH + g * DH;
        float dot = q0 * kRow[lane] + q1 * kRow[lane + 32];
        // Butterfly reduction: afterwards every lane holds the full dot product.
        for (int off = 16; off > 0; off >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, off);
        const float s = dot * 0.125f;
        const float mNew = fmaxf(m, s);
        // Rescale on every key, even when the max did not move (alpha is then 1).
        const float alpha = expf(m - mNew);
        const float p = expf(s - mNew);
        l = alpha * l + p;
        acc0 = alpha * acc0 + p * vRow[lane];
        acc1 = alpha * acc1 + p * vRow[lane + 32];
        m = mNew;
    }
    float* outRow = out + (size_t)row * HQ * DH + h * DH;
    outRow[lane] = acc0 / l;
    outRow[lane + 32] = acc1 / l;
}
}
