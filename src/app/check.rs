//! One full check of a student file: compile, every hazard case, timing.
//!
//! This is the engine behind `flashprof check`, the TUI and the batch grader.
//! It drives a worker request by request, each under its own watchdog, and
//! reports every result through a callback as soon as it exists, so a screen
//! can fill in while the rest still runs. A case that hangs or faults costs
//! only itself: the worker is replaced, the compiled image reloaded, and the
//! remaining cases carry on.

use std::time::{Duration, Instant};

use super::peaks_cache;
use super::remote::Remote;
use super::side_build::{SideBuild, SideBuildEnd};
use super::worker_handle::{WorkerCommand, WorkerFailure, WorkerHandle};
use crate::facts::device::GpuProblem;
use crate::gpu::compile::{Build, QuickBuild};
use crate::lab::definition::{LabCase, LabRef, Problem};
use crate::lab::geometry::LaunchGeometry;
use crate::outcome::builds::{self, QuickBuildReport};
use crate::outcome::{CheckReport, CountersResult, PhaseTimes, Progress};
use crate::protocol::{
    CaseOutcome, CaseStatus, CompileOutcome, CompileProblem, CompileProblemKind, CounterTier,
    CountersUnavailableReport, Event, LabId, Request, TimingConfig, TimingOutcome,
};

/// How long a worker may take to start (CUDA initialisation included).
const WORKER_START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long NVRTC may take on one file.
const COMPILE_TIMEOUT: Duration = Duration::from_secs(60);
/// The waits before each new attempt to reach a remote worker whose link
/// dropped (docs/REMOTE.md): a blip of a few seconds costs no case.
const RECONNECT_BACKOFF: [Duration; 3] = [
    Duration::from_millis(500),
    Duration::from_secs(1),
    Duration::from_secs(2),
];

/// Everything one check needs to know.
#[derive(Debug, Clone)]
pub struct CheckPlan {
    pub lab: LabRef,
    pub source_path: String,
    pub source_text: String,
    pub cases: Vec<LabCase>,
    pub seed: u64,
    /// Watchdog for one case (two launches and the checks).
    pub case_timeout: Duration,
    pub timing: Option<TimingPlan>,
    /// Collect hardware counters (quick tier, then full) after the timing.
    pub counters: Option<CountersPlan>,
    /// Show verdicts from this quick build while the optimized build
    /// compiles beside it, then rerun the cases on the optimized one, whose
    /// verdicts count (docs/PERFORMANCE.md). `None`: one optimized build.
    pub quick_build: Option<QuickBuild>,
}

