//! Running the real `flashprof` binary from the integration tests.
#![allow(dead_code)] // each test binary uses its own subset

use std::path::Path;
use std::process::{Command, Output};

/// `flashprof ARGS` in `cwd`, to completion.
pub fn flashprof(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_flashprof"))
        .args(args)
        .current_dir(cwd)
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
