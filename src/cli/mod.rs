//! Command-line entry: parses arguments and dispatches to a command.
//!
//! Exit codes are part of the interface (README, "Exit codes"); they live in
//! [`ExitCode`] so every command maps its outcome the same way.

mod bench;
mod calibrate;
mod check;
mod compare;
mod grade;
mod remote;
mod tui;

use std::path::Path;

use clap::{Parser, Subcommand};

use crate::lab::definition::{LabCase, LabRef};
use crate::lab::geometry;
use crate::lab::registry;
use crate::lab::source::MAX_SOURCE_BYTES;

pub use crate::outcome::ExitCode;

/// The oracle's golden proof, or the exit code with which `program` refuses to grade.
fn require_proven_oracle(program: &str, lab: LabRef) -> Result<(), ExitCode> {
    lab.prove_oracle().map(|_| ()).map_err(|e| {
        eprintln!(
            "{program}: the {} lab's float64 oracle failed its golden proof, so nothing is graded: {e}",
            lab.name()
        );
        ExitCode::OracleUnproven
    })
}

/// `--lab NAME`, on every command.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct LabArg {
    /// The lab to grade against (`flashprof labs` lists them). Without it, a
    /// file's own `// @flashprof lab=NAME` decides, then the first lab.
    #[arg(long, value_name = "NAME")]
    pub lab: Option<String>,
}

impl LabArg {
    /// The lab named on the command line, or `fallback` (a file's
    /// declaration, the TUI's memory) when none was, or the first lab. An
    /// unknown `--lab` is a usage error; an unknown declared lab is the
    /// file's fault.
    fn choose(&self, fallback: Option<&str>) -> Result<LabRef, ExitCode> {
        if let Some(name) = &self.lab {
            return registry::find(name).map(LabRef).ok_or_else(|| {
                eprintln!("flashprof: {}", registry::unknown(name));
                ExitCode::Usage
            });
        }
        match fallback {
            None => Ok(LabRef(registry::default_lab())),
            Some(name) => registry::find(name).map(LabRef).ok_or_else(|| {
                eprintln!("flashprof: the file declares {}", registry::unknown(name));
                ExitCode::BadSource
            }),
        }
    }

    /// The lab for checking `file`: `--lab`, else what the file declares.
    fn for_file(&self, file: &Path) -> Result<LabRef, ExitCode> {
        let declared = std::fs::read(file)
            .ok()
            .and_then(|bytes| {
                geometry::declared_lab(&String::from_utf8_lossy(
                    &bytes[..bytes.len().min(MAX_SOURCE_BYTES as usize)],
                ))
            })
            .map(|(_, name)| name);
        self.choose(declared.as_deref())
    }
}

/// The lab's cases: its embedded set, or a cases file.
fn load_cases(lab: LabRef, file: Option<&Path>) -> Result<Vec<LabCase>, String> {
    match file {
        None => lab
            .parse_cases(lab.embedded_cases(), "(embedded cases)", Path::new("."))
            .map_err(|e| e.to_string()),
        Some(file) => {
            let text = std::fs::read_to_string(file)
                .map_err(|e| format!("cannot read cases file {}: {e}", file.display()))?;
            let base = file.parent().unwrap_or(Path::new("."));
            lab.parse_cases(&text, &file.display().to_string(), base)
                .map_err(|e| e.to_string())
        }
    }
}

/// What a command that runs a lab's kernels needs: the cases and the timing shape.
struct LabRun {
    cases: Vec<LabCase>,
    timing: LabCase,
}

impl LabRun {
    /// The lab's cases (embedded, or `cases_file`) and its timing shape with
    /// `--timing-shape` overrides; a failure is reported as `program`'s.
    fn of(
        program: &str,
        lab: LabRef,
        cases_file: Option<&Path>,
        timing_shape: &[String],
    ) -> Result<Self, ExitCode> {
        let cases = load_cases(lab, cases_file).map_err(|e| {
            eprintln!("{program}: {e}");
            ExitCode::Environment
        })?;
        Ok(Self {
            cases,
            timing: timing_case(lab, timing_shape)?,
        })
    }
}

