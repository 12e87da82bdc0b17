//! The Slurm path end to end on a real one-node cluster
//! (scripts/slurm/ci-single-node.sh). It installs and starts daemons as
//! root, so it runs only when FLASHPROF_SLURM_TEST=1 (CI sets it).

use std::process::Command;

#[test]
fn a_job_array_grades_every_shipped_kernel_exactly_once() {
    if std::env::var("FLASHPROF_SLURM_TEST").as_deref() != Ok("1") {
        eprintln!("skipped: set FLASHPROF_SLURM_TEST=1 (CI does)");
        return;
    }
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/scripts/slurm/ci-single-node.sh"
    );
    let output = Command::new(script)
        .env("FLASHPROF", env!("CARGO_BIN_EXE_flashprof"))
        .output()
        .expect("the script starts");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "ci-single-node.sh failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    assert!(stdout.contains("each exactly once"), "{stdout}");
}
