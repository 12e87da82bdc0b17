//! The files a grading run leaves in its output folder, all regenerated
//! from the journal: `gradebook.csv`, `report.json`, and under `runs/` each
//! submission's entry (`<id>.json`) and its feedback for the student
//! (`<id>.feedback.txt`).
//!
//! Each file is written to a temporary name and renamed into place, so a
//! reader (or a crash) never sees half a gradebook. File names under `runs/`
//! are derived from ids but reduced to a safe alphabet plus a hash, so no id
//! (`../../x`, a newline, a leading dash) can name a file outside the folder.

use std::path::{Path, PathBuf};

use super::feedback;
use super::journal::JournalEntry;
use crate::app::batch::gradebook::{render_csv, render_json};
use crate::app::history::content_hash;

pub const GRADEBOOK_CSV: &str = "gradebook.csv";
pub const REPORT_JSON: &str = "report.json";
pub const RUNS_DIR: &str = "runs";

/// Longest part of an id kept in a run file's name.
const NAME_CHARS: usize = 80;

/// `runs/<safe id>-<hash>.json` for an id.
pub fn run_file_name(id: &str) -> String {
    format!("{}.json", run_file_stem(id))
}

/// `runs/<safe id>-<hash>.feedback.txt`, beside the id's run file.
pub fn feedback_file_name(id: &str) -> String {
    format!("{}.feedback.txt", run_file_stem(id))
}

/// `<safe id>-<hash>`: the id in a safe alphabet, and a hash of it that
/// keeps apart the ids that share a safe form.
fn run_file_stem(id: &str) -> String {
    let safe: String = id
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '.' | '_' | '-' => c,
            _ => '_',
        })
        .take(NAME_CHARS)
        .collect();
    let safe = safe.trim_start_matches(['.', '-']);
    format!("{safe}-{}", &content_hash(id.as_bytes())[..8])
}

/// Writes `text` to `path` durably: to a temporary file of a unique name in
/// the same folder (created exclusively, so nothing planted under that name
/// is followed or overwritten), synced, renamed into place, and the folder
/// synced so the rename itself survives a power cut.
pub fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    write_replacing(path, text, Durability::Synced)
}

/// Whether a file written into place is synced to disk before it is renamed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Durability {
    Synced,
    /// Renamed into place unsynced: for files regenerated from the synced
    /// journal on every run (`runs/`), where a sync per file cost a class of
    /// 10,000 a minute. After a power cut such a file may be short; the
    /// next run writes it again.
    Regenerated,
}

fn write_replacing(path: &Path, text: &str, durability: Durability) -> std::io::Result<()> {
    use std::io::Write;
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let temporary: PathBuf = folder.join(format!(
        ".{name}.{}.{}.{nanos}.tmp",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temporary)?;
        file.write_all(text.as_bytes())?;
        if durability == Durability::Synced {
            file.sync_all()?;
        }
        std::fs::rename(&temporary, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written?;
    match durability {
        Durability::Synced => sync_folder(folder),
        Durability::Regenerated => Ok(()),
    }
}

/// Makes a folder's entries (a rename, a new file) durable.
pub fn sync_folder(folder: &Path) -> std::io::Result<()> {
    std::fs::File::open(folder)?.sync_all()
}

/// Writes one submission's entry and its feedback under `runs/` (not
/// synced: the journal holds the entry durably, and every run writes these
/// files again).
fn write_run_files(out_dir: &Path, entry: &JournalEntry) -> std::io::Result<()> {
    let runs = out_dir.join(RUNS_DIR);
    std::fs::create_dir_all(&runs)?;
    let text = serde_json::to_string_pretty(entry)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    write_replacing(
        &runs.join(run_file_name(&entry.id)),
        &text,
        Durability::Regenerated,
    )?;
    write_replacing(
        &runs.join(feedback_file_name(&entry.id)),
        &feedback::render(entry),
        Durability::Regenerated,
    )
}

/// Regenerates every output file from the chosen entries (one per id).
pub fn write_outputs(
    out_dir: &Path,
    entries: &[JournalEntry],
    warnings: &[String],
) -> std::io::Result<()> {
    for entry in entries {
        write_run_files(out_dir, entry)?;
    }
    if !entries.is_empty() {
        sync_folder(&out_dir.join(RUNS_DIR))?;
    }
    write_atomically(&out_dir.join(GRADEBOOK_CSV), &render_csv(entries))?;
    write_atomically(&out_dir.join(REPORT_JSON), &render_json(entries, warnings))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_go_through_a_fresh_temporary_never_a_planted_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = dir.path().join("out");
        std::fs::create_dir_all(&out).expect("mkdir");
        let outside = dir.path().join("outside.txt");
        std::fs::write(&outside, "untouched").expect("write");
        // The old fixed temporary name, planted as a link out of the folder.
        std::os::unix::fs::symlink(&outside, out.join("gradebook.csv.tmp")).expect("symlink");
        write_atomically(&out.join(GRADEBOOK_CSV), "a,b\r\n").expect("written");
        assert_eq!(
            std::fs::read_to_string(&outside).expect("read"),
            "untouched"
        );
        assert_eq!(
            std::fs::read_to_string(out.join(GRADEBOOK_CSV)).expect("read"),
            "a,b\r\n"
        );
        let names: Vec<String> = std::fs::read_dir(&out)
            .expect("list")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 2, "no temporary left behind: {names:?}");
    }

    #[test]
    fn run_file_names_stay_in_the_folder_and_stay_distinct() {
        let names: Vec<String> = [
            "../../etc/passwd",
            "a/b.cu",
            "a_b.cu",
            "-x\n.cu",
            ".hidden.cu",
        ]
        .iter()
        .map(|id| run_file_name(id))
        .collect();
        for name in &names {
            assert!(!name.contains('/') && !name.contains('\n'), "{name}");
            assert!(!name.starts_with(['.', '-']), "{name}");
        }
        // `a/b.cu` and `a_b.cu` share a safe form; the hash keeps them apart.
        assert_ne!(names[1], names[2]);
        assert!(names[0].ends_with(".json") && names[0].contains("etc_passwd-"));
        // The feedback lies beside the run file, named the same way.
        let id = "a/b.cu";
        assert_eq!(
            feedback_file_name(id).strip_suffix(".feedback.txt"),
            run_file_name(id).strip_suffix(".json")
        );
    }
}
