//! Finding the submissions to grade, and reading each one safely.
//!
//! Input folders come from students, so nothing about them is trusted: file
//! names may hold spaces, newlines or invalid UTF-8, a symlink may point at
//! another student's work or at `/etc`, and a "kernel" may be a 4 GiB core
//! dump. Discovery never follows a link out of the input folder, never
//! descends into a linked folder (no loops), and gives every submission an
//! id that is unique even when two students chose the same file name.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::app::history::content_hash;
use crate::app::history::nofollow::Folder;
use crate::display::path_for_display;
use crate::lab::definition::LabRef;
use crate::lab::source::{
    read_regular_file_named, untrusted_link_reason, BoundedRead, FollowLinks, SourceError,
    StudentSource, MAX_SOURCE_BYTES,
};

/// One file to grade.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Submission {
    /// Unique within one grading run: the path relative to the input folder,
    /// or the path as given on the command line.
    pub id: String,
    /// The file as the grader named it, for messages and the gradebook.
    pub path: PathBuf,
    /// Where it is read, or why it is not (known at discovery to be
    /// unusable: a symlink leaving its folder, say).
    pub place: Result<Place, String>,
}

/// Where a submission's bytes are: a path inside a folder, walked one
/// component at a time with no link followed (`O_NOFOLLOW` at every step),
/// so a link retargeted or a folder swapped for a link after discovery
/// is refused rather than read.
#[derive(Debug, Clone)]
pub struct Place {
    base: Base,
    /// Plain names only; for a link checked at discovery to stay inside,
    /// the path of its target.
    relative: PathBuf,
}

#[derive(Debug, Clone)]
enum Base {
    /// The input folder, held open from discovery to the last read.
    Open(Arc<Folder>),
    /// The folder a file was named in on the command line, opened again
    /// (its last component with no link followed) for each read, so a
    /// class of files named one by one holds no descriptors.
    Named(PathBuf),
}

impl PartialEq for Place {
    fn eq(&self, other: &Self) -> bool {
        let base = |p: &Self| match &p.base {
            Base::Open(folder) => folder.path.clone(),
            Base::Named(path) => path.clone(),
        };
        base(self) == base(other) && self.relative == other.relative
    }
}

impl Eq for Place {}

