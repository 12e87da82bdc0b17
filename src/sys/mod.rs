//! The bottom layer of what holds against hostile input, written once: the
//! user flashprof runs as, whom a file, folder or link is trusted from, a
//! folder only that user can enter, a watched file's folder held to the
//! one it was (`pinned`), and other
//! programs (pip, Python, ssh, Slurm's commands, the sanitizer) started
//! from such a folder with nothing of a student's in reach and run under a
//! deadline.

pub mod child;
pub mod folder;
pub mod pinned;
pub mod trust;

/// The effective user id of this process, read from `/proc` (the crate
/// makes no system call of its own for it).
pub fn effective_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("Uid:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Makes a FIFO at `path` (with `mkfifo`), for the tests of what refuses
/// one: a read of it would block for good.
#[cfg(test)]
pub fn make_fifo(path: &std::path::Path) {
    let made = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
}
