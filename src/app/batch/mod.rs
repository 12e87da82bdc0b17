//! The batch grader behind `flashprof grade`: every submission of a class
//! checked in its own worker, spread over the GPUs, recorded in a journal.
//!
//! Workers run in parallel slots (one per GPU, or several compile-only
//! slots on CPUs); only this thread writes, so the journal has one writer
//! and each finished submission is on disk before the next is reported.
//! A fresh worker per submission means one student's sticky fault or
//! leaked GPU memory cannot touch the next student's grade.

pub mod feedback;
pub mod gradebook;
pub mod journal;
pub mod lock;
pub mod merge;
pub mod output;
pub mod shard;
pub mod submissions;

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{mpsc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use self::journal::{
    GradeMode, GradingKey, GradingLimits, JournalEntry, JournalWriter, JOURNAL_FILE,
};
use self::submissions::{LoadedSubmission, Submission};
use super::check::{run_check, CheckPlan};
use super::gate::{GateTable, GpuGate, SpeedGate};
use super::worker_handle::WorkerCommand;
use crate::app::history::content_hash;
use crate::outcome::Verdict;
use crate::worker::GpuSelection;

/// One grading run.
#[derive(Debug, Clone)]
pub struct BatchPlan {
    /// Every submission's check but for its file: the lab the whole class
    /// is graded against, the cases, the seed, the watchdog and the timing.
    pub check: CheckPlan,
    pub submissions: Vec<Submission>,
    pub out_dir: PathBuf,
    pub mode: GradeMode,
    /// One entry per concurrent worker: the device it opens.
    pub slots: Vec<GpuSelection>,
}

/// The cases as a journal row keys them (`[{"name", "summary", "recipe"}]`,
/// the form rows have been written with since the first journal).
fn journal_cases(cases: &[crate::lab::definition::LabCase]) -> String {
    #[derive(serde::Serialize)]
    struct KeyedCase<'a> {
        name: &'a str,
        summary: &'a str,
        recipe: serde_json::Value,
    }
    let keyed: Vec<KeyedCase<'_>> = cases
        .iter()
        .map(|case| KeyedCase {
            name: &case.name,
            summary: &case.summary,
            recipe: serde_json::from_str(&case.recipe.to_json()).unwrap_or_default(),
        })
        .collect();
    serde_json::to_string(&keyed).unwrap_or_default()
}

impl BatchPlan {
    /// What a journal row must match to stand for this run.
    pub fn grading_key(&self) -> GradingKey {
        let mut cases = journal_cases(self.check.cases());
        // Rows graded with and without the sanitizer never stand in for each other.
        if self.check.sanitizes() {
            cases.push_str("\0sanitize");
        }
        GradingKey {
            lab: self.check.lab().name().to_owned(),
            cases_hash: content_hash(cases.as_bytes()),
            mode: self.mode,
            timing_rules: crate::protocol::TIMING_RULES,
            stopping: self
                .check
                .timing()
                .map(|t| t.config.stopping.name())
                .unwrap_or_default(),
            limits: GradingLimits {
                case_timeout_ms: self.check.case_timeout().as_millis() as u64,
                compile_timeout_s: super::check::compile_timeout().as_secs(),
                compile_memory_mb: crate::worker::sandbox::compile_memory_mb(),
            },
        }
    }
}

/// What the caller hears while a batch runs.
#[derive(Debug)]
pub enum BatchEvent<'a> {
    /// The journal already held results for this many submissions.
    Resumed {
        done: usize,
        to_grade: usize,
        /// Of those to grade, how many had a row timed under other timing rules.
        retimed: usize,
        /// Of those to grade, how many had a row a limit cut short that is
        /// now different from `limits`, this run's.
        cut_short: usize,
        /// Of those already graded, how many keep a verdict judged by a gate
        /// other than the one the table holds now (never regraded silently:
        /// the row keeps the gate it was judged by, and this says so).
        older_gate: usize,
        limits: GradingLimits,
    },
    Finished {
        entry: &'a JournalEntry,
    },
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchSummary {
    pub graded_now: usize,
    pub skipped: usize,
    /// Submissions whose status is `error` (the grader's environment failed).
    pub errors: usize,
    /// Journal lines that could not be read.
    pub unreadable_lines: usize,
    /// The gradebook's rows by status (this run's and the journal's before it).
    pub by_status: Vec<(Verdict, usize)>,
    /// A row's speed verdict when no gate served its GPU (it says so and
    /// offers a provisional one), once for the class.
    pub no_gate: Option<SpeedGate>,
}

/// Why a run could not proceed.
#[derive(Debug, thiserror::Error)]
pub enum BatchError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error(
        "{path}: {why}; whoever can write the output folder can forge its journal's rows: \
         give a folder of yours that others cannot write (chmod go-w)"
    )]
    UnsafeOut { path: String, why: String },
    #[error("no worker slots: give at least one GPU or job")]
    NoSlots,
    #[error(transparent)]
    Locked(#[from] lock::LockError),
}

