//! Raw CUPTI 13.0 ABI: the parameter structs, result codes and the table of
//! entry points, plus the `dlopen` of `libcupti.so.13` itself.
//!
//! Every profiler call in CUPTI takes a single pointer to a parameter struct
//! and returns a `CUptiResult`, so one function-pointer type ([`Entry`]) covers
//! the whole table. That uniformity is what lets tests swap in plain Rust
//! `extern "C"` functions for the library without any GPU.
//!
//! Field names keep CUPTI's spelling so each struct can be checked line by
//! line against the layout dump in `tests/fixtures/`.
#![allow(unsafe_code)]
#![allow(non_snake_case)]

use std::ffi::{c_char, c_void};
use std::fmt;
use std::mem::{offset_of, size_of};
use std::path::Path;

/// CUPTI's calling convention for every function this crate binds.
pub type Entry = unsafe extern "C" fn(*mut c_void) -> i32;

/// A `CUptiResult`, kept as the raw integer so unknown codes survive intact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResultCode(pub i32);

impl ResultCode {
    pub const SUCCESS: Self = Self(0);
    pub const INVALID_PARAMETER: Self = Self(1);
    pub const INVALID_OPERATION: Self = Self(7);
    pub const NOT_INITIALIZED: Self = Self(15);
    pub const INVALID_METRIC_NAME: Self = Self(17);
    pub const HARDWARE_BUSY: Self = Self(26);
    pub const NOT_SUPPORTED: Self = Self(27);
    pub const VIRTUALIZED_DEVICE_NOT_SUPPORTED: Self = Self(33);
    pub const INSUFFICIENT_PRIVILEGES: Self = Self(35);
    pub const LEGACY_PROFILER_NOT_SUPPORTED: Self = Self(38);
    /// Another CUPTI client (Nsight Compute or Systems, usually) is attached to the process.
    pub const MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED: Self = Self(39);
    pub const UNKNOWN: Self = Self(999);

    /// CUPTI's enumerator name, or `None` for a code this table does not list.
    pub fn name(self) -> Option<&'static str> {
        Some(match self {
            Self::SUCCESS => "CUPTI_SUCCESS",
            Self::INVALID_PARAMETER => "CUPTI_ERROR_INVALID_PARAMETER",
            Self::INVALID_OPERATION => "CUPTI_ERROR_INVALID_OPERATION",
            Self::NOT_INITIALIZED => "CUPTI_ERROR_NOT_INITIALIZED",
            Self::INVALID_METRIC_NAME => "CUPTI_ERROR_INVALID_METRIC_NAME",
            Self::HARDWARE_BUSY => "CUPTI_ERROR_HARDWARE_BUSY",
            Self::NOT_SUPPORTED => "CUPTI_ERROR_NOT_SUPPORTED",
            Self::VIRTUALIZED_DEVICE_NOT_SUPPORTED => {
                "CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED"
            }
            Self::INSUFFICIENT_PRIVILEGES => "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES",
            Self::LEGACY_PROFILER_NOT_SUPPORTED => "CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED",
            Self::MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED => {
                "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"
            }
            Self::UNKNOWN => "CUPTI_ERROR_UNKNOWN",
            _ => return None,
        })
    }
}

impl fmt::Display for ResultCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => write!(f, "{name} ({})", self.0),
            None => write!(f, "CUPTI result {}", self.0),
        }
    }
}

/// `CUpti_ProfilerRange::CUPTI_AutoRange`: one range per kernel launch.
pub const AUTO_RANGE: u32 = 1;
/// `CUpti_ProfilerReplayMode::CUPTI_KernelReplay`: CUPTI replays the kernel itself.
pub const KERNEL_REPLAY: u32 = 2;
/// `CUpti_ProfilerType::CUPTI_PROFILER_TYPE_RANGE_PROFILER`.
pub const PROFILER_TYPE_RANGE: u32 = 0;
/// `CUpti_Profiler_API::CUPTI_PROFILER_RANGE_PROFILING`.
pub const API_RANGE_PROFILING: u32 = 0;
/// `CUpti_Profiler_Support_Level` values a feature can report.
pub const SUPPORT_UNSUPPORTED: u32 = 1;
pub const SUPPORT_DISABLED: u32 = 2;

