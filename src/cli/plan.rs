//! From a command's options to the one [`CheckPlan`] its checks follow.
//!
//! Every command that runs kernels takes the same run options
//! ([`RunArgs`], and [`NoCountersArg`] where counters are collected),
//! turns them and its own into [`RunOptions`], and asks
//! [`RunOptions::plan`] for the plan: the lab's cases loaded and chosen,
//! its timing shape, and every default in this file. A plan is a template
//! until [`CheckPlan::of_source`] gives it a file.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;

use super::refusal::Refusal;
use super::ExitCode;
use crate::app::check::{CheckPlan, CountersPlan, LinesPlan, TimingPlan};
use crate::app::gate::GateTable;
use crate::gpu::compile::QuickBuild;
use crate::lab::definition::{LabCase, LabRef};
use crate::protocol::TimingConfig;
use crate::report::ReproduceCommand;

/// The default watchdog for one case (two launches and the checks), in seconds.
pub const CASE_TIMEOUT_S: f64 = 5.0;
/// How long the timing step, and each tier of counters, may take before it
/// counts as hung.
pub const STEP_TIMEOUT: Duration = Duration::from_secs(120);

/// The options of every command that runs a check.
#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// Seed for the random inputs (default: a fresh one each run; `grade`
    /// keeps its journal's); a report prints the seed it used, so a failure
    /// reproduces.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Watchdog per case, in seconds: a case still running after this is reported as a timeout.
    #[arg(long, default_value_t = CASE_TIMEOUT_S, value_parser = positive_seconds)]
    pub case_timeout: f64,
    /// Skip timing against the starter (and so the speed gate).
    #[arg(long)]
    pub no_timing: bool,
}

/// `--no-counters`, on the commands that collect hardware counters.
#[derive(Args, Debug, Clone)]
pub struct NoCountersArg {
    /// Never collect hardware counters.
    #[arg(long)]
    pub no_counters: bool,
}

/// Seconds in (0, 3600], for a watchdog.
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

/// Which of the lab's cases a check runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CaseChoice {
    Every,
    /// Only the case of this name (`check --case NAME`).
    Only(String),
    /// None: the check only times the kernel (`calibrate`).
    TimingOnly,
}

/// What a command asks of its checks, before the lab is consulted.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// `None`: a fresh seed.
    pub seed: Option<u64>,
    pub case_timeout: Duration,
    /// A cases file instead of the lab's embedded cases.
    pub cases_file: Option<PathBuf>,
    pub cases: CaseChoice,
    /// `None`: no timing.
    pub timing: Option<TimingConfig>,
    /// `--timing-shape KEY=VALUE` overrides of the lab's timing shape.
    pub timing_shape: Vec<String>,
    pub counters: CountersChoice,
    /// The line profile, last (`check --lines`).
    pub lines: bool,
    pub quick_build: Option<QuickBuild>,
}

/// Hardware counters after the timing, and how.
#[derive(Debug, Clone, Default)]
pub struct CountersChoice {
    pub on: bool,
    /// Profile this case's shape instead of the timing shape (checked
    /// against the cases even with the counters off).
    pub case: Option<String>,
    /// These metrics instead of the quick and full sets.
    pub metrics: Vec<String>,
}

impl Default for RunOptions {
    /// Every case, timed, no counters, one optimized build.
    fn default() -> Self {
        Self {
            seed: None,
            case_timeout: Duration::from_secs_f64(CASE_TIMEOUT_S),
            cases: CaseChoice::Every,
            cases_file: None,
            timing: Some(TimingConfig::default()),
            timing_shape: Vec::new(),
            counters: CountersChoice::default(),
            lines: false,
            quick_build: None,
        }
    }
}

impl RunArgs {
    /// The options these flags give, counters on or off as the command decides.
    pub fn options(&self, counters: bool) -> RunOptions {
        RunOptions {
            seed: self.seed,
            case_timeout: Duration::from_secs_f64(self.case_timeout),
            timing: (!self.no_timing).then(TimingConfig::default),
            counters: CountersChoice {
                on: counters,
                ..CountersChoice::default()
            },
            ..RunOptions::default()
        }
    }
}

