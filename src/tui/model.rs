//! The TUI's state, and the read-only questions the views ask of it.
//!
//! Two results can be on screen at once: the check now running on the
//! newest save (filling in as progress arrives) and the last complete
//! check. Each panel shows the newest thing it has and marks anything older
//! as stale, so a slow GPU run never blanks the screen. No IO happens here.

use crate::display::figure;
use crate::facts::metrics::{self, finite_value};
use crate::grade::roofline::{Roofline, RooflinePoint};
use crate::outcome::CountersResult;
use crate::protocol::CountersOutcome;
use crate::protocol::KernelCounters;
use std::time::Duration;

use crate::app::history::{DiffLine, RunOutcome, RunSummary};
use crate::facts::device::{DeviceInfo, GpuProblem};
use crate::facts::resources::ResourceUsage;
use crate::lab::definition::Problem;
use crate::outcome::CheckReport;
use crate::protocol::{CaseOutcome, CaseStatus, CompileOutcome, CompileProblemKind, TimingOutcome};
use crate::report::ReproduceCommand;

use super::msg::{LibrarySearch, RunId};
use super::plot::{Axes, RooflinePlot};
use super::source_view::{self, Profiled};
use super::theme::Theme;

/// A hazard case as the table lists it before any result exists.
#[derive(Debug, Clone, PartialEq)]
pub struct CaseRow {
    pub name: String,
    pub shape: Problem,
}

/// Where the running check is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Compiling,
    Case(usize),
    Timing,
    Counters,
    /// The line profile, after everything else.
    Lines,
    /// The line profile's samples are shown; its counts are being taken.
    Counting,
}

/// The check in flight, as far as it has got.
#[derive(Debug, Clone)]
pub struct LiveRun {
    pub id: RunId,
    pub source: String,
    pub phase: Phase,
    /// The build whose verdicts count, once it exists.
    pub compile: Option<CompileOutcome>,
    pub cases: Vec<Option<CaseOutcome>>,
    /// The quick build of a quick-first check, and its verdicts, shown
    /// until the optimized build's arrive.
    pub quick: Option<CompileOutcome>,
    pub provisional: Vec<Option<CaseOutcome>>,
    pub timing: Option<Result<TimingOutcome, String>>,
    pub restarts: usize,
}

/// A finished check and the text it checked.
#[derive(Debug, Clone)]
pub struct Completed {
    pub source: String,
    pub report: CheckReport,
}

/// Hardware counters for the last check, as label/value lines; `None` in
/// [`Model::counters`] means not collected yet.
#[derive(Debug, Clone, PartialEq)]
pub enum CountersView {
    Unavailable {
        reason: String,
    },
    Collected {
        /// Every figure with its reasons, one line each.
        lines: Vec<(String, String)>,
        /// The same reading in lines of at most 30 columns, for a panel too
        /// narrow for `lines` (80 columns of terminal).
        compact: Vec<(String, String)>,
    },
}