/// A parameter struct CUPTI accepts.
pub trait Params: Sized {
    /// What goes in `structSize`: the end of the last 13.0 field, which is
    /// smaller than `size_of` when the struct ends in padding. CUPTI uses it
    /// to tell which fields the caller knows about.
    const STRUCT_SIZE: usize;
    /// An all-zero struct with `structSize` filled in.
    fn new() -> Self;
}

/// Declares the parameter structs: the two-field header every CUPTI params
/// struct starts with, the 13.0 fields, and a [`Params`] impl whose
/// `STRUCT_SIZE` is derived from the named last field.
macro_rules! params {
    ($(
        $(#[$doc:meta])*
        $name:ident { $($field:ident: $ty:ty),* $(,)? } ends_at $last:ident: $last_ty:ty;
    )*) => {$(
        $(#[$doc])*
        #[repr(C)]
        #[derive(Debug)]
        pub struct $name {
            pub structSize: usize,
            pub pPriv: *mut c_void,
            $(pub $field: $ty,)*
        }

        impl Params for $name {
            const STRUCT_SIZE: usize = offset_of!($name, $last) + size_of::<$last_ty>();
            fn new() -> Self {
                // SAFETY: every field is an integer or a raw pointer, for which
                // all-zero bytes are a valid value (and padding is zeroed too).
                let mut params: Self = unsafe { std::mem::zeroed() };
                params.structSize = Self::STRUCT_SIZE;
                params
            }
        }
    )*};
}

params! {
    /// Initialize and DeInitialize both carry nothing but the header.
    BareParams {} ends_at pPriv: *mut c_void;
    /// `CUpti_Device_GetChipName_Params`.
    GetChipNameParams { deviceIndex: usize, pChipName: *const c_char } ends_at pChipName: *const c_char;
    /// `CUpti_Profiler_GetCounterAvailability_Params` (13.0 ends before `bAllowDeviceLevelCounters`).
    GetCounterAvailabilityParams {
        ctx: *mut c_void,
        counterAvailabilityImageSize: usize,
        pCounterAvailabilityImage: *mut u8,
    } ends_at pCounterAvailabilityImage: *mut u8;
    /// `CUpti_Profiler_DeviceSupported_Params`.
    DeviceSupportedParams {
        cuDevice: i32,
        isSupported: u32,
        architecture: u32,
        sli: u32,
        vGpu: u32,
        confidentialCompute: u32,
        cmp: u32,
        wsl: u32,
        api: u32,
    } ends_at api: u32;
    /// `CUpti_Profiler_Host_Initialize_Params`.
    HostInitializeParams {
        profilerType: u32,
        pChipName: *const c_char,
        pCounterAvailabilityImage: *const u8,
        pHostObject: *mut c_void,
    } ends_at pHostObject: *mut c_void;
    /// Every call whose only argument is one object: host Deinitialize,
    /// range-profiler Disable and Start.
    ObjectParams { pObject: *mut c_void } ends_at pObject: *mut c_void;
    /// `CUpti_Profiler_Host_ConfigAddMetrics_Params`.
    ConfigAddMetricsParams {
        pHostObject: *mut c_void,
        ppMetricNames: *const *const c_char,
        numMetrics: usize,
    } ends_at numMetrics: usize;
    /// `CUpti_Profiler_Host_GetConfigImageSize_Params`.
    ConfigImageSizeParams { pHostObject: *mut c_void, configImageSize: usize } ends_at configImageSize: usize;
    /// `CUpti_Profiler_Host_GetConfigImage_Params`.
    ConfigImageParams {
        pHostObject: *mut c_void,
        configImageSize: usize,
        pConfigImage: *mut u8,
    } ends_at pConfigImage: *mut u8;
    /// `CUpti_Profiler_Host_GetNumOfPasses_Params`.
    GetNumOfPassesParams {
        configImageSize: usize,
        pConfigImage: *mut u8,
        numOfPasses: usize,
    } ends_at numOfPasses: usize;
    /// `CUpti_Profiler_Host_EvaluateToGpuValues_Params`.
    EvaluateParams {
        pHostObject: *mut c_void,
        pCounterDataImage: *const u8,
        counterDataImageSize: usize,
        rangeIndex: usize,
        ppMetricNames: *const *const c_char,
        numMetrics: usize,
        pMetricValues: *mut f64,
    } ends_at pMetricValues: *mut f64;
    /// `CUpti_RangeProfiler_Enable_Params` (13.0 has no `cacheControlMode`).
    EnableParams { ctx: *mut c_void, pRangeProfilerObject: *mut c_void } ends_at pRangeProfilerObject: *mut c_void;
    /// `CUpti_RangeProfiler_GetCounterDataSize_Params`.
    GetCounterDataSizeParams {
        pRangeProfilerObject: *mut c_void,
        pMetricNames: *const *const c_char,
        numMetrics: usize,
        maxNumOfRanges: usize,
        maxNumRangeTreeNodes: u32,
        counterDataSize: usize,
    } ends_at counterDataSize: usize;
    /// `CUpti_RangeProfiler_CounterDataImage_Initialize_Params`.
    CounterDataInitializeParams {
        pRangeProfilerObject: *mut c_void,
        counterDataSize: usize,
        pCounterData: *mut u8,
    } ends_at pCounterData: *mut u8;
    /// `CUpti_RangeProfiler_SetConfig_Params`.
    SetConfigParams {
        pRangeProfilerObject: *mut c_void,
        configSize: usize,
        pConfig: *const u8,
        counterDataImageSize: usize,
        pCounterDataImage: *mut u8,
        range: u32,
        replayMode: u32,
        maxRangesPerPass: usize,
        numNestingLevels: u16,
        minNestingLevel: u16,
        passIndex: usize,
        targetNestingLevel: u16,
    } ends_at targetNestingLevel: u16;
    /// `CUpti_RangeProfiler_Stop_Params`; note `targetNestingLevel` is a
    /// `size_t` here but a `uint16_t` in SetConfig.
    StopParams {
        pRangeProfilerObject: *mut c_void,
        passIndex: usize,
        targetNestingLevel: usize,
        isAllPassSubmitted: u8,
    } ends_at isAllPassSubmitted: u8;
    /// `CUpti_RangeProfiler_DecodeData_Params`.
    DecodeDataParams { pRangeProfilerObject: *mut c_void, numOfRangeDropped: usize } ends_at numOfRangeDropped: usize;
    /// `CUpti_RangeProfiler_GetCounterDataInfo_Params`.
    GetCounterDataInfoParams {
        pCounterDataImage: *const u8,
        counterDataImageSize: usize,
        numTotalRanges: usize,
    } ends_at numTotalRanges: usize;
}

// PC Sampling (`cupti_pcsampling.h`): its parameter structs start with
// `size` where the profiler's say `structSize`, the same field.
params! {
    /// `CUpti_PCSampling{Enable,Disable,Start,Stop}Params`: the context alone.
    PcSamplingContextParams { ctx: *mut c_void } ends_at ctx: *mut c_void;
    /// `CUpti_PCSamplingGetNumStallReasonsParams`.
    PcSamplingGetNumStallReasonsParams {
        ctx: *mut c_void,
        numStallReasons: *mut usize,
    } ends_at numStallReasons: *mut usize;
    /// `CUpti_PCSamplingGetStallReasonsParams`.
    PcSamplingGetStallReasonsParams {
        ctx: *mut c_void,
        numStallReasons: usize,
        stallReasonIndex: *mut u32,
        stallReasons: *mut *mut c_char,
    } ends_at stallReasons: *mut *mut c_char;
    /// `CUpti_PCSamplingConfigurationInfoParams`.
    PcSamplingConfigurationInfoParams {
        ctx: *mut c_void,
        numAttributes: usize,
        pPCSamplingConfigurationInfo: *mut PcSamplingConfigurationInfo,
    } ends_at pPCSamplingConfigurationInfo: *mut PcSamplingConfigurationInfo;
    /// `CUpti_PCSamplingGetDataParams`.
    PcSamplingGetDataParams { ctx: *mut c_void, pcSamplingData: *mut c_void } ends_at pcSamplingData: *mut c_void;
}

// SASS Metrics (`cupti_sass_metrics.h`).
params! {
    /// `CUpti_SassMetrics_GetNumOfMetrics_Params`.
    SassGetNumOfMetricsParams { pChipName: *const c_char, numOfMetrics: usize } ends_at numOfMetrics: usize;
    /// `CUpti_SassMetrics_GetMetrics_Params`.
    SassGetMetricsParams {
        pChipName: *const c_char,
        numOfMetrics: usize,
        pMetricsList: *mut SassMetricDetails,
    } ends_at pMetricsList: *mut SassMetricDetails;
    /// `CUpti_SassMetricsSetConfig_Params`.
    SassSetConfigParams {
        numOfMetricConfig: usize,
        pConfigs: *mut SassMetricConfig,
        deviceIndex: u32,
    } ends_at deviceIndex: u32;
    /// `CUpti_SassMetricsUnsetConfig_Params`.
    SassUnsetConfigParams { deviceIndex: u32 } ends_at deviceIndex: u32;
    /// `CUpti_SassMetricsEnable_Params`.
    SassEnableParams { ctx: *mut c_void, enableLazyPatching: u8 } ends_at enableLazyPatching: u8;
    /// `CUpti_SassMetricsDisable_Params`.
    SassDisableParams { ctx: *mut c_void, numOfDroppedRecords: usize } ends_at numOfDroppedRecords: usize;
    /// `CUpti_SassMetricsGetDataProperties_Params`.
    SassGetDataPropertiesParams {
        ctx: *mut c_void,
        numOfPatchedInstructionRecords: usize,
        numOfInstances: usize,
    } ends_at numOfInstances: usize;
    /// `CUpti_SassMetricsFlushData_Params`.
    SassFlushDataParams {
        ctx: *mut c_void,
        numOfPatchedInstructionRecords: usize,
        numOfInstances: usize,
        pMetricsData: *mut SassMetricsData,
    } ends_at numOfInstances: usize;
}

/// `CUpti_PCSamplingConfigurationInfo`: an attribute and its value, a union
/// of at most three 8-byte words (set through [`Self::words`]).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct PcSamplingConfigurationInfo {
    pub attributeType: u32,
    pub attributeStatus: i32,
    pub attributeData: [u64; 3],
}

impl PcSamplingConfigurationInfo {
    /// `attribute` with its value's words (the union's fields in order).
    pub fn words(attribute: u32, words: [u64; 3]) -> Self {
        Self {
            attributeType: attribute,
            attributeStatus: 0,
            attributeData: words,
        }
    }
}

/// `CUpti_PCSamplingConfigurationAttributeType` values used.
pub const PC_SAMPLING_ATTR_SAMPLING_PERIOD: u32 = 1;
pub const PC_SAMPLING_ATTR_STALL_REASON: u32 = 2;
pub const PC_SAMPLING_ATTR_SCRATCH_BUFFER_SIZE: u32 = 3;
pub const PC_SAMPLING_ATTR_HARDWARE_BUFFER_SIZE: u32 = 4;
pub const PC_SAMPLING_ATTR_COLLECTION_MODE: u32 = 5;
pub const PC_SAMPLING_ATTR_ENABLE_START_STOP_CONTROL: u32 = 6;
pub const PC_SAMPLING_ATTR_OUTPUT_DATA_FORMAT: u32 = 7;
pub const PC_SAMPLING_ATTR_SAMPLING_DATA_BUFFER: u32 = 8;
pub const PC_SAMPLING_ATTR_WORKER_THREAD_PERIODIC_SLEEP_SPAN: u32 = 9;
/// `CUPTI_PC_SAMPLING_COLLECTION_MODE_KERNEL_SERIALIZED`.
pub const PC_SAMPLING_KERNEL_SERIALIZED: u64 = 2;
/// `CUPTI_PC_SAMPLING_OUTPUT_DATA_FORMAT_PARSED`.
pub const PC_SAMPLING_PARSED: u64 = 1;
/// `CUPTI_STALL_REASON_STRING_SIZE`: the room for each reason's name.
pub const STALL_REASON_STRING_SIZE: usize = 128;
/// `CUPTI_SASS_METRICS_OUTPUT_GRANULARITY_GPU`.
pub const SASS_GRANULARITY_GPU: u8 = 0;

/// `CUpti_PCSamplingStallReason` (packed, 8-byte aligned: no padding inside).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct PcSamplingStallReason {
    pub pcSamplingStallReasonIndex: u32,
    pub samples: u32,
}

