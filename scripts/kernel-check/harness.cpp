// Device harness for flashprof's own kernels: grades a cubin on the hazard
// cases and times kernels at the lab's timing shape.
//
// It reaches the CUDA driver through dlopen with hand-declared entry points,
// so it builds with a plain C++ compiler (the development machine has no CUDA
// headers) and loads cubins the way flashprof does. The checks mirror the
// grader's: poisoned output, NaN guard bands on every input, a sentinel band
// after the output, inputs compared after the launch, repeated runs compared
// bit for bit, a watchdog, and a float64 CPU oracle.
//
//   harness check CUBIN ROWS THREADS SMEM GRID [CASE] [RUNS]
//   harness time  CUBIN ROWS THREADS SMEM GRID [CUBIN ROWS THREADS SMEM GRID]...
//   harness cases (the case names, one a line)
//
// A hang or a sticky error ends the process (exit 3 / 4) after printing the
// case, since the context cannot be trusted afterwards.

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using CUresult = int;
using CUdevice = int;
using CUcontext = void*;
using CUmodule = void*;
using CUfunction = void*;
using CUstream = void*;
using CUevent = void*;
using CUdeviceptr = unsigned long long;

constexpr CUresult kSuccess = 0;
constexpr CUresult kNotReady = 600;
constexpr int kAttrMaxDynamicShared = 8;  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES

struct Driver {
    CUresult (*init)(unsigned);
    CUresult (*deviceGet)(CUdevice*, int);
    CUresult (*deviceGetName)(char*, int, CUdevice);
    CUresult (*primaryCtxRetain)(CUcontext*, CUdevice);
    CUresult (*ctxSetCurrent)(CUcontext);
    CUresult (*ctxSynchronize)();
    CUresult (*moduleLoad)(CUmodule*, const char*);
    CUresult (*moduleGetFunction)(CUfunction*, CUmodule, const char*);
    CUresult (*funcSetAttribute)(CUfunction, int, int);
    CUresult (*memAlloc)(CUdeviceptr*, size_t);
    CUresult (*memcpyHtoD)(CUdeviceptr, const void*, size_t);
    CUresult (*memcpyDtoH)(void*, CUdeviceptr, size_t);
    CUresult (*launchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void**, void**);
    CUresult (*streamQuery)(CUstream);
    CUresult (*eventCreate)(CUevent*, unsigned);
    CUresult (*eventRecord)(CUevent, CUstream);
    CUresult (*eventSynchronize)(CUevent);
    CUresult (*eventElapsedTime)(float*, CUevent, CUevent);
    CUresult (*getErrorString)(CUresult, const char**);
};

Driver cu;

template <typename F>
void bind(void* lib, F& slot, const char* name)
{
    slot = reinterpret_cast<F>(dlsym(lib, name));
    if (!slot) {
        std::fprintf(stderr, "libcuda lacks %s\n", name);
        std::exit(2);
    }
}

std::string errorText(CUresult status)
{
    const char* text = nullptr;
    if (cu.getErrorString && cu.getErrorString(status, &text) == kSuccess && text) return text;
    return "error " + std::to_string(status);
}

void check(CUresult status, const char* what)
{
    if (status != kSuccess) {
        std::printf("  crash (%s: %s)\n", what, errorText(status).c_str());
        std::fflush(stdout);
        std::_Exit(4);
    }
}

void loadDriver()
{
    void* lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) {
        std::fprintf(stderr, "cannot load libcuda.so.1: %s\n", dlerror());
        std::exit(2);
    }
    bind(lib, cu.init, "cuInit");
    bind(lib, cu.deviceGet, "cuDeviceGet");
    bind(lib, cu.deviceGetName, "cuDeviceGetName");
    bind(lib, cu.primaryCtxRetain, "cuDevicePrimaryCtxRetain");
    bind(lib, cu.ctxSetCurrent, "cuCtxSetCurrent");
    bind(lib, cu.ctxSynchronize, "cuCtxSynchronize");
    bind(lib, cu.moduleLoad, "cuModuleLoad");
    bind(lib, cu.moduleGetFunction, "cuModuleGetFunction");
    bind(lib, cu.funcSetAttribute, "cuFuncSetAttribute");
    bind(lib, cu.memAlloc, "cuMemAlloc_v2");
    bind(lib, cu.memcpyHtoD, "cuMemcpyHtoD_v2");
    bind(lib, cu.memcpyDtoH, "cuMemcpyDtoH_v2");
    bind(lib, cu.launchKernel, "cuLaunchKernel");
    bind(lib, cu.streamQuery, "cuStreamQuery");
    bind(lib, cu.eventCreate, "cuEventCreate");
    bind(lib, cu.eventRecord, "cuEventRecord");
    bind(lib, cu.eventSynchronize, "cuEventSynchronize");
    bind(lib, cu.eventElapsedTime, "cuEventElapsedTime");
    bind(lib, cu.getErrorString, "cuGetErrorString");
    check(cu.init(0), "cuInit");
    CUdevice device;
    check(cu.deviceGet(&device, 0), "cuDeviceGet");
    CUcontext context;
    check(cu.primaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain");
    check(cu.ctxSetCurrent(context), "cuCtxSetCurrent");
}

