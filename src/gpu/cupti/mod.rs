//! Hardware counters for one kernel launch, through CUPTI's Range Profiling
//! and Profiler Host APIs (CUDA 12.6 Update 2 and newer; the older
//! `cuptiProfiler*` session calls are deprecated in 13.0).
//!
//! Host side, no GPU needed: [`MetricConfig`] turns metric names into the
//! config image CUPTI replays from, and says how many passes it costs.
//! Target side: [`RangeProfiler`] measures exactly one launch in auto-range,
//! kernel-replay mode, where CUPTI itself saves and restores device memory
//! between passes, so the launch closure is called once.
//!
//! libcupti is opened at run time ([`Cupti::load`]): a machine without it, or
//! without the rights to read counters, still grades and times kernels, and
//! [`CountersUnavailable::fix`] tells the user what to change. Every unsafe
//! CUPTI call in the crate lives in this file, behind owners that free what
//! CUPTI allocated.
#![allow(unsafe_code)]

mod error;
pub mod lines;
mod loader;
pub mod stand_in;
mod sys;

#[cfg(test)]
mod layout_tests;
#[cfg(test)]
mod library_tests;

use std::ffi::{c_char, c_void, CStr, CString};
use std::fmt;
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use cudarc::driver::CudaContext;

pub use crate::facts::metrics::{
    finite_value, MetricSet, MetricValue, MetricValues, FULL_EXTRA, QUICK,
};
pub use error::{CountersUnavailable, CuptiError, UnavailableReason};
pub use loader::{Candidate, LibraryLoader, SystemLoader, PATH_VARIABLE};
pub use sys::{Entry, EntryPoints, Function, ResultCode};

use sys::{EntryTable, Params};

/// The resolved entry points and the library that backs them.
struct Api {
    table: EntryTable,
    /// Owns the `dlopen` handle the table's pointers point into.
    library: Box<dyn EntryPoints>,
}

impl Api {
    /// Calls `function`, mapping a failure to the matching error.
    ///
    /// # Safety
    /// As [`EntryTable::call`]: `P` is the struct `function` takes and its
    /// pointers are valid for the call.
    unsafe fn call<P: Params>(&self, function: Function, params: &mut P) -> Result<(), CuptiError> {
        // SAFETY: forwarded to the caller.
        let code = unsafe { self.table.call(function, params) };
        if code == ResultCode::SUCCESS {
            Ok(())
        } else {
            Err(CuptiError::from_call(function, code))
        }
    }
}

/// A loaded libcupti. Cheap to clone; every object made from it keeps the
/// library open.
#[derive(Clone)]
pub struct Cupti {
    api: Arc<Api>,
}

impl fmt::Debug for Cupti {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cupti")
            .field("origin", &self.origin())
            .finish()
    }
}

impl Cupti {
    /// Opens libcupti from the standard places (see [`SystemLoader`]).
    pub fn load() -> Result<Self, CountersUnavailable> {
        Self::load_with(&SystemLoader::from_environment())
    }

    /// Opens libcupti through `loader` and checks it has every function used.
    pub fn load_with(loader: &dyn LibraryLoader) -> Result<Self, CountersUnavailable> {
        let library = loader.open()?;
        let table = EntryTable::resolve(library.as_ref()).map_err(|missing| {
            CountersUnavailable::new(
                UnavailableReason::OldCupti,
                format!(
                    "{} does not export {}",
                    library.origin(),
                    missing.join(", ")
                ),
            )
        })?;
        Ok(Self {
            api: Arc::new(Api { table, library }),
        })
    }

    /// Where the library was loaded from.
    pub fn origin(&self) -> &str {
        self.api.library.origin()
    }
}

/// A byte buffer for CUPTI images, 8-byte aligned as the config image
/// requires (a `Vec<u8>` promises only 1).
struct ImageBuffer {
    words: Vec<u64>,
    len: usize,
}

