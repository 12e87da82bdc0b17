//! The caller's side of a worker process: spawn it, send a request, wait for
//! the answer under a watchdog, and kill it when it overstays.
//!
//! A reader thread turns the worker's protocol pipe into a channel so that a
//! wait can time out; a second thread keeps the last lines of the worker's
//! stderr (kernel `printf`, driver messages) for the report when it dies.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::remote::{Remote, TransportProblem};
use crate::facts::device::{DeviceInfo, GpuProblem};
use crate::outcome::LinkLoss;
use crate::protocol::{
    read_message, write_message, CompileProblem, CompileProblemKind, Event, FramingError, Request,
    SandboxReport, PROTOCOL_VERSION,
};

/// The variables [`library_env`] may set.
const LIBRARY_VARIABLES: [&str; 3] = [
    crate::gpu::found::NVRTC_VARIABLE,
    crate::gpu::cupti::PATH_VARIABLE,
    crate::gpu::headers::INCLUDE_VARIABLE,
];

/// What tells a worker where this process found NVRTC, CUPTI and the CUDA
/// type headers, for each not already set in this process's environment.
fn library_env() -> Vec<(OsString, OsString)> {
    let context = crate::gpu::found::Context::current();
    let mut env = crate::gpu::found::current().worker_env(&context);
    env.extend(crate::gpu::headers::current().worker_env(&context));
    env
}

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
    /// Where the worker runs when not here (docs/REMOTE.md); `program` is
    /// then the flashprof program on the node.
    pub remote: Option<Remote>,
}

impl WorkerCommand {
    /// This executable, re-entered as a worker, told where this process
    /// found NVRTC, CUPTI and the CUDA type headers (so the worker uses the
    /// same ones, and its sandbox may read their folders).
    pub fn current_exe() -> std::io::Result<Self> {
        Ok(Self {
            program: std::env::current_exe()?,
            args: vec!["__worker".into()],
            env: library_env(),
            remote: None,
        })
    }

    /// Searches for NVRTC, CUPTI and the CUDA type headers again (the
    /// headers beside the libraries found now), and tells the workers
    /// started from now on what was found instead of what was found before.
    pub fn search_libraries_again(&mut self) {
        crate::gpu::found::search_again();
        crate::gpu::headers::search_again();
        self.env
            .retain(|(name, _)| !LIBRARY_VARIABLES.iter().any(|v| name == *v));
        self.env.extend(library_env());
    }

    /// `flashprof __worker` started through `remote`, `flashprof` being
    /// its program on the node (docs/REMOTE.md), held to this process's
    /// compile memory limit: the node's environment is not the TA's, and
    /// the limit a grade records must be the one its compiles ran under.
    pub fn remote(remote: Remote, flashprof: &str) -> Self {
        let memory_mb = crate::worker::sandbox::compile_memory_mb().to_string();
        Self {
            program: PathBuf::from(flashprof),
            args: vec!["__worker".into()],
            env: vec![(
                crate::worker::sandbox::COMPILE_MEMORY_ENV.into(),
                memory_mb.into(),
            )],
            remote: Some(remote),
        }
    }

