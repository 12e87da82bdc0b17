//! One full check of a student file: compile, every hazard case, timing.
//!
//! This is the engine behind `flashprof check`, the TUI and the batch grader.
//! It drives a worker request by request, each under its own watchdog, and
//! reports every result through a callback as soon as it exists, so a screen
//! can fill in while the rest still runs. A case that hangs or faults costs
//! only itself: the worker is replaced, the compiled image reloaded, and the
//! remaining cases carry on.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

mod lines;

pub use lines::LinesPlan;

use super::peaks_cache;
use super::remote::Remote;
use super::side_build::{SideBuild, SideBuildEnd};
use super::worker_handle::{WorkerCommand, WorkerFailure, WorkerHandle};
use crate::facts::device::{DeviceInfo, GpuProblem};
use crate::gpu::compile::{Build, QuickBuild};
use crate::lab::definition::{LabCase, LabRef, Problem};
use crate::lab::geometry::LaunchGeometry;
use crate::outcome::builds::{self, QuickBuildReport};
use crate::outcome::{
    CheckReport, CheckStopped, CountersResult, LinkLoss, LinkLost, PhaseTimes, Progress,
};
use crate::protocol::{
    CaseOutcome, CaseStatus, CompileOutcome, CompileProblem, CompileProblemKind, CounterTier,
    CountersUnavailableReport, Event, LabId, Request, TimingConfig, TimingOutcome,
};
use crate::worker::sandbox::limit_from;

/// How long a worker may take to start (CUDA initialisation included).
const WORKER_START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long loading a built image into the worker may take (a module load
/// takes milliseconds; a dead link or driver is what this catches).
const LOAD_TIMEOUT: Duration = Duration::from_secs(60);
/// How long NVRTC may take on one file unless [`COMPILE_TIMEOUT_ENV`] says.
const DEFAULT_COMPILE_TIMEOUT: Duration = Duration::from_secs(60);
/// Seconds a compile may take: a grading host slower (or a class's kernels
/// larger) than this default wants more, a test of the limit less.
pub const COMPILE_TIMEOUT_ENV: &str = "FLASHPROF_COMPILE_TIMEOUT_S";

/// The compile time limit this process's environment asks for, read once.
pub fn compile_timeout() -> Duration {
    static LIMIT: OnceLock<Duration> = OnceLock::new();
    *LIMIT.get_or_init(|| compile_timeout_from(std::env::var_os(COMPILE_TIMEOUT_ENV).as_deref()))
}

/// The limit `text` (the variable's value) asks for: a typo keeps the
/// default and says so.
fn compile_timeout_from(text: Option<&std::ffi::OsStr>) -> Duration {
    Duration::from_secs(limit_from(
        COMPILE_TIMEOUT_ENV,
        text,
        "a whole number of seconds from 1 to 3600",
        1..=3600,
        DEFAULT_COMPILE_TIMEOUT.as_secs(),
    ))
}

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
    /// Profile the kernel line by line, last, in a worker of its own.
    pub lines: Option<LinesPlan>,
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

impl CheckPlan {
    /// This plan for another file: the same lab, cases, seed and steps.
    pub fn of_source(&self, source_path: String, source_text: String) -> Self {
        Self {
            source_path,
            source_text,
            ..self.clone()
        }
    }
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

impl CheckError {
    /// The stop as the screens take it: its words, and whether the link to
    /// a remote worker failed (what the TUI's reconnect hint follows).
    pub fn stopped(&self) -> CheckStopped {
        CheckStopped {
            message: self.to_string(),
            link: match self {
                Self::Worker(failure) => failure.link_loss(),
                Self::Superseded => None,
            },
        }
    }
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
///
/// The check runs in phases, each a method of [`Run`]: the worker, the
/// build(s), the cases, the timing, the counters; each phase's wall time is
/// measured here.
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
    let mut run = Run {
        command,
        worker,
        restarts: 0,
        image: Vec::new(),
        geometry: plan.lab.default_geometry(),
        lab: plan.lab,
        lost: None,
    };
    phases.worker_start_ms = run.start_worker(&mut progress)?;
    let gpu = run.gpu();

    let compile_started = Instant::now();
    let (compile, quick) = run.build(plan, &gpu, started, stale, &mut progress)?;
    phases.compile_ms = ms_since(compile_started);
    run.built(&compile, &mut progress);

    let cases_started = Instant::now();
    let blocked = NotRun::before_cases(&compile, &gpu);
    let (cases, link_lost) = run.run_cases(plan, blocked.as_ref(), &mut progress);
    phases.cases_ms = ms_since(cases_started);

    let ended = CasesEnded::of(blocked.is_some(), &cases);
    let (mut timing, timing_error) = run.run_timing(plan, ended, &mut phases, &mut progress);
    let counters = run.run_counters(plan, ended, &mut phases, &mut progress);
    // A refused profile is as much a finding as a refused timed launch.
    let refused = counters
        .iter()
        .filter_map(|c| c.as_ref().ok())
        .find_map(|c| c.student.refused.as_deref());
    if let (Some(t), Some(reason)) = (&mut timing, refused) {
        t.refuse_for_profile(reason);
    }
    let lines = plan
        .lines
        .as_ref()
        .filter(|_| ended == CasesEnded::Ran)
        .map(|lines_plan| {
            let build = lines::LoadedBuild {
                lab: plan.lab,
                image: &run.image,
                geometry: run.geometry,
            };
            lines::profile_lines(plan, lines_plan, command, &build)
        });
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
        lines,
        worker_restarts: run.restarts,
        sanitizer: None,
        quick_build,
        phases,
        link_lost,
    })
}

