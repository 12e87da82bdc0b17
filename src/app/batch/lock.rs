//! One grading run per output folder: an exclusive `flock` on a lock file
//! inside `--out`, held for the whole run and released by the kernel when
//! the process ends, however it ends (no stale lock after a crash).

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

/// The lock file's name inside an output folder.
pub const LOCK_FILE: &str = ".flashprof-grade.lock";

/// Held while a run writes into its output folder.
#[derive(Debug)]
pub struct OutLock {
    _file: File,
}

/// Why the lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error(
        "{}: another `flashprof grade` is already writing into this output folder; \
         wait for it to finish, or give a different --out",
        .folder.display()
    )]
    Busy { folder: PathBuf },
    #[error("{}: cannot lock the output folder: {source}", .folder.display())]
    Io {
        folder: PathBuf,
        source: std::io::Error,
    },
}

impl OutLock {
    /// Takes the lock of `out_dir` (created if needed) without waiting.
    pub fn acquire(out_dir: &Path) -> Result<Self, LockError> {
        let io = |source| LockError::Io {
            folder: out_dir.to_path_buf(),
            source,
        };
        std::fs::create_dir_all(out_dir).map_err(io)?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            // A link planted in place of the lock is not opened through.
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(out_dir.join(LOCK_FILE))
            .map_err(io)?;
        // SAFETY: flock only reads the descriptor, which `file` keeps open.
        #[allow(unsafe_code)]
        let taken = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if taken != 0 {
            let error = std::io::Error::last_os_error();
            return Err(match error.raw_os_error() {
                Some(libc::EWOULDBLOCK) => LockError::Busy {
                    folder: out_dir.to_path_buf(),
                },
                _ => io(error),
            });
        }
        Ok(Self { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_one_folder_is_refused_until_the_first_is_dropped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = OutLock::acquire(dir.path()).expect("first lock");
        let second = OutLock::acquire(dir.path()).expect_err("second lock refused");
        assert!(matches!(second, LockError::Busy { .. }));
        assert!(second
            .to_string()
            .contains(&dir.path().display().to_string()));
        drop(first);
        OutLock::acquire(dir.path()).expect("free again");
    }
}