    /// The same worker, also allowed to read the tensor files of `folders` (of
    /// cases that bring their own tensors) inside its sandbox: the files
    /// [`crate::lab::npy::tensor_files`] lists, never a whole folder
    /// (docs/SECURITY.md).
    pub fn reading_tensors(mut self, folders: impl IntoIterator<Item = PathBuf>) -> Self {
        let var = crate::worker::sandbox::TENSOR_FILES_ENV;
        let added: Vec<PathBuf> = folders
            .into_iter()
            .filter_map(|folder| resolved_tensor_folder(&folder))
            .flat_map(|folder| crate::lab::npy::tensor_files(&folder))
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

/// A case's tensors folder with every link on its path resolved, when
/// those links are ones flashprof follows (`sys::trust::check_links`) and
/// the resolved path is still the folder the walk arrived at; `None`
/// otherwise, and its files are not granted. Only the folder is resolved:
/// each file is granted as `FOLDER/NAME`, which the worker opens with no
/// link on the way, so a file swapped for a link after it was listed is
/// refused there rather than resolved here to the link's target.
fn resolved_tensor_folder(folder: &Path) -> Option<PathBuf> {
    use std::os::unix::io::AsRawFd;
    let opened = crate::sys::trust::open_walked_folder(folder).ok()?;
    // The kernel's name for the folder opened: no link on it.
    std::fs::read_link(format!("/proc/self/fd/{}", opened.as_raw_fd())).ok()
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
    /// The link to a remote worker failed (ssh could not connect, or the
    /// connection dropped): nothing is known about the kernel.
    #[error("no connection to the GPU node ({via}): {reason}")]
    Connection { via: String, reason: String },
    /// The Slurm allocation the worker ran in is over (or none was granted).
    #[error("no Slurm allocation ({via}): {reason}")]
    AllocationEnded { via: String, reason: String },
    /// A worker on the node of another protocol version, with the command
    /// that installs the right one.
    #[error("{0}")]
    Incompatible(String),
    /// A newer save made the answer stale before it came; the worker was
    /// stopped.
    #[error("stopped for a newer save")]
    Superseded,
}

impl WorkerFailure {
    /// How the transport to a remote worker failed, when it was the
    /// transport that failed and not the worker or the kernel.
    pub fn link_loss(&self) -> Option<LinkLoss> {
        match self {
            Self::Connection { .. } => Some(LinkLoss::Connection),
            Self::AllocationEnded { .. } => Some(LinkLoss::Allocation),
            _ => None,
        }
    }

    /// True when the transport to a remote worker failed, not the worker or the kernel.
    pub fn is_transport(&self) -> bool {
        self.link_loss().is_some()
    }

    /// When a compile got this instead of an answer because the submission
    /// went past a limit every submission has, the student's compile error:
    /// the compile timeout, or death by the memory limit (`memory_mb`, the
    /// worker's `RLIMIT_AS`): NVRTC's allocator then aborts with "LLVM
    /// ERROR: out of memory" or `std::bad_alloc`, Rust's with "memory
    /// allocation of N bytes failed". No student text reaches the worker's
    /// stderr during a compile (NVRTC's diagnostics go to its log), so these
    /// words are the compiler's. Any other death stays the grader's.
    pub fn compile_over_limit(&self, memory_mb: Option<u64>) -> Option<CompileProblem> {
        const OUT_OF_MEMORY: [&str; 3] = ["out of memory", "bad_alloc", "memory allocation of"];
        let message = match (self, memory_mb) {
            (Self::Timeout(limit), _) => return Some(compile_timed_out(*limit)),
            (Self::Died { stderr, .. }, Some(mb))
                if stderr
                    .iter()
                    .any(|line| OUT_OF_MEMORY.iter().any(|mark| line.contains(mark))) =>
            {
                format!(
                    "the compiler used more than {}, the memory limit for every submission \
                     (a huge initialised array, a macro that expands without end, \
                     thousands of diagnostics?)",
                    memory_words(mb)
                )
            }
            _ => return None,
        };
        Some(CompileProblem {
            kind: CompileProblemKind::OverLimit,
            message,
        })
    }
}

/// A compile that ran past `limit`: the submission's compile error.
pub fn compile_timed_out(limit: Duration) -> CompileProblem {
    CompileProblem {
        kind: CompileProblemKind::OverLimit,
        message: format!(
            "the compile took longer than {} s, the limit for every submission \
             (a huge initialised array, a macro that expands without end?)",
            limit.as_secs()
        ),
    }
}

/// A limit in MiB as people say it: `4 GB`, `1.5 GB`, `512 MB`.
fn memory_words(mb: u64) -> String {
    match mb {
        mb if mb % 1024 == 0 => format!("{} GB", mb / 1024),
        mb if mb >= 1024 => format!("{:.1} GB", mb as f64 / 1024.0),
        mb => format!("{mb} MB"),
    }
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
    /// The transport when the worker runs elsewhere, and flashprof's program on the node.
    remote: Option<Remote>,
    program: String,
    /// ssh's own messages for this session (`-E`), removed with the handle.
    ssh_log: Option<PathBuf>,
    /// What the link added to the last answered request of a remote worker:
    /// the round trip seen here less the time the worker says it spent.
    link_ms: Option<f64>,
}

impl WorkerHandle {
    /// Starts a worker and waits for its greeting.
    pub fn spawn(command: &WorkerCommand, start_timeout: Duration) -> Result<Self, WorkerFailure> {
        let (program, args, env, ssh_log) = match &command.remote {
            None => (
                command.program.clone().into_os_string(),
                command.args.clone(),
                command.env.clone(),
                None,
            ),
            Some(remote) => {
                let flashprof = command.program.display().to_string();
                let launch = remote
                    .launch(&flashprof, &command.args, &command.env)
                    .map_err(|problem| transport_failure(remote, &flashprof, problem))?;
                (launch.program, launch.args, launch.env, launch.ssh_log)
            }
        };
        // ssh runs in flashprof's private folder, so nothing of the folder
        // it was started from is in its reach. srun keeps the caller's
        // folder: a Slurm step starts on the node in the folder srun was
        // started in, where a relative program or file name is the TA's.
        // The local worker keeps it too (it is sandboxed itself).
        let mut process = match &command.remote {
            Some(super::remote::Remote::Ssh { .. }) => crate::sys::child::command(&program),
            Some(super::remote::Remote::Slurm(_)) | None => Command::new(&program),
        };
        let mut child = process
            .args(&args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                if let Some(log) = &ssh_log {
                    super::remote::remove_ssh_log(log);
                }
                WorkerFailure::Spawn(format!("{}: {e}", program.to_string_lossy()))
            })?;
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
            remote: command.remote.clone(),
            program: command.program.display().to_string(),
            ssh_log,
            link_ms: None,
        };
        let greeting = match handle.wait(start_timeout) {
            // A worker on the node that cannot be read is most likely another version.
            Err(WorkerFailure::Protocol(e)) if command.remote.is_some() => {
                return Err(handle.incompatible(
                    command,
                    format!("its greeting is unreadable ({e}; a shell startup file that prints to stdout does this too)"),
                ))
            }
            Err(WorkerFailure::Timeout(limit)) if command.remote.is_some() => {
                return Err(WorkerFailure::Connection {
                    via: handle.via(),
                    reason: format!(
                        "the worker on the node did not greet within {:.0} s (a slow node or a stalled connection)",
                        limit.as_secs_f64()
                    ),
                })
            }
            other => other?,
        };
        match greeting {
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
            Event::Ready { protocol, .. } if command.remote.is_some() => Err(handle.incompatible(
                command,
                format!("it speaks protocol {protocol}, this build {PROTOCOL_VERSION}"),
            )),
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
        self.request_unless_stale(request, timeout, &|| false)
    }

    /// [`Self::request`], stopped as soon as `stale()` turns true (checked
    /// every few tens of milliseconds): the worker is then killed and the
    /// answer is [`WorkerFailure::Superseded`].
    pub fn request_unless_stale(
        &mut self,
        request: &Request,
        timeout: Duration,
        stale: &dyn Fn() -> bool,
    ) -> Result<Event, WorkerFailure> {
        let sent = Instant::now();
        self.send(request)?;
        let answer = self.wait_unless_stale(timeout, stale);
        if let (Some(_), Ok(event)) = (&self.remote, &answer) {
            if let Some(own_ms) = worker_time_ms(event) {
                let round_trip_ms = sent.elapsed().as_secs_f64() * 1e3;
                self.link_ms = Some((round_trip_ms - own_ms).max(0.0));
            }
        }
        answer
    }

    /// For a remote worker, the program carrying the link (`ssh`, `srun`) and
    /// what it added to the last answered request, in milliseconds.
    pub fn link(&self) -> Option<(&'static str, f64)> {
        let remote = self.remote.as_ref()?;
        self.link_ms.map(|ms| (remote.transport(), ms))
    }

    /// When the worker has already ended while idle (a remote worker whose
    /// connection dropped between checks), why; None while it is alive.
    pub fn ended(&mut self) -> Option<WorkerFailure> {
        match self.child.try_wait() {
            Ok(Some(_)) => Some(self.died()),
            _ => None,
        }
    }

    /// Sends one request without waiting for its answer (see [`Self::poll`]).
    pub fn send(&mut self, request: &Request) -> Result<(), WorkerFailure> {
        if write_message(&mut self.stdin, request).is_err() {
            return Err(self.died());
        }
        Ok(())
    }

    /// The answer to a request sent earlier, if it arrives within `wait`;
    /// `None` leaves the worker running (the caller decides when it has
    /// waited too long, and drops the handle to stop it).
    pub fn poll(&mut self, wait: Duration) -> Option<Result<Event, WorkerFailure>> {
        match self.events.recv_timeout(wait) {
            Err(RecvTimeoutError::Timeout) => None,
            Ok(Ok(event)) => Some(Ok(event)),
            Ok(Err(FramingError::Closed)) | Err(RecvTimeoutError::Disconnected) => {
                Some(Err(self.died()))
            }
            Ok(Err(e)) => {
                self.kill();
                Some(Err(WorkerFailure::Protocol(e.to_string())))
            }
        }
    }

    /// The answer within `timeout`, polled in slices between which
    /// `stale()` may stop the worker.
    fn wait_unless_stale(
        &mut self,
        timeout: Duration,
        stale: &dyn Fn() -> bool,
    ) -> Result<Event, WorkerFailure> {
        const SLICE: Duration = Duration::from_millis(40);
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if let Some(answer) = self.poll(left.min(SLICE)) {
                return answer;
            }
            if left <= SLICE {
                return Err(self.gave_up(timeout));
            }
            if stale() {
                self.kill();
                return Err(WorkerFailure::Superseded);
            }
        }
    }

