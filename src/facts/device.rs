//! The GPU a worker found, or why it found none.

use serde::{Deserialize, Serialize};

/// The GPU a worker runs on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceInfo {
    pub ordinal: usize,
    pub name: String,
    pub compute_capability: (i32, i32),
    pub sm_count: i32,
    pub l2_bytes: i32,
    pub max_sm_clock_mhz: f64,
    pub memory_bytes: usize,
    pub driver_version: i32,
}

impl DeviceInfo {
    /// The NVRTC target for this GPU, e.g. `sm_90`.
    pub fn arch(&self) -> String {
        format!(
            "sm_{}{}",
            self.compute_capability.0, self.compute_capability.1
        )
    }
}

/// Why there is no usable GPU, with what still works.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum GpuProblem {
    /// `libcuda.so` could not be loaded.
    NoDriver { detail: String },
    /// The driver loaded but reported no CUDA device.
    NoDevice { detail: String },
    /// The driver refused to start (version mismatch, device busy, ...).
    DriverError { detail: String },
}

impl GpuProblem {
    pub fn describe(&self) -> String {
        match self {
            GpuProblem::NoDriver { detail } => format!(
                "no NVIDIA driver: {detail}. Compilation still works; cases and timing need a GPU."
            ),
            GpuProblem::NoDevice { detail } => format!(
                "no CUDA GPU found: {detail}. Compilation still works; cases and timing need a GPU."
            ),
            GpuProblem::DriverError { detail } => {
                format!("the CUDA driver failed to start: {detail}")
            }
        }
    }
}