/// Why no case of a check runs, decided once its build is known.
#[derive(Debug, Clone, PartialEq)]
enum NotRun {
    /// The build stopped before the compiler said anything about the kernel.
    Compile(CompileProblemKind),
    /// The compiler reported errors.
    DidNotCompile,
    NoGpu(GpuProblem),
}

impl NotRun {
    fn before_cases(
        compile: &CompileOutcome,
        gpu: &Result<DeviceInfo, GpuProblem>,
    ) -> Option<Self> {
        if let Some(problem) = &compile.problem {
            Some(Self::Compile(problem.kind))
        } else if !compile.ok {
            Some(Self::DidNotCompile)
        } else {
            gpu.as_ref().err().cloned().map(Self::NoGpu)
        }
    }
}

impl std::fmt::Display for NotRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Compile(CompileProblemKind::BadSource) => {
                f.write_str("not run: the file cannot be used")
            }
            Self::Compile(CompileProblemKind::CompilerMissing) => {
                f.write_str("not run: NVRTC is missing")
            }
            Self::Compile(CompileProblemKind::CompilerFailed) => {
                f.write_str("not run: the compiler failed")
            }
            Self::Compile(CompileProblemKind::OverLimit) => {
                f.write_str("not run: the compile went past its limit")
            }
            Self::DidNotCompile => f.write_str("not run: the kernel did not compile"),
            Self::NoGpu(problem) => write!(f, "not run: {}", problem.describe()),
        }
    }
}

/// How the cases ended, which decides whether timing and counters follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CasesEnded {
    /// Every case got its verdict (pass or fail): the kernel can be measured.
    Ran,
    /// None ran (see [`NotRun`]): nothing to measure.
    NotRun,
    /// A case hung or crashed: measuring it would only hang or crash again.
    Faulted,
}

