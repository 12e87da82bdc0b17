//! Watching the student's file: one callback per real change of its content.
//!
//! Editors save in different ways: some write in place, some write a
//! temporary file and rename it over the original, some delete and
//! re-create. The last two replace the inode, and a watch on the file itself
//! would go silent after the first save, so the watch is on the file's
//! folder and events are filtered to the file's name. A save is a burst of
//! events (truncate, write, close, rename), so events are only a signal to
//! look: after a quiet spell the file is read once, and its content is
//! handed on only when it differs from what was last handed on. That makes
//! one save one callback, a burst of saves one callback with the final text,
//! and a `touch` or our own read nothing at all. A file still missing once
//! a burst settles was deleted (or moved away) and is reported once, so a
//! screen can say so; its next content is reported whatever it is.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use notify::event::{AccessKind, AccessMode, ModifyKind};
use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher};

use crate::lab::source::{read_pinned_file, MAX_SOURCE_BYTES};
use crate::sys::pinned::PinnedFolder;

/// Quiet time after the last event before the file is read.
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(50);

/// A burst longer than this is read anyway, so a file rewritten without
/// pause still shows up on screen.
const LONGEST_WAIT: Duration = Duration::from_secs(1);

/// Why a watch could not start.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error("{0} does not name a file")]
    NotAFile(PathBuf),
    #[error("cannot watch {path}: {source}")]
    Notify {
        path: PathBuf,
        source: notify::Error,
    },
}

/// What became of the watched file once a burst of events settled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Watched {
    /// It holds these bytes, which differ from the last ones reported.
    Content(Vec<u8>),
    /// It no longer exists.
    Gone,
}

/// A running watch; dropping it stops the watch and its thread.
pub struct FileWatcher {
    _watcher: RecommendedWatcher,
}

/// Watches the file `pinned` names, at `path`, and calls `on_change` with
/// the file's bytes each time its content settles on something new, and
/// once when it is found gone. The content present when the watch starts
/// counts as already seen. Every read goes through the folder as it was
/// pinned: a folder swapped since (for a link to someone else's folder
/// holding a file of the same name) is never read from.
pub fn watch_pinned<F>(
    pinned: PinnedFolder,
    path: &Path,
    debounce: Duration,
    on_change: F,
) -> Result<FileWatcher, WatchError>
where
    F: FnMut(Watched) + Send + 'static,
{
    let name = path
        .file_name()
        .ok_or_else(|| WatchError::NotAFile(path.to_path_buf()))?
        .to_os_string();
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let (signal, signals) = mpsc::channel();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<Event>| {
        if event.is_ok_and(|e| concerns(&e, &name)) {
            // The receiver is gone only when the watch is being dropped.
            let _ = signal.send(());
        }
    })
    .map_err(|source| WatchError::Notify {
        path: folder.clone(),
        source,
    })?;
    watcher
        .watch(&folder, RecursiveMode::NonRecursive)
        .map_err(|source| WatchError::Notify {
            path: folder.clone(),
            source,
        })?;
    let seen = read_bounded(&pinned, path);
    let file = path.to_path_buf();
    std::thread::Builder::new()
        .name("flashprof-watch".into())
        .spawn(move || deliver_settled(&signals, debounce, &pinned, &file, seen, on_change))
        .map_err(|e| WatchError::Notify {
            path: folder,
            source: notify::Error::io(e),
        })?;
    Ok(FileWatcher { _watcher: watcher })
}

/// Whether `event` may have changed the content of the file called `name`.
/// Opens, reads and attribute changes cannot, and reacting to opens would
/// make our own reads trigger more reads.
fn concerns(event: &Event, name: &OsString) -> bool {
    let may_change = match event.kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        EventKind::Modify(ModifyKind::Metadata(_)) => false,
        _ => true,
    };
    may_change
        && event
            .paths
            .iter()
            .any(|p| p.file_name() == Some(name.as_os_str()))
}

