// The line-profile spike (issue: "where the time goes, line by line"): in
// one process, on one CUDA context, it
//   1. lists the SASS metrics the GPU offers (the list is per chip),
//   2. runs PC Sampling over a kernel and prints the samples per PC with
//      their stall reasons (and every stall reason name the GPU has),
//   3. then runs SASS Metrics over the same kernel and prints, per PC, the
//      counts of the metrics asked for,
// each step timed, and says whether each step worked after the one before.
// Built and run by scripts/gpu-line-spike.sh; its output is recorded in
// docs/LINE-PROFILE.md. Not part of flashprof's build.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti_pcsampling.h>
#include <cupti_profiler_target.h>
#include <cupti_sass_metrics.h>
#include <cupti_target.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#define CHECK_CUPTI(call)                                                    \
  do {                                                                       \
    CUptiResult status_ = (call);                                            \
    if (status_ != CUPTI_SUCCESS) {                                          \
      const char* said_ = "";                                                \
      cuptiGetResultString(status_, &said_);                                 \
      printf("FAILED %s (line %d): %s\n", #call, __LINE__, said_);          \
      return false;                                                          \
    }                                                                        \
  } while (0)

// A 32x32 tile kernel with one deliberate bank conflict (a column read of an
// unpadded tile), one uncoalesced load (a column of `in`), a barrier and a
// math loop, each on its own line (the numbers are printed with the PCs).
__global__ void tiled(const float* in, float* out, int n) {
  __shared__ float tile[32][32];
  const int x = blockIdx.x * 32 + threadIdx.x;
  const int y = blockIdx.y * 32 + threadIdx.y;
  tile[threadIdx.y][threadIdx.x] = in[y * n + x];  // line 43: coalesced load
  __syncthreads();                                 // line 44: barrier
  float v = tile[threadIdx.x][threadIdx.y];        // line 45: 32-way bank conflict
  const float s = in[x * n + y];                   // line 46: uncoalesced load
  for (int i = 0; i < 256; ++i) v = v * 1.0001f + s;  // line 47: math
  out[y * n + x] = v;                              // line 48: store
}

static const int N = 4096;

static void launch(const float* in, float* out) {
  tiled<<<dim3(N / 32, N / 32), dim3(32, 32)>>>(in, out, N);
  cudaDeviceSynchronize();
}

static double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

static bool list_sass_metrics(const char* chip, std::vector<CUpti_SassMetrics_MetricDetails>& out) {
  CUpti_SassMetrics_GetNumOfMetrics_Params count = {CUpti_SassMetrics_GetNumOfMetrics_Params_STRUCT_SIZE};
  count.pChipName = chip;
  CHECK_CUPTI(cuptiSassMetricsGetNumOfMetrics(&count));
  out.resize(count.numOfMetrics);
  CUpti_SassMetrics_GetMetrics_Params list = {CUpti_SassMetrics_GetMetrics_Params_STRUCT_SIZE};
  list.pChipName = chip;
  list.numOfMetrics = count.numOfMetrics;
  list.pMetricsList = out.data();
  CHECK_CUPTI(cuptiSassMetricsGetMetrics(&list));
  for (auto& m : out) printf("sass-metric\t%s\t%s\n", m.pMetricName, m.pMetricDescription);
  return true;
}

static bool pc_sampling(CUcontext ctx, const float* in, float* out) {
  // Enabled first: the stall reasons are read from an enabled context.
  CUpti_PCSamplingEnableParams enable = {CUpti_PCSamplingEnableParamsSize};
  enable.ctx = ctx;
  auto started = std::chrono::steady_clock::now();
  CHECK_CUPTI(cuptiPCSamplingEnable(&enable));
  size_t reasons = 0;
  CUpti_PCSamplingGetNumStallReasonsParams num = {CUpti_PCSamplingGetNumStallReasonsParamsSize};
  num.ctx = ctx;
  num.numStallReasons = &reasons;
  CHECK_CUPTI(cuptiPCSamplingGetNumStallReasons(&num));
  std::vector<uint32_t> index(reasons);
  std::vector<std::vector<char>> storage(reasons, std::vector<char>(CUPTI_STALL_REASON_STRING_SIZE));
  std::vector<char*> names(reasons);
  for (size_t i = 0; i < reasons; ++i) names[i] = storage[i].data();
  CUpti_PCSamplingGetStallReasonsParams get = {CUpti_PCSamplingGetStallReasonsParamsSize};
  get.ctx = ctx;
  get.numStallReasons = reasons;
  get.stallReasonIndex = index.data();
  get.stallReasons = names.data();
  CHECK_CUPTI(cuptiPCSamplingGetStallReasons(&get));
  std::map<uint32_t, std::string> reason_name;
  for (size_t i = 0; i < reasons; ++i) {
    reason_name[index[i]] = names[i];
    printf("stall-reason\t%u\t%s\n", index[i], names[i]);
  }

  const size_t max_pcs = 4096;
  std::vector<CUpti_PCSamplingPCData> pcs(max_pcs);
  std::vector<std::vector<CUpti_PCSamplingStallReason>> pc_reasons(max_pcs, std::vector<CUpti_PCSamplingStallReason>(reasons));
  for (size_t i = 0; i < max_pcs; ++i) {
    memset(&pcs[i], 0, sizeof pcs[i]);
    pcs[i].size = sizeof(CUpti_PCSamplingPCData);
    pcs[i].stallReason = pc_reasons[i].data();
  }
  CUpti_PCSamplingData data;
  memset(&data, 0, sizeof data);
  data.size = sizeof(CUpti_PCSamplingData);
  data.collectNumPcs = max_pcs;
  data.pPcData = pcs.data();

  std::vector<CUpti_PCSamplingConfigurationInfo> config(6);
  memset(config.data(), 0, config.size() * sizeof config[0]);
  config[0].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD;
  config[0].attributeData.samplingPeriodData.samplingPeriod = 7;
  config[1].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_STALL_REASON;
  config[1].attributeData.stallReasonData.stallReasonCount = reasons;
  config[1].attributeData.stallReasonData.pStallReasonIndex = index.data();
  config[2].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE;
  config[2].attributeData.collectionModeData.collectionMode = CUPTI_PC_SAMPLING_COLLECTION_MODE_KERNEL_SERIALIZED;
  config[3].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_ENABLE_START_STOP_CONTROL;
  config[3].attributeData.enableStartStopControlData.enableStartStopControl = 1;
  config[4].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_OUTPUT_DATA_FORMAT;
  config[4].attributeData.outputDataFormatData.outputDataFormat = CUPTI_PC_SAMPLING_OUTPUT_DATA_FORMAT_PARSED;
  config[5].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_DATA_BUFFER;
  config[5].attributeData.samplingDataBufferData.samplingDataBuffer = &data;
  CUpti_PCSamplingConfigurationInfoParams set = {CUpti_PCSamplingConfigurationInfoParamsSize};
  set.ctx = ctx;
  set.numAttributes = config.size();
  set.pPCSamplingConfigurationInfo = config.data();
  CHECK_CUPTI(cuptiPCSamplingSetConfigurationAttribute(&set));
  printf("pc-sampling\tenable+configure_ms\t%.1f\n", ms_since(started));

  CUpti_PCSamplingStartParams start = {CUpti_PCSamplingStartParamsSize};
  start.ctx = ctx;
  CUpti_PCSamplingStopParams stop = {CUpti_PCSamplingStopParamsSize};
  stop.ctx = ctx;
  started = std::chrono::steady_clock::now();
  CHECK_CUPTI(cuptiPCSamplingStart(&start));
  launch(in, out);
  CHECK_CUPTI(cuptiPCSamplingStop(&stop));
  printf("pc-sampling\tsampled_launch_ms\t%.1f\n", ms_since(started));
  // What did not fit the buffer given at configuration comes with GetData.
  started = std::chrono::steady_clock::now();
  size_t rounds = 0;
  while (data.remainingNumPcs > 0 && rounds < 8) {
    CUpti_PCSamplingGetDataParams more = {CUpti_PCSamplingGetDataParamsSize};
    more.ctx = ctx;
    more.pcSamplingData = &data;
    CHECK_CUPTI(cuptiPCSamplingGetData(&more));
    ++rounds;
  }
  printf("pc-sampling\ttotal_samples\t%llu\tdropped\t%llu\tpcs\t%zu\tremaining\t%zu\tnon_user\t%llu\thw_full\t%u\n",
         (unsigned long long)data.totalSamples, (unsigned long long)data.droppedSamples, data.totalNumPcs,
         data.remainingNumPcs, (unsigned long long)data.nonUsrKernelsTotalSamples, data.hardwareBufferFull);
  for (size_t i = 0; i < data.totalNumPcs && i < max_pcs; ++i) {
    const CUpti_PCSamplingPCData& pc = pcs[i];
    for (size_t r = 0; r < pc.stallReasonCount; ++r) {
      printf("pc-sample\t%s\t%#llx\t%s\t%u\n", pc.functionName, (unsigned long long)pc.pcOffset,
             reason_name[pc.stallReason[r].pcSamplingStallReasonIndex].c_str(), pc.stallReason[r].samples);
    }
  }
  CUpti_PCSamplingDisableParams disable = {CUpti_PCSamplingDisableParamsSize};
  disable.ctx = ctx;
  CHECK_CUPTI(cuptiPCSamplingDisable(&disable));
  printf("pc-sampling\tread+disable_ms\t%.1f\n", ms_since(started));
  return true;
}

static bool sass_metrics(CUcontext ctx, const char* chip, const std::vector<CUpti_SassMetrics_MetricDetails>& offered,
                         const float* in, float* out) {
  // Every offered metric whose name speaks of instructions executed,
  // shared-memory wavefronts or global sectors (ideal ones included).
  std::vector<CUpti_SassMetrics_Config> configs;
  std::map<uint64_t, std::string> names;
  for (auto& m : offered) {
    std::string name = m.pMetricName;
    if (name.find("inst_executed") != std::string::npos || name.find("wavefront") != std::string::npos ||
        name.find("sectors") != std::string::npos || name.find("divergent") != std::string::npos) {
      configs.push_back({m.metricId, static_cast<uint8_t>(CUPTI_SASS_METRICS_OUTPUT_GRANULARITY_GPU)});
      names[m.metricId] = name;
      printf("sass-metric-asked\t%s\n", name.c_str());
    }
  }
  auto started = std::chrono::steady_clock::now();
  CUpti_SassMetricsSetConfig_Params set = {CUpti_SassMetricsSetConfig_Params_STRUCT_SIZE};
  set.numOfMetricConfig = configs.size();
  set.pConfigs = configs.data();
  set.deviceIndex = 0;
  CHECK_CUPTI(cuptiSassMetricsSetConfig(&set));
  CUpti_SassMetricsEnable_Params enable = {CUpti_SassMetricsEnable_Params_STRUCT_SIZE};
  enable.ctx = ctx;
  enable.enableLazyPatching = 1;
  CHECK_CUPTI(cuptiSassMetricsEnable(&enable));
  launch(in, out);
  printf("sass-metrics\tpatched_launch_ms\t%.1f\n", ms_since(started));
  CUpti_SassMetricsGetDataProperties_Params props = {CUpti_SassMetricsGetDataProperties_Params_STRUCT_SIZE};
  props.ctx = ctx;
  CHECK_CUPTI(cuptiSassMetricsGetDataProperties(&props));
  printf("sass-metrics\trecords\t%zu\tinstances\t%zu\n", props.numOfPatchedInstructionRecords, props.numOfInstances);
  std::vector<CUpti_SassMetrics_Data> records(props.numOfPatchedInstructionRecords);
  std::vector<CUpti_SassMetrics_InstanceValue> values(props.numOfPatchedInstructionRecords * props.numOfInstances);
  for (size_t i = 0; i < records.size(); ++i) {
    memset(&records[i], 0, sizeof records[i]);
    records[i].structSize = sizeof(CUpti_SassMetrics_Data);
    records[i].pInstanceValues = &values[i * props.numOfInstances];
  }
  CUpti_SassMetricsFlushData_Params flush = {CUpti_SassMetricsFlushData_Params_STRUCT_SIZE};
  flush.ctx = ctx;
  flush.numOfPatchedInstructionRecords = records.size();
  flush.numOfInstances = props.numOfInstances;
  flush.pMetricsData = records.data();
  CHECK_CUPTI(cuptiSassMetricsFlushData(&flush));
  for (auto& r : records) {
    for (size_t k = 0; k < props.numOfInstances; ++k) {
      const auto& v = r.pInstanceValues[k];
      if (v.value) printf("sass-value\t%s\t%#x\t%s\t%llu\n", r.functionName, r.pcOffset, names[v.metricId].c_str(),
                          (unsigned long long)v.value);
    }
  }
  CUpti_SassMetricsDisable_Params disable = {CUpti_SassMetricsDisable_Params_STRUCT_SIZE};
  disable.ctx = ctx;
  CHECK_CUPTI(cuptiSassMetricsDisable(&disable));
  CUpti_SassMetricsUnsetConfig_Params unset = {CUpti_SassMetricsUnsetConfig_Params_STRUCT_SIZE};
  unset.deviceIndex = 0;
  CHECK_CUPTI(cuptiSassMetricsUnsetConfig(&unset));
  printf("sass-metrics\ttotal_ms\t%.1f\n", ms_since(started));
  return true;
}

int main(int argc, char** argv) {
  // Unbuffered: a crash inside CUPTI still leaves every line before it.
  setvbuf(stdout, nullptr, _IONBF, 0);
  float *in, *out;
  cudaMalloc(&in, sizeof(float) * N * N);
  cudaMalloc(&out, sizeof(float) * N * N);
  cudaMemset(in, 0, sizeof(float) * N * N);
  launch(in, out);  // module loaded, warm
  // "plain": the kernel twice and nothing of CUPTI, for Nsight Compute.
  if (argc > 1 && strcmp(argv[1], "plain") == 0) {
    launch(in, out);
    return 0;
  }
  CUcontext ctx;
  cuCtxGetCurrent(&ctx);
  auto started = std::chrono::steady_clock::now();
  launch(in, out);
  printf("plain\tlaunch_ms\t%.2f\n", ms_since(started));

  // The chip name is read through the profiler, which must be initialised.
  CUpti_Profiler_Initialize_Params init = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
  if (cuptiProfilerInitialize(&init) != CUPTI_SUCCESS) {
    printf("FAILED cuptiProfilerInitialize\n");
    return 1;
  }
  CUpti_Device_GetChipName_Params chip = {CUpti_Device_GetChipName_Params_STRUCT_SIZE};
  chip.deviceIndex = 0;
  if (cuptiDeviceGetChipName(&chip) != CUPTI_SUCCESS) {
    printf("FAILED cuptiDeviceGetChipName\n");
    return 1;
  }
  printf("chip\t%s\n", chip.pChipName);
  std::vector<CUpti_SassMetrics_MetricDetails> offered;
  const bool listed = list_sass_metrics(chip.pChipName, offered);
  printf("step\tlist-sass-metrics\t%s\t%zu metrics\n", listed ? "ok" : "FAILED", offered.size());
  const bool sampled = pc_sampling(ctx, in, out);
  printf("step\tpc-sampling\t%s\n", sampled ? "ok" : "FAILED");
  const bool counted = listed && sass_metrics(ctx, chip.pChipName, offered, in, out);
  printf("step\tsass-metrics-after-pc-sampling\t%s\n", counted ? "ok" : "FAILED");
  // And PC sampling again after SASS metrics, on the same context.
  const bool again = pc_sampling(ctx, in, out);
  printf("step\tpc-sampling-after-sass-metrics\t%s\n", again ? "ok" : "FAILED");
  started = std::chrono::steady_clock::now();
  launch(in, out);
  printf("plain\tlaunch_after_ms\t%.2f\n", ms_since(started));
  return (listed && sampled && counted && again) ? 0 : 1;
}
