//! Gives the worker a protocol channel that kernel code cannot write to.
//!
//! Device-side `printf` and any library chatter go to file descriptor 1. The
//! worker therefore keeps a private duplicate of the original stdout for
//! protocol messages and points fd 1 at stderr, which the caller captures as
//! a log. Without this a student kernel could print a forged result line.
#![allow(unsafe_code)]

use std::fs::File;
use std::os::fd::FromRawFd;

/// Detaches the real stdout for protocol use and redirects fd 1 to stderr.
pub fn take_protocol_stdout() -> std::io::Result<File> {
    use std::io::Write;
    std::io::stdout().flush()?;
    // SAFETY: dup/dup2 on the process's own standard descriptors; the new
    // descriptor is owned by exactly one File below.
    unsafe {
        let private = libc::dup(libc::STDOUT_FILENO);
        if private < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::dup2(libc::STDERR_FILENO, libc::STDOUT_FILENO) < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(File::from_raw_fd(private))
    }
}
