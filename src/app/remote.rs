//! Workers on another machine (docs/REMOTE.md): over the system's OpenSSH
//! client (`--gpu-host user@node`) or inside a Slurm allocation
//! (`--gpu-slurm "ARGS"`).
//!
//! Only the way the worker process is started changes: the caller still
//! talks to it over the child's stdin and stdout, the same messages as a
//! local worker, so the watchdog, the restart after a hang or a fault, and
//! the binary frames work as they do locally. What this module adds is
//! knowing when the *transport* failed rather than the student's kernel:
//! ssh's exit status 255 with words in ssh's own log (`-E`, which a kernel's
//! `printf` cannot reach), a remote shell that has no `flashprof` (127),
//! `squeue` saying the allocation is gone, and a connection probe after a
//! watchdog fires, so a dropped link is never reported as the student's hang
//! and a crash is never excused as a dropped link.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::protocol::PROTOCOL_VERSION;
use crate::sys::child::{self, run_limited, Finished};

/// The flashprof program on the node, when `--gpu-host-flashprof` is not given.
pub const REMOTE_FLASHPROF_ENV: &str = "FLASHPROF_REMOTE_FLASHPROF";
/// An ssh configuration file to use instead of `~/.ssh/config` (`ssh -F`).
pub const SSH_CONFIG_ENV: &str = "FLASHPROF_SSH_CONFIG";
/// The program name used on the node when neither the flag nor the variable is set.
pub const DEFAULT_REMOTE_FLASHPROF: &str = "flashprof";
/// Seconds ssh waits for a node to accept the connection and send its banner.
pub const CONNECT_TIMEOUT_S: u64 = 10;
/// How long the connection probe after a watchdog may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(15);

/// Where the worker runs, when not on this machine.
#[derive(Debug, Clone)]
pub enum Remote {
    /// `ssh -T -o BatchMode=yes HOST 'env VAR=... FLASHPROF __worker'`.
    Ssh { host: String },
    /// `srun --jobid=N FLASHPROF __worker` inside one allocation per session.
    Slurm(SlurmSession),
}

/// How to start one worker process on this machine (ssh, srun or the worker itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    pub program: OsString,
    pub args: Vec<OsString>,
    /// Environment of the local process (empty for ssh: it travels in the remote command).
    pub env: Vec<(OsString, OsString)>,
    /// Where ssh writes its own messages (`-E`), apart from the worker's
    /// stderr, which a kernel's `printf` reaches: only ssh can write here.
    pub ssh_log: Option<PathBuf>,
}

/// What went wrong with the transport itself, as opposed to the worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransportProblem {
    /// The connection could not be made or was lost (ssh exit 255, a failed probe).
    Connection(String),
    /// The node has no `flashprof` where we looked (remote shell exit 127).
    NotInstalled(String),
    /// The Slurm allocation ended (time limit, cancelled) or was never granted.
    AllocationEnded(String),
}

