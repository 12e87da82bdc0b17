//! The phases of a check after its build: every case, then the timing and
//! the counters of a kernel whose cases all ran.

use std::time::Instant;

use super::session::{Unanswered, WorkerSession};
use super::{ms_since, CheckPlan, CountersPlan};
use crate::app::peaks_cache;
use crate::app::worker_handle::WorkerFailure;
use crate::facts::device::{DeviceInfo, GpuProblem};
use crate::lab::definition::{LabCase, LabRef, Problem};
use crate::lab::verdict::cause;
use crate::outcome::{CountersResult, LinkLoss, LinkLost, PhaseTimes, Progress};
use crate::protocol::{
    CaseOutcome, CaseStatus, CompileOutcome, CompileProblemKind, CounterTier,
    CountersUnavailableReport, TimingOutcome,
};

/// Why no case of a check runs, decided once its build is known.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum NotRun {
    /// The build stopped before the compiler said anything about the kernel.
    Compile(CompileProblemKind),
    /// The compiler reported errors.
    DidNotCompile,
    NoGpu(GpuProblem),
}

impl NotRun {
    pub(super) fn before_cases(
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
            Self::Compile(kind) => write!(f, "not run: {}", kind.why_nothing_ran()),
            Self::DidNotCompile => f.write_str("not run: the kernel did not compile"),
            Self::NoGpu(problem) => write!(f, "not run: {}", problem.describe()),
        }
    }
}

/// How the cases ended, which decides whether timing and counters follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CasesEnded {
    /// Every case got its verdict (pass or fail): the kernel can be measured.
    Ran,
    /// None ran (see [`NotRun`]): nothing to measure.
    NotRun,
    /// A case hung or crashed: measuring it would only hang or crash again.
    Faulted,
}

impl CasesEnded {
    pub(super) fn of(blocked: bool, cases: &[CaseOutcome]) -> Self {
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

/// `case` as not run, for `reason`.
pub(super) fn not_run(lab: LabRef, case: &LabCase, reason: String) -> CaseOutcome {
    let shape = lab.problem(case).unwrap_or_else(|_| Problem::unknown());
    CaseOutcome::unmeasured(&case.name, &case.summary, shape, CaseStatus::NotRun, reason)
}

/// The cases phase: every case of the plan in order, or each marked not
/// run when `blocked`; with the first case a failed link left unrun.
pub(super) fn run_cases(
    session: &mut WorkerSession<'_>,
    plan: &CheckPlan,
    blocked: Option<&NotRun>,
    progress: &mut impl FnMut(Progress),
) -> (Vec<CaseOutcome>, Option<LinkLost>) {
    let mut link_lost = None;
    let mut cases = Vec::with_capacity(plan.cases.len());
    for (index, case_of_plan) in plan.cases.iter().enumerate() {
        let outcome = match blocked {
            Some(reason) => not_run(plan.lab, case_of_plan, reason.to_string()),
            None => {
                progress(Progress::CaseStarted { index });
                let (outcome, loss) = case(session, case_of_plan, plan, progress);
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

/// One case, and how the link failed when a failed link left it unrun.
pub(super) fn case(
    session: &mut WorkerSession<'_>,
    case: &LabCase,
    plan: &CheckPlan,
    progress: &mut impl FnMut(Progress),
) -> (CaseOutcome, Option<LinkLoss>) {
    let mut outcome = not_run(plan.lab, case, String::new());
    if let Err(e) = session.ready(progress, "the previous case hung or crashed") {
        // A worker the link cannot reach is no fault of the kernel.
        if let Some(lost) = session.lost() {
            outcome.diagnosis = format!("not run: {e}");
            return (outcome, Some(lost.loss));
        }
        outcome.status = CaseStatus::Crash;
        outcome.cause = Some(cause::WORKER_FAILED.to_owned());
        outcome.diagnosis = format!("could not start a worker: {e}");
        return (outcome, None);
    }
    let watchdog = plan.case_timeout.mul_f64(outcome.shape.watchdogs());
    match session.run_case(case, plan.seed, watchdog) {
        Ok(result) => return (result, None),
        Err(Unanswered::Lost(WorkerFailure::Timeout(limit))) => {
            outcome.status = CaseStatus::Timeout;
            outcome.cause = Some(cause::HANG.to_owned());
            outcome.diagnosis = format!(
                "no result within {:.1} s: the kernel probably never finishes for this shape (a loop bound or a barrier only some threads reach)",
                limit.as_secs_f64()
            );
        }
        // The link to the node failed, not the kernel: not run, and why.
        Err(Unanswered::Lost(failure)) if failure.is_transport() => {
            if let WorkerFailure::AllocationEnded { .. } = failure {
                // A new allocation may queue for hours: asked for by the next check, not this one.
                session.give_up_on_link(&failure);
            }
            outcome.diagnosis = format!("not run: {failure} (not the kernel's fault)");
            return (outcome, failure.link_loss());
        }
        Err(Unanswered::Lost(failure)) => {
            outcome.status = CaseStatus::Crash;
            let word = match failure {
                WorkerFailure::Died { .. } | WorkerFailure::Protocol(_) => cause::WORKER_DIED,
                _ => cause::WORKER_FAILED,
            };
            outcome.cause = Some(word.to_owned());
            outcome.diagnosis = format!("the worker died during this case: {failure}");
        }
        Err(unanswered) => {
            outcome.status = CaseStatus::Crash;
            outcome.cause = Some(cause::WORKER_FAILED.to_owned());
            outcome.diagnosis = unanswered.message("unexpected answer", None);
        }
    }
    (outcome, None)
}

/// The timing phase: only a kernel whose cases all ran is timed.
pub(super) fn run_timing(
    session: &mut WorkerSession<'_>,
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
            let result = session.ready(&mut |_| {}, "before timing").and_then(|()| {
                let gate = plan.gate_threshold(session.gpu().ok().as_ref());
                session.time(timing, plan.seed, gate).map_err(|unanswered| {
                    unanswered.message("unexpected answer to timing", Some("timing failed"))
                })
            });
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
pub(super) fn run_counters(
    session: &mut WorkerSession<'_>,
    plan: &CheckPlan,
    ended: CasesEnded,
    phases: &mut PhaseTimes,
    progress: &mut impl FnMut(Progress),
) -> Vec<CountersResult> {
    let mut counters = Vec::new();
    let Some(plan_counters) = plan.counters.as_ref().filter(|_| ended == CasesEnded::Ran) else {
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
        let result = counters_tier(session, plan_counters, tier, plan.seed);
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

/// One tier of counters, with the GPU's peaks from the caller's cache; the
/// peaks the worker measured instead are filed there for the next run.
fn counters_tier(
    session: &mut WorkerSession<'_>,
    plan: &CountersPlan,
    tier: CounterTier,
    seed: u64,
) -> CountersResult {
    let failed = |detail: String| CountersUnavailableReport {
        reason: "the profiling run failed".into(),
        detail,
        fix: "Rerun; if it persists, run with --no-counters (grading and timing do not need them)."
            .into(),
    };
    session
        .ready(&mut |_| {}, "before counters")
        .map_err(failed)?;
    let gpu = session.gpu().ok();
    let known_peaks = gpu.as_ref().and_then(peaks_cache::load);
    let mut result = session
        .counters(plan, tier, seed, known_peaks.clone())
        .map_err(|unanswered| failed(unanswered.message("unexpected answer to counters", None)))?;
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