impl Place {
    /// Reads the file, never more than the size limit and never through a link.
    fn read(&self, shown: &Path) -> Result<BoundedRead, SourceError> {
        let unreadable = |e: std::io::Error| match e {
            // A link on the way that flashprof does not follow, in check's words.
            _ if refused_link(&e) => SourceError::UntrustedLink {
                path: shown.display().to_string(),
                link: e.to_string(),
            },
            _ => SourceError::Unreadable {
                path: shown.display().to_string(),
                reason: e.to_string(),
            },
        };
        let missing = || SourceError::Missing {
            path: shown.display().to_string(),
        };
        let named;
        let base: &Folder = match &self.base {
            Base::Open(folder) => folder,
            Base::Named(path) => {
                named = named_folder(path)
                    .map_err(unreadable)?
                    .ok_or_else(missing)?;
                &named
            }
        };
        let mut parts: Vec<&OsStr> = self.relative.iter().collect();
        let name = parts.pop().ok_or_else(missing)?;
        let mut walked: Option<Folder> = None;
        for part in parts {
            let folder = walked.as_ref().unwrap_or(base);
            walked = Some(
                folder
                    .sub(part, false, false)
                    .map_err(unreadable)?
                    .ok_or_else(missing)?,
            );
        }
        let folder = walked.as_ref().unwrap_or(base);
        read_regular_file_named(&folder.at(name), shown, FollowLinks::No, MAX_SOURCE_BYTES)
    }
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

/// What discovery found in a folder.
#[derive(Debug)]
pub struct Discovered {
    pub submissions: Vec<Submission>,
    /// `*.cu` files left out because they sit in a hidden folder
    /// (`.flashprof/`, whose `sources/` keeps every save a student made in
    /// the TUI, `.git/`, ...): never submissions.
    pub skipped_hidden: usize,
}

/// A folder still to open: its parent (open), its name there, its path
/// below the input folder, and whether it is inside a hidden folder.
struct Pending {
    parent: Arc<Folder>,
    name: PathBuf,
    relative: PathBuf,
    hidden: bool,
}

/// Every `*.cu` under `dir`, recursively, sorted by id; hidden folders are
/// skipped and their `*.cu` files counted. Every folder is opened beneath
/// the one that listed it with no link followed.
pub fn discover_dir(dir: &Path) -> Result<Discovered, DiscoveryError> {
    let unreadable = |path: &Path, e: std::io::Error| DiscoveryError::Unreadable {
        path: path_for_display(path),
        reason: reason_of(&e),
    };
    // Reached through links flashprof follows only, as `check` reaches a file.
    let root_folder = Arc::new(Folder::walked(dir).map_err(|e| unreadable(dir, e))?);
    let root = root_folder.resolved().map_err(|e| unreadable(dir, e))?;
    let mut found = Vec::new();
    let mut skipped_hidden = 0;
    // A subfolder that cannot be read becomes one refused row (the rest of
    // the class is still graded); only an unreadable input folder is fatal.
    let unreadable_folder = |relative: &Path, e: std::io::Error| Submission {
        id: format!("{}/", relative_id(relative)),
        path: dir.join(relative),
        place: Err(format!(
            "a folder that cannot be read ({e}): the submissions in it were not graded"
        )),
    };
    let mut pending: Vec<(Arc<Folder>, PathBuf, bool)> =
        vec![(root_folder.clone(), PathBuf::new(), false)];
    let mut to_open: Vec<Pending> = Vec::new();
    loop {
        let Some((folder, relative, hidden)) = pending.pop() else {
            // Folders are opened only when their turn comes, so at most
            // one chain of them is open at a time, whatever the class's width.
            let Some(next) = to_open.pop() else {
                break;
            };
            match next.parent.sub(&next.name, false, false) {
                Ok(Some(opened)) => pending.push((Arc::new(opened), next.relative, next.hidden)),
                Ok(None) => {}
                Err(_) if next.hidden => {}
                Err(e) => found.push(unreadable_folder(&next.relative, e)),
            }
            continue;
        };
        let entries = match read_folder(&folder, &root.join(&relative)) {
            Ok(entries) => entries,
            Err(e) if relative.as_os_str().is_empty() => return Err(unreadable(dir, e)),
            Err(_) if hidden => continue,
            Err(e) => {
                found.push(unreadable_folder(&relative, e));
                continue;
            }
        };
        for entry in entries {
            let entry = match entry {
                Ok(entry) => entry,
                Err(_) if hidden => break,
                Err(e) => {
                    found.push(unreadable_folder(&relative, e));
                    break;
                }
            };
            let name = entry.file_name();
            let path = relative.join(&name);
            let kind = match entry.file_type() {
                Ok(kind) => kind,
                Err(_) if hidden => continue,
                Err(e) => {
                    found.push(unreadable_folder(&path, e));
                    continue;
                }
            };
            if kind.is_dir() {
                to_open.push(Pending {
                    parent: folder.clone(),
                    name: name.clone().into(),
                    relative: path,
                    hidden: hidden || name.as_encoded_bytes().starts_with(b"."),
                });
            } else if is_cuda_file(&path) && hidden {
                skipped_hidden += 1;
            } else if is_cuda_file(&path) {
                let place = if kind.is_symlink() {
                    followed_link(&dir.join(&path), &folder.at(&name)).and_then(|walked| {
                        link_target(&folder.at(&name), walked, &root, "the input folder")
                    })
                } else {
                    Ok(path.clone())
                };
                found.push(Submission {
                    id: relative_id(&path),
                    // Shown as the grader named the folder, not canonicalised.
                    path: dir.join(&path),
                    place: place.map(|relative| Place {
                        base: Base::Open(root_folder.clone()),
                        relative,
                    }),
                });
            }
        }
    }
    Ok(Discovered {
        submissions: unique_sorted(found),
        skipped_hidden,
    })
}

/// The listing of an open folder, with a failure that tests can plant (the
/// tests run as root, where permissions cannot make a folder unreadable).
fn read_folder(folder: &Folder, logical: &Path) -> std::io::Result<std::fs::ReadDir> {
    #[cfg(test)]
    if tests::UNREADABLE.with(|u| u.borrow().as_deref() == Some(logical)) {
        return Err(std::io::Error::from_raw_os_error(libc::EACCES));
    }
    #[cfg(not(test))]
    let _ = logical;
    std::fs::read_dir(folder.at(""))
}

/// The files named on the command line, in id order. Each is read beneath
/// the folder it was named in; a link is followed only to a file inside
/// that folder.
pub fn from_files(files: &[PathBuf]) -> Vec<Submission> {
    let named: BTreeSet<&PathBuf> = files.iter().collect();
    let found = named
        .into_iter()
        .map(|path| Submission {
            id: relative_id(path),
            path: path.clone(),
            place: named_place(path),
        })
        .collect();
    unique_sorted(found)
}

/// Where a file named on the command line is read, or why it is refused.
fn named_place(path: &Path) -> Result<Place, String> {
    let within = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = path.file_name().ok_or("names no file")?;
    let folder = named_folder(within)
        .map_err(|e| reason_of(&e))?
        .ok_or_else(|| format!("{}: no such folder", path_for_display(within)))?;
    let entry = folder.at(name);
    let walked = followed_link(path, &entry)?;
    let is_link = std::fs::symlink_metadata(&entry).is_ok_and(|m| m.file_type().is_symlink());
    let relative = if is_link {
        let real_folder = folder.resolved().map_err(|e| e.to_string())?;
        let named_in = format!("the folder it was named in ({})", path_for_display(within));
        link_target(&entry, walked, &real_folder, &named_in)?
    } else {
        PathBuf::from(name)
    };
    Ok(Place {
        base: Base::Named(within.to_path_buf()),
        relative,
    })
}

fn is_cuda_file(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("cu"))
}

