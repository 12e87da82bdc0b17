//! What one check is asked to do, as the front ends' validated options
//! (`cli::plan`) made it.

use std::path::PathBuf;
use std::time::Duration;

use super::LinesPlan;
use crate::app::sanitize::{SanitizePlan, SanitizerTool, StudentFile};
use crate::gpu::compile::QuickBuild;
use crate::lab::definition::{LabCase, LabRef};
use crate::protocol::TimingConfig;

/// How long each compute-sanitizer tool may run over one case.
const SANITIZER_TOOL_TIMEOUT: Duration = Duration::from_secs(300);

/// Everything one check needs to know.
#[derive(Debug, Clone)]
pub struct CheckPlan {
    pub lab: LabRef,
    pub source_path: String,
    pub source_text: String,
    pub cases: Vec<LabCase>,
    pub seed: u64,
    /// Watchdog for one case (two launches and the checks).
    pub case_timeout: Duration,
    pub timing: Option<TimingPlan>,
    /// Collect hardware counters (quick tier, then full) after the timing.
    pub counters: Option<CountersPlan>,
    /// Profile the kernel line by line, last, in a worker of its own.
    pub lines: Option<LinesPlan>,
    /// Show verdicts from this quick build while the optimized build
    /// compiles beside it, then rerun the cases on the optimized one, whose
    /// verdicts count (docs/PERFORMANCE.md). `None`: one optimized build.
    pub quick_build: Option<QuickBuild>,
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

    /// The compute-sanitizer pass over this plan's text on its first case
    /// (docs/SANITIZER.md): every tool, `exe` re-entered as `check`, the
    /// lab's embedded cases and no extra environment; `None` without a case.
    pub fn sanitize_pass(&self, sanitizer: PathBuf, exe: PathBuf) -> Option<SanitizePlan> {
        let case = self.cases.first()?;
        Some(SanitizePlan {
            sanitizer,
            exe,
            text: self.source_text.clone(),
            lab: self.lab.name().to_owned(),
            case: case.name.clone(),
            cases_file: None,
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
