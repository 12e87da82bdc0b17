//! The history of a student file: every completed check, kept beside it.
//!
//! A `.flashprof/` folder next to the file holds `history.jsonl`, one JSON
//! record per line, and `sources/<hash>.cu`, each distinct text once. The
//! log is append-only and every record goes out in a single write, so a
//! process killed mid-run loses at most the record it was writing; a torn
//! last line is skipped when reading, and the next append starts on a fresh
//! line so it cannot be glued to the torn one. Sources are written to a
//! temporary name and renamed, so a source file is whole or absent.
//!
//! One store serves every file of its folder, and a file may be checked
//! against more than one lab, so each record names the file and the lab it
//! belongs to ([`HistoryScope`]). A store opened for a watched file
//! ([`HistoryStore::beside`]) reads and restores only that file's records in
//! that lab: another file's text is never offered, plotted or written back.
//!
//! From the log the TUI shows past runs, the speedup trend, a diff of any
//! past text against the current one, and restores the best passing text or
//! any chosen run's (after recording the current text, so a restore never
//! loses work and can itself be undone).

mod diff;
pub(crate) mod nofollow;

use crate::display::path_for_display;
use nofollow::Folder;

pub use diff::{line_diff, DiffLine};

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::grade::roofline::{Roofline, RooflinePoint};
use crate::lab::source::{
    read_regular_file, read_regular_file_tail, FollowLinks, SourceError, MAX_SOURCE_BYTES,
};
use crate::outcome::CheckReport;
use crate::protocol::CaseStatus;
use crate::sys::pinned::PinnedFolder;

/// The folder created beside the student's file.
pub const STORE_DIR: &str = ".flashprof";
/// The run log inside the store.
pub const LOG_FILE: &str = "history.jsonl";

/// The most of a history log that is read: its newest 64 MiB (over a
/// thousand runs, heatmaps included). A `.flashprof` folder that came with
/// someone else's files (a submission, a replay) is hostile input: a
/// planted 1 GiB log, read whole, held 3.5 GB of records.
const MAX_LOG_BYTES: u64 = 64 << 20;

/// A file of the store, `name` in `folder`, read like any hostile file:
/// never through a link, never blocking on a FIFO, never from a device,
/// never past `limit`. `None` when it is absent.
fn read_store_file(folder: &Folder, name: &str, limit: u64) -> io::Result<Option<Vec<u8>>> {
    let path = folder.path.join(name);
    let refused = |reason: String| io::Error::new(io::ErrorKind::InvalidData, reason);
    match read_regular_file(&folder.at(name), FollowLinks::No, limit) {
        Ok(read) if read.bytes.len() as u64 > limit => Err(refused(format!(
            "{} is larger than {limit} bytes: not read",
            path_for_display(&path)
        ))),
        Ok(read) => Ok(Some(read.bytes)),
        Err(SourceError::Missing { .. }) => Ok(None),
        Err(e) => Err(store_read_error(&path, e)),
    }
}

/// Why a file of the store was not read, naming it.
fn store_read_error(path: &Path, error: SourceError) -> io::Error {
    let message = match error {
        SourceError::NotRegular { kind, .. } => format!(
            "refused {}: it is {kind}, not a regular file: not read",
            path_for_display(path)
        ),
        e => format!("{}: {e}", path_for_display(path)),
    };
    io::Error::new(io::ErrorKind::InvalidData, message)
}

/// One line of the log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryRecord {
    /// Milliseconds since the Unix epoch when the record was written.
    pub unix_ms: u64,
    /// Names `sources/<hash>.cu`.
    pub source_hash: String,
    /// The check of that text; `None` for a text saved only so a restore
    /// could not lose it.
    pub report: Option<CheckReport>,
    /// The name of the file (in the store's folder) the text was saved
    /// from. Absent in records written before stores were scoped: a run's
    /// report names its file then, an old snapshot names none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The lab the file was being checked against (the same fallback).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lab: Option<String>,
}

/// Whose records a view of the store holds: one file of the folder, in one lab.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryScope {
    /// The file's name within the store's folder.
    pub file_name: String,
    pub lab: String,
}