#[derive(Debug, Clone)]
pub struct CountersPlan {
    /// The case whose inputs are profiled (the timing shape, or a named case).
    pub case: LabCase,
    pub timeout: Duration,
    /// When not empty, one custom tier with these metrics replaces quick and full.
    pub custom_metrics: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct TimingPlan {
    /// The lab's timing shape, as a case.
    pub case: LabCase,
    pub config: TimingConfig,
    pub timeout: Duration,
}

/// Why a check could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("{0}")]
    Worker(#[from] WorkerFailure),
    /// A newer text arrived while the optimized build compiled; it was stopped.
    #[error("superseded by a newer save")]
    Superseded,
}

/// Runs a check, reusing `worker` when it is alive and leaving a live one in it.
pub fn run_check(
    plan: &CheckPlan,
    command: &WorkerCommand,
    worker: &mut Option<WorkerHandle>,
    progress: impl FnMut(Progress),
) -> Result<CheckReport, CheckError> {
    run_check_unless_stale(plan, command, worker, &|| false, progress)
}

/// [`run_check`], giving up with [`CheckError::Superseded`] when `stale()`
/// turns true while the optimized build of a quick-first check compiles.
pub fn run_check_unless_stale(
    plan: &CheckPlan,
    command: &WorkerCommand,
    worker: &mut Option<WorkerHandle>,
    stale: &dyn Fn() -> bool,
    mut progress: impl FnMut(Progress),
) -> Result<CheckReport, CheckError> {
    let started = Instant::now();
    // The sandboxed worker reads case tensors itself, so it must be let in.
    let command = &command
        .clone()
        .reading(plan.cases.iter().filter_map(|c| plan.lab.own_tensors(c)));
    let mut phases = PhaseTimes::default();
    // A kept worker may have ended since the last check: a remote one whose
    // connection dropped while idle. Reconnect rather than fail the compile.
    let mut ended_while_idle = false;
    if let Some(failure) = worker.as_mut().and_then(WorkerHandle::ended) {
        ended_while_idle = failure.is_transport();
        *worker = None;
        progress(Progress::WorkerRestarted {
            reason: format!("the worker ended between checks: {failure}"),
        });
    }
    if worker.is_none() {
        let spawned = Instant::now();
        let handle = if ended_while_idle {
            spawn_reconnecting(command)?
        } else {
            WorkerHandle::spawn(command, WORKER_START_TIMEOUT)?
        };
        phases.worker_start_ms = ms_since(spawned);
        progress(Progress::WorkerStarted {
            gpu: handle.gpu.clone(),
            start_ms: handle.start_ms,
            place: handle.place(),
        });
        *worker = Some(handle);
    }
    let gpu = worker.as_ref().map(|w| w.gpu.clone()).unwrap_or_else(|| {
        Err(GpuProblem::NoDevice {
            detail: "no worker".into(),
        })
    });

    let compile_started = Instant::now();
    let mut run = Run {
        command,
        worker,
        restarts: 0,
        image: Vec::new(),
        geometry: plan.lab.default_geometry(),
        lab: plan.lab,
        lost: None,
    };
    // A second Slurm job step could queue behind the worker's own, so over
    // Slurm the verdicts wait for the optimized build.
    let side_builds = !matches!(command.remote, Some(Remote::Slurm(_)));
    let quick_first = match (plan.quick_build, &gpu) {
        (Some(quick), Ok(device)) if side_builds => Some((quick, device.arch())),
        _ => None,
    };
    let (compile, quick) = match quick_first {
        Some((build, arch)) => {
            let mut first = run.quick_first(plan, build, &arch, started, stale, &mut progress)?;
            let optimized = std::mem::replace(&mut first.optimized, CompileOutcome::failed(None));
            (optimized, Some(first))
        }
        None => (
            run.compile(plan, Build::Optimized, None, &mut progress),
            None,
        ),
    };
    phases.compile_ms = ms_since(compile_started);
    if let Some((transport, added_ms)) = run.worker.as_ref().and_then(WorkerHandle::link) {
        progress(Progress::LinkMeasured {
            transport,
            added_ms,
        });
    }
    progress(Progress::Compiled(compile.clone()));
    run.image = compile.image.clone();
    if let Some(geometry) = compile.geometry {
        run.geometry = geometry;
    }

    let not_run_reason = if let Some(problem) = &compile.problem {
        Some(
            match problem.kind {
                CompileProblemKind::BadSource => "not run: the file cannot be used",
                CompileProblemKind::CompilerMissing => "not run: NVRTC is missing",
                CompileProblemKind::CompilerFailed => "not run: the compiler failed",
            }
            .to_string(),
        )
    } else if !compile.ok {
        Some("not run: the kernel did not compile".to_string())
    } else if let Err(problem) = &gpu {
        Some(format!("not run: {}", problem.describe()))
    } else {
        None
    };

    let cases_started = Instant::now();
    let mut cases = Vec::with_capacity(plan.cases.len());
    for (index, case) in plan.cases.iter().enumerate() {
        let outcome = match &not_run_reason {
            Some(reason) => not_run(plan.lab, case, reason.clone()),
            None => {
                progress(Progress::CaseStarted { index });
                run.case(case, plan, &mut progress)
            }
        };
        progress(Progress::CaseFinished {
            index,
            outcome: outcome.clone(),
        });
        cases.push(outcome);
    }
    phases.cases_ms = ms_since(cases_started);

    let faulted = cases
        .iter()
        .any(|c| matches!(c.status, CaseStatus::Timeout | CaseStatus::Crash));
    let (timing, timing_error) = match &plan.timing {
        Some(timing) if not_run_reason.is_none() && !faulted => {
            progress(Progress::TimingStarted);
            let timing_started = Instant::now();
            let result = run.time(timing, plan.seed);
            phases.timing_ms = ms_since(timing_started);
            progress(Progress::TimingFinished(result.clone()));
            match result {
                Ok(t) => (Some(t), None),
                Err(e) => (None, Some(e)),
            }
        }
        Some(_) if faulted => (None, Some("not timed: a case hung or crashed".into())),
        _ => (None, None),
    };
    let mut counters = Vec::new();
    if let (Some(plan_counters), None, false) = (&plan.counters, &not_run_reason, faulted) {
        let counters_started = Instant::now();
        let tiers: &[CounterTier] = if plan_counters.custom_metrics.is_empty() {
            &[CounterTier::Quick, CounterTier::Full]
        } else {
            &[CounterTier::Custom]
        };
        for &tier in tiers {
            progress(Progress::CountersStarted { tier });
            let result = run.counters(plan_counters, tier, plan.seed);
            progress(Progress::CountersFinished(result.clone()));
            let unavailable = result.is_err();
            counters.push(result);
            if unavailable {
                break;
            }
        }
        phases.counters_ms = ms_since(counters_started);
    }
    // A refused profile is as much a finding as a refused timed launch.
    let mut timing = timing;
    let refused = counters
        .iter()
        .filter_map(|c| c.as_ref().ok())
        .find_map(|c| c.student.refused.as_deref());
    if let (Some(t), Some(reason)) = (&mut timing, refused) {
        t.refuse_for_profile(reason);
    }
    phases.total_ms = ms_since(started);
    let quick_build = quick.map(|first| first.report(&cases));
    Ok(CheckReport {
        diagnosis: crate::outcome::check_diagnosis(&*plan.lab, &cases),
        lab: plan.lab.name().to_owned(),
        source_path: plan.source_path.clone(),
        seed: plan.seed,
        gpu,
        compile,
        cases,
        timing,
        timing_error,
        counters,
        worker_restarts: run.restarts,
        sanitizer: None,
        quick_build,
        phases,
    })
}

/// Runs a check in a worker of its own, shut down afterwards: nothing a
/// previous kernel did (a fault, a warm cache) can touch this one.
pub fn run_check_alone(
    plan: &CheckPlan,
    command: &WorkerCommand,
    progress: impl FnMut(Progress),
) -> Result<CheckReport, CheckError> {
    let mut worker = None;
    let report = run_check(plan, command, &mut worker, progress);
    if let Some(worker) = worker {
        worker.shutdown();
    }
    report
}

/// Starts a worker, trying again after each wait of [`RECONNECT_BACKOFF`]
/// while the link to its node fails; any other failure is final at once.
fn spawn_reconnecting(command: &WorkerCommand) -> Result<WorkerHandle, WorkerFailure> {
    let mut waits = RECONNECT_BACKOFF.iter();
    loop {
        match WorkerHandle::spawn(command, WORKER_START_TIMEOUT) {
            Err(failure @ WorkerFailure::Connection { .. }) => match waits.next() {
                Some(wait) => std::thread::sleep(*wait),
                None => return Err(failure),
            },
            other => return other,
        }
    }
}

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

fn not_run(lab: LabRef, case: &LabCase, reason: String) -> CaseOutcome {
    let shape = lab.problem(case).unwrap_or_else(|_| Problem::unknown());
    CaseOutcome {
        name: case.name.clone(),
        summary: case.summary.clone(),
        shape,
        status: CaseStatus::NotRun,
        comparison: None,
        integrity: None,
        diagnosis: reason,
        cause: None,
        experiments: Default::default(),
        elapsed_ms: 0.0,
        oracle_ms: 0.0,
    }
}

fn compile_request(plan: &CheckPlan, build: Build, target_arch: Option<String>) -> Request {
    Request::Compile {
        lab: LabId::of(plan.lab),
        source_path: plan.source_path.clone(),
        source_text: plan.source_text.clone(),
        build,
        target_arch,
    }
}

/// What the quick build of a quick-first check leaves for its report.
struct QuickFirst {
    build: QuickBuild,
    quick: CompileOutcome,
    /// One per case, in the plan's order (not run where the quick build did not get to it).
    provisional: Vec<CaseOutcome>,
    times: ProvisionalTimes,
    /// The build whose verdicts count, loaded into the worker when it compiled.
    optimized: CompileOutcome,
    /// Why the builder beside the worker gave no build (the worker made it).
    builder_problem: Option<String>,
}

/// When the quick build's verdicts arrived, from the start of the check.
#[derive(Default)]
struct ProvisionalTimes {
    first_ms: Option<f64>,
    last_ms: Option<f64>,
}

/// The plan's case indices, the least work first (a case whose size the
/// lab cannot tell goes last).
fn cheapest_first(plan: &CheckPlan) -> Vec<usize> {
    let work: Vec<f64> = plan
        .cases
        .iter()
        .map(|case| {
            plan.lab
                .problem(case)
                .map_or(f64::INFINITY, |problem| problem.work.flops)
        })
        .collect();
    let mut order: Vec<usize> = (0..plan.cases.len()).collect();
    order.sort_by(|&a, &b| work[a].total_cmp(&work[b]));
    order
}

impl QuickFirst {
    fn report(self, optimized_cases: &[CaseOutcome]) -> QuickBuildReport {
        let ran = self
            .provisional
            .iter()
            .filter(|c| c.status != CaseStatus::NotRun);
        QuickBuildReport {
            build: self.build,
            compile_ms: self.quick.compile_ms,
            first_verdict_ms: self.times.first_ms,
            last_verdict_ms: self.times.last_ms,
            passed: ran.clone().filter(|c| c.status == CaseStatus::Pass).count(),
            ran: ran.count(),
            differences: builds::differences(&self.provisional, optimized_cases),
            builder_problem: self.builder_problem,
        }
    }
}

/// The part of a check after compilation, with the means to replace a dead worker.
struct Run<'a> {
    lab: LabRef,
    command: &'a WorkerCommand,
    worker: &'a mut Option<WorkerHandle>,
    restarts: usize,
    image: Vec<u8>,
    geometry: LaunchGeometry,
    /// Why a remote worker cannot be reached again (docs/REMOTE.md): the
    /// remaining requests are not run rather than each waiting on the link.
    lost: Option<String>,
}

