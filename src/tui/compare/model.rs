//! The compare screen's state: the newest text of each file, the
//! comparison in flight (only where it has got to), and the last complete
//! comparison, which stays on screen marked stale while the next one runs.
//! No IO happens here.

use crate::facts::device::{DeviceInfo, GpuProblem};
use crate::outcome::CheckReport;
use crate::tui::model::{CaseRow, Phase};
use crate::tui::msg::RunId;
use crate::tui::theme::Theme;

/// Which of the two kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Column {
    A,
    B,
}

impl Column {
    pub const BOTH: [Column; 2] = [Column::A, Column::B];

    pub fn letter(self) -> &'static str {
        match self {
            Column::A => "A",
            Column::B => "B",
        }
    }
}

/// One value per kernel.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Pair<T> {
    pub a: T,
    pub b: T,
}

impl<T> Pair<T> {
    pub fn get(&self, column: Column) -> &T {
        match column {
            Column::A => &self.a,
            Column::B => &self.b,
        }
    }

    pub fn get_mut(&mut self, column: Column) -> &mut T {
        match column {
            Column::A => &mut self.a,
            Column::B => &mut self.b,
        }
    }
}

/// The comparison being checked: which side is running, and where.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveComparison {
    pub id: RunId,
    pub sources: Pair<String>,
    pub column: Column,
    pub phase: Phase,
}

/// A finished comparison and the texts it checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    pub sources: Pair<String>,
    pub reports: Pair<CheckReport>,
}

#[derive(Debug, Clone)]
pub struct CompareModel {
    /// The files' names as the screen shows them.
    pub files: Pair<String>,
    pub theme: Theme,
    pub width: u16,
    pub height: u16,
    /// The cases every check runs, listed before any result exists.
    pub cases: Vec<CaseRow>,
    /// The newest text of each file; a comparison waits for both.
    pub sources: Pair<Option<String>>,
    /// Which files are deleted (or moved away) until their next save.
    pub gone: Pair<bool>,
    pub gpu: Option<Result<DeviceInfo, GpuProblem>>,
    pub live: Option<LiveComparison>,
    /// A save (or `r`) arrived while a comparison ran: one more runs after
    /// it, on whatever the files hold then.
    pub rerun_waiting: bool,
    pub last: Option<Comparison>,
    pub notice: Option<String>,
    pub help: bool,
    pub quitting: bool,
    pub(super) next_run: RunId,
}

impl CompareModel {
    pub fn new(files: Pair<String>, cases: Vec<CaseRow>, theme: Theme) -> Self {
        Self {
            files,
            theme,
            width: 80,
            height: 24,
            cases,
            sources: Pair::default(),
            gone: Pair::default(),
            gpu: None,
            live: None,
            rerun_waiting: false,
            last: None,
            notice: None,
            help: false,
            quitting: false,
            next_run: 1,
        }
    }

    /// The last comparison is stale while a newer one runs or waits, or
    /// when either file no longer holds the text it checked.
    pub fn last_is_stale(&self) -> bool {
        let edited = |last: &Comparison| {
            Column::BOTH
                .iter()
                .any(|&c| self.sources.get(c).as_ref() != Some(last.sources.get(c)))
        };
        self.live.is_some() || self.rerun_waiting || self.last.as_ref().is_some_and(edited)
    }
}