impl RunOptions {
    /// `flashprof check` on `file` with every one of these options that
    /// changed the run (the seed is added per check), so pasting it reruns
    /// the same check on the same inputs, whichever command ran it first.
    pub fn reproduce(&self, file: &Path, lab: LabRef) -> ReproduceCommand {
        let defaults = RunOptions::default();
        let mut command = ReproduceCommand::new(&file.display().to_string(), lab.name());
        if let Some(cases) = &self.cases_file {
            command = command.with("--cases", Some(&cases.display().to_string()));
        }
        if let CaseChoice::Only(name) = &self.cases {
            command = command.with("--case", Some(name));
        }
        if !self.timing_shape.is_empty() {
            command = command.with("--timing-shape", Some(&self.timing_shape.join(",")));
        }
        if self.case_timeout != defaults.case_timeout {
            let seconds = self.case_timeout.as_secs_f64().to_string();
            command = command.with("--case-timeout", Some(&seconds));
        }
        match self.timing {
            None => command = command.with("--no-timing", None),
            Some(config) => {
                let usual = TimingConfig::default();
                if config.repetitions != usual.repetitions {
                    let repetitions = config.repetitions.to_string();
                    command = command.with("--repetitions", Some(&repetitions));
                }
                if !config.cold_l2 {
                    command = command.with("--warm-l2", None);
                }
                if let Some(seed) = config.draw_seed {
                    command = command.with("--draw-seed", Some(&format!("{seed:#018x}")));
                }
            }
        }
        // `check` collects no counters unless asked; each of these asks.
        let counters = &self.counters;
        if counters.on {
            command = match (&counters.case, counters.metrics.is_empty()) {
                (Some(case), _) => command.with("--counters-case", Some(case)),
                (None, true) => command.with("--counters", None),
                (None, false) => command,
            };
            if !counters.metrics.is_empty() {
                command = command.with("--metrics", Some(&counters.metrics.join(",")));
            }
        }
        if self.lines {
            command = command.with("--lines", None);
        }
        command
    }

    /// The plan for `lab` with no file yet, or why these options cannot run on it.
    pub fn plan(&self, lab: LabRef) -> Result<CheckPlan, Refusal> {
        let mut cases = match self.cases {
            CaseChoice::TimingOnly => Vec::new(),
            _ => load_cases(lab, self.cases_file.as_deref())
                .map_err(|e| Refusal::new(ExitCode::Environment, e))?,
        };
        let timing_case = timing_shape_case(lab, &self.timing_shape)?;
        if let CaseChoice::Only(name) = &self.cases {
            named(&cases, name)?;
            cases.retain(|c| &c.name == name);
        }
        let counters_case = match &self.counters.case {
            None => timing_case.clone(),
            Some(name) => counters_case(lab, &cases, name)?,
        };
        let counters = self.counters.on.then(|| CountersPlan {
            case: counters_case,
            timeout: STEP_TIMEOUT,
            custom_metrics: self.counters.metrics.clone(),
        });
        let lines = self.lines.then(|| LinesPlan {
            case: timing_case.clone(),
            timeout: STEP_TIMEOUT,
        });
        Ok(CheckPlan {
            lab,
            source_path: String::new(),
            source_text: String::new(),
            cases,
            seed: self.seed.unwrap_or_else(fresh_seed),
            case_timeout: self.case_timeout,
            timing: self.timing.map(|config| TimingPlan {
                case: timing_case,
                config,
                timeout: STEP_TIMEOUT,
            }),
            counters,
            lines,
            quick_build: self.quick_build,
        })
    }
}

/// The compute-sanitizer a `--sanitize` run uses, found before any check
/// runs so that a missing one stops the command at once.
pub fn sanitizer(asked: bool) -> Result<Option<PathBuf>, Refusal> {
    asked
        .then(crate::app::sanitize::locate)
        .transpose()
        .map_err(|message| Refusal::new(ExitCode::Environment, format!("--sanitize: {message}")))
}

/// The speed gates in effect; a broken gates file is said (after `who`)
/// and leaves the reports ungated rather than failing the command.
pub fn speed_gates(who: &str) -> Option<GateTable> {
    GateTable::effective()
        .map_err(|e| eprintln!("{who}: no speed gate: {e}"))
        .ok()
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

/// The case called `name`, or a refusal that lists the cases there are.
fn named<'a>(cases: &'a [LabCase], name: &str) -> Result<&'a LabCase, Refusal> {
    cases.iter().find(|c| c.name == name).ok_or_else(|| {
        let names: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
        Refusal::new(
            ExitCode::Usage,
            format!("no case named `{name}` (cases: {})", names.join(", ")),
        )
    })
}

