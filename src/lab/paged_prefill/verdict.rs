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
use crate::lab::definition::CaseSummary;
use crate::lab::verdict;

/// The line for a paged-prefill check, `None` when no case ran.
pub fn verdict(cases: &[CaseSummary<'_>]) -> Option<String> {
    verdict::with_planted(cases, &Bug::ALL.map(|bug| (bug.name(), bug.defect())))
}
