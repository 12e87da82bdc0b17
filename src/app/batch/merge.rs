//! Joining the journals of several shards into one.
//!
//! Shards of one job never overlap, but a rerun, a resubmitted array task
//! or a TA merging yesterday's folder with today's can bring the same id
//! twice. The newest entry wins, with ties broken by content, so the result
//! does not depend on the order the folders were named in. Anything that
//! suggests the shards were not one job (two seeds, two versions of one
//! file, two sets of limits) is reported rather than silently resolved away.
//! Two things are refused outright, since a shard is outside input (a
//! student may have written into one): shards of different labs, and one
//! file graded the same way (same content, lab, cases, mode and seed) with
//! two different verdicts, which no rerun produces and a forged row does.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use super::journal::{self, JournalEntry, JOURNAL_FILE};
use crate::display::path_for_display;
use crate::outcome::Verdict;

/// The merged entries and what looked wrong.
#[derive(Debug, Default)]
pub struct Merged {
    /// One entry per id, in id order.
    pub entries: Vec<JournalEntry>,
    pub warnings: Vec<String>,
}

/// Why shards were not merged.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(
        "the shards graded different labs ({labs}): a gradebook holds one lab; merge each \
         lab's shards on their own; nothing merged"
    )]
    Labs { labs: String },
    #[error(
        "{id}: two shards hold the same file (content {hash}) graded the same way with \
         different verdicts ({first} and {second}), which a rerun does not produce: a row was \
         forged or a shard is damaged; nothing merged"
    )]
    Forged {
        id: String,
        hash: String,
        first: String,
        second: String,
    },
    #[error(
        "{path}: {why}; a shard's rows decide grades, so only shards in folders of yours that \
         no one else can write are merged; nothing merged"
    )]
    Untrusted { path: String, why: String },
}

/// Reads `folder/journal.jsonl` of every folder and merges them.
pub fn merge_folders(folders: &[PathBuf]) -> Result<Merged, MergeError> {
    let mut all = Vec::new();
    let mut warnings = Vec::new();
    for folder in folders {
        let path = folder.join(JOURNAL_FILE);
        let no_journal = || {
            format!(
                "{}: no journal, nothing merged from it",
                path_for_display(folder)
            )
        };
        // A folder that is not there holds no rows to trust or refuse.
        if std::fs::symlink_metadata(folder).is_err() {
            warnings.push(no_journal());
            continue;
        }
        // The journal is reached through the folder checked, held open: a
        // folder swapped in after the check is not the one read.
        let opened = open_trusted(folder)?;
        let journal =
            PathBuf::from(format!("/proc/self/fd/{}", opened.as_raw_fd())).join(JOURNAL_FILE);
        let Some(meta) = std::fs::symlink_metadata(&journal)
            .ok()
            .filter(|meta| meta.is_file())
        else {
            warnings.push(no_journal());
            continue;
        };
        if let Some(why) = super::untrusted_grade_file(&meta) {
            return Err(MergeError::Untrusted {
                path: path_for_display(&path),
                why,
            });
        }
        let contents = journal::read(&journal)?;
        if contents.unreadable_lines > 0 {
            warnings.push(format!(
                "{}: {} unreadable journal lines skipped",
                path_for_display(&path),
                contents.unreadable_lines
            ));
        }
        all.extend(contents.entries);
    }
    let mut merged = merge_entries(all)?;
    warnings.append(&mut merged.warnings);
    merged.warnings = warnings;
    Ok(merged)
}

/// A shard folder opened, when no one but this user could have written
/// into it: reached only through links flashprof follows, the folder the
/// walk arrived at, this user's, writable by no one else (`grade`'s rule
/// for its own output folder).
fn open_trusted(folder: &Path) -> Result<std::fs::File, MergeError> {
    let untrusted = |why: String| MergeError::Untrusted {
        path: path_for_display(folder),
        why,
    };
    let opened =
        crate::sys::trust::open_walked_folder(folder).map_err(|e| untrusted(e.to_string()))?;
    match super::untrusted_grade_file(&opened.metadata()?) {
        Some(why) => Err(untrusted(why)),
        None => Ok(opened),
    }
}

