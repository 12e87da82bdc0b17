//! Remote workers (docs/REMOTE.md) without a network: a fake `ssh` (and
//! fake `salloc`, `srun`, `scancel`, `squeue`) first on PATH check their
//! arguments and run the remote command here, with an environment as bare
//! as a real node's (ssh forwards none). The host name picks how the fake
//! link behaves:
//! - `alice@node`: a good link;
//! - `drop@node`: every session is cut 1.5 s after it starts (ssh exit 255);
//! - `sig@node`: a good link that reports a worker killed by a signal as
//!   real ssh does (exit 255, and `-v`'s log has the exit-signal);
//! - `down@node`: no connection at all;
//! - `gone@node`: sessions start until the first probe after a watchdog,
//!   which fails, and so does every connection after it.

mod cli_support;
mod stand_in_support;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use flashprof::app::check::run_check;
use flashprof::app::remote::Remote;
use flashprof::app::worker_handle::{WorkerCommand, WorkerFailure, WorkerHandle};
use flashprof::outcome::{CheckReport, Progress, Verdict};
use flashprof::protocol::CaseStatus;
use stand_in_support::{plan, stand_in, statuses};

const FAKE_SSH: &str = r#"#!/bin/sh
# A fake OpenSSH client: checks what flashprof passes, then runs the remote
# command here in a bare environment.
echo "ssh $*" >> "$FAKE_REMOTE_DIR/log"
tty=; batch=; log_file=
while [ $# -gt 0 ]; do
  case "$1" in
    -T) tty=no; shift ;;
    -v) shift ;;
    -E) log_file=$2; shift 2 ;;
    -o) [ "$2" = BatchMode=yes ] && batch=yes; shift 2 ;;
    --) shift; break ;;
    -*) echo "fake ssh: unexpected option $1" >&2; exit 255 ;;
    *) break ;;
  esac
done
if [ "$tty" != no ] || [ "$batch" != yes ]; then
  echo "fake ssh: flashprof must pass -T and -o BatchMode=yes" >&2; exit 255
fi
# ssh's own messages go to its -E log, apart from the remote command's stderr.
say() { if [ -n "$log_file" ]; then echo "$*" >> "$log_file"; else echo "$*" >&2; fi; }
host=$1; shift
if [ $# -ne 1 ]; then echo "fake ssh: want one remote command word, got $#" >&2; exit 255; fi
case "$host" in
  down@*) say "ssh: connect to host ${host#*@} port 22: Connection refused"; exit 255 ;;
  gone@*) if [ "$1" = true ] || [ -e "$FAKE_REMOTE_DIR/gone" ]; then
            : > "$FAKE_REMOTE_DIR/gone"
            say "ssh: connect to host ${host#*@} port 22: Connection timed out"; exit 255
          fi ;;
esac
# The node's own environment: nothing of the caller's but what a login gives.
node() { exec env -i PATH="$PATH" HOME="$HOME" LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}" \
  ${FLASHPROF_STAND_IN_PROTOCOL:+FLASHPROF_STAND_IN_PROTOCOL=$FLASHPROF_STAND_IN_PROTOCOL} \
  sh -c "cd /; exec $1"; }
case "$host" in
  drop@*)
    # An asynchronous command reads /dev/null unless given stdin explicitly.
    exec 3<&0
    node "$1" <&3 3<&- &
    pid=$!
    ( sleep 1.5; kill -9 $pid ) </dev/null >/dev/null 2>&1 &
    wait $pid; rc=$?
    if [ $rc -gt 128 ]; then
      say "Timeout, server ${host#*@} not responding."; exit 255
    fi
    exit $rc ;;
  sig@*)
    # A remote command ended by a signal: ssh exits 255; only its -v log says why.
    ( node "$1" ); rc=$?
    if [ $rc -gt 128 ]; then
      say "debug1: client_input_channel_req: channel 0 rtype exit-signal reply 0"; exit 255
    fi
    exit $rc ;;
  *) node "$1" ;;