impl CountersView {
    /// The lines the panel shows for one tier of counters (student first, starter for scale).
    pub fn from_result(result: &CountersResult) -> Self {
        let outcome = match result {
            Ok(o) => o,
            Err(u) => {
                return Self::Unavailable {
                    reason: format!("{}; fix: {}", u.reason, u.fix),
                }
            }
        };
        let (student, starter) = (&outcome.student, &outcome.starter);
        let mut lines = Vec::new();
        // The verdict comes first: a narrow panel cuts lines from the bottom.
        if let Some(r) = &student.roofline {
            lines.push((r.verdict.bound.word().into(), r.verdict.reason.clone()));
            lines.push(("next".into(), r.verdict.next_step.clone()));
        }
        if let Some(sm) = sm_words(student, starter, 1) {
            lines.push(("SM".into(), sm));
        }
        match &student.roofline {
            Some(r) => {
                lines.push(("units".into(), r.units_summary()));
                if let Some(dram) = &r.dram {
                    lines.push((
                        "DRAM rd".into(),
                        format!(
                            "{:.1} MB = {:.2}x inputs",
                            dram.read_bytes / 1e6,
                            dram.reads_over_floor
                        ),
                    ));
                    // Output lines still dirty in L2 at the end are written back uncounted.
                    let in_l2 = if dram.writes_over_floor < 1.0 {
                        ", rest in L2"
                    } else {
                        ""
                    };
                    lines.push((
                        "DRAM wr".into(),
                        format!(
                            "{:.1} MB = {:.2}x output{in_l2}",
                            dram.write_bytes / 1e6,
                            dram.writes_over_floor
                        ),
                    ));
                }
                let intensity = intensity_words(r);
                let tensor = r
                    .tensor_share()
                    .map(|(roof, pct)| format!(", {pct:.0}% of {roof}"))
                    .unwrap_or_default();
                let rate = format!(
                    "{:.1} TFLOP/s = {:.0}%{tensor}",
                    r.achieved_gflops / 1e3,
                    r.fp32_peak_pct
                );
                lines.push(("AI".into(), intensity));
                if r.levels_above_dram().next().is_some() {
                    lines.push(("levels".into(), levels_words(r)));
                }
                lines.push(("fp32".into(), rate));
            }
            None => lines.push((
                "student".into(),
                student.error.clone().unwrap_or_else(|| "no values".into()),
            )),
        }
        lines.push((
            "set".into(),
            format!(
                "{}, {} passes, {}",
                outcome.tier, outcome.passes, outcome.chip
            ),
        ));
        if let Some(peaks) = &outcome.peaks {
            lines.push(("roofs".into(), peaks.summary()));
        }
        Self::Collected {
            lines,
            compact: compact_lines(outcome),
        }
    }
}

/// The student's SM throughput with `decimals`, and the starter's beside it.
fn sm_words(student: &KernelCounters, starter: &KernelCounters, decimals: usize) -> Option<String> {
    let metric = |k: &KernelCounters| finite_value(&k.metrics, metrics::SM_THROUGHPUT_PCT);
    let base = metric(starter)
        .map(|b| format!(" (starter {b:.0}%)"))
        .unwrap_or_default();
    metric(student).map(|sm| format!("{sm:.decimals$}%{base}"))
}

/// Intensity and the ridge point, `491 flop/B, ridge 14`.
fn intensity_words(r: &Roofline) -> String {
    format!(
        "{} flop/B, ridge {}",
        figure(r.arithmetic_intensity, 0),
        figure(r.ridge_point, 0)
    )
}

