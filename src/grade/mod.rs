//! Grading that holds for every lab: element-by-element comparison with
//! an oracle's output, the integrity facts of a launch, timing statistics, the
//! audit of every timed launch, the physical floor of a timing and the
//! roofline reading of counters. Pure functions: no GPU, no IO, no clock,
//! and no knowledge of any lab's tensors (a lab hands over its output shape,
//! tolerance and work model as numbers).

pub mod compare;
pub mod drift;
pub mod experiment;
pub mod floor;
pub mod integrity;
pub mod launch_audit;
pub mod lines;
pub mod precision;
pub mod roofline;
pub mod stats;
pub mod stopping;
