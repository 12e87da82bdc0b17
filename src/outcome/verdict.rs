//! The verdict on one submission, and the process exit code it maps to.

use serde::{Deserialize, Serialize};

use super::CheckReport;
use crate::protocol::{CaseStatus, CompileProblemKind};

/// Documented process exit codes (docs/CLI.md, "Exit codes").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ExitCode {
    /// Every case passed (and the timed output was correct).
    Pass = 0,
    /// The kernel compiled and ran, and at least one case failed.
    CasesFailed = 1,
    /// Bad command-line usage (clap's own code), or an unknown lab.
    Usage = 2,
    /// The student file cannot be used: missing, empty, binary, not UTF-8, too large,
    /// wrong signature, a refused include, or written for another lab.
    BadSource = 3,
    /// NVRTC rejected the kernel.
    CompileError = 4,
    /// No GPU or no driver: the file compiled, nothing was graded.
    NoGpu = 5,
    /// The environment failed: NVRTC missing, worker could not start, bad cases file, timing could not run.
    Environment = 6,
    /// The oracle failed its golden proof: flashprof refuses to grade.
    OracleUnproven = 7,
    /// `grade` found nothing to grade: no class folder or named file given
    /// exists, or a folder without one `*.cu` submission (a typo, or a glob
    /// that matched nothing, must not pass as an empty gradebook).
    NothingToGrade = 8,
}

/// What became of one submission. The words are the gradebook's statuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Every case passed and the timed output was correct.
    Passed,
    /// It ran, and something failed, hung or crashed.
    Failed,
    /// Compiled without a GPU (compile-only, or no GPU found).
    Compiled,
    CompileError,
    /// The file cannot be used as a kernel source at all.
    Rejected,
    /// The grader's own environment failed (NVRTC missing, worker did not
    /// start, timing could not run): not the student's doing, so a rerun retries it.
    Error,
    /// A file named to `grade` that is not there: its row says so, and the
    /// rest of the class is graded.
    Missing,
}

impl Verdict {
    /// Every verdict, in the order a summary lists them.
    pub const ALL: [Self; 7] = [
        Self::Passed,
        Self::Failed,
        Self::Compiled,
        Self::CompileError,
        Self::Rejected,
        Self::Error,
        Self::Missing,
    ];

    /// Classifies a finished check.
    pub fn of(report: &CheckReport) -> Self {
        if let Some(problem) = &report.compile.problem {
            return match problem.kind {
                CompileProblemKind::BadSource => Self::Rejected,
                // The student's compile bomb, not the grader's failure.
                CompileProblemKind::OverLimit => Self::CompileError,
                CompileProblemKind::CompilerMissing
                | CompileProblemKind::HeadersMissing
                | CompileProblemKind::CompilerFailed => Self::Error,
            };
        }
        if !report.compile.ok {
            Self::CompileError
        } else if report.gpu.is_err() || report.cases.iter().all(|c| c.status == CaseStatus::NotRun)
        {
            Self::Compiled
        } else if report.cases.iter().any(|c| c.status == CaseStatus::NotRun) {
            // Some cases ran and some did not (a remote worker's link failed): incomplete.
            Self::Error
        } else if report.all_passed() {
            Self::Passed
        } else if report.cases.iter().all(|c| c.status == CaseStatus::Pass)
            && (report.timing_error.is_some()
                || report
                    .sanitizer
                    .as_ref()
                    .is_some_and(|s| s.incomplete() && !s.has_hazards()))
        {
            Self::Error
        } else {
            Self::Failed
        }
    }

    /// The word in gradebooks and JSON.
    pub fn word(self) -> &'static str {
        match self {
            Self::Passed => "passed",
            Self::Failed => "failed",
            Self::Compiled => "compiled",
            Self::CompileError => "compile_error",
            Self::Rejected => "rejected",
            Self::Error => "error",
            Self::Missing => "missing",
        }
    }

    /// The exit code of a command whose outcome this is.
    pub fn exit_code(self) -> ExitCode {
        match self {
            Self::Passed => ExitCode::Pass,
            Self::Failed => ExitCode::CasesFailed,
            Self::Compiled => ExitCode::NoGpu,
            Self::CompileError => ExitCode::CompileError,
            Self::Rejected => ExitCode::BadSource,
            Self::Error => ExitCode::Environment,
            Self::Missing => ExitCode::NothingToGrade,
        }
    }
}
