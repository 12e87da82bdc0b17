//! `flashprof check FILE`: the whole grading loop once, as a table or JSON.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::refusal::{ErrorContext, Refusal};
use super::ExitCode;
use crate::app::check::{run_check, CheckPlan, CountersPlan, TimingPlan};
use crate::app::gate::{GateTable, SpeedGate};
use crate::display::for_display;
use crate::lab::source::StudentSource;
use crate::outcome::Progress;
use crate::outcome::Verdict;
use crate::protocol::TimingConfig;
use crate::report::{render_json, render_table};

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// The student's .cu file (a whole translation unit, or a kernel body as the lab's editor shows it).
    pub file: PathBuf,
    #[command(flatten)]
    pub lab: super::LabArg,
    #[command(flatten)]
    pub remote: super::remote::RemoteArgs,
    /// Print the report as JSON (schema flashprof.check/1, docs/JSON.md) instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Seed for the random inputs; a report prints the seed it used, so a failure reproduces.
    #[arg(long)]
    pub seed: Option<u64>,
    /// A cases file to use instead of the embedded one (format: docs/CASES.md).
    #[arg(long, value_name = "FILE")]
    pub cases: Option<PathBuf>,
    /// Watchdog per case, in seconds: a case still running after this is reported as a timeout.
    #[arg(long, default_value_t = 5.0, value_parser = positive_seconds)]
    pub case_timeout: f64,
    /// Skip timing against the starter.
    #[arg(long)]
    pub no_timing: bool,
    /// Timed launches of each kernel.
    #[arg(long, default_value_t = 15, value_parser = clap::value_parser!(u32).range(3..=1000))]
    pub repetitions: u32,
    /// Collect hardware counters (CUPTI) after the timing: a one-pass quick set, then
    /// SM throughput, the L2 hit rate and every unit's load (docs/COUNTERS.md). Off by
    /// default so the verdict is never delayed; the TUI always collects them.
    #[arg(long)]
    pub counters: bool,
    /// Never collect hardware counters, even with --metrics or --counters-case.
    #[arg(long, conflicts_with = "counters")]
    pub no_counters: bool,
    /// Collect these CUPTI metrics (comma-separated) instead of the quick and full sets (implies --counters).
    #[arg(long, value_delimiter = ',', value_name = "METRIC,...")]
    pub metrics: Vec<String>,
    /// Collect counters at this case's shape instead of the timing shape (implies --counters).
    #[arg(long, value_name = "CASE")]
    pub counters_case: Option<String>,
    /// Keep L2 warm between timed launches (the default flushes it).
    #[arg(long)]
    pub warm_l2: bool,
    /// Change the lab's timing shape, e.g. `chunk=1024,prefix=512` for
    /// flash-prefill (the keys are the lab's; a bad key lists them).
    #[arg(long, value_delimiter = ',', value_name = "KEY=VALUE,...")]
    pub timing_shape: Vec<String>,
    /// Run only the case NAME (of the embedded cases, or of --cases).
    #[arg(long, value_name = "NAME")]
    pub case: Option<String>,
    /// After the check, run compute-sanitizer (racecheck, memcheck, synccheck,
    /// initcheck) over the kernel on the first case; any hazard fails the
    /// verdict (docs/SANITIZER.md). Needs compute-sanitizer (CUDA toolkit).
    #[arg(long)]
    pub sanitize: bool,
}

pub fn positive_seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s > 0.0 && s.is_finite() && s <= 3600.0 => Ok(s),
        _ => Err(format!(
            "expected seconds between 0 and 3600, found `{text}`"
        )),
    }
}

/// A seed that differs on every run: fresh inputs each time unless `--seed` is given.
pub fn fresh_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    (nanos ^ (std::process::id() as u64).rotate_left(32)) % 1_000_000_000_000
}

