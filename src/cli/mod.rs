//! Command-line entry: parses arguments and dispatches to a command.
//!
//! Exit codes are part of the interface (docs/CLI.md, "Exit codes"); they live in
//! [`ExitCode`] so every command maps its outcome the same way.

mod bench;
mod calibrate;
mod check;
mod compare;
mod doctor;
mod fetch;
mod grade;
mod plan;
mod refusal;
mod remote;
mod tui;

use refusal::Refusal;

use std::path::Path;

use crate::display::ColorChoice;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::display::for_display;
use crate::gpu::compile::QuickBuild;
use crate::lab::definition::LabRef;
use crate::lab::geometry;
use crate::lab::registry;
use crate::lab::source::{read_regular_file, FollowLinks, SourceError, MAX_SOURCE_BYTES};

pub use crate::outcome::ExitCode;

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
    #[arg(short, long, value_name = "NAME")]
    pub lab: Option<String>,
}

impl LabArg {
    /// The lab named on the command line, or `fallback` (a file's
    /// declaration, the TUI's memory) when none was, or the first lab. An
    /// unknown `--lab` is a usage error; an unknown declared lab is the
    /// file's fault.
    fn choose(&self, fallback: Option<&str>) -> Result<LabRef, Refusal> {
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

    /// A student file the source checks refused (exit 3). Only a file
    /// declaring another lab than `--lab` named is told to drop the flag:
    /// without one, that advice would name a flag nobody gave.
    fn refuse_source(&self, error: SourceError) -> Refusal {
        let wrong_lab = matches!(error, SourceError::WrongLab { .. });
        // The message quotes the file's name and text: shown neutralised.
        let mut refusal = Refusal::new(ExitCode::BadSource, for_display(&error.to_string()));
        if wrong_lab && self.lab.is_some() {
            refusal.fix = Some(
                "drop --lab (the file's own `lab=` key then decides) or change that key".into(),
            );
        }
        refusal
    }

    /// The lab for checking `file`: `--lab`, else what the file declares.
    /// A missing file is refused here, before any lab is chosen for it.
    fn for_file(&self, file: &Path) -> Result<LabRef, Refusal> {
        refuse_missing(file)?;
        self.choose(declared_lab_of(file).as_deref())
    }
}

/// The lab a file declares on its `@flashprof` line, read the way every
/// student file is read (a FIFO or device is never opened blocking); a file
/// that cannot be read declares nothing, and checking it says why.
fn declared_lab_of(file: &Path) -> Option<String> {
    let read = read_regular_file(file, FollowLinks::Yes, MAX_SOURCE_BYTES).ok()?;
    geometry::declared_lab(&String::from_utf8_lossy(&read.bytes)).map(|(_, name)| name)
}

/// `flashprof WORD` where WORD is neither a file nor a command (`flashprof
/// chek`, `flashprof chek prefill.cu`): refused with the nearest command,
/// The command line as completions offer it: every argument and command a
/// user types, without the hidden ones flashprof starts itself (`__worker`).
fn offered_command() -> clap::Command {
    let full = Cli::command();
    clap::Command::new("flashprof")
        .bin_name("flashprof")
        .args(full.get_arguments().cloned())
        .subcommands(full.get_subcommands().filter(|c| !c.is_hide_set()).cloned())
}

/// exit 2, and no file is written.
fn unknown_word(word: &str) -> Result<(), Refusal> {
    let bare = !word.is_empty() && !word.starts_with('-') && !word.contains(['/', '.']);
    if !bare || Path::new(word).exists() {
        return Ok(());
    }
    let command = Cli::command();
    let names: Vec<&str> = command
        .get_subcommands()
        .filter(|c| !c.is_hide_set())
        .map(|c| c.get_name())
        .collect();
    if names.contains(&word) {
        return Ok(());
    }
    let hint = match refusal::closest(word, &names) {
        Some(name) => format!("did you mean `{name}`?"),
        None => format!(
            "commands: {}; a new kernel file's name must end in .cu",
            names.join(", ")
        ),
    };
    Err(Refusal::new(
        ExitCode::Usage,
        format!("`{word}`: no such command or file; {hint}"),
    ))
}

/// The most names of a folder a typo is compared with: a student's folder
/// can hold anything, and a suggestion is not worth a long listing.
const MOST_NAMES_COMPARED: usize = 4096;

/// A student file that is not there, refused: a typo never becomes a new
/// file or an empty check. The refusal names the folder's nearest file (by
/// edit distance) and the explicit way to start a new file.
fn refuse_missing(file: &Path) -> Result<(), Refusal> {
    match std::fs::symlink_metadata(file) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        _ => return Ok(()),
    }
    let folder = match file.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let names: Vec<String> = std::fs::read_dir(folder)
        .into_iter()
        .flatten()
        .take(MOST_NAMES_COMPARED)
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .collect();
    let typed = file
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let candidates: Vec<&str> = names.iter().map(String::as_str).collect();
    let suggestion = match refusal::closest(&typed, &candidates) {
        Some(name) => format!("; did you mean `{}`?", file.with_file_name(name).display()),
        None => String::new(),
    };
    let mut refusal = Refusal::new(
        ExitCode::BadSource,
        format!("{}: no such file{suggestion}", file.display()),
    );
    refusal.fix = Some(format!(
        "`flashprof --new {}` starts a new file from the lab's starter kernel",
        file.display()
    ));
    Err(refusal)
}

