//! A stand-in for libcupti, for tests on machines without a GPU.
//!
//! Because every CUPTI profiler function shares one signature, the stand-in
//! hands out ordinary Rust `extern "C"` functions that ignore their params
//! and answer a fixed result code. That reproduces the failures a real
//! machine gives (no rights, counters busy, unsupported GPU, nvperf not
//! loadable, an old CUPTI) on the code paths the real library takes.

use std::ffi::c_void;

use super::error::{CountersUnavailable, UnavailableReason};
use super::loader::LibraryLoader;
use super::sys::{Entry, EntryPoints, Function, ResultCode};

/// A failing result code the stand-in can answer with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SimulatedFailure {
    InsufficientPrivileges,
    HardwareBusy,
    NotSupported,
    /// What CUPTI answers when it could not load libnvperf_host.
    NotInitialized,
}

impl SimulatedFailure {
    fn entry(self) -> Entry {
        match self {
            Self::InsufficientPrivileges => answer::<{ ResultCode::INSUFFICIENT_PRIVILEGES.0 }>,
            Self::HardwareBusy => answer::<{ ResultCode::HARDWARE_BUSY.0 }>,
            Self::NotSupported => answer::<{ ResultCode::NOT_SUPPORTED.0 }>,
            Self::NotInitialized => answer::<{ ResultCode::NOT_INITIALIZED.0 }>,
        }
    }
}

/// Returns `CODE` and touches nothing, like a CUPTI call that fails its checks.
extern "C" fn answer<const CODE: i32>(_params: *mut c_void) -> i32 {
    CODE
}

/// The machine a stand-in loader pretends to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scenario {
    /// The loader finds no library (as the real one reports it).
    Unopenable(UnavailableReason),
    /// A libcupti without the range profiler (before 12.6 Update 2).
    WithoutRangeProfiler,
    /// Every function succeeds without writing anything.
    Silent,
    /// Like [`Scenario::Silent`], except that `function` fails.
    Fails(Function, SimulatedFailure),
}

/// A [`LibraryLoader`] that returns Rust functions instead of libcupti.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StandInLoader {
    scenario: Scenario,
}

impl StandInLoader {
    /// No libcupti anywhere.
    pub fn library_missing() -> Self {
        Self::unopenable(UnavailableReason::LibraryMissing)
    }
    /// libcupti found, libnvperf_host not.
    pub fn nvperf_host_missing() -> Self {
        Self::unopenable(UnavailableReason::NvperfHostMissing)
    }
    /// A libcupti from before the range profiler existed.
    pub fn old_cupti() -> Self {
        Self {
            scenario: Scenario::WithoutRangeProfiler,
        }
    }
    /// Every call succeeds but fills in no output, as a broken library might.
    pub fn silent() -> Self {
        Self {
            scenario: Scenario::Silent,
        }
    }
    /// `function` answers `failure`; every other call succeeds.
    pub fn failing(function: Function, failure: SimulatedFailure) -> Self {
        Self {
            scenario: Scenario::Fails(function, failure),
        }
    }

    fn unopenable(reason: UnavailableReason) -> Self {
        Self {
            scenario: Scenario::Unopenable(reason),
        }
    }
}

impl LibraryLoader for StandInLoader {
    fn open(&self) -> Result<Box<dyn EntryPoints>, CountersUnavailable> {
        match self.scenario {
            Scenario::Unopenable(reason) => {
                Err(CountersUnavailable::new(reason, "stand-in library"))
            }
            scenario => Ok(Box::new(StandInLibrary { scenario })),
        }
    }
}

struct StandInLibrary {
    scenario: Scenario,
}

impl EntryPoints for StandInLibrary {
    fn entry(&self, symbol: &str) -> Option<Entry> {
        match self.scenario {
            Scenario::WithoutRangeProfiler if symbol.starts_with("cuptiRangeProfiler") => None,
            Scenario::Fails(function, failure) if function.symbol() == symbol => {
                Some(failure.entry())
            }
            _ => Some(answer::<{ ResultCode::SUCCESS.0 }>),
        }
    }

