//! What a launch did besides its output: the facts every lab's verdict
//! needs and the output values cannot carry.

use serde::{Deserialize, Serialize};

/// Facts about a launch that the output values do not carry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Integrity {
    /// Floats written into the guard bands around `out`.
    pub out_of_bounds_writes: usize,
    /// Inputs whose bytes changed during the launch (by argument name).
    pub inputs_modified: Vec<String>,
    /// Two launches on the same case gave different bits.
    pub runs_differ: bool,
}

impl Integrity {
    /// No write outside `out`, no input touched, and both runs agreed bit for bit.
    pub fn is_clean(&self) -> bool {
        self.out_of_bounds_writes == 0 && self.inputs_modified.is_empty() && !self.runs_differ
    }
}

/// The integrity failure that explains everything else, in one line, or
/// `None` when the launch was clean. Tried before any reading of the values:
/// a stray write, a touched input or a race can produce any wrong number.
pub fn integrity_problem(integrity: &Integrity) -> Option<String> {
    if integrity.out_of_bounds_writes > 0 {
        return Some(format!(
            "out-of-bounds write: the kernel wrote {} floats outside out; guard every store \
             and check the index arithmetic",
            integrity.out_of_bounds_writes
        ));
    }
    if !integrity.inputs_modified.is_empty() {
        return Some(format!(
            "the kernel wrote into {} (inputs are const): store only through out",
            integrity.inputs_modified.join(" and ")
        ));
    }
    if integrity.runs_differ {
        return Some(
            "race: two runs of the same case gave different bits; look for a missing \
             __syncthreads() around shared memory, or two threads writing one element"
                .into(),
        );
    }
    None
}