/// `CUpti_PCSamplingPCData`: one PC's samples.
#[repr(C)]
#[derive(Debug)]
pub struct PcSamplingPcData {
    pub size: usize,
    pub cubinCrc: u64,
    pub pcOffset: u64,
    pub functionIndex: u32,
    pub pad: u32,
    pub functionName: *mut c_char,
    pub stallReasonCount: usize,
    pub stallReason: *mut PcSamplingStallReason,
    pub correlationId: u32,
}

/// `CUpti_PCSamplingData`: the buffer CUPTI fills, `collectNumPcs` PCs at most.
#[repr(C)]
#[derive(Debug)]
pub struct PcSamplingData {
    pub size: usize,
    pub collectNumPcs: usize,
    pub totalSamples: u64,
    pub droppedSamples: u64,
    pub totalNumPcs: usize,
    pub remainingNumPcs: usize,
    pub rangeId: u64,
    pub pPcData: *mut PcSamplingPcData,
    pub nonUsrKernelsTotalSamples: u64,
    pub hardwareBufferFull: u8,
}

/// `CUpti_SassMetrics_MetricDetails`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct SassMetricDetails {
    pub metricId: u64,
    pub pMetricName: *const c_char,
    pub pMetricDescription: *const c_char,
}

/// `CUpti_SassMetrics_Config`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct SassMetricConfig {
    pub metricId: u64,
    pub outputGranularity: u8,
}