/// Whether `e` is the walk's refusal of a link ([`Folder::walked`]), not
/// the system's own "permission denied".
fn refused_link(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::PermissionDenied && e.raw_os_error().is_none()
}

/// Why a folder could not be opened: a refused link in `check`'s words,
/// anything else as the system says it.
fn reason_of(e: &std::io::Error) -> String {
    match refused_link(e) {
        true => untrusted_link_reason(&e.to_string()),
        false => e.to_string(),
    }
}

/// The folder a file was named in, opened with its last component not
/// followed (a named folder that is a link is refused: a class unpacked by
/// the TA holds the TA's links to wherever a student's archive pointed)
/// and every link above it one flashprof follows, both opens reaching the
/// same folder. Used at discovery and again at each read.
fn named_folder(within: &Path) -> std::io::Result<Option<Folder>> {
    let Some(folder) = Folder::open(within, false, false)? else {
        return Ok(None);
    };
    let walked = Folder::walked(within)?;
    if walked.identity()? != folder.identity()? {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!("{} changed while it was opened", path_for_display(within)),
        ));
    }
    Ok(Some(folder))
}

/// What the walk to `path` (a submission's path as the grader named it)
/// reached, when every link on the way is one flashprof follows, decided
/// by ownership as `check`, `compare`, `bench` and the TUI decide it
/// ([`crate::sys::trust::check_links`]), and the walk reached what
/// `through` (the entry, reached through its open folder) reaches, so a
/// folder renamed between the two is refused; otherwise why not, in their
/// words. A link that passes is still followed only to a file inside its
/// folder ([`link_target`]): a class folder's links were made by students,
/// whoever unpacked them.
fn followed_link(path: &Path, through: &Path) -> Result<Option<(u64, u64)>, String> {
    let walked =
        crate::sys::trust::check_links(path).map_err(|link| untrusted_link_reason(&link))?;
    match walked == identity(through) {
        true => Ok(walked),
        false => Err(untrusted_link_reason(&format!(
            "{} changed while its links were checked",
            path_for_display(path)
        ))),
    }
}