/// Merges entries from any number of journals.
pub fn merge_entries(entries: Vec<JournalEntry>) -> Result<Merged, MergeError> {
    // Journals written before labs were named say none.
    let labs: BTreeSet<&str> = entries
        .iter()
        .map(|e| e.lab.as_str())
        .filter(|lab| !lab.is_empty())
        .collect();
    if labs.len() > 1 {
        let labs: Vec<&str> = labs.into_iter().collect();
        return Err(MergeError::Labs {
            labs: crate::display::line_for_display(&labs.join(", ")).into_owned(),
        });
    }
    let mut by_id: BTreeMap<String, Vec<JournalEntry>> = BTreeMap::new();
    for entry in entries {
        by_id.entry(entry.id.clone()).or_default().push(entry);
    }
    for (id, versions) in &by_id {
        refuse_forged(id, versions)?;
    }
    let mut warnings = Vec::new();
    let seeds: BTreeSet<u64> = by_id.values().flatten().map(|e| e.seed).collect();
    if seeds.len() > 1 {
        let listed: Vec<String> = seeds.iter().map(u64::to_string).collect();
        warnings.push(format!(
            "the shards used different seeds ({}): their inputs differ, so results are not comparable case by case",
            listed.join(", ")
        ));
    }
    let limits: BTreeSet<journal::GradingLimits> =
        by_id.values().flatten().filter_map(|e| e.limits).collect();
    if limits.len() > 1 {
        let listed: Vec<String> = limits.iter().map(ToString::to_string).collect();
        warnings.push(format!(
            "the shards ran under different limits ({}): a case timeout or compile limit that \
             cut a row short in one might not have in another",
            listed.join("; ")
        ));
    }
    let mut chosen = Vec::with_capacity(by_id.len());
    for (id, mut versions) in by_id {
        let hashes: BTreeSet<&str> = versions.iter().map(|e| e.content_hash.as_str()).collect();
        if hashes.len() > 1 {
            warnings.push(format!(
                "{id}: {} different file contents were graded; the newest is kept",
                hashes.len()
            ));
        }
        versions.sort_by_cached_key(|e| {
            (
                e.finished_unix_ms,
                e.content_hash.clone(),
                serde_json::to_string(e).unwrap_or_default(),
            )
        });
        chosen.extend(versions.pop());
    }
    Ok(Merged {
        entries: chosen,
        warnings,
    })
}

/// Two entries of `id` for the same content graded the same way whose
/// verdicts differ: a grader-side `error` is retried and may differ from
/// its retry, nothing else does.
fn refuse_forged(id: &str, versions: &[JournalEntry]) -> Result<(), MergeError> {
    let same_grading = |a: &JournalEntry, b: &JournalEntry| {
        // A rerun under other limits or timing rules may rightly differ.
        (&a.content_hash, &a.lab, &a.cases_hash, a.mode, a.seed)
            == (&b.content_hash, &b.lab, &b.cases_hash, b.mode, b.seed)
            && (a.limits, a.timing_rules) == (b.limits, b.timing_rules)
    };
    let counted = |e: &&JournalEntry| e.status != Verdict::Error;
    for (i, a) in versions.iter().enumerate().filter(|(_, e)| counted(e)) {
        for b in versions[i + 1..].iter().filter(counted) {
            if same_grading(a, b) && a.status != b.status {
                let shown = |text: &str| crate::display::line_for_display(text).into_owned();
                return Err(MergeError::Forged {
                    id: shown(id),
                    // Planted text: cut by characters, never inside one.
                    hash: shown(&a.content_hash.chars().take(12).collect::<String>()),
                    first: a.status.word().to_owned(),
                    second: b.status.word().to_owned(),
                });
            }
        }
    }
    Ok(())
}

