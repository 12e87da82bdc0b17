//! End-to-end `flashprof check` on a real GPU (ignored here: the GPU scripts
//! run them with `--ignored`), and the compile-only path, forced with
//! `FLASHPROF_GPU=none` so it runs the same on machines with and without one.

mod cli_support;

use std::process::Command;

/// `flashprof ARGS` in the checkout, with `gpu` as the worker's device choice
/// when given (`FLASHPROF_GPU`).
fn flashprof_on(gpu: Option<&str>, args: &[&str]) -> (i32, String) {
    let mut command = Command::new(cli_support::flashprof_binary());
    command.args(args).current_dir(cli_support::checkout());
    if let Some(gpu) = gpu {
        command.env("FLASHPROF_GPU", gpu);
    }
    let out = command.output().expect("run flashprof");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn flashprof(args: &[&str]) -> (i32, String) {
    flashprof_on(None, args)
}

const NO_GPU: i32 = 5;

#[test]
#[ignore = "needs a GPU: scripts/gpu-acceptance.sh runs it with --ignored"]
fn starter_passes_every_case_on_a_gpu() {
    let (code, json) = flashprof(&[
        "check",
        "kernels/flash-prefill/starter.cu",
        "--json",
        "--no-timing",
        "--no-counters",
    ]);
    assert_ne!(code, NO_GPU, "this test needs a GPU: {json}");
    let report: serde_json::Value = serde_json::from_str(&json).expect("JSON report");
    assert_eq!(report["schema"], "flashprof.check/2");
    assert_eq!(code, 0, "{json}");
    assert!(report["cases"]
        .as_array()
        .is_some_and(|c| c.iter().all(|c| c["status"] == "pass")));
}

#[test]
#[ignore = "needs a GPU: scripts/gpu-acceptance.sh runs it with --ignored"]
fn a_planted_bug_fails_on_a_gpu() {
    let (code, json) = flashprof(&[
        "check",
        "kernels/flash-prefill/bugs/no-max-subtraction.cu",
        "--json",
        "--no-timing",
        "--no-counters",
    ]);
    assert_ne!(code, NO_GPU, "this test needs a GPU: {json}");
    assert_eq!(code, 1, "{json}");
    let report: serde_json::Value = serde_json::from_str(&json).expect("JSON report");
    let overflow = report["cases"]
        .as_array()
        .and_then(|cases| cases.iter().find(|c| c["name"] == "planted-overflow"))
        .expect("planted-overflow case");
    assert_eq!(overflow["status"], "fail");
}

#[test]
fn without_a_gpu_the_file_still_compiles_and_nothing_is_graded() {
    let (code, json) = flashprof_on(
        Some("none"),
        &["check", "kernels/flash-prefill/reference.cu", "--json"],
    );
    assert_eq!(code, NO_GPU, "{json}");
    let report: serde_json::Value = serde_json::from_str(&json).expect("JSON report");
    assert_eq!(report["compile"]["ok"], true);
    assert!(report["compile"]["resources"]["registers"]
        .as_u64()
        .is_some_and(|r| r > 0));
    assert!(report["cases"]
        .as_array()
        .is_some_and(|c| c.iter().all(|c| c["status"] == "not_run")));
    assert_eq!(report["passed"], false);
}
