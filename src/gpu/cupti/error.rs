//! What can go wrong with hardware counters, split in two: the machine cannot
//! give counters at all ([`CountersUnavailable`], which comes with the fix a
//! person has to apply), or one request went wrong ([`CuptiError`]).
//!
//! The split matters to the caller: an unavailable machine means "grade
//! without the profile pane and say why", while any other error is a bug or
//! a bad request worth showing as is.

use serde::{Deserialize, Serialize};

use super::sys::{Function, ResultCode};

/// Why this machine cannot provide hardware counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnavailableReason {
    /// `libcupti.so.13` could not be opened from any place searched.
    LibraryMissing,
    /// `libnvperf_host.so`, which libcupti loads on demand, is missing.
    NvperfHostMissing,
    /// A libcupti older than CUDA 12.6 Update 2, without the range profiler.
    OldCupti,
    /// The driver restricts counters to administrators.
    InsufficientPrivileges,
    /// Another client (DCGM, Nsight, a second profiler) holds the counters.
    HardwareBusy,
    /// The GPU or its configuration (vGPU, SLI, confidential computing...)
    /// does not support profiling.
    UnsupportedDevice,
}

impl UnavailableReason {
    /// The reason as a short phrase.
    pub fn summary(self) -> &'static str {
        match self {
            Self::LibraryMissing => "libcupti.so.13 not found",
            Self::NvperfHostMissing => "libnvperf_host.so not found",
            Self::OldCupti => "libcupti lacks the range profiler",
            Self::InsufficientPrivileges => "counters are restricted to administrators",
            Self::HardwareBusy => "counters are in use by another profiler",
            Self::UnsupportedDevice => "this GPU does not support profiling",
        }
    }

    /// The reason a CUPTI result code stands for, when it stands for one.
    /// `NOT_INITIALIZED` from an initialisation call is how CUPTI reports
    /// that it could not load the nvperf libraries.
    pub fn from_result(function: Function, code: ResultCode) -> Option<Self> {
        match code {
            ResultCode::INSUFFICIENT_PRIVILEGES => Some(Self::InsufficientPrivileges),
            // A profiler running this process (ncu, nsys) holds CUPTI
            // itself: the same remedy as a busy counter unit.
            ResultCode::HARDWARE_BUSY | ResultCode::MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED => {
                Some(Self::HardwareBusy)
            }
            ResultCode::NOT_SUPPORTED
            | ResultCode::VIRTUALIZED_DEVICE_NOT_SUPPORTED
            | ResultCode::LEGACY_PROFILER_NOT_SUPPORTED => Some(Self::UnsupportedDevice),
            ResultCode::NOT_INITIALIZED
                if matches!(
                    function,
                    Function::ProfilerInitialize | Function::HostInitialize
                ) =>
            {
                Some(Self::NvperfHostMissing)
            }
            _ => None,
        }
    }
}

impl std::fmt::Display for UnavailableReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.summary())
    }
}

/// Hardware counters cannot be read on this machine; [`Self::fix`] says what
/// would change that.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("hardware counters unavailable: {reason}: {detail}")]
pub struct CountersUnavailable {
    pub reason: UnavailableReason,
    /// What was tried and what failed, in CUPTI's or the loader's words.
    pub detail: String,
}

impl CountersUnavailable {
    pub fn new(reason: UnavailableReason, detail: impl Into<String>) -> Self {
        Self {
            reason,
            detail: detail.into(),
        }
    }

    /// What a person has to do to get counters.
    pub fn fix(&self) -> &'static str {
        match self.reason {
            UnavailableReason::LibraryMissing => {
                "Install CUDA 12.6 Update 2 or newer (CUPTI ships with the toolkit, or `pip install \
                 nvidia-cuda-cupti`), then put the folder holding libcupti.so.13 on LD_LIBRARY_PATH \
                 or point FLASHPROF_CUPTI_PATH at it."
            }
            UnavailableReason::NvperfHostMissing => {
                "Put libnvperf_host.so (and libnvperf_target.so) in the same folder as \
                 libcupti.so.13; the toolkit and the nvidia-cuda-cupti wheel ship them side by side."
            }
            UnavailableReason::OldCupti => {
                "Install CUDA 12.6 Update 2 or newer, which adds the range profiler, and put its \
                 libcupti.so.13 first on LD_LIBRARY_PATH (or set FLASHPROF_CUPTI_PATH)."
            }
            UnavailableReason::InsufficientPrivileges => {
                "Allow non-admin counters: add `options nvidia NVreg_RestrictProfilingToAdminUsers=0` \
                 to a file in /etc/modprobe.d/, rebuild the initramfs and reboot (check with \
                 `grep RmProfilingAdminOnly /proc/driver/nvidia/params`); or run with CAP_SYS_ADMIN \
                 (CAP_PERFMON on driver R565 and newer)."
            }
            UnavailableReason::HardwareBusy => {
                "Free the counters: run `dcgmi profile pause` while profiling (resume after), and \
                 close Nsight Compute, Nsight Systems or any other CUPTI client on this GPU."
            }
            UnavailableReason::UnsupportedDevice => {
                "Use a GPU that supports the CUPTI range profiler (Volta or newer, bare metal or \
                 vGPU with profiling enabled, not SLI, confidential computing off); the grade and \
                 timing still work without counters."
            }
        }
    }
}

/// A profiling request that failed.
#[derive(Debug, thiserror::Error)]
pub enum CuptiError {
    #[error(transparent)]
    Unavailable(#[from] CountersUnavailable),
    #[error("{} failed with {code}", function.symbol())]
    Call {
        function: Function,
        code: ResultCode,
    },
    #[error("CUPTI does not know {} on {chip}: {}", plural_metric(.names.len()), .names.join(", "))]
    UnknownMetrics { chip: String, names: Vec<String> },
    #[error("no metrics were requested")]
    NoMetrics,
    #[error("`{0}` contains a NUL byte")]
    InvalidName(String),
    #[error("could not make the CUDA context current: {0}")]
    Context(cudarc::driver::DriverError),
    #[error("the metric config was built for {config} but the GPU is {device}")]
    ChipMismatch { config: String, device: String },
    #[error("CUPTI returned an empty {0}")]
    EmptyAnswer(&'static str),
    #[error("the profiled launch failed: {0:#}")]
    Launch(anyhow::Error),
    #[error("CUPTI dropped {0} range(s); the counters are incomplete")]
    RangesDropped(usize),
    #[error("expected exactly one kernel launch in the profiled range, found {0}")]
    RangeCount(usize),
    #[error("kernel replay stopped before every pass was submitted")]
    IncompleteReplay,
    #[error(
        "PC Sampling charged none of its {samples} samples to `{function}` (it named: {seen})"
    )]
    Unattributed {
        function: String,
        samples: u64,
        seen: String,
    },
}

fn plural_metric(count: usize) -> &'static str {
    if count == 1 {
        "the metric"
    } else {
        "the metrics"
    }
}

impl CuptiError {
    /// Turns a failed call into the matching unavailable reason when the
    /// code means the machine, not the request, is at fault.
    pub fn from_call(function: Function, code: ResultCode) -> Self {
        match UnavailableReason::from_result(function, code) {
            Some(reason) => Self::Unavailable(CountersUnavailable::new(
                reason,
                format!("{} returned {code}", function.symbol()),
            )),
            None => Self::Call { function, code },
        }
    }

    /// The unavailability behind this error, if that is what it is.
    pub fn unavailable(&self) -> Option<&CountersUnavailable> {
        match self {
            Self::Unavailable(unavailable) => Some(unavailable),
            _ => None,
        }
    }
}