impl ImageBuffer {
    fn zeroed(len: usize) -> Self {
        Self {
            words: vec![0; len.div_ceil(8)],
            len,
        }
    }
    fn as_ptr(&self) -> *const u8 {
        self.words.as_ptr().cast()
    }
    fn as_mut_ptr(&mut self) -> *mut u8 {
        self.words.as_mut_ptr().cast()
    }
}

/// Metric names as C strings plus the `const char*` array CUPTI reads.
struct MetricNames {
    owned: Vec<CString>,
    pointers: Vec<*const c_char>,
}

impl MetricNames {
    fn new(names: &[&str]) -> Result<Self, CuptiError> {
        if names.is_empty() {
            return Err(CuptiError::NoMetrics);
        }
        let owned = names
            .iter()
            .map(|name| CString::new(*name).map_err(|_| CuptiError::InvalidName(name.to_string())))
            .collect::<Result<Vec<_>, _>>()?;
        // The CStrings' heap buffers do not move when `owned` does, so these
        // pointers stay valid for as long as `owned` is alive and untouched.
        let pointers = owned.iter().map(|name| name.as_ptr()).collect();
        Ok(Self { owned, pointers })
    }
    fn len(&self) -> usize {
        self.owned.len()
    }
    fn strings(&self) -> impl Iterator<Item = String> + '_ {
        self.owned
            .iter()
            .map(|name| name.to_string_lossy().into_owned())
    }
}

/// A Profiler Host object: CUPTI's metric database for one chip.
struct HostObject {
    api: Arc<Api>,
    raw: *mut c_void,
    /// CUPTI may keep pointers to both; they live exactly as long as the object.
    _chip: CString,
    _availability: Option<Vec<u8>>,
}

impl HostObject {
    fn initialize(
        api: &Arc<Api>,
        chip: &str,
        availability: Option<Vec<u8>>,
    ) -> Result<Self, CuptiError> {
        let chip_c = CString::new(chip).map_err(|_| CuptiError::InvalidName(chip.to_string()))?;
        let mut params = sys::HostInitializeParams::new();
        params.profilerType = sys::PROFILER_TYPE_RANGE;
        params.pChipName = chip_c.as_ptr();
        params.pCounterAvailabilityImage = availability
            .as_ref()
            .map_or(ptr::null(), |image| image.as_ptr());
        // Concurrent first initialisations race inside CUPTI (observed as
        // CUPTI_ERROR_UNKNOWN from 13.0.85 when tests run in parallel), so
        // the whole process takes turns.
        static HOST_INITIALIZE: Mutex<()> = Mutex::new(());
        let turn = HOST_INITIALIZE
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // SAFETY: the chip name and image outlive the host object (stored below).
        let initialized = unsafe { api.call(Function::HostInitialize, &mut params) };
        drop(turn);
        initialized?;
        if params.pHostObject.is_null() {
            return Err(CuptiError::EmptyAnswer("profiler host object"));
        }
        Ok(Self {
            api: Arc::clone(api),
            raw: params.pHostObject,
            _chip: chip_c,
            _availability: availability,
        })
    }

    fn add_metrics(&self, names: &MetricNames) -> Result<(), CuptiError> {
        let mut params = sys::ConfigAddMetricsParams::new();
        params.pHostObject = self.raw;
        params.ppMetricNames = names.pointers.as_ptr();
        params.numMetrics = names.len();
        // SAFETY: the host object is live and the name array holds numMetrics C strings.
        unsafe { self.api.call(Function::HostConfigAddMetrics, &mut params) }
    }

    fn config_image(&self) -> Result<ImageBuffer, CuptiError> {
        let mut size = sys::ConfigImageSizeParams::new();
        size.pHostObject = self.raw;
        // SAFETY: the host object is live; the struct has no other pointers.
        unsafe { self.api.call(Function::HostGetConfigImageSize, &mut size) }?;
        if size.configImageSize == 0 {
            return Err(CuptiError::EmptyAnswer("config image"));
        }
        let mut image = ImageBuffer::zeroed(size.configImageSize);
        let mut params = sys::ConfigImageParams::new();
        params.pHostObject = self.raw;
        params.configImageSize = image.len;
        params.pConfigImage = image.as_mut_ptr();
        // SAFETY: the buffer holds exactly configImageSize bytes.
        unsafe { self.api.call(Function::HostGetConfigImage, &mut params) }?;
        Ok(image)
    }

