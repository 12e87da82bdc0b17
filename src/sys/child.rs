//! Other programs, started with nothing of a student's in reach and run
//! under a deadline.
//!
//! A program inherits the working folder, and a folder a student can write
//! is a way in: `python3 -m pip` and `python3 -c` put it first on Python's
//! import path (a `pip/` folder or a `json.py` there runs as whoever
//! started Python), and ssh, srun or a sanitizer may read a relative name
//! from it. So every program flashprof starts runs in [`working_folder`],
//! one only this user can enter, and is told, should it be Python or start
//! Python, to put no folder of its own before the standard library.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::folder::{make_private, own_flashprof_cache};

/// The folder other programs run in: flashprof's private cache folder,
/// made `0700` if need be; `/` (root's, which no student can write) when
/// there is no cache folder to make.
pub fn working_folder() -> PathBuf {
    own_flashprof_cache()
        .filter(|folder| make_private(folder).is_ok())
        .unwrap_or_else(|| PathBuf::from("/"))
}

/// `program`, to run in [`working_folder`].
pub fn command(program: impl AsRef<OsStr>) -> Command {
    command_in(program, &working_folder())
}

/// `program`, to run in `folder`, which must be one this user owns and no
/// one else can write.
pub fn command_in(program: impl AsRef<OsStr>, folder: &Path) -> Command {
    let mut command = Command::new(program);
    command.current_dir(folder);
    // Python 3.11 and later then put neither the working folder nor a
    // script's own folder on the import path; older ones ignore it and find
    // only `folder` there, which holds nothing of a student's.
    command.env("PYTHONSAFEPATH", "1");
    command
}

/// How a program run by [`run_limited`] ended: its exit code (`None` when a
/// signal ended it) and every line it wrote to each pipe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    pub code: Option<i32>,
    pub stdout: Vec<String>,
    pub stderr: Vec<String>,
}

/// A started program with a deadline: [`Limited::poll`] says whether it
/// has ended, and stops it once it runs past the deadline; dropped while it
/// runs, it is stopped too. The one place a child is waited for under a
/// limit ([`run_limited`], the sanitizer's tools).
pub struct Limited {
    child: Child,
    until: Instant,
    limit: Duration,
    /// Started as the leader of its own process group: the whole group is
    /// stopped, so a program's own children do not outlive it.
    group: bool,
}

impl Limited {
    /// Starts `command` (set up by the caller, pipes included) with `limit`
    /// from now. `group`: in a process group of its own, stopped whole.
    pub fn start(command: &mut Command, limit: Duration, group: bool) -> Result<Self, String> {
        if group {
            std::os::unix::process::CommandExt::process_group(command, 0);
        }
        let child = command.spawn().map_err(|e| {
            let program = Path::new(command.get_program());
            format!("cannot start {}: {e}", program.display())
        })?;
        Ok(Self {
            child,
            until: Instant::now() + limit,
            limit,
            group,
        })
    }

    /// The child, for its pipes.
    pub fn child(&mut self) -> &mut Child {
        &mut self.child
    }

    /// `None` while it runs within its limit; its exit status once it has
    /// ended; why not, once it ran past the limit (then it is stopped) or
    /// could not be waited for.
    pub fn poll(&mut self) -> Option<Result<ExitStatus, String>> {
        let why = match self.child.try_wait() {
            Ok(Some(status)) => return Some(Ok(status)),
            Ok(None) if Instant::now() < self.until => return None,
            Ok(None) => {
                let limit = self.limit.as_secs_f64();
                format!("still running after {limit} s, stopped")
            }
            Err(e) => format!("it could not be waited for: {e}"),
        };
        self.stop();
        Some(Err(why))
    }

