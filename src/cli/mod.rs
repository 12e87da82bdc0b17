//! Command-line entry: parses arguments and dispatches to a command.
//!
//! Exit codes are part of the interface (README, "Exit codes"); they live in
//! [`ExitCode`] so every command maps its outcome the same way.

mod bench;
mod calibrate;
mod check;
mod compare;
mod grade;
mod tui;

use clap::{Parser, Subcommand};

/// Documented process exit codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ExitCode {
    /// Every case passed (and the timed output was correct).
    Pass = 0,
    /// The kernel compiled and ran, and at least one case failed.
    CasesFailed = 1,
    /// Bad command-line usage (clap's own code).
    Usage = 2,
    /// The student file cannot be used: missing, empty, binary, not UTF-8, too large, wrong signature.
    BadSource = 3,
    /// NVRTC rejected the kernel.
    CompileError = 4,
    /// No GPU or no driver: the file compiled, nothing was graded.
    NoGpu = 5,
    /// The environment failed: NVRTC missing, worker could not start, bad cases file, timing could not run.
    Environment = 6,
    /// The oracle failed its golden proof: flashprof refuses to grade.
    OracleUnproven = 7,
}

/// The oracle's golden proof, or the exit code with which `program` refuses to grade.
fn require_proven_oracle(program: &str) -> Result<(), ExitCode> {
    crate::grade::golden::prove_embedded()
        .map(|_| ())
        .map_err(|e| {
            eprintln!(
                "{program}: the float64 oracle failed its golden proof, so nothing is graded: {e}"
            );
            ExitCode::OracleUnproven
        })
}

/// This executable re-entered as a worker, or the exit code for not finding it.
fn worker_command(program: &str) -> Result<crate::app::worker_handle::WorkerCommand, ExitCode> {
    crate::app::worker_handle::WorkerCommand::current_exe().map_err(|e| {
        eprintln!("{program}: cannot locate its own executable to start a worker: {e}");
        ExitCode::Environment
    })
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
    /// Internal: the worker process that runs kernels (started by flashprof itself).
    #[command(name = "__worker", hide = true)]
    Worker,
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
        Some(Command::Worker) => match crate::worker::main() {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("flashprof worker: {e:#}");
                ExitCode::Environment as u8
            }
        },
    }
}