impl Remote {
    /// A worker over ssh on `host` (`user@node`, or a `Host` of the user's ssh config).
    pub fn ssh(host: &str) -> Result<Self, String> {
        let host = host.trim();
        if host.is_empty() {
            return Err("--gpu-host needs a host, e.g. `user@node`".into());
        }
        // An argument that ssh would read as an option (`-oProxyCommand=...`) is refused.
        if host.starts_with('-') || host.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!(
                "--gpu-host `{host}` is not a host name (no leading `-`, no spaces)"
            ));
        }
        Ok(Self::Ssh { host: host.into() })
    }

    /// A worker inside a Slurm allocation asked for with `args` (`--gres=gpu:1 -p gpu ...`).
    pub fn slurm(args: &str) -> Result<Self, String> {
        let args = split_words(args)?;
        Ok(Self::Slurm(SlurmSession {
            cell: Arc::new(AllocationCell {
                args,
                allocation: Mutex::new(None),
            }),
        }))
    }

    /// The words a person would recognise: `ssh user@node` or `srun --jobid=N (node)`.
    pub fn describe(&self) -> String {
        match self {
            Self::Ssh { host } => format!("ssh {host}"),
            Self::Slurm(session) => match session.current() {
                Some(a) => a.describe(),
                None => format!("Slurm ({})", session.cell.args.join(" ")),
            },
        }
    }

    /// The program that carries the link, for a header (`ssh 12 ms`).
    pub fn transport(&self) -> &'static str {
        match self {
            Self::Ssh { .. } => "ssh",
            Self::Slurm(_) => "srun",
        }
    }

    /// The node and job id for a header, when known (`gpu17, job 4242`).
    pub fn place(&self) -> Option<String> {
        match self {
            Self::Ssh { host } => Some(host.clone()),
            Self::Slurm(session) => session.current().map(|a| a.place()),
        }
    }

    /// How to start a worker: `flashprof` is its program on the node,
    /// `worker_args` its arguments, `env` what it must find in its environment.
    pub fn launch(
        &self,
        flashprof: &str,
        worker_args: &[OsString],
        env: &[(OsString, OsString)],
    ) -> Result<Launch, TransportProblem> {
        // Far away, the worker must not outlive its link (worker::stdio).
        let mut env = env.to_vec();
        env.push((crate::worker::EXIT_ON_HANGUP_ENV.into(), "1".into()));
        let env = env.as_slice();
        match self {
            Self::Ssh { host } => {
                let mut args = ssh_options();
                let log = ssh_log_path();
                if let Some(log) = &log {
                    // -v: the log then also says whether the worker's exit
                    // status or signal arrived, which tells a crash on the
                    // node from a connection lost under it.
                    args.push("-v".into());
                    args.push("-E".into());
                    args.push(log.clone().into_os_string());
                }
                args.push("--".into());
                args.push(host.into());
                args.push(remote_command(flashprof, worker_args, env).into());
                Ok(Launch {
                    program: "ssh".into(),
                    args,
                    env: Vec::new(),
                    ssh_log: log,
                })
            }
            Self::Slurm(session) => {
                let job = session.allocation()?;
                let args = srun_args(&job.id, flashprof, worker_args);
                // srun exports the caller's environment to the step by default.
                Ok(Launch {
                    program: "srun".into(),
                    args,
                    env: env.to_vec(),
                    ssh_log: None,
                })
            }
        }
    }

    /// Whether a worker process that ended with `code` (None: killed by a
    /// signal) and wrote `stderr` failed because of the transport; `ssh_log`
    /// holds what ssh itself wrote (`-E`).
    ///
    /// ssh exits 255 for its own errors, but also when the remote command
    /// was ended by a signal (a worker a kernel crashed). Its own log tells
    /// them apart, and, when it is empty (some closing messages go to
    /// stderr), whether the node still answers.
    pub fn classify_exit(
        &self,
        code: Option<i32>,
        stderr: &[String],
        ssh_log: &[String],
    ) -> Option<TransportProblem> {
        let reason = || last_words(stderr);
        match self {
            Self::Ssh { .. } => match code {
                // The session closed properly: the worker's own end (a
                // signal makes ssh exit 255 too), nothing wrong with the link.
                Some(255) if ssh_log.iter().any(|l| ended_in_session(l)) => None,
                Some(255) if ssh_log.iter().any(|l| !l.trim().is_empty()) => Some(
                    TransportProblem::Connection(connection_reason(ssh_log, stderr)),
                ),
                Some(255) => self.probe().err(),
                // The remote shell: command not found / not executable.
                Some(127) | Some(126) => Some(TransportProblem::NotInstalled(reason())),
                _ => None,
            },
            Self::Slurm(_) => {
                // srun forwards the step's stderr, kernel printf included, so
                // Slurm's words there are only a hint: squeue has the say.
                let hint = stderr
                    .iter()
                    .any(|l| slurm_says_allocation_ended(l) || l.starts_with("srun: error:"));
                if hint {
                    if let Err(problem) = self.probe() {
                        return Some(problem);
                    }
                }
                match code {
                    Some(127) | Some(126) => Some(TransportProblem::NotInstalled(reason())),
                    // slurmstepd could not start the program: it says so and the step exits 2.
                    Some(2) if stderr.iter().any(|l| l.contains("error: execve(): ")) => {
                        Some(TransportProblem::NotInstalled(reason()))
                    }
                    _ => None,
                }
            }
        }
    }

    /// After a watchdog fired: is the node still there? `Err` carries why not
    /// (ssh's own words, or Slurm's), so the caller reports a lost connection
    /// instead of blaming the kernel.
    pub fn probe(&self) -> Result<(), TransportProblem> {
        match self {
            Self::Ssh { host } => {
                let mut command = child::command("ssh");
                command.args(ssh_options()).arg("--").arg(host).arg("true");
                match run_limited(command, PROBE_TIMEOUT) {
                    Ok(Finished { code: Some(0), .. }) => Ok(()),
                    Ok(Finished { stderr, .. }) => {
                        Err(TransportProblem::Connection(last_words(&stderr)))
                    }
                    Err(e) => Err(TransportProblem::Connection(e)),
                }
            }
            Self::Slurm(session) => {
                let Some(job) = session.current() else {
                    return Ok(());
                };
                let mut command = child::command("squeue");
                command.args(["-h", "-o", "%T", "-j", &job.id]);
                let state = match run_limited(command, PROBE_TIMEOUT) {
                    Ok(Finished {
                        code: Some(0),
                        stdout,
                        ..
                    }) => stdout.join(" ").trim().to_owned(),
                    // A job that left the controller's memory.
                    Ok(Finished { stderr, .. })
                        if stderr.iter().any(|l| l.contains("Invalid job id")) =>
                    {
                        String::new()
                    }
                    // squeue itself failing says nothing about the job.
                    _ => return Ok(()),
                };
                match state.as_str() {
                    // COMPLETING is a job on its way out (scancel, time
                    // limit): it runs no new step, so it counts as ended.
                    "RUNNING" | "CONFIGURING" => Ok(()),
                    "" => {
                        session.forget();
                        Err(TransportProblem::AllocationEnded(format!(
                            "job {} ended (no longer in the queue)",
                            job.id
                        )))
                    }
                    other => {
                        session.forget();
                        Err(TransportProblem::AllocationEnded(format!(
                            "job {} ended ({other})",
                            job.id
                        )))
                    }
                }
            }
        }
    }

    /// Gives back what the session holds on the cluster now (the Slurm
    /// allocation), for a caller about to exit while a thread of its own may
    /// still hold this transport: the TUI, whose engine thread is not
    /// waited for at quit. Nothing to give back for ssh: the sessions end
    /// with this process's pipes.
    pub fn release(&self) {
        if let Self::Slurm(session) = self {
            let held = session
                .cell
                .allocation
                .lock()
                .map(|mut a| a.take())
                .unwrap_or(None);
            if let Some(allocation) = held {
                cancel(&allocation);
            }
        }
    }

    /// Stops a worker process started through this transport. srun is asked
    /// first (SIGTERM cancels the step on the node); ssh is simply cut, which
    /// ends the remote session.
    pub fn stop(&self, child: &mut Child) {
        if let Self::Slurm(_) = self {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(child.id().to_string())
                .stderr(Stdio::null())
                .status();
            let until = Instant::now() + Duration::from_secs(3);
            while Instant::now() < until {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// The message for a worker on the node that is missing or speaks another
    /// protocol: what to run to put this very build there.
    pub fn install_hint(&self, flashprof: &str) -> String {
        let this = std::env::current_exe()
            .map(|p| shell_quote(&p.display().to_string()))
            .unwrap_or_else(|_| "flashprof".into());
        let version = env!("CARGO_PKG_VERSION");
        let destination = if flashprof.contains('/') {
            flashprof.to_owned()
        } else {
            ".local/bin/flashprof".to_owned()
        };
        let target = match self {
            Self::Ssh { host } => host.clone(),
            Self::Slurm(_) => {
                return format!(
                    "install the matching flashprof {version} (protocol {PROTOCOL_VERSION}) where the compute nodes see it (a shared home): cp {this} ~/{destination}, or pass --gpu-host-flashprof with its path"
                )
            }
        };
        let on_path = if flashprof.contains('/') {
            String::new()
        } else {
            format!(
                " (and have ~/.local/bin on PATH for non-interactive shells, or pass --gpu-host-flashprof '~/{destination}')"
            )
        };
        format!(
            "install the matching flashprof {version} (protocol {PROTOCOL_VERSION}) on the node: \
             scp {this} {target}:{destination}{on_path}"
        )
    }
}

/// A file of its own for one ssh session's messages, in a folder only this
/// user can enter, made new (never an existing path another user could have
/// planted); [`remove_ssh_log`] removes both. None when no folder can be made:
/// ssh then writes to stderr as usual.
fn ssh_log_path() -> Option<PathBuf> {
    static SESSIONS: AtomicU64 = AtomicU64::new(0);
    let n = SESSIONS.fetch_add(1, Ordering::Relaxed);
    let prefix = format!("flashprof-ssh-{}-{n}", std::process::id());
    crate::sys::folder::new_private_temp(&prefix)
        .ok()
        .map(|dir| dir.join("ssh.log"))
}

/// Removes a session's ssh log and its folder.
pub fn remove_ssh_log(log: &std::path::Path) {
    let _ = std::fs::remove_file(log);
    if let Some(dir) = log.parent() {
        let _ = std::fs::remove_dir(dir);
    }
}

/// ssh options every connection uses: never prompt, no terminal (the
/// protocol is binary-safe only without one), give up on a node that does
/// not answer within [`CONNECT_TIMEOUT_S`] (OpenSSH counts the banner
/// exchange in it, so a node that accepts the connection and says nothing
/// fails as fast as one that refuses it), notice a dead link; and the
/// configuration file named by [`SSH_CONFIG_ENV`], when set (ssh reads
/// `~/.ssh/config` from the account's home, whatever `$HOME` says, so this
/// is the way to point it at another one).
fn ssh_options() -> Vec<OsString> {
    let mut options: Vec<OsString> = [
        "-T",
        "-o",
        "BatchMode=yes",
        "-o",
        "ServerAliveInterval=5",
        "-o",
        "ServerAliveCountMax=3",
    ]
    .into_iter()
    .map(Into::into)
    .collect();
    options.push("-o".into());
    options.push(format!("ConnectTimeout={CONNECT_TIMEOUT_S}").into());
    if let Some(config) = std::env::var_os(SSH_CONFIG_ENV).filter(|c| !c.is_empty()) {
        // Made whole: ssh runs in flashprof's private folder, not the caller's.
        let named = std::path::PathBuf::from(config);
        options.push("-F".into());
        options.push(
            std::path::absolute(&named)
                .unwrap_or(named)
                .into_os_string(),
        );
    }
    options
}

/// The command line the node's shell runs: `env 'VAR=value' 'flashprof' '__worker'`,
/// every word quoted for a POSIX shell. ssh forwards no local environment, so
/// what the worker needs (the GPU it opens, say) travels here.
pub fn remote_command(
    flashprof: &str,
    worker_args: &[OsString],
    env: &[(OsString, OsString)],
) -> String {
    let mut words: Vec<String> = Vec::new();
    if !env.is_empty() {
        words.push("env".into());
        for (key, value) in env {
            words.push(shell_quote(&format!(
                "{}={}",
                key.to_string_lossy(),
                value.to_string_lossy()
            )));
        }
    }
    words.push(quote_program(flashprof));
    words.extend(
        worker_args
            .iter()
            .map(|a| shell_quote(&a.to_string_lossy())),
    );
    words.join(" ")
}

/// srun's arguments for one worker step: `--` ends srun's options, so a
/// program path starting with `-` is never read as one, and a leading `~/`
/// (which no shell expands here) is this user's home, as it is for ssh.
/// `--overlap` lets steps of the session share the allocation: the GPU
/// worker's step holds its CPUs while a GPU-less builder compiles beside
/// it, and without it the builder's step would wait for the worker to end.
fn srun_args(job: &str, flashprof: &str, worker_args: &[OsString]) -> Vec<OsString> {
    let program: OsString = match (flashprof.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => std::path::Path::new(&home).join(rest).into(),
        _ => flashprof.into(),
    };
    let mut args: Vec<OsString> = vec![
        format!("--jobid={job}").into(),
        "--ntasks=1".into(),
        "--nodes=1".into(),
        "--overlap".into(),
        "--quiet".into(),
        "--".into(),
        program,
    ];
    args.extend(worker_args.iter().cloned());
    args
}

/// A program path for the remote shell: a leading `~/` is left to the shell
/// to expand (it is the user's home on the node), the rest quoted.
fn quote_program(path: &str) -> String {
    match path.strip_prefix("~/") {
        Some(rest) => format!("~/{}", shell_quote(rest)),
        None => shell_quote(path),
    }
}

/// One word for a POSIX shell: single quotes, with `'` written as `'\''`.
pub fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@+%".contains(c));
    if plain {
        return word.to_owned();
    }
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// Splits `--gpu-slurm "ARGS"` into words: blanks separate, single and
/// double quotes group, a backslash escapes the next character.
pub fn split_words(text: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err(format!("unclosed ' in `{text}`")),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c) => word.push(c),
                            None => return Err(format!("trailing \\ in `{text}`")),
                        },
                        Some(c) => word.push(c),
                        None => return Err(format!("unclosed \" in `{text}`")),
                    }
                }
            }
            '\\' => match chars.next() {
                Some(c) => {
                    in_word = true;
                    word.push(c)
                }
                None => return Err(format!("trailing \\ in `{text}`")),
            },
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                word.push(c)
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

