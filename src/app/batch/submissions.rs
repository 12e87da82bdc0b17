//! Finding the submissions to grade, and reading each one safely.
//!
//! Input folders come from students, so nothing about them is trusted: file
//! names may hold spaces, newlines or invalid UTF-8, a symlink may point at
//! another student's work or at `/etc`, and a "kernel" may be a 4 GiB core
//! dump. Discovery never follows a link out of the input folder, never
//! descends into a linked folder (no loops), and gives every submission an
//! id that is unique even when two students chose the same file name.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::app::history::content_hash;
use crate::lab::definition::LabRef;
use crate::lab::source::{
    read_regular_file, FollowLinks, SourceError, StudentSource, MAX_SOURCE_BYTES,
};

/// One file to grade.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Submission {
    /// Unique within one grading run: the path relative to the input folder,
    /// or the path as given on the command line.
    pub id: String,
    /// Where to read it.
    pub path: PathBuf,
    /// Known at discovery to be unusable (a symlink leaving the input folder, say).
    pub refused: Option<String>,
    /// Whether a symlink at `path` is followed when reading: true for a link
    /// checked at discovery to stay inside the input folder and for files
    /// named on the command line; false otherwise (`O_NOFOLLOW`, so a file
    /// swapped for a link after discovery is not read).
    pub follow_links: bool,
}

/// A submission's bytes, or why it cannot be graded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedSubmission {
    /// Hash of the bytes read (for a file over the size limit, of its first
    /// bytes and its length), so an unchanged file is recognised on a rerun.
    pub content_hash: String,
    pub source: Result<StudentSource, String>,
}

/// Why discovery failed as a whole.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    #[error("{path}: {reason}")]
    Unreadable { path: String, reason: String },
}

/// Every `*.cu` under `dir`, recursively, sorted by id.
pub fn discover_dir(dir: &Path) -> Result<Vec<Submission>, DiscoveryError> {
    let unreadable = |path: &Path, e: std::io::Error| DiscoveryError::Unreadable {
        path: path.display().to_string(),
        reason: e.to_string(),
    };
    let root = dir.canonicalize().map_err(|e| unreadable(dir, e))?;
    let mut found = Vec::new();
    let mut pending = vec![root.clone()];
    // A subfolder that cannot be read becomes one refused row (the rest of
    // the class is still graded); only an unreadable input folder is fatal.
    let unreadable_folder = |folder: &Path, e: std::io::Error| {
        let relative = folder.strip_prefix(&root).unwrap_or(folder);
        Submission {
            id: format!("{}/", relative_id(relative)),
            path: dir.join(relative),
            refused: Some(format!(
                "a folder that cannot be read ({e}): the submissions in it were not graded"
            )),
            follow_links: false,
        }
    };
    while let Some(folder) = pending.pop() {
        let entries = match read_folder(&folder) {
            Ok(entries) => entries,
            Err(e) if folder == root => return Err(unreadable(&folder, e)),
            Err(e) => {
                found.push(unreadable_folder(&folder, e));
                continue;
            }
        };
        for entry in entries {
            let entry = match entry {
                Ok(entry) => entry,
                Err(e) => {
                    found.push(unreadable_folder(&folder, e));
                    break;
                }
            };
            let path = entry.path();
            let kind = match entry.file_type() {
                Ok(kind) => kind,
                Err(e) => {
                    found.push(unreadable_folder(&path, e));
                    continue;
                }
            };
            if kind.is_dir() {
                pending.push(path);
            } else if is_cuda_file(&path) {
                let refused = if kind.is_symlink() {
                    link_problem(&path, &root)
                } else {
                    None
                };
                let relative = path.strip_prefix(&root).unwrap_or(&path);
                found.push(Submission {
                    id: relative_id(relative),
                    // Shown as the grader named the folder, not canonicalised.
                    path: dir.join(relative),
                    refused,
                    follow_links: kind.is_symlink(),
                });
            }
        }
    }
    Ok(unique_sorted(found))
}

/// `read_dir`, with a failure that tests can plant (the tests run as root,
/// where permissions cannot make a folder unreadable).
fn read_folder(folder: &Path) -> std::io::Result<std::fs::ReadDir> {
    #[cfg(test)]
    if tests::UNREADABLE.with(|u| u.borrow().as_deref() == Some(folder)) {
        return Err(std::io::Error::from_raw_os_error(libc::EACCES));
    }
    std::fs::read_dir(folder)
}

/// The files named on the command line, in id order. The grader asked for
/// exactly these, so links among them are followed.
pub fn from_files(files: &[PathBuf]) -> Vec<Submission> {
    let named: BTreeSet<&PathBuf> = files.iter().collect();
    let found = named
        .into_iter()
        .map(|path| Submission {
            id: relative_id(path),
            path: path.clone(),
            refused: None,
            follow_links: true,
        })
        .collect();
    unique_sorted(found)
}