/// `flashprof labs`: one line per lab.
fn list_labs() -> Result<ExitCode, Refusal> {
    for lab in registry::labs() {
        println!(
            "{:<16} {:<20} {}",
            lab.name(),
            lab.contract(),
            lab.description()
        );
    }
    Ok(ExitCode::Pass)
}

/// The labs, under the top-level help: read from the registry, so the list
/// is always the labs this build hosts, each with the file the TUI watches
/// for it when no FILE is given.
fn labs_help() -> String {
    let lines: Vec<String> = registry::labs()
        .iter()
        .enumerate()
        .map(|(i, lab)| {
            let default = if i == 0 { "  (the default lab)" } else { "" };
            format!("  {:<20} {}{default}", lab.name(), lab.default_file())
        })
        .collect();
    format!(
        "Labs (--lab NAME; `flashprof labs` describes each), with each lab's own file:\n{}",
        lines.join("\n")
    )
}

/// This executable re-entered as a worker (or, with `--gpu-host` /
/// `--gpu-slurm`, flashprof on the node), or why it cannot be.
fn worker_command(
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
    /// When to colour the output: `auto` at a terminal unless NO_COLOR is
    /// set (to anything non-empty), `always`, `never`.
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto)]
    color: ColorChoice,
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
    /// Install NVIDIA's NVRTC, CUPTI and CUDA headers (13.0) into flashprof's own
    /// folder of your cache (~/.cache/flashprof/cuda-13.0) with pip, then say what
    /// is found: for a machine without CUDA. Running it is the consent; it asks nothing.
    #[command(name = "fetch-cuda")]
    FetchCuda,
    /// Print the shell completion script for SHELL, made from these very
    /// commands and flags (e.g. `flashprof completions bash >
    /// ~/.local/share/bash-completion/completions/flashprof`).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff), made from these very commands and flags
    /// (e.g. `flashprof man > ~/.local/share/man/man1/flashprof.1`).
    Man,
    /// Internal: the worker process that runs kernels (started by flashprof itself).
    #[command(name = "__worker", hide = true)]
    Worker,
    /// Internal: confine this process as a worker would, then try to read each PATH.
    #[command(name = "__sandbox-probe", hide = true)]
    SandboxProbe { paths: Vec<std::path::PathBuf> },
}

/// A reader that stops early (`flashprof doctor | head -1`) closes stdout;
/// the next `println!` then panics inside std. That is the reader's choice,
/// not a failure: the process ends at once, silently, with success. Any
/// other panic goes to the hook that was there before.
fn end_quietly_when_stdout_closes() {
    let broken_pipe = std::io::Error::from_raw_os_error(libc::EPIPE).to_string();
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .unwrap_or_default();
        if message.starts_with("failed printing to stdout") && message.ends_with(&broken_pipe) {
            std::process::exit(ExitCode::Pass as i32);
        }
        previous(info);
    }));
}