esac
"#;

const FAKE_SALLOC: &str = r#"#!/bin/sh
echo "salloc $*" >> "$FAKE_REMOTE_DIR/log"
[ "$1" = --no-shell ] || { echo "salloc: error: want --no-shell" >&2; exit 1; }
case "$*" in *"-p ending"*) id=4343 ;; *"-p forged"*) id=4444 ;; *) id=4242 ;; esac
: > "$FAKE_REMOTE_DIR/job-$id"
echo "salloc: Pending job allocation $id" >&2
echo "salloc: Granted job allocation $id" >&2
echo "salloc: Nodes gpu17 are ready for job" >&2
"#;

const FAKE_SRUN: &str = r#"#!/bin/sh
echo "srun $*" >> "$FAKE_REMOTE_DIR/log"
id=${1#--jobid=}
if [ ! -e "$FAKE_REMOTE_DIR/job-$id" ] || [ -e "$FAKE_REMOTE_DIR/ended-$id" ]; then
  echo "srun: error: Unable to confirm allocation for job $id: Invalid job id specified" >&2; exit 1
fi
while [ $# -gt 0 ]; do case "$1" in --*) shift ;; *) break ;; esac; done
exec "$@"
"#;

const FAKE_SCANCEL: &str = r#"#!/bin/sh
echo "scancel $*" >> "$FAKE_REMOTE_DIR/log"
"#;

const FAKE_SQUEUE: &str = r#"#!/bin/sh
# A job runs until a test ends it by creating the file `ended-ID`.
for id; do :; done
if [ -e "$FAKE_REMOTE_DIR/ended-$id" ]; then
  echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1
fi
echo RUNNING
"#;

/// The folder of fake programs, first on this process's PATH (set once, so
/// every test in this binary sees the same PATH).
fn fakes() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        // Under target/, so repeated runs leave nothing in the system's temporary folder.
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("remote-fakes-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("fakes folder");
        for (name, text) in [
            ("ssh", FAKE_SSH),
            ("salloc", FAKE_SALLOC),
            ("srun", FAKE_SRUN),
            ("scancel", FAKE_SCANCEL),
            ("squeue", FAKE_SQUEUE),
        ] {
            let path = dir.join(name);
            std::fs::write(&path, text).expect("write fake");
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        }
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut dirs = vec![dir.clone()];
        dirs.extend(std::env::split_paths(&path));
        std::env::set_var("PATH", std::env::join_paths(dirs).expect("PATH"));
        std::env::set_var("FAKE_REMOTE_DIR", &dir);
        dir
    })
}

fn log() -> String {
    std::fs::read_to_string(fakes().join("log")).unwrap_or_default()
}

/// The stand-in worker, reached through the fake ssh on `host`.
fn stand_in_over_ssh(host: &str) -> WorkerCommand {
    fakes();
    let program = stand_in().program.display().to_string();
    WorkerCommand::remote(Remote::ssh(host).expect("host"), &program)
}

/// A whole check of the stand-in's cases `names` through the fake ssh to `host`.
fn check_over_ssh(host: &str, names: &[&str], case_timeout: Duration) -> CheckReport {
    let command = stand_in_over_ssh(host);
    let mut worker = None;
    run_check(&plan(names, case_timeout), &command, &mut worker, |_| {})
        .expect("the check completes")
}

#[test]
fn a_check_over_ssh_restarts_workers_as_new_sessions() {
    let command = stand_in_over_ssh("alice@node");
    let mut worker = None;
    let report = run_check(
        &plan(
            &["first", "crash", "hang", "last"],
            Duration::from_millis(700),
        ),
        &command,
        &mut worker,
        |_| {},
    )
    .expect("the check completes");
    let statuses = statuses(&report);
    use CaseStatus::*;
    // A hang on a good link is the kernel's: a timeout, as locally.
    assert_eq!(statuses, vec![Pass, Crash, Timeout, Pass]);
    assert_eq!(report.worker_restarts, 2);
    assert!(report.cases[1].diagnosis.contains("simulated abrupt exit"));
    worker.expect("live worker").shutdown();
    let sessions = log()
        .lines()
        .filter(|l| l.starts_with("ssh ") && l.contains("alice@node") && l.ends_with("__worker"))
        .count();
    assert!(sessions >= 3, "one ssh session per worker:\n{}", log());
}