impl CasesEnded {
    fn of(blocked: bool, cases: &[CaseOutcome]) -> Self {
        if blocked {
            Self::NotRun
        } else if cases
            .iter()
            .any(|c| matches!(c.status, CaseStatus::Timeout | CaseStatus::Crash))
        {
            Self::Faulted
        } else {
            Self::Ran
        }
    }
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

/// A compile with no answer that is the grader's failure, not the submission's.
fn compiler_failed(message: String) -> CompileOutcome {
    CompileOutcome::failed(Some(CompileProblem {
        kind: CompileProblemKind::CompilerFailed,
        message,
    }))
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
    lost: Option<LinkLost>,
}

/// What a request got instead of the answer it wanted.
#[derive(Debug)]
enum Unanswered {
    /// There was no worker to ask.
    NoWorker,
    /// The worker answered something else: its own `Failed`, or another event.
    Answered(Box<Event>),
    /// No answer came (a hang, a death, a failed link); the worker was dropped.
    Lost(WorkerFailure),
}

impl Unanswered {
    /// Its words for a report: the worker's own message, `unexpected` and
    /// what came instead, or why nothing came (after `lost`, when given).
    fn message(self, unexpected: &str, lost: Option<&str>) -> String {
        match (self, lost) {
            (Self::Answered(event), _) => match *event {
                Event::Failed { message, .. } => message,
                other => format!("{unexpected}: {other:?}"),
            },
            (Self::Lost(failure), Some(lost)) => format!("{lost}: {failure}"),
            (other, _) => other.to_string(),
        }
    }
}

impl std::fmt::Display for Unanswered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoWorker => f.write_str("no worker"),
            Self::Answered(event) => write!(f, "{event:?}"),
            Self::Lost(failure) => write!(f, "{failure}"),
        }
    }
}

/// The answer to a `Load`: how long it took.
fn loaded(event: Event) -> Result<f64, Box<Event>> {
    match event {
        Event::Loaded { load_ms } => Ok(load_ms),
        other => Err(Box::new(other)),
    }
}