constexpr int kHq = 32, kHkv = 8, kDh = 64, kGroup = 4;

struct Kernel {
    CUfunction function;
    int rowsPerBlock, threads, smem;
    bool perKvGroup;
};

Kernel loadKernel(char** args)
{
    Kernel k{};
    CUmodule module;
    check(cu.moduleLoad(&module, args[0]), "cuModuleLoad");
    check(cu.moduleGetFunction(&k.function, module, "attention_prefill"), "cuModuleGetFunction");
    k.rowsPerBlock = std::atoi(args[1]);
    k.threads = std::atoi(args[2]);
    k.smem = std::atoi(args[3]);
    k.perKvGroup = std::string(args[4]) == "kv_group";
    if (k.smem > 48 * 1024) check(cu.funcSetAttribute(k.function, kAttrMaxDynamicShared, k.smem), "smem attribute");
    return k;
}

// Plants as in assets/cases.toml: every dim of one head at some positions.
enum class Where { List, All, Chunk, LastPrefix, Last };
struct Plant {
    char tensor;  // 'q' or 'k'
    Where where;
    std::vector<int> list;
};
struct Case {
    const char* name;
    int chunk, prefix;
    std::vector<Plant> plants;
    float otherHeadsScale;  // 1 = none; else heads 1.. of q, k, v are scaled
};

std::vector<Case> hazardCases()
{
    const Plant qAll{'q', Where::All, {}};
    return {
        {"random-small", 64, 64, {}, 1.0f},
        {"planted-overflow", 64, 128, {{'q', Where::List, {0, 1, 31, 32, 63}}, {'k', Where::List, {0, 77, 127, 130, 150}}}, 1.0f},
        {"last-key-of-prefix", 64, 1000, {qAll, {'k', Where::LastPrefix, {}}}, 1.0f},
        {"last-key-of-sequence", 33, 1000, {qAll, {'k', Where::Last, {}}}, 1.0f},
        {"causal-diagonal", 100, 50, {qAll, {'k', Where::Chunk, {}}}, 1.0f},
        {"chunk-of-1", 1, 1000, {}, 1.0f},
        {"chunk-of-17", 17, 31, {}, 1.0f},
        {"chunk-of-33", 33, 1000, {}, 1.0f},
        {"prefix-31", 100, 31, {}, 1.0f},
        {"prefix-1000", 128, 1000, {}, 1.0f},
        {"no-prefix", 100, 0, {}, 1.0f},
        {"chunk-multiple-of-64", 128, 64, {}, 1.0f},
        {"chunk-64-plus-one", 129, 64, {}, 1.0f},
        {"large-values-other-heads", 64, 64, {}, 8.0f},
    };
}

struct Inputs {
    int chunk, prefix;
    std::vector<float> q, k, v;
};