pub fn run(args: CheckArgs) -> ExitCode {
    let mut context = ErrorContext {
        command: "check".into(),
        source_path: Some(args.file.display().to_string()),
        lab: args.lab.lab.clone(),
    };
    match checked(&args, &mut context) {
        Ok(code) => code,
        Err(refusal) => refusal.report_as("flashprof", args.json.then_some(&context)),
    }
}

/// The check, or why it stopped before it had a report.
fn checked(args: &CheckArgs, context: &mut ErrorContext) -> Result<ExitCode, Refusal> {
    let path = args.file.display().to_string();
    let lab = args.lab.for_file_or_refusal(&args.file)?;
    context.lab = Some(lab.name().to_owned());
    let source = StudentSource::from_path(&args.file, lab).map_err(|e| {
        // The message quotes the file's name and text: shown neutralised.
        Refusal::new(ExitCode::BadSource, for_display(&e.to_string()))
    })?;
    super::proven_oracle(lab)?;
    let sanitizer = args
        .sanitize
        .then(crate::app::sanitize::locate)
        .transpose()
        .map_err(|message| Refusal::new(ExitCode::Environment, format!("--sanitize: {message}")))?;
    let super::LabRun {
        mut cases,
        timing: timing_case,
    } = super::LabRun::load(lab, args.cases.as_deref(), &args.timing_shape)?;
    if let Some(name) = &args.case {
        if !cases.iter().any(|c| &c.name == name) {
            let names: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
            return Err(Refusal::new(
                ExitCode::Usage,
                format!("no case named `{name}` (cases: {})", names.join(", ")),
            ));
        }
        cases.retain(|c| &c.name == name);
    }
    let counters_case = match &args.counters_case {
        None => timing_case.clone(),
        Some(name) => match cases.iter().find(|c| &c.name == name) {
            Some(case) if lab.own_tensors(case).is_some() => {
                return Err(Refusal::new(
                    ExitCode::Usage,
                    format!("case `{name}` brings its own tensors; pick a generated case for --counters-case"),
                ));
            }
            Some(case) => case.clone(),
            None => {
                let names: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
                return Err(Refusal::new(
                    ExitCode::Usage,
                    format!("no case named `{name}` (cases: {})", names.join(", ")),
                ));
            }
        },
    };
    let wants_counters = !args.no_counters
        && (args.counters || !args.metrics.is_empty() || args.counters_case.is_some());
    let plan = CheckPlan {
        lab,
        source_path: path,
        source_text: source.text().to_string(),
        cases,
        seed: args.seed.unwrap_or_else(fresh_seed),
        case_timeout: Duration::from_secs_f64(args.case_timeout),
        timing: (!args.no_timing).then_some(TimingPlan {
            case: timing_case,
            config: TimingConfig {
                repetitions: args.repetitions,
                cold_l2: !args.warm_l2,
                ..TimingConfig::default()
            },
            timeout: Duration::from_secs(120),
        }),
        counters: wants_counters.then_some(CountersPlan {
            case: counters_case,
            timeout: Duration::from_secs(120),
            custom_metrics: args.metrics.clone(),
        }),
        quick_build: None,
    };
    let command = super::worker_command_or_refusal(&args.remote)?;
    let mut worker = None;
    // A status line only makes sense on a terminal; in a log it is noise.
    let show_progress_line = !args.json && std::io::stderr().is_terminal();
    let total = plan.cases.len();
    let report = run_check(&plan, &command, &mut worker, |p| {
        if show_progress_line {
            show_progress(&p, total);
        }
    });
    if let Some(w) = worker {
        // A weaker sandbox than asked for is worth one line; a full one is the norm.
        match &w.sandbox {
            Some(s) if s.level != crate::protocol::SandboxLevel::Full => {
                eprintln!("flashprof: {}", s.notice)
            }
            _ => {}
        }
        w.shutdown();
    }
    let mut report = report.map_err(|e| Refusal::new(ExitCode::Environment, e.to_string()))?;
    if let Some(sanitizer) = sanitizer {
        sanitize(&mut report, &plan, args, sanitizer, show_progress_line);
    }
    let gate = speed_gate(&report);
    if args.json {
        println!("{}", render_json(&report, gate.as_ref()));
    } else {
        if show_progress_line {
            eprint!("\r\x1b[2K");
        }
        print!("{}", render_table(&report));
        if plan.counters.is_none() && report.gpu.is_ok() && report.compile.ok {
            println!(
                "counters: off (--counters adds each unit's load, DRAM bytes and the roofline verdict)"
            );
        }
        if let Some(gate) = &gate {
            println!("{gate}");
        }
    }
    Ok(Verdict::of(&report).exit_code())
}

