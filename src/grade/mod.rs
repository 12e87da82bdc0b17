//! Grading: the float64 oracle, comparison against it, diagnosis and timing statistics.
//! Pure functions: no GPU, no IO, no clock (the golden proof alone reads files).

pub mod compare;
pub mod diagnosis;
pub mod golden;
mod nonfinite;
pub mod oracle;
pub mod stats;