/// True when `path` is one of the folders being merged (merging into a source is refused).
pub fn is_among(path: &Path, folders: &[PathBuf]) -> bool {
    let canonical = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let target = canonical(path);
    folders.iter().any(|f| canonical(f) == target)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::batch::journal::GradeMode;
    use crate::outcome::Verdict;

    fn entry(id: &str, hash: &str, seed: u64, at: u64) -> JournalEntry {
        JournalEntry {
            id: id.into(),
            file: id.into(),
            content_hash: hash.into(),
            lab: "flash-prefill".into(),
            cases_hash: "c1".into(),
            mode: GradeMode::CompileOnly,
            seed,
            status: Verdict::Compiled,
            gate: None,
            error: None,
            report: None,
            finished_unix_ms: at,
            timing_rules: crate::protocol::TIMING_RULES,
            limits: None,
        }
    }

    #[test]
    fn newest_wins_whatever_the_order() {
        let a = vec![entry("x.cu", "1", 5, 10), entry("y.cu", "1", 5, 10)];
        let b = vec![entry("x.cu", "2", 5, 20)];
        let forward = merge_entries(a.iter().chain(&b).cloned().collect()).expect("merged");
        let backward = merge_entries(b.iter().chain(&a).cloned().collect()).expect("merged");
        assert_eq!(forward.entries, backward.entries);
        assert_eq!(forward.entries.len(), 2);
        assert_eq!(forward.entries[0].content_hash, "2");
        assert!(forward
            .warnings
            .iter()
            .any(|w| w.starts_with("x.cu: 2 different")));
    }

    #[test]
    fn different_seeds_are_reported() {
        let merged = merge_entries(vec![entry("x.cu", "1", 5, 1), entry("y.cu", "1", 6, 1)])
            .expect("merged");
        assert!(merged
            .warnings
            .iter()
            .any(|w| w.contains("different seeds (5, 6)")));
    }

    #[test]
    fn shards_under_different_limits_are_reported() {
        let under = |id: &str, case_timeout_ms| JournalEntry {
            limits: Some(journal::GradingLimits {
                case_timeout_ms,
                compile_timeout_s: 60,
                compile_memory_mb: 4096,
            }),
            ..entry(id, "1", 5, 1)
        };
        let same = merge_entries(vec![
            under("x.cu", 5000),
            under("y.cu", 5000),
            entry("z.cu", "1", 5, 1),
        ])
        .expect("merged");
        assert!(same.warnings.is_empty(), "{:?}", same.warnings);
        let merged =
            merge_entries(vec![under("x.cu", 5000), under("y.cu", 10_000)]).expect("merged");
        assert!(
            merged.warnings.iter().any(|w| w.contains(
                "different limits (case timeout 5 s, compile 60 s and 4096 MiB; case timeout 10 s"
            )),
            "{:?}",
            merged.warnings
        );
    }

    #[test]
    fn shards_of_two_labs_are_refused() {
        let mut other = entry("y.cu", "1", 5, 10);
        other.lab = "paged-decode".into();
        let refused = merge_entries(vec![entry("x.cu", "1", 5, 10), other]).expect_err("two labs");
        assert!(matches!(refused, MergeError::Labs { .. }), "{refused}");
        assert!(
            refused.to_string().contains("flash-prefill, paged-decode"),
            "{refused}"
        );
    }

    #[test]
    fn the_same_file_graded_the_same_way_with_another_verdict_is_a_forged_row() {
        let real = entry("alice.cu", "h1", 5, 10);
        let mut forged = entry("alice.cu", "h1", 5, 20);
        forged.status = Verdict::Passed;
        let refused = merge_entries(vec![real.clone(), forged]).expect_err("forged");
        // Byte 12 of this planted hash falls inside a character.
        let mut planted = entry("bob.cu", "aééééééééé", 5, 10);
        planted.status = Verdict::Passed;
        let forged_text = entry("bob.cu", "aééééééééé", 5, 20);
        let cut = merge_entries(vec![planted, forged_text]).expect_err("forged, text cut whole");
        assert!(cut.to_string().contains("aéééééé"), "{cut}");
        assert!(matches!(refused, MergeError::Forged { .. }), "{refused}");
        assert!(refused.to_string().contains("alice.cu"), "{refused}");
        // A grader-side error retried, another seed or another text is no forgery.
        let mut error = entry("alice.cu", "h1", 5, 5);
        error.status = Verdict::Error;
        let mut reseeded = entry("alice.cu", "h1", 6, 30);
        reseeded.status = Verdict::Passed;
        let mut edited = entry("alice.cu", "h2", 5, 40);
        edited.status = Verdict::Passed;
        let merged = merge_entries(vec![error, real, reseeded, edited]).expect("no forgery");
        assert_eq!(merged.entries.len(), 1);
        assert_eq!(merged.entries[0].content_hash, "h2");
    }

    #[test]
    fn a_shard_or_journal_others_could_write_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().expect("temp dir");
        let shard = |name: &str| {
            let folder = root.path().join(name);
            std::fs::create_dir(&folder).expect("shard folder");
            std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o755))
                .expect("chmod");
            journal::JournalWriter::open(&folder.join(JOURNAL_FILE))
                .expect("journal")
                .append(&entry(name, "h", 7, 1))
                .expect("row");
            folder
        };
        let (mine, open, loose) = (shard("mine"), shard("open"), shard("loose"));
        // A journal left group-writable (by an older flashprof under a
        // permissive umask) is made its owner's alone when grade opens it.
        let mode = |p: &Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
        let journal = mine.join(JOURNAL_FILE);
        std::fs::set_permissions(&journal, std::fs::Permissions::from_mode(0o666)).expect("chmod");
        drop(journal::JournalWriter::open(&journal).expect("reopened"));
        assert_eq!(mode(&journal), 0o644);
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        std::fs::set_permissions(
            loose.join(JOURNAL_FILE),
            std::fs::Permissions::from_mode(0o664),
        )
        .expect("chmod");

        let merged = merge_folders(std::slice::from_ref(&mine)).expect("merged");
        assert_eq!(merged.entries.len(), 1);
        for (folder, why) in [(&open, "writable by"), (&loose, "writable by group")] {
            let refused = merge_folders(&[mine.clone(), folder.clone()]).expect_err("refused");
            let text = refused.to_string();
            assert!(matches!(refused, MergeError::Untrusted { .. }), "{text}");
            assert!(
                text.contains(why) && text.contains("nothing merged"),
                "{text}"
            );
        }
        // A folder that is not there is a warning, as before.
        let merged = merge_folders(&[mine.clone(), root.path().join("gone")]).expect("merged");
        assert!(
            merged
                .warnings
                .iter()
                .any(|w| w.contains("gone: no journal")),
            "{:?}",
            merged.warnings
        );
    }
}
