//! The line profile's collector: CUPTI's PC Sampling (warp stall samples per
//! instruction, by reason) and SASS Metrics (per-instruction counts) around
//! launches of one kernel on one context (docs/LINE-PROFILE.md).
//!
//! Each collection enables its API, runs the launch closure once, reads what
//! was collected and disables the API again, so the next launch on the
//! context runs unpatched and unsampled. PC Sampling runs kernel-serialized
//! with start/stop control, its output parsed by CUPTI; SASS Metrics patches
//! lazily (only the functions launched) at whole-GPU granularity.
#![allow(unsafe_code)]

use std::collections::HashMap;
use std::ffi::{c_char, CStr, CString};
use std::ptr;
use std::sync::Arc;

use cudarc::driver::CudaContext;

use super::sys::{self, Params};
use super::{chip_name, Api, Cupti, CuptiError, Function, ProfilerSession, Target};
use crate::grade::lines::{is_stall_reason, InstructionCounts, InstructionReading};

/// PC Sampling's hardware buffer: CUPTI's default is 512 MB, set up on
/// every enable; a profile takes some tens of thousands of samples, a few
/// megabytes, so far less does.
const HARDWARE_BUFFER_BYTES: u64 = 64 << 20;
/// The buffer CUPTI decodes samples into: 1 MB (its default) holds about
/// 5,500 PCs with every reason; room for four times the PCs we read.
const SCRATCH_BUFFER_BYTES: u64 = 32 << 20;
/// How often CUPTI's worker threads wake to decode samples, in ms (its
/// default, 100 ms, is as much again at the end of every sampled launch).
const WORKER_SLEEP_MS: u64 = 2;

/// The count of [`InstructionCounts`] a SASS metric fills.
type CountField = fn(&mut InstructionCounts) -> &mut u64;

/// The SASS metrics read, and the count each fills.
const COUNTED: [(&str, CountField); 6] = [
    ("smsp__sass_inst_executed", |c| &mut c.executed),
    ("smsp__sass_l1tex_pipe_lsu_wavefronts_mem_shared", |c| {
        &mut c.shared_wavefronts
    }),
    (
        "smsp__sass_l1tex_pipe_lsu_wavefronts_mem_shared_ideal",
        |c| &mut c.shared_wavefronts_ideal,
    ),
    ("smsp__sass_sectors_mem_global", |c| &mut c.global_sectors),
    ("smsp__sass_sectors_mem_global_ideal", |c| {
        &mut c.global_sectors_ideal
    }),
    ("smsp__sass_branch_targets_threads_divergent", |c| {
        &mut c.divergent_branches
    }),
];

/// The buffers PC Sampling writes into: every PC with room for every
/// reason, the reasons asked for, and the data header CUPTI fills.
struct PcBuffers {
    indices: Vec<u32>,
    names: HashMap<u32, String>,
    /// Each PC's room for its reasons; `pcs` points into these.
    _per_pc: Vec<Vec<sys::PcSamplingStallReason>>,
    pcs: Vec<sys::PcSamplingPcData>,
    /// Boxed: CUPTI keeps its address from the configuration on.
    data: Box<sys::PcSamplingData>,
}

impl PcBuffers {
    fn new(indices: Vec<u32>, names: HashMap<u32, String>, max_pcs: usize) -> Self {
        let mut per_pc = vec![vec![sys::PcSamplingStallReason::default(); indices.len()]; max_pcs];
        let mut pcs: Vec<sys::PcSamplingPcData> = per_pc
            .iter_mut()
            .map(|room| sys::PcSamplingPcData {
                size: std::mem::size_of::<sys::PcSamplingPcData>(),
                cubinCrc: 0,
                pcOffset: 0,
                functionIndex: 0,
                pad: 0,
                functionName: ptr::null_mut(),
                stallReasonCount: 0,
                stallReason: room.as_mut_ptr(),
                correlationId: 0,
            })
            .collect();
        let data = Box::new(sys::PcSamplingData {
            size: std::mem::size_of::<sys::PcSamplingData>(),
            collectNumPcs: max_pcs,
            totalSamples: 0,
            droppedSamples: 0,
            totalNumPcs: 0,
            remainingNumPcs: 0,
            rangeId: 0,
            pPcData: pcs.as_mut_ptr(),
            nonUsrKernelsTotalSamples: 0,
            hardwareBufferFull: 0,
        });
        Self {
            indices,
            names,
            _per_pc: per_pc,
            pcs,
            data,
        }
    }
}