/// The last meaningful lines of a transport's stderr, as one reason.
fn last_words(stderr: &[String]) -> String {
    let lines: Vec<&str> = stderr
        .iter()
        .map(|l| l.trim())
        .filter(|l| !l.is_empty())
        .collect();
    match lines.len() {
        0 => "no message".into(),
        n => lines[n.saturating_sub(2)..].join(" / "),
    }
}

/// A line of ssh's verbose log saying the remote command's exit status or
/// signal arrived: the session ended the normal way.
fn ended_in_session(line: &str) -> bool {
    line.contains("rtype exit-status") || line.contains("rtype exit-signal")
}

/// Why ssh lost the connection, in its own words: its log less the chatter
/// of `-v`, else its closing message (which it writes to stderr, after
/// anything the worker wrote there).
fn connection_reason(ssh_log: &[String], stderr: &[String]) -> String {
    const CHATTER: [&str; 6] = [
        "debug",
        "OpenSSH_",
        "Authenticated to",
        "Transferred:",
        "Bytes per second",
        "Warning: Permanently added",
    ];
    let said: Vec<String> = ssh_log
        .iter()
        .filter(|l| !CHATTER.iter().any(|c| l.trim_start().starts_with(c)))
        .cloned()
        .collect();
    if said.iter().any(|l| !l.trim().is_empty()) {
        return last_words(&said);
    }
    match stderr.iter().rev().find(|l| !l.trim().is_empty()) {
        Some(closing) if closing.trim_start().starts_with("Connection to ") => {
            closing.trim().to_owned()
        }
        _ => "the connection closed before the worker's exit status arrived".into(),
    }
}

