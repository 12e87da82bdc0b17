//! Command-line entry: parses arguments and dispatches to a command.
//!
//! Exit codes are part of the interface (README, "Exit codes"); they live in
//! [`ExitCode`] so every command maps its outcome the same way.

mod bench;
mod calibrate;
mod check;
mod compare;
mod doctor;
mod grade;
mod refusal;
mod remote;
mod tui;

use refusal::Refusal;

use std::path::Path;

use clap::{Parser, Subcommand};

use crate::gpu::compile::QuickBuild;
use crate::lab::definition::{LabCase, LabRef};
use crate::lab::geometry;
use crate::lab::registry;
use crate::lab::source::{read_regular_file, FollowLinks, MAX_SOURCE_BYTES};

pub use crate::outcome::ExitCode;

/// The oracle's golden proof, or the exit code with which `program` refuses to grade.
fn require_proven_oracle(program: &str, lab: LabRef) -> Result<(), ExitCode> {
    proven_oracle(lab).map_err(|r| r.report(program))
}

/// The oracle's golden proof, or why nothing is graded.
fn proven_oracle(lab: LabRef) -> Result<(), Refusal> {
    lab.prove_oracle().map(|_| ()).map_err(|e| {
        Refusal::new(
            ExitCode::OracleUnproven,
            format!(
                "the {} lab's float64 oracle failed its golden proof, so nothing is graded: {e}",
                lab.name()
            ),
        )
    })
}

/// `--quick-build BUILD`, where a save gets verdicts before the optimizer
/// has finished (the TUI, `bench`).
#[derive(clap::Args, Debug, Clone)]
pub struct QuickBuildArg {
    /// Show verdicts from a quick build while the optimized build compiles
    /// beside it, then rerun the cases on the optimized build, whose verdicts
    /// count: `fast-compile` (NVRTC's --Ofast-compile=max), `debug` (-G), or
    /// `off` (one optimized build). docs/PERFORMANCE.md has the figures.
    #[arg(long = "quick-build", value_name = "BUILD", default_value = "fast-compile", value_parser = parse_quick_build)]
    pub choice: QuickBuildChoice,
}

/// The quick build asked for, or none (`off`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuickBuildChoice(pub Option<QuickBuild>);

fn parse_quick_build(text: &str) -> Result<QuickBuildChoice, String> {
    match text {
        "off" => Ok(QuickBuildChoice(None)),
        other => other
            .parse()
            .map(|build| QuickBuildChoice(Some(build)))
            .map_err(|e: String| format!("{e}, or off")),
    }
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
        self.choosing(fallback).map_err(|r| r.report("flashprof"))
    }

    /// [`Self::choose`], saying why not instead of printing it.
    fn choosing(&self, fallback: Option<&str>) -> Result<LabRef, Refusal> {
        if let Some(name) = &self.lab {
            return registry::find(name)
                .map(LabRef)
                .ok_or_else(|| Refusal::new(ExitCode::Usage, registry::unknown(name)));
        }
        match fallback {
            None => Ok(LabRef(registry::default_lab())),
            Some(name) => registry::find(name).map(LabRef).ok_or_else(|| {
                Refusal::new(
                    ExitCode::BadSource,
                    format!("the file declares {}", registry::unknown(name)),
                )
            }),
        }
    }

    /// The lab for checking `file`: `--lab`, else what the file declares.
    fn for_file(&self, file: &Path) -> Result<LabRef, ExitCode> {
        self.for_file_or_refusal(file)
            .map_err(|r| r.report("flashprof"))
    }

    /// [`Self::for_file`], saying why not instead of printing it.
    fn for_file_or_refusal(&self, file: &Path) -> Result<LabRef, Refusal> {
        self.choosing(declared_lab_of(file).as_deref())
    }
}