/// `CUpti_SassMetrics_InstanceValue`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct SassMetricsInstanceValue {
    pub metricId: u64,
    pub value: u64,
}

/// `CUpti_SassMetrics_Data`: one patched instruction's values.
#[repr(C)]
#[derive(Debug)]
pub struct SassMetricsData {
    pub structSize: usize,
    pub pPriv: *mut c_void,
    pub cubinCrc: u32,
    pub functionIndex: u32,
    pub functionName: *const c_char,
    pub pcOffset: u32,
    pub pInstanceValues: *mut SassMetricsInstanceValue,
}

/// Declares [`Function`]: one variant per bound CUPTI symbol, in table order.
macro_rules! functions {
    ($($variant:ident = $symbol:literal,)*) => {
        /// A CUPTI function this crate calls.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Function { $($variant,)* }

        impl Function {
            pub const ALL: &'static [Function] = &[$(Function::$variant,)*];
            /// The exported symbol name.
            pub fn symbol(self) -> &'static str {
                match self { $(Function::$variant => $symbol,)* }
            }
        }
    };
}

functions! {
    ProfilerInitialize = "cuptiProfilerInitialize",
    ProfilerDeInitialize = "cuptiProfilerDeInitialize",
    DeviceSupported = "cuptiProfilerDeviceSupported",
    GetCounterAvailability = "cuptiProfilerGetCounterAvailability",
    DeviceGetChipName = "cuptiDeviceGetChipName",
    HostInitialize = "cuptiProfilerHostInitialize",
    HostDeinitialize = "cuptiProfilerHostDeinitialize",
    HostConfigAddMetrics = "cuptiProfilerHostConfigAddMetrics",
    HostGetConfigImageSize = "cuptiProfilerHostGetConfigImageSize",
    HostGetConfigImage = "cuptiProfilerHostGetConfigImage",
    HostGetNumOfPasses = "cuptiProfilerHostGetNumOfPasses",
    HostEvaluateToGpuValues = "cuptiProfilerHostEvaluateToGpuValues",
    RangeProfilerEnable = "cuptiRangeProfilerEnable",
    RangeProfilerDisable = "cuptiRangeProfilerDisable",
    RangeProfilerGetCounterDataSize = "cuptiRangeProfilerGetCounterDataSize",
    RangeProfilerCounterDataImageInitialize = "cuptiRangeProfilerCounterDataImageInitialize",
    RangeProfilerSetConfig = "cuptiRangeProfilerSetConfig",
    RangeProfilerStart = "cuptiRangeProfilerStart",
    RangeProfilerStop = "cuptiRangeProfilerStop",
    RangeProfilerDecodeData = "cuptiRangeProfilerDecodeData",
    RangeProfilerGetCounterDataInfo = "cuptiRangeProfilerGetCounterDataInfo",
    PcSamplingGetNumStallReasons = "cuptiPCSamplingGetNumStallReasons",
    PcSamplingGetStallReasons = "cuptiPCSamplingGetStallReasons",
    PcSamplingEnable = "cuptiPCSamplingEnable",
    PcSamplingDisable = "cuptiPCSamplingDisable",
    PcSamplingSetConfigurationAttribute = "cuptiPCSamplingSetConfigurationAttribute",
    PcSamplingStart = "cuptiPCSamplingStart",
    PcSamplingStop = "cuptiPCSamplingStop",
    PcSamplingGetData = "cuptiPCSamplingGetData",
    SassMetricsGetNumOfMetrics = "cuptiSassMetricsGetNumOfMetrics",
    SassMetricsGetMetrics = "cuptiSassMetricsGetMetrics",
    SassMetricsSetConfig = "cuptiSassMetricsSetConfig",
    SassMetricsUnsetConfig = "cuptiSassMetricsUnsetConfig",
    SassMetricsEnable = "cuptiSassMetricsEnable",
    SassMetricsDisable = "cuptiSassMetricsDisable",
    SassMetricsGetDataProperties = "cuptiSassMetricsGetDataProperties",
    SassMetricsFlushData = "cuptiSassMetricsFlushData",
}

