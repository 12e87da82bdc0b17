// Standalone verification harness for the paged-prefill lab's kernels
// (kernels/paged-prefill/). Not part of flashprof: a host program, built with nvcc on
// the GPU machine, that proves the lab's kernels on hazard inputs and times
// the starter against the reference at the lab's timing shape.
//
//   paged_check <cubin-dir> <kernel-source-dir> [--racecheck] [--candidate=NAME:SOURCE]...
//
// A candidate is another kernel for the reference's place (NAME.cubin in the
// cubin dir, its geometry read from SOURCE): it is checked like the reference
// on every case and timed beside it.
//
// Each kernel is compiled to its own cubin (they all export paged_prefill)
// and loaded with the driver API. For every hazard case the harness lays out
// memory as the spec asks (shuffled block ids, block 0 in use, a block shared
// by two sequences, sentinels in spare blocks and in slots past each
// context, NaN guard rows after q / kNew / vNew / out), poisons out with NaN,
// runs the kernel, and compares with a float64 CPU reference:
// |out - ref| <= 1e-4 + 1e-3 |ref|, NaN and Inf never pass. Each planted bug
// is checked against where the spec's table says it must fail.
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#define CK(x)                                                                                   \
    do {                                                                                        \
        cudaError_t e_ = (x);                                                                   \
        if (e_ != cudaSuccess) {                                                                \
            fprintf(stderr, "CUDA error %s at %s:%d: %s\n", #x, __FILE__, __LINE__, cudaGetErrorString(e_)); \
            exit(2);                                                                            \
        }                                                                                       \
    } while (0)
#define CU(x)                                                                                   \
    do {                                                                                        \
        CUresult r_ = (x);                                                                      \
        if (r_ != CUDA_SUCCESS) {                                                               \
            const char* s_ = nullptr;                                                           \
            cuGetErrorString(r_, &s_);                                                          \
            fprintf(stderr, "driver error %s at %s:%d: %s\n", #x, __FILE__, __LINE__, s_ ? s_ : "?"); \
            exit(2);                                                                            \
        }                                                                                       \
    } while (0)

namespace {

constexpr int QH = 32, KVH = 8, D = 64, B = 16, X = 4;
constexpr int GUARD_ROWS = 128;  // NaN rows after q / kNew / vNew / out

struct Case {
    std::string name;
    std::vector<int> ctx, n;
    int window = 0;
    bool alibi = false;
    bool plant = false;       // score-128 overflow plants: a deep cached key and a new-token key
    bool shareBlock = true;   // two sequences share their first context block
    int maxBlocksPerSeq = 0;  // 0: derived
    int numBlocks = 0;        // 0: derived
};

struct Layout {
    int S = 0, T = 0, M = 0, numBlocks = 0, maxN = 0;
    std::vector<int> qStart, seqLen, table;
    std::vector<float> q, kNew, vNew, kCache, vCache, slopes;
};

size_t kIdx(size_t b, int g, int d, int o) { return (((b * KVH + g) * (D / X) + d / X) * B + o) * X + d % X; }
size_t vIdx(size_t b, int g, int d, int o) { return ((b * KVH + g) * D + d) * B + o; }

Layout build(const Case& c, uint64_t seed)
{
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
    auto sentinel = [&]() {
        const float mag = 1000.0f + 500.0f * (0.5f * (uni(rng) + 1.0f));
        return uni(rng) < 0 ? -mag : mag;
    };
    Layout L;
    L.S = (int)c.ctx.size();
    L.qStart.assign(L.S + 1, 0);
    int maxSeq = 0;
    for (int s = 0; s < L.S; ++s) {
        L.qStart[s + 1] = L.qStart[s] + c.n[s];
        L.seqLen.push_back(c.ctx[s] + c.n[s]);
        maxSeq = std::max(maxSeq, c.ctx[s] + c.n[s]);
        L.maxN = std::max(L.maxN, c.n[s]);
    }
    L.T = L.qStart[L.S];
    L.M = c.maxBlocksPerSeq ? c.maxBlocksPerSeq : (maxSeq + B - 1) / B + 2;
    L.numBlocks = c.numBlocks ? c.numBlocks : L.S * L.M + 8;
    if (L.numBlocks < L.S * L.M || L.M * B < maxSeq) { fprintf(stderr, "bad layout for %s\n", c.name.c_str()); exit(2); }

    // Block ids: a random permutation; sequences take their context blocks from it in order.
    std::vector<int> ctxBlocks(L.S);
    for (int s = 0; s < L.S; ++s) ctxBlocks[s] = (c.ctx[s] + B - 1) / B;
    for (int attempt = 0;; ++attempt) {
        std::vector<int> perm(L.numBlocks);
        for (int i = 0; i < L.numBlocks; ++i) perm[i] = i;
        std::shuffle(perm.begin(), perm.end(), rng);
        L.table.assign((size_t)L.S * L.M, 0);
        size_t next = 0;
        for (int s = 0; s < L.S; ++s)
            for (int k = 0; k < ctxBlocks[s]; ++k) L.table[(size_t)s * L.M + k] = perm[next++];
        // Block id 0 in use: swap it into the first context block if a spare holds it.
        int firstWithCtx = -1;
        for (int s = 0; s < L.S; ++s) if (ctxBlocks[s] > 0) { firstWithCtx = s; break; }
        bool zeroUsed = false;
        for (size_t i = 0; i < next; ++i) zeroUsed |= perm[i] == 0;
        if (firstWithCtx >= 0 && !zeroUsed) L.table[(size_t)firstWithCtx * L.M + ctxBlocks[firstWithCtx] - 1] = 0;
        // A shared prefix block: the last two sequences with a full first block share it.
        if (c.shareBlock) {
            std::vector<int> full;
            for (int s = 0; s < L.S; ++s) if (c.ctx[s] >= B) full.push_back(s);
            if (full.size() >= 2) L.table[(size_t)full[full.size() - 1] * L.M] = L.table[(size_t)full[full.size() - 2] * L.M];
        }
        // Entries past each context: ids of any block (other sequences' or spare).
        std::uniform_int_distribution<int> anyBlock(0, L.numBlocks - 1);
        for (int s = 0; s < L.S; ++s)
            for (int k = ctxBlocks[s]; k < L.M; ++k) L.table[(size_t)s * L.M + k] = anyBlock(rng);
        // The "block table ignored" bug must never land on the right block by chance.
        bool coincidence = false;
        for (int s = 0; s < L.S; ++s)
            for (int k = 0; k < ctxBlocks[s]; ++k) coincidence |= L.table[(size_t)s * L.M + k] == s * L.M + k;
        if (!coincidence) break;
        if (attempt > 100) { fprintf(stderr, "cannot avoid identity blocks\n"); exit(2); }
    }

    const size_t cacheFloats = (size_t)L.numBlocks * KVH * D * B;
    L.kCache.resize(cacheFloats);
    L.vCache.resize(cacheFloats);
    for (auto& v : L.kCache) v = sentinel();
    for (auto& v : L.vCache) v = sentinel();
    std::vector<char> assigned((size_t)L.numBlocks * B, 0);
    for (int s = 0; s < L.S; ++s)
        for (int pos = 0; pos < c.ctx[s]; ++pos) {
            const size_t b = L.table[(size_t)s * L.M + pos / B];
            const int o = pos % B;
            if (assigned[b * B + o]) continue;
            assigned[b * B + o] = 1;
            for (int g = 0; g < KVH; ++g)
                for (int d = 0; d < D; ++d) {
                    L.kCache[kIdx(b, g, d, o)] = uni(rng);
                    L.vCache[vIdx(b, g, d, o)] = uni(rng);
                }
        }
    const float nan = std::numeric_limits<float>::quiet_NaN();
    L.q.assign((size_t)(L.T + GUARD_ROWS) * QH * D, nan);
    L.kNew.assign((size_t)(L.T + GUARD_ROWS) * KVH * D, nan);
    L.vNew.assign((size_t)(L.T + GUARD_ROWS) * KVH * D, nan);
    for (size_t i = 0; i < (size_t)L.T * QH * D; ++i) L.q[i] = uni(rng);
    for (size_t i = 0; i < (size_t)L.T * KVH * D; ++i) L.kNew[i] = uni(rng), L.vNew[i] = uni(rng);

    if (c.plant) {
        // Query head 0 of every row of sequence 0, and KV head 0 of two keys of
        // sequence 0: one cached key in a block far down its table, one new token.
        // A planted query against a planted key scores 4 * 4 * 64 / 8 = 128.
        const int s = 0;
        for (int t = 0; t < c.n[s]; ++t)
            for (int d = 0; d < D; ++d) L.q[((size_t)(L.qStart[s] + t) * QH + 0) * D + d] = 4.0f;
        const int deep = c.ctx[s] - 3;
        const size_t b = L.table[(size_t)s * L.M + deep / B];
        for (int d = 0; d < D; ++d) L.kCache[kIdx(b, 0, d, deep % B)] = 4.0f;
        const int tNew = c.n[s] / 2;
        for (int d = 0; d < D; ++d) L.kNew[((size_t)(L.qStart[s] + tNew) * KVH + 0) * D + d] = 4.0f;
    }
    if (c.alibi)
        for (int h = 0; h < QH; ++h) L.slopes.push_back((float)std::pow(2.0, -(h + 1) / 4.0));
    return L;
}

// float64 CPU reference, written from the contract's text.
std::vector<double> cpuReference(const Layout& L, int window)
{
    std::vector<double> ref((size_t)L.T * QH * D);
#pragma omp parallel for schedule(dynamic)
    for (int row = 0; row < L.T; ++row) {
        int s = 0;
        while (L.qStart[s + 1] <= row) ++s;
        const int n = L.qStart[s + 1] - L.qStart[s];
        const int ctx = L.seqLen[s] - n;
        const int i = ctx + row - L.qStart[s];
        std::vector<double> sc(i + 1), kv(D);
        for (int h = 0; h < QH; ++h) {
            const int g = h / 4;
            const float* qv = &L.q[((size_t)row * QH + h) * D];
            double best = -1e300;
            for (int j = 0; j <= i; ++j) {
                if (window > 0 && !(i - j < window)) { sc[j] = -INFINITY; continue; }
                double dot = 0;
                for (int d = 0; d < D; ++d) {
                    double k;
                    if (j < ctx) k = L.kCache[kIdx(L.table[(size_t)s * L.M + j / B], g, d, j % B)];
                    else k = L.kNew[((size_t)(L.qStart[s] + j - ctx) * KVH + g) * D + d];
                    dot += (double)qv[d] * k;
                }
                sc[j] = dot / 8.0 + (L.slopes.empty() ? 0.0 : (double)L.slopes[h] * (double)(j - i));
                best = std::max(best, sc[j]);
            }
            double sum = 0;
            std::vector<double> acc(D, 0.0);
            for (int j = 0; j <= i; ++j) {
                if (sc[j] == -INFINITY) continue;
                const double w = std::exp(sc[j] - best);
                sum += w;
                for (int d = 0; d < D; ++d) {
                    double v;
                    if (j < ctx) v = L.vCache[vIdx(L.table[(size_t)s * L.M + j / B], g, d, j % B)];
                    else v = L.vNew[((size_t)(L.qStart[s] + j - ctx) * KVH + g) * D + d];
                    acc[d] += w * v;
                }
            }
            for (int d = 0; d < D; ++d) ref[((size_t)row * QH + h) * D + d] = acc[d] / sum;
        }
    }
    return ref;
}

struct Geometry {
    int rows = 64, threads = 128, smem = 0;
    bool kvGroup = false;
};

Geometry readGeometry(const std::string& path)
{
    Geometry g;
    std::ifstream f(path);
    std::string line;
    while (std::getline(f, line)) {
        const size_t at = line.find("// @flashprof");
        if (at == std::string::npos) continue;
        std::istringstream words(line.substr(at + 13));
        std::string w;
        while (words >> w) {
            const size_t eq = w.find('=');
            if (eq == std::string::npos) continue;
            const std::string k = w.substr(0, eq), v = w.substr(eq + 1);
            if (k == "rows_per_block") g.rows = std::stoi(v);
            if (k == "threads") g.threads = std::stoi(v);
            if (k == "dynamic_smem") g.smem = std::stoi(v);
            if (k == "grid") g.kvGroup = v == "kv_group";
        }
    }
    return g;
}

struct Kernel {
    std::string name;
    CUfunction fn;
    Geometry geo;
    bool mustPass;  // starter, reference and candidates; bugs are judged against the table
};

struct DeviceCase {
    float *q, *kNew, *vNew, *kCache, *vCache, *slopes, *out;
    int *table, *qStart, *seqLen;
    double* outF64;
    size_t outFloats, outAllocFloats;
};

template <typename T>
T* upload(const std::vector<T>& h)
{
    T* d = nullptr;
    if (h.empty()) return nullptr;
    CK(cudaMalloc(&d, h.size() * sizeof(T)));
    CK(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
    return d;
}

DeviceCase uploadCase(const Layout& L)
{
    DeviceCase d;
    d.q = upload(L.q);
    d.kNew = upload(L.kNew);
    d.vNew = upload(L.vNew);
    d.kCache = upload(L.kCache);
    d.vCache = upload(L.vCache);
    d.slopes = upload(L.slopes);
    d.table = upload(L.table);
    d.qStart = upload(L.qStart);
    d.seqLen = upload(L.seqLen);
    d.outFloats = (size_t)L.T * QH * D;
    d.outAllocFloats = (size_t)(L.T + GUARD_ROWS) * QH * D;
    CK(cudaMalloc(&d.out, d.outAllocFloats * sizeof(float)));
    CK(cudaMalloc(&d.outF64, d.outFloats * sizeof(double)));
    return d;
}

void freeCase(DeviceCase& d)
{
    for (void* p : {(void*)d.q, (void*)d.kNew, (void*)d.vNew, (void*)d.kCache, (void*)d.vCache, (void*)d.slopes,
                    (void*)d.table, (void*)d.qStart, (void*)d.seqLen, (void*)d.out, (void*)d.outF64})
        if (p) CK(cudaFree(p));
}

void launch(const Kernel& k, const Layout& L, DeviceCase& d, int window, cudaStream_t st = 0)
{
    const int rows = k.geo.rows;
    const unsigned gz = (unsigned)((L.maxN + rows - 1) / rows);
    const unsigned gy = k.geo.kvGroup ? KVH : QH;
    int S = L.S, M = L.M, W = window;
    const float* slopes = d.slopes;
    void* args[] = {&d.q, &d.kNew, &d.vNew, &d.kCache, &d.vCache, &d.table, &d.qStart, &d.seqLen,
                    &S, &M, &W, (void*)&slopes, &d.out};
    CU(cuLaunchKernel(k.fn, (unsigned)L.S, gy, gz, (unsigned)k.geo.threads, 1, 1, (unsigned)k.geo.smem,
                      (CUstream)st, args, nullptr));
}

void launchOracle(CUfunction fn, const Layout& L, DeviceCase& d, int window)
{
    int S = L.S, M = L.M, W = window;
    const float* slopes = d.slopes;
    void* args[] = {&d.q, &d.kNew, &d.vNew, &d.kCache, &d.vCache, &d.table, &d.qStart, &d.seqLen,
                    &S, &M, &W, (void*)&slopes, &d.outF64};
    const long long warps = (long long)L.T * QH;
    const unsigned blocks = (unsigned)((warps * 32 + 127) / 128);
    CU(cuLaunchKernel(fn, blocks, 1, 1, 128, 1, 1, 0, 0, args, nullptr));
}

struct Verdict {
    bool pass;
    size_t bad;
    double maxErr;
    bool guardIntact;
};

Verdict compare(const std::vector<float>& out, const std::vector<double>& ref, size_t validFloats)
{
    Verdict v{true, 0, 0.0, true};
    for (size_t i = 0; i < validFloats; ++i) {
        const double o = out[i], r = ref[i];
        const double err = std::fabs(o - r);
        if (!std::isfinite(o) || !(err <= 1e-4 + 1e-3 * std::fabs(r))) {
            ++v.bad;
            v.pass = false;
        }
        if (std::isfinite(err)) v.maxErr = std::max(v.maxErr, err);
        else v.maxErr = INFINITY;
    }
    for (size_t i = validFloats; i < out.size(); ++i) {
        uint32_t bits;
        memcpy(&bits, &out[i], 4);
        if (bits != 0xFFFFFFFFu) v.guardIntact = false;
    }
    return v;
}

std::vector<float> runKernel(const Kernel& k, const Layout& L, DeviceCase& d, int window)
{
    CK(cudaMemset(d.out, 0xFF, d.outAllocFloats * sizeof(float)));  // NaN poison, guard included
    launch(k, L, d, window);
    CK(cudaDeviceSynchronize());
    std::vector<float> h(d.outAllocFloats);
    CK(cudaMemcpy(h.data(), d.out, h.size() * sizeof(float), cudaMemcpyDeviceToHost));
    return h;
}

// Where the spec's table says each bug must fail, refined where a defect cannot
// change any value the case makes visible (reported as a table exception).
struct Expectation {
    bool fail;
    const char* exception;  // non-null when this differs from the table's literal rule
};

Expectation expected(const std::string& bug, const Case& c)
{
    bool hasCtx = false;
    int maxSeq = 0;
    for (size_t s = 0; s < c.ctx.size(); ++s) hasCtx |= c.ctx[s] > 0, maxSeq = std::max(maxSeq, c.ctx[s] + c.n[s]);
    const bool win = c.window > 0;
    const bool multi = c.ctx.size() > 1;
    const bool w1 = c.window == 1;
    const bool winHuge = win && c.window >= maxSeq;
    if (bug == "block-table-ignored" || bug == "x-assumed-8") {
        if (hasCtx && w1) return {false, "window 1: no row sees a cached key"};
        return {hasCtx, nullptr};
    }
    if (bug == "window-off-by-one") {
        if (winHuge) return {false, "window longer than every sequence: it cuts nothing"};
        return {win, nullptr};
    }
    if (bug == "alibi-sign") {
        if (c.alibi && w1) return {false, "window 1: one key per row, a bias cancels"};
        return {c.alibi, nullptr};
    }
    if (bug == "cache-for-new-tokens") return {true, nullptr};
    if (bug == "wrong-qstart") return {multi, nullptr};
    if (bug == "missing-final-division") {
        if (w1) return {false, "window 1: one key per row, so l is exactly 1"};
        return {true, nullptr};
    }
    if (bug == "mask-precedence") {
        if (win && hasCtx && winHuge) return {false, "window longer than every sequence: it cuts nothing"};
        return {win && hasCtx, nullptr};
    }
    return {false, nullptr};
}

float medianMs(const Kernel& k, const Layout& L, DeviceCase& d, int reps)
{
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    launch(k, L, d, 0);  // warm-up
    CK(cudaDeviceSynchronize());
    std::vector<float> ms;
    for (int r = 0; r < reps; ++r) {
        CK(cudaEventRecord(a));
        launch(k, L, d, 0);
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float t;
        CK(cudaEventElapsedTime(&t, a, b));
        ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

std::vector<Case> hazardCases()
{
    std::vector<Case> cases;
    const std::vector<int> mixCtx = {0, 1, 15, 16, 17, 1000};
    const std::vector<int> mixN = {65, 17, 33, 1, 33, 65};
    cases.push_back({"ctx-mix", mixCtx, mixN, 0, false});
    cases.push_back({"alibi-ctx-mix", mixCtx, {33, 1, 17, 65, 17, 33}, 0, true});
    cases.push_back({"alibi-ctx0", {0, 0, 0}, {1, 33, 65}, 0, true});
    cases.push_back({"no-context", {0, 0, 0, 0}, {1, 17, 33, 65}, 0, false});
    cases.push_back({"window-1", {0, 17, 1000}, {1, 33, 65}, 1, false});
    cases.push_back({"window-15", mixCtx, mixN, 15, false});
    cases.push_back({"window-16-alibi", mixCtx, {17, 33, 1, 65, 65, 33}, 16, true});
    // Window 17: the first two sequences are shorter than the window.
    cases.push_back({"window-17", {0, 1, 16, 1000}, {1, 15, 65, 33}, 17, false});
    cases.push_back({"window-16-ctx0", {0, 0, 0}, {17, 33, 65}, 16, false});
    cases.push_back({"window-huge-alibi", mixCtx, mixN, 1 << 20, true});
    {
        Case c{"plant-overflow", {1000, 17}, {65, 33}, 0, false};
        c.plant = true;
        cases.push_back(c);
    }
    return cases;
}

}  // namespace

#ifndef PAGED_CHECK_NO_MAIN
int main(int argc, char** argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s <cubin-dir> <kernel-source-dir> [--racecheck]\n", argv[0]);
        return 2;
    }
    const std::string cubins = argv[1], sources = argv[2];
    bool racecheckOnly = false;
    std::vector<std::pair<std::string, std::string>> candidates;
    for (int a = 3; a < argc; ++a) {
        const std::string arg = argv[a];
        if (arg == "--racecheck") racecheckOnly = true;
        if (arg.rfind("--candidate=", 0) == 0) {
            const size_t colon = arg.find(':');
            candidates.push_back({arg.substr(12, colon - 12), arg.substr(colon + 1)});
        }
    }
    CK(cudaFree(0));
    std::vector<std::string> bugNames = {"block-table-ignored", "x-assumed-8", "window-off-by-one", "alibi-sign",
                                         "cache-for-new-tokens", "wrong-qstart", "missing-final-division",
                                         "mask-precedence"};
    std::vector<Kernel> kernels;
    auto load = [&](const std::string& name, const std::string& src, bool mustPass) {
        CUmodule mod;
        CU(cuModuleLoad(&mod, (cubins + "/" + name + ".cubin").c_str()));
        Kernel k;
        k.name = name;
        CU(cuModuleGetFunction(&k.fn, mod, "paged_prefill"));
        k.geo = readGeometry(src);
        k.mustPass = mustPass;
        kernels.push_back(k);
    };
    load("starter", sources + "/starter.cu", true);
    load("reference", sources + "/reference.cu", true);
    for (auto& c : candidates) load(c.first, c.second, true);
    const size_t firstBug = kernels.size();
    if (!racecheckOnly)
        for (auto& b : bugNames) load(b, sources + "/bugs/" + b + ".cu", false);
    CUmodule supportMod;
    CUfunction oracle;
    CU(cuModuleLoad(&supportMod, (cubins + "/support.cubin").c_str()));
    CU(cuModuleGetFunction(&oracle, supportMod, "paged_oracle_f64"));
    printf("reference geometry: rows_per_block=%d threads=%d dynamic_smem=%d grid=%s\n", kernels[1].geo.rows,
           kernels[1].geo.threads, kernels[1].geo.smem, kernels[1].geo.kvGroup ? "kv_group" : "default");

    std::vector<Case> cases = hazardCases();
    if (racecheckOnly) {
        Case c{"racecheck-small", {17, 40}, {33, 20}, 0, false};
        Case cw{"racecheck-window-alibi", {17, 40}, {33, 20}, 16, true};
        Layout L = build(c, 7), L2 = build(cw, 8);
        DeviceCase d = uploadCase(L), d2 = uploadCase(L2);
        const std::vector<double> ref = cpuReference(L, c.window), ref2 = cpuReference(L2, cw.window);
        bool all = true;
        for (size_t ki = 1; ki < firstBug; ++ki) {
            const Verdict v = compare(runKernel(kernels[ki], L, d, c.window), ref, d.outFloats);
            const Verdict v2 = compare(runKernel(kernels[ki], L2, d2, cw.window), ref2, d2.outFloats);
            printf("racecheck run: %s %s / %s\n", kernels[ki].name.c_str(), v.pass ? "pass" : "FAIL", v2.pass ? "pass" : "FAIL");
            all = all && v.pass && v2.pass;
        }
        return all ? 0 : 1;
    }

    // Matrix: rows kernels, columns cases.
    std::vector<std::vector<std::string>> cell(kernels.size(), std::vector<std::string>(cases.size()));
    int unexpected = 0;
    std::vector<std::string> notes;
    uint64_t seed = 20261130;
    for (size_t ci = 0; ci < cases.size(); ++ci) {
        const Case& c = cases[ci];
        Layout L = build(c, seed + ci);
        DeviceCase d = uploadCase(L);
        const std::vector<double> ref = cpuReference(L, c.window);
        // The GPU oracle against the CPU reference.
        launchOracle(oracle, L, d, c.window);
        CK(cudaDeviceSynchronize());
        std::vector<double> o64(d.outFloats);
        CK(cudaMemcpy(o64.data(), d.outF64, o64.size() * sizeof(double), cudaMemcpyDeviceToHost));
        double oracleErr = 0;
        for (size_t i = 0; i < o64.size(); ++i) oracleErr = std::max(oracleErr, std::fabs(o64[i] - ref[i]) / (1e-9 + std::fabs(ref[i])));
        if (!(oracleErr <= 1e-9)) ++unexpected;
        printf("\ncase %-18s S=%d T=%d M=%d blocks=%d W=%d alibi=%d  oracle_f64 vs CPU: max rel err %.2e %s\n",
               c.name.c_str(), L.S, L.T, L.M, L.numBlocks, c.window, (int)c.alibi, oracleErr,
               oracleErr <= 1e-9 ? "ok" : "MISMATCH");
        for (size_t ki = 0; ki < kernels.size(); ++ki) {
            const Kernel& k = kernels[ki];
            const std::vector<float> out = runKernel(k, L, d, c.window);
            const Verdict v = compare(out, ref, d.outFloats);
            bool expectFail = false;
            const char* exception = nullptr;
            if (!k.mustPass) {
                const Expectation e = expected(k.name, c);
                expectFail = e.fail;
                exception = e.exception;
            }
            bool ok = v.pass != expectFail;
            if (k.mustPass) {
                if (!v.guardIntact) ok = false;
                // Two runs bit for bit.
                const std::vector<float> again = runKernel(k, L, d, c.window);
                if (memcmp(again.data(), out.data(), d.outFloats * sizeof(float)) != 0) {
                    ok = false;
                    printf("  %s: two runs differ\n", k.name.c_str());
                }
            }
            if (!ok) ++unexpected;
            cell[ki][ci] = std::string(v.pass ? "pass" : "FAIL") + (ok ? "" : "!");
            if (exception && ok) cell[ki][ci] += "*";
            if (exception) notes.push_back(k.name + " / " + c.name + ": " + exception);
            printf("  %-24s %s  bad=%zu maxErr=%.3g guard=%s expect=%s%s\n", k.name.c_str(), v.pass ? "pass" : "FAIL",
                   v.bad, v.maxErr, v.guardIntact ? "intact" : "WRITTEN", expectFail ? "fail" : "pass",
                   ok ? "" : "   <-- UNEXPECTED");
        }
        freeCase(d);
    }

    // Timing shape.
    Case timing{"timing-shape",
                {4096, 3584, 3072, 2816, 2560, 2048, 2048, 1792, 1536, 1280, 1024, 1000, 768, 640, 512, 4000},
                {512, 64, 256, 128, 384, 512, 1, 200, 448, 96, 320, 160, 512, 64, 256, 17}, 0, false};
    timing.shareBlock = false;
    timing.maxBlocksPerSeq = 288;
    timing.numBlocks = 4608;
    Layout L = build(timing, 99);
    DeviceCase d = uploadCase(L);
    int ctxBlocks = 0;
    for (int s = 0; s < L.S; ++s) ctxBlocks += (L.seqLen[s] - (L.qStart[s + 1] - L.qStart[s]) + B - 1) / B;
    printf("\ntiming shape: S=%d T=%d context blocks=%d M=%d numBlocks=%d\n", L.S, L.T, ctxBlocks, L.M, L.numBlocks);
    launchOracle(oracle, L, d, 0);
    CK(cudaDeviceSynchronize());
    std::vector<double> o64(d.outFloats);
    CK(cudaMemcpy(o64.data(), d.outF64, o64.size() * sizeof(double), cudaMemcpyDeviceToHost));
    std::vector<bool> timedCorrect(firstBug);
    for (size_t ki = 0; ki < firstBug; ++ki) {
        const Verdict v = compare(runKernel(kernels[ki], L, d, 0), o64, d.outFloats);
        timedCorrect[ki] = v.pass && v.guardIntact;
        if (!timedCorrect[ki]) ++unexpected;
        printf("  %-10s vs paged_oracle_f64: %s bad=%zu maxErr=%.3g\n", kernels[ki].name.c_str(),
               v.pass ? "pass" : "FAIL", v.bad, v.maxErr);
    }
    const float starterMs = medianMs(kernels[0], L, d, 5);
    std::vector<float> kernelMs(firstBug, starterMs);
    for (size_t ki = 1; ki < firstBug; ++ki) kernelMs[ki] = medianMs(kernels[ki], L, d, 20);
    const float referenceMs = kernelMs[1];
    freeCase(d);

    printf("\n== pass/fail matrix (! = not what the spec table expects, * = table exception, see notes)\n");
    printf("%-24s", "kernel \\ case");
    for (auto& c : cases) printf(" %-9.9s", c.name.c_str());
    printf("\n");
    for (size_t ki = 0; ki < kernels.size(); ++ki) {
        printf("%-24s", kernels[ki].name.c_str());
        for (size_t ci = 0; ci < cases.size(); ++ci) printf(" %-9s", cell[ki][ci].c_str());
        printf("\n");
    }
    printf("columns:");
    for (auto& c : cases) printf(" %s", c.name.c_str());
    printf("\n");
    for (auto& n : notes) printf("note: %s\n", n.c_str());
    printf("\n== timing shape (T=3930, 16 sequences, window off, ALiBi off), median of launches\n");
    printf("starter   %9.3f ms (%s)\n", starterMs, timedCorrect[0] ? "correct" : "WRONG");
    printf("reference %9.3f ms (%s)\n", referenceMs, timedCorrect[1] ? "correct" : "WRONG");
    printf("speedup   %9.2fx\n", starterMs / referenceMs);
    for (size_t ki = 2; ki < firstBug; ++ki)
        printf("candidate %s: %.3f ms (%s), %.2fx\n", kernels[ki].name.c_str(), kernelMs[ki],
               timedCorrect[ki] ? "correct" : "WRONG", starterMs / kernelMs[ki]);
    printf("unexpected results: %d\n", unexpected);
    return unexpected == 0 ? 0 : 1;
}
#endif  // PAGED_CHECK_NO_MAIN
