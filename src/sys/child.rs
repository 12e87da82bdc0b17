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
/// has ended, and stops it once it runs past the deadline. The one place a
/// child is waited for under a limit ([`run_limited`], the sanitizer's tools).
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
            Ok(None) => format!(
                "still running after {} s, stopped",
                self.limit.as_secs_f64()
            ),
            Err(e) => format!("it could not be waited for: {e}"),
        };
        if self.group {
            let _ = command("kill")
                .args(["-KILL", "--", &format!("-{}", self.child.id())])
                .stderr(Stdio::null())
                .status();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        Some(Err(why))
    }
}

/// Runs `command` with no input to its end or to `limit`, whichever comes
/// first (then it is killed). Both pipes are read while it runs, so a
/// program that fills one while the other is waited on cannot stall it.
pub fn run_limited(mut command: Command, limit: Duration) -> Result<Finished, String> {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut running = Limited::start(&mut command, limit, false)?;
    let lines_of = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            pipe.map(|p| BufReader::new(p).lines().map_while(Result::ok).collect())
                .unwrap_or_default()
        })
    };
    let stdout = lines_of(running.child().stdout.take().map(|p| Box::new(p) as _));
    let stderr = lines_of(running.child().stderr.take().map(|p| Box::new(p) as _));
    loop {
        match running.poll() {
            None => std::thread::sleep(Duration::from_millis(10)),
            Some(Ok(status)) => {
                return Ok(Finished {
                    code: status.code(),
                    stdout: stdout.join().unwrap_or_default(),
                    stderr: stderr.join().unwrap_or_default(),
                })
            }
            Some(Err(why)) => return Err(why),
        }
    }
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
    }
}
