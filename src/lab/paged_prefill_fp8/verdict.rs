//! The FP8 check's one line: the second lab's reading of the pattern
//! across cases ([`crate::lab::paged_prefill::verdict::verdict_over`]),
//! over this lab's planted bugs.

use super::bugs::Bug;
use crate::lab::definition::CaseSummary;
use crate::lab::paged_prefill::verdict::{verdict_over, PlantedBug};

/// The line for an FP8 check, `None` when no case ran.
pub fn verdict(cases: &[CaseSummary<'_>]) -> Option<String> {
    let bugs: Vec<PlantedBug> = Bug::ALL.iter().map(|b| (b.name(), b.defect())).collect();
    verdict_over(cases, &bugs)
}