/// Something that can hand out CUPTI entry points by symbol name: the real
/// shared library, or a stand-in built from Rust functions.
///
/// An implementation must only return, for a given symbol, a function that
/// accepts a pointer to the parameter struct CUPTI documents for that symbol.
pub trait EntryPoints: Send + Sync {
    /// The function exported as `symbol`, or `None` when there is none.
    fn entry(&self, symbol: &str) -> Option<Entry>;
    /// Where the functions come from, for messages.
    fn origin(&self) -> &str;
}

/// Every bound entry point, resolved once when the library is loaded.
pub struct EntryTable {
    entries: Vec<Entry>,
}

impl EntryTable {
    /// Resolves every [`Function`]; on failure returns the missing symbols.
    pub fn resolve(source: &dyn EntryPoints) -> Result<Self, Vec<&'static str>> {
        let mut entries = Vec::with_capacity(Function::ALL.len());
        let mut missing = Vec::new();
        for function in Function::ALL {
            match source.entry(function.symbol()) {
                Some(entry) => entries.push(entry),
                None => missing.push(function.symbol()),
            }
        }
        if missing.is_empty() {
            Ok(Self { entries })
        } else {
            Err(missing)
        }
    }

    /// Calls `function` with `params`.
    ///
    /// # Safety
    /// `P` must be the parameter struct `function` takes, and every pointer
    /// inside `params` must be valid for what CUPTI does with it.
    pub unsafe fn call<P: Params>(&self, function: Function, params: &mut P) -> ResultCode {
        let entry = self.entries[function as usize];
        // SAFETY: forwarded to the caller; the table holds one entry per
        // Function, in declaration order, so the index is in bounds.
        ResultCode(unsafe { entry((params as *mut P).cast()) })
    }
}

