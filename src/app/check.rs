//! One full check of a student file: compile, every hazard case, timing.
//!
//! This is the engine behind `flashprof check`, the TUI and the batch grader.
//! It drives a worker request by request, each under its own watchdog, and
//! reports every result through a callback as soon as it exists, so a screen
//! can fill in while the rest still runs. A case that hangs or faults costs
//! only itself: the worker is replaced, the compiled image reloaded, and the
//! remaining cases carry on.
//!
//! The check runs in phases: the worker, the build(s) (`builds`), the
//! cases, the timing and the counters (`phases`), and the line profile
//! (`lines`); every request to a worker goes through its `session`.

use std::time::Instant;

mod builds;
mod lines;
mod options;
mod phases;
mod plan;
mod session;

pub use builds::{compile_timeout, COMPILE_TIMEOUT_ENV};
pub use lines::{LineWorker, LinesPlan, COUNTS_COMING};
pub use options::{
    CaseChoice, CountersChoice, GateUse, PlanError, RunOptions, CASE_TIMEOUT_S, STEP_TIMEOUT,
};
pub use plan::{CheckPlan, CountersPlan, TimingPlan};

use super::worker_handle::{WorkerCommand, WorkerFailure, WorkerHandle};
use crate::outcome::{CheckReport, CheckStopped, PhaseTimes, Progress};
use crate::protocol::CaseStatus;
use phases::{CasesEnded, NotRun};
use session::WorkerSession;

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
    let mut line_worker = LineWorker::default();
    let report =
        run_check_unless_stale(plan, command, worker, &mut line_worker, &|| false, progress);
    line_worker.shutdown();
    report
}

/// [`run_check`], giving up with [`CheckError::Superseded`] when `stale()`
/// turns true while the optimized build of a quick-first check compiles;
/// a line profile uses `line_worker`, and leaves a live one in it, and is
/// stopped (the check's report kept) when `stale()` turns true during it.
///
/// The check runs in phases: the worker, the build(s), the cases, the
/// timing, the counters, the line profile; each phase's wall time is
/// measured here.
pub fn run_check_unless_stale(
    plan: &CheckPlan,
    command: &WorkerCommand,
    worker: &mut Option<WorkerHandle>,
    line_worker: &mut LineWorker,
    stale: &dyn Fn() -> bool,
    mut progress: impl FnMut(Progress),
) -> Result<CheckReport, CheckError> {
    let started = Instant::now();
    // The sandboxed worker reads case tensors itself, so it must be let in.
    let command = &command
        .clone()
        .reading_tensors(plan.cases.iter().filter_map(|c| plan.lab.own_tensors(c)));
    let mut phase_times = PhaseTimes::default();
    // Timing, counters and line profiles stand on the lab's baselines, and
    // on the inputs of the shape they measure.
    let ahead = plan.timing.is_some() || plan.counters.is_some() || plan.lines.is_some();
    let mut session = WorkerSession::new(command, worker, plan.lab)
        .with_baselines_ahead(ahead)
        .with_inputs_ahead(plan.measured_shape());
    phase_times.worker_start_ms = session.start(&mut progress)?;
    let gpu = session.gpu();

    let compile_started = Instant::now();
    let (compile, quick) = builds::build(&mut session, plan, &gpu, started, stale, &mut progress)?;
    phase_times.compile_ms = ms_since(compile_started);
    if let Some((transport, added_ms)) = session.link() {
        progress(Progress::LinkMeasured {
            transport,
            added_ms,
        });
    }
    progress(Progress::Compiled(compile.clone()));
    // A worker replaced from here on loads the build that counts.
    session.keep(&compile);

    let cases_started = Instant::now();
    let blocked = NotRun::before_cases(&compile, &gpu);
    let (mut cases, link_lost) =
        phases::run_cases(&mut session, plan, blocked.as_ref(), &mut progress);
    crate::outcome::settle_candidates(&mut cases);
    phase_times.cases_ms = ms_since(cases_started);

    let ended = CasesEnded::of(blocked.is_some(), &cases);
    // A line worker still starting must not share the GPU with the timing.
    line_worker.settle();
    let (mut timing, timing_error) =
        phases::run_timing(&mut session, plan, ended, &mut phase_times, &mut progress);
    let counters = phases::run_counters(&mut session, plan, ended, &mut phase_times, &mut progress);
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
            let failing = cases.iter().filter(|c| c.status != CaseStatus::Pass).count();
            if failing > 0 {
                return Err(format!(
                    "{failing} of {} cases did not pass; lines are profiled for a kernel that passes them all",
                    cases.len()
                ));
            }
            if stale() {
                return Err(WorkerFailure::Superseded.to_string());
            }
            progress(Progress::LinesStarted);
            let lines_started = Instant::now();
            // PC Sampling failed to stop (H100, 2026-12-06) while this
            // check's worker held CUPTI's profiler for the counters.
            if plan.counters.is_some() {
                session
                    .release_counters(lines_plan.timeout)
                    .map_err(|e| format!("the check's worker kept CUPTI's profiler: {e}"))?;
            }
            let build = session.kept();
            let profile = lines::profile_lines(
                plan,
                lines_plan,
                command,
                &build,
                gpu.as_ref().ok(),
                line_worker,
                lines::SaveHooks {
                    stale,
                    on_heat: &mut |heat| progress(Progress::LinesSampled(Box::new(heat.clone()))),
                    phase_started: lines_started,
                },
            );
            phase_times.lines_ms = ms_since(lines_started);
            profile
        });
    phase_times.total_ms = ms_since(started);
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
        worker_restarts: session.restarts(),
        sanitizer: None,
        quick_build,
        phases: phase_times,
        link_lost,
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

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}
