//! The grading journal: one JSON line per finished submission, appended and
//! flushed the moment it is known.
//!
//! The journal is the batch grader's only state. Everything else in the
//! output folder is regenerated from it, so a run killed at any instant
//! loses only the submissions still in flight, and a rerun picks up where
//! it stopped. A line torn by a crash mid-write is skipped when read, and
//! the next append starts on a fresh line so it cannot glue onto the tear.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::app::gate::SpeedGate;
use crate::outcome::{CheckReport, Verdict};
use crate::protocol::{CaseStatus, CompileProblemKind};

/// The journal's file name inside an output folder.
pub const JOURNAL_FILE: &str = "journal.jsonl";

/// Whether a run had GPUs to grade on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GradeMode {
    /// Compile, run every case, time, gate.
    Full,
    /// Compile only; no GPU touched.
    CompileOnly,
}

/// What a journal row must match to be reused: the lab, the cases, the
/// mode, for a timed grading the timing rules, and for a row a limit cut
/// short, the limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GradingKey {
    pub lab: String,
    pub cases_hash: String,
    pub mode: GradeMode,
    /// [`crate::protocol::TIMING_RULES`] of this build.
    pub timing_rules: u32,
    /// The timing's stopping rule by name (`grade::stopping`; empty for a
    /// run that times nothing).
    pub stopping: String,
    pub limits: GradingLimits,
}

/// The limits every submission of a run is held to. A row cut short by one
/// (a case the watchdog killed, a compile over its time or memory) tells of
/// the limit as much as of the kernel, so it stands only for a run under
/// the same limits: a TA who raises one has those rows graded again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct GradingLimits {
    pub case_timeout_ms: u64,
    pub compile_timeout_s: u64,
    pub compile_memory_mb: u64,
}

impl std::fmt::Display for GradingLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "case timeout {} s, compile {} s and {} MiB",
            self.case_timeout_ms as f64 / 1000.0,
            self.compile_timeout_s,
            self.compile_memory_mb
        )
    }
}

/// One finished submission.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JournalEntry {
    pub id: String,
    /// The path it was read from, as shown to the user.
    pub file: String,
    pub content_hash: String,
    /// The lab it was graded against (empty in journals written before labs were named).
    #[serde(default)]
    pub lab: String,
    /// Hash of the cases it was graded on, so other cases never reuse the row.
    #[serde(default)]
    pub cases_hash: String,
    pub mode: GradeMode,
    pub seed: u64,
    pub status: Verdict,
    /// Absent when nothing was timed (compile-only, rejected, no GPU).
    pub gate: Option<SpeedGate>,
    /// Why there is no report, or what went wrong around it.
    pub error: Option<String>,
    /// The full check, without the compiled image.
    pub report: Option<CheckReport>,
    pub finished_unix_ms: u64,
    /// The timing rules the row was graded under (1 when absent: journals
    /// written before the rules had a version); a timed grading reuses only
    /// rows of its own rules.
    #[serde(default = "first_timing_rules")]
    pub timing_rules: u32,
    /// The limits it was graded under (absent in journals written before
    /// they were kept: a row such a limit cut short is graded again).
    #[serde(default)]
    pub limits: Option<GradingLimits>,
}

fn first_timing_rules() -> u32 {
    1
}

impl JournalEntry {
    /// Whether this entry already answers for `id` at `content_hash` under
    /// `grading` (the same lab and cases); a compile-only result never stands
    /// in for a graded one.
    pub fn covers(&self, id: &str, content_hash: &str, grading: &GradingKey) -> bool {
        self.same_work(id, content_hash, grading)
            && self.same_timing_rules(grading)
            && self.limits_hold(grading)
    }

    /// Why this row, a result of `id` at `content_hash` on `grading`'s lab
    /// and cases, does not stand for `grading`; `None` for a row of other
    /// work or a grader-side error, which say nothing of the kind.
    pub fn stale_for(&self, id: &str, content_hash: &str, grading: &GradingKey) -> Option<Stale> {
        (self.status != Verdict::Error && self.same_work(id, content_hash, grading)).then(|| {
            Stale {
                timing_rules: !self.same_timing_rules(grading),
                limits: !self.limits_hold(grading),
            }
        })
    }

