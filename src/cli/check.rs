//! `flashprof check FILE`: the whole grading loop once, as a table or JSON.

use std::io::IsTerminal;
use std::path::PathBuf;

use clap::Args;

use super::refusal::{ErrorContext, Refusal};
use super::ExitCode;
use crate::app::check::{run_check, CheckPlan};
use crate::app::check::{CaseChoice, CountersChoice, GateUse, RunOptions};
use crate::lab::source::StudentSource;
use crate::outcome::Progress;
use crate::outcome::Verdict;
use crate::report::{render_json, render_table};

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// The student's .cu file (a whole translation unit, or a kernel body as the lab's editor shows it).
    pub file: PathBuf,
    #[command(flatten)]
    pub lab: super::LabArg,
    #[command(flatten)]
    pub remote: super::remote::RemoteArgs,
    /// Print the report as JSON (schema flashprof.check/2, docs/JSON.md) instead of a table.
    #[arg(short, long)]
    pub json: bool,
    /// Keep the compiled image (cubin or PTX, base64) in the JSON report as
    /// `compile.image`; left out otherwise, as it is most of the document.
    #[arg(long, requires = "json")]
    pub image: bool,
    #[command(flatten)]
    pub run: super::plan::RunArgs,
    /// A cases file to use instead of the embedded one (format: docs/CASES.md).
    #[arg(long, value_name = "FILE")]
    pub cases: Option<PathBuf>,
    /// Timed launches of each kernel.
    #[arg(long, default_value_t = 15, value_parser = clap::value_parser!(u32).range(3..=1000))]
    pub repetitions: u32,
    /// Collect hardware counters (CUPTI) after the timing: a one-pass quick set, then
    /// SM throughput, the L2 hit rate and every unit's load (docs/COUNTERS.md). Off by
    /// default so the verdict is never delayed; the TUI always collects them.
    #[arg(long, conflicts_with = "no_counters")]
    pub counters: bool,
    #[command(flatten)]
    pub no_counters: super::plan::NoCountersArg,
    /// Collect these CUPTI metrics (comma-separated) instead of the quick and full sets (implies --counters).
    #[arg(long, value_delimiter = ',', value_name = "METRIC,...")]
    pub metrics: Vec<String>,
    /// Collect counters at this case's shape instead of the timing shape (implies --counters).
    #[arg(long, value_name = "CASE")]
    pub counters_case: Option<String>,
    /// Profile the kernel line by line after everything else (CUPTI's PC
    /// Sampling and SASS Metrics, in a worker of its own, on the timing
    /// shape): the hottest lines of the file, their main stall reason and
    /// their memory findings (docs/LINE-PROFILE.md).
    #[arg(long)]
    pub lines: bool,
    /// Keep L2 warm between timed launches (the default flushes it).
    #[arg(long)]
    pub warm_l2: bool,
    /// Draw the timed launches' values, plants and block moves from this
    /// seed instead of the operating system's entropy: a report's `draw seed`
    /// replays its timing's data (docs/INTEGRITY.md).
    #[arg(long, value_name = "SEED", value_parser = parse_draw_seed)]
    pub draw_seed: Option<std::num::NonZeroU64>,
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

/// A draw seed as the report prints it (`0x...`) or in decimal; never 0
/// (every seed a timing draws is odd).
fn parse_draw_seed(text: &str) -> Result<std::num::NonZeroU64, String> {
    let parsed = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    };
    parsed
        .and_then(std::num::NonZeroU64::new)
        .ok_or_else(|| format!("expected a seed such as 0x00ab12cd34ef5679 or 43, found `{text}`"))
}

pub fn run(args: CheckArgs) -> Result<ExitCode, Refusal> {
    let mut context = ErrorContext {
        command: "check".into(),
        source_path: Some(args.file.display().to_string()),
        lab: args.lab.lab.clone(),
    };
    checked(&args, &mut context).map_err(|refusal| refusal.with_json(args.json.then_some(context)))
}

impl CheckArgs {
    /// What these options ask of the check.
    pub(super) fn options(&self) -> RunOptions {
        let on = !self.no_counters.no_counters
            && (self.counters || !self.metrics.is_empty() || self.counters_case.is_some());
        let mut options = self.run.options(on);
        if let Some(config) = &mut options.timing {
            config.repetitions = self.repetitions;
            config.cold_l2 = !self.warm_l2;
            config.draw_seed = self.draw_seed;
        }
        RunOptions {
            cases: self
                .case
                .clone()
                .map_or(CaseChoice::Every, CaseChoice::Only),
            cases_file: self.cases.clone(),
            timing_shape: self.timing_shape.clone(),
            counters: CountersChoice {
                on,
                case: self.counters_case.clone(),
                metrics: self.metrics.clone(),
            },
            lines: self.lines,
            sanitize: self.sanitize,
            gates: GateUse::Lenient("flashprof"),
            ..options
        }
    }
}