fn slurm_says_allocation_ended(line: &str) -> bool {
    [
        "DUE TO TIME LIMIT",
        "Invalid job id",
        "Job has expired",
        "already completing or completed",
        "Unable to confirm allocation",
        "has been revoked",
    ]
    .iter()
    .any(|mark| line.contains(mark))
}

/// One Slurm allocation shared by every worker of a session: asked for at
/// the first worker, kept while the session lasts (restarted workers are new
/// steps in it), released (`scancel`) when the last handle on it goes.
#[derive(Debug, Clone)]
pub struct SlurmSession {
    cell: Arc<AllocationCell>,
}

#[derive(Debug)]
struct AllocationCell {
    args: Vec<String>,
    allocation: Mutex<Option<Allocation>>,
}

/// A granted allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocation {
    pub id: String,
    pub nodes: Option<String>,
}

impl Allocation {
    fn describe(&self) -> String {
        format!("srun --jobid={} ({})", self.id, self.place())
    }

    fn place(&self) -> String {
        match &self.nodes {
            Some(nodes) => format!("{nodes}, job {}", self.id),
            None => format!("job {}", self.id),
        }
    }
}

impl SlurmSession {
    /// The allocation, if one is held now.
    pub fn current(&self) -> Option<Allocation> {
        self.cell
            .allocation
            .lock()
            .map(|a| a.clone())
            .unwrap_or(None)
    }