impl HistoryScope {
    /// The scope of `file` checked against `lab`. A name that is not UTF-8
    /// has no scope's name (a lossy one could be another file's): such a
    /// file's records are kept but never offered, to it or to any other.
    pub fn of(file: &Path, lab: &str) -> Self {
        Self {
            file_name: file
                .file_name()
                .and_then(|name| name.to_str())
                .unwrap_or_default()
                .to_owned(),
            lab: lab.to_owned(),
        }
    }

    /// Whether `record` was saved from this file in this lab. A record that
    /// names neither (an old snapshot) belongs to no file, so it is never
    /// offered in place of a file's own text.
    pub fn holds(&self, record: &HistoryRecord) -> bool {
        let report = record.report.as_ref();
        let file = record
            .file
            .as_deref()
            .or_else(|| report.and_then(|r| Path::new(&r.source_path).file_name()?.to_str()));
        let lab = record
            .lab
            .as_deref()
            .or_else(|| report.map(|r| r.lab.as_str()));
        !self.file_name.is_empty()
            && file == Some(self.file_name.as_str())
            && lab == Some(self.lab.as_str())
    }
}

/// Which text a restore writes back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestoreTarget {
    /// The fastest passing run of the scope (`b`).
    BestPassing,
    /// The text of a chosen record of the scope, by its source hash (a row
    /// of the history, or the text the last restore replaced).
    Text(String),
}

/// What a restore did.
#[derive(Debug, Clone, PartialEq)]
pub enum RestoreOutcome {
    /// `from`'s text is in the file now; `replaced` records the text it
    /// replaced (`None` when the file was absent).
    Restored {
        from: Box<HistoryRecord>,
        replaced: Option<Box<HistoryRecord>>,
    },
    /// The file already holds that text: nothing was written.
    AlreadyCurrent(Box<HistoryRecord>),
    /// No run of this file in this lab has passed; `other_files_passed`
    /// counts the passing runs of other files and labs, which are not
    /// candidates.
    NothingPassed { other_files_passed: usize },
    /// The chosen text is not one of this file's records in this lab.
    NotInScope,
}

/// What a screen needs of a record without holding its whole report.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSummary {
    pub unix_ms: u64,
    pub source_hash: String,
    /// `None` for a text saved before a restore.
    pub outcome: Option<RunOutcome>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunOutcome {
    pub compiled: bool,
    /// At least one case ran (false without a GPU).
    pub graded: bool,
    pub cases_passed: usize,
    pub cases: usize,
    pub all_passed: bool,
    pub speedup: Option<f64>,
    /// Registers per thread of the build, when it compiled.
    pub registers: Option<u32>,
    /// The largest absolute error over the graded cases; infinite when a
    /// case wrote NaN, inf or left elements unwritten.
    pub max_error: Option<f64>,
    /// Where the kernel sat on the roofline (DRAM intensity, useful rate)
    /// in the last tier of counters, when they were collected.
    pub roofline: Option<RooflinePoint>,
}

impl RunOutcome {
    pub fn of(report: &CheckReport) -> Self {
        Self {
            compiled: report.compile.ok,
            graded: report.cases.iter().any(|c| c.status != CaseStatus::NotRun),
            cases_passed: report.cases_passed(),
            cases: report.cases.len(),
            all_passed: report.all_passed(),
            speedup: report
                .timing
                .as_ref()
                .and_then(|t| t.speedup.as_ref())
                .map(|s| s.point),
            registers: report.compile.resources.as_ref().map(|r| r.registers),
            max_error: report
                .cases
                .iter()
                .filter_map(|case| case.comparison.as_ref())
                .map(|c| {
                    if c.nan + c.inf + c.unwritten > 0 || !c.max_abs_err.is_finite() {
                        f64::INFINITY
                    } else {
                        c.max_abs_err
                    }
                })
                .reduce(f64::max),
            roofline: report
                .counters
                .last()
                .and_then(|counters| counters.as_ref().ok())
                .and_then(|outcome| outcome.student.roofline.as_ref())
                .and_then(Roofline::dram_point),
        }
    }
}

