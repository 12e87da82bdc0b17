//! The options every command's checks take, turned into a [`CheckPlan`]:
//! the lab's cases loaded and chosen, its timing shape, the sanitizer
//! found, the speed gates read, and every default in this file. The front
//! ends (`cli`) only translate their flags into [`RunOptions`]; a plan is
//! built nowhere else. A plan is a template until
//! [`CheckPlan::of_source`] gives it a file.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{CheckPlan, CountersPlan, LinesPlan, TimingPlan};
use crate::app::gate::GateTable;
use crate::gpu::compile::QuickBuild;
use crate::lab::args::ArgValue;
use crate::lab::definition::{LabCase, LabRef};
use crate::outcome::ExitCode;
use crate::protocol::TimingConfig;

/// Why options cannot make a plan for a lab, with the exit code the
/// command stops with.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct PlanError {
    pub code: ExitCode,
    pub message: String,
}

impl PlanError {
    fn new(code: ExitCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

/// The default watchdog for one case (two launches and the checks), in seconds.
pub const CASE_TIMEOUT_S: f64 = 5.0;
/// How long the timing step, and each tier of counters, may take before it
/// counts as hung.
pub const STEP_TIMEOUT: Duration = Duration::from_secs(120);

/// A seed that differs on every run: fresh inputs each time unless `--seed` is given.
fn fresh_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    (nanos ^ (std::process::id() as u64).rotate_left(32)) % 1_000_000_000_000
}

/// Which of the lab's cases a check runs.
#[derive(Debug, Clone)]
pub enum CaseChoice {
    Every,
    /// Only the case of this name (`check --case NAME`).
    Only(String),
    /// None: the check only times the kernel (`calibrate`).
    TimingOnly,
    /// These, already parsed by their lab (the tests' stand-in cases).
    These(Vec<LabCase>),
}

/// How a command's checks are judged by the speed gates, whose threshold
/// also ends a timing once the speedup's interval is clear of it.
#[derive(Debug, Clone, PartialEq)]
pub enum GateUse {
    /// Not at all (`bench`, `calibrate`: a calibration's interval must
    /// settle, whatever the gate it replaces).
    Off,
    /// By the gates in effect; a broken gates file is said (after the
    /// command's name) and leaves the reports ungated.
    Lenient(&'static str),
    /// By the gates in effect; a broken gates file refuses the command
    /// (`grade`: a gradebook judged by no gate is no gradebook).
    Required,
    /// By this table, which the caller already holds (the tests' gates).
    These(GateTable),
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
    /// A compute-sanitizer pass after each check (`--sanitize`).
    pub sanitize: bool,
    pub gates: GateUse,
    /// How long the timing step, each tier of counters and the line
    /// profile may take before they count as hung.
    pub step_timeout: Duration,
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
            sanitize: false,
            gates: GateUse::Off,
            step_timeout: STEP_TIMEOUT,
        }
    }
}

impl RunOptions {
    /// The plan for `lab` with no file yet, or why these options cannot run on it.
    pub fn plan(&self, lab: LabRef) -> Result<CheckPlan, PlanError> {
        // What the machine lacks stops a command before what its words ask
        // for is looked at, in the order the commands always said it.
        let gates = speed_gates(&self.gates)?;
        let sanitizer = sanitizer(self.sanitize)?;
        let mut cases = match &self.cases {
            CaseChoice::TimingOnly => Vec::new(),
            CaseChoice::These(cases) => own_cases(lab, cases)?,
            _ => load_cases(lab, self.cases_file.as_deref())
                .map_err(|e| PlanError::new(ExitCode::Environment, e))?,
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
            timeout: self.step_timeout,
            custom_metrics: self.counters.metrics.clone(),
        });
        let lines = self.lines.then(|| LinesPlan {
            case: timing_case.clone(),
            timeout: self.step_timeout,
        });
        Ok(CheckPlan {
            lab,
            source_path: String::new(),
            source_text: String::new(),
            cases,
            cases_file: self.cases_file.clone(),
            seed: self.seed.unwrap_or_else(fresh_seed),
            case_timeout: self.case_timeout,
            timing: self.timing.map(|config| TimingPlan {
                case: timing_case,
                config,
                timeout: self.step_timeout,
            }),
            counters,
            lines,
            quick_build: self.quick_build,
            sanitizer,
            gates,
        })
    }
}

/// The compute-sanitizer a `--sanitize` run uses, found before any check
/// runs so that a missing one stops the command at once.
fn sanitizer(asked: bool) -> Result<Option<PathBuf>, PlanError> {
    asked
        .then(crate::app::sanitize::locate)
        .transpose()
        .map_err(|message| PlanError::new(ExitCode::Environment, format!("--sanitize: {message}")))
}

/// The speed gates in effect as `gates` asks for them.
fn speed_gates(gates: &GateUse) -> Result<Option<GateTable>, PlanError> {
    match gates {
        GateUse::Off => Ok(None),
        GateUse::Lenient(who) => Ok(GateTable::effective()
            .map_err(|e| eprintln!("{who}: no speed gate: {e}"))
            .ok()),
        GateUse::Required => GateTable::effective()
            .map(Some)
            .map_err(|e| PlanError::new(ExitCode::Environment, e.to_string())),
        GateUse::These(table) => Ok(Some(table.clone())),
    }
}

/// Cases parsed elsewhere, each of which must be `lab`'s.
fn own_cases(lab: LabRef, cases: &[LabCase]) -> Result<Vec<LabCase>, PlanError> {
    match cases.iter().find(|case| case.lab != lab.name()) {
        Some(stray) => Err(PlanError::new(
            ExitCode::Usage,
            format!(
                "case `{}` is the {} lab's, not the {} lab's",
                stray.name,
                stray.lab,
                lab.name()
            ),
        )),
        None => Ok(cases.to_vec()),
    }
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
fn named<'a>(cases: &'a [LabCase], name: &str) -> Result<&'a LabCase, PlanError> {
    cases.iter().find(|c| c.name == name).ok_or_else(|| {
        let names: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
        PlanError::new(
            ExitCode::Usage,
            format!("no case named `{name}` (cases: {})", names.join(", ")),
        )
    })
}

/// The case `--counters-case NAME` profiles: one whose inputs are generated.
fn counters_case(lab: LabRef, cases: &[LabCase], name: &str) -> Result<LabCase, PlanError> {
    let case = named(cases, name)?;
    if lab.own_tensors(case).is_some() {
        return Err(PlanError::new(
            ExitCode::Usage,
            format!(
                "case `{name}` brings its own tensors; pick a generated case for --counters-case"
            ),
        ));
    }
    // Profiled launches get fresh inputs, which a placed cache has none of.
    let placed = lab
        .generate(case, 0)
        .is_ok_and(|data| lab.args(&data).iter().any(ArgValue::is_placed));
    if placed {
        return Err(PlanError::new(
            ExitCode::Usage,
            format!(
                "case `{name}` places its cache past 2^31 elements, which timed and profiled \
                 launches cannot take; pick another case for --counters-case"
            ),
        ));
    }
    Ok(case.clone())
}

/// The lab's timing shape as a case, with `--timing-shape KEY=VALUE` overrides.
fn timing_shape_case(lab: LabRef, overrides: &[String]) -> Result<LabCase, PlanError> {
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
        .map_err(|e| PlanError::new(ExitCode::Usage, format!("--timing-shape: {e}")))
}