uint64_t splitmix(uint64_t& state)
{
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void fillUniform(std::vector<float>& data, uint64_t& state)
{
    for (float& x : data) x = (float)((splitmix(state) >> 40) * (1.0 / (1ull << 24)) * 2.0 - 1.0);
}

Inputs makeInputs(const Case& c, uint64_t seed)
{
    Inputs in{c.chunk, c.prefix, {}, {}, {}};
    const int seq = c.chunk + c.prefix;
    in.q.resize((size_t)c.chunk * kHq * kDh);
    in.k.resize((size_t)seq * kHkv * kDh);
    in.v.resize(in.k.size());
    fillUniform(in.q, seed);
    fillUniform(in.k, seed);
    fillUniform(in.v, seed);
    if (c.otherHeadsScale != 1.0f) {
        auto scaleHeads = [&](std::vector<float>& t, int heads) {
            for (size_t i = 0; i < t.size(); ++i)
                if ((i / kDh) % heads != 0) t[i] *= c.otherHeadsScale;
        };
        scaleHeads(in.q, kHq);
        scaleHeads(in.k, kHkv);
        scaleHeads(in.v, kHkv);
    }
    for (const Plant& p : c.plants) {
        const bool isQ = p.tensor == 'q';
        std::vector<int> positions = p.list;
        const int count = isQ ? c.chunk : seq;
        if (p.where == Where::All)
            for (int i = 0; i < count; ++i) positions.push_back(i);
        if (p.where == Where::Chunk)
            for (int i = c.prefix; i < seq; ++i) positions.push_back(i);
        if (p.where == Where::LastPrefix) positions.push_back(c.prefix - 1);
        if (p.where == Where::Last) positions.push_back(count - 1);
        std::vector<float>& t = isQ ? in.q : in.k;
        const int heads = isQ ? kHq : kHkv;
        for (int pos : positions)
            std::fill_n(t.begin() + (size_t)pos * heads * kDh, kDh, 4.0f);  // head 0
    }
    return in;
}

// float64 oracle for one (row, head): two passes, max then weighted sum.
void oracleRow(const Inputs& in, int row, int head, double* result)
{
    const float* qRow = &in.q[((size_t)row * kHq + head) * kDh];
    const int g = head / kGroup, last = in.prefix + row;
    std::vector<double> scores(last + 1);
    double best = -1e300;
    for (int j = 0; j <= last; ++j) {
        const float* kRow = &in.k[((size_t)j * kHkv + g) * kDh];
        double s = 0;
        for (int d = 0; d < kDh; ++d) s += (double)qRow[d] * kRow[d];
        scores[j] = s * 0.125;
        best = std::max(best, scores[j]);
    }
    double sum = 0;
    std::fill_n(result, kDh, 0.0);
    for (int j = 0; j <= last; ++j) {
        const double w = std::exp(scores[j] - best);
        sum += w;
        const float* vRow = &in.v[((size_t)j * kHkv + g) * kDh];
        for (int d = 0; d < kDh; ++d) result[d] += w * vRow[d];
    }
    for (int d = 0; d < kDh; ++d) result[d] /= sum;
}

constexpr size_t kGuard = 4096;  // floats each side; keeps every buffer 16-byte aligned
constexpr uint32_t kInputGuardBits = 0x7fc00000u;
constexpr uint32_t kOutPoisonBits = 0x7fbadbadu;
constexpr uint32_t kOutGuardBits = 0x7fa5a5a5u;

float fromBits(uint32_t bits)
{
    float x;
    std::memcpy(&x, &bits, 4);
    return x;
}
uint32_t toBits(float x)
{
    uint32_t bits;
    std::memcpy(&bits, &x, 4);
    return bits;
}

// A device buffer with guard bands; `data` points past the leading band.
struct Guarded {
    CUdeviceptr base = 0, data = 0;
    size_t count = 0;
    std::vector<float> image;  // the whole band-data-band image last uploaded

    void create(const std::vector<float>& contents, uint32_t guardBits, uint32_t fillBits, bool useContents)
    {
        count = useContents ? contents.size() : count;
        image.assign(count + 2 * kGuard, fromBits(guardBits));
        for (size_t i = 0; i < count; ++i) image[kGuard + i] = useContents ? contents[i] : fromBits(fillBits);
        if (!base) check(cu.memAlloc(&base, image.size() * 4), "cuMemAlloc");
        data = base + kGuard * 4;
        check(cu.memcpyHtoD(base, image.data(), image.size() * 4), "upload");
    }
    std::vector<float> download() const
    {
        std::vector<float> all(image.size());
        check(cu.memcpyDtoH(all.data(), base, all.size() * 4), "download");
        return all;
    }
};

void launch(const Kernel& k, CUdeviceptr q, CUdeviceptr kc, CUdeviceptr vc, CUdeviceptr out, int chunk, int prefix)
{
    const unsigned gridX = std::max(1, (chunk + k.rowsPerBlock - 1) / k.rowsPerBlock);
    const unsigned gridY = k.perKvGroup ? kHkv : kHq;
    void* args[] = {&q, &kc, &vc, &out, &chunk, &prefix};
    check(cu.launchKernel(k.function, gridX, gridY, 1, k.threads, 1, 1, k.smem, nullptr, args, nullptr), "launch");
}

// Waits for the default stream with a watchdog.
void waitOrDie(const char* caseName, double seconds)
{
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
        const CUresult status = cu.streamQuery(nullptr);
        if (status == kSuccess) return;
        if (status != kNotReady) check(status, caseName);
        if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > seconds) {
            std::printf("  timeout (%s still running after %.0f s)\n", caseName, seconds);
            std::fflush(stdout);
            std::_Exit(3);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

struct Verdict {
    size_t wrong = 0, nonFinite = 0, unwritten = 0, guardHit = 0, inputChanged = 0, movedRuns = 0, movedElems = 0;
    double worstRatio = 0;
};

void gradeCase(const Kernel& kernel, const Case& c, int runs)
{
    const Inputs in = makeInputs(c, 0x5eed0000ull + (uint64_t)c.chunk * 7919 + c.prefix);
    const size_t outCount = in.q.size();
    std::vector<double> oracle(outCount);
#pragma omp parallel for schedule(dynamic)
    for (int rh = 0; rh < c.chunk * kHq; ++rh) oracleRow(in, rh / kHq, rh % kHq, &oracle[(size_t)rh * kDh]);

    Guarded q, k, v, out;
    q.create(in.q, kInputGuardBits, 0, true);
    k.create(in.k, kInputGuardBits, 0, true);
    v.create(in.v, kInputGuardBits, 0, true);
    out.count = outCount;
    Verdict verdict;
    std::vector<float> firstRun;
    for (int run = 0; run < runs; ++run) {
        out.create({}, kOutGuardBits, kOutPoisonBits, false);
        launch(kernel, q.data, k.data, v.data, out.data, c.chunk, c.prefix);
        waitOrDie(c.name, 10.0);
        check(cu.ctxSynchronize(), c.name);
        const std::vector<float> all = out.download();
        for (const Guarded* input : {&q, &k, &v}) {
            const std::vector<float> now = input->download();
            for (size_t i = 0; i < now.size(); ++i) verdict.inputChanged += toBits(now[i]) != toBits(input->image[i]);
        }
        for (size_t i = 0; i < kGuard; ++i) {
            verdict.guardHit += toBits(all[i]) != kOutGuardBits;
            verdict.guardHit += toBits(all[kGuard + outCount + i]) != kOutGuardBits;
        }
        const std::vector<float> values(all.begin() + kGuard, all.begin() + kGuard + outCount);
        if (run == 0) {
            firstRun = values;
            for (size_t i = 0; i < outCount; ++i) {
                const double x = values[i], ref = oracle[i];
                if (toBits(values[i]) == kOutPoisonBits) {
                    ++verdict.unwritten;
                } else if (!std::isfinite(x)) {
                    ++verdict.nonFinite;
                } else {
                    const double ratio = std::fabs(x - ref) / (1e-4 + 1e-3 * std::fabs(ref));
                    verdict.worstRatio = std::max(verdict.worstRatio, ratio);
                    verdict.wrong += ratio > 1.0;
                }
            }
        } else {
            size_t moved = 0;
            for (size_t i = 0; i < outCount; ++i) moved += toBits(values[i]) != toBits(firstRun[i]);
            verdict.movedRuns += moved > 0;
            verdict.movedElems = std::max(verdict.movedElems, moved);
        }
    }
    std::string kinds;
    if (verdict.wrong) kinds += " fail";
    if (verdict.nonFinite) kinds += " nan";
    if (verdict.unwritten) kinds += " unwritten";
    if (verdict.movedRuns) kinds += " race";
    if (verdict.guardHit) kinds += " oob-write";
    if (verdict.inputChanged) kinds += " input-mutated";
    std::printf("  %-26s %-6s worst=%.3g wrong=%zu nonfinite=%zu unwritten=%zu moved=%zu/%d(max %zu elems) guard=%zu inputs=%zu\n",
                c.name, kinds.empty() ? " ok" : kinds.c_str(), verdict.worstRatio, verdict.wrong, verdict.nonFinite,
                verdict.unwritten, verdict.movedRuns, runs - 1, verdict.movedElems, verdict.guardHit,
                verdict.inputChanged);
    std::fflush(stdout);
}

int commandCheck(int argc, char** argv)
{
    const Kernel kernel = loadKernel(argv + 2);
    const std::string only = argc > 7 ? argv[7] : "all";
    const int runs = argc > 8 ? std::atoi(argv[8]) : 2;
    for (const Case& c : hazardCases())
        if (only == "all" || only == c.name) gradeCase(kernel, c, runs);
    return 0;
}

// Times each kernel at C = P = 2048 (median of 10 after warm-up) and checks
// sampled rows of its timed output against the oracle.
int commandTime(int argc, char** argv)
{
    const Case shape{"timing", 2048, 2048, {}, 1.0f};
    const Inputs in = makeInputs(shape, 42);
    Guarded q, k, v, out;
    q.create(in.q, kInputGuardBits, 0, true);
    k.create(in.k, kInputGuardBits, 0, true);
    v.create(in.v, kInputGuardBits, 0, true);
    out.count = in.q.size();
    std::vector<int> sampleRows;
    for (int row = 0; row < shape.chunk; row += 97) sampleRows.push_back(row);
    sampleRows.push_back(shape.chunk - 1);
    std::vector<double> oracle(sampleRows.size() * kHq * kDh);
#pragma omp parallel for
    for (int s = 0; s < (int)(sampleRows.size() * kHq); ++s)
        oracleRow(in, sampleRows[s / kHq], s % kHq, &oracle[(size_t)s * kDh]);

    CUevent begin, end;
    check(cu.eventCreate(&begin, 0), "event");
    check(cu.eventCreate(&end, 0), "event");
    double firstMedian = 0;
    for (int a = 2; a + 5 <= argc; a += 5) {
        const Kernel kernel = loadKernel(argv + a);
        out.create({}, kOutGuardBits, kOutPoisonBits, false);
        for (int warm = 0; warm < 2; ++warm) launch(kernel, q.data, k.data, v.data, out.data, shape.chunk, shape.prefix);
        waitOrDie("timing warm-up", 60.0);
        std::vector<float> times;
        for (int rep = 0; rep < 10; ++rep) {
            check(cu.eventRecord(begin, nullptr), "record");
            launch(kernel, q.data, k.data, v.data, out.data, shape.chunk, shape.prefix);
            check(cu.eventRecord(end, nullptr), "record");
            check(cu.eventSynchronize(end), "timed launch");
            float ms = 0;
            check(cu.eventElapsedTime(&ms, begin, end), "elapsed");
            times.push_back(ms);
        }
        std::sort(times.begin(), times.end());
        const double median = (times[4] + times[5]) / 2;
        if (firstMedian == 0) firstMedian = median;
        const std::vector<float> all = out.download();
        double worst = 0;
        size_t bad = 0;
        for (size_t s = 0; s < sampleRows.size() * kHq; ++s)
            for (int d = 0; d < kDh; ++d) {
                const size_t index = ((size_t)sampleRows[s / kHq] * kHq + s % kHq) * kDh + d;
                const double x = all[kGuard + index], ref = oracle[s * kDh + d];
                const double ratio = std::fabs(x - ref) / (1e-4 + 1e-3 * std::fabs(ref));
                if (!(ratio <= 1.0)) ++bad;
                if (std::isfinite(ratio)) worst = std::max(worst, ratio);
            }
        const double gflops = 201359360.0 * 256.0 / (median * 1e-3) / 1e9;
        std::printf("  %-40s median %8.3f ms  min %8.3f  max %8.3f  %7.0f GFLOP/s  speedup x%.2f  sampled %s (worst %.3g of tol)\n",
                    argv[a], median, times.front(), times.back(), gflops, firstMedian / median,
                    bad ? "WRONG" : "ok", worst);
        std::fflush(stdout);
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv)
{
    if (argc == 2 && std::string(argv[1]) == "cases") {
        for (const Case& c : hazardCases()) std::printf("%s\n", c.name);
        return 0;
    }
    if (argc < 7) {
        std::fprintf(stderr, "usage: harness check|time CUBIN ROWS THREADS SMEM GRID ...\n");
        return 2;
    }
    loadDriver();
    char name[128] = {};
    CUdevice device;
    cu.deviceGet(&device, 0);
    cu.deviceGetName(name, sizeof name, device);
    if (std::string(argv[1]) == "time") {
        std::printf("device: %s\n", name);
        return commandTime(argc, argv);
    }
    return commandCheck(argc, argv);
}
