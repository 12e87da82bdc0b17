//! Grading: the float64 oracle, comparison against it, diagnosis and timing statistics.
//! Pure functions: no GPU, no IO, no clock.
pub mod roofline;
