//! `flashprof [FILE]` (the live TUI) and `flashprof replay PATH`.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::check::fresh_seed;
use super::ExitCode;
use crate::app::check::{CheckPlan, CountersPlan, TimingPlan};
use crate::app::history::HistoryStore;
use crate::app::lab_memory;
use crate::protocol::TimingConfig;
use crate::tui::{run_live, run_replay, LiveSetup};

#[derive(Args, Debug)]
pub struct TuiArgs {
    /// The kernel file to watch; created from the lab's starter kernel if it
    /// does not exist. Default: the lab's own file (`prefill.cu` for
    /// flash-prefill, `paged_prefill.cu` for paged-prefill).
    pub file: Option<PathBuf>,
    #[command(flatten)]
    pub lab: super::LabArg,
    #[command(flatten)]
    pub remote: super::remote::RemoteArgs,
    /// Seed of the first check's inputs (each later check adds its run number).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Skip timing against the starter after the cases.
    #[arg(long)]
    pub no_timing: bool,
    /// Skip the hardware counters (collected after timing by default).
    #[arg(long)]
    pub no_counters: bool,
    /// Lecture mode: the speedup and the pass count in large digits, the heatmap large.
    #[arg(long)]
    pub present: bool,
    #[command(flatten)]
    pub quick_build: super::QuickBuildArg,
}

#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// A `.flashprof` folder, its `history.jsonl`, or the folder holding `.flashprof`.
    /// Without one, the session recorded on an H200 that ships inside flashprof.
    pub path: Option<PathBuf>,
    /// Play the kernel ladder recorded on an H200 instead: the starter, then
    /// each rung of kernels/flash-prefill/ladder/ (docs/LADDER.md).
    #[arg(long, conflicts_with = "path")]
    pub ladder: bool,
    /// Lecture mode: the speedup and the pass count in large digits, the heatmap large.
    #[arg(long)]
    pub present: bool,
}

/// How long the timing step may take before it counts as hung.
const TIMING_TIMEOUT: Duration = Duration::from_secs(120);
/// Watchdog for one case.
const CASE_TIMEOUT: Duration = Duration::from_secs(5);

pub fn run(args: TuiArgs) -> ExitCode {
    let (lab, file) = match &args.file {
        // --lab, then the file's own declaration, then what this file was last opened with.
        Some(file) => {
            let remembered = super::declared_lab_of(file).or_else(|| lab_memory::recall(file));
            match args.lab.choose(remembered.as_deref()) {
                Ok(lab) => (lab, file.clone()),
                Err(code) => return code,
            }
        }
        // No file: the lab's own default file, never another lab's.
        None => match args.lab.choose(None) {
            Ok(lab) => (lab, PathBuf::from(lab.default_file())),
            Err(code) => return code,
        },
    };
    if !file.exists() {
        // A starter only for a kernel file: `flashprof notes.txt` must not
        // leave a file behind (a bare word is refused earlier, in cli).
        let is_kernel_file = file.extension().is_some_and(|e| e == "cu")
            || file == std::path::Path::new(lab.default_file());
        if !is_kernel_file {
            eprintln!(
                "flashprof: {}: no such file (a starter kernel is written only for a path ending in .cu)",
                file.display()
            );
            return ExitCode::BadSource;
        }
        // O_EXCL: a link planted under that name (even a dangling one) is never written through.
        let created = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&file)
            .and_then(|mut out| std::io::Write::write_all(&mut out, lab.starter().text.as_bytes()));
        if let Err(e) = created {
            eprintln!("flashprof: cannot create {}: {e}", file.display());
            return ExitCode::Environment;
        }
        eprintln!(
            "flashprof: created {} from the lab's starter kernel",
            file.display()
        );
    }
    if let Err(code) = super::require_proven_oracle("flashprof", lab) {
        return code;
    }
    if let Err(e) = lab_memory::remember(&file, lab.name()) {
        eprintln!("flashprof: cannot remember the lab for this file: {e}");
    }
    let command = match super::worker_command("flashprof", &args.remote) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let run = match super::LabRun::of("flashprof", lab, None, &[]) {
        Ok(run) => run,
        Err(code) => return code,
    };
    let plan = CheckPlan {
        lab,
        source_path: file.display().to_string(),
        source_text: String::new(),
        cases: run.cases,
        seed: args.seed.unwrap_or_else(fresh_seed),
        case_timeout: CASE_TIMEOUT,
        timing: (!args.no_timing).then_some(TimingPlan {
            case: run.timing.clone(),
            config: TimingConfig::default(),
            timeout: TIMING_TIMEOUT,
        }),
        counters: (!args.no_counters).then_some(CountersPlan {
            case: run.timing,
            timeout: TIMING_TIMEOUT,
            custom_metrics: Vec::new(),
        }),
        quick_build: args.quick_build.choice.0,
    };
    let setup = LiveSetup {
        file,
        plan,
        command,
        present: args.present,
    };
    finish(run_live(setup))
}

pub fn replay(args: ReplayArgs) -> ExitCode {
    let path = match args.path {
        Some(path) => path,
        None => {
            let dir =
                std::env::temp_dir().join(format!("flashprof-recorded-{}", std::process::id()));
            let session = if args.ladder {
                &crate::embedded::LADDER
            } else {
                &crate::embedded::WALKTHROUGH
            };
            match session.unpack(&dir) {
                Ok(history) => history,
                Err(e) => {
                    eprintln!(
                        "flashprof: cannot unpack the recorded session into {}: {e}",
                        dir.display()
                    );
                    return ExitCode::Environment;
                }
            }
        }
    };
    finish(run_replay(HistoryStore::locate(&path), args.present))
}

fn finish(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::Pass,
        Err(e) => {
            eprintln!("flashprof: {e:#}");
            ExitCode::Environment
        }
    }
}