    /// The same file graded against the same lab and cases, in a mode that
    /// answers for `grading`'s.
    fn same_work(&self, id: &str, content_hash: &str, grading: &GradingKey) -> bool {
        self.id == id
            && self.content_hash == content_hash
            && self.lab == grading.lab
            && self.cases_hash == grading.cases_hash
            && (self.mode == grading.mode || self.mode == GradeMode::Full)
    }

    /// Timed under the same rules and, when the row was timed, stopped by
    /// a rule that answers for this run's (the same, or the same without
    /// the gate's way out, which ran at least as many pairs).
    fn same_timing_rules(&self, grading: &GradingKey) -> bool {
        let timing = self.report.as_ref().and_then(|r| r.timing.as_ref());
        grading.mode == GradeMode::CompileOnly
            || (self.timing_rules == grading.timing_rules
                && timing.is_none_or(|t| t.config.stopping.answers_for(&grading.stopping)))
    }

    /// Whether no limit cut this row short, or each limit that did is the
    /// same for `grading`. Only the limits that ended it count: a compile
    /// over its time or memory is kept while the compile limits stand,
    /// whatever the case timeout, and a case the watchdog killed while the
    /// case timeout stands (a compile-only grading runs no case, so a
    /// graded row's hung case does not matter to it).
    fn limits_hold(&self, grading: &GradingKey) -> bool {
        let Some(report) = &self.report else {
            return true;
        };
        let over_a_compile_limit = report
            .compile
            .problem
            .as_ref()
            .is_some_and(|problem| problem.kind == CompileProblemKind::OverLimit);
        let hung = grading.mode == GradeMode::Full
            && report
                .cases
                .iter()
                .any(|case| case.status == CaseStatus::Timeout);
        let now = grading.limits;
        match self.limits {
            _ if !over_a_compile_limit && !hung => true,
            // Kept before the limits were: the limit that ended it is unknown.
            None => false,
            Some(then) => {
                (!over_a_compile_limit
                    || (then.compile_timeout_s, then.compile_memory_mb)
                        == (now.compile_timeout_s, now.compile_memory_mb))
                    && (!hung || then.case_timeout_ms == now.case_timeout_ms)
            }
        }
    }
}

/// What keeps a row of the same work from standing for a run (both false:
/// it stands).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stale {
    /// It was timed under other timing rules.
    pub timing_rules: bool,
    /// A limit cut it short, and the run's limits are other.
    pub limits: bool,
}

/// What a journal file held.
#[derive(Debug, Default)]
pub struct JournalContents {
    pub entries: Vec<JournalEntry>,
    /// Lines that did not parse (a torn last line after a crash, say).
    pub unreadable_lines: usize,
}

impl JournalContents {
    /// The row the gradebook shows for `id`: the last one appended.
    pub fn newest(&self, id: &str) -> Option<&JournalEntry> {
        self.entries.iter().rev().find(|e| e.id == id)
    }

    /// Whether a rerun can reuse the journal for `id` at `content_hash`
    /// under `grading` (lab, cases, mode, rules, limits). Only the newest
    /// row counts, since it is the one the gradebook shows: a file put back
    /// to an earlier version is graded again rather than shown with the
    /// later version's row. A grader-side failure (`error`: NVRTC missing,
    /// a worker that did not start) is not the student's result, so it is
    /// graded again.
    pub fn answers(&self, id: &str, content_hash: &str, grading: &GradingKey) -> bool {
        self.newest(id)
            .is_some_and(|e| e.status != Verdict::Error && e.covers(id, content_hash, grading))
    }

    /// The latest entry per id, in id order.
    pub fn latest_per_id(&self) -> Vec<JournalEntry> {
        let mut latest: BTreeMap<&str, &JournalEntry> = BTreeMap::new();
        for entry in &self.entries {
            latest.insert(&entry.id, entry);
        }
        latest.into_values().cloned().collect()
    }
}

/// Reads a journal; a missing file is an empty one.
pub fn read(path: &Path) -> std::io::Result<JournalContents> {
    let file = match open_no_link(path, OpenOptions::new().read(true)) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(JournalContents::default()),
        Err(e) => return Err(e),
    };
    let mut contents = JournalContents::default();
    for line in BufReader::new(file).split(b'\n') {
        let line = line?;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice(&line) {
            Ok(entry) => contents.entries.push(entry),
            Err(_) => contents.unreadable_lines += 1,
        }
    }
    Ok(contents)
}