/// The intensity at each level above DRAM and the level's roof,
/// `shared memory 12 flop/B (roof 29.7 TB/s), L2 61 flop/B (roof 9.9 TB/s)`.
fn levels_words(r: &Roofline) -> String {
    r.levels_above_dram()
        .map(|level| {
            let roof = level
                .peak_bytes_per_s
                .map(|bw| format!(" (roof {} TB/s)", figure(bw / 1e12, 1)))
                .unwrap_or_default();
            format!(
                "{} {} flop/B{roof}",
                level.unit.label(),
                figure(level.flop_per_byte, 0)
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The bound, the busiest unit and the figures that place the kernel, each
/// short enough for a 30-column panel; the reasons wait in the overlay.
fn compact_lines(outcome: &CountersOutcome) -> Vec<(String, String)> {
    let (student, starter) = (&outcome.student, &outcome.starter);
    let mut lines = Vec::new();
    let Some(r) = &student.roofline else {
        lines.push(("student".into(), "no roofline".into()));
        return lines;
    };
    lines.push((r.verdict.bound.word().into(), String::new()));
    if let Some(busiest) = &r.verdict.busiest {
        lines.push(("busiest".into(), busiest.describe()));
    }
    if let Some(sm) = sm_words(student, starter, 0) {
        lines.push(("SM".into(), sm));
    }
    if let Some(dram) = &r.dram {
        lines.push((
            "DRAM".into(),
            format!(
                "rd {:.2}x in, wr {:.2}x out",
                dram.reads_over_floor, dram.writes_over_floor
            ),
        ));
    }
    lines.push(("AI".into(), intensity_words(r)));
    let tensor = r
        .tensor_share()
        .map(|(roof, pct)| format!(", {pct:.0}% {roof}"))
        .unwrap_or_default();
    lines.push((
        "peak".into(),
        format!("{:.0}% fp32{tensor}", r.fp32_peak_pct),
    ));
    lines.push(("c".into(), "every line, roofline plot".into()));
    lines
}

/// A piece of NVIDIA's CUDA this machine lacks, which `f` fetches: a state
/// of the environment, not a fault of the file. Only ever set for a worker
/// on this machine (a remote one compiles with the node's own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CudaMissing {
    pub piece: CudaPiece,
    /// Where `f` installs NVIDIA's wheels, for the offer.
    pub fetch_folder: Option<String>,
    /// What is under way about it.
    pub remedy: Option<Remedy>,
    /// Why the last fetch failed, until another starts.
    pub fetch_failed: Option<String>,
}

/// Which piece is missing, and so what waits for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CudaPiece {
    /// NVRTC: nothing compiles, so no check starts until it is found.
    Nvrtc,
    /// The CUDA headers the file includes (`cuda_bf16.h`, `cuda_fp8.h`):
    /// this text does not compile, but every save is still checked (one
    /// that drops the include compiles).
    Headers,
}

impl CudaMissing {
    /// The state after `search`: NVRTC missing, or the headers still
    /// missing when they were before, or `None`. A failed fetch stays said
    /// across a search that still finds nothing.
    pub fn after(search: &LibrarySearch, before: Option<&Self>) -> Option<Self> {
        let piece = if search.nvrtc.is_none() {
            CudaPiece::Nvrtc
        } else if search.headers.is_none() && before.is_some_and(|b| b.piece == CudaPiece::Headers)
        {
            CudaPiece::Headers
        } else {
            return None;
        };
        Some(Self::of(piece, search, before))
    }

    /// `piece` missing, as of `search`.
    pub fn of(piece: CudaPiece, search: &LibrarySearch, before: Option<&Self>) -> Self {
        Self {
            piece,
            fetch_folder: search.fetch_folder.clone(),
            remedy: None,
            fetch_failed: before.and_then(|b| b.fetch_failed.clone()),
        }
    }

    /// The piece in a footer's words (`f fetch NVRTC`).
    pub fn noun(&self) -> &'static str {
        match self.piece {
            CudaPiece::Nvrtc => "NVRTC",
            CudaPiece::Headers => "the CUDA headers",
        }
    }

    /// Whether no check may start: only without a compiler at all.
    pub fn blocks_checks(&self) -> bool {
        self.piece == CudaPiece::Nvrtc
    }
}

/// What is being done about a missing piece of CUDA.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Remedy {
    /// Looking for the libraries again.
    Searching,
    /// `f`'s fetch, with pip's latest line.
    Fetching { last_line: String },
}

/// A window drawn over the panels.
#[derive(Debug, Clone, PartialEq)]
pub enum Overlay {
    Help,
    /// Every counters line, whole, and a large roofline plot.
    Counters,
    Heatmap {
        case: usize,
    },
    /// Past runs, newest first; `selected` counts from the newest.
    History {
        selected: usize,
    },
    Diff {
        title: String,
        lines: Vec<DiffLine>,
        scroll: usize,
    },
    /// The source view: the profiled text, line by line (`l`); `scroll` is
    /// the first row shown.
    Lines {
        scroll: usize,
        hottest_first: bool,
    },
}

/// Playing back a history store instead of watching a file.
#[derive(Debug, Clone)]
pub struct Replay {
    pub runs: Vec<Completed>,
    /// One per run, as the history overlay and the trend read them.
    pub summaries: Vec<RunSummary>,
    pub position: usize,
    pub paused: bool,
    pub interval: Duration,
    /// One span of the roofline's axes for every run, so that stepping
    /// moves the points and never the scale.
    pub axes: Option<Axes>,
}

