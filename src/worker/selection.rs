//! Which GPU a worker opens, chosen by its parent through the environment.
//!
//! The batch grader runs one worker per GPU, and a compile-only grade runs
//! workers that must not touch a GPU at all. An environment variable (rather
//! than a worker argument) keeps the worker's command line identical for
//! every caller and lets a cluster job pin a device without flashprof's help.

use std::fmt;
use std::str::FromStr;

use crate::facts::device::GpuProblem;
use crate::gpu::device::{self, Gpu};

/// The variable a worker reads: a device ordinal, or `none` for compile-only.
pub const GPU_ENV: &str = "FLASHPROF_GPU";

/// A worker's device choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuSelection {
    /// Open the CUDA device with this ordinal.
    Ordinal(usize),
    /// Open no device: compile only, every case reported as not run.
    Disabled,
}

impl Default for GpuSelection {
    fn default() -> Self {
        Self::Ordinal(0)
    }
}

impl fmt::Display for GpuSelection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ordinal(n) => write!(f, "{n}"),
            Self::Disabled => f.write_str("none"),
        }
    }
}

impl FromStr for GpuSelection {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim() {
            "none" => Ok(Self::Disabled),
            other => other.parse().map(Self::Ordinal).map_err(|_| {
                format!("{GPU_ENV} must be a device ordinal or `none`, found `{text}`")
            }),
        }
    }
}

impl GpuSelection {
    /// The selection in this process's environment; unset means device 0.
    pub fn from_env() -> Result<Self, String> {
        match std::env::var(GPU_ENV) {
            Ok(text) => text.parse(),
            Err(std::env::VarError::NotPresent) => Ok(Self::default()),
            Err(std::env::VarError::NotUnicode(_)) => Err(format!("{GPU_ENV} is not valid text")),
        }
    }

    /// Opens the selected device, or says why there is none.
    pub fn open(self) -> Result<Gpu, GpuProblem> {
        match self {
            Self::Ordinal(ordinal) => device::open(ordinal),
            Self::Disabled => Err(GpuProblem::NoDevice {
                detail: format!("{GPU_ENV}=none (compile-only)"),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selection_round_trips_through_text() {
        for selection in [GpuSelection::Ordinal(3), GpuSelection::Disabled] {
            assert_eq!(selection.to_string().parse(), Ok(selection));
        }
        assert_eq!(" 1 ".parse(), Ok(GpuSelection::Ordinal(1)));
        assert!("gpu1"
            .parse::<GpuSelection>()
            .unwrap_err()
            .contains(GPU_ENV));
        assert!("-1".parse::<GpuSelection>().is_err());
    }

    #[test]
    fn disabled_opens_nothing_and_says_compile_only() {
        let problem = GpuSelection::Disabled.open().err().map(|p| p.describe());
        assert!(problem.is_some_and(|text| text.contains("compile-only")));
    }
}
