//! The caller's side of the worker protocol against a stand-in worker
//! (examples/stand_in_worker.rs): watchdog timeouts, abrupt exits, sticky
//! faults and garbage output each cost one case, and the rest still run.

mod stand_in_support;
use stand_in_support::{
    assert_the_recorded_profile_arrived, case, lines_options, lines_plan, lines_plan_of, plan,
    stand_in,
};

use std::path::PathBuf;
use std::time::{Duration, Instant};

use flashprof::app::check::run_check;
use flashprof::app::worker_handle::{WorkerCommand, WorkerFailure, WorkerHandle};
use flashprof::outcome::Progress;
use flashprof::protocol::{CaseStatus, Request};

#[test]
fn every_fault_costs_one_case_and_the_rest_still_run() {
    let names = [
        "first", "hang", "second", "crash", "third", "sticky", "garbage", "last",
    ];
    let mut worker = None;
    let mut restarts_seen = 0;
    let started = Instant::now();
    let report = run_check(
        &plan(&names, Duration::from_millis(700)),
        &stand_in(),
        &mut worker,
        |p| {
            if let Progress::WorkerRestarted { .. } = p {
                restarts_seen += 1;
            }
        },
    )
    .expect("the check itself completes");
    let statuses: Vec<CaseStatus> = report.cases.iter().map(|c| c.status).collect();
    use CaseStatus::*;
    assert_eq!(
        statuses,
        vec![Pass, Timeout, Pass, Crash, Pass, Crash, Crash, Pass]
    );
    assert_eq!(
        report.worker_restarts, 4,
        "after hang, crash, sticky and garbage"
    );
    assert_eq!(restarts_seen, 4);
    // Restarted workers got the kernel again (the stand-in answers NotRun otherwise).
    assert!(report.cases.iter().all(|c| c.status != NotRun));
    assert!(report.cases[1].diagnosis.contains("no result within 0.7 s"));
    assert!(
        report.cases[3].diagnosis.contains("simulated abrupt exit"),
        "{}",
        report.cases[3].diagnosis
    );
    assert!(
        report.cases[6].diagnosis.contains("not a protocol message"),
        "{}",
        report.cases[6].diagnosis
    );
    assert!(started.elapsed() < Duration::from_secs(20));
    assert!(!report.all_passed());
    worker.expect("a live worker is handed back").shutdown();
}