impl Run<'_> {
    /// Sends `request` to the worker and waits at most `timeout` for the
    /// answer `wanted` takes. The one place that decides when a worker is
    /// dropped: after a fatal `Failed`, and after any request that got no
    /// answer (the worker is stopped, gone, or out of reach).
    fn ask<T>(
        &mut self,
        request: &Request,
        timeout: Duration,
        wanted: impl FnOnce(Event) -> Result<T, Box<Event>>,
    ) -> Result<T, Unanswered> {
        let Some(handle) = self.worker.as_mut() else {
            return Err(Unanswered::NoWorker);
        };
        match handle.request(request, timeout) {
            Ok(Event::Failed { message, fatal }) => {
                if fatal {
                    *self.worker = None;
                }
                Err(Unanswered::Answered(Box::new(Event::Failed {
                    message,
                    fatal,
                })))
            }
            Ok(event) => wanted(event).map_err(Unanswered::Answered),
            Err(failure) => {
                *self.worker = None;
                Err(Unanswered::Lost(failure))
            }
        }
    }

    /// The worker phase: a kept worker that ended since the last check is
    /// let go, and a new one started where none is alive; how long the start
    /// took (0 for a kept worker).
    fn start_worker(&mut self, progress: &mut impl FnMut(Progress)) -> Result<f64, CheckError> {
        // A kept worker may have ended since the last check: a remote one whose
        // connection dropped while idle. Reconnect rather than fail the compile.
        let mut ended_while_idle = false;
        if let Some(failure) = self.worker.as_mut().and_then(WorkerHandle::ended) {
            ended_while_idle = failure.is_transport();
            *self.worker = None;
            progress(Progress::WorkerRestarted {
                reason: format!("the worker ended between checks: {failure}"),
            });
        }
        if self.worker.is_some() {
            return Ok(0.0);
        }
        let spawned = Instant::now();
        let handle = if ended_while_idle {
            spawn_reconnecting(self.command)?
        } else {
            WorkerHandle::spawn(self.command, WORKER_START_TIMEOUT)?
        };
        let start_ms = ms_since(spawned);
        progress(Progress::WorkerStarted {
            gpu: handle.gpu.clone(),
            start_ms: handle.start_ms,
            place: handle.place(),
        });
        *self.worker = Some(handle);
        Ok(start_ms)
    }

    /// The GPU the worker found.
    fn gpu(&self) -> Result<DeviceInfo, GpuProblem> {
        self.worker
            .as_ref()
            .map(|w| w.gpu.clone())
            .unwrap_or_else(|| {
                Err(GpuProblem::NoDevice {
                    detail: "no worker".into(),
                })
            })
    }

    /// The compile phase: the optimized build, after a quick build's
    /// provisional verdicts where the plan asks for one and the worker has a
    /// GPU to run them on.
    fn build(
        &mut self,
        plan: &CheckPlan,
        gpu: &Result<DeviceInfo, GpuProblem>,
        started: Instant,
        stale: &dyn Fn() -> bool,
        progress: &mut impl FnMut(Progress),
    ) -> Result<(CompileOutcome, Option<QuickFirst>), CheckError> {
        // A second Slurm job step could queue behind the worker's own, so over
        // Slurm the verdicts wait for the optimized build.
        let side_builds = !matches!(self.command.remote, Some(Remote::Slurm(_)));
        match (plan.quick_build, gpu) {
            (Some(quick), Ok(device)) if side_builds => {
                let mut first =
                    self.quick_first(plan, quick, &device.arch(), started, stale, progress)?;
                let optimized =
                    std::mem::replace(&mut first.optimized, CompileOutcome::failed(None));
                Ok((optimized, Some(first)))
            }
            _ => Ok((self.compile(plan, Build::Optimized, None, progress), None)),
        }
    }

    /// Says what the build that counts is, and keeps its image and geometry
    /// for a worker that must be replaced.
    fn built(&mut self, compile: &CompileOutcome, progress: &mut impl FnMut(Progress)) {
        if let Some((transport, added_ms)) = self.worker.as_ref().and_then(WorkerHandle::link) {
            progress(Progress::LinkMeasured {
                transport,
                added_ms,
            });
        }
        progress(Progress::Compiled(compile.clone()));
        self.image.clone_from(&compile.image);
        if let Some(geometry) = compile.geometry {
            self.geometry = geometry;
        }
    }

    /// The cases phase: every case of the plan in order, or each marked not
    /// run when `blocked`; with the first case a failed link left unrun.
    fn run_cases(
        &mut self,
        plan: &CheckPlan,
        blocked: Option<&NotRun>,
        progress: &mut impl FnMut(Progress),
    ) -> (Vec<CaseOutcome>, Option<LinkLost>) {
        let mut link_lost = None;
        let mut cases = Vec::with_capacity(plan.cases.len());
        for (index, case) in plan.cases.iter().enumerate() {
            let outcome = match blocked {
                Some(reason) => not_run(plan.lab, case, reason.to_string()),
                None => {
                    progress(Progress::CaseStarted { index });
                    let (outcome, loss) = self.case(case, plan, progress);
                    if let (Some(loss), None) = (loss, &link_lost) {
                        link_lost = Some(LinkLost {
                            loss,
                            message: outcome.diagnosis.clone(),
                        });
                    }
                    outcome
                }
            };
            progress(Progress::CaseFinished {
                index,
                outcome: outcome.clone(),
            });
            cases.push(outcome);
        }
        (cases, link_lost)
    }

    /// The timing phase: only a kernel whose cases all ran is timed.
    fn run_timing(
        &mut self,
        plan: &CheckPlan,
        ended: CasesEnded,
        phases: &mut PhaseTimes,
        progress: &mut impl FnMut(Progress),
    ) -> (Option<TimingOutcome>, Option<String>) {
        let Some(timing) = &plan.timing else {
            return (None, None);
        };
        match ended {
            CasesEnded::NotRun => (None, None),
            CasesEnded::Faulted => (None, Some("not timed: a case hung or crashed".into())),
            CasesEnded::Ran => {
                progress(Progress::TimingStarted);
                let timing_started = Instant::now();
                let result = self.time(timing, plan.seed);
                phases.timing_ms = ms_since(timing_started);
                progress(Progress::TimingFinished(result.clone()));
                match result {
                    Ok(t) => (Some(t), None),
                    Err(e) => (None, Some(e)),
                }
            }
        }
    }

    /// The counters phase: the quick tier then the full one (or the custom
    /// metrics alone), stopping at the first tier that is unavailable.
    fn run_counters(
        &mut self,
        plan: &CheckPlan,
        ended: CasesEnded,
        phases: &mut PhaseTimes,
        progress: &mut impl FnMut(Progress),
    ) -> Vec<CountersResult> {
        let mut counters = Vec::new();
        let Some(plan_counters) = plan.counters.as_ref().filter(|_| ended == CasesEnded::Ran)
        else {
            return counters;
        };
        let counters_started = Instant::now();
        let tiers: &[CounterTier] = if plan_counters.custom_metrics.is_empty() {
            &[CounterTier::Quick, CounterTier::Full]
        } else {
            &[CounterTier::Custom]
        };
        for &tier in tiers {
            progress(Progress::CountersStarted { tier });
            let result = self.counters(plan_counters, tier, plan.seed);
            progress(Progress::CountersFinished(result.clone()));
            let unavailable = result.is_err();
            counters.push(result);
            if unavailable {
                break;
            }
        }
        phases.counters_ms = ms_since(counters_started);
        counters
    }

    /// Compiles the plan's text under the compile memory limit, and loads
    /// the result into the worker. A worker with a GPU cannot have that
    /// limit (its CUDA context reserves address space of about twice the
    /// GPU's memory), so it gets the image from a builder without a GPU,
    /// started for this compile as the optimized build beside a quick one
    /// is; a worker without one compiles itself, under its own limit.
    fn compile(
        &mut self,
        plan: &CheckPlan,
        build: Build,
        target_arch: Option<String>,
        progress: &mut impl FnMut(Progress),
    ) -> CompileOutcome {
        let gpu_arch = self
            .worker
            .as_ref()
            .and_then(|w| w.gpu.as_ref().ok())
            .map(DeviceInfo::arch);
        let Some(arch) = gpu_arch else {
            return self.compile_in_worker(plan, build, target_arch, progress);
        };
        let request = compile_request(plan, build, Some(arch));
        match SideBuild::start(self.command, request, compile_timeout()).finish(&|| false) {
            SideBuildEnd::Built(mut built) => {
                if built.ok {
                    self.load_into_worker(&mut built, progress);
                }
                built
            }
            SideBuildEnd::Failed(reason) => {
                compiler_failed(format!("the builder did not compile: {reason}"))
            }
            SideBuildEnd::Cancelled => compiler_failed("the build was cancelled".into()),
        }
    }

    /// Compiles the plan's text in the worker, which has no GPU: its own
    /// memory limit holds, and a compile past a limit is the submission's.
    fn compile_in_worker(
        &mut self,
        plan: &CheckPlan,
        build: Build,
        target_arch: Option<String>,
        progress: &mut impl FnMut(Progress),
    ) -> CompileOutcome {
        let memory_mb = self
            .worker
            .as_ref()
            .and_then(|w| w.sandbox.as_ref())
            .and_then(|s| s.compile_memory_mb);
        let request = compile_request(plan, build, target_arch);
        let compiled = |event| match event {
            Event::Compiled(outcome) => Ok(outcome),
            other => Err(Box::new(other)),
        };
        match self.ask(&request, compile_timeout(), compiled) {
            Ok(outcome) => outcome,
            Err(Unanswered::Lost(failure)) if failure.compile_over_limit(memory_mb).is_some() => {
                CompileOutcome::failed(failure.compile_over_limit(memory_mb))
            }
            // The link dropped under the compile: once more, on a new session.
            Err(Unanswered::Lost(failure)) if failure.is_transport() => {
                progress(Progress::WorkerRestarted {
                    reason: format!("the link dropped during the compile: {failure}"),
                });
                match spawn_reconnecting(self.command) {
                    Ok(handle) => {
                        *self.worker = Some(handle);
                        self.ask(&request, compile_timeout(), compiled)
                            .unwrap_or_else(|unanswered| {
                                compiler_failed(unanswered.message(
                                    "unexpected answer to compile",
                                    Some("the compiler did not finish"),
                                ))
                            })
                    }
                    Err(e) => compiler_failed(format!("the compiler did not finish: {e}")),
                }
            }
            Err(unanswered) => compiler_failed(unanswered.message(
                "unexpected answer to compile",
                Some("the compiler did not finish"),
            )),
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
            compile_timeout(),
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
                // A link lost here shows in the optimized build's cases, if anywhere.
                let (outcome, _) = self.case(&plan.cases[index], plan, progress);
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
                    self.load_into_worker(&mut optimized, progress);
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
    ///
    /// A link that dropped while the worker sat idle (the builder had a new
    /// session of its own) is said as the link's, as a compile on the
    /// worker would have said it, and the load is tried once more on a new
    /// session.
    fn load_into_worker(
        &mut self,
        built: &mut CompileOutcome,
        progress: &mut impl FnMut(Progress),
    ) {
        let load = Request::Load {
            lab: LabId::of(self.lab),
            image: built.image.clone(),
            geometry: built.geometry.unwrap_or(self.geometry),
        };
        match self.ask(&load, LOAD_TIMEOUT, loaded) {
            Ok(load_ms) => built.load_ms = Some(load_ms),
            Err(Unanswered::Lost(failure)) if failure.is_transport() => {
                progress(Progress::WorkerRestarted {
                    reason: format!("the link dropped before the kernel was loaded: {failure}"),
                });
                if let Ok(handle) = spawn_reconnecting(self.command) {
                    *self.worker = Some(handle);
                    built.load_ms = self.ask(&load, LOAD_TIMEOUT, loaded).ok();
                }
            }
            Err(_) => *self.worker = None,
        }
    }

    /// A live worker with the student's kernel loaded, starting a new one if needed.
    fn live_worker(
        &mut self,
        progress: &mut impl FnMut(Progress),
        reason: &str,
    ) -> Result<(), String> {
        if let Some(lost) = &self.lost {
            return Err(lost.message.clone());
        }
        if self.worker.is_some() {
            return Ok(());
        }
        let handle = spawn_reconnecting(self.command).map_err(|e| {
            if let Some(loss) = e.link_loss() {
                self.lost = Some(LinkLost {
                    loss,
                    message: e.to_string(),
                });
            }
            e.to_string()
        })?;
        *self.worker = Some(handle);
        let load = Request::Load {
            lab: LabId::of(self.lab),
            image: self.image.clone(),
            geometry: self.geometry,
        };
        if let Err(unanswered) = self.ask(&load, LOAD_TIMEOUT, loaded) {
            *self.worker = None;
            return Err(format!(
                "the restarted worker could not load the kernel: {unanswered}"
            ));
        }
        self.restarts += 1;
        progress(Progress::WorkerRestarted {
            reason: reason.to_string(),
        });
        Ok(())
    }

    /// One case, and how the link failed when a failed link left it unrun.
    fn case(
        &mut self,
        case: &LabCase,
        plan: &CheckPlan,
        progress: &mut impl FnMut(Progress),
    ) -> (CaseOutcome, Option<LinkLoss>) {
        let mut outcome = not_run(plan.lab, case, String::new());
        if let Err(e) = self.live_worker(progress, "the previous case hung or crashed") {
            // A worker the link cannot reach is no fault of the kernel.
            if let Some(lost) = &self.lost {
                outcome.diagnosis = format!("not run: {e}");
                return (outcome, Some(lost.loss));
            }
            outcome.status = CaseStatus::Crash;
            outcome.diagnosis = format!("could not start a worker: {e}");
            return (outcome, None);
        }
        let request = Request::RunCase {
            case: case.clone(),
            seed: plan.seed,
        };
        let answered = |event| match event {
            Event::Case(result) => Ok(result),
            other => Err(Box::new(other)),
        };
        match self.ask(&request, plan.case_timeout, answered) {
            Ok(result) => {
                if result.status == CaseStatus::Crash {
                    // The worker exits after a sticky fault; make sure it is gone.
                    *self.worker = None;
                }
                return (result, None);
            }
            Err(Unanswered::Lost(WorkerFailure::Timeout(limit))) => {
                outcome.status = CaseStatus::Timeout;
                outcome.diagnosis = format!(
                    "no result within {:.1} s: the kernel probably never finishes for this shape (a loop bound or a barrier only some threads reach)",
                    limit.as_secs_f64()
                );
            }
            // The link to the node failed, not the kernel: not run, and why.
            Err(Unanswered::Lost(failure)) if failure.is_transport() => {
                let loss = failure.link_loss();
                if let (WorkerFailure::AllocationEnded { .. }, Some(loss)) = (&failure, loss) {
                    // A new allocation may queue for hours: asked for by the next check, not this one.
                    self.lost = Some(LinkLost {
                        loss,
                        message: failure.to_string(),
                    });
                }
                outcome.diagnosis = format!("not run: {failure} (not the kernel's fault)");
                return (outcome, loss);
            }
            Err(Unanswered::Lost(failure)) => {
                outcome.status = CaseStatus::Crash;
                outcome.diagnosis = format!("the worker died during this case: {failure}");
            }
            Err(unanswered) => {
                outcome.status = CaseStatus::Crash;
                outcome.diagnosis = unanswered.message("unexpected answer", None);
            }
        }
        (outcome, None)
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
        self.live_worker(&mut ignore, "before counters")
            .map_err(failed)?;
        let gpu = self
            .worker
            .as_ref()
            .and_then(|handle| handle.gpu.as_ref().ok().cloned());
        let known_peaks = gpu.as_ref().and_then(peaks_cache::load);
        let request = Request::Counters {
            case: plan.case.clone(),
            seed,
            tier,
            metrics: plan.custom_metrics.clone(),
            known_peaks: known_peaks.clone(),
        };
        let answered = |event| match event {
            Event::Counters(result) => Ok(result),
            other => Err(Box::new(other)),
        };
        let mut result = self
            .ask(&request, plan.timeout, answered)
            .map_err(|unanswered| {
                failed(unanswered.message("unexpected answer to counters", None))
            })?;
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

    fn time(&mut self, plan: &TimingPlan, seed: u64) -> Result<TimingOutcome, String> {
        let mut ignore = |_| {};
        self.live_worker(&mut ignore, "before timing")?;
        let request = Request::Time {
            case: plan.case.clone(),
            seed,
            config: plan.config,
        };
        let answered = |event| match event {
            Event::Timing(timing) => Ok(timing),
            other => Err(Box::new(other)),
        };
        self.ask(&request, plan.timeout, answered)
            .map_err(|unanswered| {
                unanswered.message("unexpected answer to timing", Some("timing failed"))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_compile_limit_is_a_minute_unless_a_sane_number_of_seconds_is_asked_for() {
        let asked = |text: &str| compile_timeout_from(Some(text.as_ref()));
        assert_eq!(compile_timeout_from(None), Duration::from_secs(60));
        assert_eq!(asked("5"), Duration::from_secs(5));
        assert_eq!(asked(" 600 "), Duration::from_secs(600));
        for typo in ["0", "-5", "1e9", "3601", "five", ""] {
            assert_eq!(asked(typo), DEFAULT_COMPILE_TIMEOUT, "{typo}");
        }
    }
}
