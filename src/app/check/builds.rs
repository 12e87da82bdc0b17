//! The build phase of a check: the optimized build, made beside the GPU
//! worker and loaded into it, after a quick build's provisional verdicts
//! where the plan asks for one (docs/PERFORMANCE.md).

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::phases::{case, not_run};
use super::session::{compiler_failed, WorkerSession};
use super::{ms_since, CheckError, CheckPlan};
use crate::app::remote::Remote;
use crate::app::side_build::{SideBuild, SideBuildEnd};
use crate::facts::device::{DeviceInfo, GpuProblem};
use crate::gpu::compile::{Build, QuickBuild};
use crate::outcome::builds::{self, QuickBuildReport};
use crate::outcome::Progress;
use crate::protocol::{CaseOutcome, CaseStatus, CompileOutcome, LabId, Request};
use crate::worker::sandbox::limit_from;

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
pub(super) struct QuickFirst {
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
    pub(super) fn report(self, optimized_cases: &[CaseOutcome]) -> QuickBuildReport {
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

/// The compile phase: the optimized build, after a quick build's
/// provisional verdicts where the plan asks for one and the worker has a
/// GPU to run them on.
pub(super) fn build(
    session: &mut WorkerSession<'_>,
    plan: &CheckPlan,
    gpu: &Result<DeviceInfo, GpuProblem>,
    started: Instant,
    stale: &dyn Fn() -> bool,
    progress: &mut impl FnMut(Progress),
) -> Result<(CompileOutcome, Option<QuickFirst>), CheckError> {
    // A second Slurm job step could queue behind the worker's own, so over
    // Slurm the verdicts wait for the optimized build.
    let side_builds = !matches!(session.command().remote, Some(Remote::Slurm(_)));
    match (plan.quick_build, gpu) {
        (Some(quick), Ok(device)) if side_builds => {
            let mut first = quick_first(
                session,
                plan,
                quick,
                &device.arch(),
                started,
                stale,
                progress,
            )?;
            let optimized = std::mem::replace(&mut first.optimized, CompileOutcome::failed(None));
            Ok((optimized, Some(first)))
        }
        _ => Ok((compile(session, plan, Build::Optimized, progress), None)),
    }
}

/// Compiles the plan's text under the compile memory limit, and loads
/// the result into the worker. A worker with a GPU cannot have that
/// limit (its CUDA context reserves address space of about twice the
/// GPU's memory), so it gets the image from a builder without a GPU,
/// started for this compile as the optimized build beside a quick one
/// is; a worker without one compiles itself, under its own limit.
fn compile(
    session: &mut WorkerSession<'_>,
    plan: &CheckPlan,
    build: Build,
    progress: &mut impl FnMut(Progress),
) -> CompileOutcome {
    let Some(arch) = session.gpu_arch() else {
        return session.compile(&compile_request(plan, build, None), progress);
    };
    let request = compile_request(plan, build, Some(arch));
    match SideBuild::start(session.command(), request, compile_timeout()).finish(&|| false) {
        SideBuildEnd::Built(mut built) => {
            if built.ok {
                session.load_built(&mut built, progress);
            }
            built
        }
        SideBuildEnd::Failed(reason) => {
            compiler_failed(format!("the builder did not compile: {reason}"))
        }
        SideBuildEnd::Cancelled => compiler_failed("the build was cancelled".into()),
    }
}

/// The quick build in the worker and its verdicts, shown as provisional,
/// while the optimized build compiles in a process beside it; then the
/// optimized image loaded into the worker. A builder that cannot answer
/// leaves the optimized build to the worker, as in a plain check.
fn quick_first(
    session: &mut WorkerSession<'_>,
    plan: &CheckPlan,
    build: QuickBuild,
    arch: &str,
    started: Instant,
    stale: &dyn Fn() -> bool,
    progress: &mut impl FnMut(Progress),
) -> Result<QuickFirst, CheckError> {
    let mut side = SideBuild::start(
        session.command(),
        compile_request(plan, Build::Optimized, Some(arch.to_owned())),
        compile_timeout(),
    );
    let quick = compile(session, plan, Build::Quick(build), progress);
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
        session.keep(&quick);
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
            let (outcome, _) = case(session, &plan.cases[index], plan, progress);
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
                session.load_built(&mut optimized, progress);
            }
            optimized
        }
        // A builder that fails costs only time: the worker builds it,
        // and the report says why the builder could not.
        SideBuildEnd::Failed(reason) => {
            builder_problem = Some(reason);
            session.start_if_gone()?;
            compile(session, plan, Build::Optimized, progress)
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
