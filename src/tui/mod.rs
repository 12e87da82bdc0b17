//! The live TUI: watch a kernel file, check every save, show the results as
//! they stream in; or play back a history store.
//!
//! Shaped as the Elm architecture: [`model`] is the state, [`msg`] what can
//! happen and what must be done, [`update`] the only place state changes
//! (pure, so tests drive it with message sequences), [`view`] a pure
//! drawing of the model. The runtime around them owns every thread and
//! side effect: the engine thread that owns the worker process, the file
//! watcher, the key reader, the history writer. All of them send into one
//! channel; the loop blocks on it and redraws only when a message arrives,
//! so an idle screen costs no CPU and a slow GPU never freezes the keys.

pub mod compare;
mod engine;
pub mod keys;
pub mod model;
pub mod msg;
pub mod plot;
mod runtime;
mod shell;
pub mod source_view;
pub mod terminal;
pub mod theme;
pub mod update;
pub mod view;

pub use compare::{run_compare, CompareSetup};
pub use runtime::{run_live, run_replay, LiveSetup};