/// Runs the command line and returns the process exit code.
pub fn main() -> u8 {
    end_quietly_when_stdout_closes();
    let parsed = Cli::command()
        .after_help(labs_help())
        .try_get_matches()
        .and_then(|matches| Cli::from_arg_matches(&matches));
    let cli = match parsed {
        Ok(cli) => cli,
        Err(e) => {
            let args: Vec<String> = std::env::args().skip(1).collect();
            // Under --json, a bad command line is a JSON document too.
            let context =
                args.iter()
                    .any(|a| a == "--json" || a == "-j")
                    .then(|| refusal::ErrorContext {
                        command: args.first().cloned().unwrap_or_default(),
                        ..Default::default()
                    });
            // `flashprof chek prefill.cu`: a mistyped command, said as such
            // rather than as clap's complaint about two positionals.
            if let Some(Err(refusal)) = args.first().map(|word| unknown_word(word)) {
                return refusal.with_json(context).report("flashprof") as u8;
            }
            if let (true, Some(context)) = (e.use_stderr(), &context) {
                let rendered = e.render().to_string();
                let first = rendered.lines().next().unwrap_or_default();
                let message = first.strip_prefix("error: ").unwrap_or(first).to_owned();
                let refusal = Refusal::new(ExitCode::Usage, message);
                println!("{}", refusal.json(context));
            }
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::Usage as u8
            } else {
                0
            };
        }
    };
    crate::display::choose_colour(cli.color);
    let program = cli.command.as_ref().map_or("flashprof", Command::program);
    let ran = match cli.command {
        None => cli
            .tui
            .file
            .as_deref()
            .and_then(Path::to_str)
            .map_or(Ok(()), unknown_word)
            .and_then(|()| tui::run(cli.tui)),
        Some(Command::Doctor(args)) => Ok(doctor::run(args)),
        Some(Command::FetchCuda) => fetch::run(),
        Some(Command::Check(args)) => check::run(args),
        Some(Command::Calibrate(args)) => calibrate::run(args),
        Some(Command::Compare(args)) => compare::run(args),
        Some(Command::Grade(args)) => grade::run(args),
        Some(Command::Replay(args)) => tui::replay(args),
        Some(Command::Bench(args)) => bench::run(args),
        Some(Command::Labs) => list_labs(),
        Some(Command::Completions { shell }) => {
            use clap_complete::Generator;
            let mut cli = offered_command();
            cli.build();
            written(
                shell.try_generate(&cli, &mut std::io::stdout()),
                "completions",
            )
        }
        Some(Command::Man) => written(
            clap_mangen::Man::new(Cli::command().after_help(labs_help()))
                .render(&mut std::io::stdout()),
            "manual page",
        ),
        Some(Command::SandboxProbe { paths }) => {
            let report = crate::worker::sandbox::probe(&paths);
            println!("level: {:?}", report.level);
            Ok(ExitCode::Pass)
        }
        Some(Command::Worker) => crate::worker::main()
            .map(|()| ExitCode::Pass)
            .map_err(|e| Refusal::new(ExitCode::Environment, format!("{e:#}"))),
    };
    // Every command's stop is shown here, one way.
    match ran {
        Ok(code) => code as u8,
        Err(refusal) => refusal.report(program) as u8,
    }
}

/// A generated text (`what`) written to stdout, or why not; a reader that
/// stops early (`flashprof man | head`) is its choice, not a failure.
fn written(result: std::io::Result<()>, what: &str) -> Result<ExitCode, Refusal> {
    match result {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(Refusal::new(
            ExitCode::Environment,
            format!("cannot write the {what}: {e}"),
        )),
        _ => Ok(ExitCode::Pass),
    }
}

impl Command {
    /// The name a command's messages begin with.
    fn program(&self) -> &'static str {
        match self {
            Self::Compare(_) => "flashprof compare",
            Self::Grade(args) if args.merge => "flashprof grade --merge",
            Self::Grade(_) => "flashprof grade",
            Self::Calibrate(_) => "flashprof calibrate",
            Self::Bench(_) => "flashprof bench",
            Self::Worker => "flashprof worker",
            Self::FetchCuda => "flashprof fetch-cuda",
            _ => "flashprof",
        }
    }
}