/// Runs the sanitizer pass on the plan's first case and adds it to the
/// report; only a kernel that compiled and ran on a GPU is sanitized.
fn sanitize(
    report: &mut crate::outcome::CheckReport,
    plan: &CheckPlan,
    args: &CheckArgs,
    sanitizer: PathBuf,
    show_progress_line: bool,
) {
    use crate::app::sanitize::{run_pass, SanitizePlan, SanitizerTool, StudentFile};
    if report.gpu.is_err() || !report.compile.ok {
        eprintln!(
            "flashprof: --sanitize: not run (the kernel did not compile, or there is no GPU)"
        );
        return;
    }
    let Some(case) = plan.cases.first() else {
        return;
    };
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            eprintln!("flashprof: --sanitize: cannot locate its own executable: {e}");
            return;
        }
    };
    if show_progress_line {
        eprint!(
            "\r\x1b[2Kcompute-sanitizer (racecheck, memcheck, synccheck, initcheck) on case {}...",
            case.name
        );
    }
    let sanitize_plan = SanitizePlan {
        sanitizer,
        exe,
        file: args.file.clone(),
        lab: plan.lab.name().to_owned(),
        case: case.name.clone(),
        cases_file: args.cases.clone(),
        seed: plan.seed,
        tools: SanitizerTool::ALL.to_vec(),
        timeout: Duration::from_secs(300),
        student: StudentFile::new(
            &plan.source_path,
            &plan.source_text,
            plan.lab.abi().entry_point,
        ),
        env: Vec::new(),
    };
    report.sanitizer = Some(run_pass(&sanitize_plan));
}

/// The speed gate for a report that ran on a GPU; a broken gates file is
/// reported and leaves the check ungated rather than failing it.
fn speed_gate(report: &crate::outcome::CheckReport) -> Option<SpeedGate> {
    report.gpu.as_ref().ok()?;
    match GateTable::effective() {
        Ok(table) => Some(SpeedGate::evaluate(report, &table)),
        Err(e) => {
            eprintln!("flashprof: no speed gate: {e}");
            None
        }
    }
}

/// One status line on stderr while the check runs, so a slow GPU never looks frozen.
fn show_progress(progress: &Progress, total: usize) {
    use std::io::Write;
    let line = match progress {
        Progress::WorkerStarted { .. } => "compiling...".to_string(),
        Progress::Compiled(c) if c.ok => format!("compiled in {:.0} ms", c.compile_ms),
        Progress::Compiled(_) => "compile failed".to_string(),
        Progress::CaseStarted { index } => format!("case {}/{total}...", index + 1),
        Progress::QuickBuilt(_)
        | Progress::CaseFinished { .. }
        | Progress::ProvisionalCase { .. }
        | Progress::LinkMeasured { .. } => return,
        Progress::WorkerRestarted { reason } => format!("restarted the worker ({reason})"),
        Progress::TimingStarted => "timing against the starter...".to_string(),
        Progress::TimingFinished(_) => "timed".to_string(),
        Progress::CountersStarted { tier } => format!("collecting {tier:?} hardware counters..."),
        Progress::CountersFinished(_) => return,
    };
    eprint!("\r\x1b[2K{line}");
    let _ = std::io::stderr().flush();
}