/// The check, or why it stopped before it had a report.
fn checked(args: &CheckArgs, context: &mut ErrorContext) -> Result<ExitCode, Refusal> {
    let lab = args.lab.for_file(&args.file)?;
    context.lab = Some(lab.name().to_owned());
    let source =
        StudentSource::from_path(&args.file, lab).map_err(|e| args.lab.refuse_source(e))?;
    super::proven_oracle(lab)?;
    let plan = args
        .options()
        .plan(lab)?
        .of_source(args.file.display().to_string(), source.text().to_string());
    let command = super::worker_command(&args.remote)?;
    let mut worker = None;
    // A status line only makes sense on a terminal; in a log it is noise.
    let show_progress_line = !args.json && std::io::stderr().is_terminal();
    let total = plan.cases().len();
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
    if plan.sanitizes() {
        sanitize(&mut report, &plan, show_progress_line);
    }
    let gate = plan.gate(&report);
    if !args.image {
        report.compile.image.clear();
    }
    if args.json {
        println!("{}", render_json(&report, gate.as_ref()));
    } else {
        if show_progress_line {
            eprint!("\r\x1b[2K");
        }
        let reproduce = args
            .remote
            .reproduce_on(args.options().reproduce(&args.file, plan.lab()));
        let reproduce = match report.compile.ok {
            true => reproduce.for_seed(plan.seed()),
            false => reproduce.without_seed(),
        };
        let table = render_table(&report, Some(&reproduce));
        if wants_colour() {
            print!("{}", coloured(&table));
        } else {
            print!("{table}");
        }
        if plan.counters().is_none() && report.gpu.is_ok() && report.compile.ok {
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

/// Colour as `--color` and `NO_COLOR` say, for standard output.
fn wants_colour() -> bool {
    crate::display::colour(std::io::stdout().is_terminal())
}

/// The table with each diagnostic's severity and caret in colour (red
/// errors, yellow warnings), the rest untouched.
fn coloured(table: &str) -> String {
    const RED: &str = "\x1b[1;31m";
    const YELLOW: &str = "\x1b[1;33m";
    const RESET: &str = "\x1b[0m";
    let mut out = String::with_capacity(table.len() + 64);
    let mut caret_colour = RED;
    for line in table.split_inclusive('\n') {
        let severity = [(": error: ", RED), (": warning: ", YELLOW)]
            .into_iter()
            .find_map(|(word, colour)| line.find(word).map(|at| (at, word, colour)));
        if let Some((at, word, colour)) = severity {
            caret_colour = colour;
            let name = &word[2..word.len() - 2];
            out.push_str(&line[..at + 2]);
            out.push_str(&format!("{colour}{name}{RESET}"));
            out.push_str(&line[at + word.len() - 2..]);
        } else if line.trim() == "^" {
            let at = line.find('^').unwrap_or(0);
            out.push_str(&format!(
                "{}{caret_colour}^{RESET}{}",
                &line[..at],
                &line[at + 1..]
            ));
        } else {
            out.push_str(line);
        }
    }
    out
}

/// Runs the sanitizer pass on the plan's first case and adds it to the
/// report; only a kernel that compiled and ran on a GPU is sanitized.
fn sanitize(report: &mut crate::outcome::CheckReport, plan: &CheckPlan, show_progress_line: bool) {
    use crate::app::sanitize::run_pass;
    if report.gpu.is_err() || !report.compile.ok {
        eprintln!(
            "flashprof: --sanitize: not run (the kernel did not compile, or there is no GPU)"
        );
        return;
    }
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            eprintln!("flashprof: --sanitize: cannot locate its own executable: {e}");
            return;
        }
    };
    let Some(pass) = plan.sanitize_pass(exe) else {
        return;
    };
    if show_progress_line {
        eprint!(
            "\r\x1b[2Kcompute-sanitizer (racecheck, memcheck, synccheck, initcheck) on case {}...",
            pass.case
        );
    }
    report.sanitizer = Some(run_pass(&pass));
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
        Progress::LinesStarted => "profiling lines...".to_string(),
        Progress::LinesSampled(_) => crate::app::check::COUNTS_COMING.to_string(),
    };
    eprint!("\r\x1b[2K{line}");
    let _ = std::io::stderr().flush();
}

#[cfg(test)]
mod tests {
    use super::{coloured, parse_draw_seed};

    #[test]
    fn a_draw_seed_is_read_as_the_report_prints_it_or_in_decimal() {
        let seed = std::num::NonZeroU64::new(43);
        assert_eq!(parse_draw_seed("0x000000000000002b").ok(), seed);
        assert_eq!(parse_draw_seed("43").ok(), seed);
        for bad in ["0xzz", "0"] {
            let refused = parse_draw_seed(bad).expect_err("not a seed");
            assert!(refused.contains(&format!("found `{bad}`")), "{refused}");
        }
    }

    #[test]
    fn errors_and_warnings_are_coloured_and_nothing_else_changes() {
        let table =
            "k.cu:3:5: error: bad\n    3 |     x;\n            ^\nk.cu:4: warning: odd\nPASS\n";
        let shown = coloured(table);
        assert!(
            shown.contains("k.cu:3:5: \x1b[1;31merror\x1b[0m: bad\n"),
            "{shown:?}"
        );
        assert!(
            shown.contains("            \x1b[1;31m^\x1b[0m\n"),
            "{shown:?}"
        );
        assert!(
            shown.contains("k.cu:4: \x1b[1;33mwarning\x1b[0m: odd\n"),
            "{shown:?}"
        );
        let plain = shown
            .replace("\x1b[1;31m", "")
            .replace("\x1b[1;33m", "")
            .replace("\x1b[0m", "");
        assert_eq!(plain, table);
    }
}