    fn evaluate(
        &self,
        counter_data: &ImageBuffer,
        names: &MetricNames,
    ) -> Result<Vec<f64>, CuptiError> {
        let mut values = vec![f64::NAN; names.len()];
        let mut params = sys::EvaluateParams::new();
        params.pHostObject = self.raw;
        params.pCounterDataImage = counter_data.as_ptr();
        params.counterDataImageSize = counter_data.len;
        params.rangeIndex = 0;
        params.ppMetricNames = names.pointers.as_ptr();
        params.numMetrics = names.len();
        params.pMetricValues = values.as_mut_ptr();
        // SAFETY: the counter data buffer and the value array have the sizes given.
        unsafe {
            self.api
                .call(Function::HostEvaluateToGpuValues, &mut params)
        }?;
        Ok(values)
    }
}

impl Drop for HostObject {
    fn drop(&mut self) {
        let mut params = sys::ObjectParams::new();
        params.pObject = self.raw;
        // SAFETY: the object came from HostInitialize and is released once.
        // A failure here leaves nothing to recover, so it is ignored.
        let _ = unsafe { self.api.call(Function::HostDeinitialize, &mut params) };
    }
}

/// A host-side configuration: which metrics to collect, compiled into the
/// config image CUPTI replays from.
pub struct MetricConfig {
    /// Unique within the process, so the profiler can tell configs apart.
    id: u64,
    host: HostObject,
    chip: String,
    names: MetricNames,
    image: ImageBuffer,
    passes: usize,
}

impl MetricConfig {
    /// Builds the config for `metrics` on `chip` (such as "GH100") without a
    /// GPU, using CUPTI's built-in knowledge of the chip.
    pub fn new(cupti: &Cupti, chip: &str, metrics: &[&str]) -> Result<Self, CuptiError> {
        Self::build(&cupti.api, chip, None, metrics)
    }

    fn build(
        api: &Arc<Api>,
        chip: &str,
        availability: Option<Vec<u8>>,
        metrics: &[&str],
    ) -> Result<Self, CuptiError> {
        let names = MetricNames::new(metrics)?;
        let host = HostObject::initialize(api, chip, availability)?;
        if let Err(error) = host.add_metrics(&names) {
            return Err(name_unknown_metrics(api, chip, &names).unwrap_or(error));
        }
        let mut image = host.config_image()?;
        let mut params = sys::GetNumOfPassesParams::new();
        params.configImageSize = image.len;
        params.pConfigImage = image.as_mut_ptr();
        // SAFETY: the image buffer holds configImageSize bytes.
        unsafe { api.call(Function::HostGetNumOfPasses, &mut params) }?;
        static NEXT_ID: AtomicU64 = AtomicU64::new(0);
        Ok(Self {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            host,
            chip: chip.to_string(),
            names,
            image,
            passes: params.numOfPasses,
        })
    }

    /// Replay passes one profiled launch will cost.
    pub fn num_passes(&self) -> usize {
        self.passes
    }

    pub fn chip(&self) -> &str {
        &self.chip
    }

    /// The metrics, in the order values are returned.
    pub fn metrics(&self) -> Vec<String> {
        self.names.strings().collect()
    }
}

/// CUPTI rejects a batch with one bad name without saying which (often as
/// `INVALID_PARAMETER`), so each name is tried alone on a fresh host object.
/// Returns `None` when every name passes alone and the batch error stands.
fn name_unknown_metrics(api: &Arc<Api>, chip: &str, names: &MetricNames) -> Option<CuptiError> {
    let unknown: Vec<String> = names
        .strings()
        .filter(|name| {
            let accepted = MetricNames::new(&[name.as_str()])
                .and_then(|single| HostObject::initialize(api, chip, None)?.add_metrics(&single));
            accepted.is_err()
        })
        .collect();
    (!unknown.is_empty()).then(|| CuptiError::UnknownMetrics {
        chip: chip.to_string(),
        names: unknown,
    })
}

