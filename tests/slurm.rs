//! The Slurm paths end to end on a real one-node cluster
//! (scripts/slurm/ci-single-node.sh): the job-array grading, and
//! `--gpu-slurm` (an allocation per session, every worker a step in it) for
//! the CLI's check, the TUI in a pseudo-terminal, a hung worker and an
//! allocation cancelled mid-check. After each, no step, worker or
//! allocation of the test is left.
//!
//! It installs and starts daemons as root, so its tests are ignored by a
//! plain run; `FLASHPROF_SLURM_TEST=1 scripts/test.sh` runs them with
//! `--ignored` (CI does). The cluster uses fixed ports, so the tests take turns.

mod process_support;
mod pty_support;
mod stand_in_support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use flashprof::app::check::run_check;
use flashprof::app::remote::Remote;
use flashprof::app::worker_handle::WorkerCommand;
use flashprof::outcome::{Progress, Verdict};
use flashprof::protocol::CaseStatus;
use pty_support::{save_in_place, Session, STARTER};
use stand_in_support::{assert_a_hang_times_out, plan, stand_in, statuses};

const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/scripts/slurm/ci-single-node.sh"
);

fn one_at_a_time() -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    TURN.lock().unwrap_or_else(|p| p.into_inner())
}

fn flashprof_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_flashprof"))
}

/// A running one-node cluster, stopped when dropped.
struct Cluster {
    work: PathBuf,
    conf: PathBuf,
    /// This test's marker: the programs the steps run are links in here.
    marker: tempfile::TempDir,
}

