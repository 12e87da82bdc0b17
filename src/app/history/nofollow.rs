//! The store's folders and files, opened with no link followed.
//!
//! A `.flashprof/` folder may sit in a folder a student controls: a link in
//! place of the store, of `history.jsonl` or of a stored source would make
//! flashprof read or write whatever it names. So each folder is opened with
//! `O_DIRECTORY | O_NOFOLLOW`, a store folder must belong to this user
//! (when asked), and everything inside is reached through the open folder
//! (`/proc/self/fd/N/NAME`, which resolves through the folder actually
//! opened, as `openat` does), its last component again with `O_NOFOLLOW`.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use crate::display::path_for_display;

fn refused(path: &Path, why: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("refused {}: {why}", path_for_display(path)),
    )
}

/// One opened folder of the store.
#[derive(Debug)]
pub(crate) struct Folder {
    handle: File,
    /// Its path, for messages.
    pub path: PathBuf,
}

impl Folder {
    /// Opens `path` as a folder without following a link in its last
    /// component; with `create`, makes it first if it is absent. `None`
    /// when it is absent and not to be created. With `owned`, a folder
    /// that is not this user's is refused.
    pub fn open(path: &Path, create: bool, owned: bool) -> io::Result<Option<Self>> {
        Self::open_at(path, path, create, owned)
    }

    /// `path` opened as a folder through links flashprof follows only: every
    /// link on the way is this user's or root's, in a folder no one else
    /// can write, and the folder opened is the one that walk reached
    /// ([`crate::sys::trust::open_walked_folder`]). A refusal is
    /// `PermissionDenied`, with the link and why.
    pub fn walked(path: &Path) -> io::Result<Self> {
        Ok(Self {
            handle: crate::sys::trust::open_walked_folder(path)?,
            path: path.to_path_buf(),
        })
    }

    /// The open folder's device and inode.
    pub fn identity(&self) -> io::Result<(u64, u64)> {
        let meta = self.handle.metadata()?;
        Ok((meta.dev(), meta.ino()))
    }

    /// `name` inside this folder, opened the same way.
    pub fn sub(
        &self,
        name: impl AsRef<Path>,
        create: bool,
        owned: bool,
    ) -> io::Result<Option<Self>> {
        let name = name.as_ref();
        Self::open_at(&self.at(name), &self.path.join(name), create, owned)
    }

    /// Opens `real` the same way, named `logical` in messages (`real` being
    /// a path through an open folder).
    pub fn open_at(
        real: &Path,
        logical: &Path,
        create: bool,
        owned: bool,
    ) -> io::Result<Option<Self>> {
        if create {
            // mkdir never follows a link: one in the way is EEXIST, refused below.
            match std::fs::create_dir(real) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => {
                    return Err(io::Error::new(
                        e.kind(),
                        format!("{}: {e}", path_for_display(logical)),
                    ))
                }
            }
        }
        let handle = match OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(real)
        {
            Ok(handle) => handle,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            // With O_DIRECTORY, Linux answers ENOTDIR for a link too.
            Err(e)
                if e.raw_os_error() == Some(libc::ELOOP)
                    || std::fs::symlink_metadata(real)
                        .is_ok_and(|m| m.file_type().is_symlink()) =>
            {
                return Err(refused(logical, "it is a symlink: not followed"))
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => {
                return Err(refused(logical, "not a folder"))
            }
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("{}: {e}", path_for_display(logical)),
                ))
            }
        };
        if owned {
            let uid = handle.metadata()?.uid();
            let euid = crate::sys::effective_uid();
            if euid != Some(uid) {
                return Err(refused(
                    logical,
                    &format!("owned by uid {uid}, not by you; flashprof keeps its store only in a folder of yours"),
                ));
            }
        }
        Ok(Some(Self {
            handle,
            path: logical.to_path_buf(),
        }))
    }

    /// `name` in this folder, reached through the open folder.
    pub fn at(&self, name: impl AsRef<Path>) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.handle.as_raw_fd())).join(name)
    }

    /// Where the open folder really is now (the kernel's name for it).
    pub fn resolved(&self) -> io::Result<PathBuf> {
        std::fs::read_link(format!("/proc/self/fd/{}", self.handle.as_raw_fd()))
    }

    /// Opens `name` for appending (created if absent), refusing a link or
    /// anything but a regular file, without blocking on a FIFO.
    pub fn append(&self, name: &str) -> io::Result<File> {
        let logical = self.path.join(name);
        let file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
            .open(self.at(name))
            .map_err(|e| match e.raw_os_error() {
                Some(libc::ELOOP) => refused(&logical, "it is a symlink: not written through"),
                _ => io::Error::new(e.kind(), format!("{}: {e}", path_for_display(&logical))),
            })?;
        if !file.metadata()?.is_file() {
            return Err(refused(&logical, "not a regular file: not written"));
        }
        Ok(file)
    }

    /// Creates `name`, which must not exist (`O_EXCL`: a link in its place is refused).
    pub fn create_new(&self, name: &str) -> io::Result<File> {
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(self.at(name))
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("{}: {e}", path_for_display(&self.path.join(name))),
                )
            })
    }

    /// Whether `name` is a regular file here (a link is not).
    pub fn holds_file(&self, name: &str) -> bool {
        std::fs::symlink_metadata(self.at(name)).is_ok_and(|m| m.is_file())
    }

    pub fn sync(&self) -> io::Result<()> {
        self.handle.sync_all()
    }
}