/// `cuptiProfilerInitialize` for as long as a profiler is alive.
struct ProfilerSession {
    api: Arc<Api>,
}

impl ProfilerSession {
    fn begin(api: &Arc<Api>) -> Result<Self, CuptiError> {
        let mut params = sys::BareParams::new();
        // SAFETY: the struct has no pointers.
        unsafe { api.call(Function::ProfilerInitialize, &mut params) }?;
        Ok(Self {
            api: Arc::clone(api),
        })
    }
}

impl Drop for ProfilerSession {
    fn drop(&mut self) {
        let mut params = sys::BareParams::new();
        // SAFETY: the struct has no pointers; a failure leaves nothing to undo.
        let _ = unsafe { self.api.call(Function::ProfilerDeInitialize, &mut params) };
    }
}

/// The context a profiler is enabled on, kept alive by holding cudarc's
/// handle (absent only in tests against the stand-in library).
struct Target {
    raw: *mut c_void,
    device: i32,
    ordinal: usize,
    context: Option<Arc<CudaContext>>,
}

impl Target {
    /// No context at all: only meaningful against the stand-in library,
    /// which never looks at it.
    #[cfg(test)]
    fn detached() -> Self {
        Self {
            raw: ptr::null_mut(),
            device: 0,
            ordinal: 0,
            context: None,
        }
    }

    fn bind(&self) -> Result<(), CuptiError> {
        match &self.context {
            Some(context) => context.bind_to_thread().map_err(CuptiError::Context),
            None => Ok(()),
        }
    }
}

/// CUPTI's range profiler, enabled on one CUDA context.
///
/// Use it from the thread that launches on the context. CUPTI allows one
/// profiler per context and conflicts with Nsight tools and DCGM profiling.
pub struct RangeProfiler {
    raw: *mut c_void,
    api: Arc<Api>,
    chip: String,
    availability: Vec<u8>,
    /// The config of the last range profiled on `raw`, `None` while it is
    /// fresh: see [`Self::profile`].
    last_config: Option<u64>,
    // Dropped after `raw` is disabled, in this order: deinitialise, then
    // release the context.
    _session: ProfilerSession,
    target: Target,
}

impl RangeProfiler {
    /// Checks the device can be profiled, reads its chip name and counter
    /// availability, and enables the range profiler on `context` (cudarc's
    /// primary context for its device).
    pub fn enable(cupti: &Cupti, context: &Arc<CudaContext>) -> Result<Self, CuptiError> {
        Self::enable_on(
            cupti,
            Target {
                raw: context.cu_ctx().cast(),
                device: context.cu_device(),
                ordinal: context.ordinal(),
                context: Some(Arc::clone(context)),
            },
        )
    }

    fn enable_on(cupti: &Cupti, target: Target) -> Result<Self, CuptiError> {
        let api = &cupti.api;
        target.bind()?;
        let session = ProfilerSession::begin(api)?;
        check_device_supported(api, target.device)?;
        // Without counter rights this is the first call to fail, so it comes
        // before anything that would fail less clearly.
        let availability = counter_availability(api, target.raw)?;
        let chip = chip_name(api, target.ordinal)?;
        let mut params = sys::EnableParams::new();
        params.ctx = target.raw;
        // SAFETY: the context is live (held by `target`).
        unsafe { api.call(Function::RangeProfilerEnable, &mut params) }?;
        if params.pRangeProfilerObject.is_null() {
            return Err(CuptiError::EmptyAnswer("range profiler object"));
        }
        Ok(Self {
            raw: params.pRangeProfilerObject,
            api: Arc::clone(api),
            chip,
            availability,
            last_config: None,
            _session: session,
            target,
        })
    }

