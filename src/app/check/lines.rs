//! The line profile of a check (`check --lines`, docs/LINE-PROFILE.md): a
//! worker of its own loads the build the cases ran and samples and counts
//! it on the timing inputs; each instruction is charged to a line of the
//! student's file through the build's line table, here in the caller.

use std::time::Duration;

use super::session::{LoadedBuild, Unanswered, WorkerSession};
use super::CheckPlan;
use crate::app::worker_handle::WorkerCommand;
use crate::gpu::compile::line_table::{attribute, Attribution, LineTable};
use crate::grade::lines::{by_line, source_of, LineKey, LineProfile};
use crate::lab::definition::LabCase;
use crate::lab::source::marker_name;
use crate::protocol::{Event, LinesOutcome};

/// The line profile a plan asks for.
#[derive(Debug, Clone)]
pub struct LinesPlan {
    /// The case whose inputs are sampled: the timing shape.
    pub case: LabCase,
    pub timeout: Duration,
}

/// Collects the profile of `build`, the build the cases ran, in a worker
/// started for it, then charges it.
pub(super) fn profile_lines(
    plan: &CheckPlan,
    lines: &LinesPlan,
    command: &WorkerCommand,
    build: &LoadedBuild<'_>,
) -> Result<LineProfile, String> {
    let mut worker = None;
    let mut session = WorkerSession::new(command, &mut worker, plan.lab);
    session
        .start_if_gone()
        .map_err(|e| format!("the line worker did not start: {e}"))?;
    let collected = collect(&mut session, plan, lines, build);
    if let Some(worker) = worker {
        worker.shutdown();
    }
    let outcome = collected?;
    if let Some(refused) = outcome.refused {
        return Err(refused);
    }
    charge(plan, build, &outcome)
}

fn collect(
    session: &mut WorkerSession<'_>,
    plan: &CheckPlan,
    lines: &LinesPlan,
    build: &LoadedBuild<'_>,
) -> Result<LinesOutcome, String> {
    let unanswered = |unanswered: Unanswered| match unanswered {
        Unanswered::Answered(event) => match *event {
            Event::Failed { message, .. } => message,
            other => format!("the line worker answered {other:?}"),
        },
        lost => lost.to_string(),
    };
    session.load(build).map_err(unanswered)?;
    session.lines(lines, plan.seed).map_err(unanswered)?
}

/// Charges each instruction of `outcome` to its line and sums them.
fn charge(
    plan: &CheckPlan,
    build: &LoadedBuild<'_>,
    outcome: &LinesOutcome,
) -> Result<LineProfile, String> {
    let table = LineTable::from_cubin(build.image).map_err(|e| e.to_string())?;
    let student = marker_name(&plan.source_path);
    let line_count = plan.source_text.lines().count() as u32;
    let charge = |offset: u64| {
        let frames = table.frames(&outcome.function, offset)?;
        Some(match attribute(&frames, &student, line_count) {
            Attribution::Student { line, .. } => LineKey::Student(line),
            Attribution::Own => LineKey::Own,
        })
    };
    let mut rows = by_line(&outcome.readings, charge);
    for row in &mut rows {
        row.source = source_of(&plan.source_text, row.line);
    }
    Ok(LineProfile {
        chip: outcome.chip.clone(),
        total_samples: outcome.total_samples,
        dropped_samples: outcome.dropped_samples,
        period_log2: outcome.period_log2,
        collect_ms: outcome.plain_launch_ms + outcome.sample_ms + outcome.count_ms,
        lines: rows,
    })
}