impl Run<'_> {
    /// Compiles the plan's text in the worker (which loads the result).
    fn compile(
        &mut self,
        plan: &CheckPlan,
        build: Build,
        target_arch: Option<String>,
        progress: &mut impl FnMut(Progress),
    ) -> CompileOutcome {
        let failed = |message: String| {
            CompileOutcome::failed(Some(CompileProblem {
                kind: CompileProblemKind::CompilerFailed,
                message,
            }))
        };
        let request = compile_request(plan, build, target_arch);
        let mut reconnected = false;
        loop {
            let Some(handle) = self.worker.as_mut() else {
                return failed("no worker".into());
            };
            return match handle.request(&request, COMPILE_TIMEOUT) {
                Ok(Event::Compiled(outcome)) => outcome,
                Ok(Event::Failed { message, fatal }) => {
                    if fatal {
                        *self.worker = None;
                    }
                    failed(message)
                }
                Ok(other) => failed(format!("unexpected answer to compile: {other:?}")),
                // The link dropped under the compile: once more, on a new session.
                Err(failure) if failure.is_transport() && !reconnected => {
                    *self.worker = None;
                    progress(Progress::WorkerRestarted {
                        reason: format!("the link dropped during the compile: {failure}"),
                    });
                    match spawn_reconnecting(self.command) {
                        Ok(handle) => {
                            *self.worker = Some(handle);
                            reconnected = true;
                            continue;
                        }
                        Err(e) => failed(format!("the compiler did not finish: {e}")),
                    }
                }
                Err(failure) => {
                    *self.worker = None;
                    failed(format!("the compiler did not finish: {failure}"))
                }
            };
        }
    }

    /// The quick build in the worker and its verdicts, shown as provisional,
    /// while the optimized build compiles in a process beside it; then the
    /// optimized image loaded into the worker. A builder that cannot answer
    /// leaves the optimized build to the worker, as in a plain check.
    fn quick_first(
        &mut self,
        plan: &CheckPlan,
        build: QuickBuild,
        arch: &str,
        started: Instant,
        stale: &dyn Fn() -> bool,
        progress: &mut impl FnMut(Progress),
    ) -> Result<QuickFirst, CheckError> {
        let mut side = SideBuild::start(
            self.command,
            compile_request(plan, Build::Optimized, Some(arch.to_owned())),
            COMPILE_TIMEOUT,
        );
        let quick = self.compile(plan, Build::Quick(build), None, progress);
        progress(Progress::QuickBuilt(quick.clone()));
        // Every case starts as not run; the quick build runs the cheapest
        // first (unoptimised code is slow on large cases), and stops as soon
        // as the optimized build is ready: its verdicts are the ones wanted.
        let mut provisional: Vec<CaseOutcome> = plan
            .cases
            .iter()
            .map(|case| {
                not_run(
                    plan.lab,
                    case,
                    "not run on the quick build: the optimized build was ready first".into(),
                )
            })
            .collect();
        let mut times = ProvisionalTimes::default();
        let mut ended = None;
        if quick.ok {
            self.image.clone_from(&quick.image);
            self.geometry = quick.geometry.unwrap_or(self.geometry);
            for index in cheapest_first(plan) {
                // A newer save makes this text stale: dropping `side` stops its build.
                if stale() {
                    return Err(CheckError::Superseded);
                }
                if let Some(end) = side.poll(Duration::ZERO) {
                    ended = Some(end);
                    break;
                }
                progress(Progress::CaseStarted { index });
                let outcome = self.case(&plan.cases[index], plan, progress);
                progress(Progress::ProvisionalCase {
                    index,
                    outcome: outcome.clone(),
                });
                provisional[index] = outcome;
                times.first_ms.get_or_insert_with(|| ms_since(started));
                times.last_ms = Some(ms_since(started));
            }
        }
        let end = match ended {
            Some(end) => end,
            None => side.finish(stale),
        };
        let mut builder_problem = None;
        let optimized = match end {
            SideBuildEnd::Cancelled => return Err(CheckError::Superseded),
            SideBuildEnd::Built(mut optimized) => {
                if optimized.ok {
                    self.load_into_worker(&mut optimized);
                }
                optimized
            }
            // A builder that fails costs only time: the worker builds it,
            // and the report says why the builder could not.
            SideBuildEnd::Failed(reason) => {
                builder_problem = Some(reason);
                if self.worker.is_none() {
                    *self.worker = Some(WorkerHandle::spawn(self.command, WORKER_START_TIMEOUT)?);
                }
                self.compile(plan, Build::Optimized, None, progress)
            }
        };
        Ok(QuickFirst {
            build,
            quick,
            provisional,
            times,
            optimized,
            builder_problem,
        })
    }

    /// Loads an image built elsewhere into the live worker. A worker that is
    /// gone, or that cannot load it, is replaced when the next case starts
    /// (which loads the image again and reports what went wrong).
    fn load_into_worker(&mut self, built: &mut CompileOutcome) {
        let Some(handle) = self.worker.as_mut() else {
            return;
        };
        let load = Request::Load {
            lab: LabId::of(self.lab),
            image: built.image.clone(),
            geometry: built.geometry.unwrap_or(self.geometry),
        };
        match handle.request(&load, COMPILE_TIMEOUT) {
            Ok(Event::Loaded { load_ms }) => built.load_ms = Some(load_ms),
            _ => *self.worker = None,
        }
    }

    /// A live worker with the student's kernel loaded, starting a new one if needed.
    fn live_worker(
        &mut self,
        progress: &mut impl FnMut(Progress),
        reason: &str,
    ) -> Result<&mut WorkerHandle, String> {
        if let Some(lost) = &self.lost {
            return Err(lost.clone());
        }
        if self.worker.is_none() {
            let mut handle = match spawn_reconnecting(self.command) {
                Ok(handle) => handle,
                Err(e) => {
                    if e.is_transport() {
                        self.lost = Some(e.to_string());
                    }
                    return Err(e.to_string());
                }
            };
            let load = Request::Load {
                lab: LabId::of(self.lab),
                image: self.image.clone(),
                geometry: self.geometry,
            };
            match handle.request(&load, COMPILE_TIMEOUT) {
                Ok(Event::Loaded { .. }) => {}
                Ok(other) => {
                    return Err(format!(
                        "the restarted worker could not load the kernel: {other:?}"
                    ))
                }
                Err(e) => {
                    return Err(format!(
                        "the restarted worker could not load the kernel: {e}"
                    ))
                }
            }
            self.restarts += 1;
            progress(Progress::WorkerRestarted {
                reason: reason.to_string(),
            });
            *self.worker = Some(handle);
        }
        self.worker.as_mut().ok_or_else(|| "no worker".to_string())
    }

    fn case(
        &mut self,
        case: &LabCase,
        plan: &CheckPlan,
        progress: &mut impl FnMut(Progress),
    ) -> CaseOutcome {
        let mut outcome = not_run(plan.lab, case, String::new());
        let handle = match self.live_worker(progress, "the previous case hung or crashed") {
            Ok(h) => h,
            Err(e) => {
                // A worker the link cannot reach is no fault of the kernel.
                if self.lost.is_some() {
                    outcome.diagnosis = format!("not run: {e}");
                } else {
                    outcome.status = CaseStatus::Crash;
                    outcome.diagnosis = format!("could not start a worker: {e}");
                }
                return outcome;
            }
        };
        let request = Request::RunCase {
            case: case.clone(),
            seed: plan.seed,
        };
        match handle.request(&request, plan.case_timeout) {
            Ok(Event::Case(result)) => {
                if result.status == CaseStatus::Crash {
                    // The worker exits after a sticky fault; make sure it is gone.
                    *self.worker = None;
                }
                result
            }
            Ok(Event::Failed { message, fatal }) => {
                if fatal {
                    *self.worker = None;
                }
                outcome.status = CaseStatus::Crash;
                outcome.diagnosis = message;
                outcome
            }
            Ok(other) => {
                outcome.status = CaseStatus::Crash;
                outcome.diagnosis = format!("unexpected answer: {other:?}");
                outcome
            }
            Err(WorkerFailure::Timeout(limit)) => {
                *self.worker = None;
                outcome.status = CaseStatus::Timeout;
                outcome.diagnosis = format!(
                    "no result within {:.1} s: the kernel probably never finishes for this shape (a loop bound or a barrier only some threads reach)",
                    limit.as_secs_f64()
                );
                outcome
            }
            // The link to the node failed, not the kernel: not run, and why.
            Err(failure) if failure.is_transport() => {
                *self.worker = None;
                if let WorkerFailure::AllocationEnded { .. } = failure {
                    // A new allocation may queue for hours: asked for by the next check, not this one.
                    self.lost = Some(failure.to_string());
                }
                outcome.diagnosis = format!("not run: {failure} (not the kernel's fault)");
                outcome
            }
            Err(failure) => {
                *self.worker = None;
                outcome.status = CaseStatus::Crash;
                outcome.diagnosis = format!("the worker died during this case: {failure}");
                outcome
            }
        }
    }

    fn counters(&mut self, plan: &CountersPlan, tier: CounterTier, seed: u64) -> CountersResult {
        let failed = |detail: String| {
            CountersUnavailableReport {
            reason: "the profiling run failed".into(),
            detail,
            fix: "Rerun; if it persists, run with --no-counters (grading and timing do not need them).".into(),
        }
        };
        let mut ignore = |_| {};
        let handle = self
            .live_worker(&mut ignore, "before counters")
            .map_err(failed)?;
        let gpu = handle.gpu.as_ref().ok().cloned();
        let known_peaks = gpu.as_ref().and_then(peaks_cache::load);
        let request = Request::Counters {
            case: plan.case.clone(),
            seed,
            tier,
            metrics: plan.custom_metrics.clone(),
            known_peaks: known_peaks.clone(),
        };
        match handle.request(&request, plan.timeout) {
            Ok(Event::Counters(mut result)) => {
                // Peaks the worker measured or calibrated now are filed for the next run.
                if let (Ok(outcome), Some(gpu)) = (&mut result, &gpu) {
                    if let Some(peaks) = outcome
                        .peaks
                        .as_ref()
                        .filter(|p| Some(*p) != known_peaks.as_ref())
                    {
                        if peaks_cache::store(gpu, peaks) {
                            if let Some(origin) = &mut outcome.peaks_origin {
                                origin.push_str(", cached");
                            }
                        }
                    }
                }
                result
            }
            Ok(Event::Failed { message, fatal }) => {
                if fatal {
                    *self.worker = None;
                }
                Err(failed(message))
            }
            Ok(other) => Err(failed(format!("unexpected answer to counters: {other:?}"))),
            Err(failure) => {
                *self.worker = None;
                Err(failed(failure.to_string()))
            }
        }
    }

    fn time(&mut self, plan: &TimingPlan, seed: u64) -> Result<TimingOutcome, String> {
        let mut ignore = |_| {};
        let handle = self.live_worker(&mut ignore, "before timing")?;
        let request = Request::Time {
            case: plan.case.clone(),
            seed,
            config: plan.config,
        };
        match handle.request(&request, plan.timeout) {
            Ok(Event::Timing(t)) => Ok(t),
            Ok(Event::Failed { message, fatal }) => {
                if fatal {
                    *self.worker = None;
                }
                Err(message)
            }
            Ok(other) => Err(format!("unexpected answer to timing: {other:?}")),
            Err(failure) => {
                *self.worker = None;
                Err(format!("timing failed: {failure}"))
            }
        }
    }
}