    /// The chip CUPTI reports for the device, such as "GH100".
    pub fn chip(&self) -> &str {
        &self.chip
    }

    /// A config for this device that also respects which counters the
    /// context can use right now.
    pub fn metric_config(&self, metrics: &[&str]) -> Result<MetricConfig, CuptiError> {
        MetricConfig::build(
            &self.api,
            &self.chip,
            Some(self.availability.clone()),
            metrics,
        )
    }

    /// Measures `config`'s metrics over one call of `launch`, which must
    /// launch exactly one kernel on this profiler's context. CUPTI replays
    /// that kernel once per pass and restores device memory in between; the
    /// launch's wall time is therefore meaningless, use the duration metric.
    /// Launch the kernel once unprofiled beforehand so that module loading
    /// stays out of the measured range.
    ///
    /// The profiler object is re-enabled first unless this is a single-pass
    /// config and the object's last range used the very same config. On the
    /// H200 (CUPTI 13.0, driver 580) a range read NaN when the object had
    /// measured a range of another config before, and a multi-pass one did
    /// after any earlier range, while the first range after enabling was
    /// right. Re-enabling costs about 12 ms and makes the next range pay a
    /// fixed setup of about 170 ms, so the quick set, profiled for the
    /// student and then the starter, keeps the object.
    pub fn profile(
        &mut self,
        config: &MetricConfig,
        launch: &mut dyn FnMut() -> anyhow::Result<()>,
    ) -> Result<MetricValues, CuptiError> {
        if config.chip != self.chip {
            return Err(CuptiError::ChipMismatch {
                config: config.chip.clone(),
                device: self.chip.clone(),
            });
        }
        self.target.bind()?;
        let reusable = match self.last_config {
            None => true,
            Some(last) => last == config.id && config.passes == 1,
        };
        if !reusable {
            self.reenable()?;
        }
        let mut counter_data = self.counter_data(&config.names)?;
        self.set_config(config, &mut counter_data)?;
        self.call_on_object(Function::RangeProfilerStart)?;
        self.last_config = Some(config.id);
        let launched = launch();
        let mut stop = sys::StopParams::new();
        stop.pRangeProfilerObject = self.raw;
        // SAFETY: the object is live; Stop is called even after a failed
        // launch so the profiler is ready for the next request.
        let stopped = unsafe { self.api.call(Function::RangeProfilerStop, &mut stop) };
        launched.map_err(CuptiError::Launch)?;
        stopped?;
        if stop.isAllPassSubmitted == 0 {
            return Err(CuptiError::IncompleteReplay);
        }
        let mut decode = sys::DecodeDataParams::new();
        decode.pRangeProfilerObject = self.raw;
        // SAFETY: the object is live; decoding writes into the counter data
        // image registered by SetConfig, which is still alive.
        unsafe {
            self.api
                .call(Function::RangeProfilerDecodeData, &mut decode)
        }?;
        if decode.numOfRangeDropped != 0 {
            return Err(CuptiError::RangesDropped(decode.numOfRangeDropped));
        }
        let mut info = sys::GetCounterDataInfoParams::new();
        info.pCounterDataImage = counter_data.as_ptr();
        info.counterDataImageSize = counter_data.len;
        // SAFETY: the image holds counterDataImageSize bytes.
        unsafe {
            self.api
                .call(Function::RangeProfilerGetCounterDataInfo, &mut info)
        }?;
        if info.numTotalRanges != 1 {
            return Err(CuptiError::RangeCount(info.numTotalRanges));
        }
        let values = config.host.evaluate(&counter_data, &config.names)?;
        Ok(MetricValues {
            chip: self.chip.clone(),
            passes: config.passes,
            values: config
                .names
                .strings()
                .zip(values)
                .map(|(name, value)| MetricValue { name, value })
                .collect(),
        })
    }