impl Replay {
    /// A replay of `runs`, paused on the first: the lecturer starts it
    /// (`space`) or steps it, once the projector shows it.
    pub fn new(runs: Vec<Completed>, summaries: Vec<RunSummary>, interval: Duration) -> Self {
        let axes = Axes::spanning(runs.iter().filter_map(|run| {
            RooflinePlot::from_result(run.report.counters.last()?)?.fitted_axes()
        }));
        Self {
            runs,
            summaries,
            position: 0,
            paused: true,
            interval,
            axes,
        }
    }
}

/// One panel's content and whether it comes from an earlier save.
#[derive(Debug, Clone, Copy)]
pub struct Shown<T> {
    pub value: T,
    pub stale: bool,
}

/// What the cases table shows in one row.
#[derive(Debug, Clone, Copy)]
pub enum CaseCell<'a> {
    Waiting,
    Running,
    /// The quick build's verdict, while the optimized build's is pending.
    Provisional(&'a CaseOutcome),
    Done(Shown<&'a CaseOutcome>),
}

/// What the timing panel shows.
#[derive(Debug, Clone, Copy)]
pub enum TimingCell<'a> {
    Running,
    Timed(&'a TimingOutcome),
    Failed(&'a str),
}

#[derive(Debug, Clone)]
pub struct Model {
    /// The student file's name as the header shows it.
    pub file_label: String,
    pub theme: Theme,
    pub width: u16,
    pub height: u16,
    /// The newest text of the file.
    pub source: String,
    pub cases: Vec<CaseRow>,
    pub gpu: Option<Result<DeviceInfo, GpuProblem>>,
    pub live: Option<LiveRun>,
    /// The newest save that arrived while a check ran; only the latest waits.
    pub queued: Option<String>,
    pub last: Option<Completed>,
    /// The resources of the check before `last`, for the deltas.
    pub previous_resources: Option<ResourceUsage>,
    /// Past runs, oldest first, for the trend and the history overlay.
    pub history: Vec<RunSummary>,
    pub counters: Option<CountersView>,
    /// The newest line profile and the text it is of, and the one profiled
    /// before it, which each line's change is measured against.
    pub profiled: Option<Profiled>,
    pub profiled_before: Option<Profiled>,
    /// The run whose samples `profiled` shows while its counts are being
    /// taken: its finished profile replaces that one rather than becoming
    /// the newer save.
    pub heat_run: Option<RunId>,
    /// This session profiles no lines (started with `--no-lines`).
    pub lines_off: bool,
    /// The roofline plot of the same counters, when the launch was placed.
    pub roofline: Option<RooflinePlot>,
    pub selected: usize,
    /// The first row of the compile panel drawn, when its errors are more
    /// than it shows.
    pub compile_scroll: usize,
    pub overlay: Option<Overlay>,
    pub notice: Option<String>,
    /// The source hash of the text the last restore wrote over, which `u`
    /// puts back (a restore of its own, so it too can be undone).
    pub undo_restore: Option<String>,
    /// Why the latest check could not run (a node that never answered, a
    /// worker that would not start), for the header until a check finishes.
    pub stopped: Option<String>,
    /// Where the worker runs when it is remote (docs/REMOTE.md), for the header.
    pub worker_place: Option<String>,
    /// What the link to a remote worker added to the last compile (`ssh 12 ms`).
    pub link: Option<String>,
    pub replay: Option<Replay>,
    /// The watched file is gone (deleted or moved away); the last results
    /// stay on screen until it comes back.
    pub file_gone: bool,
    /// The `flashprof check` command that reruns a check of this session,
    /// but for its seed (`y` copies it); `None` in a replay.
    pub reproduce: Option<ReproduceCommand>,
    /// Lecture mode: large digits and one large panel (`--present`).
    pub present: bool,
    /// Set while this machine lacks NVRTC (no check starts until it is
    /// found) or the CUDA headers the file includes.
    pub cuda_missing: Option<CudaMissing>,
    /// What the last search for NVIDIA's libraries found, for a worker on
    /// this machine (`None` for a remote one, which uses the node's own).
    pub libraries: Option<LibrarySearch>,
    pub quitting: bool,
    pub(super) next_run: RunId,
}

impl Model {
    /// A model for watching a file whose checks will run `cases`.
    pub fn new(file_label: &str, cases: Vec<CaseRow>, theme: Theme) -> Self {
        Self {
            file_label: file_label.to_owned(),
            theme,
            width: 80,
            height: 24,
            source: String::new(),
            cases,
            gpu: None,
            live: None,
            queued: None,
            last: None,
            previous_resources: None,
            history: Vec::new(),
            counters: None,
            profiled: None,
            heat_run: None,
            profiled_before: None,
            lines_off: false,
            roofline: None,
            selected: 0,
            compile_scroll: 0,
            overlay: None,
            notice: None,
            undo_restore: None,
            stopped: None,
            worker_place: None,
            link: None,
            replay: None,
            file_gone: false,
            reproduce: None,
            present: false,
            cuda_missing: None,
            libraries: None,
            quitting: false,
            next_run: 1,
        }
    }

    /// The cases of the run on screen that failed, hung or crashed.
    pub fn cases_failed(&self) -> usize {
        (0..self.cases.len())
            .filter_map(|i| self.case_outcome(i))
            .filter(|c| !matches!(c.status, CaseStatus::Pass | CaseStatus::NotRun))
            .count()
    }

    /// How many rows the source view lists: every line of the profiled
    /// text, or only its sampled lines when the hottest come first.
    pub fn source_rows(&self, hottest_first: bool) -> usize {
        let Some(now) = &self.profiled else {
            return 0;
        };
        let rows = source_view::rows(now, None);
        if hottest_first {
            source_view::hottest_first(rows).len()
        } else {
            rows.len()
        }
    }

    /// Why the newest check has no line profile of its own, when it has
    /// none (the view then shows an earlier save's, marked so).
    pub fn lines_missing(&self) -> Option<String> {
        if self.lines_off && self.replay.is_none() {
            return Some("this session profiles no lines: it was started with --no-lines".into());
        }
        match self.live.as_ref().map(|l| l.phase) {
            Some(Phase::Lines) => return Some("profiling lines of the newest save...".into()),
            // The newest save's samples are on screen.
            Some(Phase::Counting) => return None,
            _ => {}
        }
        let report = &self.last.as_ref()?.report;
        match &report.lines {
            Some(Ok(_)) => None,
            Some(Err(why)) => Some(format!("the newest save has no line profile: {why}")),
            None if !report.compile.ok => Some("the newest save does not compile".into()),
            None if report.gpu.is_err() => {
                Some("no GPU: lines are profiled on a GPU with CUPTI".into())
            }
            None => Some(
                "the newest save was not profiled: lines are profiled after a save that passes every case"
                    .into(),
            ),
        }
    }

    /// The compile result to show: the running check's, else the last one's.
    pub fn compile(&self) -> Option<Shown<&CompileOutcome>> {
        if let Some(compile) = self.live.as_ref().and_then(|l| l.compile.as_ref()) {
            return Some(Shown {
                value: compile,
                stale: false,
            });
        }
        self.last.as_ref().map(|c| Shown {
            value: &c.report.compile,
            stale: self.last_is_stale(),
        })
    }

    /// Why no case can run while the file on screen does not build (`the
    /// file does not compile`), or `None` when one has run or may: the
    /// cases table then gives its rows to the errors.
    pub fn not_built(&self) -> Option<&'static str> {
        // Without NVRTC nothing is compiled at all: the offer to fetch it
        // (and a failed fetch's reason) gets the rows.
        if self
            .cuda_missing
            .as_ref()
            .is_some_and(CudaMissing::blocks_checks)
        {
            return Some("NVRTC is missing");
        }
        let compile = self.compile()?.value;
        if compile.ok {
            return None;
        }
        let unrun = |i| match self.case(i) {
            CaseCell::Waiting => true,
            CaseCell::Done(shown) => shown.value.status == CaseStatus::NotRun,
            CaseCell::Running | CaseCell::Provisional(_) => false,
        };
        if !(0..self.cases.len()).all(unrun) {
            return None;
        }
        // The machine's faults by name; the file's own all read alike.
        Some(match compile.problem.as_ref().map(|p| p.kind) {
            Some(
                kind @ (CompileProblemKind::CompilerMissing
                | CompileProblemKind::HeadersMissing
                | CompileProblemKind::CompilerFailed),
            ) => kind.why_nothing_ran(),
            _ => "the file does not compile",
        })
    }

    /// The command that reruns the check on screen, seed and all.
    pub fn reproduce_command(&self) -> Option<String> {
        let seed = self.last.as_ref()?.report.seed;
        Some(self.reproduce.as_ref()?.for_seed(seed))
    }

    /// The last complete check is stale while a newer save is being checked
    /// or waits, or when the file no longer holds the text it checked.
    pub fn last_is_stale(&self) -> bool {
        self.live.is_some()
            || self.queued.is_some()
            || self.last.as_ref().is_some_and(|c| c.source != self.source)
    }

    pub fn case(&self, index: usize) -> CaseCell<'_> {
        if let Some(live) = &self.live {
            if let Some(Some(outcome)) = live.cases.get(index) {
                return CaseCell::Done(Shown {
                    value: outcome,
                    stale: false,
                });
            }
            // The optimized build's rerun of a case takes milliseconds:
            // its provisional verdict stays up meanwhile.
            if let Some(Some(outcome)) = live.provisional.get(index) {
                return CaseCell::Provisional(outcome);
            }
            if live.phase == Phase::Case(index) {
                return CaseCell::Running;
            }
        }
        match self.last.as_ref().and_then(|c| c.report.cases.get(index)) {
            Some(outcome) => CaseCell::Done(Shown {
                value: outcome,
                stale: self.last_is_stale(),
            }),
            None => CaseCell::Waiting,
        }
    }

    /// The outcome of case `index`, fresh or stale, when there is one.
    pub fn case_outcome(&self, index: usize) -> Option<&CaseOutcome> {
        match self.case(index) {
            CaseCell::Done(shown) => Some(shown.value),
            _ => None,
        }
    }

    pub fn timing(&self) -> Option<Shown<TimingCell<'_>>> {
        if let Some(live) = &self.live {
            let fresh = |value| {
                Some(Shown {
                    value,
                    stale: false,
                })
            };
            match &live.timing {
                Some(Ok(t)) => return fresh(TimingCell::Timed(t)),
                Some(Err(e)) => return fresh(TimingCell::Failed(e)),
                None if live.phase == Phase::Timing => return fresh(TimingCell::Running),
                None => {}
            }
        }
        let last = self.last.as_ref()?;
        let value = match (&last.report.timing, &last.report.timing_error) {
            (Some(t), _) => TimingCell::Timed(t),
            (None, Some(e)) => TimingCell::Failed(e),
            (None, None) => return None,
        };
        Some(Shown {
            value,
            stale: self.last_is_stale(),
        })
    }

    /// One figure of each past check, oldest first (`None` where that
    /// check has no such figure: not timed, not compiled, not graded).
    pub fn trend(&self, figure: fn(&RunOutcome) -> Option<f64>) -> Vec<Option<f64>> {
        self.history
            .iter()
            .filter_map(|s| s.outcome.as_ref().map(figure))
            .collect()
    }

    /// The roofline plot with the kernel's earlier saves (the history the
    /// trend reads, up to the replayed run in a replay) as its trail, on
    /// the replay's axes in a replay.
    pub fn roofline_plot(&self) -> Option<RooflinePlot> {
        let earlier: Vec<RooflinePoint> = self
            .history
            .iter()
            .filter_map(|s| s.outcome.as_ref()?.roofline)
            .collect();
        let axes = self.replay.as_ref().and_then(|r| r.axes);
        Some(self.roofline.clone()?.with_trail(&earlier).on_axes(axes))
    }

    /// Index of the next case after `from` (wrapping) that ran and did not pass.
    pub fn next_failing(&self, from: usize) -> Option<usize> {
        let n = self.cases.len();
        (1..=n).map(|step| (from + step) % n).find(|&i| {
            self.case_outcome(i)
                .is_some_and(|c| !matches!(c.status, CaseStatus::Pass | CaseStatus::NotRun))
        })
    }
}