    /// Stops the child and, when it leads one, its process group.
    fn stop(&mut self) {
        // Only while the child is unreaped is its id surely its group's.
        if self.group && matches!(self.child.try_wait(), Ok(None)) {
            kill_group(self.child.id());
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Limited {
    /// A child never outlives the code that started it (a panic included).
    /// One that ended keeps what it started, as any program's would.
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.stop();
        }
    }
}

/// SIGKILL to the process group `leader` leads.
#[allow(unsafe_code)]
fn kill_group(leader: u32) {
    if let Ok(leader) = libc::pid_t::try_from(leader) {
        // SAFETY: kill(2) takes two integers and touches no memory of ours.
        unsafe { libc::kill(-leader, libc::SIGKILL) };
    }
}

/// How long the pipes are still read after a program ended: a child it
/// left behind (ssh's `ControlPersist` master, say) may hold them open for
/// good, and what the program itself wrote is in them by then.
const PIPES_AFTER_EXIT: Duration = Duration::from_millis(200);

/// Runs `command` with no input to its end or to `limit`, whichever comes
/// first (then it and everything it started are killed). Both pipes are
/// read while it runs, so a program that fills one while the other is
/// waited on cannot stall it; after it ended they are read for
/// [`PIPES_AFTER_EXIT`] more at most.
pub fn run_limited(mut command: Command, limit: Duration) -> Result<Finished, String> {
    use std::sync::{Arc, Mutex};
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut running = Limited::start(&mut command, limit, true)?;
    // Each reader keeps what it read where it can be taken at any time,
    // and says when its pipe closed.
    let (closed, pipes_closed) = std::sync::mpsc::channel();
    let lines_of = |pipe: Option<Box<dyn Read + Send>>| {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let (kept, closed) = (lines.clone(), closed.clone());
        std::thread::spawn(move || {
            if let Some(pipe) = pipe {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    kept.lock().unwrap_or_else(|e| e.into_inner()).push(line);
                }
            }
            let _ = closed.send(());
        });
        lines
    };
    let stdout = lines_of(running.child().stdout.take().map(|p| Box::new(p) as _));
    let stderr = lines_of(running.child().stderr.take().map(|p| Box::new(p) as _));
    let status = loop {
        match running.poll() {
            None => std::thread::sleep(Duration::from_millis(10)),
            Some(Ok(status)) => break status,
            Some(Err(why)) => return Err(why),
        }
    };
    let until = Instant::now() + PIPES_AFTER_EXIT;
    for _ in 0..2 {
        let rest = until.saturating_duration_since(Instant::now());
        if pipes_closed.recv_timeout(rest).is_err() {
            break;
        }
    }
    let taken = |lines: Arc<Mutex<Vec<String>>>| {
        std::mem::take(&mut *lines.lock().unwrap_or_else(|e| e.into_inner()))
    };
    Ok(Finished {
        code: status.code(),
        stdout: taken(stdout),
        stderr: taken(stderr),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The attack this layer is for: a `json.py` in the folder a TA stands
    /// in when flashprof starts Python. Python started here never imports it.
    #[test]
    fn python_started_here_imports_nothing_from_the_caller_s_folder() {
        let student = tempfile::tempdir().unwrap();
        let marker = student.path().join("ran");
        std::fs::write(
            student.path().join("json.py"),
            format!(
                "open({:?}, 'w').write('pwned')\n",
                marker.display().to_string()
            ),
        )
        .unwrap();
        let private = tempfile::tempdir().unwrap();
        let mut python = command_in("python3", private.path());
        python.args(["-c", "import json, os; print(os.getcwd())"]);
        // The caller stands in the student's folder, as a TA grading it would.
        let finished = std::env::set_current_dir(student.path())
            .map(|()| run_limited(python, Duration::from_secs(20)));
        let finished = finished.unwrap().expect("python3 runs");
        assert_eq!(finished.code, Some(0), "{finished:?}");
        assert_eq!(
            finished.stdout,
            [private.path().canonicalize().unwrap().display().to_string()]
        );
        assert!(!marker.exists(), "the student's json.py ran");
    }

    #[test]
    fn both_pipes_are_drained_and_a_deadline_kills() {
        let mut chatty = command_in("sh", Path::new("/"));
        // 256 KiB to each pipe: more than a pipe holds unread.
        chatty.args([
            "-c",
            "head -c 262144 /dev/zero | tr '\\0' 'o'; echo; head -c 262144 /dev/zero | tr '\\0' 'e' >&2; echo >&2; exit 3",
        ]);
        let finished = run_limited(chatty, Duration::from_secs(20)).expect("ends");
        assert_eq!(finished.code, Some(3));
        assert_eq!(finished.stdout[0].len(), 262_144);
        assert_eq!(finished.stderr[0].len(), 262_144);
        let mut sleeper = command_in("sleep", Path::new("/"));
        sleeper.arg("30");
        let started = Instant::now();
        let error = run_limited(sleeper, Duration::from_millis(200)).unwrap_err();
        assert!(error.starts_with("still running after 0.2 s"), "{error}");
        assert!(started.elapsed() < Duration::from_secs(5));
        // A child left holding the pipes after the program ended: the
        // answer, all the program wrote, comes soon after it ended, not
        // when the child lets go nor at the deadline.
        let mut holder = command_in("sh", Path::new("/"));
        holder.args(["-c", "sleep 3 & echo hi; echo err >&2"]);
        let started = Instant::now();
        let finished = run_limited(holder, Duration::from_secs(20)).expect("it ended");
        assert_eq!(finished.code, Some(0));
        assert_eq!(finished.stdout, ["hi"]);
        assert_eq!(finished.stderr, ["err"]);
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        // What a program started is stopped with it at the deadline.
        let marker = tempfile::tempdir().unwrap();
        let pid_file = marker.path().join("pid");
        let mut parent = command_in("sh", Path::new("/"));
        parent.args([
            "-c",
            &format!("sleep 30 & echo $! > {}; wait", pid_file.display()),
        ]);
        run_limited(parent, Duration::from_millis(300)).unwrap_err();
        let pid = std::fs::read_to_string(&pid_file).unwrap();
        let status = std::path::PathBuf::from(format!("/proc/{}/status", pid.trim()));
        let gone = (0..100).any(|_| {
            std::thread::sleep(Duration::from_millis(20));
            std::fs::read_to_string(&status).map_or(true, |s| {
                s.lines()
                    .any(|l| l.starts_with("State:") && l.contains('Z'))
            })
        });
        assert!(gone, "the program's own child outlived its deadline");
    }
}