fn is_cuda_file(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("cu"))
}

/// Why a link inside the input folder cannot be followed, if it cannot.
fn link_problem(link: &Path, root: &Path) -> Option<String> {
    match link.canonicalize() {
        Err(e) => Some(format!("a symlink whose target cannot be read ({e})")),
        Ok(target) if !target.starts_with(root) => Some(format!(
            "a symlink to {} outside the input folder: not followed",
            target.display()
        )),
        Ok(target) if !target.is_file() => Some("a symlink to something that is not a file".into()),
        Ok(_) => None,
    }
}

/// A path as `/`-separated text; bytes that are not UTF-8 show as U+FFFD.
fn relative_id(path: &Path) -> String {
    path.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// Sorts by id and makes ids unique: two names that differ only in bytes
/// that are not UTF-8 would otherwise share one id.
fn unique_sorted(mut found: Vec<Submission>) -> Vec<Submission> {
    found.sort_by(|a, b| a.id.cmp(&b.id).then_with(|| a.path.cmp(&b.path)));
    let mut taken = BTreeSet::new();
    for submission in &mut found {
        let base = submission.id.clone();
        let mut n = 1;
        while !taken.insert(submission.id.clone()) {
            n += 1;
            submission.id = format!("{base}~{n}");
        }
    }
    found
}

impl Submission {
    /// Reads and checks the file for `lab`, never more than the size limit.
    pub fn load(&self, lab: LabRef) -> LoadedSubmission {
        let shown = self.path.display().to_string();
        let unreadable = |reason: String| LoadedSubmission {
            content_hash: content_hash(shown.as_bytes()),
            source: Err(reason),
        };
        if let Some(reason) = &self.refused {
            return unreadable(format!("{shown}: {reason}"));
        }
        let follow = if self.follow_links {
            FollowLinks::Yes
        } else {
            FollowLinks::No
        };
        // Never blocks: a FIFO or device node is refused without reading it.
        let (bytes, size) = match read_regular_file(&self.path, follow, MAX_SOURCE_BYTES) {
            Ok(read) => (read.bytes, read.size),
            Err(e) => return unreadable(e.to_string()),
        };
        let oversized = size > MAX_SOURCE_BYTES || bytes.len() as u64 > MAX_SOURCE_BYTES;
        let content_hash = if oversized {
            format!("{}+{size}", content_hash(&bytes))
        } else {
            content_hash(&bytes)
        };
        let source = if oversized {
            Err(SourceError::TooLarge {
                path: shown,
                size: size.max(bytes.len() as u64),
                limit: MAX_SOURCE_BYTES,
            }
            .to_string())
        } else {
            StudentSource::from_bytes(&shown, &bytes, lab).map_err(|e| e.to_string())
        };
        LoadedSubmission {
            content_hash,
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        /// A folder that [`read_folder`] fails to read, on this thread.
        pub(super) static UNREADABLE: std::cell::RefCell<Option<PathBuf>> =
            const { std::cell::RefCell::new(None) };
    }

    #[test]
    fn an_unreadable_subfolder_is_one_refused_row_and_the_rest_is_found() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical");
        for name in ["a.cu", "locked/b.cu", "open/c.cu"] {
            let path = root.join(name);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(&path, "out[0] = 0.0f;").expect("write");
        }
        UNREADABLE.with(|u| *u.borrow_mut() = Some(root.join("locked")));
        let found = discover_dir(&root).expect("discovery goes on");
        UNREADABLE.with(|u| *u.borrow_mut() = None);
        let ids: Vec<&str> = found.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["a.cu", "locked/", "open/c.cu"]);
        let reason = found[1].refused.as_deref().expect("refused");
        assert!(reason.contains("cannot be read"), "{reason}");
        assert!(reason.contains("not graded"), "{reason}");
        assert!(found[1]
            .load(crate::lab::flash_prefill::FLASH_PREFILL)
            .source
            .is_err());
        assert!(found[0].refused.is_none() && found[2].refused.is_none());
    }

    #[test]
    fn ids_are_unique_and_sorted() {
        let make = |id: &str, path: &str| Submission {
            id: id.into(),
            path: path.into(),
            refused: None,
            follow_links: false,
        };
        let out = unique_sorted(vec![
            make("b.cu", "x/b.cu"),
            make("a\u{fffd}.cu", "2"),
            make("a\u{fffd}.cu", "1"),
        ]);
        let ids: Vec<&str> = out.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["a\u{fffd}.cu", "a\u{fffd}.cu~2", "b.cu"]);
        assert_eq!(out[0].path, PathBuf::from("1"));
    }

    #[test]
    fn only_cu_files_count() {
        assert!(is_cuda_file(Path::new("a/b.cu")));
        assert!(is_cuda_file(Path::new("B.CU")));
        assert!(!is_cuda_file(Path::new("b.cuh")));
        assert!(!is_cuda_file(Path::new("cu")));
    }
}