/// What PC Sampling read of one kernel.
#[derive(Debug, Clone, PartialEq)]
pub struct Sampled {
    /// Samples per instruction offset of the function, by reason name.
    pub readings: Vec<InstructionReading>,
    pub total_samples: u64,
    pub dropped_samples: u64,
}

/// PC Sampling and SASS Metrics on one context.
pub struct LineSampler {
    api: Arc<Api>,
    /// The SASS metrics this chip offers of [`COUNTED`], by id.
    counted: Vec<(u64, usize)>,
    chip: String,
    /// The device whose SASS Metrics configuration this sampler set: CUPTI
    /// takes it once per device (a second set failed on the H100,
    /// 2026-12-06), so it is set on the first count and unset on drop.
    sass_configured: Option<u32>,
    _session: ProfilerSession,
    target: Target,
}

impl Drop for LineSampler {
    fn drop(&mut self) {
        if let Some(device) = self.sass_configured.take() {
            let mut unset = sys::SassUnsetConfigParams::new();
            unset.deviceIndex = device;
            // Nothing to do about a failure while the sampler goes away.
            let _ = self.call(Function::SassMetricsUnsetConfig, &mut unset);
        }
    }
}

impl LineSampler {
    /// Reads the chip and which of the counts it offers, on `context`.
    pub fn enable(cupti: &Cupti, context: &Arc<CudaContext>) -> Result<Self, CuptiError> {
        let api = &cupti.api;
        let target = Target {
            raw: context.cu_ctx().cast(),
            device: context.cu_device(),
            ordinal: context.ordinal(),
            context: Some(Arc::clone(context)),
        };
        target.bind()?;
        let session = ProfilerSession::begin(api)?;
        let chip = chip_name(api, target.ordinal)?;
        let counted = offered_counts(api, &chip)?;
        // PC Sampling leaves threads of CUPTI's own running after it is
        // disabled; unloading the library under them crashed the process
        // at exit (H100, 2026-12-06). Once lines are sampled, libcupti
        // stays loaded for the life of the process.
        std::mem::forget(Arc::clone(api));
        Ok(Self {
            api: Arc::clone(api),
            counted,
            chip,
            sass_configured: None,
            _session: session,
            target,
        })
    }

    pub fn chip(&self) -> &str {
        &self.chip
    }

    /// Calls `function` on the sampler's context with `params`.
    fn call<P: Params>(&self, function: Function, params: &mut P) -> Result<(), CuptiError> {
        // SAFETY: every caller passes the struct `function` takes, with
        // pointers into buffers that outlive the call.
        unsafe { self.api.call(function, params) }
    }

    /// Samples `launch` (which must launch and synchronize) every
    /// 2^`period_log2` cycles and returns the samples of `function`'s
    /// instructions; room is made for `max_pcs` of them.
    pub fn sample(
        &mut self,
        function: &str,
        period_log2: u32,
        max_pcs: usize,
        launch: &mut dyn FnMut() -> anyhow::Result<()>,
    ) -> Result<Sampled, CuptiError> {
        self.target.bind()?;
        let mut enable = sys::PcSamplingContextParams::new();
        enable.ctx = self.target.raw;
        self.call(Function::PcSamplingEnable, &mut enable)?;
        // CUPTI writes into these buffers from the configuration until it is
        // disabled (disabling copies the last records into them), so they
        // are made here and dropped only after the disable below.
        let mut buffers: Option<PcBuffers> = None;
        let sampled = self.stall_reasons().and_then(|(indices, names)| {
            let buffers = buffers.insert(PcBuffers::new(indices, names, max_pcs));
            self.sample_enabled(buffers, function, period_log2, launch)
        });
        let mut disable = sys::PcSamplingContextParams::new();
        disable.ctx = self.target.raw;
        then_cleanup(
            sampled,
            self.call(Function::PcSamplingDisable, &mut disable),
        )
    }

