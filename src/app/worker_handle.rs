//! The caller's side of a worker process: spawn it, send a request, wait for
//! the answer under a watchdog, and kill it when it overstays.
//!
//! A reader thread turns the worker's protocol pipe into a channel so that a
//! wait can time out; a second thread keeps the last lines of the worker's
//! stderr (kernel `printf`, driver messages) for the report when it dies.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::facts::device::{DeviceInfo, GpuProblem};
use crate::protocol::{
    read_message, write_message, Event, FramingError, Request, SandboxReport, PROTOCOL_VERSION,
};

/// Lines of worker stderr kept for error reports.
const STDERR_LINES_KEPT: usize = 40;

/// How to start a worker: the program and its arguments. Normally this
/// binary with the hidden `worker` subcommand; tests substitute a stand-in.
#[derive(Debug, Clone)]
pub struct WorkerCommand {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    /// Extra environment for the worker (the batch grader pins its GPU this way).
    pub env: Vec<(OsString, OsString)>,
}

impl WorkerCommand {
    /// This executable, re-entered as a worker, told where this process
    /// found NVRTC and CUPTI (so the worker loads the same ones, and its
    /// sandbox may read their folders).
    pub fn current_exe() -> std::io::Result<Self> {
        let found = crate::gpu::found::current();
        Ok(Self {
            program: std::env::current_exe()?,
            args: vec!["__worker".into()],
            env: found.worker_env(&crate::gpu::found::Context::current()),
        })
    }

    /// The same worker, also allowed to read `paths` (the folders of cases that
    /// bring their own tensors) inside its sandbox (docs/SECURITY.md).
    pub fn reading(mut self, paths: impl IntoIterator<Item = PathBuf>) -> Self {
        let var = crate::worker::sandbox::EXTRA_READ_ENV;
        let added: Vec<PathBuf> = paths
            .into_iter()
            .filter_map(|p| std::fs::canonicalize(p).ok())
            .collect();
        if added.is_empty() {
            return self;
        }
        let inherited = self
            .env
            .iter()
            .rev()
            .find(|(k, _)| k == var)
            .map(|(_, v)| v.clone())
            .or_else(|| std::env::var_os(var));
        let mut all: Vec<PathBuf> = inherited
            .map(|v| std::env::split_paths(&v).collect())
            .unwrap_or_default();
        all.extend(added);
        if let Ok(joined) = std::env::join_paths(all) {
            self.env.push((var.into(), joined));
        }
        self
    }

    /// The same worker, told which GPU to open (see [`crate::worker::GPU_ENV`]).
    pub fn on_gpu(mut self, selection: crate::worker::GpuSelection) -> Self {
        self.env
            .push((crate::worker::GPU_ENV.into(), selection.to_string().into()));
        self
    }
}

/// Why a request got no answer.
#[derive(Debug, thiserror::Error)]
pub enum WorkerFailure {
    #[error("no answer within {0:?}; the worker was stopped")]
    Timeout(Duration),
    #[error("the worker exited ({status}){}", stderr_excerpt(.stderr))]
    Died { status: String, stderr: Vec<String> },
    #[error("the worker sent something unreadable: {0}")]
    Protocol(String),
    #[error("could not start the worker: {0}")]
    Spawn(String),
}

fn stderr_excerpt(lines: &[String]) -> String {
    match lines.last() {
        Some(last) => format!("; its last message: {last}"),
        None => String::new(),
    }
}

/// A running worker.
pub struct WorkerHandle {
    child: Child,
    stdin: ChildStdin,
    events: Receiver<Result<Event, FramingError>>,
    stderr: Arc<Mutex<VecDeque<String>>>,
    /// The GPU the worker found at start, or why it found none.
    pub gpu: Result<DeviceInfo, GpuProblem>,
    pub start_ms: f64,
    /// What the worker's sandbox enforces, as it said in its greeting.
    pub sandbox: Option<SandboxReport>,
}