fn io_error(path: &std::path::Path) -> impl Fn(std::io::Error) -> BatchError + '_ {
    move |source| BatchError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Whether `entry`'s speed verdict was judged by a gate other than the one
/// `gates` holds now for its lab and GPU (by none, when one serves now).
fn judged_by_another_gate(entry: &JournalEntry, gates: Option<&GateTable>) -> bool {
    let current = current_gate(entry, gates);
    match &entry.gate {
        Some(SpeedGate::Uncalibrated { .. }) => current.is_some(),
        Some(judged) => judged
            .gate_version()
            .is_some_and(|version| current.is_none_or(|gate| gate.version() != version)),
        None => false,
    }
}

/// The gate `gates` holds now for `entry`'s lab and GPU.
fn current_gate<'g>(entry: &JournalEntry, gates: Option<&'g GateTable>) -> Option<&'g GpuGate> {
    let gpu = entry.report.as_ref().and_then(|r| r.gpu.as_ref().ok())?;
    gates?.lookup(&entry.lab, &gpu.name)
}

/// Grades every submission the journal does not already hold, then
/// regenerates the gradebook from the journal.
pub fn run_batch(
    plan: &BatchPlan,
    worker: &WorkerCommand,
    mut on_event: impl FnMut(BatchEvent),
) -> Result<BatchSummary, BatchError> {
    if plan.slots.is_empty() {
        return Err(BatchError::NoSlots);
    }
    prepare_out_folder(&plan.out_dir)?;
    // Held until this function returns: a second run on the same folder is refused.
    let _lock = lock::OutLock::acquire(&plan.out_dir)?;
    let journal_path = plan.out_dir.join(JOURNAL_FILE);
    let previous = journal::read(&journal_path).map_err(io_error(&journal_path))?;
    let grading = plan.grading_key();
    let mut pending = VecDeque::new();
    let mut skipped = 0;
    let mut retimed = 0;
    let mut cut_short = 0;
    let mut older_gate = 0;
    for submission in &plan.submissions {
        // Only the hash is kept: each submission is read again just before
        // it is graded, so memory does not grow with the size of the class.
        let content_hash = submission.load(plan.check.lab()).content_hash;
        let done = previous.answers(&submission.id, &content_hash, &grading);
        if done {
            skipped += 1;
            let newest = previous.newest(&submission.id);
            older_gate +=
                usize::from(newest.is_some_and(|e| judged_by_another_gate(e, plan.check.gates())));
        } else {
            // Why the row the gradebook shows no longer stands, if it is one of this file.
            let stale = previous
                .newest(&submission.id)
                .and_then(|e| e.stale_for(&submission.id, &content_hash, &grading));
            retimed += usize::from(stale.is_some_and(|why| why.timing_rules));
            cut_short += usize::from(stale.is_some_and(|why| why.limits));
            pending.push_back(submission.clone());
        }
    }
    on_event(BatchEvent::Resumed {
        done: skipped,
        to_grade: pending.len(),
        retimed,
        cut_short,
        older_gate,
        limits: grading.limits,
    });
    let mut writer = JournalWriter::open(&journal_path).map_err(io_error(&journal_path))?;
    // A journal created just now must itself survive a power cut.
    output::sync_folder(&plan.out_dir).map_err(io_error(&plan.out_dir))?;
    let queue = Mutex::new(pending);
    let (sender, finished) = mpsc::channel::<JournalEntry>();
    let mut graded_now = 0;
    let mut errors = 0;
    let written: Result<(), BatchError> = std::thread::scope(|scope| {
        for &slot in &plan.slots {
            let sender = sender.clone();
            let queue = &queue;
            let grading = &grading;
            scope.spawn(move || loop {
                let next = queue.lock().unwrap_or_else(|p| p.into_inner()).pop_front();
                let Some(submission) = next else {
                    return;
                };
                let loaded = submission.load(plan.check.lab());
                let entry = grade_one(plan, grading, worker, slot, &submission, loaded);
                if sender.send(entry).is_err() {
                    return;
                }
            });
        }
        drop(sender);
        while let Ok(first) = finished.recv() {
            // Everything that finished meanwhile shares one sync: a class of
            // refused files finishes faster than a disk syncs.
            let together: Vec<JournalEntry> =
                std::iter::once(first).chain(finished.try_iter()).collect();
            for entry in &together {
                writer.append(entry).map_err(io_error(&journal_path))?;
            }
            writer.sync().map_err(io_error(&journal_path))?;
            // `runs/` is written once, from the journal, when the run ends.
            for entry in &together {
                graded_now += 1;
                errors += usize::from(entry.status == Verdict::Error);
                on_event(BatchEvent::Finished { entry });
            }
        }
        Ok(())
    });
    written?;
    let contents = journal::read(&journal_path).map_err(io_error(&journal_path))?;
    let warnings = match contents.unreadable_lines {
        0 => Vec::new(),
        n => vec![format!(
            "{JOURNAL_FILE}: {n} unreadable lines skipped (a run was cut off mid-write)"
        )],
    };
    let gradebook = contents.latest_per_id();
    output::write_outputs(&plan.out_dir, &gradebook, &warnings).map_err(io_error(&plan.out_dir))?;
    Ok(BatchSummary {
        graded_now,
        skipped,
        errors,
        unreadable_lines: contents.unreadable_lines,
        by_status: gradebook::count_by_status(&gradebook),
        // Offered only while no gate serves that GPU: after a calibration,
        // older rows say which gate (none) judged them instead.
        no_gate: gradebook
            .iter()
            .filter(|entry| current_gate(entry, plan.check.gates()).is_none())
            .filter_map(|entry| entry.gate.clone())
            .find(|gate| matches!(gate, SpeedGate::Uncalibrated { .. })),
    })
}

