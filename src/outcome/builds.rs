//! Verdicts from two builds of one file: the quick build that answers in
//! milliseconds and the optimized build whose verdict counts.
//!
//! Both builds mean the same program, so a well-defined kernel gets the same
//! verdicts from each; small rounding differences aside (contracted FMAs,
//! another summation order). Where one build shows a symptom the other does
//! not (NaN, output never written, two launches that disagree bit for bit,
//! a write outside `out`, a crash or a hang) the kernel's behaviour depends
//! on how it was compiled: undefined behaviour, a race, or a read of memory
//! nobody initialised. That difference is a finding in its own right.

use serde::{Deserialize, Serialize};

use crate::gpu::compile::QuickBuild;
use crate::protocol::{CaseOutcome, CaseStatus};

/// What the quick build of a check did, kept in its report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuickBuildReport {
    pub build: QuickBuild,
    /// NVRTC time of the quick build.
    pub compile_ms: f64,
    /// From the start of the check to the first provisional verdict, and to
    /// the last (the quick build runs the cheapest cases first and stops
    /// when the optimized build is ready); `None` when it ran no case.
    pub first_verdict_ms: Option<f64>,
    pub last_verdict_ms: Option<f64>,
    /// Cases the quick build passed, of those it ran.
    pub passed: usize,
    pub ran: usize,
    /// Cases whose verdict or symptoms differ between the two builds.
    pub differences: Vec<BuildDifference>,
    /// Why the builder beside the worker gave no optimized build, when it
    /// did not (the worker then made it, after the quick pass).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub builder_problem: Option<String>,
}

/// One case on which the two builds disagree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BuildDifference {
    pub case: String,
    pub quick: CaseStatus,
    pub optimized: CaseStatus,
    /// Set when the builds differ in a symptom, not only in rounding: what
    /// it is, which build shows it, and what it points at.
    pub finding: Option<String>,
}

/// A symptom that no amount of rounding explains.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Symptom {
    Nan,
    Unwritten,
    RunsDiffer,
    WritesOutside,
    Crash,
    Hang,
}

impl Symptom {
    const ALL: [Symptom; 6] = [
        Symptom::Nan,
        Symptom::Unwritten,
        Symptom::RunsDiffer,
        Symptom::WritesOutside,
        Symptom::Crash,
        Symptom::Hang,
    ];

    fn shown_by(self, case: &CaseOutcome) -> bool {
        let comparison = case.comparison.as_ref();
        let integrity = case.integrity.as_ref();
        match self {
            Self::Nan => comparison.is_some_and(|c| c.nan + c.inf > 0),
            Self::Unwritten => comparison.is_some_and(|c| c.unwritten > 0),
            Self::RunsDiffer => integrity.is_some_and(|i| i.runs_differ),
            Self::WritesOutside => integrity.is_some_and(|i| i.out_of_bounds_writes > 0),
            Self::Crash => case.status == CaseStatus::Crash,
            Self::Hang => case.status == CaseStatus::Timeout,
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Self::Nan => "NaN or Inf in the output",
            Self::Unwritten => "output elements never written",
            Self::RunsDiffer => "two launches that disagree bit for bit",
            Self::WritesOutside => "writes outside out",
            Self::Crash => "a crash",
            Self::Hang => "a hang",
        }
    }

    fn suspect(self) -> &'static str {
        match self {
            Self::RunsDiffer => {
                "a race between threads (a missing __syncthreads, or threads writing one place)"
            }
            Self::Unwritten => {
                "a store that depends on undefined behaviour, or on a value nobody initialised"
            }
            _ => "undefined behaviour: a read past an array, a race, or memory nobody initialised",
        }
    }
}

/// The cases on which `quick` and `optimized` (the same cases, in the same
/// order) disagree. Cases that either build did not run are left out.
pub fn differences(quick: &[CaseOutcome], optimized: &[CaseOutcome]) -> Vec<BuildDifference> {
    quick
        .iter()
        .zip(optimized)
        .filter(|(q, o)| q.status != CaseStatus::NotRun && o.status != CaseStatus::NotRun)
        .filter_map(|(q, o)| {
            // Unoptimised code is many times slower, so a quick build that
            // outlives the watchdog where the optimized one does not says
            // nothing about the kernel.
            let slowness = |s: &Symptom| *s == Symptom::Hang && s.shown_by(q);
            let finding = Symptom::ALL
                .into_iter()
                .find(|s| s.shown_by(q) != s.shown_by(o) && !slowness(s))
                .map(|symptom| {
                    let only_in = if symptom.shown_by(o) { "optimized" } else { "quick" };
                    format!(
                        "{} only in the {only_in} build: the result depends on how the kernel was compiled, which points at {}",
                        symptom.describe(),
                        symptom.suspect()
                    )
                });
            (q.status != o.status || finding.is_some()).then(|| BuildDifference {
                case: o.name.clone(),
                quick: q.status,
                optimized: o.status,
                finding,
            })
        })
        .collect()
}