    /// Forgets an allocation Slurm says is over, so the next worker asks again.
    pub fn forget(&self) {
        if let Ok(mut a) = self.cell.allocation.lock() {
            *a = None;
        }
    }

    /// The allocation, asking Slurm for one (`salloc --no-shell ARGS`) when none is held.
    fn allocation(&self) -> Result<Allocation, TransportProblem> {
        let mut held = self
            .cell
            .allocation
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(a) = held.as_ref() {
            return Ok(a.clone());
        }
        let output = child::command("salloc")
            .arg("--no-shell")
            .arg("--job-name=flashprof")
            .args(&self.cell.args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| TransportProblem::AllocationEnded(format!("cannot run salloc: {e}")))?;
        let text = format!(
            "{}\n{}",
            String::from_utf8_lossy(&output.stderr),
            String::from_utf8_lossy(&output.stdout)
        );
        let lines: Vec<String> = text.lines().map(str::to_owned).collect();
        // salloc names the nodes only when it waited for them to boot: else ask.
        let granted = parse_salloc(&lines).map(|mut allocation| {
            if allocation.nodes.is_none() {
                allocation.nodes = nodes_of(&allocation.id);
            }
            allocation
        });
        match (output.status.success(), granted) {
            (true, Some(allocation)) => {
                *held = Some(allocation.clone());
                Ok(allocation)
            }
            _ => Err(TransportProblem::AllocationEnded(format!(
                "Slurm granted none: {}",
                last_words(&lines)
            ))),
        }
    }
}