    fn sample_enabled(
        &mut self,
        buffers: &mut PcBuffers,
        function: &str,
        period_log2: u32,
        launch: &mut dyn FnMut() -> anyhow::Result<()>,
    ) -> Result<Sampled, CuptiError> {
        let ctx = self.target.raw;
        let reasons = buffers.indices.len();
        let max_pcs = buffers.pcs.len();
        let data_ptr: *mut sys::PcSamplingData = &mut *buffers.data;
        let mut config = [
            sys::PcSamplingConfigurationInfo::words(
                sys::PC_SAMPLING_ATTR_SAMPLING_PERIOD,
                [u64::from(period_log2), 0, 0],
            ),
            sys::PcSamplingConfigurationInfo::words(
                sys::PC_SAMPLING_ATTR_STALL_REASON,
                [reasons as u64, buffers.indices.as_mut_ptr() as u64, 0],
            ),
            sys::PcSamplingConfigurationInfo::words(
                sys::PC_SAMPLING_ATTR_COLLECTION_MODE,
                [sys::PC_SAMPLING_KERNEL_SERIALIZED, 0, 0],
            ),
            sys::PcSamplingConfigurationInfo::words(
                sys::PC_SAMPLING_ATTR_ENABLE_START_STOP_CONTROL,
                [1, 0, 0],
            ),
            sys::PcSamplingConfigurationInfo::words(
                sys::PC_SAMPLING_ATTR_OUTPUT_DATA_FORMAT,
                [sys::PC_SAMPLING_PARSED, 0, 0],
            ),
            sys::PcSamplingConfigurationInfo::words(
                sys::PC_SAMPLING_ATTR_SAMPLING_DATA_BUFFER,
                [data_ptr as u64, 0, 0],
            ),
            sys::PcSamplingConfigurationInfo::words(
                sys::PC_SAMPLING_ATTR_HARDWARE_BUFFER_SIZE,
                [HARDWARE_BUFFER_BYTES, 0, 0],
            ),
            sys::PcSamplingConfigurationInfo::words(
                sys::PC_SAMPLING_ATTR_SCRATCH_BUFFER_SIZE,
                [SCRATCH_BUFFER_BYTES, 0, 0],
            ),
            sys::PcSamplingConfigurationInfo::words(
                sys::PC_SAMPLING_ATTR_WORKER_THREAD_PERIODIC_SLEEP_SPAN,
                [WORKER_SLEEP_MS, 0, 0],
            ),
        ];
        let mut set = sys::PcSamplingConfigurationInfoParams::new();
        set.ctx = ctx;
        set.numAttributes = config.len();
        set.pPCSamplingConfigurationInfo = config.as_mut_ptr();
        self.call(Function::PcSamplingSetConfigurationAttribute, &mut set)?;
        let mut start = sys::PcSamplingContextParams::new();
        start.ctx = ctx;
        self.call(Function::PcSamplingStart, &mut start)?;
        let launched = launch();
        let mut stop = sys::PcSamplingContextParams::new();
        stop.ctx = ctx;
        let stopped = self.call(Function::PcSamplingStop, &mut stop);
        launched.map_err(CuptiError::Launch)?;
        stopped?;
        // What did not fit the buffer at stop comes with GetData, a buffer's
        // worth at a time (the first read is the buffer given at setup).
        let mut readings: std::collections::BTreeMap<u64, InstructionReading> = Default::default();
        let mut total_samples = 0;
        let mut dropped_samples = 0;
        // The functions CUPTI named instead, should none be the kernel's.
        let mut others = std::collections::BTreeSet::new();
        loop {
            total_samples += buffers.data.totalSamples;
            dropped_samples += buffers.data.droppedSamples;
            for pc in buffers
                .pcs
                .iter()
                .take(buffers.data.totalNumPcs.min(max_pcs))
            {
                let name = function_name(pc);
                if name.as_deref() != Some(function) {
                    if others.len() < 3 {
                        others.insert(name.unwrap_or_else(|| "no function".into()));
                    }
                    continue;
                }
                let reading = readings
                    .entry(pc.pcOffset)
                    .or_insert_with(|| InstructionReading {
                        offset: pc.pcOffset,
                        ..InstructionReading::default()
                    });
                let count = pc.stallReasonCount.min(reasons);
                // SAFETY: CUPTI wrote `stallReasonCount` entries (at most the
                // `reasons` the buffer holds) through this PC's pointer.
                let stalls = unsafe { std::slice::from_raw_parts(pc.stallReason, count) };
                for stall in stalls {
                    let Some(name) = buffers.names.get(&stall.pcSamplingStallReasonIndex) else {
                        continue;
                    };
                    if stall.samples > 0 && is_stall_reason(name) {
                        reading
                            .stalls
                            .push((name.clone(), u64::from(stall.samples)));
                    }
                }
            }
            if buffers.data.remainingNumPcs == 0 {
                break;
            }
            buffers.data.totalNumPcs = 0;
            buffers.data.totalSamples = 0;
            buffers.data.droppedSamples = 0;
            let mut more = sys::PcSamplingGetDataParams::new();
            more.ctx = ctx;
            more.pcSamplingData = data_ptr.cast();
            self.call(Function::PcSamplingGetData, &mut more)?;
        }
        // Samples charged to no instruction of the kernel would read as a
        // profile in which every line is cold: refuse it instead.
        if readings.is_empty() && total_samples > 0 {
            return Err(CuptiError::Unattributed {
                function: function.to_owned(),
                samples: total_samples,
                seen: others.into_iter().collect::<Vec<_>>().join(", "),
            });
        }
        Ok(Sampled {
            readings: readings.into_values().collect(),
            total_samples,
            dropped_samples,
        })
    }