impl HistoryRecord {
    pub fn summary(&self) -> RunSummary {
        RunSummary {
            unix_ms: self.unix_ms,
            source_hash: self.source_hash.clone(),
            outcome: self.report.as_ref().map(RunOutcome::of),
        }
    }
}

/// The log as read: records in order, and how many lines could not be read.
#[derive(Debug, Default)]
pub struct History {
    pub records: Vec<HistoryRecord>,
    pub unreadable_lines: usize,
    /// Bytes at the start of a log longer than the most that is read.
    pub older_bytes_not_read: u64,
}

/// A `.flashprof/` folder.
#[derive(Debug, Clone)]
pub struct HistoryStore {
    dir: PathBuf,
    /// Whether the store must be this user's (the one beside a watched
    /// file, which flashprof writes); a store named for replay may be anyone's.
    owned: bool,
    /// The watched file's records, when the store is opened for one; a
    /// replayed store shows every record.
    scope: Option<HistoryScope>,
    /// The watched file's folder, pinned when the watch began: the store
    /// is reached through it, so a folder swapped for another mid-session
    /// neither receives the runs nor offers its records.
    pinned: Option<PinnedFolder>,
}

/// A stable 64-bit FNV-1a hash of a text, as 16 hex digits. Std's hasher may
/// change between Rust releases, and these names live on disk for good.
pub fn source_hash(text: &str) -> String {
    content_hash(text.as_bytes())
}

/// [`source_hash`] of any bytes, for files that may not be text at all.
pub fn content_hash(bytes: &[u8]) -> String {
    let hash = bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    format!("{hash:016x}")
}