impl BuildDifference {
    /// One line for a table or a footer.
    pub fn describe(&self) -> String {
        match &self.finding {
            Some(finding) => format!("{}: {finding}", self.case),
            None => format!(
                "{}: {} in the quick build, {} in the optimized one ({}, not a finding)",
                self.case,
                status_word(self.quick),
                status_word(self.optimized),
                if self.quick == CaseStatus::Timeout {
                    "the quick build's unoptimised code is slower"
                } else {
                    "rounding near the tolerance"
                }
            ),
        }
    }
}

fn status_word(status: CaseStatus) -> &'static str {
    match status {
        CaseStatus::Pass => "passes",
        CaseStatus::Fail => "fails",
        CaseStatus::Timeout => "hangs",
        CaseStatus::Crash => "crashes",
        CaseStatus::NotRun => "does not run",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grade::compare::{compare, OutputShape, Tolerance};
    use crate::grade::integrity::Integrity;
    use crate::lab::definition::Problem;

    /// A case outcome graded for real: `got` against `expected` under a
    /// tolerance of 1e-3, so the counts come from the comparison itself.
    fn graded(name: &str, got: &[f32], runs_differ: bool) -> CaseOutcome {
        let expected: Vec<f64> = vec![1.0; got.len()];
        let shape = OutputShape {
            rows: 1,
            heads: 1,
            dim: got.len(),
        };
        let tolerance = Tolerance {
            abs: 1e-3,
            rel: 0.0,
        };
        let comparison = compare(shape, tolerance, got, &expected);
        let integrity = Integrity {
            out_of_bounds_writes: 0,
            inputs_modified: Vec::new(),
            runs_differ,
        };
        let status = match comparison.passed && !runs_differ {
            true => CaseStatus::Pass,
            false => CaseStatus::Fail,
        };
        CaseOutcome {
            comparison: Some(comparison),
            integrity: Some(integrity),
            ..CaseOutcome::unmeasured(name, "", Problem::unknown(), status, String::new())
        }
    }

    /// Case `a` as a build that hung on it leaves it: timed out, nothing compared.
    fn hung() -> CaseOutcome {
        CaseOutcome {
            status: CaseStatus::Timeout,
            comparison: None,
            integrity: None,
            ..graded("a", &[1.0, 1.0], false)
        }
    }

    #[test]
    fn builds_that_agree_have_no_differences() {
        let quick = [
            graded("a", &[1.0, 1.0], false),
            graded("b", &[1.0, 2.0], false),
        ];
        let optimized = [
            graded("a", &[1.0, 1.0], false),
            graded("b", &[1.0, 2.0], false),
        ];
        assert!(differences(&quick, &optimized).is_empty());
    }

    #[test]
    fn nan_in_one_build_only_is_a_finding_naming_that_build() {
        let quick = [graded("a", &[1.0, 1.0], false)];
        let optimized = [graded("a", &[1.0, f32::NAN], false)];
        let found = differences(&quick, &optimized);
        assert_eq!(found.len(), 1);
        assert_eq!(
            (found[0].quick, found[0].optimized),
            (CaseStatus::Pass, CaseStatus::Fail)
        );
        let finding = found[0].finding.as_deref().expect("a finding");
        assert!(
            finding.starts_with("NaN or Inf in the output only in the optimized build"),
            "{finding}"
        );
        assert!(finding.contains("undefined behaviour"), "{finding}");
    }

    #[test]
    fn a_race_in_the_quick_build_only_is_named_a_race() {
        let quick = [graded("a", &[1.0, 1.0], true)];
        let optimized = [graded("a", &[1.0, 1.0], false)];
        let found = differences(&quick, &optimized);
        let finding = found[0].finding.as_deref().expect("a finding");
        assert!(finding.contains("only in the quick build"), "{finding}");
        assert!(finding.contains("race"), "{finding}");
    }

    #[test]
    fn a_verdict_flipped_by_rounding_is_reported_but_is_no_finding() {
        // Just inside and just outside a 1e-3 tolerance: both finite, both written.
        let quick = [graded("a", &[1.0, 1.0009], false)];
        let optimized = [graded("a", &[1.0, 1.0011], false)];
        let found = differences(&quick, &optimized);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].finding, None);
        assert!(found[0]
            .describe()
            .contains("passes in the quick build, fails in the optimized one"));
        assert!(found[0].describe().contains("not a finding"));
    }

    #[test]
    fn cases_either_build_did_not_run_are_left_out() {
        let mut skipped = graded("a", &[1.0, 1.0], false);
        skipped.status = CaseStatus::NotRun;
        let optimized = [graded("a", &[f32::NAN, 1.0], false)];
        assert!(differences(&[skipped], &optimized).is_empty());
    }

    #[test]
    fn a_hang_of_the_slower_quick_build_alone_is_no_finding() {
        let found = differences(&[hung()], &[graded("a", &[1.0, 1.0], false)]);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].finding, None);
        assert!(
            found[0].describe().contains("unoptimised code is slower"),
            "{}",
            found[0].describe()
        );
    }

    #[test]
    fn a_hang_in_one_build_only_is_a_finding() {
        let found = differences(&[graded("a", &[1.0, 1.0], false)], &[hung()]);
        let finding = found[0].finding.as_deref().expect("a finding");
        assert!(
            finding.starts_with("a hang only in the optimized build"),
            "{finding}"
        );
    }
}