    /// The stall reasons of the context: their indices, and each index's name.
    fn stall_reasons(&self) -> Result<(Vec<u32>, HashMap<u32, String>), CuptiError> {
        let mut count = 0usize;
        let mut num = sys::PcSamplingGetNumStallReasonsParams::new();
        num.ctx = self.target.raw;
        num.numStallReasons = &mut count;
        self.call(Function::PcSamplingGetNumStallReasons, &mut num)?;
        let mut indices = vec![0u32; count];
        let mut storage = vec![vec![0 as c_char; sys::STALL_REASON_STRING_SIZE]; count];
        let mut names: Vec<*mut c_char> = storage.iter_mut().map(|s| s.as_mut_ptr()).collect();
        let mut get = sys::PcSamplingGetStallReasonsParams::new();
        get.ctx = self.target.raw;
        get.numStallReasons = count;
        get.stallReasonIndex = indices.as_mut_ptr();
        get.stallReasons = names.as_mut_ptr();
        self.call(Function::PcSamplingGetStallReasons, &mut get)?;
        let by_index = indices
            .iter()
            .zip(&storage)
            .map(|(&index, name)| {
                // SAFETY: CUPTI wrote a NUL-terminated name of at most
                // STALL_REASON_STRING_SIZE bytes; the last byte stays 0.
                let name = unsafe { CStr::from_ptr(name.as_ptr()) };
                (index, name.to_string_lossy().into_owned())
            })
            .collect();
        Ok((indices, by_index))
    }

    /// Counts each instruction of `function` over one `launch` (which must
    /// launch and synchronize), with the SASS code patched for it.
    pub fn count(
        &mut self,
        function: &str,
        launch: &mut dyn FnMut() -> anyhow::Result<()>,
    ) -> Result<Vec<(u64, InstructionCounts)>, CuptiError> {
        self.target.bind()?;
        let ctx = self.target.raw;
        if self.counted.is_empty() {
            return Ok(Vec::new());
        }
        self.configure_sass()?;
        let mut enable = sys::SassEnableParams::new();
        enable.ctx = ctx;
        enable.enableLazyPatching = 1;
        self.call(Function::SassMetricsEnable, &mut enable)?;
        let counted = self.count_enabled(function, launch);
        let mut disable = sys::SassDisableParams::new();
        disable.ctx = ctx;
        then_cleanup(
            counted,
            self.call(Function::SassMetricsDisable, &mut disable),
        )
    }

    /// Sets the SASS metrics to count on the sampler's device, once.
    fn configure_sass(&mut self) -> Result<(), CuptiError> {
        if self.sass_configured.is_some() {
            return Ok(());
        }
        let mut configs: Vec<sys::SassMetricConfig> = self
            .counted
            .iter()
            .map(|&(id, _)| sys::SassMetricConfig {
                metricId: id,
                outputGranularity: sys::SASS_GRANULARITY_GPU,
            })
            .collect();
        let device = u32::try_from(self.target.ordinal).unwrap_or(0);
        let mut set = sys::SassSetConfigParams::new();
        set.numOfMetricConfig = configs.len();
        set.pConfigs = configs.as_mut_ptr();
        set.deviceIndex = device;
        self.call(Function::SassMetricsSetConfig, &mut set)?;
        self.sass_configured = Some(device);
        Ok(())
    }

