//! The folder of a file flashprof keeps using (the TUI's watched file), held
//! to the folder it was when first opened.
//!
//! A student who owns a folder on the watched path can swap it, between two
//! saves, for a link to a folder of the TA's that holds a file of the same
//! name; a read by path would then compile, show and store the TA's file.
//! A [`PinnedFolder`] remembers the folder's device and inode; each use opens
//! the folder again, refuses it when it is another one, and reaches the file
//! through that open folder (`/proc/self/fd/N/NAME`, resolved as `openat`
//! resolves), so a swap between the check and the read is refused too.

use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

/// A file's folder, pinned by device and inode, and the file's name in it.
#[derive(Debug, Clone)]
pub struct PinnedFolder {
    folder: PathBuf,
    name: OsString,
    device: u64,
    inode: u64,
}

/// The folder opened for one use; the file is reached through it.
#[derive(Debug)]
pub struct OpenedFolder {
    handle: File,
    name: OsString,
}

impl OpenedFolder {
    /// The file's path through the open folder, for one read or write.
    pub fn file(&self) -> PathBuf {
        self.entry(&self.name)
    }

    /// Another entry of the same folder (the history store beside the
    /// file), reached through the open folder.
    pub fn entry(&self, name: impl AsRef<Path>) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.handle.as_raw_fd())).join(name)
    }
}

impl PinnedFolder {
    /// The folder `file` is in, as the path resolves now.
    pub fn of(file: &Path) -> io::Result<Self> {
        let name = file
            .file_name()
            .ok_or_else(|| {
                io::Error::other(format!(
                    "{} names no file",
                    crate::display::path_for_display(file)
                ))
            })?
            .to_os_string();
        let folder = match file.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        // Reached through links flashprof follows (the check the file's
        // first read made), and the folder that walk arrived at.
        let handle = crate::sys::trust::open_walked_folder(&folder)?;
        let metadata = handle.metadata()?;
        Ok(Self {
            folder,
            name,
            device: metadata.dev(),
            inode: metadata.ino(),
        })
    }

    /// The folder opened again, when it is still the one pinned.
    pub fn open(&self) -> io::Result<OpenedFolder> {
        let handle = open_folder(&self.folder)?;
        let metadata = handle.metadata()?;
        if (metadata.dev(), metadata.ino()) != (self.device, self.inode) {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "its folder {} is no longer the folder it was when flashprof opened it \
                     (a link or another folder stands in its place): not used",
                    crate::display::path_for_display(&self.folder)
                ),
            ));
        }
        Ok(OpenedFolder {
            handle,
            name: self.name.clone(),
        })
    }
}

/// `folder` opened as a folder (a link on the way resolves as it does now),
/// for lookups only.
fn open_folder(folder: &Path) -> io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(folder)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_reached_through_a_link_others_could_replace_is_not_pinned() {
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().expect("temp dir");
        let real = root.path().join("real");
        let open = root.path().join("open");
        std::fs::create_dir(&real).expect("real");
        std::fs::create_dir(&open).expect("open");
        std::fs::write(real.join("prefill.cu"), "mine").expect("the file");
        std::os::unix::fs::symlink(&real, open.join("work")).expect("a link");
        // Followed while no one else can write the folder holding the link.
        PinnedFolder::of(&open.join("work/prefill.cu")).expect("a link of mine");
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let refused = PinnedFolder::of(&open.join("work/prefill.cu")).expect_err("refused");
        assert!(
            refused.to_string().contains("writable by others"),
            "{refused}"
        );
    }

    #[test]
    fn a_folder_swapped_for_a_link_is_refused_and_the_original_is_read_through_its_handle() {
        let root = tempfile::tempdir().expect("temp dir");
        let watched = root.path().join("work");
        let private = root.path().join("private");
        std::fs::create_dir(&watched).expect("work");
        std::fs::create_dir(&private).expect("private");
        std::fs::write(watched.join("prefill.cu"), "mine").expect("the student's file");
        std::fs::write(private.join("prefill.cu"), "the TA's").expect("the TA's file");
        let pinned = PinnedFolder::of(&watched.join("prefill.cu")).expect("pinned");
        let opened = pinned.open().expect("the same folder");
        assert_eq!(
            std::fs::read_to_string(opened.file()).expect("read"),
            "mine"
        );

        std::fs::rename(&watched, root.path().join("moved")).expect("moved away");
        std::os::unix::fs::symlink(&private, &watched).expect("a link in its place");
        let refused = pinned.open().expect_err("another folder now");
        assert!(
            refused.to_string().contains("no longer the folder"),
            "{refused}"
        );
        // A handle opened before the swap still reads the pinned folder's file.
        assert_eq!(
            std::fs::read_to_string(opened.file()).expect("read"),
            "mine"
        );
    }
}
