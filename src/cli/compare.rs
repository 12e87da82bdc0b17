//! `flashprof compare A.cu B.cu`: both kernels checked on the same inputs,
//! on the same GPU, in one run, and shown side by side.
//!
//! Each kernel gets its own worker, one after the other, so neither can
//! disturb the other's timing and a fault in one cannot cost the other.
//! With `--watch` the same pair of checks reruns on every save of either
//! file, in the compare screen of the TUI.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::check::fresh_seed;
use super::refusal::{ErrorContext, Refusal};
use super::ExitCode;
use crate::app::check::{run_check_alone, CheckPlan, CountersPlan, TimingPlan};
use crate::app::gate::{GateTable, SpeedGate};
use crate::display::for_display;
use crate::lab::definition::LabRef;
use crate::lab::source::StudentSource;
use crate::outcome::CheckReport;
use crate::protocol::TimingConfig;
use crate::report::compare::{render_compare_json, render_compare_table, Palette, Side};
use crate::tui::{run_compare, CompareSetup};
use crate::worker::GpuSelection;

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// The first kernel (column A).
    pub a: PathBuf,
    /// The second kernel (column B).
    pub b: PathBuf,
    /// Both files are checked against this lab (default: what A declares, then the first lab).
    #[command(flatten)]
    pub lab: super::LabArg,
    #[command(flatten)]
    pub remote: super::remote::RemoteArgs,
    /// Print JSON (schema flashprof.compare/1, docs/TA.md) instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Seed for the inputs both kernels see.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Skip timing (and so the counters and the speed gate).
    #[arg(long)]
    pub no_timing: bool,
    /// Skip the hardware counters.
    #[arg(long)]
    pub no_counters: bool,
    /// The GPU ordinal both kernels run on.
    #[arg(long, default_value_t = 0)]
    pub gpu: usize,
    /// Watchdog per case, in seconds.
    #[arg(long, default_value_t = 5.0, value_parser = super::check::positive_seconds)]
    pub case_timeout: f64,
    /// Keep watching both files and compare again on every save of either (the TUI).
    #[arg(long, conflicts_with = "json")]
    pub watch: bool,
}

/// How long the timing step (and each counters tier) may take.
const TIMING_TIMEOUT: Duration = Duration::from_secs(120);

pub fn run(args: CompareArgs) -> ExitCode {
    if args.watch {
        return watch(args);
    }
    let mut context = ErrorContext {
        command: "compare".into(),
        source_path: None,
        lab: args.lab.lab.clone(),
    };
    match compared(&args, &mut context) {
        Ok(code) => code,
        Err(refusal) => refusal.report_as("flashprof compare", args.json.then_some(&context)),
    }
}

/// The comparison, or why it stopped before it had both reports.
fn compared(args: &CompareArgs, context: &mut ErrorContext) -> Result<ExitCode, Refusal> {
    let lab = args.lab.for_file_or_refusal(&args.a)?;
    context.lab = Some(lab.name().to_owned());
    let mut sources = Vec::with_capacity(2);
    for path in [&args.a, &args.b] {
        context.source_path = Some(path.display().to_string());
        let source = StudentSource::from_path(path, lab)
            .map_err(|e| Refusal::new(ExitCode::BadSource, for_display(&e.to_string())))?;
        sources.push((path.display().to_string(), source));
    }
    context.source_path = None;
    super::proven_oracle(lab)?;
    let command =
        super::worker_command_or_refusal(&args.remote)?.on_gpu(GpuSelection::Ordinal(args.gpu));
    let seed = args.seed.unwrap_or_else(fresh_seed);
    let template = plan_template(args, lab, seed)?;
    let show_progress = !args.json && std::io::stderr().is_terminal();
    let mut reports: Vec<CheckReport> = Vec::with_capacity(2);
    for (label, (path, source)) in ["A", "B"].iter().zip(sources) {
        if show_progress {
            eprint!("\r\x1b[2Kchecking {label}: {path}...");
        }
        let plan = CheckPlan {
            source_path: path,
            source_text: source.text().to_string(),
            ..template.clone()
        };
        let report = run_check_alone(&plan, &command, |_| {});
        match report {
            Ok(r) => reports.push(r),
            Err(e) => {
                if show_progress {
                    eprintln!();
                }
                return Err(Refusal::new(ExitCode::Environment, format!("{label}: {e}")));
            }
        }
    }
    if show_progress {
        eprint!("\r\x1b[2K");
    }
    let gates = GateTable::effective().unwrap_or_else(|e| {
        eprintln!("flashprof compare: no speed gate: {e}");
        GateTable::default()
    });
    let gate_of = |r: &CheckReport| r.gpu.is_ok().then(|| SpeedGate::evaluate(r, &gates));
    let (gate_a, gate_b) = (gate_of(&reports[0]), gate_of(&reports[1]));
    let a = Side {
        report: &reports[0],
        gate: gate_a.as_ref(),
    };
    let b = Side {
        report: &reports[1],
        gate: gate_b.as_ref(),
    };
    if args.json {
        println!("{}", render_compare_json(a, b));
    } else {
        let palette = Palette {
            enabled: std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
        };
        print!("{}", render_compare_table(a, b, palette));
    }
    Ok(if reports.iter().any(|r| r.gpu.is_err()) {
        ExitCode::NoGpu
    } else {
        ExitCode::Pass
    })
}

/// Both kernels' checks, but for the file and its text.
fn plan_template(args: &CompareArgs, lab: LabRef, seed: u64) -> Result<CheckPlan, Refusal> {
    let run = super::LabRun::load(lab, None, &[])?;
    Ok(CheckPlan {
        lab,
        source_path: String::new(),
        source_text: String::new(),
        cases: run.cases,
        seed,
        case_timeout: Duration::from_secs_f64(args.case_timeout),
        timing: (!args.no_timing).then_some(TimingPlan {
            case: run.timing.clone(),
            config: TimingConfig::default(),
            timeout: TIMING_TIMEOUT,
        }),
        counters: (!args.no_timing && !args.no_counters).then(|| CountersPlan {
            case: run.timing,
            timeout: TIMING_TIMEOUT,
            custom_metrics: Vec::new(),
        }),
        quick_build: None,
    })
}

/// `--watch`: the compare screen, until the user quits.
fn watch(args: CompareArgs) -> ExitCode {
    let lab = match args.lab.for_file(&args.a) {
        Ok(lab) => lab,
        Err(code) => return code,
    };
    if let Err(code) = super::require_proven_oracle("flashprof compare", lab) {
        return code;
    }
    let command = match super::worker_command("flashprof compare", &args.remote) {
        Ok(c) => c.on_gpu(GpuSelection::Ordinal(args.gpu)),
        Err(code) => return code,
    };
    let plan = match plan_template(&args, lab, args.seed.unwrap_or_else(fresh_seed)) {
        Ok(plan) => plan,
        Err(refusal) => return refusal.report("flashprof compare"),
    };
    let setup = CompareSetup {
        plan,
        files: [args.a, args.b],
        command,
    };
    match run_compare(setup) {
        Ok(()) => ExitCode::Pass,
        Err(e) => {
            eprintln!("flashprof compare: {e:#}");
            ExitCode::Environment
        }
    }
}
