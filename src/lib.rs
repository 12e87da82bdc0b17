//! flashprof grades and profiles CUDA flash-prefill kernels.
//!
//! Layers, from the bottom up (each depends only on the ones above it in this list):
//! - [`lab`]: the contract, launch geometry, source files and cases (pure data);
//! - [`grade`]: the float64 oracle, comparison, diagnosis and timing statistics (pure);
//! - [`gpu`]: NVRTC, the CUDA driver and CUPTI (the only `unsafe` code);
//! - [`protocol`], [`worker`], [`app`]: the process boundary around untrusted kernels;
//! - [`report`]: tables and JSON.
#![deny(unsafe_code)]

pub mod app;
pub mod cli;
pub mod display;
pub mod embedded;
pub mod facts;
pub mod gpu;
pub mod grade;
pub mod lab;
pub mod nonfinite;
pub mod outcome;
pub mod protocol;
pub mod report;
pub mod tui;
pub mod worker;
