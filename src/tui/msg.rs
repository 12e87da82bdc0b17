//! What flows into `update` (messages) and out of it (effects).
//!
//! Everything that happens, a key, a save, a line of engine progress, a
//! tick of the replay clock, arrives as one [`Msg`]; everything `update`
//! wants done that touches the world (start a check, write history, read a
//! file, quit) leaves as an [`Effect`] for the runtime to carry out. Keeping
//! both as plain data is what lets the tests drive the whole application
//! logic without a terminal, a file system or a GPU.

use std::time::Duration;

use crossterm::event::{KeyEvent, MouseEvent};

use crate::app::history::{DiffLine, RunSummary};
use crate::outcome::{CheckReport, CheckStopped, Progress};

/// Numbers the checks of one session, so late progress from an old check
/// can never be mistaken for the current one.
pub type RunId = u64;

#[derive(Debug, Clone)]
pub enum Msg {
    Key(KeyEvent),
    Mouse(MouseEvent),
    Resize {
        width: u16,
        height: u16,
    },
    /// The watched file settled on new content.
    FileChanged(Vec<u8>),
    /// The watched file was deleted or moved away.
    FileGone,
    // Boxed because these two are far larger than every other message.
    Progress {
        run: RunId,
        progress: Box<Progress>,
    },
    RunFinished {
        run: RunId,
        result: Result<Box<CheckReport>, CheckStopped>,
    },
    /// The check stopped because a newer save made its text stale.
    RunSuperseded(RunId),
    /// The history store as found at start (oldest first).
    HistoryLoaded(Vec<RunSummary>),
    /// A finished check was written to the history store.
    Recorded(RunSummary),
    DiffReady {
        title: String,
        lines: Vec<DiffLine>,
    },
    /// A one-line message for the footer (a restore done, a write failed).
    Notice(String),
    /// The replay clock.
    Tick,
    /// The sanitizer pass asked for with `s` finished (or could not run).
    Sanitized(Result<Box<crate::app::sanitize::SanitizerOutcome>, String>),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Check `source` on the engine thread; its messages carry `run`.
    StartRun {
        run: RunId,
        source: String,
    },
    /// The text of check `run` is stale: stop its optimized build, if it
    /// is still compiling (the verdicts of a newer save are waiting on it).
    SupersedeRun(RunId),
    /// Append a finished check to the history store.
    RecordRun {
        source: String,
        report: Box<CheckReport>,
    },
    /// Diff the stored text `source_hash` against the current text.
    LoadDiff {
        source_hash: String,
        title: String,
    },
    /// Put the best passing text back into the file (saving the current one first).
    RestoreBest,
    /// Change how often the replay clock ticks.
    SetTickInterval(Duration),
    /// Run compute-sanitizer over the watched file (`s`).
    Sanitize,
    /// Put `text` on the terminal's clipboard (OSC 52).
    Copy(String),
    Quit,
}
