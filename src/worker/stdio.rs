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

/// Set by a caller that reaches the worker over a link (ssh, srun;
/// docs/REMOTE.md): the worker then ends as soon as the caller's end of its
/// stdin closes, even in the middle of a kernel.
pub const EXIT_ON_HANGUP_ENV: &str = "FLASHPROF_WORKER_EXIT_ON_HANGUP";

/// With [`EXIT_ON_HANGUP_ENV`] set, watches stdin from a thread of its own
/// and ends the process when the other end hangs up. A remote worker whose
/// ssh session dropped gets no signal (no terminal) and, stuck in a kernel
/// that never returns, would otherwise hold the GPU until someone kills it.
/// Off by default: a local caller kills its worker itself.
pub fn exit_when_caller_hangs_up() {
    if std::env::var_os(EXIT_ON_HANGUP_ENV).is_none() {
        return;
    }
    let _ = std::thread::Builder::new()
        .name("hangup-watch".into())
        .spawn(|| loop {
            let mut watched = libc::pollfd {
                fd: libc::STDIN_FILENO,
                events: 0,
                revents: 0,
            };
            // SAFETY: one valid pollfd on the process's own stdin, for the duration of the call.
            let ready = unsafe { libc::poll(&mut watched, 1, -1) };
            if ready > 0 && watched.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0
            {
                // Nobody can read an answer any more. `_exit` skips exit
                // handlers that could wait on a kernel that never returns;
                // the driver reclaims the GPU context with the process.
                // SAFETY: ends the process; nothing runs after it.
                unsafe { libc::_exit(0) };
            }
            if ready < 0
                && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted
            {
                return;
            }
        });
}