    /// A counter data image sized for one range of `names`, initialised.
    fn counter_data(&self, names: &MetricNames) -> Result<ImageBuffer, CuptiError> {
        let mut size = sys::GetCounterDataSizeParams::new();
        size.pRangeProfilerObject = self.raw;
        size.pMetricNames = names.pointers.as_ptr();
        size.numMetrics = names.len();
        size.maxNumOfRanges = 1;
        size.maxNumRangeTreeNodes = 1;
        // SAFETY: the object is live and the name array holds numMetrics strings.
        unsafe {
            self.api
                .call(Function::RangeProfilerGetCounterDataSize, &mut size)
        }?;
        if size.counterDataSize == 0 {
            return Err(CuptiError::EmptyAnswer("counter data size"));
        }
        let mut image = ImageBuffer::zeroed(size.counterDataSize);
        let mut init = sys::CounterDataInitializeParams::new();
        init.pRangeProfilerObject = self.raw;
        init.counterDataSize = image.len;
        init.pCounterData = image.as_mut_ptr();
        // SAFETY: the buffer holds counterDataSize bytes.
        unsafe {
            self.api
                .call(Function::RangeProfilerCounterDataImageInitialize, &mut init)
        }?;
        Ok(image)
    }

    /// Auto range, kernel replay, one range per pass, one nesting level.
    fn set_config(
        &self,
        config: &MetricConfig,
        counter_data: &mut ImageBuffer,
    ) -> Result<(), CuptiError> {
        let mut params = sys::SetConfigParams::new();
        params.pRangeProfilerObject = self.raw;
        params.configSize = config.image.len;
        params.pConfig = config.image.as_ptr();
        params.counterDataImageSize = counter_data.len;
        params.pCounterDataImage = counter_data.as_mut_ptr();
        params.range = sys::AUTO_RANGE;
        params.replayMode = sys::KERNEL_REPLAY;
        params.maxRangesPerPass = 1;
        params.numNestingLevels = 1;
        params.minNestingLevel = 1;
        params.passIndex = 0;
        params.targetNestingLevel = 1;
        // SAFETY: both images outlive the profiled range: the config is
        // borrowed for all of `profile` and the counter data is owned there.
        unsafe { self.api.call(Function::RangeProfilerSetConfig, &mut params) }
    }

    /// Disables the range profiler and enables it again on the same context,
    /// keeping the profiler session, chip and availability image.
    fn reenable(&mut self) -> Result<(), CuptiError> {
        self.call_on_object(Function::RangeProfilerDisable)?;
        let mut params = sys::EnableParams::new();
        params.ctx = self.target.raw;
        // SAFETY: the context is live (held by `target`); the old object was
        // disabled above and is not used again.
        unsafe { self.api.call(Function::RangeProfilerEnable, &mut params) }?;
        if params.pRangeProfilerObject.is_null() {
            return Err(CuptiError::EmptyAnswer("range profiler object"));
        }
        self.raw = params.pRangeProfilerObject;
        self.last_config = None;
        Ok(())
    }

    fn call_on_object(&self, function: Function) -> Result<(), CuptiError> {
        let mut params = sys::ObjectParams::new();
        params.pObject = self.raw;
        // SAFETY: only used for Start and Disable, which take the object alone.
        unsafe { self.api.call(function, &mut params) }
    }
}

impl Drop for RangeProfiler {
    fn drop(&mut self) {
        // Nothing to do with a failure while tearing down.
        let _ = self.call_on_object(Function::RangeProfilerDisable);
    }
}

/// Fails with [`UnavailableReason::UnsupportedDevice`] when CUPTI says the
/// device or its configuration cannot be profiled.
fn check_device_supported(api: &Api, device: i32) -> Result<(), CuptiError> {
    let mut params = sys::DeviceSupportedParams::new();
    params.cuDevice = device;
    params.api = sys::API_RANGE_PROFILING;
    // SAFETY: the struct has no pointers.
    unsafe { api.call(Function::DeviceSupported, &mut params) }?;
    if is_refused(params.isSupported) {
        let refused = refused_features(&params);
        let detail = if refused.is_empty() {
            "cuptiProfilerDeviceSupported reports the device unsupported".to_string()
        } else {
            format!(
                "cuptiProfilerDeviceSupported refuses: {}",
                refused.join(", ")
            )
        };
        return Err(CountersUnavailable::new(UnavailableReason::UnsupportedDevice, detail).into());
    }
    Ok(())
}