/// `path` opened with no link followed and without blocking on a FIFO;
/// anything but a regular file is refused. The journal decides which rows
/// are reused, so one planted as a link must not be read or appended to.
fn open_no_link(path: &Path, options: &mut OpenOptions) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = options
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "it is a symlink: not followed",
            ),
            _ => e,
        })?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "not a regular file: not read",
        ));
    }
    Ok(file)
}

/// An open journal that appends one line per entry.
pub struct JournalWriter {
    file: File,
}

impl JournalWriter {
    /// Opens (or creates) the journal for appending, first ending a torn last line.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        // Writable by its owner only, whatever the umask: `--merge` trusts
        // no journal anyone else could have written into. One left
        // writable by others (an older flashprof) is made its owner's alone.
        let mut file = open_no_link(
            path,
            OpenOptions::new()
                .read(true)
                .append(true)
                .create(true)
                .mode(0o644),
        )?;
        let mode = file.metadata()?.permissions().mode();
        if mode & 0o022 != 0 {
            file.set_permissions(std::fs::Permissions::from_mode(mode & !0o022))?;
        }
        let length = file.metadata()?.len();
        if length > 0 {
            let mut last = [0u8; 1];
            file.seek(SeekFrom::Start(length - 1))?;
            file.read_exact(&mut last)?;
            if last[0] != b'\n' {
                file.write_all(b"\n")?;
            }
        }
        Ok(Self { file })
    }

    /// Appends one entry; [`Self::sync`] makes it durable.
    pub fn append(&mut self, entry: &JournalEntry) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(entry)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        line.push(b'\n');
        // One write call per line: a crash can tear only the last line.
        self.file.write_all(&line)?;
        self.file.flush()
    }

    /// Waits until every line appended so far is on disk. The batch calls
    /// it once for all the entries that finished together, not per entry.
    pub fn sync(&mut self) -> std::io::Result<()> {
        self.file.sync_data()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str, hash: &str, mode: GradeMode) -> JournalEntry {
        JournalEntry {
            id: id.into(),
            file: format!("in/{id}"),
            content_hash: hash.into(),
            lab: "flash-prefill".into(),
            cases_hash: "c1".into(),
            mode,
            seed: 7,
            status: Verdict::Rejected,
            gate: None,
            error: Some("empty".into()),
            report: None,
            finished_unix_ms: 1,
            timing_rules: crate::protocol::TIMING_RULES,
            limits: Some(LIMITS),
        }
    }

    const LIMITS: GradingLimits = GradingLimits {
        case_timeout_ms: 10_000,
        compile_timeout_s: 60,
        compile_memory_mb: 4096,
    };

    /// A compile-only row of `a.cu` whose compile ended with `problem`.
    fn compiled_with(problem: CompileProblemKind, limits: Option<GradingLimits>) -> JournalEntry {
        use crate::facts::device::GpuProblem;
        use crate::protocol::{CompileOutcome, CompileProblem};
        let report = CheckReport {
            lab: "flash-prefill".into(),
            source_path: "in/a.cu".into(),
            seed: 7,
            gpu: Err(GpuProblem::NoDevice {
                detail: "compile-only".into(),
            }),
            compile: CompileOutcome::failed(Some(CompileProblem {
                kind: problem,
                message: "the compile took longer than 60 s".into(),
            })),
            cases: Vec::new(),
            timing: None,
            timing_error: None,
            counters: Vec::new(),
            lines: None,
            worker_restarts: 0,
            phases: Default::default(),
            sanitizer: None,
            diagnosis: None,
            quick_build: None,
            link_lost: Default::default(),
        };
        JournalEntry {
            status: Verdict::of(&report),
            report: Some(report),
            limits,
            ..entry("a.cu", "1", GradeMode::CompileOnly)
        }
    }

    #[test]
    fn a_compile_a_limit_cut_short_stands_only_under_the_same_compile_limits() {
        let compile_only = key("flash-prefill", "c1", GradeMode::CompileOnly);
        let under = |limits| GradingKey {
            limits,
            ..compile_only.clone()
        };
        let bomb = compiled_with(CompileProblemKind::OverLimit, Some(LIMITS));
        assert_eq!(bomb.status, Verdict::CompileError);
        assert!(bomb.covers("a.cu", "1", &compile_only));
        assert!(!bomb.stale_for("a.cu", "1", &compile_only).unwrap().limits);
        let rejected = compiled_with(CompileProblemKind::BadSource, Some(LIMITS));
        for other in [
            GradingLimits {
                compile_timeout_s: 120,
                ..LIMITS
            },
            GradingLimits {
                compile_memory_mb: 8192,
                ..LIMITS
            },
        ] {
            assert!(!bomb.covers("a.cu", "1", &under(other)), "{other}");
            assert!(
                bomb.stale_for("a.cu", "1", &under(other)).unwrap().limits,
                "{other}"
            );
            assert!(
                bomb.stale_for("b.cu", "1", &under(other)).is_none(),
                "{other}"
            );
            // A row no limit cut short stands whatever the limits.
            assert!(rejected.covers("a.cu", "1", &under(other)), "{other}");
        }
        // The case timeout did not end a compile.
        let longer_cases = GradingLimits {
            case_timeout_ms: 30_000,
            ..LIMITS
        };
        assert!(bomb.covers("a.cu", "1", &under(longer_cases)));
        // A journal from before the limits were kept: the bomb's row is graded again.
        let mut old = serde_json::to_value(bomb).unwrap();
        old.as_object_mut().unwrap().remove("limits");
        let old: JournalEntry = serde_json::from_value(old).unwrap();
        assert_eq!(old.limits, None);
        assert!(!old.covers("a.cu", "1", &compile_only));
        assert!(old.stale_for("a.cu", "1", &compile_only).unwrap().limits);
        let mut old = serde_json::to_value(rejected).unwrap();
        old.as_object_mut().unwrap().remove("limits");
        let old: JournalEntry = serde_json::from_value(old).unwrap();
        assert!(old.covers("a.cu", "1", &compile_only));
    }

    #[test]
    fn only_the_newest_row_of_a_file_answers_for_it() {
        let full = key("flash-prefill", "c1", GradeMode::Full);
        let version = |hash: &str| JournalEntry {
            status: Verdict::Passed,
            ..entry("a.cu", hash, GradeMode::Full)
        };
        // Graded at version 1, then 2, then put back to 1: the gradebook
        // shows version 2's row, so version 1 is graded again.
        let contents = JournalContents {
            entries: vec![version("1"), version("2")],
            unreadable_lines: 0,
        };
        assert!(contents.answers("a.cu", "2", &full));
        assert!(!contents.answers("a.cu", "1", &full));
        assert_eq!(contents.newest("a.cu").unwrap().content_hash, "2");
        assert!(contents.newest("b.cu").is_none());
    }

    #[test]
    fn a_row_timed_under_earlier_rules_is_timed_again_and_says_so() {
        // A journal line as a build before honest timing wrote it: no
        // `timing_rules` key at all.
        let mut old = serde_json::to_value(entry("a.cu", "1", GradeMode::Full)).unwrap();
        old.as_object_mut().unwrap().remove("timing_rules");
        old["status"] = serde_json::json!("passed");
        old["error"] = serde_json::Value::Null;
        let old: JournalEntry = serde_json::from_value(old).unwrap();
        assert_eq!(old.timing_rules, 1);
        let contents = JournalContents {
            entries: vec![old.clone()],
            unreadable_lines: 0,
        };
        let full = key("flash-prefill", "c1", GradeMode::Full);
        assert!(!contents.answers("a.cu", "1", &full), "graded again");
        assert!(old.stale_for("a.cu", "1", &full).unwrap().timing_rules);
        // A compile-only grading times nothing: the old row still stands.
        let compile_only = key("flash-prefill", "c1", GradeMode::CompileOnly);
        assert!(contents.answers("a.cu", "1", &compile_only));
        assert!(
            !old.stale_for("a.cu", "1", &compile_only)
                .unwrap()
                .timing_rules
        );
        // A row of this build's rules is reused, and is no stale row.
        let new = JournalEntry {
            timing_rules: crate::protocol::TIMING_RULES,
            ..old
        };
        assert!(!new.stale_for("a.cu", "1", &full).unwrap().timing_rules);
        let contents = JournalContents {
            entries: vec![new],
            unreadable_lines: 0,
        };
        assert!(contents.answers("a.cu", "1", &full));
    }

    #[test]
    fn a_torn_line_is_skipped_and_the_next_append_starts_fresh() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(JOURNAL_FILE);
        let mut writer = JournalWriter::open(&path).unwrap();
        writer.append(&entry("a.cu", "1", GradeMode::Full)).unwrap();
        drop(writer);
        let mut text = std::fs::read(&path).unwrap();
        text.extend_from_slice(b"{\"id\":\"b.cu\",\"fi");
        std::fs::write(&path, &text).unwrap();
        JournalWriter::open(&path)
            .unwrap()
            .append(&entry("c.cu", "3", GradeMode::Full))
            .unwrap();
        let contents = read(&path).unwrap();
        assert_eq!(contents.unreadable_lines, 1);
        let ids: Vec<&str> = contents.entries.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["a.cu", "c.cu"]);
    }

    #[test]
    fn the_latest_entry_per_id_wins() {
        let contents = JournalContents {
            entries: vec![
                entry("b.cu", "1", GradeMode::Full),
                entry("a.cu", "1", GradeMode::Full),
                entry("b.cu", "2", GradeMode::Full),
            ],
            unreadable_lines: 0,
        };
        let latest = contents.latest_per_id();
        assert_eq!(latest.len(), 2);
        assert_eq!(
            (latest[1].id.as_str(), latest[1].content_hash.as_str()),
            ("b.cu", "2")
        );
    }

    fn key(lab: &str, cases_hash: &str, mode: GradeMode) -> GradingKey {
        GradingKey {
            lab: lab.into(),
            cases_hash: cases_hash.into(),
            mode,
            timing_rules: crate::protocol::TIMING_RULES,
            stopping: crate::grade::stopping::StoppingRule::DEFAULT.name(),
            limits: LIMITS,
        }
    }

    #[test]
    fn grader_errors_are_graded_again_and_student_results_are_reused() {
        let with = |status| JournalEntry {
            status,
            ..entry("a.cu", "1", GradeMode::Full)
        };
        for status in [
            Verdict::Passed,
            Verdict::Failed,
            Verdict::Rejected,
            Verdict::CompileError,
        ] {
            let contents = JournalContents {
                entries: vec![with(status)],
                unreadable_lines: 0,
            };
            assert!(
                contents.answers("a.cu", "1", &key("flash-prefill", "c1", GradeMode::Full)),
                "{status:?}"
            );
        }
        let errored = JournalContents {
            entries: vec![with(Verdict::Error)],
            unreadable_lines: 0,
        };
        assert!(!errored.answers("a.cu", "1", &key("flash-prefill", "c1", GradeMode::Full)));
        // A newer error hides an older result: the newest entry is what the gradebook shows.
        let newer_error = JournalContents {
            entries: vec![with(Verdict::Passed), with(Verdict::Error)],
            unreadable_lines: 0,
        };
        assert!(!newer_error.answers("a.cu", "1", &key("flash-prefill", "c1", GradeMode::Full)));
    }

    #[test]
    fn compile_only_results_do_not_stand_in_for_graded_ones() {
        let compiled = entry("a.cu", "1", GradeMode::CompileOnly);
        let only = key("flash-prefill", "c1", GradeMode::CompileOnly);
        assert!(compiled.covers("a.cu", "1", &only));
        assert!(!compiled.covers("a.cu", "1", &key("flash-prefill", "c1", GradeMode::Full)));
        assert!(!compiled.covers("a.cu", "2", &only));
        assert!(entry("a.cu", "1", GradeMode::Full).covers("a.cu", "1", &only));
    }

    #[test]
    fn a_row_graded_under_another_lab_or_other_cases_is_never_reused() {
        let graded = entry("a.cu", "1", GradeMode::Full);
        assert!(graded.covers("a.cu", "1", &key("flash-prefill", "c1", GradeMode::Full)));
        assert!(!graded.covers("a.cu", "1", &key("paged-prefill", "c1", GradeMode::Full)));
        assert!(!graded.covers("a.cu", "1", &key("flash-prefill", "c2", GradeMode::Full)));
    }
}
