//! Integrity badges: a compact line saying which of the grader's defences
//! a run went through and whether any of them tripped.
//!
//! A TA reading a gradebook wants to know at a glance that a pass is a real
//! pass: fresh inputs from a recorded seed, a poisoned output buffer, guard
//! bands, inputs checked after the launch, two runs compared bit for bit,
//! and a correct timed output. Each badge is one of those facts, summed
//! over every case that ran.

use std::fmt;

use serde::Serialize;

use super::CheckReport;

/// What one defence saw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", content = "detail", rename_all = "snake_case")]
pub enum BadgeState {
    /// The check ran and found nothing.
    Clean,
    /// The check ran and tripped; the detail says how.
    Tripped(String),
    /// Nothing ran that this check could look at.
    NotChecked,
}

/// One named defence and its state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Badge {
    pub name: &'static str,
    #[serde(flatten)]
    pub state: BadgeState,
}

/// Every badge of one run, in a fixed order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IntegrityBadges {
    pub seed: u64,
    pub badges: Vec<Badge>,
}

impl IntegrityBadges {
    /// Reads the badges off a finished check.
    pub fn of(report: &CheckReport) -> Self {
        let ran: Vec<_> = report
            .cases
            .iter()
            .filter_map(|c| c.comparison.as_ref().zip(c.integrity.as_ref()))
            .collect();
        // A badge that counts what tripped it: `said` words a count above zero.
        let tallied = |name, total: usize, said: &dyn Fn(usize) -> String| Badge {
            name,
            state: if ran.is_empty() {
                BadgeState::NotChecked
            } else if total == 0 {
                BadgeState::Clean
            } else {
                BadgeState::Tripped(said(total))
            },
        };
        let unwritten = ran.iter().map(|(c, _)| c.unwritten).sum();
        let stray = ran.iter().map(|(_, i)| i.out_of_bounds_writes).sum();
        let mutated = ran
            .iter()
            .filter(|(_, i)| !i.inputs_modified.is_empty())
            .count();
        let moving = ran.iter().filter(|(_, i)| i.runs_differ).count();
        // The checked launch's whole output, then every audited launch and the floor.
        let timed = match &report.timing {
            None => BadgeState::NotChecked,
            Some(t) if !t.output_check.passed => BadgeState::Tripped(format!(
                "{} of {} elements wrong",
                t.output_check.failing, t.output_check.elements
            )),
            Some(t) => match (&t.finding, &t.impossible, &t.profile_refused) {
                (None, None, None) => BadgeState::Clean,
                _ => BadgeState::Tripped(t.withheld_word().unwrap_or_default().to_string()),
            },
        };
        let badges = vec![
            tallied("poison", unwritten, &|n| {
                format!("{n} elements never written")
            }),
            tallied("guards", stray, &|n| {
                format!("{n} floats written outside out")
            }),
            tallied("inputs", mutated, &|n| {
                format!("inputs modified in {n} cases")
            }),
            tallied("repeat", moving, &|n| format!("runs differ in {n} cases")),
            Badge {
                name: "timed-output",
                state: timed,
            },
        ];
        Self {
            seed: report.seed,
            badges,
        }
    }

    /// No badge tripped (badges that were not checked do not count against it).
    pub fn all_clean(&self) -> bool {
        self.badges
            .iter()
            .all(|b| !matches!(b.state, BadgeState::Tripped(_)))
    }
}

/// `integrity: seed 42 | poison ok | guards ok | inputs ok | repeat ok | timed-output -`,
/// with `!` and the detail for a tripped badge.
impl fmt::Display for IntegrityBadges {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "integrity: seed {}", self.seed)?;
        for badge in &self.badges {
            match &badge.state {
                BadgeState::Clean => write!(f, " | {} ok", badge.name)?,
                BadgeState::NotChecked => write!(f, " | {} -", badge.name)?,
                BadgeState::Tripped(detail) => write!(f, " | {} ! ({detail})", badge.name)?,
            }
        }
        Ok(())
    }
}