/// The lab's timing shape as a case, with `--timing-shape KEY=VALUE` overrides.
fn timing_case(lab: LabRef, overrides: &[String]) -> Result<LabCase, ExitCode> {
    let pairs: Result<Vec<(String, String)>, String> = overrides
        .iter()
        .map(|pair| {
            pair.split_once('=')
                .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
                .ok_or_else(|| format!("expected KEY=VALUE, found `{pair}`"))
        })
        .collect();
    pairs
        .and_then(|pairs| lab.timing_case(&pairs))
        .map_err(|e| {
            eprintln!("flashprof: --timing-shape: {e}");
            ExitCode::Usage
        })
}

/// `flashprof labs`: one line per lab.
fn list_labs() -> ExitCode {
    for lab in registry::labs() {
        println!(
            "{:<16} {:<20} {}",
            lab.name(),
            lab.contract(),
            lab.description()
        );
    }
    ExitCode::Pass
}

/// This executable re-entered as a worker (or, with `--gpu-host` /
/// `--gpu-slurm`, flashprof on the node), or the exit code for not finding it.
fn worker_command(
    program: &str,
    remote: &remote::RemoteArgs,
) -> Result<crate::app::worker_handle::WorkerCommand, ExitCode> {
    let local = crate::app::worker_handle::WorkerCommand::current_exe().map_err(|e| {
        eprintln!("{program}: cannot locate its own executable to start a worker: {e}");
        ExitCode::Environment
    })?;
    remote.apply(program, local)
}

#[derive(Parser)]
#[command(
    name = "flashprof",
    version,
    about = "Grade and profile CUDA flash-prefill kernels"
)]
#[command(args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// With no command: watch FILE in the live TUI.
    #[command(flatten)]
    tui: tui::TuiArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Compile FILE, run every hazard case, time it against the starter, and report.
    Check(check::CheckArgs),
    /// Time the reference kernel against the starter on this GPU and record its speed gate.
    Calibrate(calibrate::CalibrateArgs),
    /// Check two kernels on the same inputs and show them side by side.
    Compare(compare::CompareArgs),
    /// Grade a folder of submissions into a gradebook (resumable, shardable); --merge joins shards.
    Grade(grade::GradeArgs),
    /// Play back the recorded runs of a history store (`.flashprof/`) in the TUI.
    Replay(tui::ReplayArgs),
    /// Measure the edit-compile-verify loop phase by phase (needs a GPU).
    Bench(bench::BenchArgs),
    /// List the labs this build hosts, one line each.
    Labs,
    /// Internal: the worker process that runs kernels (started by flashprof itself).
    #[command(name = "__worker", hide = true)]
    Worker,
    /// Internal: confine this process as a worker would, then try to read each PATH.
    #[command(name = "__sandbox-probe", hide = true)]
    SandboxProbe { paths: Vec<std::path::PathBuf> },
}

/// Runs the command line and returns the process exit code.
pub fn main() -> u8 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::Usage as u8
            } else {
                0
            };
        }
    };
    match cli.command {
        None => tui::run(cli.tui) as u8,
        Some(Command::Check(args)) => check::run(args) as u8,
        Some(Command::Calibrate(args)) => calibrate::run(args) as u8,
        Some(Command::Compare(args)) => compare::run(args) as u8,
        Some(Command::Grade(args)) => grade::run(args) as u8,
        Some(Command::Replay(args)) => tui::replay(args) as u8,
        Some(Command::Bench(args)) => bench::run(args) as u8,
        Some(Command::Labs) => list_labs() as u8,
        Some(Command::SandboxProbe { paths }) => {
            let report = crate::worker::sandbox::probe(&paths);
            println!("level: {:?}", report.level);
            0
        }
        Some(Command::Worker) => match crate::worker::main() {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("flashprof worker: {e:#}");
                ExitCode::Environment as u8
            }
        },
    }
}
