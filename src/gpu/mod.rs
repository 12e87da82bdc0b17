//! Everything that touches NVIDIA libraries: NVRTC, the CUDA driver and CUPTI.
//! Knows nothing about grading or screens.
pub mod cupti;