/// Creates `--out` (0755 at most) or checks the one there: it must be this
/// user's and writable by no one else, since a student who could write
/// into it could plant `journal.jsonl` rows that the run would reuse as grades.
pub(crate) fn prepare_out_folder(out: &std::path::Path) -> Result<(), BatchError> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(out)
        .map_err(io_error(out))?;
    let meta = std::fs::metadata(out).map_err(io_error(out))?;
    match untrusted_grade_file(&meta) {
        None => Ok(()),
        Some(why) => Err(BatchError::UnsafeOut {
            path: crate::display::path_for_display(out),
            why,
        }),
    }
}

/// Why a folder or file of grades (an output folder, a shard to merge and
/// its journal) is not to be trusted: not this user's, or writable by
/// anyone else (a sticky bit does not help: another user could have
/// written a file there before it was used).
pub(crate) fn untrusted_grade_file(meta: &std::fs::Metadata) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let euid = crate::sys::effective_uid().unwrap_or(u32::MAX);
    match meta.uid() == euid {
        false => Some(format!("owned by uid {}, not by you", meta.uid())),
        true => crate::sys::trust::untrusted_because(meta.uid(), meta.mode(), true, true, euid),
    }
}

fn now_unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The sanitizer pass on the first case, on the worker's GPU, over the
/// exact text `check` graded (never the path read again); `None` when the
/// plan asks for none or has no case.
fn sanitize_one(
    worker: &WorkerCommand,
    check: &CheckPlan,
) -> Option<crate::app::sanitize::SanitizerOutcome> {
    use crate::app::sanitize::{run_pass, SanitizePlan};
    let pass = check.sanitize_pass(worker.program.clone())?;
    Some(run_pass(&SanitizePlan {
        env: worker.env.clone(),
        ..pass
    }))
}

/// Checks one submission in a fresh worker on `slot`.
fn grade_one(
    plan: &BatchPlan,
    grading: &GradingKey,
    worker: &WorkerCommand,
    slot: GpuSelection,
    submission: &Submission,
    loaded: LoadedSubmission,
) -> JournalEntry {
    let mut entry = JournalEntry {
        id: submission.id.clone(),
        file: submission.path.display().to_string(),
        content_hash: loaded.content_hash,
        lab: grading.lab.clone(),
        cases_hash: grading.cases_hash.clone(),
        mode: plan.mode,
        seed: plan.check.seed(),
        status: Verdict::Rejected,
        gate: None,
        error: None,
        report: None,
        finished_unix_ms: 0,
        timing_rules: grading.timing_rules,
        limits: Some(grading.limits),
    };
    let source = match loaded.source {
        Ok(source) => source,
        Err(reason) => {
            // Not there at all (a name given to `grade`, or a file gone
            // since the folder was read): its own row, not a refused file.
            if std::fs::symlink_metadata(&submission.path)
                .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
            {
                entry.status = Verdict::Missing;
            }
            entry.error = Some(reason);
            entry.finished_unix_ms = now_unix_ms();
            return entry;
        }
    };
    let check = plan
        .check
        .of_source(entry.file.clone(), source.text().to_string());
    let command = worker.clone().on_gpu(slot);
    let mut handle = None;
    let result = run_check(&check, &command, &mut handle, |_| {});
    if let Some(h) = handle {
        h.shutdown();
    }
    match result {
        Ok(mut report) => {
            // The image is for restarting a worker, not for a gradebook.
            report.compile.image.clear();
            if report.gpu.is_ok() && report.compile.ok {
                report.sanitizer = sanitize_one(&command, &check);
            }
            entry.status = Verdict::of(&report);
            entry.error = report.compile.problem.as_ref().map(|p| p.message.clone());
            if plan.mode == GradeMode::Full && report.compile.ok {
                entry.gate = check.gate(&report);
            }
            entry.report = Some(report);
        }
        Err(e) => {
            entry.status = Verdict::Error;
            entry.error = Some(e.to_string());
        }
    }
    entry.finished_unix_ms = now_unix_ms();
    entry
}