#[test]
fn a_connection_that_dies_mid_check_is_reported_as_the_link() {
    let command = stand_in_over_ssh("drop@node");
    let mut worker = None;
    let mut restarts = Vec::new();
    let report = run_check(
        &plan(&["first", "hang", "last"], Duration::from_secs(8)),
        &command,
        &mut worker,
        |p| {
            if let Progress::WorkerRestarted { reason } = p {
                restarts.push(reason)
            }
        },
    )
    .expect("the check completes");
    let hang = &report.cases[1];
    assert_eq!(
        report.cases[0].status,
        CaseStatus::Pass,
        "{:?}",
        report
            .cases
            .iter()
            .map(|c| c.diagnosis.clone())
            .collect::<Vec<_>>()
    );
    assert_eq!(hang.status, CaseStatus::NotRun, "{}", hang.diagnosis);
    assert!(
        hang.diagnosis
            .contains("no connection to the GPU node (ssh drop@node)")
            && hang
                .diagnosis
                .contains("Timeout, server node not responding."),
        "{}",
        hang.diagnosis
    );
    assert!(!hang.diagnosis.contains("no result within"));
    // The next case got a new ssh session and ran.
    assert_eq!(
        report.cases[2].status,
        CaseStatus::Pass,
        "{}",
        report.cases[2].diagnosis
    );
    assert_eq!(report.worker_restarts, 1);
    // Incomplete: an environment error, not the student's failure.
    assert_eq!(Verdict::of(&report), Verdict::Error);
}

#[test]
fn a_worker_killed_by_a_signal_over_ssh_is_a_crash_not_the_link() {
    let report = check_over_ssh(
        "sig@node",
        &["first", "signal", "last"],
        Duration::from_secs(5),
    );
    let statuses = statuses(&report);
    assert_eq!(
        statuses,
        vec![CaseStatus::Pass, CaseStatus::Crash, CaseStatus::Pass]
    );
    let signal = &report.cases[1].diagnosis;
    assert!(signal.contains("ended by a signal"), "{signal}");
    assert!(
        !signal.contains("no connection to the GPU node"),
        "{signal}"
    );
}

#[test]
fn a_watchdog_on_an_unreachable_node_blames_the_link_not_the_kernel() {
    let report = check_over_ssh(
        "gone@node",
        &["first", "hang", "last"],
        Duration::from_millis(700),
    );
    let statuses = statuses(&report);
    assert_eq!(
        statuses,
        vec![CaseStatus::Pass, CaseStatus::NotRun, CaseStatus::NotRun]
    );
    for case in &report.cases[1..] {
        assert!(
            case.diagnosis.contains("Connection timed out"),
            "{}",
            case.diagnosis
        );
    }
}

#[test]
fn an_unreachable_host_fails_to_start_with_ssh_s_reason() {
    fakes();
    let command = WorkerCommand::remote(Remote::ssh("down@node").expect("host"), "flashprof");
    let err = WorkerHandle::spawn(&command, Duration::from_secs(10))
        .err()
        .expect("no worker");
    assert!(matches!(err, WorkerFailure::Connection { .. }), "{err}");
    assert!(err.to_string().contains("Connection refused"), "{err}");
}

#[test]
fn gpu_selection_travels_in_the_remote_command() {
    let command =
        stand_in_over_ssh("alice@node").on_gpu(flashprof::worker::GpuSelection::Ordinal(1));
    let handle = WorkerHandle::spawn(&command, Duration::from_secs(10)).expect("spawn");
    handle.shutdown();
    let travelled = log()
        .lines()
        .any(|line| line.contains(" env ") && line.contains(" FLASHPROF_GPU=1 "));
    assert!(travelled, "the GPU travels as `env VAR=...`:\n{}", log());
}