/// The nodes of job `id`, as squeue lists them (`gpu17`, `gpu[17-18]`).
fn nodes_of(id: &str) -> Option<String> {
    let mut command = child::command("squeue");
    command.args(["-h", "-o", "%N", "-j", id]);
    match run_limited(command, PROBE_TIMEOUT) {
        Ok(Finished {
            code: Some(0),
            stdout,
            ..
        }) => Some(stdout.join(" ").trim().to_owned()).filter(|n| !n.is_empty()),
        _ => None,
    }
}

/// The job id and nodes from salloc's messages
/// (`salloc: Granted job allocation 4242`, `salloc: Nodes gpu17 are ready for job`).
pub fn parse_salloc(lines: &[String]) -> Option<Allocation> {
    let id = lines.iter().find_map(|l| {
        l.split("Granted job allocation")
            .nth(1)
            .map(|rest| rest.trim().to_owned())
            .filter(|id| !id.is_empty() && id.chars().all(|c| c.is_ascii_digit()))
    })?;
    let nodes = lines.iter().find_map(|l| {
        let rest = l.split("Nodes ").nth(1)?;
        rest.split(" are ready").next().map(|n| n.trim().to_owned())
    });
    Some(Allocation { id, nodes })
}

impl Drop for AllocationCell {
    fn drop(&mut self) {
        let held = self.allocation.get_mut().ok().and_then(|a| a.take());
        if let Some(allocation) = held {
            cancel(&allocation);
        }
    }
}