/// The debounce loop: one read per burst of signals, one call per new
/// content or disappearance.
fn deliver_settled<F>(
    signals: &Receiver<()>,
    debounce: Duration,
    pinned: &PinnedFolder,
    file: &Path,
    mut seen: Option<Vec<u8>>,
    mut on_change: F,
) where
    F: FnMut(Watched),
{
    while signals.recv().is_ok() {
        let burst_started = Instant::now();
        loop {
            match signals.recv_timeout(debounce) {
                Ok(()) if burst_started.elapsed() < LONGEST_WAIT => continue,
                Ok(()) | Err(RecvTimeoutError::Timeout) => break,
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
        // A delete and re-create within one burst (an editor's save) is
        // read as the new content; a file still missing now is gone, said
        // once, and whatever comes back is new.
        let Some(content) = read_bounded(pinned, file) else {
            // Asked of the pinned folder too: a folder that is no longer
            // there (or is another one now) holds no file of the student's.
            let missing = pinned.open().map_or(true, |folder| {
                std::fs::symlink_metadata(folder.file())
                    .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
            });
            if missing && seen.take().is_some() {
                on_change(Watched::Gone);
            }
            continue;
        };
        if seen.as_ref() != Some(&content) {
            seen = Some(content.clone());
            on_change(Watched::Content(content));
        }
    }
}

/// The file's bytes (at most one past the source size limit), or `None`
/// when it is missing, not a regular file, or its folder is no longer the
/// pinned one: never blocks on a FIFO.
fn read_bounded(pinned: &PinnedFolder, path: &Path) -> Option<Vec<u8>> {
    // A file swapped for a link is not read (so not compiled or recorded),
    // nor a file of a folder swapped for a link.
    read_pinned_file(pinned, path, MAX_SOURCE_BYTES)
        .ok()
        .map(|read| read.bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::sync::mpsc::Receiver;

    /// Long enough for inotify and the debounce on a loaded CI machine.
    const SETTLE: Duration = Duration::from_millis(600);

    fn watched(initial: &str) -> (tempfile::TempDir, PathBuf, FileWatcher, Receiver<Watched>) {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("prefill.cu");
        fs::write(&file, initial).expect("write initial");
        let (watcher, rx) = watch(&file);
        (dir, file, watcher, rx)
    }

    /// A watch of `file` in its pinned folder, and what it reports.
    fn watch(file: &Path) -> (FileWatcher, Receiver<Watched>) {
        let (tx, rx) = mpsc::channel();
        let watcher = watch_pinned(
            PinnedFolder::of(file).expect("pinned"),
            file,
            DEFAULT_DEBOUNCE,
            move |bytes| {
                let _ = tx.send(bytes);
            },
        )
        .expect("watch");
        (watcher, rx)
    }

    /// The next content reported, as text; `gone` when the file was.
    fn next(rx: &Receiver<Watched>) -> Option<String> {
        rx.recv_timeout(SETTLE * 4).ok().map(|change| match change {
            Watched::Content(bytes) => String::from_utf8(bytes).expect("utf8"),
            Watched::Gone => "gone".to_owned(),
        })
    }

    fn nothing_more(rx: &Receiver<Watched>) {
        assert_eq!(rx.recv_timeout(SETTLE).ok(), None);
    }

    /// That the next content reported is `text`, and nothing comes after it.
    fn delivered_once(rx: &Receiver<Watched>, text: &str) {
        assert_eq!(next(rx).as_deref(), Some(text));
        nothing_more(rx);
    }

    #[test]
    fn a_watched_folder_swapped_for_a_link_is_never_read_from() {
        // A student swaps the folder she owns on the watched path for a link
        // to a folder of the TA's holding a file of the same name, then
        // saves in her own (moved) folder to wake the watch.
        let root = tempfile::tempdir().expect("temp dir");
        let (work, private) = (root.path().join("work"), root.path().join("private"));
        fs::create_dir(&work).expect("work");
        fs::create_dir(&private).expect("private");
        fs::write(private.join("prefill.cu"), "the TA's").expect("the TA's file");
        let file = work.join("prefill.cu");
        fs::write(&file, "mine").expect("the student's file");
        let (_watcher, rx) = watch(&file);
        let moved = root.path().join("moved");
        fs::rename(&work, &moved).expect("moved away");
        std::os::unix::fs::symlink(&private, &work).expect("a link in its place");
        fs::write(moved.join("prefill.cu"), "mine, edited").expect("a save");
        // The pinned folder is no longer on the path: the file is gone from
        // the watch, and the TA's text never comes.
        delivered_once(&rx, "gone");
    }

    #[test]
    fn an_in_place_write_is_delivered_once() {
        let (_dir, file, _w, rx) = watched("one");
        fs::write(&file, "two").expect("write");
        delivered_once(&rx, "two");
    }

    #[test]
    fn a_rename_over_the_file_is_seen_and_later_saves_too() {
        let (dir, file, _w, rx) = watched("one");
        let tmp = dir.path().join(".prefill.cu.swp");
        fs::write(&tmp, "two").expect("write tmp");
        fs::rename(&tmp, &file).expect("rename");
        assert_eq!(next(&rx).as_deref(), Some("two"));
        // The inode changed; the watch on the folder must still see the next save.
        fs::write(&tmp, "three").expect("write tmp");
        fs::rename(&tmp, &file).expect("rename");
        delivered_once(&rx, "three");
    }

    #[test]
    fn truncate_then_write_delivers_the_final_text() {
        use std::io::Write;
        let (_dir, file, _w, rx) = watched("one");
        let mut handle = fs::File::create(&file).expect("truncate");
        std::thread::sleep(Duration::from_millis(5));
        handle
            .write_all(b"two, written after a truncate")
            .expect("write");
        drop(handle);
        delivered_once(&rx, "two, written after a truncate");
    }

    #[test]
    fn a_deleted_file_is_gone_once_and_what_comes_back_is_new_even_the_same_text() {
        let (dir, file, _w, rx) = watched("one");
        fs::remove_file(&file).expect("delete");
        assert_eq!(next(&rx).as_deref(), Some("gone"));
        // Other files in the folder say nothing more about it.
        fs::write(dir.path().join("other.cu"), "x").expect("other");
        nothing_more(&rx);
        fs::write(&file, "one").expect("recreate");
        delivered_once(&rx, "one");
    }

    #[test]
    fn a_delete_and_re_create_in_one_burst_is_one_save() {
        let (_dir, file, _w, rx) = watched("one");
        fs::remove_file(&file).expect("delete");
        fs::write(&file, "two").expect("recreate");
        delivered_once(&rx, "two");
    }

    #[test]
    fn a_burst_of_saves_delivers_only_the_last() {
        let (_dir, file, _w, rx) = watched("zero");
        for i in 1..=20 {
            fs::write(&file, format!("save {i}")).expect("write");
        }
        delivered_once(&rx, "save 20");
    }

    #[test]
    fn unchanged_content_and_other_files_are_ignored() {
        let (dir, file, _w, rx) = watched("same");
        fs::write(&file, "same").expect("rewrite");
        fs::write(dir.path().join("other.cu"), "x").expect("other");
        let _ = fs::read(&file).expect("read");
        nothing_more(&rx);
    }
}