impl Cluster {
    fn start() -> Self {
        let output = Command::new(SCRIPT)
            .arg("start")
            .env("FLASHPROF", flashprof_bin())
            .output()
            .expect("the script starts");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "ci-single-node.sh start failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let value = |key: &str| {
            stdout
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .map(PathBuf::from)
                .unwrap_or_else(|| panic!("no {key} in:\n{stdout}"))
        };
        let marker = tempfile::Builder::new()
            .prefix("flashprof-slurm-test.")
            .tempdir()
            .expect("marker folder");
        Self {
            work: value("WORK="),
            conf: value("SLURM_CONF="),
            marker,
        }
    }

    /// `program` as a link under this test's marker.
    fn marked(&self, program: &Path) -> PathBuf {
        let link = self
            .marker
            .path()
            .join(program.file_name().expect("a name"));
        if !link.exists() {
            std::os::unix::fs::symlink(program, &link).expect("link the program");
        }
        link
    }

    fn queue(&self) -> String {
        let output = Command::new("squeue")
            .args(["-h", "-o", "%i %j %T"])
            .env("SLURM_CONF", &self.conf)
            .output()
            .expect("squeue");
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }

    /// No allocation in the queue, no srun, step or worker of this test.
    fn assert_nothing_left(&self) {
        let patience = Duration::from_secs(15);
        process_support::assert_none_left("srun, steps or workers", patience, || {
            process_support::matching(&self.marker.path().display().to_string())
        });
        let deadline = std::time::Instant::now() + patience;
        while !self.queue().is_empty() {
            assert!(
                std::time::Instant::now() < deadline,
                "still queued: {}",
                self.queue()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(SCRIPT).arg("stop").arg(&self.work).status();
    }
}

#[test]
#[ignore = "starts a real Slurm as root: FLASHPROF_SLURM_TEST=1 scripts/test.sh runs it"]
fn a_job_array_grades_every_shipped_kernel_exactly_once() {
    let _turn = one_at_a_time();
    let output = Command::new(SCRIPT)
        .env("FLASHPROF", flashprof_bin())
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

#[test]
#[ignore = "starts a real Slurm as root: FLASHPROF_SLURM_TEST=1 scripts/test.sh runs it"]
fn check_through_gpu_slurm_compiles_in_a_step() {
    assert!(
        flashprof::gpu::libraries::preload_nvrtc(),
        "NVRTC (libnvrtc.so.13) cannot be loaded: run the tests through scripts/test.sh"
    );
    let _turn = one_at_a_time();
    let cluster = Cluster::start();
    let kernel = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/kernels/flash-prefill/reference.cu"
    );
    let output = Command::new(flashprof_bin())
        .args(["check", "--json", "--no-timing", "--gpu-slurm", "-N1"])
        .arg("--gpu-host-flashprof")
        .arg(cluster.marked(flashprof_bin()))
        .arg(kernel)
        .env("SLURM_CONF", &cluster.conf)
        .output()
        .expect("flashprof runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}):\n{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    assert_eq!(report["compile"]["ok"], true, "{stdout}");
    match output.status.code() {
        Some(5) => {
            let cases = report["cases"].as_array().expect("cases");
            assert!(cases.iter().all(|c| c["status"] == "not_run"), "{stdout}");
        }
        Some(0) => assert_eq!(report["passed"], true, "{stdout}"),
        other => panic!("exit {other:?}:\n{stdout}"),
    }
    // flashprof released its allocation on the way out.
    cluster.assert_nothing_left();
}

#[test]
#[ignore = "starts a real Slurm as root: FLASHPROF_SLURM_TEST=1 scripts/test.sh runs it"]
fn the_tui_through_gpu_slurm_names_the_node_the_job_and_the_link() {
    assert!(
        flashprof::gpu::libraries::preload_nvrtc(),
        "NVRTC (libnvrtc.so.13) cannot be loaded: run the tests through scripts/test.sh"
    );
    let _turn = one_at_a_time();
    let cluster = Cluster::start();
    let folder = tempfile::tempdir().expect("temp folder");
    let kernel = folder.path().join("prefill.cu");
    save_in_place(&kernel, STARTER);
    let worker = cluster.marked(flashprof_bin()).display().to_string();
    let mut session = Session::start_with_env(
        folder.path(),
        &[
            "prefill.cu",
            "--no-timing",
            "--no-counters",
            "--gpu-slurm",
            "-N1",
            "--gpu-host-flashprof",
            &worker,
        ],
        &[("SLURM_CONF", &cluster.conf)],
    );
    let first = session.wait_for("the starter to compile in a step", |s| {
        let header = s.lines().next().unwrap_or_default();
        s.contains("compiled in")
            && header.contains("on localhost, job ")
            && header.contains(", srun ")
    });
    let header = first.lines().next().unwrap_or_default();
    assert!(
        header.trim_end().ends_with(" ms"),
        "the link's cost: {header}"
    );
    pty_support::save_a_typo_then_quit(&mut session, &kernel);
    cluster.assert_nothing_left();
}

#[test]
#[ignore = "starts a real Slurm as root: FLASHPROF_SLURM_TEST=1 scripts/test.sh runs it"]
fn a_hung_step_is_recovered_by_the_watchdog_and_a_cancelled_job_is_said() {
    let _turn = one_at_a_time();
    let cluster = Cluster::start();
    std::env::set_var("SLURM_CONF", &cluster.conf);
    let program = cluster.marked(&stand_in().program).display().to_string();

    let remote = Remote::slurm("-N1").expect("args");
    let command = WorkerCommand::remote(remote.clone(), &program);
    let mut worker = None;
    // Slurm says the job runs: the silence is the kernel's, a timeout as locally.
    assert_a_hang_times_out(&command, &mut worker);
    let job = remote.place().expect("an allocation");

    // The allocation is cancelled while a case waits: not the kernel's fault.
    let id = job.rsplit("job ").next().expect("an id").to_owned();
    let report = run_check(
        &plan(&["first", "hang", "last"], Duration::from_secs(30)),
        &command,
        &mut worker,
        |p| {
            if let Progress::CaseStarted { index: 1 } = p {
                std::thread::sleep(Duration::from_millis(300));
                Command::new("scancel").arg(&id).status().expect("scancel");
            }
        },
    )
    .expect("the check completes");
    let got = statuses(&report);
    let cancelled = &report.cases[1].diagnosis;
    assert_eq!(
        got,
        vec![CaseStatus::Pass, CaseStatus::NotRun, CaseStatus::NotRun],
        "{cancelled}"
    );
    assert!(
        cancelled.contains("no Slurm allocation") && cancelled.contains(&format!("job {id}")),
        "{cancelled}"
    );
    assert_eq!(Verdict::of(&report), Verdict::Error);
    drop(worker);
    drop(command);
    drop(remote);
    cluster.assert_nothing_left();
}
