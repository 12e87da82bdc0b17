//! What a check found, as plain data: the report, the progress events that
//! build it, and the one [`Verdict`] that check, grade and compare all give.
//!
//! The engine (`app`) produces these and the views (`report`, `tui`, `cli`)
//! show them; keeping them apart from both is what lets each side change
//! without the other, and gives every command the same verdict rule.

pub mod builds;
mod integrity;
pub mod sanitizer;
mod verdict;

pub use integrity::IntegrityBadges;
pub use verdict::{ExitCode, Verdict};

use serde::{Deserialize, Serialize};

use crate::facts::device::{DeviceInfo, GpuProblem};
use crate::lab::definition::{CaseState, CaseSummary, Lab};
use crate::protocol::{
    CaseOutcome, CaseStatus, CompileOutcome, CounterTier, CountersOutcome,
    CountersUnavailableReport, TimingOutcome,
};

/// Progress of a check, in the order things happen.
#[derive(Debug, Clone)]
pub enum Progress {
    WorkerStarted {
        gpu: Result<DeviceInfo, GpuProblem>,
        start_ms: f64,
        /// Where a remote worker runs (`user@node`, `gpu17, job 4242`); None here.
        place: Option<String>,
    },
    /// The quick build, made for verdicts before the optimizer finishes.
    QuickBuilt(CompileOutcome),
    /// A case's verdict on the quick build: shown until the optimized build's.
    ProvisionalCase {
        index: usize,
        outcome: CaseOutcome,
    },
    /// The build whose verdicts count (the only build without a quick one).
    Compiled(CompileOutcome),
    CaseStarted {
        index: usize,
    },
    CaseFinished {
        index: usize,
        outcome: CaseOutcome,
    },
    WorkerRestarted {
        reason: String,
    },
    /// What the link to a remote worker added to the compile's round trip:
    /// the wait seen here less the time the worker says it spent
    /// (docs/REMOTE.md). `transport` is `ssh` or `srun`.
    LinkMeasured {
        transport: &'static str,
        added_ms: f64,
    },
    TimingStarted,
    TimingFinished(Result<TimingOutcome, String>),
    CountersStarted {
        tier: CounterTier,
    },
    CountersFinished(CountersResult),
    /// The line profile started (after the timing and the counters).
    LinesStarted,
    /// The line profile's samples, charged to lines, while its counts are
    /// still being taken (`counts_missing` says so): where the time goes,
    /// shown before the memory findings.
    LinesSampled(Box<crate::grade::lines::LineProfile>),
}

/// How the link to a remote worker failed (docs/REMOTE.md), as the screens
/// need it: what asks again is a new connection, or a new Slurm allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkLoss {
    /// ssh could not connect, or the connection dropped.
    Connection,
    /// The Slurm allocation the worker ran in is over, or none was granted.
    Allocation,
}

/// Cases a check left unrun because the link to its remote worker failed:
/// how it failed, and the first such case's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkLost {
    pub loss: LinkLoss,
    pub message: String,
}

/// Why a check stopped before it had a report, and whether a failed link
/// to a remote worker was the cause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckStopped {
    pub message: String,
    pub link: Option<LinkLoss>,
}

impl CheckStopped {
    /// A stop that is no link's fault.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            link: None,
        }
    }
}

impl std::fmt::Display for CheckStopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// One tier of counters, or why there are none.
pub type CountersResult = Result<CountersOutcome, CountersUnavailableReport>;

/// Wall time of each phase, measured by the caller (what a user waits for).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseTimes {
    pub worker_start_ms: f64,
    pub compile_ms: f64,
    pub cases_ms: f64,
    pub timing_ms: f64,
    pub counters_ms: f64,
    /// The line profile, the starter's included when it was taken (0 in
    /// reports written before it was measured).
    #[serde(default)]
    pub lines_ms: f64,
    pub total_ms: f64,
}

/// The full result of a check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckReport {
    /// The lab the file was graded against (records written before labs
    /// were named read as the first lab's).
    #[serde(default = "first_lab")]
    pub lab: String,
    pub source_path: String,
    pub seed: u64,
    pub gpu: Result<DeviceInfo, GpuProblem>,
    pub compile: CompileOutcome,
    pub cases: Vec<CaseOutcome>,
    pub timing: Option<TimingOutcome>,
    pub timing_error: Option<String>,
    /// Quick tier first, then full; empty when counters were not asked for.
    pub counters: Vec<CountersResult>,
    /// The line profile (`check --lines`), or why there is none; absent
    /// when it was not asked for, and in reports written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lines: Option<Result<crate::grade::lines::LineProfile, String>>,
    pub worker_restarts: usize,
    pub phases: PhaseTimes,
    /// The compute-sanitizer pass (`--sanitize`), when one ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sanitizer: Option<sanitizer::SanitizerOutcome>,
    /// One line for the whole check, read by the lab from the pattern
    /// across its cases ([`crate::lab::definition::Lab::verdict`]); absent
    /// when no case ran, and in reports written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnosis: Option<String>,
    /// The quick build whose verdicts came first, when the check made one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quick_build: Option<builds::QuickBuildReport>,
    /// Set when cases were not run because the link to a remote worker
    /// failed; the cases' own words say so in every output, so this is
    /// never stored and `--json` is unchanged.
    #[serde(skip)]
    pub link_lost: Option<LinkLost>,
}

