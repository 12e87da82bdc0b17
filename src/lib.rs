//! flashprof compiles, grades, times and profiles CUDA attention kernels
//! written for the labs of one course (the attention-v1 contract: flash
//! prefill, vLLM's paged prefill, and the labs that follow them), from the
//! terminal, for one student or a whole class.
//!
//! # Module map
//!
//! The modules are layers, listed from the bottom up; each uses only the
//! layers listed before it (tests/architecture_map.rs checks every
//! `use crate::` edge against this list, and that every module is named):
//!
//! 1. [`base64`], [`display`], [`nonfinite`]: leaves: base64 for report
//!    images and the clipboard, outside text made safe for a terminal, and
//!    floats that may be NaN or infinite through JSON;
//! 2. [`sys`]: what holds against hostile input, once: this process's
//!    user, private folders, and other programs started from one under a
//!    deadline;
//! 3. [`grade`]: what holds for every lab: comparison against an oracle,
//!    launch integrity and audit, timing statistics, the physical floor,
//!    the roofline reading of counters (pure; names no lab);
//! 4. [`lab`]: every lab as a value (its contract, cases, oracle, golden
//!    proof, diagnosis, bug models), and the student file's validation;
//! 5. [`facts`]: plain data about compiled kernels and GPUs;
//! 6. [`gpu`]: NVRTC, the CUDA driver and CUPTI, behind thin safe owners;
//! 7. [`protocol`]: the versioned messages between caller and worker;
//! 8. [`worker`]: the sandboxed process that compiles and runs untrusted
//!    kernels;
//! 9. [`outcome`]: what a check found, as data, and its one verdict rule;
//! 10. [`app`]: the caller's side: the worker's handle (local, ssh, Slurm),
//!     one check, watching, history, batch grading, gates;
//! 11. [`embedded`]: the recorded sessions compiled into the binary;
//! 12. [`report`]: the table and JSON of a check;
//! 13. [`tui`]: the terminal screens (state, messages, views);
//! 14. [`cli`]: commands, their options and their one error path.
//!
//! # Unsafe code
//!
//! The crate denies `unsafe`; these files allow it, each for foreign calls
//! it keeps thin (the same test compares this list with the source):
//! - `src/gpu/device.rs`: CUDA driver calls and kernel launches;
//! - `src/gpu/device/fresh.rs`: the fresh-input kernels' launches and the
//!   rule they take by value;
//! - `src/gpu/peaks.rs`: launching the peak probes;
//! - `src/gpu/compile/nvrtc.rs`: NVRTC through cudarc;
//! - `src/gpu/cupti/mod.rs`, `src/gpu/cupti/sys.rs`: CUPTI's profiler API;
//! - `src/gpu/cupti/lines.rs`: CUPTI's PC Sampling and SASS Metrics APIs;
//! - `src/gpu/libraries.rs`: loading NVIDIA's libraries by path;
//! - `src/worker/stdio.rs`: the worker's private protocol descriptor;
//! - `src/worker/sandbox.rs`: `setrlimit` and the sandbox's system calls;
//! - `src/app/batch/lock.rs`: one `flock` on the `--out` folder;
//! - `src/sys/child.rs`: one `kill` of a timed-out child's process group.
#![deny(unsafe_code)]

pub mod app;
pub mod base64;
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
pub mod sys;
pub mod tui;
pub mod worker;
