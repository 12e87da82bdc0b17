//! What one check is asked to do, as validated options made it.
//!
//! The fields are private to the check: a plan comes only from
//! [`RunOptions::plan`](super::RunOptions::plan), and a front end changes it only through the few
//! derivations below (another file, another seed, the sanitizer found when
//! the TUI is asked for a pass). Everything a front end needs after the
//! check, the sanitizer pass and the speed gate, is asked of the plan.

use std::path::PathBuf;
use std::time::Duration;

use super::LinesPlan;
use crate::app::gate::{GateTable, SpeedGate};
use crate::app::sanitize::{SanitizePlan, SanitizerTool, StudentFile};
use crate::facts::device::DeviceInfo;
use crate::gpu::compile::QuickBuild;
use crate::lab::definition::{LabCase, LabRef};
use crate::outcome::CheckReport;
use crate::protocol::{InputsAhead, TimingConfig};

/// How long each compute-sanitizer tool may run over one case.
const SANITIZER_TOOL_TIMEOUT: Duration = Duration::from_secs(300);

/// Everything one check needs to know.
#[derive(Debug, Clone)]
pub struct CheckPlan {
    pub(super) lab: LabRef,
    pub(super) source_path: String,
    pub(super) source_text: String,
    pub(super) cases: Vec<LabCase>,
    /// The cases file the cases came from (`None`: the lab's embedded set).
    pub(super) cases_file: Option<PathBuf>,
    pub(super) seed: u64,
    /// Watchdog for one case (two launches and the checks).
    pub(super) case_timeout: Duration,
    pub(super) timing: Option<TimingPlan>,
    /// Collect hardware counters (quick tier, then full) after the timing.
    pub(super) counters: Option<CountersPlan>,
    /// Profile the kernel line by line, last, in a worker of its own.
    pub(super) lines: Option<LinesPlan>,
    /// Show verdicts from this quick build while the optimized build
    /// compiles beside it, then rerun the cases on the optimized one, whose
    /// verdicts count (docs/PERFORMANCE.md). `None`: one optimized build.
    pub(super) quick_build: Option<QuickBuild>,
    /// compute-sanitizer, found before any check ran, when a pass is asked.
    pub(super) sanitizer: Option<PathBuf>,
    /// The speed gates the reports are judged by; `None`: ungated.
    pub(super) gates: Option<GateTable>,
}

#[derive(Debug, Clone)]
pub struct CountersPlan {
    /// The case whose inputs are profiled (the timing shape, or a named case).
    pub case: LabCase,
    pub timeout: Duration,
    /// When not empty, one custom tier with these metrics replaces quick and full.
    pub custom_metrics: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct TimingPlan {
    /// The lab's timing shape, as a case.
    pub case: LabCase,
    pub config: TimingConfig,
    pub timeout: Duration,
}

impl CheckPlan {
    /// This plan for another file: the same lab, cases, seed and steps.
    pub fn of_source(&self, source_path: String, source_text: String) -> Self {
        Self {
            source_path,
            source_text,
            ..self.clone()
        }
    }

    /// This plan for a front end's run number `run` (a save, a bench
    /// round): inputs of its own, drawn from the plan's seed plus `run`.
    pub fn for_run(&self, run: u64) -> Self {
        Self {
            seed: self.seed.wrapping_add(run),
            ..self.clone()
        }
    }

    /// This plan with a sanitizer pass, by the compute-sanitizer found at
    /// `sanitizer` (the TUI looks for one only when a pass is asked).
    pub fn with_sanitizer(&self, sanitizer: PathBuf) -> Self {
        Self {
            sanitizer: Some(sanitizer),
            ..self.clone()
        }
    }

    pub fn lab(&self) -> LabRef {
        self.lab
    }

    pub fn source_path(&self) -> &str {
        &self.source_path
    }

    pub fn source_text(&self) -> &str {
        &self.source_text
    }

    pub fn cases(&self) -> &[LabCase] {
        &self.cases
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The watchdog for one case.
    pub fn case_timeout(&self) -> Duration {
        self.case_timeout
    }

    pub fn timing(&self) -> Option<&TimingPlan> {
        self.timing.as_ref()
    }

    pub fn counters(&self) -> Option<&CountersPlan> {
        self.counters.as_ref()
    }

    /// The quick build whose verdicts show first, if any.
    pub fn quick_build(&self) -> Option<QuickBuild> {
        self.quick_build
    }

    pub fn lines(&self) -> Option<&LinesPlan> {
        self.lines.as_ref()
    }

    /// Whether a sanitizer pass follows each check (`--sanitize`).
    pub fn sanitizes(&self) -> bool {
        self.sanitizer.is_some()
    }

    /// The speed gates the reports are judged by; `None`: ungated.
    pub fn gates(&self) -> Option<&GateTable> {
        self.gates.as_ref()
    }

    /// The shape the worker measures first and the seed of its inputs: the
    /// timing's, else the counters' (the line profile runs in a worker of
    /// its own).
    pub fn measured_shape(&self) -> Option<InputsAhead> {
        let case = match (&self.timing, &self.counters) {
            (Some(timing), _) => &timing.case,
            (None, Some(counters)) => &counters.case,
            (None, None) => return None,
        };
        Some(InputsAhead {
            case: case.into(),
            seed: self.seed,
        })
    }

    /// The threshold of the gate that judges this plan's lab on `gpu`, if
    /// one does: the timing's stopping rule may stop once it is decided.
    pub fn gate_threshold(&self, gpu: Option<&DeviceInfo>) -> Option<f64> {
        let gate = self.gates.as_ref()?.lookup(self.lab.name(), &gpu?.name)?;
        Some(gate.threshold)
    }

    /// The speed gate's verdict on `report`, for a report that ran on a GPU
    /// under a plan with gates.
    pub fn gate(&self, report: &CheckReport) -> Option<SpeedGate> {
        report.gpu.as_ref().ok()?;
        Some(SpeedGate::evaluate(report, self.gates.as_ref()?))
    }

    /// The compute-sanitizer pass over this plan's text on its first case
    /// (docs/SANITIZER.md): every tool, `exe` re-entered as `check` on
    /// the plan's cases file and no extra environment; `None` when no pass
    /// was asked or there is no case.
    pub fn sanitize_pass(&self, exe: PathBuf) -> Option<SanitizePlan> {
        let case = self.cases.first()?;
        Some(SanitizePlan {
            sanitizer: self.sanitizer.clone()?,
            exe,
            text: self.source_text.clone(),
            lab: self.lab.name().to_owned(),
            case: case.name.clone(),
            cases_file: self.cases_file.clone(),
            seed: self.seed,
            tools: SanitizerTool::ALL.to_vec(),
            timeout: SANITIZER_TOOL_TIMEOUT,
            student: StudentFile::new(
                &self.source_path,
                &self.source_text,
                self.lab.abi().entry_point,
            ),
            env: Vec::new(),
        })
    }
}