#[test]
fn a_slurm_session_keeps_one_allocation_and_releases_it() {
    fakes();
    let program = stand_in().program.display().to_string();
    let remote = Remote::slurm("--gres=gpu:1 -p gpu --time=01:00:00").expect("args");
    let command = WorkerCommand::remote(remote.clone(), &program);
    let mut worker = None;
    let report = run_check(
        &plan(&["first", "crash", "last"], Duration::from_secs(5)),
        &command,
        &mut worker,
        |_| {},
    )
    .expect("the check completes");
    let statuses = statuses(&report);
    assert_eq!(
        statuses,
        vec![CaseStatus::Pass, CaseStatus::Crash, CaseStatus::Pass]
    );
    assert_eq!(remote.place().as_deref(), Some("gpu17, job 4242"));
    let handle = worker.expect("live worker");
    assert_eq!(handle.place().as_deref(), Some("gpu17, job 4242"));
    handle.shutdown();
    drop(command);
    drop(remote);
    let log = log();
    let sallocs: Vec<&str> = log
        .lines()
        .filter(|l| l.starts_with("salloc ") && l.contains("-p gpu "))
        .collect();
    assert_eq!(sallocs.len(), 1, "one allocation per session:\n{log}");
    assert!(sallocs[0].contains("--gres=gpu:1 -p gpu --time=01:00:00"));
    assert!(
        log.lines()
            .filter(|l| l.starts_with("srun --jobid=4242"))
            .count()
            >= 2,
        "{log}"
    );
    assert!(log.lines().any(|l| l == "scancel 4242"), "{log}");
}

#[test]
fn an_ended_allocation_is_told_from_a_kernel_that_prints_slurm_s_words() {
    fakes();
    let program = stand_in().program.display().to_string();
    // While Slurm says the job runs, a worker that printed slurmstepd's words and exited is a crash.
    let running = WorkerCommand::remote(Remote::slurm("-p forged").expect("args"), &program);
    let mut worker = None;
    let report = run_check(
        &plan(&["timelimit", "last"], Duration::from_secs(5)),
        &running,
        &mut worker,
        |_| {},
    )
    .expect("the check completes");
    assert_eq!(report.cases[0].status, CaseStatus::Crash);
    assert_eq!(report.cases[1].status, CaseStatus::Pass);
    drop(worker);
}

#[test]
fn an_allocation_that_ends_mid_check_is_said_and_not_asked_again_in_it() {
    fakes();
    let program = stand_in().program.display().to_string();
    let remote = Remote::slurm("-p ending").expect("args");
    let command = WorkerCommand::remote(remote.clone(), &program);
    let mut worker = None;
    let report = run_check(
        &plan(&["first", "timelimit", "last"], Duration::from_secs(5)),
        &command,
        &mut worker,
        |p| {
            if let Progress::CaseFinished { index: 0, .. } = p {
                // Slurm ends the job after the first case (the stand-in then says what slurmstepd says).
                std::fs::write(fakes().join("ended-4343"), "").expect("end the job");
            }
        },
    )
    .expect("the check completes");
    let statuses = statuses(&report);
    assert_eq!(
        statuses,
        vec![CaseStatus::Pass, CaseStatus::NotRun, CaseStatus::NotRun]
    );
    for case in &report.cases[1..] {
        assert!(
            case.diagnosis.contains("no Slurm allocation") && case.diagnosis.contains("job 4343"),
            "{}",
            case.diagnosis
        );
    }
    assert_eq!(Verdict::of(&report), Verdict::Error);
    // Forgotten, so the next check asks again; not asked again within this one.
    assert_eq!(remote.place(), None);
    let asked = log()
        .lines()
        .filter(|l| l.starts_with("salloc ") && l.contains("-p ending"))
        .count();
    assert_eq!(asked, 1, "{}", log());
}