/// The device and inode of what `path` reaches, links followed.
fn identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// The target of `link` below `root` (canonical), or why it is not
/// followed; `root_named` is how the refusal names `root`. `walked`: what
/// the link check reached, which the target resolved again must still be.
fn link_target(
    link: &Path,
    walked: Option<(u64, u64)>,
    root: &Path,
    root_named: &str,
) -> Result<PathBuf, String> {
    let target = link
        .canonicalize()
        .map_err(|e| format!("a symlink whose target cannot be read ({e})"))?;
    if identity(&target) != walked {
        return Err(untrusted_link_reason(&format!(
            "{} changed while its links were checked",
            path_for_display(link)
        )));
    }
    match target.strip_prefix(root) {
        Ok(inside) if !inside.as_os_str().is_empty() && target.is_file() => {
            Ok(inside.to_path_buf())
        }
        Ok(inside) if !inside.as_os_str().is_empty() => {
            Err("a symlink to something that is not a file".into())
        }
        _ => Err(format!(
            "a symlink to {} outside {root_named}: not followed",
            path_for_display(&target)
        )),
    }
}

/// A path as `/`-separated text; bytes that are not UTF-8 show as U+FFFD.
fn relative_id(path: &Path) -> String {
    path.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// Submissions graded per first-level folder below the class folder, unless
/// `grade --max-per-folder` says otherwise: a student's folder is one
/// first-level folder, and 200 copies of a file are 200 full checks.
pub const DEFAULT_MAX_PER_FOLDER: usize = 20;

/// Keeps the first `max` readable submissions (in id order) of each
/// first-level folder below the class folder; each one past them becomes a row refused
/// with the reason, so the gradebook lists it. Files directly in the class
/// folder are each their own, never capped. Returns how many were capped.
pub fn cap_per_folder(submissions: &mut [Submission], max: usize) -> usize {
    let mut seen: std::collections::BTreeMap<String, usize> = Default::default();
    let mut capped = 0;
    for submission in submissions.iter_mut() {
        let Some((folder, _)) = submission.id.split_once('/') else {
            continue;
        };
        // A row refused already (a link leaving the folder, say) is no check.
        if submission.place.is_err() {
            continue;
        }
        let count = seen.entry(folder.to_owned()).or_default();
        *count += 1;
        if *count > max {
            capped += 1;
            submission.place = Err(format!(
                "submission {count} in `{}/`, past the {max} a folder graded (grade \
                 --max-per-folder): not graded",
                crate::display::line_for_display(folder)
            ));
        }
    }
    capped
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
    /// A submission refused before reading, for `reason`.
    pub fn refused(id: String, path: PathBuf, reason: String) -> Self {
        Self {
            id,
            path,
            place: Err(reason),
        }
    }

    /// Reads and checks the file for `lab`, never more than the size limit.
    pub fn load(&self, lab: LabRef) -> LoadedSubmission {
        let shown = self.path.display().to_string();
        let unreadable = |reason: String| LoadedSubmission {
            content_hash: content_hash(shown.as_bytes()),
            source: Err(reason),
        };
        let place = match &self.place {
            Ok(place) => place,
            Err(reason) => return unreadable(format!("{shown}: {reason}")),
        };
        // Never blocks: a FIFO or device node is refused without reading it.
        let (bytes, size) = match place.read(&self.path) {
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
        let found = discover_dir(&root).expect("discovery goes on").submissions;
        UNREADABLE.with(|u| *u.borrow_mut() = None);
        let ids: Vec<&str> = found.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["a.cu", "locked/", "open/c.cu"]);
        let reason = found[1].place.as_ref().expect_err("refused");
        assert!(reason.contains("cannot be read"), "{reason}");
        assert!(reason.contains("not graded"), "{reason}");
        assert!(found[1]
            .load(crate::lab::flash_prefill::FLASH_PREFILL)
            .source
            .is_err());
        assert!(found[0].place.is_ok() && found[2].place.is_ok());
    }

    fn text_of(submission: &Submission) -> Result<String, String> {
        submission
            .load(crate::lab::flash_prefill::FLASH_PREFILL)
            .source
            .map(|s| s.text().to_owned())
    }

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }

    #[test]
    fn a_link_retargeted_or_a_folder_swapped_after_discovery_is_not_followed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("class");
        let secret = dir.path().join("ta");
        write(&secret.join("prefill.cu"), "out[0] = 7.0f; // TA secret");
        write(&root.join("alice/prefill.cu"), "out[0] = 1.0f;");
        write(&root.join("bob/prefill.cu"), "out[0] = 2.0f;");
        std::os::unix::fs::symlink("bob/prefill.cu", root.join("link.cu")).expect("symlink");
        let found = discover_dir(&root).expect("discovered").submissions;
        let by_id = |id: &str| found.iter().find(|s| s.id == id).expect(id).clone();
        let (alice, link) = (by_id("alice/prefill.cu"), by_id("link.cu"));
        assert_eq!(text_of(&alice).expect("read"), "out[0] = 1.0f;");
        // After discovery: alice's folder becomes a link to the TA's, and
        // the checked link is pointed at the TA's file.
        std::fs::rename(root.join("alice"), dir.path().join("alice-moved")).expect("move");
        std::os::unix::fs::symlink(&secret, root.join("alice")).expect("symlink");
        std::fs::remove_file(root.join("link.cu")).expect("unlink");
        std::os::unix::fs::symlink(secret.join("prefill.cu"), root.join("link.cu"))
            .expect("symlink");
        let refused = text_of(&alice).expect_err("a swapped folder is refused");
        assert!(refused.contains("symlink"), "{refused}");
        // The link is read where discovery checked it went, never where it points now.
        assert_eq!(text_of(&link).expect("read"), "out[0] = 2.0f;");
    }

    #[test]
    fn grade_refuses_the_links_check_refuses_in_the_same_words() {
        use std::os::unix::fs::{symlink, PermissionsExt};
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical").join("class");
        write(&root.join("bob/sub/prefill.cu"), "out[0] = 2.0f;");
        // A folder anyone can write holds links that stay inside the class:
        // whoever owns them, another user could have put them there.
        std::fs::create_dir_all(root.join("open")).expect("mkdir");
        symlink("../bob/sub/prefill.cu", root.join("open/link.cu")).expect("symlink");
        symlink("../bob", root.join("open/alias")).expect("symlink");
        // This user's own link, in this user's folder, inside the class: graded.
        symlink("bob/sub/prefill.cu", root.join("mine.cu")).expect("symlink");
        let chmod = |mode| {
            std::fs::set_permissions(root.join("open"), std::fs::Permissions::from_mode(mode))
                .expect("chmod")
        };
        chmod(0o777);
        let check_refusal = |path: &Path| {
            StudentSource::from_path(path, crate::lab::flash_prefill::FLASH_PREFILL)
                .expect_err("check refuses it")
                .to_string()
        };
        let found = discover_dir(&root).expect("discovered").submissions;
        let by_id = |id: &str| found.iter().find(|s| s.id == id).expect(id).clone();
        let link = root.join("open/link.cu");
        // The row says what `check` says, word for word.
        let refused = text_of(&by_id("open/link.cu")).expect_err("refused");
        assert_eq!(refused, check_refusal(&link));
        assert!(
            refused.contains("in a folder writable by others"),
            "{refused}"
        );
        assert_eq!(text_of(&by_id("mine.cu")).expect("read"), "out[0] = 2.0f;");
        // Named on the command line: the link itself, and a path through a
        // linked folder higher up.
        let through = root.join("open/alias/sub/prefill.cu");
        for named in [&link, &through] {
            let refused =
                text_of(&from_files(std::slice::from_ref(named))[0]).expect_err("refused");
            assert_eq!(refused, check_refusal(named));
        }
        // A class folder reached through such a link is not listed at all.
        let refused = discover_dir(&root.join("open/alias")).expect_err("refused");
        assert!(
            refused.to_string().contains("open/alias is a link"),
            "{refused}"
        );
        chmod(0o755);
        assert_eq!(
            text_of(&from_files(&[through])[0]).expect("followed once no one else can replace it"),
            "out[0] = 2.0f;"
        );
    }

    #[test]
    fn a_named_file_s_folder_swapped_for_a_link_after_discovery_is_not_read() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical");
        write(
            &root.join("ta/src/prefill.cu"),
            "out[0] = 7.0f; // TA secret",
        );
        write(&root.join("bob/lab/src/prefill.cu"), "out[0] = 1.0f;");
        // Bob's folder is one others could write in, as a student's own is
        // to the TA.
        std::fs::set_permissions(root.join("bob"), std::fs::Permissions::from_mode(0o777))
            .expect("chmod");
        let named = from_files(&[root.join("bob/lab/src/prefill.cu")]);
        assert_eq!(text_of(&named[0]).expect("read"), "out[0] = 1.0f;");
        // During the grading: bob/lab becomes a link to the TA's folder.
        std::fs::rename(root.join("bob/lab"), root.join("bob/lab.old")).expect("move");
        std::os::unix::fs::symlink(root.join("ta"), root.join("bob/lab")).expect("symlink");
        let refused = text_of(&named[0]).expect_err("the swapped folder is refused");
        assert!(refused.contains("bob/lab is a link"), "{refused}");
    }

    #[test]
    fn hidden_folders_are_skipped_and_their_files_counted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        write(&root.join("alice/prefill.cu"), "out[0] = 1.0f;");
        write(
            &root.join("alice/.flashprof/sources/0123456789abcdef.cu"),
            "x",
        );
        write(
            &root.join("alice/.flashprof/sources/fedcba9876543210.cu"),
            "x",
        );
        write(&root.join(".git/deep/er/old.cu"), "x");
        write(&root.join(".git/notes.txt"), "x");
        let found = discover_dir(root).expect("discovered");
        let ids: Vec<&str> = found.submissions.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["alice/prefill.cu"]);
        assert_eq!(found.skipped_hidden, 3);
    }

    #[test]
    fn ids_are_unique_and_sorted() {
        let make =
            |id: &str, path: &str| Submission::refused(id.into(), path.into(), String::new());
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

    #[test]
    fn the_cap_counts_only_what_would_be_graded_and_never_a_file_of_the_class_folder() {
        let row = |id: &str, readable: bool| Submission {
            id: id.into(),
            path: PathBuf::from(id),
            place: match readable {
                true => Ok(Place {
                    base: Base::Named(PathBuf::from(".")),
                    relative: PathBuf::from(id),
                }),
                false => Err("a link leaving the folder".into()),
            },
        };
        let mut rows = vec![
            row("alice/0-refused.cu", false),
            row("alice/a.cu", true),
            row("alice/b.cu", true),
            row("alice/c.cu", true),
            row("bob/a.cu", true),
            row("top.cu", true),
            row("top2.cu", true),
        ];
        assert_eq!(cap_per_folder(&mut rows, 2), 1);
        let refused: Vec<&str> = rows
            .iter()
            .filter(|r| r.place.is_err())
            .map(|r| r.id.as_str())
            .collect();
        assert_eq!(refused, ["alice/0-refused.cu", "alice/c.cu"]);
        let reason = rows[3].place.as_ref().expect_err("capped");
        assert!(
            reason.starts_with("submission 3 in `alice/`, past the 2"),
            "{reason}"
        );
    }
}
