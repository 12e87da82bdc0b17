//! What flows into the compare screen's `update`, and what it asks for.
//! Plain data, so tests can drive the screen's whole logic without a
//! terminal, a watcher or a worker.

use crossterm::event::KeyEvent;

use super::model::{Column, Pair};
use crate::outcome::{CheckReport, Progress};
use crate::tui::msg::RunId;

#[derive(Debug, Clone)]
pub enum CompareMsg {
    Key(KeyEvent),
    Resize {
        width: u16,
        height: u16,
    },
    /// One of the watched files settled on new content.
    FileChanged {
        column: Column,
        bytes: Vec<u8>,
    },
    /// One of the watched files was deleted or moved away.
    FileGone {
        column: Column,
    },
    /// A step of one side's check within comparison `run`.
    Progress {
        run: RunId,
        column: Column,
        progress: Box<Progress>,
    },
    /// Both sides of comparison `run` are done, or it could not run.
    Finished {
        run: RunId,
        result: Result<Box<Pair<CheckReport>>, String>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub enum CompareEffect {
    /// Check A's then B's text on the engine thread, on one seed.
    StartComparison {
        run: RunId,
        sources: Pair<String>,
    },
    Quit,
}