/// Settles each failing case that several causes reproduce alike by what
/// the check's other failing cases name: when exactly one of its candidates
/// is named by another case, that is its cause, and its line says why. A
/// case alone cannot tell such causes apart; the check's cases can.
pub fn settle_candidates(cases: &mut [CaseOutcome]) {
    let named: Vec<String> = cases
        .iter()
        .filter(|case| case.status == CaseStatus::Fail)
        .filter_map(|case| case.cause.clone())
        .collect();
    let unsettled = cases
        .iter_mut()
        .filter(|case| case.cause.is_none() && !case.candidates.is_empty());
    for case in unsettled {
        let seen: Vec<&String> = case
            .candidates
            .iter()
            .filter(|candidate| named.contains(candidate))
            .collect();
        if let [only] = seen.as_slice() {
            let count = named.iter().filter(|name| name == only).count();
            let only = (*only).clone();
            case.diagnosis.push_str(&format!(
                " (the other cases settle it: {count} failing case{} name{} {only}, none the others)",
                if count == 1 { "" } else { "s" },
                if count == 1 { "s" } else { "" }
            ));
            case.cause = Some(only);
        }
    }
}

/// The lab's one line for a check with these cases.
pub fn check_diagnosis(lab: &dyn Lab, cases: &[CaseOutcome]) -> Option<String> {
    let summaries: Vec<CaseSummary<'_>> = cases
        .iter()
        .map(|case| CaseSummary {
            name: &case.name,
            state: match case.status {
                CaseStatus::Pass => CaseState::Pass,
                CaseStatus::Fail => CaseState::Fail,
                CaseStatus::Timeout => CaseState::Timeout,
                CaseStatus::Crash => CaseState::Crash,
                CaseStatus::NotRun => CaseState::NotRun,
            },
            comparison: case.comparison.as_ref(),
            integrity: case.integrity.as_ref(),
            diagnosis: &case.diagnosis,
            cause: case.cause.as_deref(),
        })
        .collect();
    lab.verdict(&summaries)
}

fn first_lab() -> String {
    "flash-prefill".into()
}

impl CheckReport {
    /// How many cases passed.
    pub fn cases_passed(&self) -> usize {
        self.cases
            .iter()
            .filter(|c| c.status == CaseStatus::Pass)
            .count()
    }

    /// The check's one line: the stored one, else (a report written before
    /// it was stored) the lab's reading of the cases, else the first
    /// failing case's diagnosis.
    pub fn diagnosis_line(&self) -> Option<String> {
        if let Some(line) = &self.diagnosis {
            return Some(line.clone());
        }
        if let Some(lab) = crate::lab::registry::find(&self.lab) {
            return check_diagnosis(lab, &self.cases);
        }
        self.cases
            .iter()
            .find(|c| !matches!(c.status, CaseStatus::Pass | CaseStatus::NotRun))
            .map(|c| format!("{}: {}", c.name, c.diagnosis))
    }

    /// Every case ran and passed, the timed output (when timed) was correct,
    /// and the sanitizer pass (when asked for) finished and found nothing.
    pub fn all_passed(&self) -> bool {
        self.compile.ok
            && !self.cases.is_empty()
            && self.cases.iter().all(|c| c.status == CaseStatus::Pass)
            && self.timing_error.is_none()
            && self.timing.as_ref().is_none_or(|t| t.speedup.is_some())
            && self.sanitizer.as_ref().is_none_or(|s| s.clean())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::definition::Problem;

    fn case(
        name: &str,
        status: CaseStatus,
        cause: Option<&str>,
        candidates: &[&str],
    ) -> CaseOutcome {
        CaseOutcome {
            cause: cause.map(str::to_owned),
            candidates: candidates.iter().map(|c| c.to_string()).collect(),
            ..CaseOutcome::unmeasured(name, "", Problem::unknown(), status, format!("{name} says"))
        }
    }

    #[test]
    fn a_case_two_causes_reproduce_takes_the_one_the_other_cases_name() {
        let mut cases = [
            case("a", CaseStatus::Fail, Some("tile-edge"), &[]),
            case("b", CaseStatus::Fail, Some("tile-edge"), &[]),
            case(
                "c",
                CaseStatus::Fail,
                None,
                &["causal-off-by-one", "tile-edge"],
            ),
            case("d", CaseStatus::Pass, None, &[]),
        ];
        settle_candidates(&mut cases);
        assert_eq!(cases[2].cause.as_deref(), Some("tile-edge"));
        assert_eq!(
            cases[2].diagnosis,
            "c says (the other cases settle it: 2 failing cases name tile-edge, none the others)"
        );
    }

    #[test]
    fn a_case_stays_unsettled_when_the_other_cases_name_none_or_several_of_its_causes() {
        let mut none_named = [
            case("a", CaseStatus::Fail, Some("race"), &[]),
            case(
                "c",
                CaseStatus::Fail,
                None,
                &["causal-off-by-one", "tile-edge"],
            ),
        ];
        settle_candidates(&mut none_named);
        assert_eq!(none_named[1].cause, None);
        assert_eq!(none_named[1].diagnosis, "c says");
        let mut both_named = [
            case("a", CaseStatus::Fail, Some("tile-edge"), &[]),
            case("b", CaseStatus::Fail, Some("causal-off-by-one"), &[]),
            case(
                "c",
                CaseStatus::Fail,
                None,
                &["causal-off-by-one", "tile-edge"],
            ),
        ];
        settle_candidates(&mut both_named);
        assert_eq!(both_named[2].cause, None);
    }
}