    fn origin(&self) -> &str {
        "stand-in libcupti"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::cupti::{Cupti, CuptiError, MetricConfig, RangeProfiler, Target};

    fn enable_against(loader: StandInLoader) -> CuptiError {
        let cupti = Cupti::load_with(&loader).expect("the stand-in loads");
        RangeProfiler::enable_on(&cupti, Target::detached())
            .err()
            .expect("the stand-in cannot enable a profiler")
    }

    fn unavailable_reason(error: &CuptiError) -> UnavailableReason {
        error
            .unavailable()
            .unwrap_or_else(|| panic!("expected unavailable counters, got {error:?}"))
            .reason
    }

    #[test]
    fn missing_privileges_point_at_the_driver_option() {
        let error = enable_against(StandInLoader::failing(
            Function::GetCounterAvailability,
            SimulatedFailure::InsufficientPrivileges,
        ));
        assert_eq!(
            unavailable_reason(&error),
            UnavailableReason::InsufficientPrivileges
        );
        let unavailable = error.unavailable().expect("unavailable");
        assert!(unavailable
            .detail
            .contains("cuptiProfilerGetCounterAvailability"));
        assert!(unavailable.detail.contains("INSUFFICIENT_PRIVILEGES (35)"));
        assert!(unavailable
            .fix()
            .contains("NVreg_RestrictProfilingToAdminUsers=0"));
        assert!(unavailable.fix().contains("CAP_PERFMON"));
    }

    #[test]
    fn busy_counters_point_at_dcgm_and_nsight() {
        let error = enable_against(StandInLoader::failing(
            Function::GetCounterAvailability,
            SimulatedFailure::HardwareBusy,
        ));
        assert_eq!(unavailable_reason(&error), UnavailableReason::HardwareBusy);
        assert!(error
            .unavailable()
            .expect("unavailable")
            .fix()
            .contains("dcgmi profile pause"));
    }

    #[test]
    fn unsupported_device_is_reported_as_such() {
        let error = enable_against(StandInLoader::failing(
            Function::DeviceSupported,
            SimulatedFailure::NotSupported,
        ));
        assert_eq!(
            unavailable_reason(&error),
            UnavailableReason::UnsupportedDevice
        );
    }

    #[test]
    fn not_initialized_outside_initialisation_stays_a_call_error() {
        let error = enable_against(StandInLoader::failing(
            Function::GetCounterAvailability,
            SimulatedFailure::NotInitialized,
        ));
        assert!(
            matches!(
                error,
                CuptiError::Call {
                    function: Function::GetCounterAvailability,
                    code: ResultCode::NOT_INITIALIZED
                }
            ),
            "{error:?}"
        );
    }

    #[test]
    fn calls_that_succeed_without_answering_are_caught() {
        // The first empty answer (the availability size) must be reported,
        // not used to size a buffer.
        let error = enable_against(StandInLoader::silent());
        assert!(
            matches!(error, CuptiError::EmptyAnswer("counter availability image")),
            "{error:?}"
        );
    }

    #[test]
    fn unloadable_nvperf_during_host_setup_is_named() {
        let loader =
            StandInLoader::failing(Function::HostInitialize, SimulatedFailure::NotInitialized);
        let cupti = Cupti::load_with(&loader).expect("the stand-in loads");
        let error = MetricConfig::new(&cupti, "GH100", &["dram__bytes_read.sum"])
            .err()
            .expect("host initialisation fails");
        assert_eq!(
            unavailable_reason(&error),
            UnavailableReason::NvperfHostMissing
        );
        assert!(error
            .unavailable()
            .expect("unavailable")
            .fix()
            .contains("libnvperf_host.so"));
    }

    #[test]
    fn old_cupti_lists_the_missing_range_profiler() {
        let unavailable = Cupti::load_with(&StandInLoader::old_cupti()).expect_err("too old");
        assert_eq!(unavailable.reason, UnavailableReason::OldCupti);
        assert!(unavailable.detail.contains("cuptiRangeProfilerEnable"));
        assert!(!unavailable.detail.contains("cuptiProfilerHostInitialize"));
        assert!(unavailable.fix().contains("12.6 Update 2"));
    }

    #[test]
    fn missing_libraries_carry_their_own_fixes() {
        let missing = Cupti::load_with(&StandInLoader::library_missing()).expect_err("no library");
        assert_eq!(missing.reason, UnavailableReason::LibraryMissing);
        assert!(missing.fix().contains("LD_LIBRARY_PATH"));
        let no_nvperf =
            Cupti::load_with(&StandInLoader::nvperf_host_missing()).expect_err("no nvperf");
        assert_eq!(no_nvperf.reason, UnavailableReason::NvperfHostMissing);
        assert_ne!(missing.fix(), no_nvperf.fix());
    }
}