/// The case `--counters-case NAME` profiles: one whose inputs are generated.
fn counters_case(lab: LabRef, cases: &[LabCase], name: &str) -> Result<LabCase, Refusal> {
    let case = named(cases, name)?;
    if lab.own_tensors(case).is_some() {
        return Err(Refusal::new(
            ExitCode::Usage,
            format!(
                "case `{name}` brings its own tensors; pick a generated case for --counters-case"
            ),
        ));
    }
    Ok(case.clone())
}

/// The lab's timing shape as a case, with `--timing-shape KEY=VALUE` overrides.
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

#[cfg(test)]
mod tests {
    use super::super::{Cli, Command};
    use super::*;
    use crate::lab::flash_prefill::FLASH_PREFILL;
    use clap::Parser;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("flashprof").chain(args.iter().copied()))
    }

    /// The run options `args` give.
    fn options_of(args: &[&str]) -> RunOptions {
        let cli = parse(args).expect("a valid command line");
        match cli.command {
            None => cli.tui.options(),
            Some(Command::Check(check)) => check.options(),
            Some(Command::Compare(compare)) => compare.options(),
            Some(Command::Grade(grade)) => grade.run.options(false),
            _ => panic!("{args:?} runs no check"),
        }
    }

    /// The plan `args` give on flash-prefill, or why not.
    fn plan_of(args: &[&str]) -> Result<CheckPlan, Refusal> {
        options_of(args).plan(FLASH_PREFILL)
    }

    #[test]
    fn the_reproduce_command_keeps_every_option_that_changed_the_run() {
        let command = |args: &[&str]| {
            let options = options_of(args);
            options
                .reproduce(Path::new(args[args.len() - 1]), FLASH_PREFILL)
                .for_seed(3)
        };
        // A plain check: the file, its lab and the seed are all it needs.
        assert_eq!(
            command(&["check", "k.cu"]),
            "flashprof check k.cu --lab flash-prefill --seed 3"
        );
        // The TUI collects counters and profiles lines, which a check does
        // only when asked.
        assert_eq!(
            command(&["k.cu"]),
            "flashprof check k.cu --lab flash-prefill --counters --lines --seed 3"
        );
        assert_eq!(
            command(&["--no-lines", "k.cu"]),
            "flashprof check k.cu --lab flash-prefill --counters --seed 3"
        );
        assert_eq!(
            command(&[
                "--no-counters",
                "--no-timing",
                "--case-timeout",
                "2.5",
                "k.cu"
            ]),
            "flashprof check k.cu --lab flash-prefill --case-timeout 2.5 --no-timing --lines \
             --seed 3"
        );
        assert_eq!(
            command(&[
                "check",
                "--repetitions",
                "30",
                "--warm-l2",
                "--counters-case",
                "chunk-of-1",
                "--metrics",
                "a,b",
                "my k.cu",
            ]),
            "flashprof check 'my k.cu' --lab flash-prefill --repetitions 30 --warm-l2 \
             --counters-case chunk-of-1 --metrics a,b --seed 3"
        );
    }

    fn embedded_case_count() -> usize {
        load_cases(FLASH_PREFILL, None)
            .expect("embedded cases")
            .len()
    }

    #[test]
    fn every_command_gets_its_defaults_from_one_place() {
        let check = plan_of(&["check", "k.cu"]).expect("plan");
        assert_eq!(check.case_timeout, Duration::from_secs(5));
        assert_eq!(check.cases.len(), embedded_case_count());
        let timing = check.timing.as_ref().expect("timed by default");
        assert_eq!(timing.timeout, STEP_TIMEOUT);
        assert_eq!(timing.config, TimingConfig::default());
        assert_eq!(
            timing.case.name,
            FLASH_PREFILL.timing_case(&[]).unwrap().name
        );
        assert!(
            check.counters.is_none(),
            "check collects counters only when asked"
        );
        assert_eq!(check.quick_build, None);

        // The TUI and compare collect counters unless told not to; grade never does.
        for args in [&["k.cu"][..], &["compare", "a.cu", "b.cu"]] {
            let plan = plan_of(args).expect("plan");
            assert_eq!(plan.case_timeout, check.case_timeout, "{args:?}");
            let counters = plan.counters.expect("counters by default");
            assert_eq!(counters.timeout, STEP_TIMEOUT);
            assert_eq!(counters.case.name, timing.case.name);
            assert!(counters.custom_metrics.is_empty());
        }
        assert_eq!(
            plan_of(&["k.cu"]).unwrap().quick_build,
            Some(QuickBuild::FastCompile)
        );
        assert!(plan_of(&["grade", "class", "--out", "o"])
            .unwrap()
            .counters
            .is_none());
        for args in [
            &["k.cu", "--no-counters"][..],
            &["compare", "a.cu", "b.cu", "--no-timing"],
        ] {
            assert!(plan_of(args).unwrap().counters.is_none(), "{args:?}");
        }
    }

    #[test]
    fn the_shared_options_reach_the_plan() {
        let plan = plan_of(&[
            "check",
            "k.cu",
            "--seed",
            "9",
            "--case-timeout",
            "0.5",
            "--repetitions",
            "30",
            "--warm-l2",
            "--draw-seed",
            "0x2b",
        ])
        .expect("plan");
        assert_eq!(plan.seed, 9);
        assert_eq!(plan.case_timeout, Duration::from_millis(500));
        let config = plan.timing.expect("timed").config;
        assert_eq!((config.repetitions, config.cold_l2), (30, false));
        let seed = std::num::NonZeroU64::new(43);
        assert_eq!(config.draw_seed, seed, "a report's hex seed replays");
        assert_eq!(
            plan_of(&["check", "k.cu", "--draw-seed", "43"])
                .expect("plan")
                .timing
                .expect("timed")
                .config
                .draw_seed,
            seed
        );

        for args in [
            &["check", "k.cu", "--no-timing"][..],
            &["k.cu", "--no-timing"],
            &["grade", "class", "--out", "o", "--no-timing"],
        ] {
            assert!(plan_of(args).unwrap().timing.is_none(), "{args:?}");
        }
        assert_eq!(plan_of(&["k.cu", "--seed", "4"]).unwrap().seed, 4);
    }

    #[test]
    fn metrics_or_a_counters_case_ask_for_counters() {
        let plan = plan_of(&["check", "k.cu", "--metrics", "a,b"]).expect("plan");
        assert_eq!(plan.counters.expect("counters").custom_metrics, ["a", "b"]);
        let first = load_cases(FLASH_PREFILL, None).unwrap()[0].name.clone();
        let plan = plan_of(&["check", "k.cu", "--counters-case", &first]).expect("plan");
        assert_eq!(plan.counters.expect("counters").case.name, first);
        let plan = plan_of(&["check", "k.cu", "--case", &first]).expect("plan");
        assert_eq!(plan.cases.len(), 1);
        assert_eq!(plan.cases[0].name, first);
        let plan = plan_of(&["check", "k.cu", "--metrics", "a", "--no-counters"]).expect("plan");
        assert!(plan.counters.is_none());
    }

    #[test]
    fn the_combinations_refused_before_are_refused() {
        let refused = |args: &[&str]| plan_of(args).expect_err("refused");
        let missing = refused(&["check", "k.cu", "--case", "nosuch"]);
        assert_eq!(missing.code, ExitCode::Usage);
        assert!(
            missing
                .message
                .starts_with("no case named `nosuch` (cases: "),
            "{}",
            missing.message
        );
        // A counters case is checked even with the counters off.
        let missing = refused(&[
            "check",
            "k.cu",
            "--no-counters",
            "--counters-case",
            "nosuch",
        ]);
        assert_eq!(missing.code, ExitCode::Usage);
        // --case narrows the cases --counters-case may name.
        let cases = load_cases(FLASH_PREFILL, None).unwrap();
        let (a, b) = (cases[0].name.as_str(), cases[1].name.as_str());
        let narrowed = refused(&["check", "k.cu", "--case", a, "--counters-case", b]);
        assert_eq!(
            narrowed.message,
            format!("no case named `{b}` (cases: {a})")
        );
        let shape = refused(&["check", "k.cu", "--timing-shape", "chunk"]);
        assert_eq!(shape.code, ExitCode::Usage);
        assert_eq!(
            shape.message,
            "--timing-shape: expected KEY=VALUE, found `chunk`"
        );

        for args in [
            &["check", "k.cu", "--counters", "--no-counters"][..],
            &["check", "k.cu", "--case-timeout", "0"],
            &["k.cu", "--case-timeout", "3601"],
            &["compare", "a.cu", "b.cu", "--watch", "--json"],
            &["grade", "o1", "o2", "--out", "o", "--merge", "--seed", "3"],
        ] {
            let error = parse(args)
                .err()
                .unwrap_or_else(|| panic!("{args:?} parsed"));
            assert!(error.use_stderr(), "{args:?}");
        }
    }
}
