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
    if let Some(line) = verdict::settled(cases) {
        return line;
    }
    if let Some(line) = verdict::severe(cases) {
        return Some(line);
    }
    Some(confirmed(cases).unwrap_or_else(|| verdict::by_cause(cases)))
}

/// The planted bug whose model reproduces most failing cases, when it
/// reproduces at least half of them.
fn confirmed(cases: &[CaseSummary<'_>]) -> Option<String> {
    let failing = select(cases, |c| c.state == CaseState::Fail);
    let mut best: Option<(Bug, Vec<&CaseSummary<'_>>)> = None;
    for bug in Bug::ALL {
        let hit: Vec<&CaseSummary<'_>> = failing
            .iter()
            .copied()
            .filter(|c| c.cause == Some(bug.name()))
            .collect();
        if hit.len() > best.as_ref().map_or(0, |(_, b)| b.len()) {
            best = Some((bug, hit));
        }
    }
    let (bug, hit) = best?;
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
        "{}: its model reproduces the output of {} of {} failing cases ({}){passes}",
        bug.defect(),
        hit.len(),
        failing.len(),
        names(&hit)
    ))
}
