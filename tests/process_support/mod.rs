//! What is running on this machine, read from `/proc`, for the tests that
//! must leave nothing behind (workers, ssh sessions, Slurm steps).
#![allow(dead_code)] // each test binary uses its own subset

use std::time::{Duration, Instant};

/// One process: its id, its parent's, its short name and its command line.
#[derive(Debug, Clone)]
pub struct Process {
    pub pid: u32,
    pub parent: u32,
    pub name: String,
    pub command_line: String,
}

/// Every process this user can see.
pub fn all() -> Vec<Process> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(read)
        .collect()
}

fn read(pid: u32) -> Option<Process> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (name) state ppid ...`: the name may hold blanks and parentheses.
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let name = stat[open + 1..close].to_owned();
    let parent = stat[close + 1..].split_whitespace().nth(1)?.parse().ok()?;
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let command_line = String::from_utf8_lossy(&raw)
        .split('\0')
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    Some(Process {
        pid,
        parent,
        name,
        command_line,
    })
}

/// The processes whose command line holds `marker`.
pub fn matching(marker: &str) -> Vec<Process> {
    all()
        .into_iter()
        .filter(|p| p.pid != std::process::id() && p.command_line.contains(marker))
        .collect()
}

/// Every process below `pid` (children, their children, ...).
pub fn descendants(pid: u32) -> Vec<Process> {
    let everything = all();
    let mut found: Vec<Process> = Vec::new();
    let mut parents = vec![pid];
    while let Some(parent) = parents.pop() {
        for p in everything.iter().filter(|p| p.parent == parent) {
            parents.push(p.pid);
            found.push(p.clone());
        }
    }
    found
}

/// Waits up to `patience` for `left()` to come back empty (teardown across
/// a link is asynchronous); panics naming what is still running.
pub fn assert_none_left(what: &str, patience: Duration, left: impl Fn() -> Vec<Process>) {
    let deadline = Instant::now() + patience;
    loop {
        let remaining = left();
        if remaining.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what} still running after {patience:?}: {remaining:#?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Sends `signal` to `pid` (a process the test started itself, or one of its descendants).
pub fn signal(pid: u32, signal: i32) {
    // SAFETY: kill(2) with a pid read from /proc; a process gone since is ESRCH, harmless.
    unsafe {
        libc::kill(pid as libc::pid_t, signal);
    }
}