    fn count_enabled(
        &mut self,
        function: &str,
        launch: &mut dyn FnMut() -> anyhow::Result<()>,
    ) -> Result<Vec<(u64, InstructionCounts)>, CuptiError> {
        let ctx = self.target.raw;
        launch().map_err(CuptiError::Launch)?;
        let mut properties = sys::SassGetDataPropertiesParams::new();
        properties.ctx = ctx;
        self.call(Function::SassMetricsGetDataProperties, &mut properties)?;
        let records = properties.numOfPatchedInstructionRecords;
        let instances = properties.numOfInstances;
        if records == 0 || instances == 0 {
            return Ok(Vec::new());
        }
        let mut values = vec![sys::SassMetricsInstanceValue::default(); records * instances];
        let mut data: Vec<sys::SassMetricsData> = values
            .chunks_mut(instances)
            .map(|room| sys::SassMetricsData {
                structSize: std::mem::size_of::<sys::SassMetricsData>(),
                pPriv: ptr::null_mut(),
                cubinCrc: 0,
                functionIndex: 0,
                functionName: ptr::null(),
                pcOffset: 0,
                pInstanceValues: room.as_mut_ptr(),
            })
            .collect();
        let mut flush = sys::SassFlushDataParams::new();
        flush.ctx = ctx;
        flush.numOfPatchedInstructionRecords = records;
        flush.numOfInstances = instances;
        flush.pMetricsData = data.as_mut_ptr();
        self.call(Function::SassMetricsFlushData, &mut flush)?;
        let mut counts: std::collections::BTreeMap<u64, InstructionCounts> = Default::default();
        for record in &data {
            if record.functionName.is_null() {
                continue;
            }
            // SAFETY: CUPTI names the function with a NUL-terminated string
            // it keeps until the data is disabled.
            let name = unsafe { CStr::from_ptr(record.functionName) };
            if name.to_bytes() != function.as_bytes() {
                continue;
            }
            let entry = counts.entry(u64::from(record.pcOffset)).or_default();
            // SAFETY: CUPTI wrote `instances` values through this record's pointer.
            let values = unsafe { std::slice::from_raw_parts(record.pInstanceValues, instances) };
            for value in values {
                if let Some(&(_, field)) = self.counted.iter().find(|(id, _)| *id == value.metricId)
                {
                    *(COUNTED[field].1)(entry) += value.value;
                }
            }
        }
        Ok(counts.into_iter().collect())
    }
}

/// `result`, once `cleanup` (run whatever the result) also succeeded: the
/// first error of the two is the one reported.
fn then_cleanup<T>(
    result: Result<T, CuptiError>,
    cleanup: Result<(), CuptiError>,
) -> Result<T, CuptiError> {
    let value = result?;
    cleanup?;
    Ok(value)
}

/// The function name CUPTI wrote for a PC. Its header says the caller
/// frees it. Freeing it aborted the worker with a double free (H100,
/// 2026-12-06) in the first version of this collector, which also dropped
/// its buffers before CUPTI was disabled; freeing was not tried again with
/// the buffers kept, so the names are left: a few strings per profile in a
/// worker that lives for one profile.
fn function_name(pc: &sys::PcSamplingPcData) -> Option<String> {
    if pc.functionName.is_null() {
        return None;
    }
    // SAFETY: CUPTI wrote a NUL-terminated name here for this PC.
    let name = unsafe { CStr::from_ptr(pc.functionName) };
    Some(name.to_string_lossy().into_owned())
}

