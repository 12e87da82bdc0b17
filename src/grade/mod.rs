//! Grading: the float64 oracle, comparison against it, diagnosis, timing
//! statistics and the roofline reading of counters.
//! Pure functions: no GPU, no IO, no clock (the golden proof alone reads files).

pub mod compare;
pub mod diagnosis;
pub mod golden;
pub mod oracle;
pub mod roofline;
pub mod stats;
