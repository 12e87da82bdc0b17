//! `--gpu-host` through a real OpenSSH server on localhost
//! (tests/sshd_support): the CLI's check, the TUI in a pseudo-terminal, a
//! connection cut by the server mid-case, and a hung worker recovered by the
//! watchdog. After each, nothing the test started through the server is
//! left running: no session, no ssh client, no worker.
//!
//! It installs and starts sshd, so its tests are ignored by a plain run;
//! `FLASHPROF_SSH_TEST=1 scripts/test.sh` runs them with `--ignored` (CI does).

mod process_support;
mod pty_support;
mod sshd_support;
mod stand_in_support;

use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use flashprof::app::check::run_check;
use flashprof::app::remote::{Remote, SSH_CONFIG_ENV};
use flashprof::app::worker_handle::WorkerCommand;
use flashprof::outcome::{Progress, Verdict};
use flashprof::protocol::CaseStatus;
use pty_support::{save_in_place, Session, STARTER};
use sshd_support::{Sshd, ALIAS};
use stand_in_support::{
    assert_a_hang_times_out, assert_the_recorded_profile_arrived, lines_plan, plan, stand_in,
    statuses,
};

/// The library-level tests point this process's ssh at their server through
/// the environment, so the tests of this file take turns.
fn one_at_a_time() -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    TURN.lock().unwrap_or_else(|p| p.into_inner())
}

fn flashprof_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_flashprof"))
}

/// The stand-in worker on the "node", reached through the real server.
fn stand_in_through(sshd: &Sshd) -> WorkerCommand {
    std::env::set_var(SSH_CONFIG_ENV, sshd.client_config());
    let program = sshd.marked(&stand_in().program);
    WorkerCommand::remote(
        Remote::ssh(ALIAS).expect("host"),
        &program.display().to_string(),
    )
}

#[test]
#[ignore = "starts a real sshd on localhost: FLASHPROF_SSH_TEST=1 scripts/test.sh runs it"]
fn check_through_sshd_compiles_on_the_node() {
    let _turn = one_at_a_time();
    let sshd = Sshd::start();
    assert!(
        flashprof::gpu::libraries::preload_nvrtc(),
        "NVRTC (libnvrtc.so.13) cannot be loaded: run the tests through scripts/test.sh"
    );
    let kernel = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/kernels/flash-prefill/reference.cu"
    );
    let output = std::process::Command::new(flashprof_bin())
        .args(["check", "--json", "--no-timing", "--gpu-host", ALIAS])
        .arg("--gpu-host-flashprof")
        .arg(sshd.marked(flashprof_bin()))
        .arg(kernel)
        .env(SSH_CONFIG_ENV, sshd.client_config())
        .output()
        .expect("flashprof runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let report: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{stdout}\n{stderr}\n{}", sshd.log()));
    assert_eq!(report["compile"]["ok"], true, "{stdout}");
    match output.status.code() {
        // No GPU on the node: compiled there, nothing graded (exit 5, docs/CLI).
        Some(5) => {
            assert!(report["gpu"]["Err"].is_object(), "{stdout}");
            let cases = report["cases"].as_array().expect("cases");
            assert!(!cases.is_empty());
            assert!(cases.iter().all(|c| c["status"] == "not_run"), "{stdout}");
        }
        // A GPU on this machine graded the reference through ssh.
        Some(0) => assert_eq!(report["passed"], true, "{stdout}"),
        other => panic!("exit {other:?}:\n{stdout}\n{stderr}"),
    }
    assert!(
        sshd.log().contains("Accepted publickey"),
        "the check went through the server:\n{}",
        sshd.log()
    );
    sshd.assert_nothing_left();
}

#[test]
#[ignore = "starts a real sshd on localhost: FLASHPROF_SSH_TEST=1 scripts/test.sh runs it"]
fn a_line_profile_through_sshd_comes_back_from_a_second_worker_on_the_node() {
    let _turn = one_at_a_time();
    let sshd = Sshd::start();
    assert!(
        flashprof::gpu::libraries::preload_nvrtc(),
        "NVRTC (libnvrtc.so.13) cannot be loaded: run the tests through scripts/test.sh"
    );
    let command = stand_in_through(&sshd);
    let mut worker = None;
    let report = run_check(&lines_plan(), &command, &mut worker, |_| {}).expect("a check");
    if let Some(worker) = worker {
        worker.shutdown();
    }
    assert_the_recorded_profile_arrived(&report);
    // The check's worker and the line worker: two sessions on the node.
    let sessions = sshd.log().matches("Accepted publickey").count();
    assert!(sessions >= 2, "{sessions} session(s):\n{}", sshd.log());
    sshd.assert_nothing_left();
}

#[test]
#[ignore = "starts a real sshd on localhost: FLASHPROF_SSH_TEST=1 scripts/test.sh runs it"]
fn the_tui_through_sshd_shows_the_node_and_the_link() {
    let _turn = one_at_a_time();
    let sshd = Sshd::start();
    assert!(
        flashprof::gpu::libraries::preload_nvrtc(),
        "NVRTC (libnvrtc.so.13) cannot be loaded: run the tests through scripts/test.sh"
    );
    let folder = tempfile::tempdir().expect("temp folder");
    let kernel = folder.path().join("prefill.cu");
    save_in_place(&kernel, STARTER);
    let worker = sshd.marked(flashprof_bin()).display().to_string();
    let config = sshd.client_config();
    let mut session = Session::start_with_env(
        folder.path(),
        &[
            "prefill.cu",
            "--no-timing",
            "--no-counters",
            "--gpu-host",
            ALIAS,
            "--gpu-host-flashprof",
            &worker,
        ],
        &[(SSH_CONFIG_ENV, &config)],
    );
    let first = session.wait_for("the starter to compile on the node", |s| {
        s.contains("compiled in") && s.contains(&format!("on {ALIAS}, ssh "))
    });
    let header = first.lines().next().unwrap_or_default().to_owned();
    assert!(
        header.trim_end().ends_with(" ms"),
        "the link's cost: {header}"
    );
    // A save with an error goes through the same session.
    pty_support::save_a_typo_then_quit(&mut session, &kernel);
    sshd.assert_nothing_left();
}

