//! `flashprof compare A.cu B.cu`: both kernels checked on the same inputs,
//! on the same GPU, in one run, and shown side by side.
//!
//! Each kernel gets its own worker, one after the other, so neither can
//! disturb the other's timing and a fault in one cannot cost the other.
//! With `--watch` the same pair of checks reruns on every save of either
//! file, in the compare screen of the TUI.

use std::io::IsTerminal;
use std::path::PathBuf;

use clap::Args;

use super::refusal::{ErrorContext, Refusal};
use super::ExitCode;
use crate::app::check::run_check_alone;
use crate::app::check::{GateUse, RunOptions};
use crate::grade::stopping::StoppingRule;
use crate::lab::source::StudentSource;
use crate::outcome::{CheckReport, Verdict};
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
    /// Print JSON (schema flashprof.compare/2, docs/TA.md) instead of a table.
    #[arg(short, long)]
    pub json: bool,
    /// Both kernels see the same inputs; without timing there are no counters.
    #[command(flatten)]
    pub run: super::plan::RunArgs,
    #[command(flatten)]
    pub no_counters: super::plan::NoCountersArg,
    /// The GPU ordinal both kernels run on.
    #[arg(long, default_value_t = 0)]
    pub gpu: usize,
    /// Keep watching both files and compare again on every save of either (the TUI).
    #[arg(long, conflicts_with = "json")]
    pub watch: bool,
}

pub fn run(args: CompareArgs) -> Result<ExitCode, Refusal> {
    if args.watch {
        return watch(args);
    }
    let mut context = ErrorContext {
        command: "compare".into(),
        source_path: None,
        lab: args.lab.lab.clone(),
    };
    compared(&args, &mut context).map_err(|refusal| refusal.with_json(args.json.then_some(context)))
}

/// The comparison, or why it stopped before it had both reports.
fn compared(args: &CompareArgs, context: &mut ErrorContext) -> Result<ExitCode, Refusal> {
    let lab = args.lab.for_file(&args.a)?;
    context.lab = Some(lab.name().to_owned());
    let mut sources = Vec::with_capacity(2);
    for path in [&args.a, &args.b] {
        context.source_path = Some(path.display().to_string());
        super::refuse_missing(path)?;
        let source = StudentSource::from_path(path, lab).map_err(|e| args.lab.refuse_source(e))?;
        sources.push((path.display().to_string(), source));
    }
    context.source_path = None;
    super::proven_oracle(lab)?;
    let command = super::worker_command(&args.remote)?.on_gpu(GpuSelection::Ordinal(args.gpu));
    let template = args.options().plan(lab)?;
    let show_progress = !args.json && std::io::stderr().is_terminal();
    let mut reports: Vec<CheckReport> = Vec::with_capacity(2);
    for (label, (path, source)) in ["A", "B"].iter().zip(sources) {
        if show_progress {
            eprint!("\r\x1b[2Kchecking {label}: {path}...");
        }
        let plan = template.of_source(path, source.text().to_string());
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
    for report in &mut reports {
        // The images are no part of a comparison (docs/TA.md).
        report.compile.image.clear();
    }
    let (gate_a, gate_b) = (template.gate(&reports[0]), template.gate(&reports[1]));
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
            enabled: crate::display::colour(std::io::stdout().is_terminal()),
        };
        print!("{}", render_compare_table(a, b, palette));
    }
    Ok(compare_exit(&reports))
}

/// A side whose build stopped decides first, as `check` would exit for it,
/// the machine's fault before the file's whichever side it is (6 for NVRTC
/// or the headers missing, then 4 for a compile error, then 3 for an
/// unusable file); then a missing GPU; a comparison of two kernels that
/// built and ran is a success whatever their verdicts: telling them apart
/// is its result.
fn compare_exit(reports: &[CheckReport]) -> ExitCode {
    let unbuilt = |verdict: Verdict| {
        reports
            .iter()
            .any(|r| !r.compile.ok && Verdict::of(r) == verdict)
    };
    let by_severity = [Verdict::Error, Verdict::CompileError, Verdict::Rejected];
    if let Some(worst) = by_severity.into_iter().find(|&v| unbuilt(v)) {
        worst.exit_code()
    } else if reports.iter().any(|r| r.gpu.is_err()) {
        ExitCode::NoGpu
    } else {
        ExitCode::Pass
    }
}

impl CompareArgs {
    /// What both kernels' checks ask for: counters only with the timing,
    /// each report judged by the speed gates but timed to the narrow
    /// interval (the two speedups' ratio needs it, wherever the gate is).
    pub(super) fn options(&self) -> RunOptions {
        let counters = !self.run.no_timing && !self.no_counters.no_counters;
        let options = self.run.options(counters);
        RunOptions {
            gates: GateUse::Lenient("flashprof compare"),
            timing: options.timing.map(|timing| TimingConfig {
                stopping: StoppingRule::NARROW,
                ..timing
            }),
            ..options
        }
    }
}

/// `--watch`: the compare screen, until the user quits.
fn watch(args: CompareArgs) -> Result<ExitCode, Refusal> {
    let lab = args.lab.for_file(&args.a)?;
    super::refuse_missing(&args.b)?;
    super::tui::refuse_without_terminal()?;
    super::proven_oracle(lab)?;
    let command = super::worker_command(&args.remote)?.on_gpu(GpuSelection::Ordinal(args.gpu));
    let setup = CompareSetup {
        plan: args.options().plan(lab)?,
        files: [args.a, args.b],
        command,
    };
    run_compare(setup)
        .map(|()| ExitCode::Pass)
        .map_err(|e| Refusal::new(ExitCode::Environment, format!("{e:#}")))
}