    fn wait(&mut self, timeout: Duration) -> Result<Event, WorkerFailure> {
        match self.poll(timeout) {
            Some(answer) => answer,
            None => Err(self.gave_up(timeout)),
        }
    }

    /// Why no answer came within `timeout`, the worker killed.
    fn gave_up(&mut self, timeout: Duration) -> WorkerFailure {
        self.kill();
        // Far away, silence may be the link's fault: ask the node before blaming the kernel.
        if let Some(remote) = &self.remote {
            if let Err(problem) = remote.probe() {
                return transport_failure(remote, &self.program, problem);
            }
        }
        WorkerFailure::Timeout(timeout)
    }

    /// How the worker is reached, for messages (`ssh user@node`).
    fn via(&self) -> String {
        self.remote
            .as_ref()
            .map(Remote::describe)
            .unwrap_or_else(|| "this machine".into())
    }

    /// The node, and the Slurm job when there is one, for a header; None for a local worker.
    pub fn place(&self) -> Option<String> {
        self.remote.as_ref().and_then(Remote::place)
    }

    /// A remote worker of another version: refused, with the command that installs this one.
    fn incompatible(&mut self, command: &WorkerCommand, what: String) -> WorkerFailure {
        self.kill();
        let flashprof = command.program.display().to_string();
        let hint = match &self.remote {
            Some(remote) => remote.install_hint(&flashprof),
            None => String::new(),
        };
        WorkerFailure::Incompatible(format!(
            "refused the flashprof on the node ({}), another version: {what}; {hint}",
            self.via()
        ))
    }