#[test]
#[ignore = "starts a real sshd on localhost: FLASHPROF_SSH_TEST=1 scripts/test.sh runs it"]
fn a_connection_cut_mid_case_is_the_link_and_is_recovered() {
    let _turn = one_at_a_time();
    let sshd = Sshd::start();
    let command = stand_in_through(&sshd);
    let mut worker = None;
    let mut restarts = Vec::new();
    let report = run_check(
        &plan(&["first", "hang", "last"], Duration::from_secs(30)),
        &command,
        &mut worker,
        |p| match p {
            // The `hang` case never answers: cut the link while it waits.
            Progress::CaseStarted { index: 1 } => {
                std::thread::sleep(Duration::from_millis(300));
                sshd.drop_connections();
            }
            Progress::WorkerRestarted { reason } => restarts.push(reason),
            _ => {}
        },
    )
    .expect("the check completes");
    let got = statuses(&report);
    let hang = &report.cases[1].diagnosis;
    assert_eq!(
        got,
        vec![CaseStatus::Pass, CaseStatus::NotRun, CaseStatus::Pass],
        "{hang}"
    );
    assert!(
        hang.contains(&format!("no connection to the GPU node (ssh {ALIAS})"))
            && hang.contains("(not the kernel's fault)"),
        "{hang}"
    );
    assert!(!hang.contains("no result within"), "{hang}");
    assert_eq!(report.worker_restarts, 1, "{restarts:?}");
    assert_eq!(Verdict::of(&report), Verdict::Error);
    // The link is measured on the new session as on the first.
    let (transport, _) = worker
        .as_ref()
        .expect("a live worker")
        .link()
        .expect("a link");
    assert_eq!(transport, "ssh");

    // Cut again between checks, and check at once: whether the client has
    // noticed yet (the kept worker has ended) or not (the compile meets the
    // dead link), the check reconnects and compiles on a new session.
    sshd.drop_connections();
    assert_recovers(&command, &mut worker);
    // Cut, and let the client notice before the next check.
    sshd.drop_connections();
    let client_marker = sshd.client_config().display().to_string();
    process_support::assert_none_left("the cut ssh client", Duration::from_secs(10), || {
        process_support::matching(&client_marker)
    });
    assert_recovers(&command, &mut worker);
    worker.take().expect("a live worker").shutdown();
    sshd.assert_nothing_left();
}

/// The next check on a kept worker whose link was cut: it compiles and runs.
fn assert_recovers(
    command: &WorkerCommand,
    worker: &mut Option<flashprof::app::worker_handle::WorkerHandle>,
) {
    let mut restarted = Vec::new();
    let report = run_check(
        &plan(&["first"], Duration::from_secs(30)),
        command,
        worker,
        |p| {
            if let Progress::WorkerRestarted { reason } = p {
                restarted.push(reason)
            }
        },
    )
    .expect("the next check completes");
    assert!(report.compile.ok, "{:?}", report.compile);
    assert_eq!(report.cases[0].status, CaseStatus::Pass);
    assert_eq!(restarted.len(), 1, "{restarted:?}");
    assert!(
        restarted[0].contains("no connection to the GPU node"),
        "{restarted:?}"
    );
}

#[test]
#[ignore = "starts a real sshd on localhost: FLASHPROF_SSH_TEST=1 scripts/test.sh runs it"]
fn a_hung_worker_through_sshd_is_recovered_by_the_watchdog() {
    let _turn = one_at_a_time();
    let sshd = Sshd::start();
    let command = stand_in_through(&sshd);
    let mut worker = None;
    // The node still answers, so the silence is the kernel's: a timeout, as locally.
    assert_a_hang_times_out(&command, &mut worker);
    worker.take().expect("a live worker").shutdown();
    // The hung worker on the node saw its ssh session go and ended itself.
    sshd.assert_nothing_left();
}

#[test]
#[ignore = "starts a real sshd on localhost: FLASHPROF_SSH_TEST=1 scripts/test.sh runs it"]
fn a_worker_killed_by_a_signal_through_sshd_is_a_crash_not_the_link() {
    let _turn = one_at_a_time();
    let sshd = Sshd::start();
    let command = stand_in_through(&sshd);
    let mut worker = None;
    let report = run_check(
        &plan(&["first", "signal", "last"], Duration::from_secs(30)),
        &command,
        &mut worker,
        |_| {},
    )
    .expect("the check completes");
    let got = statuses(&report);
    let signal = &report.cases[1].diagnosis;
    assert_eq!(
        got,
        vec![CaseStatus::Pass, CaseStatus::Crash, CaseStatus::Pass],
        "{signal}"
    );
    assert!(!signal.contains("no connection"), "{signal}");
    worker.take().expect("a live worker").shutdown();
    sshd.assert_nothing_left();
}