/// Which of [`COUNTED`] `chip` offers, by metric id.
fn offered_counts(api: &Api, chip: &str) -> Result<Vec<(u64, usize)>, CuptiError> {
    let chip_c = CString::new(chip).map_err(|_| CuptiError::InvalidName(chip.to_owned()))?;
    let mut count = sys::SassGetNumOfMetricsParams::new();
    count.pChipName = chip_c.as_ptr();
    // SAFETY: the chip name outlives the call.
    unsafe { api.call(Function::SassMetricsGetNumOfMetrics, &mut count) }?;
    let mut list = vec![
        sys::SassMetricDetails {
            metricId: 0,
            pMetricName: ptr::null(),
            pMetricDescription: ptr::null(),
        };
        count.numOfMetrics
    ];
    let mut get = sys::SassGetMetricsParams::new();
    get.pChipName = chip_c.as_ptr();
    get.numOfMetrics = list.len();
    get.pMetricsList = list.as_mut_ptr();
    // SAFETY: the list holds numOfMetrics entries.
    unsafe { api.call(Function::SassMetricsGetMetrics, &mut get) }?;
    Ok(list
        .iter()
        .filter(|m| !m.pMetricName.is_null())
        .filter_map(|m| {
            // SAFETY: CUPTI's own NUL-terminated metric name.
            let name = unsafe { CStr::from_ptr(m.pMetricName) }.to_string_lossy();
            let field = COUNTED.iter().position(|(wanted, _)| *wanted == name)?;
            Some((m.metricId, field))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    /// Every size and offset as gcc lays out CUPTI 13.0's own headers
    /// (`cupti_pcsampling.h`, `cupti_sass_metrics.h` from the
    /// nvidia-cuda-cupti 13.0.85 wheel, printed with `sizeof`/`offsetof`
    /// and the headers' `*_STRUCT_SIZE` macros on 2026-12-06).
    #[test]
    fn the_structs_match_cupti_13_s_layout() {
        assert_eq!(size_of::<sys::PcSamplingPcData>(), 64);
        assert_eq!(offset_of!(sys::PcSamplingPcData, functionName), 32);
        assert_eq!(offset_of!(sys::PcSamplingPcData, stallReason), 48);
        assert_eq!(offset_of!(sys::PcSamplingPcData, correlationId), 56);
        assert_eq!(size_of::<sys::PcSamplingData>(), 80);
        assert_eq!(offset_of!(sys::PcSamplingData, pPcData), 56);
        assert_eq!(offset_of!(sys::PcSamplingData, hardwareBufferFull), 72);
        assert_eq!(size_of::<sys::PcSamplingConfigurationInfo>(), 32);
        assert_eq!(
            offset_of!(sys::PcSamplingConfigurationInfo, attributeData),
            8
        );
        assert_eq!(size_of::<sys::PcSamplingStallReason>(), 8);
        assert_eq!(sys::PcSamplingConfigurationInfoParams::STRUCT_SIZE, 40);
        assert_eq!(sys::PcSamplingGetStallReasonsParams::STRUCT_SIZE, 48);
        assert_eq!(sys::PcSamplingGetNumStallReasonsParams::STRUCT_SIZE, 32);
        assert_eq!(sys::PcSamplingContextParams::STRUCT_SIZE, 24);
        assert_eq!(sys::PcSamplingGetDataParams::STRUCT_SIZE, 32);
        assert_eq!(size_of::<sys::SassMetricsData>(), 48);
        assert_eq!(offset_of!(sys::SassMetricsData, pcOffset), 32);
        assert_eq!(offset_of!(sys::SassMetricsData, pInstanceValues), 40);
        assert_eq!(size_of::<sys::SassMetricConfig>(), 16);
        assert_eq!(size_of::<sys::SassMetricDetails>(), 24);
        assert_eq!(size_of::<sys::SassMetricsInstanceValue>(), 16);
        assert_eq!(sys::SassGetNumOfMetricsParams::STRUCT_SIZE, 32);
        assert_eq!(sys::SassGetMetricsParams::STRUCT_SIZE, 40);
        assert_eq!(sys::SassSetConfigParams::STRUCT_SIZE, 36);
        assert_eq!(sys::SassUnsetConfigParams::STRUCT_SIZE, 20);
        assert_eq!(sys::SassEnableParams::STRUCT_SIZE, 25);
        assert_eq!(sys::SassDisableParams::STRUCT_SIZE, 32);
        assert_eq!(sys::SassGetDataPropertiesParams::STRUCT_SIZE, 40);
        assert_eq!(sys::SassFlushDataParams::STRUCT_SIZE, 40);
    }

    /// Every count read is a metric the H100 offered in the spike.
    #[test]
    fn every_count_read_is_offered_on_the_h100() {
        let offered = include_str!("../../../tests/fixtures/line-profile/gh100-sass-metrics.txt");
        for (name, _) in COUNTED {
            assert!(offered.lines().any(|line| line == name), "{name}");
        }
    }
}