fn now_unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl HistoryStore {
    /// The store of the student file `file` checked against `lab`:
    /// `.flashprof/` in its folder, seen through that file's and lab's scope.
    pub fn beside(file: &Path, lab: &str) -> Self {
        let folder = file.parent().unwrap_or(Path::new(""));
        Self {
            dir: folder.join(STORE_DIR),
            owned: true,
            scope: Some(HistoryScope::of(file, lab)),
            pinned: None,
        }
    }

    /// The same store reached only through `pinned`, the watched file's
    /// folder as it was when the watch began: while that folder stands
    /// elsewhere, every read and write of the store is refused.
    pub fn through(mut self, pinned: PinnedFolder) -> Self {
        self.pinned = Some(pinned);
        self
    }

    /// A store named by the user: the `.flashprof` folder itself, its
    /// `history.jsonl`, or a folder that holds a `.flashprof`.
    pub fn locate(path: &Path) -> Self {
        let dir = if path.is_file() {
            path.parent().unwrap_or(Path::new("")).to_path_buf()
        } else if path.join(LOG_FILE).is_file() {
            path.to_path_buf()
        } else {
            path.join(STORE_DIR)
        };
        Self {
            dir,
            owned: false,
            scope: None,
            pinned: None,
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file and lab this store is seen through, if any.
    pub fn scope(&self) -> Option<&HistoryScope> {
        self.scope.as_ref()
    }

    #[cfg(test)]
    fn log_path(&self) -> PathBuf {
        self.dir.join(LOG_FILE)
    }

    #[cfg(test)]
    fn source_path(&self, hash: &str) -> PathBuf {
        self.dir.join("sources").join(format!("{hash}.cu"))
    }

    /// The store's folder, opened with no link followed (a `.flashprof`
    /// that is a link, or not this user's when it must be, is refused);
    /// `None` when absent and not `create`d.
    fn folder(&self, create: bool) -> io::Result<Option<Folder>> {
        match &self.pinned {
            Some(pinned) => {
                let opened = pinned.open()?;
                Folder::open_at(&opened.entry(STORE_DIR), &self.dir, create, self.owned)
            }
            None => Folder::open(&self.dir, create, self.owned),
        }
    }

    /// Records a completed check of `source`.
    pub fn append_run(&self, source: &str, report: &CheckReport) -> io::Result<HistoryRecord> {
        let mut report = report.clone();
        // The kernel image is only for reloading a restarted worker.
        report.compile.image.clear();
        self.append(source, Some(report))
    }

    /// Records `source` with no check, so that it can be got back.
    pub fn append_snapshot(&self, source: &str) -> io::Result<HistoryRecord> {
        self.append(source, None)
    }

    fn append(&self, source: &str, report: Option<CheckReport>) -> io::Result<HistoryRecord> {
        let record = HistoryRecord {
            unix_ms: now_unix_ms(),
            source_hash: source_hash(source),
            report,
            file: self.scope.as_ref().map(|s| s.file_name.clone()),
            lab: self.scope.as_ref().map(|s| s.lab.clone()),
        };
        let store = self.folder(true)?.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("{} is missing", path_for_display(&self.dir)),
            )
        })?;
        self.save_source(&store, &record.source_hash, source)?;
        let mut line = serde_json::to_string(&record).map_err(io::Error::other)?;
        line.push('\n');
        let mut log = store.append(LOG_FILE)?;
        if !ends_with_newline(&mut log)? {
            line.insert(0, '\n');
        }
        log.write_all(line.as_bytes())?;
        log.flush()?;
        // The record is on disk before the caller hears it was kept.
        log.sync_data()?;
        Ok(record)
    }

    fn save_source(&self, store: &Folder, hash: &str, source: &str) -> io::Result<()> {
        let folder = store.sub("sources", true, self.owned)?.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("{}/sources is missing", path_for_display(&self.dir)),
            )
        })?;
        let name = format!("{hash}.cu");
        // A regular file is that text already, unless two texts share the
        // 64-bit name (a crafted collision): then this one is refused rather
        // than taken for recorded. A link in its place is replaced.
        if folder.holds_file(&name) {
            return match read_store_file(&folder, &name, MAX_SOURCE_BYTES)? {
                Some(stored) if stored == source.as_bytes() => Ok(()),
                _ => Err(io::Error::other(format!(
                    "{}/sources/{name} holds another text under the same hash: not recorded",
                    path_for_display(&self.dir)
                ))),
            };
        }
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let partial = format!(".{hash}.{}.{nanos}.partial", std::process::id());
        let mut file = folder.create_new(&partial)?;
        file.write_all(source.as_bytes())?;
        // Synced before the rename, and the folder after it, so a record
        // never names a source that a power cut left empty or absent.
        file.sync_all()?;
        fs::rename(folder.at(&partial), folder.at(&name))?;
        folder.sync()?;
        store.sync()?;
        Ok(())
    }

    /// Every readable record of the store's scope (of the whole store when
    /// it has none), oldest first. A missing log is an empty history. A line
    /// that is not UTF-8, not a record of this schema, or names its source
    /// with anything but a hash is skipped and counted.
    pub fn read(&self) -> io::Result<History> {
        let mut history = self.read_all()?;
        if let Some(scope) = &self.scope {
            history.records.retain(|record| scope.holds(record));
        }
        Ok(history)
    }

    /// Every readable record of every file.
    fn read_all(&self) -> io::Result<History> {
        let Some(store) = self.folder(false)? else {
            return Ok(History::default());
        };
        let log = store.path.join(LOG_FILE);
        let read = match read_regular_file_tail(&store.at(LOG_FILE), &log, MAX_LOG_BYTES) {
            Ok(read) => read,
            Err(SourceError::Missing { .. }) => return Ok(History::default()),
            Err(e) => return Err(store_read_error(&log, e)),
        };
        let mut history = History {
            older_bytes_not_read: read.size.saturating_sub(read.bytes.len() as u64),
            ..History::default()
        };
        let mut bytes = read.bytes.as_slice();
        if history.older_bytes_not_read > 0 {
            // The read began mid-line: that line's start is among the older bytes.
            let first_end = bytes
                .iter()
                .position(|&b| b == b'\n')
                .map_or(bytes.len(), |i| i + 1);
            bytes = &bytes[first_end..];
        }
        for line in bytes.split(|&b| b == b'\n') {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match serde_json::from_slice::<HistoryRecord>(line) {
                Ok(record) if is_source_hash(&record.source_hash) => history.records.push(record),
                _ => history.unreadable_lines += 1,
            }
        }
        Ok(history)
    }

    /// The text a record was made from. `hash` must be a source hash (16
    /// lowercase hex digits), so no log line can name a file outside the store.
    pub fn source(&self, hash: &str) -> io::Result<String> {
        if !is_source_hash(hash) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{:?} is not a source hash (16 hex digits): not read",
                    hash.escape_debug().to_string()
                ),
            ));
        }
        let path = self.dir.join("sources").join(format!("{hash}.cu"));
        let missing = || {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("{} is missing", path_for_display(&path)),
            )
        };
        let folder = self
            .folder(false)?
            .ok_or_else(missing)?
            .sub("sources", false, self.owned)?
            .ok_or_else(missing)?;
        let bytes = read_store_file(&folder, &format!("{hash}.cu"), MAX_SOURCE_BYTES)?
            .ok_or_else(missing)?;
        String::from_utf8(bytes).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} is not UTF-8 text", path_for_display(&path)),
            )
        })
    }

    /// Writes `target`'s text into `file`, first recording the file's
    /// current text as a snapshot of this scope, so the restore can be
    /// undone by restoring that snapshot. Only the scope's own records are
    /// candidates: a store seen through no scope restores nothing.
    pub fn restore(&self, file: &Path, target: &RestoreTarget) -> io::Result<RestoreOutcome> {
        let Some(scope) = &self.scope else {
            return Ok(RestoreOutcome::NotInScope);
        };
        let all = self.read_all()?.records;
        let (own, others): (Vec<HistoryRecord>, Vec<HistoryRecord>) =
            all.into_iter().partition(|record| scope.holds(record));
        let chosen = match target {
            RestoreTarget::BestPassing => match best_passing(&own) {
                Some(best) => best.clone(),
                None => {
                    return Ok(RestoreOutcome::NothingPassed {
                        other_files_passed: others.iter().filter(|r| passed(r)).count(),
                    })
                }
            },
            RestoreTarget::Text(hash) => match own.iter().rev().find(|r| &r.source_hash == hash) {
                Some(record) => record.clone(),
                None => return Ok(RestoreOutcome::NotInScope),
            },
        };
        let text = self.source(&chosen.source_hash)?;
        let current = current_text(file)?;
        if current.as_deref().map(source_hash).as_ref() == Some(&chosen.source_hash) {
            return Ok(RestoreOutcome::AlreadyCurrent(Box::new(chosen)));
        }
        let replaced = match &current {
            Some(current) => Some(Box::new(self.append_snapshot(current)?)),
            None => None,
        };
        // A save that landed while the snapshot was written is not the text
        // recorded: it is kept, and nothing is restored over it.
        if current_text(file)? != current {
            return Err(io::Error::other(format!(
                "{} changed while it was being restored: nothing written (its new text is kept)",
                path_for_display(file)
            )));
        }
        write_no_follow(file, &text)?;
        Ok(RestoreOutcome::Restored {
            from: Box::new(chosen),
            replaced,
        })
    }
}

