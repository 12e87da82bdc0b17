//! Verdicts before the optimizer (docs/PERFORMANCE.md): a quick-first check
//! shows the quick build's verdicts as provisional, reruns the cases on the
//! optimized build made in a process beside the worker, reports where the
//! two differ, and stops a build whose text went stale.
//!
//! Driven through the STAND-IN worker (examples/stand_in_worker.rs), whose
//! quick and optimized images differ and whose cases say which image ran.

mod stand_in_support;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use flashprof::app::check::{
    run_check, run_check_unless_stale, CheckError, CheckPlan, LineWorker, RunOptions,
};
use flashprof::gpu::compile::{Build, QuickBuild};
use flashprof::outcome::Progress;
use flashprof::protocol::{CaseStatus, CompileProblemKind};
use stand_in_support::{options, plan_of, stand_in};

/// The stand-in's cases `names` on `source_text`, a quick build first.
fn plan(source_text: &str, names: &[&str]) -> CheckPlan {
    let options = RunOptions {
        quick_build: Some(QuickBuild::FastCompile),
        ..options(names, Duration::from_secs(5))
    };
    plan_of(options, source_text)
}

#[test]
fn provisional_verdicts_come_from_the_quick_build_and_final_ones_from_the_optimized() {
    let names = ["first", "flaky-build", "last"];
    let mut worker = None;
    let mut events = Vec::new();
    let report = run_check(
        &plan("// optimizer-takes-300ms", &names),
        &stand_in(),
        &mut worker,
        |p| events.push(p),
    )
    .expect("check ran");

    let quick_built = events
        .iter()
        .position(|p| matches!(p, Progress::QuickBuilt(c) if c.build == Build::Quick(QuickBuild::FastCompile)))
        .expect("the quick build is announced");
    let provisional: Vec<(usize, String, CaseStatus)> = events
        .iter()
        .filter_map(|p| match p {
            Progress::ProvisionalCase { index, outcome } => {
                Some((*index, outcome.diagnosis.clone(), outcome.status))
            }
            _ => None,
        })
        .collect();
    assert_eq!(provisional.len(), names.len());
    for (index, diagnosis, status) in &provisional {
        assert_eq!(diagnosis, "stand-in, quick image", "case {index}");
        assert_eq!(*status, CaseStatus::Pass, "case {index}");
    }
    let compiled = events
        .iter()
        .position(|p| matches!(p, Progress::Compiled(c) if c.build == Build::Optimized))
        .expect("the optimized build is announced");
    let last_provisional = events
        .iter()
        .rposition(|p| matches!(p, Progress::ProvisionalCase { .. }))
        .expect("provisional verdicts");
    assert!(quick_built < last_provisional && last_provisional < compiled);

    // The verdicts that count ran on the optimized image, loaded into the same worker.
    assert_eq!(report.compile.build, Build::Optimized);
    assert_eq!(report.worker_restarts, 0);
    for outcome in &report.cases {
        assert_eq!(
            outcome.diagnosis, "stand-in, optimized image",
            "{}",
            outcome.name
        );
    }
    assert_eq!(report.cases[1].status, CaseStatus::Fail);

    let quick = report
        .quick_build
        .as_ref()
        .expect("the quick build is reported");
    assert_eq!(quick.build, QuickBuild::FastCompile);
    assert_eq!((quick.passed, quick.ran), (3, 3));
    let (first, last) = (
        quick.first_verdict_ms.expect("a first"),
        quick.last_verdict_ms.expect("a last"),
    );
    assert!(first <= last && last <= report.phases.total_ms);
    assert_eq!(quick.differences.len(), 1, "{:?}", quick.differences);
    let difference = &quick.differences[0];
    assert_eq!(difference.case, "flaky-build");
    assert_eq!(
        (difference.quick, difference.optimized),
        (CaseStatus::Pass, CaseStatus::Fail)
    );
    if let Some(w) = worker {
        w.shutdown();
    }
}