fn is_refused(level: u32) -> bool {
    matches!(level, sys::SUPPORT_UNSUPPORTED | sys::SUPPORT_DISABLED)
}

/// The features CUPTI marked unsupported or disabled, named for the user.
fn refused_features(params: &sys::DeviceSupportedParams) -> Vec<&'static str> {
    [
        ("architecture (needs Volta or newer)", params.architecture),
        ("SLI", params.sli),
        ("vGPU profiling", params.vGpu),
        ("confidential computing", params.confidentialCompute),
        ("crypto-mining processor", params.cmp),
        ("WSL", params.wsl),
    ]
    .into_iter()
    .filter(|(_, level)| is_refused(*level))
    .map(|(feature, _)| feature)
    .collect()
}

/// The counter availability image of `context` (two calls: size, then data).
fn counter_availability(api: &Api, context: *mut c_void) -> Result<Vec<u8>, CuptiError> {
    let mut params = sys::GetCounterAvailabilityParams::new();
    params.ctx = context;
    // SAFETY: a null image pointer asks only for the size.
    unsafe { api.call(Function::GetCounterAvailability, &mut params) }?;
    if params.counterAvailabilityImageSize == 0 {
        return Err(CuptiError::EmptyAnswer("counter availability image"));
    }
    let mut image = vec![0u8; params.counterAvailabilityImageSize];
    params.pCounterAvailabilityImage = image.as_mut_ptr();
    // SAFETY: the buffer holds counterAvailabilityImageSize bytes.
    unsafe { api.call(Function::GetCounterAvailability, &mut params) }?;
    Ok(image)
}

fn chip_name(api: &Api, ordinal: usize) -> Result<String, CuptiError> {
    let mut params = sys::GetChipNameParams::new();
    params.deviceIndex = ordinal;
    // SAFETY: the struct's only pointer is an output.
    unsafe { api.call(Function::DeviceGetChipName, &mut params) }?;
    if params.pChipName.is_null() {
        return Err(CuptiError::EmptyAnswer("chip name"));
    }
    // SAFETY: CUPTI returns a NUL-terminated static string.
    let chip = unsafe { CStr::from_ptr(params.pChipName) };
    Ok(chip.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_features_names_only_unsupported_or_disabled_ones() {
        let mut params = sys::DeviceSupportedParams::new();
        params.isSupported = sys::SUPPORT_UNSUPPORTED;
        params.vGpu = sys::SUPPORT_DISABLED;
        params.sli = sys::SUPPORT_UNSUPPORTED;
        params.architecture = 3;
        assert_eq!(refused_features(&params), ["SLI", "vGPU profiling"]);
        assert!(is_refused(params.isSupported));
        assert!(!is_refused(0), "unknown is not a refusal");
    }

    #[test]
    fn metric_values_are_found_by_name_and_nan_is_no_value() {
        let values = [
            MetricValue {
                name: "a".into(),
                value: 1.5,
            },
            MetricValue {
                name: "b".into(),
                value: 2.5,
            },
            MetricValue {
                name: "n".into(),
                value: f64::NAN,
            },
        ];
        assert_eq!(finite_value(&values, "b"), Some(2.5));
        assert_eq!(finite_value(&values, "c"), None);
        assert_eq!(finite_value(&values, "n"), None);
    }

    #[test]
    fn image_buffer_is_eight_byte_aligned_and_sized_in_bytes() {
        let mut image = ImageBuffer::zeroed(13);
        assert_eq!(image.len, 13);
        assert_eq!(image.words.len(), 2);
        assert_eq!(image.as_mut_ptr() as usize % 8, 0);
    }
}