impl WorkerHandle {
    /// Starts a worker and waits for its greeting.
    pub fn spawn(command: &WorkerCommand, start_timeout: Duration) -> Result<Self, WorkerFailure> {
        let mut child = Command::new(&command.program)
            .args(&command.args)
            .envs(command.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| WorkerFailure::Spawn(format!("{}: {e}", command.program.display())))?;
        let spawn_err = |what: &str| WorkerFailure::Spawn(format!("no {what} pipe"));
        let stdin = child.stdin.take().ok_or_else(|| spawn_err("stdin"))?;
        let stdout = child.stdout.take().ok_or_else(|| spawn_err("stdout"))?;
        let stderr_pipe = child.stderr.take().ok_or_else(|| spawn_err("stderr"))?;

        let (sender, events) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            loop {
                let message = read_message::<Event>(&mut reader);
                let stop = message.is_err();
                if sender.send(message).is_err() || stop {
                    return;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        let kept = Arc::clone(&stderr);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr_pipe).lines().map_while(Result::ok) {
                let mut lines = kept.lock().unwrap_or_else(|p| p.into_inner());
                if lines.len() == STDERR_LINES_KEPT {
                    lines.pop_front();
                }
                lines.push_back(line);
            }
        });

        let mut handle = Self {
            child,
            stdin,
            events,
            stderr,
            gpu: Err(GpuProblem::NoDevice {
                detail: "worker not started".into(),
            }),
            start_ms: 0.0,
            sandbox: None,
        };
        match handle.wait(start_timeout)? {
            Event::Ready {
                protocol,
                gpu,
                start_ms,
                sandbox,
            } if protocol == PROTOCOL_VERSION => {
                handle.gpu = gpu;
                handle.start_ms = start_ms;
                handle.sandbox = sandbox;
                Ok(handle)
            }
            Event::Ready { protocol, .. } => Err(WorkerFailure::Protocol(format!(
                "worker speaks protocol {protocol}, this build {PROTOCOL_VERSION}"
            ))),
            other => Err(WorkerFailure::Protocol(format!(
                "expected a greeting, got {other:?}"
            ))),
        }
    }

    /// Sends one request and waits up to `timeout` for its event.
    /// On timeout or death the worker is killed; the handle must then be dropped.
    pub fn request(
        &mut self,
        request: &Request,
        timeout: Duration,
    ) -> Result<Event, WorkerFailure> {
        if write_message(&mut self.stdin, request).is_err() {
            return Err(self.died());
        }
        self.wait(timeout)
    }

    fn wait(&mut self, timeout: Duration) -> Result<Event, WorkerFailure> {
        match self.events.recv_timeout(timeout) {
            Ok(Ok(event)) => Ok(event),
            Ok(Err(FramingError::Closed)) | Err(RecvTimeoutError::Disconnected) => Err(self.died()),
            Ok(Err(e)) => {
                self.kill();
                Err(WorkerFailure::Protocol(e.to_string()))
            }
            Err(RecvTimeoutError::Timeout) => {
                self.kill();
                Err(WorkerFailure::Timeout(timeout))
            }
        }
    }

    fn died(&mut self) -> WorkerFailure {
        let status = match self.child.wait() {
            Ok(s) => s.to_string(),
            Err(e) => e.to_string(),
        };
        // Give the stderr thread a moment to drain the last lines of a dying worker.
        std::thread::sleep(Duration::from_millis(20));
        WorkerFailure::Died {
            status,
            stderr: self.stderr_tail(),
        }
    }

    /// The last lines the worker wrote to stderr.
    pub fn stderr_tail(&self) -> Vec<String> {
        self.stderr
            .lock()
            .map(|l| l.iter().cloned().collect())
            .unwrap_or_default()
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Asks the worker to finish; one that does not within two seconds is killed by `Drop`.
    pub fn shutdown(mut self) {
        if write_message(&mut self.stdin, &Request::Shutdown).is_err() {
            return;
        }
        // std has no timed wait, so poll briefly.
        for _ in 0..200 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for WorkerHandle {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