    fn died(&mut self) -> WorkerFailure {
        let waited = self.child.wait();
        let code = waited.as_ref().ok().and_then(|s| s.code());
        let status = match waited {
            Ok(s) => s.to_string(),
            Err(e) => e.to_string(),
        };
        // Give the stderr thread a moment to drain the last lines of a dying worker.
        std::thread::sleep(Duration::from_millis(20));
        let stderr = self.stderr_tail();
        let mut status = status;
        if let Some(remote) = &self.remote {
            let ssh_log: Vec<String> = self
                .ssh_log
                .as_ref()
                .and_then(|p| std::fs::read_to_string(p).ok())
                .map(|t| t.lines().map(str::to_owned).collect())
                .unwrap_or_default();
            if let Some(problem) = remote.classify_exit(code, &stderr, &ssh_log) {
                return transport_failure(remote, &self.program, problem);
            }
            if self.ssh_log.is_some() && code == Some(255) {
                status.push_str(
                    ": through ssh, the worker on the node was ended by a signal (or the node closed the session)",
                );
            }
        }
        WorkerFailure::Died { status, stderr }
    }

    /// The last lines the worker wrote to stderr.
    pub fn stderr_tail(&self) -> Vec<String> {
        self.stderr
            .lock()
            .map(|l| l.iter().cloned().collect())
            .unwrap_or_default()
    }

    fn kill(&mut self) {
        match &self.remote {
            Some(remote) => remote.stop(&mut self.child),
            None => {
                let _ = self.child.kill();
                let _ = self.child.wait();
            }
        }
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
            self.kill();
        }
        if let Some(log) = &self.ssh_log {
            super::remote::remove_ssh_log(log);
        }
    }
}

/// The time the worker says it spent on a request, for the answers that carry it.
fn worker_time_ms(event: &Event) -> Option<f64> {
    match event {
        Event::Compiled(outcome) => Some(outcome.compile_ms + outcome.load_ms.unwrap_or(0.0)),
        Event::Loaded { load_ms } => Some(*load_ms),
        Event::Case(outcome) => Some(outcome.elapsed_ms),
        Event::Timing(outcome) => Some(outcome.elapsed_ms),
        Event::Counters(Ok(outcome)) => Some(outcome.elapsed_ms),
        Event::Lines(Ok(outcome)) => Some(outcome.worker_ms),
        _ => None,
    }
}

/// A transport problem as the failure a caller reports.
fn transport_failure(remote: &Remote, flashprof: &str, problem: TransportProblem) -> WorkerFailure {
    let via = remote.describe();
    match problem {
        TransportProblem::Connection(reason) => WorkerFailure::Connection { via, reason },
        TransportProblem::AllocationEnded(reason) => WorkerFailure::AllocationEnded { via, reason },
        TransportProblem::NotInstalled(reason) => WorkerFailure::Spawn(format!(
            "no flashprof on the node ({via}: {reason}); {}",
            remote.install_hint(flashprof)
        )),
    }
}
