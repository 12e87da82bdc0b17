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

use crate::app::history::{DiffLine, RestoreTarget, RunSummary};
use crate::display::path_for_display;
use crate::gpu::found::{fetched_folder, Context, Libraries};
use crate::gpu::headers::HeaderSearch;
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
    /// A restore finished: `note` says what it did; `replaced` is the
    /// record of the text it wrote over, which `u` puts back.
    Restored {
        note: String,
        replaced: Option<RunSummary>,
    },
    /// A one-line message for the footer (a restore refused, a write failed).
    Notice(String),
    /// The replay clock.
    Tick,
    /// The sanitizer pass asked for with `s` finished (or could not run).
    Sanitized(Result<Box<crate::app::sanitize::SanitizerOutcome>, String>),
    /// A search for NVIDIA's libraries finished (`r` while NVRTC is missing, or after a fetch).
    LibrariesSearched(LibrarySearch),
    /// A line of `f`'s fetch (pip's output) as it runs.
    FetchProgress(String),
    /// `f`'s fetch ended: the folder it installed into, or why it failed.
    Fetched(Result<String, String>),
}

/// What a search for NVIDIA's libraries found, as the screen needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LibrarySearch {
    /// The NVRTC chosen, in words (its file and how it was found), if any.
    pub nvrtc: Option<String>,
    /// The CUDA headers chosen, in words, if any.
    pub headers: Option<String>,
    /// Where `flashprof fetch-cuda` (and `f`) installs, when there is such a folder.
    pub fetch_folder: Option<String>,
}

impl LibrarySearch {
    /// The words for `libraries` and `headers`, searched in `context`.
    pub fn of(libraries: &Libraries, headers: &HeaderSearch, context: &Context) -> Self {
        Self {
            nvrtc: libraries.nvrtc.as_ref().map(|nvrtc| {
                format!(
                    "{} (via {})",
                    path_for_display(&nvrtc.library),
                    nvrtc.origin
                )
            }),
            headers: headers.found.as_ref().map(ToString::to_string),
            fetch_folder: fetched_folder(context).map(|f| path_for_display(&f)),
        }
    }
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
    /// Put a past text of this file back into it (saving the current one first).
    Restore(RestoreTarget),
    /// Change how often the replay clock ticks.
    SetTickInterval(Duration),
    /// Run compute-sanitizer over this text of the watched file (`s`): the
    /// text the watch last read, never the file read again by its path.
    Sanitize(String),
    /// Put `text` on the terminal's clipboard (OSC 52).
    Copy(String),
    /// Search for NVIDIA's libraries again and start the next worker with
    /// what is found; answered by [`Msg::LibrariesSearched`].
    SearchLibraries,
    /// Fetch NVIDIA's wheels into flashprof's cache folder (`f`, the
    /// user's consent); answered by [`Msg::FetchProgress`] and [`Msg::Fetched`].
    FetchCuda,
    Quit,
}
