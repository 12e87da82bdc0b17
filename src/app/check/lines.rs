//! The line profile of a check (`check --lines`, the TUI on every passing
//! save; docs/LINE-PROFILE.md): a worker of its own loads the build the
//! cases ran and samples and counts it on the timing inputs; each
//! instruction is charged to a line of the student's file through the
//! build's line table, here in the caller. The lab's starter is profiled
//! the same way once per line worker's GPU, so a student can compare.

use std::time::Duration;

use super::session::{LoadedBuild, Unanswered, WorkerSession};
use super::CheckPlan;
use crate::app::worker_handle::{WorkerCommand, WorkerHandle};
use crate::facts::device::DeviceInfo;
use crate::gpu::compile::line_table::{attribute, Attribution, LineTable};
use crate::grade::lines::{by_line, source_of, LineKey, LineProfile};
use crate::lab::definition::LabCase;
use crate::lab::source::marker_name;
use crate::protocol::{Event, LinesOutcome, ProfiledKernel};

/// The line profile a plan asks for.
#[derive(Debug, Clone)]
pub struct LinesPlan {
    /// The case whose inputs are sampled: the timing shape.
    pub case: LabCase,
    pub timeout: Duration,
}

/// The worker that profiles lines, kept between the checks of one front
/// end (the TUI's saves pay its start and CUPTI's setup once), and the
/// starter's profile, which is the same for every save on one GPU.
#[derive(Default)]
pub struct LineWorker {
    handle: Option<WorkerHandle>,
    starter: Option<(String, StarterProfile)>,
    /// The seed of every profile on this worker: the first check's. The
    /// profile is no verdict, so the inputs need not change between saves,
    /// and with the same seed the worker makes them once.
    seed: Option<u64>,
}

type StarterProfile = Result<Box<LineProfile>, String>;

impl LineWorker {
    /// Ends the worker, if one was started.
    pub fn shutdown(self) {
        if let Some(handle) = self.handle {
            handle.shutdown();
        }
    }
}

/// Collects the profile of `build`, the build the cases ran, in the line
/// worker (started when there is none), then charges it; the starter's
/// profile rides along, collected on the first check on `gpu`.
pub(super) fn profile_lines(
    plan: &CheckPlan,
    lines: &LinesPlan,
    command: &WorkerCommand,
    build: &LoadedBuild<'_>,
    gpu: Option<&DeviceInfo>,
    kept: &mut LineWorker,
) -> Result<LineProfile, String> {
    let mut session = WorkerSession::new(command, &mut kept.handle, plan.lab);
    session
        .start_if_gone()
        .map_err(|e| format!("the line worker did not start: {e}"))?;
    let seed = *kept.seed.get_or_insert(plan.seed);
    let outcome = collect(&mut session, lines, build, ProfiledKernel::Student, seed)?;
    let mut profile = charge(&outcome, build.image, &plan.source_path, &plan.source_text)?;

    let key = format!(
        "{} on {}",
        plan.lab.name(),
        gpu.map_or_else(
            || "an unknown GPU".to_owned(),
            |g| format!("{} {}", g.ordinal, g.name)
        )
    );
    let starter = match &kept.starter {
        Some((kept_key, starter)) if *kept_key == key => starter.clone(),
        _ => {
            let starter = profile_starter(&mut session, plan, lines, build, seed);
            kept.starter = Some((key, starter.clone()));
            starter
        }
    };
    profile.starter = Some(starter);
    Ok(profile)
}

/// The starter's profile, charged through the starter's own line table
/// (read from the image the worker built it from).
fn profile_starter(
    session: &mut WorkerSession<'_>,
    plan: &CheckPlan,
    lines: &LinesPlan,
    build: &LoadedBuild<'_>,
    seed: u64,
) -> StarterProfile {
    let outcome = collect(session, lines, build, ProfiledKernel::Starter, seed)?;
    let starter = plan.lab.starter();
    charge(&outcome, &outcome.starter_image, starter.path, starter.text).map(Box::new)
}

fn collect(
    session: &mut WorkerSession<'_>,
    lines: &LinesPlan,
    build: &LoadedBuild<'_>,
    kernel: ProfiledKernel,
    seed: u64,
) -> Result<LinesOutcome, String> {
    let unanswered = |unanswered: Unanswered| match unanswered {
        Unanswered::Answered(event) => match *event {
            Event::Failed { message, .. } => message,
            other => format!("the line worker answered {other:?}"),
        },
        lost => lost.to_string(),
    };
    // A kept worker may hold another save's build, or none after a restart.
    session.load(build).map_err(unanswered)?;
    let outcome = session.lines(lines, seed, kernel).map_err(unanswered)??;
    match outcome.refused {
        Some(refused) => Err(refused),
        None => Ok(outcome),
    }
}

/// Charges each instruction of `outcome` to its line of `source_text`
/// through the line table of `image`, and sums them.
fn charge(
    outcome: &LinesOutcome,
    image: &[u8],
    source_path: &str,
    source_text: &str,
) -> Result<LineProfile, String> {
    let table = LineTable::from_cubin(image).map_err(|e| e.to_string())?;
    let student = marker_name(source_path);
    let line_count = source_text.lines().count() as u32;
    let charge = |offset: u64| {
        let frames = table.frames(&outcome.function, offset)?;
        Some(match attribute(&frames, &student, line_count) {
            Attribution::Student { line, .. } => LineKey::Student(line),
            Attribution::Own => LineKey::Own,
        })
    };
    let mut rows = by_line(&outcome.readings, charge);
    for row in &mut rows {
        row.source = source_of(source_text, row.line);
    }
    Ok(LineProfile {
        chip: outcome.chip.clone(),
        total_samples: outcome.total_samples,
        dropped_samples: outcome.dropped_samples,
        period_log2: outcome.period_log2,
        collect_ms: outcome.plain_launch_ms + outcome.sample_ms + outcome.count_ms,
        sampled_ms: outcome.sample_ms,
        counted_ms: outcome.count_ms,
        lines: rows,
        starter: None,
    })
}