#[test]
fn the_quick_build_stops_giving_verdicts_once_the_optimized_build_is_ready() {
    // Each case takes the stand-in half a second; its optimized build is
    // ready 300 ms after its builder has started (both builds come from a
    // builder without a GPU), well inside the three seconds the six cases
    // would take (a loaded machine included).
    let names = ["slow-1", "slow-2", "slow-3", "slow-4", "slow-5", "slow-6"];
    let mut worker = None;
    let mut events = Vec::new();
    let text = "// kernel, optimizer-takes-300ms";
    let report = run_check(&plan(text, &names), &stand_in(), &mut worker, |p| {
        events.push(p)
    })
    .expect("check ran");
    let provisional = events
        .iter()
        .filter(|p| matches!(p, Progress::ProvisionalCase { .. }))
        .count();
    assert!(
        (1..names.len()).contains(&provisional),
        "the quick pass should stop once the optimized build is ready, gave {provisional} verdicts"
    );
    let quick = report.quick_build.as_ref().expect("a quick build");
    assert_eq!((quick.passed, quick.ran), (provisional, provisional));
    assert!(quick.differences.is_empty(), "{:?}", quick.differences);
    assert!(report.cases.iter().all(|c| c.status == CaseStatus::Pass));
    if let Some(w) = worker {
        w.shutdown();
    }
}

#[test]
fn when_the_builder_fails_the_gpu_worker_compiles_nothing_and_the_report_says_why() {
    // The worker with a GPU cannot compile under the memory limit, so a
    // builder that fails is the grader's failure, never a compile in it.
    let mut worker = None;
    let report = run_check(
        &plan("// builder-fails", &["first", "last"]),
        &stand_in(),
        &mut worker,
        |_| {},
    )
    .expect("check ran");
    assert_eq!(report.compile.build, Build::Optimized);
    assert!(!report.compile.ok);
    let compile_problem = report.compile.problem.as_ref().expect("a problem");
    assert_eq!(compile_problem.kind, CompileProblemKind::CompilerFailed);
    assert!(
        compile_problem.message.contains("simulated failure"),
        "{}",
        compile_problem.message
    );
    assert!(report.cases.iter().all(|c| c.status == CaseStatus::NotRun));
    let quick = report.quick_build.as_ref().expect("a quick build");
    let problem = quick
        .builder_problem
        .as_deref()
        .expect("the builder's problem");
    assert!(problem.contains("simulated failure"), "{problem}");
    assert_eq!(report.worker_restarts, 0);
    if let Some(w) = worker {
        w.shutdown();
    }
}

#[test]
fn without_a_quick_build_there_is_one_optimized_build_and_no_provisional_verdict() {
    let no_quick = plan_of(options(&["first"], Duration::from_secs(5)), "// kernel");
    let mut worker = None;
    let mut events = Vec::new();
    let report =
        run_check(&no_quick, &stand_in(), &mut worker, |p| events.push(p)).expect("check ran");
    assert!(!events.iter().any(|p| matches!(
        p,
        Progress::QuickBuilt(_) | Progress::ProvisionalCase { .. }
    )));
    assert_eq!(report.quick_build, None);
    assert_eq!(report.cases[0].diagnosis, "stand-in, optimized image");
}

fn process_alive(pid: &str) -> bool {
    Path::new("/proc").join(pid).exists()
        && std::fs::read_to_string(Path::new("/proc").join(pid).join("stat"))
            .is_ok_and(|stat| !stat.contains(") Z "))
}

