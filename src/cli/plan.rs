//! From a command's flags to the [`RunOptions`] its checks follow.
//!
//! Every command that runs kernels takes the same run flags ([`RunArgs`],
//! and [`NoCountersArg`] where counters are collected) and turns them and
//! its own into [`RunOptions`]; `RunOptions::plan` (in `app::check`) then
//! makes the one validated plan. Pasting [`RunOptions::reproduce`] reruns
//! a check.

use std::path::Path;
use std::time::Duration;

use clap::Args;

use crate::app::check::{CaseChoice, CountersChoice, RunOptions, CASE_TIMEOUT_S};
use crate::lab::definition::LabRef;
use crate::protocol::TimingConfig;
use crate::report::ReproduceCommand;

/// The options of every command that runs a check.
#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// Seed for the random inputs (default: a fresh one each run; `grade`
    /// keeps its journal's); a report prints the seed it used, so a failure
    /// reproduces.
    #[arg(short, long)]
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
}

#[cfg(test)]
mod tests {
    use super::super::{Cli, Command};
    use super::*;
    use crate::app::check::{CheckPlan, GateUse, STEP_TIMEOUT};
    use crate::app::gate::GateTable;
    use crate::cli::{ExitCode, Refusal};
    use crate::gpu::compile::QuickBuild;
    use crate::grade::stopping::StoppingRule;
    use crate::lab::definition::LabCase;
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
            Some(Command::Grade(grade)) => grade.options(),
            _ => panic!("{args:?} runs no check"),
        }
    }

    /// The plan `args` give on flash-prefill, or why not.
    fn plan_of(args: &[&str]) -> Result<CheckPlan, Refusal> {
        // Judged by no gates file: the user's own must not decide a test.
        let ungated = RunOptions {
            gates: GateUse::Off,
            ..options_of(args)
        };
        Ok(ungated.plan(FLASH_PREFILL)?)
    }

    /// The lab's embedded cases, parsed by the lab itself.
    fn embedded_cases() -> Vec<LabCase> {
        FLASH_PREFILL
            .parse_cases(FLASH_PREFILL.embedded_cases(), "embedded", Path::new("."))
            .expect("embedded cases")
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

    #[test]
    fn every_command_gets_its_defaults_from_one_place() {
        let check = plan_of(&["check", "k.cu"]).expect("plan");
        assert_eq!(check.case_timeout(), Duration::from_secs(5));
        assert_eq!(check.cases().len(), embedded_cases().len());
        let timing = check.timing().expect("timed by default");
        assert_eq!(timing.timeout, STEP_TIMEOUT);
        assert_eq!(timing.config, TimingConfig::default());
        assert_eq!(
            timing.case.name,
            FLASH_PREFILL.timing_case(&[]).unwrap().name
        );
        assert!(
            check.counters().is_none(),
            "check collects counters only when asked"
        );
        assert_eq!(check.quick_build(), None);

        // The TUI and compare collect counters unless told not to; grade never does.
        for args in [&["k.cu"][..], &["compare", "a.cu", "b.cu"]] {
            let plan = plan_of(args).expect("plan");
            assert_eq!(plan.case_timeout(), check.case_timeout(), "{args:?}");
            let counters = plan.counters().expect("counters by default");
            assert_eq!(counters.timeout, STEP_TIMEOUT);
            assert_eq!(counters.case.name, timing.case.name);
            assert!(counters.custom_metrics.is_empty());
        }
        assert_eq!(
            plan_of(&["k.cu"]).unwrap().quick_build(),
            Some(QuickBuild::FastCompile)
        );
        assert!(plan_of(&["grade", "class", "--out", "o"])
            .unwrap()
            .counters()
            .is_none());
        for args in [
            &["k.cu", "--no-counters"][..],
            &["compare", "a.cu", "b.cu", "--no-timing"],
        ] {
            assert!(plan_of(args).unwrap().counters().is_none(), "{args:?}");
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
        assert_eq!(plan.seed(), 9);
        assert_eq!(plan.case_timeout(), Duration::from_millis(500));
        let config = plan.timing().expect("timed").config;
        assert_eq!((config.repetitions, config.cold_l2), (30, false));
        let seed = std::num::NonZeroU64::new(43);
        assert_eq!(config.draw_seed, seed, "a report's hex seed replays");
        assert_eq!(
            plan_of(&["check", "k.cu", "--draw-seed", "43"])
                .expect("plan")
                .timing()
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
            assert!(plan_of(args).unwrap().timing().is_none(), "{args:?}");
        }
        assert_eq!(plan_of(&["k.cu", "--seed", "4"]).unwrap().seed(), 4);
    }

    #[test]
    fn the_plan_carries_the_gates_and_the_sanitizer_pass_each_command_asks_for() {
        // A check and a comparison say a broken gates file and go on
        // ungated; a gradebook needs its gates; the TUI shows no verdict
        // but stops its timing by them, so it reads them as a check does.
        assert_eq!(
            options_of(&["check", "k.cu"]).gates,
            GateUse::Lenient("flashprof")
        );
        assert_eq!(
            options_of(&["compare", "a.cu", "b.cu"]).gates,
            GateUse::Lenient("flashprof compare")
        );
        let grade = ["grade", "class", "--out", "o"];
        assert_eq!(options_of(&grade).gates, GateUse::Required);
        assert_eq!(options_of(&["k.cu"]).gates, GateUse::Lenient("flashprof"));
        // Each stops its timing once the interval clears the gate, but a
        // comparison, whose ratio of two kernels needs both intervals narrow.
        let compare = ["compare", "a.cu", "b.cu"];
        for (args, rule) in [
            (&["check", "k.cu"][..], StoppingRule::DEFAULT),
            (&["k.cu"], StoppingRule::DEFAULT),
            (&grade, StoppingRule::DEFAULT),
            (&compare, StoppingRule::NARROW),
        ] {
            let stopping = options_of(args).timing.map(|timing| timing.stopping);
            assert_eq!(stopping, Some(rule), "{args:?}");
        }
        // The gates a plan is given are the ones it judges by.
        let table = GateTable::parse(
            "[[gpu]]\nlab = \"flash-prefill\"\nname = \"NVIDIA H100 80GB HBM3\"\nthreshold = 9.0\n",
            "test gates",
        )
        .expect("a gates table");
        let gated = RunOptions {
            gates: GateUse::These(table.clone()),
            ..options_of(&["check", "k.cu"])
        };
        assert_eq!(
            gated.plan(FLASH_PREFILL).expect("plan").gates(),
            Some(&table)
        );
        assert!(plan_of(&["k.cu"]).expect("plan").gates().is_none());

        assert!(options_of(&["check", "k.cu", "--sanitize"]).sanitize);
        assert!(options_of(&[&grade[..], &["--sanitize"]].concat()).sanitize);
        assert!(!options_of(&["check", "k.cu"]).sanitize);
        assert!(!plan_of(&["check", "k.cu"]).expect("plan").sanitizes());
    }

    #[test]
    fn cases_parsed_by_another_lab_are_refused() {
        let paged = crate::lab::paged_prefill::PAGED_PREFILL;
        let theirs = paged
            .parse_cases(paged.embedded_cases(), "embedded", Path::new("."))
            .expect("the paged lab's cases");
        let options = RunOptions {
            cases: CaseChoice::These(theirs),
            ..RunOptions::default()
        };
        let refused = options.plan(FLASH_PREFILL).expect_err("refused");
        assert_eq!(refused.code, ExitCode::Usage);
        assert!(
            refused
                .message
                .contains("the paged-prefill lab's, not the flash-prefill lab's"),
            "{}",
            refused.message
        );
        let own = RunOptions {
            cases: CaseChoice::These(embedded_cases()),
            ..RunOptions::default()
        };
        let plan = own.plan(FLASH_PREFILL).expect("the lab's own cases");
        assert_eq!(plan.cases().len(), embedded_cases().len());
    }

    #[test]
    fn metrics_or_a_counters_case_ask_for_counters() {
        let plan = plan_of(&["check", "k.cu", "--metrics", "a,b"]).expect("plan");
        assert_eq!(
            plan.counters().expect("counters").custom_metrics,
            ["a", "b"]
        );
        let first = embedded_cases()[0].name.clone();
        let plan = plan_of(&["check", "k.cu", "--counters-case", &first]).expect("plan");
        assert_eq!(plan.counters().expect("counters").case.name, first);
        let plan = plan_of(&["check", "k.cu", "--case", &first]).expect("plan");
        assert_eq!(plan.cases().len(), 1);
        assert_eq!(plan.cases()[0].name, first);
        let plan = plan_of(&["check", "k.cu", "--metrics", "a", "--no-counters"]).expect("plan");
        assert!(plan.counters().is_none());
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
        // A high-blocks case cannot be profiled: its cache has no fresh copies.
        let placed = options_of(&["check", "k.cu", "--counters-case", "high-blocks-past-2-31"])
            .plan(crate::lab::paged_prefill::PAGED_PREFILL)
            .expect_err("refused");
        assert_eq!(placed.code, ExitCode::Usage);
        assert!(
            placed.message.contains("places its cache past 2^31"),
            "{}",
            placed.message
        );
        // --case narrows the cases --counters-case may name.
        let cases = embedded_cases();
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
