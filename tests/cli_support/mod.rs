//! Running the real `flashprof` binary from the integration tests.
#![allow(dead_code)] // each test binary uses its own subset

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The binary under test. The GPU scripts run the GPU tests' binaries on a
/// machine without this checkout's paths (`FLASHPROF_TEST_BIN`, and
/// `FLASHPROF_TEST_ROOT` for the checkout: scripts/gpu-tests.sh).
pub fn flashprof_binary() -> PathBuf {
    std::env::var_os("FLASHPROF_TEST_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_flashprof")))
}

/// The checkout the shipped kernels are read from (see [`flashprof_binary`]).
pub fn checkout() -> PathBuf {
    std::env::var_os("FLASHPROF_TEST_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}

/// `flashprof ARGS` in `cwd`, to completion.
pub fn flashprof(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_flashprof"))
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("flashprof runs")
}

/// `flashprof ARGS` in `cwd` with its worker told to open no GPU
/// (`FLASHPROF_GPU=none`): the compile-only path, the same on every machine.
pub fn flashprof_without_gpu(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_flashprof"))
        .args(args)
        .current_dir(cwd)
        .env("FLASHPROF_GPU", "none")
        .output()
        .expect("flashprof runs")
}

/// Everything a run printed, stdout then stderr.
pub fn text(output: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// A valid flash-prefill submission that keeps a 16 MiB memo between
/// launches: the starter's body, whole, in a file that declares
/// `g_memo` at file scope and writes each row's first output to it.
pub fn memo_kernel() -> String {
    let starter = include_str!("../../kernels/flash-prefill/starter.cu");
    let signature = flashprof::lab::flash_prefill::contract::ENTRY_SIGNATURE;
    format!(
        "__device__ float g_memo[4 << 20];\n\n{signature}\n{{\n\
         g_memo[blockIdx.y * 4096 + threadIdx.x] = q[threadIdx.x];\n{starter}}}\n"
    )
}
