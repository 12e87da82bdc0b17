//! The application layer: the engine that drives a worker through a check,
//! and (next to it) the pieces the commands share.

pub mod batch;
pub mod check;
pub mod gate;
pub mod history;
pub mod lab_memory;
pub mod peaks_cache;
pub mod remote;
pub mod sanitize;
pub mod side_build;
pub mod watch;
pub mod worker_handle;
