//! Everything that touches NVIDIA libraries: NVRTC, the CUDA driver and CUPTI.
//! Knows nothing about grading or screens.

pub mod compile;
pub mod cupti;
pub mod device;
pub mod fetch;
pub mod found;
pub mod headers;
pub mod libraries;
pub mod peaks;