/// `libcupti` opened with `dlopen`, together with the `libnvperf_host` it
/// will look up by name later (kept open so that lookup finds it).
pub struct SharedLibrary {
    cupti: libloading::Library,
    _nvperf_host: libloading::Library,
    origin: String,
}

impl SharedLibrary {
    /// Opens `cupti` (a path, or a bare name for the loader path), then
    /// `nvperf_host` the same way.
    pub fn open(cupti: &Path, nvperf_host: &Path) -> Result<Self, OpenError> {
        // SAFETY: libcupti and libnvperf_host run no initialisers that
        // depend on anything the caller must set up first.
        let cupti_library = unsafe { libloading::Library::new(cupti) }.map_err(OpenError::Cupti)?;
        // SAFETY: as above.
        let nvperf_library =
            unsafe { libloading::Library::new(nvperf_host) }.map_err(OpenError::NvperfHost)?;
        Ok(Self {
            cupti: cupti_library,
            _nvperf_host: nvperf_library,
            origin: cupti.display().to_string(),
        })
    }
}

/// Which of the two libraries `dlopen` refused.
#[derive(Debug)]
pub enum OpenError {
    Cupti(libloading::Error),
    NvperfHost(libloading::Error),
}

impl EntryPoints for SharedLibrary {
    fn entry(&self, symbol: &str) -> Option<Entry> {
        // SAFETY: the symbols looked up here are CUPTI profiler functions,
        // each of which takes one params pointer and returns CUptiResult,
        // which is exactly `Entry`; the library outlives the table because
        // both live in the same `Cupti` value.
        unsafe { self.cupti.get::<Entry>(symbol.as_bytes()) }
            .ok()
            .map(|symbol| *symbol)
    }

    fn origin(&self) -> &str {
        &self.origin
    }
}
