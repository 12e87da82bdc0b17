//! The files a grading run leaves in its output folder, all regenerated
//! from the journal: `gradebook.csv`, `report.json` and `runs/<id>.json`.
//!
//! Each file is written to a temporary name and renamed into place, so a
//! reader (or a crash) never sees half a gradebook. File names under `runs/`
//! are derived from ids but reduced to a safe alphabet plus a hash, so no id
//! (`../../x`, a newline, a leading dash) can name a file outside the folder.

use std::path::{Path, PathBuf};

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
    let safe: String = id
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '.' | '_' | '-' => c,
            _ => '_',
        })
        .take(NAME_CHARS)
        .collect();
    let safe = safe.trim_start_matches(['.', '-']);
    format!("{safe}-{}.json", &content_hash(id.as_bytes())[..8])
}

/// Writes `text` to `path` through a temporary file in the same folder.
pub fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(".tmp");
    let temporary = PathBuf::from(temporary);
    std::fs::write(&temporary, text)?;
    std::fs::rename(&temporary, path)
}

/// Writes one submission's entry under `runs/`.
pub fn write_run_file(out_dir: &Path, entry: &JournalEntry) -> std::io::Result<()> {
    let runs = out_dir.join(RUNS_DIR);
    std::fs::create_dir_all(&runs)?;
    let text = serde_json::to_string_pretty(entry)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    write_atomically(&runs.join(run_file_name(&entry.id)), &text)
}

/// Regenerates every output file from the chosen entries (one per id).
pub fn write_outputs(
    out_dir: &Path,
    entries: &[JournalEntry],
    warnings: &[String],
) -> std::io::Result<()> {
    for entry in entries {
        write_run_file(out_dir, entry)?;
    }
    write_atomically(&out_dir.join(GRADEBOOK_CSV), &render_csv(entries))?;
    write_atomically(&out_dir.join(REPORT_JSON), &render_json(entries, warnings))
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