/// Gives an allocation back to Slurm (`scancel`); its running steps end with it.
fn cancel(allocation: &Allocation) {
    let _ = child::command("scancel")
        .arg(&allocation.id)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// The flashprof program on the node: `--gpu-host-flashprof`, else
/// `$FLASHPROF_REMOTE_FLASHPROF`, else `flashprof` on the node's PATH.
pub fn remote_flashprof(flag: Option<&str>) -> String {
    flag.map(str::to_owned)
        .or_else(|| {
            std::env::var(REMOTE_FLASHPROF_ENV)
                .ok()
                .filter(|v| !v.is_empty())
        })
        .unwrap_or_else(|| DEFAULT_REMOTE_FLASHPROF.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_over_ssh_compiles_under_this_processs_memory_limit() {
        let command = crate::app::worker_handle::WorkerCommand::remote(
            Remote::Ssh {
                host: "node".into(),
            },
            "flashprof",
        );
        let remote = command.remote.as_ref().expect("remote");
        let launch = remote
            .launch("flashprof", &command.args, &command.env)
            .expect("an ssh launch");
        let line = launch
            .args
            .last()
            .expect("the remote command")
            .to_string_lossy();
        let limit = format!(
            "{}={}",
            crate::worker::sandbox::COMPILE_MEMORY_ENV,
            crate::worker::sandbox::compile_memory_mb()
        );
        assert!(line.starts_with("env ") && line.contains(&limit), "{line}");
    }

    #[test]
    fn quoting_survives_a_shell() {
        assert_eq!(shell_quote("flashprof"), "flashprof");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("$(rm -rf ~)"), "'$(rm -rf ~)'");
        let command = remote_command(
            "~/bin/flash prof",
            &["__worker".into()],
            &[("FLASHPROF_GPU".into(), "1".into())],
        );
        assert_eq!(command, "env FLASHPROF_GPU=1 ~/'bin/flash prof' __worker");
        // The shell reads the words back exactly.
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "printf '%s\\n' {}",
                shell_quote("x'; echo pwned; '$HOME")
            ))
            .output()
            .expect("sh");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "x'; echo pwned; '$HOME\n"
        );
    }

    #[test]
    fn srun_never_reads_the_program_as_an_option_and_expands_home() {
        let words = |program: &str| -> Vec<String> {
            srun_args("42", program, &["__worker".into()])
                .into_iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect()
        };
        assert_eq!(
            words("--export=NONE"),
            [
                "--jobid=42",
                "--ntasks=1",
                "--nodes=1",
                "--overlap",
                "--quiet",
                "--",
                "--export=NONE",
                "__worker"
            ]
        );
        let home = std::env::var("HOME").expect("HOME is set for the tests");
        let program =
            |args: Vec<String>| args[args.iter().position(|a| a == "--").unwrap() + 1].clone();
        assert_eq!(
            program(words("~/bin/flashprof")),
            format!("{home}/bin/flashprof")
        );
        assert_eq!(program(words("/opt/flashprof")), "/opt/flashprof");
    }

    #[test]
    fn hosts_that_look_like_options_are_refused() {
        assert!(Remote::ssh("-oProxyCommand=evil").is_err());
        assert!(Remote::ssh("a b").is_err());
        assert!(Remote::ssh("").is_err());
        assert!(Remote::ssh("alice@gpu-node.example.edu").is_ok());
    }

    #[test]
    fn ssh_launch_never_prompts_and_carries_the_environment() {
        let remote = Remote::ssh("alice@node").expect("host");
        let launch = remote
            .launch(
                "flashprof",
                &["__worker".into()],
                &[("FLASHPROF_GPU".into(), "0".into())],
            )
            .expect("ssh needs no allocation");
        assert_eq!(launch.program, OsString::from("ssh"));
        let args: Vec<String> = launch
            .args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(args[0], "-T");
        assert!(
            args.iter().any(|a| a == "-v"),
            "the log says how the session ended"
        );
        assert!(args.windows(2).any(|w| w == ["-o", "BatchMode=yes"]));
        // A node that accepts and stays silent is given up on, not waited for.
        assert!(args.windows(2).any(|w| w == ["-o", "ConnectTimeout=10"]));
        assert!(args
            .windows(2)
            .any(|w| w == ["-o", "ServerAliveInterval=5"]));
        let host_at = args.iter().position(|a| a == "alice@node").expect("host");
        assert_eq!(args[host_at - 1], "--");
        assert_eq!(
            args[host_at + 1],
            "env FLASHPROF_GPU=0 FLASHPROF_WORKER_EXIT_ON_HANGUP=1 flashprof __worker"
        );
        assert!(launch.env.is_empty());
        let log = launch.ssh_log.expect("ssh's own log");
        assert!(args
            .windows(2)
            .any(|w| w[0] == "-E" && w[1] == log.display().to_string()));
        remove_ssh_log(&log);
        assert!(!log.parent().expect("folder").exists());
    }

    #[test]
    fn slurm_words_split_like_a_shell() {
        assert_eq!(
            split_words(r#"--gres=gpu:1 -p gpu --time=01:00:00 --comment "a b" 'c d'"#)
                .expect("words"),
            vec![
                "--gres=gpu:1",
                "-p",
                "gpu",
                "--time=01:00:00",
                "--comment",
                "a b",
                "c d"
            ]
        );
        assert!(split_words("'open").is_err());
        assert_eq!(split_words("  ").expect("none"), Vec::<String>::new());
    }

    #[test]
    fn salloc_messages_name_the_job_and_node() {
        let lines: Vec<String> = [
            "salloc: Pending job allocation 4242",
            "salloc: job 4242 queued and waiting for resources",
            "salloc: Granted job allocation 4242",
            "salloc: Nodes gpu17 are ready for job",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            parse_salloc(&lines),
            Some(Allocation {
                id: "4242".into(),
                nodes: Some("gpu17".into())
            })
        );
        assert_eq!(parse_salloc(&["salloc: error: nope".to_string()]), None);
    }

    #[test]
    fn exits_are_read_as_the_transport_or_the_worker() {
        let remote = Remote::ssh("node").expect("host");
        let lost = vec!["Connection to node closed by remote host.".to_string()];
        // ssh's own log speaks for the link, never the worker's stderr.
        let printed = vec!["ssh: connect to host node port 22: Connection refused".to_string()];
        assert_eq!(
            remote.classify_exit(Some(255), &printed, &lost),
            Some(TransportProblem::Connection(
                "Connection to node closed by remote host.".into()
            ))
        );
        assert!(matches!(
            remote.classify_exit(
                Some(127),
                &["bash: flashprof: command not found".into()],
                &[]
            ),
            Some(TransportProblem::NotInstalled(_))
        ));
        assert_eq!(remote.classify_exit(Some(101), &lost, &[]), None);
        // A real srun whose step could not start the program.
        let slurm = Remote::slurm("-N1").expect("args");
        let execve = [
            "srun: error: localhost: task 0: Exited with exit code 2".to_string(),
            "slurmstepd-localhost: error: execve(): flashprof: No such file or directory".into(),
        ];
        assert!(matches!(
            slurm.classify_exit(Some(2), &execve, &[]),
            Some(TransportProblem::NotInstalled(reason)) if reason.contains("execve(): flashprof")
        ));
        assert_eq!(slurm.classify_exit(Some(2), &execve[..1], &[]), None);
        // ssh -v's log: the worker's signal arrived, so the link was fine.
        let verbose = |last: &str| -> Vec<String> {
            vec![
                "OpenSSH_9.2p1 Debian-2+deb12u7, OpenSSL 3.0.17 1 Jul 2025".into(),
                "debug1: Reading configuration data /etc/ssh/ssh_config".into(),
                "Authenticated to node ([127.0.0.1]:22) using \"publickey\".".into(),
                last.into(),
                "Transferred: sent 3480, received 3288 bytes, in 0.2 seconds".into(),
            ]
        };
        let signalled =
            verbose("debug1: client_input_channel_req: channel 0 rtype exit-signal reply 0");
        assert_eq!(remote.classify_exit(Some(255), &[], &signalled), None);
        // No exit status came: the connection went; ssh's closing words say how.
        let cut = verbose("debug1: channel 0: free: client-session, nchannels 1");
        let closing = vec![
            "a kernel's printf".to_string(),
            "Connection to 127.0.0.1 closed by remote host.".to_string(),
        ];
        assert_eq!(
            remote.classify_exit(Some(255), &closing, &cut),
            Some(TransportProblem::Connection(
                "Connection to 127.0.0.1 closed by remote host.".into()
            ))
        );
        assert!(matches!(
            remote.classify_exit(Some(255), &["a kernel's printf".to_string()], &cut),
            Some(TransportProblem::Connection(reason)) if reason.contains("before the worker's exit status")
        ));
        assert_eq!(remote.classify_exit(None, &[], &[]), None);
        assert!(slurm_says_allocation_ended(
            "slurmstepd: error: *** STEP 4242.0 ON gpu17 CANCELLED AT 2026-11-30T12:00:00 DUE TO TIME LIMIT ***"
        ));
        assert!(!slurm_says_allocation_ended(
            "srun: Job 4242 step creation temporarily disabled"
        ));
    }
}
