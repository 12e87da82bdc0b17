//! The FP8 check's one line: the second lab's reading of the pattern
//! across cases ([`crate::lab::verdict::with_planted`]),
//! over this lab's planted bugs.

use super::bugs::Bug;
use crate::lab::definition::CaseSummary;
use crate::lab::verdict;

/// The line for an FP8 check, `None` when no case ran.
pub fn verdict(cases: &[CaseSummary<'_>]) -> Option<String> {
    verdict::with_planted(cases, &Bug::ALL.map(|bug| (bug.name(), bug.defect())))
}