/// The text of the student's file before a restore writes over it; `None`
/// when it is absent. The file may have been replaced by a FIFO or a link:
/// never block on it, never read through it, and only a text that can be
/// recorded whole may be overwritten.
fn current_text(file: &Path) -> io::Result<Option<String>> {
    match read_regular_file(file, FollowLinks::No, MAX_SOURCE_BYTES) {
        Ok(read) if read.bytes.len() as u64 > MAX_SOURCE_BYTES => Err(io::Error::other(format!(
            "{} is over {MAX_SOURCE_BYTES} bytes, so it cannot be recorded: not restored",
            path_for_display(file)
        ))),
        Ok(read) => String::from_utf8(read.bytes).map(Some).map_err(|_| {
            io::Error::other(format!(
                "{} is not UTF-8 text, so it cannot be recorded: not restored",
                path_for_display(file)
            ))
        }),
        Err(SourceError::Missing { .. }) => Ok(None),
        Err(SourceError::NotRegular { kind, .. }) => Err(io::Error::other(format!(
            "{} is {kind}, not a regular file: not restored",
            path_for_display(file)
        ))),
        Err(e) => Err(io::Error::other(e.to_string())),
    }
}

/// Writes `text` over `file` (created if absent) without following a link
/// or opening anything but a regular file.
fn write_no_follow(file: &Path, text: &str) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut out = OpenOptions::new()
        .write(true)
        .create(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(file)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => io::Error::other(format!(
                "{} is a symlink: not restored through it",
                path_for_display(file)
            )),
            _ => io::Error::new(e.kind(), format!("{}: {e}", path_for_display(file))),
        })?;
    if !out.metadata()?.is_file() {
        return Err(io::Error::other(format!(
            "{} is not a regular file: not restored",
            path_for_display(file)
        )));
    }
    out.set_len(0)?;
    out.write_all(text.as_bytes())?;
    out.sync_data()
}