#[test]
fn a_request_past_its_deadline_kills_the_worker() {
    let mut handle = WorkerHandle::spawn(&stand_in(), Duration::from_secs(10)).expect("spawn");
    assert_eq!(
        handle.gpu.as_ref().map(|g| g.name.clone()).ok(),
        Some("stand-in GPU".into())
    );
    let started = Instant::now();
    let result = handle.request(
        &Request::RunCase {
            case: (&case("hang")).into(),
            seed: 0,
        },
        Duration::from_millis(300),
    );
    assert!(
        matches!(result, Err(WorkerFailure::Timeout(_))),
        "{result:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[test]
fn a_missing_worker_program_is_a_clear_error() {
    let command = WorkerCommand {
        program: PathBuf::from("/nonexistent/flashprof-worker"),
        args: Vec::new(),
        env: Vec::new(),
        remote: None,
    };
    let err = WorkerHandle::spawn(&command, Duration::from_secs(1))
        .err()
        .expect("spawn fails");
    assert!(err.to_string().contains("/nonexistent/flashprof-worker"));
}

/// The line profile's whole path but the GPU: the stand-in builds the file
/// and the starter with the real NVRTC and answers recorded samples, which
/// a line worker of their own carries back and the caller charges through
/// the real line tables.
#[test]
fn a_line_profile_is_carried_back_and_charged_with_the_starter_s_beside_it() {
    assert!(
        flashprof::gpu::libraries::preload_nvrtc(),
        "NVRTC (libnvrtc.so.13) cannot be loaded: run the tests through scripts/test.sh"
    );
    let mut worker = None;
    let mut heat = None;
    let report = run_check(&lines_plan(), &stand_in(), &mut worker, |progress| {
        if let Progress::LinesSampled(sampled) = progress {
            heat = Some(sampled);
        }
    })
    .expect("a check");
    assert!(report.all_passed(), "{:?}", report.cases);
    assert_the_recorded_profile_arrived(&report);
    assert!(report.phases.lines_ms > 0.0);
    // The samples came first, charged, while the counts were being taken.
    let heat = heat.expect("the samples were shown before the counts");
    assert_eq!(heat.total_samples, 6300);
    assert_eq!(
        heat.counts_missing.as_deref(),
        Some(flashprof::app::check::COUNTS_COMING)
    );
    assert!(heat.lines.iter().all(|l| l.counts.executed == 0));
    let profile = report.lines.and_then(Result::ok).expect("the profile");
    assert_eq!(profile.heat_ms, heat.heat_ms);
    assert!(0.0 < heat.heat_ms && heat.heat_ms <= report.phases.lines_ms);
}

/// A check of the stand-in whose line profile's `slow` step (the
/// stand-in's variable naming it) takes 20 s, with a newer save arriving
/// at the progress `arrives_at` picks: the report of a check that did not
/// wait for the step.
fn with_a_newer_save(
    slow: &str,
    arrives_at: fn(&Progress) -> bool,
) -> flashprof::outcome::CheckReport {
    use flashprof::app::check::{run_check_unless_stale, LineWorker};
    use std::sync::atomic::{AtomicBool, Ordering};
    assert!(flashprof::gpu::libraries::preload_nvrtc(), "NVRTC");
    let mut command = stand_in();
    command.env.push((slow.into(), "20000".into()));
    let newer_save = AtomicBool::new(false);
    let (mut worker, mut lines) = (None, LineWorker::default());
    let started = Instant::now();
    let report = run_check_unless_stale(
        &lines_plan(),
        &command,
        &mut worker,
        &mut lines,
        &|| newer_save.load(Ordering::SeqCst),
        |progress| {
            if arrives_at(&progress) {
                newer_save.store(true, Ordering::SeqCst);
            }
        },
    )
    .expect("the check's verdicts");
    let waited = started.elapsed();
    lines.shutdown();
    if let Some(worker) = worker {
        worker.shutdown();
    }
    assert!(
        waited < Duration::from_secs(15),
        "the check waited {waited:?} for a step it no longer needed"
    );
    report
}

/// A newer save that arrives while the counts are being taken stops them:
/// the check returns at once with the samples' profile, saying why it has
/// no counts, and the starter is left for a save still wanted.
#[test]
fn a_newer_save_stops_the_counts_and_keeps_the_samples() {
    let report = with_a_newer_save("FLASHPROF_STAND_IN_SLOW_COUNTS_MS", |progress| {
        matches!(progress, Progress::LinesSampled(_))
    });
    let profile = match report.lines {
        Some(Ok(profile)) => profile,
        other => panic!("the samples' profile was lost: {other:?}"),
    };
    assert_eq!(profile.total_samples, 6300);
    let why = profile.counts_missing.expect("no counts");
    assert!(why.contains("stopped for a newer save"), "{why}");
    match profile.starter {
        Some(Err(why)) => assert!(why.contains("stopped for a newer save"), "{why}"),
        other => panic!("the starter was profiled for a stale save: {other:?}"),
    }
}

/// Saves in a row, as the TUI runs them: each profile in a worker of its
/// own, the next one readied in the background, the starter's kept.
#[test]
fn saves_in_a_row_each_get_a_profile_and_share_the_starter_s() {
    use flashprof::app::check::{run_check_unless_stale, LineWorker};
    assert!(flashprof::gpu::libraries::preload_nvrtc(), "NVRTC");
    let command = stand_in();
    let (mut worker, mut lines) = (None, LineWorker::for_saves());
    let mut starters = Vec::new();
    for save in 0..3 {
        let plan = lines_plan_of(lines_options(), &format!("// save {save}\n"));
        let report =
            run_check_unless_stale(&plan, &command, &mut worker, &mut lines, &|| false, |_| {})
                .expect("a check");
        assert_the_recorded_profile_arrived(&report);
        starters.push(report.lines.and_then(Result::ok).and_then(|p| p.starter));
    }
    lines.shutdown();
    if let Some(worker) = worker {
        worker.shutdown();
    }
    assert!(
        starters.windows(2).all(|w| w[0] == w[1]),
        "the starter's profile is kept"
    );
}

/// A check that asked for counters lets go of CUPTI's profiler in its own
/// worker before the line worker samples (PC Sampling failed to stop on the
/// H100 while it was held).
#[test]
fn a_check_with_counters_releases_its_profiler_before_the_line_profile() {
    assert!(flashprof::gpu::libraries::preload_nvrtc(), "NVRTC");
    let marks = tempfile::tempdir().expect("temp dir");
    let mut command = stand_in();
    command
        .env
        .push(("FLASHPROF_STAND_IN_MARKS".into(), marks.path().into()));
    let counted = flashprof::app::check::RunOptions {
        counters: flashprof::app::check::CountersChoice {
            on: true,
            ..Default::default()
        },
        ..lines_options()
    };
    let plan = lines_plan_of(counted, "");
    let mut worker = None;
    let report = run_check(&plan, &command, &mut worker, |_| {}).expect("a check");
    assert_the_recorded_profile_arrived(&report);
    assert!(
        marks.path().join("released").exists(),
        "no release was asked"
    );
    // Without counters there is nothing to release.
    std::fs::remove_file(marks.path().join("released")).expect("mark");
    let report = run_check(&lines_plan(), &command, &mut worker, |_| {}).expect("a check");
    assert_the_recorded_profile_arrived(&report);
    assert!(!marks.path().join("released").exists());
}

/// A newer save stops the line profile it arrives during: the check
/// returns at once, its verdicts kept, the profile said to be stopped.
#[test]
fn a_newer_save_stops_the_line_profile() {
    // The newer save arrives as the profile starts.
    let report = with_a_newer_save("FLASHPROF_STAND_IN_SLOW_LINES_MS", |progress| {
        matches!(progress, Progress::LinesStarted)
    });
    assert!(report.cases.iter().all(|c| c.status == CaseStatus::Pass));
    match &report.lines {
        Some(Err(why)) => assert!(why.contains("stopped for a newer save"), "{why}"),
        other => panic!("the profile was not stopped: {other:?}"),
    }
}
