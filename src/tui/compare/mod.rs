//! The compare screen: two kernel files watched at once, both checked on
//! the same inputs after a save of either, and shown case by case in two
//! columns with the differences marked.
//!
//! Built like the single-file TUI (a pure [`update`] over a [`model`], a
//! pure view in `tui::view::compare`, a runtime that owns the threads) and
//! sharing its terminal, key and watch plumbing through `tui::shell`. It is
//! a separate model rather than a mode of the single-file one because
//! almost nothing of that model (history, heatmap, selection, replay)
//! means anything for a pair of files.

mod engine;
pub mod keys;
pub mod model;
pub mod msg;
mod runtime;
pub mod update;

pub use runtime::{run_compare, CompareSetup};
