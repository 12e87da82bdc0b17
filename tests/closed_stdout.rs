//! `flashprof doctor | head -1`: a reader that stops early closes the pipe,
//! and flashprof must end quietly with success rather than panic.

mod cli_support;
use cli_support::flashprof_binary;

use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Command, Stdio};

/// A pipe's (reading, writing) ends (std's own `pipe` is newer than the MSRV).
fn pipe() -> (OwnedFd, OwnedFd) {
    let mut ends = [0; 2];
    // SAFETY: `ends` has room for the two descriptors pipe(2) writes, and
    // each is owned by exactly one OwnedFd from here on.
    unsafe {
        assert_eq!(libc::pipe(ends.as_mut_ptr()), 0, "pipe(2)");
        (OwnedFd::from_raw_fd(ends[0]), OwnedFd::from_raw_fd(ends[1]))
    }
}

/// Runs `flashprof ARGS` with stdout a pipe whose reading end is already
/// closed, so the very first write fails with EPIPE (no race with a reader).
fn with_closed_stdout(args: &[&str], cwd: &std::path::Path) -> std::process::Output {
    let (reader, writer) = pipe();
    drop(reader);
    Command::new(flashprof_binary())
        .args(args)
        .current_dir(cwd)
        .env("FLASHPROF_GPU", "none")
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped())
        .output()
        .expect("flashprof runs")
}

#[test]
fn closing_stdout_ends_every_printing_command_quietly_with_success() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("k.cu"),
        include_str!("../kernels/flash-prefill/starter.cu"),
    )
    .expect("write");
    for args in [
        vec!["labs"],
        vec!["doctor"],
        vec!["doctor", "--json"],
        vec!["check", "--json", "k.cu"],
        vec!["check", "--json", "missing.cu"],
        vec!["--help"],
    ] {
        let run = with_closed_stdout(&args, dir.path());
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}