// The real binary, end to end.

fn node_env(command: &mut std::process::Command) {
    fakes();
    command.env("PATH", std::env::var_os("PATH").expect("PATH"));
    command.env("FAKE_REMOTE_DIR", fakes());
}

#[test]
fn check_over_gpu_host_compiles_on_the_node() {
    assert!(
        flashprof::gpu::libraries::preload_nvrtc(),
        "NVRTC (libnvrtc.so.13) cannot be loaded: run the tests through scripts/test.sh"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("prefill.cu");
    std::fs::write(
        &file,
        flashprof::lab::flash_prefill::FLASH_PREFILL.starter().text,
    )
    .expect("starter");
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_flashprof"));
    command
        .args(["check", "--gpu-host", "alice@node", "--gpu-host-flashprof"])
        .arg(env!("CARGO_BIN_EXE_flashprof"))
        .args(["--no-timing", "prefill.cu"])
        .current_dir(dir.path());
    node_env(&mut command);
    let output = command.output().expect("flashprof runs");
    let text = cli_support::text(&output);
    let code = output.status.code();
    // The node (here) compiled the file; with no GPU there, cases are not run (5).
    if code == Some(0) || code == Some(1) {
        return; // a GPU on this machine ran the cases: also end to end.
    }
    assert_eq!(code, Some(5), "{text}");
    assert!(text.contains("registers"), "{text}");
    let log = log();
    assert!(
        log.lines()
            .any(|l| l.contains("-- alice@node ") && l.ends_with("__worker")),
        "{log}"
    );
}

#[test]
fn a_node_with_another_protocol_is_refused_with_the_install_command() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("prefill.cu");
    std::fs::write(
        &file,
        flashprof::lab::flash_prefill::FLASH_PREFILL.starter().text,
    )
    .expect("starter");
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_flashprof"));
    command
        .args(["check", "--gpu-host", "alice@node", "--gpu-host-flashprof"])
        .arg(stand_in().program)
        .args(["--no-timing", "prefill.cu"])
        .env("FLASHPROF_STAND_IN_PROTOCOL", "1")
        .current_dir(dir.path());
    node_env(&mut command);
    let output = command.output().expect("flashprof runs");
    let text = cli_support::text(&output);
    assert_eq!(output.status.code(), Some(6), "{text}");
    assert!(text.contains("speaks protocol 1, this build"), "{text}");
    assert!(text.contains("scp "), "the install command: {text}");
    assert!(text.contains("alice@node:"), "{text}");
}

#[test]
fn a_missing_flashprof_on_the_node_says_how_to_install_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("prefill.cu");
    std::fs::write(
        &file,
        flashprof::lab::flash_prefill::FLASH_PREFILL.starter().text,
    )
    .expect("starter");
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_flashprof"));
    command
        .args([
            "check",
            "--gpu-host",
            "alice@node",
            "--no-timing",
            "prefill.cu",
        ])
        .env("FLASHPROF_REMOTE_FLASHPROF", "/nonexistent/flashprof")
        .current_dir(dir.path());
    node_env(&mut command);
    let output = command.output().expect("flashprof runs");
    let text = cli_support::text(&output);
    assert_eq!(output.status.code(), Some(6), "{text}");
    assert!(text.contains("no flashprof on the node"), "{text}");
    assert!(text.contains("alice@node:/nonexistent/flashprof"), "{text}");
}

#[test]
fn an_option_as_host_is_a_usage_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("prefill.cu"),
        flashprof::lab::flash_prefill::FLASH_PREFILL.starter().text,
    )
    .expect("starter");
    let output = cli_support::flashprof(
        &["check", "--gpu-host=-oProxyCommand=x", "prefill.cu"],
        dir.path(),
    );
    assert_eq!(
        output.status.code(),
        Some(2),
        "{}",
        cli_support::text(&output)
    );
}