/// The lab a file declares on its `@flashprof` line, read the way every
/// student file is read (a FIFO or device is never opened blocking); a file
/// that cannot be read declares nothing, and checking it says why.
fn declared_lab_of(file: &Path) -> Option<String> {
    let read = read_regular_file(file, FollowLinks::Yes, MAX_SOURCE_BYTES).ok()?;
    geometry::declared_lab(&String::from_utf8_lossy(&read.bytes)).map(|(_, name)| name)
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
        Self::load(lab, cases_file, timing_shape).map_err(|r| r.report(program))
    }

    /// [`Self::of`], saying why not instead of printing it.
    fn load(
        lab: LabRef,
        cases_file: Option<&Path>,
        timing_shape: &[String],
    ) -> Result<Self, Refusal> {
        let cases =
            load_cases(lab, cases_file).map_err(|e| Refusal::new(ExitCode::Environment, e))?;
        Ok(Self {
            cases,
            timing: timing_shape_case(lab, timing_shape)?,
        })
    }
}

/// The lab's timing shape as a case, with `--timing-shape KEY=VALUE` overrides.
fn timing_case(lab: LabRef, overrides: &[String]) -> Result<LabCase, ExitCode> {
    timing_shape_case(lab, overrides).map_err(|r| r.report("flashprof"))
}

/// [`timing_case`], saying why not instead of printing it.
fn timing_shape_case(lab: LabRef, overrides: &[String]) -> Result<LabCase, Refusal> {
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
        .map_err(|e| Refusal::new(ExitCode::Usage, format!("--timing-shape: {e}")))
}

/// `flashprof WORD` where WORD is neither a file nor a command (`flashprof
/// chek`): refused with the nearest command, exit 2, and no file is written.
fn unknown_word(args: &tui::TuiArgs) -> Option<ExitCode> {
    let file = args.file.as_ref()?;
    let word = file.to_str()?;
    let bare = !word.is_empty() && !word.contains(['/', '.']);
    if !bare || file.exists() {
        return None;
    }
    use clap::CommandFactory;
    let command = Cli::command();
    let names: Vec<&str> = command
        .get_subcommands()
        .filter(|c| !c.is_hide_set())
        .map(|c| c.get_name())
        .collect();
    let hint = match refusal::closest(word, &names) {
        Some(name) => format!("did you mean `{name}`?"),
        None => format!(
            "commands: {}; a new kernel file's name must end in .cu",
            names.join(", ")
        ),
    };
    eprintln!("flashprof: `{word}`: no such command or file; {hint}");
    Some(ExitCode::Usage)
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
    worker_command_or_refusal(remote).map_err(|r| r.report(program))
}

/// [`worker_command`], saying why not instead of printing it.
fn worker_command_or_refusal(
    remote: &remote::RemoteArgs,
) -> Result<crate::app::worker_handle::WorkerCommand, Refusal> {
    let local = crate::app::worker_handle::WorkerCommand::current_exe().map_err(|e| {
        Refusal::new(
            ExitCode::Environment,
            format!("cannot locate its own executable to start a worker: {e}"),
        )
    })?;
    remote.apply(local)
}

#[derive(Parser)]
#[command(
    name = "flashprof",
    version,
    about = "Grade and profile CUDA attention kernels for the labs of `flashprof labs`"
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
    /// Say what flashprof found where (driver, GPU, NVRTC, CUPTI, compute-sanitizer,
    /// profiling permission) and how to fix what is missing.
    Doctor(doctor::DoctorArgs),
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
            if e.use_stderr() {
                // Under --json, a bad command line is a JSON document too.
                let args: Vec<String> = std::env::args().skip(1).collect();
                if args.iter().any(|a| a == "--json") {
                    let context = refusal::ErrorContext {
                        command: args.first().cloned().unwrap_or_default(),
                        ..Default::default()
                    };
                    let rendered = e.render().to_string();
                    let first = rendered.lines().next().unwrap_or_default();
                    let message = first.strip_prefix("error: ").unwrap_or(first).to_owned();
                    let refusal = Refusal::new(ExitCode::Usage, message);
                    println!("{}", refusal.json(&context));
                }
            }
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::Usage as u8
            } else {
                0
            };
        }
    };
    match cli.command {
        None => match unknown_word(&cli.tui) {
            Some(code) => code as u8,
            None => tui::run(cli.tui) as u8,
        },
        Some(Command::Doctor(args)) => doctor::run(args) as u8,
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
