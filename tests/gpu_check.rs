//! End-to-end `flashprof check` on a real GPU. On a machine without one the
//! tests say so and skip: the binary reports "no GPU" with exit code 5.

use std::process::Command;

fn flashprof(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_flashprof"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run flashprof");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

const NO_GPU: i32 = 5;

#[test]
fn starter_passes_every_case_on_a_gpu() {
    let (code, json) = flashprof(&[
        "check",
        "kernels/flash-prefill/starter.cu",
        "--json",
        "--no-timing",
        "--no-counters",
    ]);
    if code == NO_GPU {
        eprintln!("skipped: no GPU on this machine (flashprof check exited 5)");
        return;
    }
    let report: serde_json::Value = serde_json::from_str(&json).expect("JSON report");
    assert_eq!(report["schema"], "flashprof.check/1");
    assert_eq!(code, 0, "{json}");
    assert!(report["cases"]
        .as_array()
        .is_some_and(|c| c.iter().all(|c| c["status"] == "pass")));
}

#[test]
fn a_planted_bug_fails_on_a_gpu() {
    let (code, json) = flashprof(&[
        "check",
        "kernels/flash-prefill/bugs/no-max-subtraction.cu",
        "--json",
        "--no-timing",
        "--no-counters",
    ]);
    if code == NO_GPU {
        eprintln!("skipped: no GPU on this machine (flashprof check exited 5)");
        return;
    }
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
    let (code, json) = flashprof(&["check", "kernels/flash-prefill/reference.cu", "--json"]);
    if code != NO_GPU {
        eprintln!("skipped: this machine has a GPU (exit {code}); the no-GPU path is tested on CI");
        return;
    }
    let report: serde_json::Value = serde_json::from_str(&json).expect("JSON report");
    if report["compile"]["problem"]["kind"] == "compiler_missing" {
        eprintln!("skipped: NVRTC is not on the loader path (scripts/test.sh provides it)");
        return;
    }
    assert_eq!(report["compile"]["ok"], true);
    assert!(report["compile"]["resources"]["registers"]
        .as_u64()
        .is_some_and(|r| r > 0));
    assert!(report["cases"]
        .as_array()
        .is_some_and(|c| c.iter().all(|c| c["status"] == "not_run")));
    assert_eq!(report["passed"], false);
}
