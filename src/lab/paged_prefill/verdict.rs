//! The paged-prefill check's one line, read from the pattern across its
//! cases.
//!
//! Each case's diagnosis replays the planted bugs' CPU models on its
//! failing rows and names the bug whose model reproduces the output. The
//! verdict counts those confirmations over all failing cases: a bug that
//! explains most of them, with the cases it cannot touch passing (no cache
//! read, no window, no ALiBi), is the kernel's defect. Without a majority
//! the shared rules speak.

use super::bugs::Bug;
use crate::lab::definition::{CaseState, CaseSummary};
use crate::lab::verdict::{self, names, select};

/// The line for a paged-prefill check, `None` when no case ran.
pub fn verdict(cases: &[CaseSummary<'_>]) -> Option<String> {
    let bugs: Vec<PlantedBug> = Bug::ALL.iter().map(|b| (b.name(), b.defect())).collect();
    verdict_over(cases, &bugs)
}

/// A planted bug as the verdict names it: its cause name and its defect.
pub type PlantedBug = (&'static str, &'static str);

/// The line for a check of a paged lab whose planted bugs are `bugs`
/// (both paged labs read their cases the same way).
pub fn verdict_over(cases: &[CaseSummary<'_>], bugs: &[PlantedBug]) -> Option<String> {
    if let Some(line) = verdict::settled(cases) {
        return line;
    }
    if let Some(line) = verdict::severe(cases) {
        return Some(line);
    }
    Some(confirmed(cases, bugs).unwrap_or_else(|| verdict::by_cause(cases)))
}

/// The planted bug whose model reproduces most failing cases, when it
/// reproduces at least half of them.
fn confirmed(cases: &[CaseSummary<'_>], bugs: &[PlantedBug]) -> Option<String> {
    let failing = select(cases, |c| c.state == CaseState::Fail);
    let mut best: Option<(&str, Vec<&CaseSummary<'_>>)> = None;
    for &(name, defect) in bugs {
        let hit: Vec<&CaseSummary<'_>> = failing
            .iter()
            .copied()
            // A diagnosis may name several bugs whose models all reproduce
            // the case (the FP8 lab's, when two defects both read NaN bytes).
            .filter(|c| c.cause == Some(name) || c.diagnosis.contains(defect))
            .collect();
        if hit.len() > best.as_ref().map_or(0, |(_, b)| b.len()) {
            best = Some((defect, hit));
        }
    }
    let (defect, hit) = best?;
    if hit.len() * 2 < failing.len() {
        return None;
    }
    let passing = select(cases, |c| c.state == CaseState::Pass);
    let passes = match passing.len() {
        0 => String::new(),
        n if n <= 3 => format!(
            "; {} pass{}",
            names(&passing),
            if n == 1 { "es" } else { "" }
        ),
        n => format!("; {n} other cases pass"),
    };
    Some(format!(
        "{defect}: its model reproduces the output of {} of {} failing cases ({}){passes}",
        hit.len(),
        failing.len(),
        names(&hit)
    ))
}
