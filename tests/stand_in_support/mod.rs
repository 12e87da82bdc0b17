//! Shared by the tests that drive the STAND-IN worker (examples/stand_in_worker.rs).
#![allow(dead_code)] // each test binary uses its own subset

use std::path::PathBuf;
use std::time::Duration;

use flashprof::app::check::{run_check, CaseChoice, CheckPlan, RunOptions};
use flashprof::app::worker_handle::{WorkerCommand, WorkerHandle};
use flashprof::lab::definition::LabCase;
use flashprof::lab::flash_prefill::cases::CaseSpec;
use flashprof::outcome::CheckReport;
use flashprof::protocol::CaseStatus;

/// Brings the stand-in up to date once per test binary: a run of one test
/// file (`cargo test --test ssh`) builds no examples, and a stand-in left
/// from before a change of the protocol would be refused. After a plain
/// `cargo test` this finds nothing to do.
fn build_stand_in(profile_dir: &std::path::Path) {
    static BUILT: std::sync::Once = std::sync::Once::new();
    BUILT.call_once(|| {
        let mut cargo = std::process::Command::new(env!("CARGO"));
        cargo
            .args([
                "build",
                "--quiet",
                "--example",
                "stand_in_worker",
                "--manifest-path",
            ])
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"));
        if profile_dir
            .file_name()
            .is_some_and(|name| name == "release")
        {
            cargo.arg("--release");
        }
        let _ = cargo.status();
    });
}

/// The stand-in worker that `cargo test` builds as an example.
pub fn stand_in() -> WorkerCommand {
    // Integration tests live in target/<profile>/deps; examples in target/<profile>/examples.
    let exe = std::env::current_exe().expect("test executable path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target dir");
    let program: PathBuf = profile_dir.join("examples").join("stand_in_worker");
    build_stand_in(profile_dir);
    assert!(
        program.exists(),
        "{} is missing: `cargo test` builds examples, run the tests through cargo",
        program.display()
    );
    WorkerCommand {
        program,
        args: Vec::new(),
        env: Vec::new(),
        remote: None,
    }
}

/// A small generated case whose name tells the stand-in how to behave.
pub fn case(name: &str) -> LabCase {
    let spec = CaseSpec {
        name: name.into(),
        summary: format!("stand-in case {name}"),
        chunk: 4,
        prefix: 2,
        plant: Vec::new(),
        scale: Vec::new(),
        tensors: None,
    };
    flashprof::lab::typed::lab_case::<flashprof::lab::flash_prefill::FlashPrefill>(spec)
}

/// The options of a check of the stand-in's cases `names`, each under
/// `case_timeout`, on seed 1; no timing, no counters.
pub fn options(names: &[&str], case_timeout: Duration) -> RunOptions {
    RunOptions {
        seed: Some(1),
        case_timeout,
        cases: CaseChoice::These(names.iter().map(|n| case(n)).collect()),
        timing: None,
        ..RunOptions::default()
    }
}

/// The plan of `options` for `student.cu` holding `text`.
pub fn plan_of(options: RunOptions, text: &str) -> CheckPlan {
    options
        .plan(flashprof::lab::flash_prefill::FLASH_PREFILL)
        .expect("a valid plan")
        .of_source("student.cu".into(), text.into())
}

/// A check of the stand-in's cases `names`, each under `case_timeout`; no timing, no counters.
pub fn plan(names: &[&str], case_timeout: Duration) -> CheckPlan {
    plan_of(options(names, case_timeout), "// stand-in")
}

/// Each case's status, in order.
pub fn statuses(report: &CheckReport) -> Vec<CaseStatus> {
    report.cases.iter().map(|c| c.status).collect()
}

/// Runs `first`, `hang`, `last` through `command` with a short watchdog and
/// asserts what a hang on a working link is: the kernel's timeout, one
/// restart, the next case run. `worker` keeps the live worker.
pub fn assert_a_hang_times_out(command: &WorkerCommand, worker: &mut Option<WorkerHandle>) {
    let report = run_check(
        &plan(&["first", "hang", "last"], Duration::from_millis(1500)),
        command,
        worker,
        |_| {},
    )
    .expect("the check completes");
    assert_eq!(
        statuses(&report),
        vec![CaseStatus::Pass, CaseStatus::Timeout, CaseStatus::Pass],
        "{}",
        report.cases[1].diagnosis
    );
    assert_eq!(report.worker_restarts, 1);
}

/// A check of the flash reference, marked for the stand-in's line profile
/// (built with the real NVRTC, answered with recorded samples), that asks
/// for lines after two passing cases.
pub fn lines_plan() -> CheckPlan {
    lines_plan_of(lines_options(), "")
}

/// The options of [`lines_plan`].
pub fn lines_options() -> RunOptions {
    RunOptions {
        lines: true,
        step_timeout: Duration::from_secs(60),
        ..options(&["first", "last"], Duration::from_secs(30))
    }
}

/// The plan of `options` on the reference marked for the stand-in's line
/// profile, with `save` (a comment that makes a save of its own) after it.
pub fn lines_plan_of(options: RunOptions, save: &str) -> CheckPlan {
    let reference = include_str!("../../kernels/flash-prefill/reference.cu");
    options
        .plan(flashprof::lab::flash_prefill::FLASH_PREFILL)
        .expect("a valid plan")
        .of_source(
            "reference.cu".into(),
            format!("{reference}\n// stand-in-lines\n{save}"),
        )
}

/// Asserts what the stand-in's line profile of [`lines_plan`] is once
/// charged: its recorded samples on lines of the student's file, and the
/// starter's profile beside it, charged through the starter's own cubin.
pub fn assert_the_recorded_profile_arrived(report: &CheckReport) {
    use flashprof::grade::lines::LineKey;
    let profile = match &report.lines {
        Some(Ok(profile)) => profile,
        other => panic!("no profile: {other:?}"),
    };
    assert_eq!(profile.chip, "stand-in");
    assert_eq!(profile.total_samples, 6300);
    let sampled: u64 = profile.lines.iter().map(|l| l.samples).sum();
    assert_eq!(
        sampled, 6300,
        "every sample is charged: {:?}",
        profile.lines
    );
    // Some sample lands on a line of `text`: charged through its own table.
    let charged_to = |profile: &flashprof::grade::lines::LineProfile, text: &str| {
        let last = text.lines().count() as u32;
        profile
            .lines
            .iter()
            .any(|l| matches!(l.line, LineKey::Student(n) if (1..=last).contains(&n)))
    };
    assert!(
        charged_to(profile, lines_plan().source_text()),
        "charged to lines of the file: {:?}",
        profile.lines
    );
    let starter = match &profile.starter {
        Some(Ok(starter)) => starter,
        other => panic!("no starter profile: {other:?}"),
    };
    // The counts came in their own step and joined the samples: each of
    // the six recorded instructions executed 1,024 times.
    assert_eq!(profile.counts_missing, None);
    let executed: u64 = profile.lines.iter().map(|l| l.counts.executed).sum();
    assert_eq!(executed, 6 * 1024, "{:?}", profile.lines);
    assert_eq!(starter.total_samples, 6300);
    let starter_text = flashprof::lab::flash_prefill::FLASH_PREFILL.starter().text;
    assert!(
        charged_to(starter, starter_text),
        "the starter's lines are the starter file's: {:?}",
        starter.lines
    );
}