#[test]
fn a_stale_optimized_build_is_stopped_and_the_check_gives_way() {
    let marks = tempfile::tempdir().expect("temp dir");
    let mut command = stand_in();
    command
        .env
        .push(("FLASHPROF_STAND_IN_MARKS".into(), marks.path().into()));
    let stale = AtomicBool::new(false);
    let mut worker = None;
    let mut provisional = 0;
    let started = Instant::now();
    let result = run_check_unless_stale(
        &plan("// slow-optimizer", &["first", "second", "last"]),
        &command,
        &mut worker,
        &mut LineWorker::default(),
        &|| stale.load(Ordering::SeqCst),
        |p| {
            // A save arrives once the first verdict is on screen and the
            // optimized build is under way.
            if matches!(p, Progress::ProvisionalCase { .. }) {
                provisional += 1;
                let waited = Instant::now();
                while !marks.path().join("optimizing").exists()
                    && waited.elapsed() < Duration::from_secs(5)
                {
                    std::thread::sleep(Duration::from_millis(5));
                }
                stale.store(true, Ordering::SeqCst);
            }
        },
    );
    assert!(matches!(result, Err(CheckError::Superseded)), "{result:?}");
    assert_eq!(provisional, 1, "the quick pass stops at the next case");
    // The optimized build takes the stand-in 30 s; giving way must not wait for it.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let pid = std::fs::read_to_string(marks.path().join("optimizing")).expect("the build started");
    assert!(
        !process_alive(pid.trim()),
        "the stale builder {pid} is still running"
    );
    // The GPU worker itself is kept for the next check.
    assert!(worker.is_some());
    if let Some(w) = worker {
        w.shutdown();
    }
}

/// The real worker, without a GPU, as the builder beside the GPU worker runs.
fn real_builder() -> flashprof::app::worker_handle::WorkerHandle {
    let command = flashprof::app::worker_handle::WorkerCommand {
        program: env!("CARGO_BIN_EXE_flashprof").into(),
        args: vec!["__worker".into()],
        env: vec![(flashprof::worker::GPU_ENV.into(), "none".into())],
        remote: None,
    };
    flashprof::app::worker_handle::WorkerHandle::spawn(&command, Duration::from_secs(30))
        .expect("the worker starts")
}

fn compile(
    worker: &mut flashprof::app::worker_handle::WorkerHandle,
    build: Build,
    target_arch: Option<&str>,
) -> flashprof::protocol::Event {
    use flashprof::lab::flash_prefill::FLASH_PREFILL;
    use flashprof::protocol::{LabId, Request};
    worker
        .request(
            &Request::Compile {
                lab: LabId::of(FLASH_PREFILL),
                source_path: "kernels/flash-prefill/reference.cu".into(),
                source_text: include_str!("../kernels/flash-prefill/reference.cu").into(),
                build,
                target_arch: target_arch.map(str::to_owned),
            },
            Duration::from_secs(120),
        )
        .expect("a compile answer")
}

/// With the real NVRTC: a quick build is a real, different build of the
/// same file, the builder targets the architecture it is told, and an
/// architecture that is not one is refused before NVRTC sees it.
#[test]
fn the_real_worker_makes_quick_and_optimized_builds_for_the_named_gpu() {
    use flashprof::protocol::Event;
    let mut builder = real_builder();
    let Event::Compiled(optimized) = compile(&mut builder, Build::Optimized, Some("sm_80")) else {
        panic!("no compile answer");
    };
    assert_eq!(optimized.problem, None, "scripts/test.sh provides NVRTC");
    let Event::Compiled(quick) = compile(
        &mut builder,
        Build::Quick(QuickBuild::FastCompile),
        Some("sm_80"),
    ) else {
        panic!("no compile answer");
    };
    assert!(optimized.ok && quick.ok, "{optimized:?} {quick:?}");
    assert_eq!(quick.build, Build::Quick(QuickBuild::FastCompile));
    assert_ne!(
        optimized.image, quick.image,
        "the quick build must be another build"
    );
    let registers =
        |c: &flashprof::protocol::CompileOutcome| c.resources.as_ref().map(|r| r.registers);
    assert_ne!(registers(&optimized), registers(&quick));
    // A CUDA 13 cubin's ELF e_flags (offset 48) carry the SM version in
    // their second byte (0x50 for sm_80, 0x5a for sm_90).
    let sm = |image: &[u8]| image.get(49).copied();
    assert_eq!(sm(&optimized.image), Some(80));
    assert_eq!(sm(&quick.image), Some(80));

    match compile(&mut builder, Build::Optimized, Some("sm_90; touch /tmp/x")) {
        Event::Failed { message, fatal } => {
            assert!(!fatal);
            assert!(message.contains("not a GPU architecture"), "{message}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    builder.shutdown();
}