/// Whether `text` has the form [`source_hash`] gives: 16 lowercase hex digits.
pub fn is_source_hash(text: &str) -> bool {
    text.len() == 16 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn ends_with_newline(log: &mut File) -> io::Result<bool> {
    let len = log.seek(SeekFrom::End(0))?;
    if len == 0 {
        return Ok(true);
    }
    log.seek(SeekFrom::End(-1))?;
    let mut last = [0u8];
    log.read_exact(&mut last)?;
    Ok(last[0] == b'\n')
}

/// Whether `record` is a check whose every case passed.
fn passed(record: &HistoryRecord) -> bool {
    record.report.as_ref().is_some_and(CheckReport::all_passed)
}

/// The passing run with the highest speedup; among passing runs without a
/// speedup, the latest. `None` when nothing passed.
pub fn best_passing(records: &[HistoryRecord]) -> Option<&HistoryRecord> {
    let speedup = |r: &HistoryRecord| {
        r.report
            .as_ref()
            .and_then(|rep| rep.timing.as_ref())
            .and_then(|t| t.speedup.as_ref())
            .map_or(f64::NEG_INFINITY, |s| s.point)
    };
    records
        .iter()
        .filter(|r| passed(r))
        .fold(None, |best: Option<&HistoryRecord>, r| match best {
            Some(b) if speedup(b) > speedup(r) => Some(b),
            _ => Some(r),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_lines_are_skipped_and_counted_and_the_rest_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = HistoryStore::locate(dir.path());
        let kept = store.append_snapshot("out[0] = 1.0f;").expect("append");
        let mut log = fs::read(store.log_path()).expect("log");
        log.extend_from_slice(b"{\"unix_ms\": 1, \"source_hash\": \"caf\xe9\"}\n");
        log.extend_from_slice(b"{\"schema\": \"flashprof.history/99\", \"what\": 1}\n");
        log.extend_from_slice(
            b"{\"unix_ms\": 2, \"source_hash\": \"../../../etc/passwd\", \"report\": null}\n",
        );
        fs::write(store.log_path(), log).expect("write");
        store.append_snapshot("out[0] = 2.0f;").expect("append");
        let history = store.read().expect("read despite the bad lines");
        assert_eq!(history.unreadable_lines, 3);
        assert_eq!(history.records.len(), 2);
        assert_eq!(history.records[0].source_hash, kept.source_hash);
    }

    #[test]
    fn a_planted_huge_log_is_read_only_as_far_as_its_newest_part() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = HistoryStore::locate(dir.path());
        store.append_snapshot("out[0] = 0.0f;").expect("append");
        // 80 MiB of junk lines, then one real record: only the newest 64 MiB is read.
        let junk = format!("{{\"pad\": \"{}\"}}\n", "x".repeat(1 << 20));
        let mut log = fs::OpenOptions::new()
            .append(true)
            .open(store.log_path())
            .expect("log");
        for _ in 0..80 {
            std::io::Write::write_all(&mut log, junk.as_bytes()).expect("pad");
        }
        drop(log);
        let newest = store.append_snapshot("out[0] = 1.0f;").expect("append");
        let history = store.read().expect("read");
        assert!(
            history.older_bytes_not_read > 16 << 20,
            "{}",
            history.older_bytes_not_read
        );
        assert!(
            history.unreadable_lines <= 64,
            "{}",
            history.unreadable_lines
        );
        assert_eq!(
            history.records.len(),
            1,
            "the oldest record is among the bytes not read"
        );
        assert_eq!(history.records[0].source_hash, newest.source_hash);
    }

    #[test]
    fn only_a_hash_names_a_source() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = HistoryStore::locate(dir.path());
        let record = store.append_snapshot("out[0] = 1.0f;").expect("append");
        assert_eq!(
            store.source(&record.source_hash).expect("source"),
            "out[0] = 1.0f;"
        );
        fs::write(dir.path().join("secret.cu"), "secret").expect("write");
        for hostile in [
            "../../secret",
            "../secret",
            "0123456789ABCDEF",
            "",
            "0123456789abcdef0",
        ] {
            let error = store.source(hostile).expect_err(hostile);
            assert_eq!(error.kind(), io::ErrorKind::InvalidData, "{hostile}");
        }
    }

    /// A `.flashprof` folder that came with someone else's files: a FIFO
    /// or a link to a device in place of the log or of a stored source is
    /// refused at once, never read until it ends.
    #[test]
    fn a_fifo_or_a_device_in_the_store_is_refused_without_blocking() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = HistoryStore::locate(dir.path());
        let record = store.append_snapshot("out[0] = 1.0f;").expect("append");
        let source = store.source_path(&record.source_hash);
        fs::remove_file(&source).expect("remove");
        std::os::unix::fs::symlink("/dev/zero", &source).expect("symlink");
        let error = store
            .source(&record.source_hash)
            .expect_err("a link to a device");
        assert!(error.to_string().contains("symlink"), "{error}");

        fs::remove_file(store.log_path()).expect("remove");
        crate::sys::make_fifo(&store.log_path());
        let error = store.read().expect_err("a FIFO");
        assert!(error.to_string().contains("FIFO"), "{error}");
    }

    /// A student's folder the TA runs the TUI in: the log as a link to a
    /// TA file is never appended through.
    #[test]
    fn a_log_that_is_a_link_is_not_appended_through() {
        let dir = tempfile::tempdir().expect("tempdir");
        let bashrc = dir.path().join("bashrc");
        fs::write(&bashrc, "export PATH\n").expect("write");
        let file = dir.path().join("alice/k.cu");
        fs::create_dir_all(dir.path().join("alice/.flashprof")).expect("mkdir");
        let store = HistoryStore::beside(&file, "flash-prefill");
        std::os::unix::fs::symlink(&bashrc, store.log_path()).expect("symlink");
        let error = store.append_snapshot("rm -rf ~").expect_err("refused");
        assert!(
            error.to_string().contains("history.jsonl: it is a symlink"),
            "{error}"
        );
        assert_eq!(fs::read_to_string(&bashrc).expect("read"), "export PATH\n");
        let error = store.read().expect_err("refused");
        assert!(error.to_string().contains("symlink"), "{error}");
    }

    /// A planted `sources/<hash>.cu` link to a TA file is never read (so
    /// neither the diff nor a restore can show or copy it).
    #[test]
    fn a_stored_source_that_is_a_link_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let secret = dir.path().join("grades.csv");
        fs::write(&secret, "alice,0").expect("write");
        let store = HistoryStore::beside(&dir.path().join("alice/k.cu"), "flash-prefill");
        fs::create_dir_all(dir.path().join("alice")).expect("mkdir");
        let record = store.append_snapshot("out[0] = 1.0f;").expect("append");
        let source = store.source_path(&record.source_hash);
        fs::remove_file(&source).expect("remove");
        std::os::unix::fs::symlink(&secret, &source).expect("symlink");
        let error = store.source(&record.source_hash).expect_err("refused");
        assert!(error.to_string().contains("symlink"), "{error}");
        assert!(!error.to_string().contains("alice,0"), "{error}");
        // Recording the same text again replaces the link, never writes through it.
        store.append_snapshot("out[0] = 1.0f;").expect("append");
        assert_eq!(fs::read_to_string(&secret).expect("read"), "alice,0");
        assert_eq!(
            store.source(&record.source_hash).expect("read"),
            "out[0] = 1.0f;"
        );
    }

    /// `.flashprof` itself as a link (it would put the store anywhere), or
    /// a store of another user, is refused with its name.
    #[test]
    fn a_store_that_is_a_link_or_someone_elses_is_refused_by_name() {
        let dir = tempfile::tempdir().expect("tempdir");
        let elsewhere = dir.path().join("ta-home");
        fs::create_dir_all(&elsewhere).expect("mkdir");
        let alice = dir.path().join("alice");
        fs::create_dir_all(&alice).expect("mkdir");
        std::os::unix::fs::symlink(&elsewhere, alice.join(".flashprof")).expect("symlink");
        let store = HistoryStore::beside(&alice.join("k.cu"), "flash-prefill");
        for error in [
            store.append_snapshot("x").expect_err("refused"),
            store.read().expect_err("refused"),
        ] {
            let text = error.to_string();
            assert!(text.contains(".flashprof: it is a symlink"), "{text}");
        }
        assert_eq!(fs::read_dir(&elsewhere).expect("read").count(), 0);
        if crate::sys::effective_uid() == Some(0) {
            fs::remove_file(alice.join(".flashprof")).expect("remove");
            fs::create_dir(alice.join(".flashprof")).expect("mkdir");
            std::os::unix::fs::chown(alice.join(".flashprof"), Some(1001), None).expect("chown");
            let error = store.append_snapshot("x").expect_err("refused");
            assert!(error.to_string().contains("owned by uid 1001"), "{error}");
        }
    }

    /// A store reached through the watched folder's pin follows that folder,
    /// not its path: swapped for a link to another folder with a store of
    /// its own, the runs are refused, not written there, and the other
    /// store's records are not offered.
    #[test]
    fn a_store_through_a_pinned_folder_refuses_the_folder_swapped_in() {
        let dir = tempfile::tempdir().expect("tempdir");
        let alice = dir.path().join("alice");
        let other = dir.path().join("other");
        fs::create_dir_all(&alice).expect("mkdir");
        fs::create_dir_all(&other).expect("mkdir");
        let file = alice.join("k.cu");
        fs::write(&file, "mine").expect("write");
        let pinned = PinnedFolder::of(&file).expect("pinned");
        let store = HistoryStore::beside(&file, "flash-prefill").through(pinned);
        store
            .append_snapshot("mine")
            .expect("recorded in the pinned folder");
        let theirs = HistoryStore::beside(&other.join("k.cu"), "flash-prefill");
        theirs.append_snapshot("theirs").expect("the other store");

        fs::rename(&alice, dir.path().join("moved")).expect("moved away");
        std::os::unix::fs::symlink(&other, &alice).expect("a link in its place");
        for error in [
            store
                .append_snapshot("after the swap")
                .expect_err("refused"),
            store.read().expect_err("refused"),
        ] {
            assert!(
                error.to_string().contains("no longer the folder"),
                "{error}"
            );
        }
        let kept = theirs.read().expect("the other store").records;
        assert_eq!(kept.len(), 1, "nothing landed in the other folder's store");
        // By path alone, the same store would have written there.
        HistoryStore::beside(&file, "flash-prefill")
            .append_snapshot("by path")
            .expect("by path");
        assert_eq!(theirs.read().expect("the other store").records.len(), 2);
    }

    /// The restore writes the student's file itself, never through a link.
    #[test]
    fn a_restore_never_writes_through_a_link() {
        let dir = tempfile::tempdir().expect("tempdir");
        let target = dir.path().join("ta.txt");
        fs::write(&target, "mine").expect("write");
        let file = dir.path().join("k.cu");
        std::os::unix::fs::symlink(&target, &file).expect("symlink");
        let error = write_no_follow(&file, "student text").expect_err("refused");
        assert!(error.to_string().contains("symlink"), "{error}");
        assert_eq!(fs::read_to_string(&target).expect("read"), "mine");
    }
}
