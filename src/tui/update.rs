//! The state machine: `update(model, msg)` changes the model and returns
//! the effects the runtime must carry out. No IO, no clock, no threads.
//!
//! Checks are scheduled like a single-job queue: at most one check is in
//! flight; a save that arrives meanwhile is parked, a newer save replaces
//! the parked one, and when the running check ends the parked text (if
//! any) starts next. So a burst of saves during a long GPU run costs one
//! extra check, of the newest text. A check still waiting for its optimized
//! build when a save arrives is told to stop (its build is stale), so the
//! newest text gets its first verdicts without waiting for the optimizer.

use std::time::Duration;

use crossterm::event::{KeyEvent, KeyEventKind, MouseButton, MouseEvent, MouseEventKind};

use super::keys::{action_for, Action};
use super::model::{
    CaseRow, Completed, CountersView, CudaMissing, CudaPiece, LiveRun, Model, Overlay, Phase,
    Remedy,
};
use super::msg::{Effect, LibrarySearch, Msg, RunId};
use super::plot::RooflinePlot;
use super::source_view::Profiled;
use super::view::layout::{case_at, compile_scroll_limit, overlay_rows, visible_case_rows, Areas};
use crate::app::history::RestoreTarget;
use crate::display::line_for_display;
use crate::outcome::{CheckReport, CheckStopped, CountersResult, LinkLoss, Progress};
use crate::protocol::{CompileOutcome, CompileProblemKind};

/// Replay speeds a user can step through, as seconds per run.
const REPLAY_INTERVALS_MS: [u64; 6] = [250, 500, 1000, 2000, 4000, 8000];

pub fn update(model: &mut Model, msg: Msg) -> Vec<Effect> {
    match msg {
        Msg::Key(key) => on_key(model, key),
        Msg::Mouse(mouse) => {
            on_mouse(model, mouse);
            Vec::new()
        }
        Msg::Resize { width, height } => {
            model.width = width;
            model.height = height;
            Vec::new()
        }
        Msg::FileChanged(bytes) => on_file_changed(model, bytes),
        Msg::FileGone => {
            model.file_gone = true;
            Vec::new()
        }
        Msg::Progress { run, progress } => {
            on_progress(model, run, *progress);
            Vec::new()
        }
        Msg::RunFinished { run, result } => on_run_finished(model, run, result),
        Msg::RunSuperseded(run) => {
            if model.live.take_if(|l| l.id == run).is_none() {
                return Vec::new();
            }
            settle_heat(model, run, None);
            match model.queued.take() {
                Some(next) => request_run(model, next),
                None => Vec::new(),
            }
        }
        Msg::HistoryLoaded(summaries) => {
            model.history = summaries;
            Vec::new()
        }
        Msg::Recorded(summary) => {
            push_history(model, summary);
            Vec::new()
        }
        Msg::DiffReady { title, lines } => {
            model.overlay = Some(Overlay::Diff {
                title,
                lines,
                scroll: 0,
            });
            Vec::new()
        }
        Msg::Restored { note, replaced } => {
            model.notice = Some(note);
            // With no text replaced (the file was absent) there is nothing
            // to undo, and an older restore's undo would bring back
            // something unrelated.
            model.undo_restore = replaced.as_ref().map(|r| r.source_hash.clone());
            if let Some(replaced) = replaced {
                push_history(model, replaced);
            }
            Vec::new()
        }
        Msg::Notice(text) => {
            model.notice = Some(text);
            Vec::new()
        }
        Msg::Sanitized(result) => {
            on_sanitized(model, result);
            Vec::new()
        }
        Msg::LibrariesSearched(search) => on_libraries_searched(model, &search),
        Msg::FetchProgress(line) => {
            if let Some(Remedy::Fetching { last_line }) =
                model.cuda_missing.as_mut().and_then(|m| m.remedy.as_mut())
            {
                *last_line = line;
            }
            Vec::new()
        }
        Msg::Fetched(result) => on_fetched(model, result),
        Msg::Tick => {
            if model.replay.as_ref().is_some_and(|r| !r.paused) {
                step_replay(model, 1);
            }
            Vec::new()
        }
    }
}

fn on_file_changed(model: &mut Model, bytes: Vec<u8>) -> Vec<Effect> {
    // A file back with the text it had when it went is checked already.
    let back = std::mem::take(&mut model.file_gone);
    if back && bytes == model.source.as_bytes() {
        return Vec::new();
    }
    match String::from_utf8(bytes) {
        Ok(text) => {
            model.source = text.clone();
            model.notice = None;
            request_run(model, text)
        }
        Err(_) => {
            model.notice = Some(format!(
                "{} is not UTF-8 text; fix the encoding to check it",
                model.file_label
            ));
            Vec::new()
        }
    }
}

/// Starts a check of `source` now, or parks it behind the running one.
/// Without NVRTC nothing starts: the newest text waits in `model.source`
/// for the search that finds it.
fn request_run(model: &mut Model, source: String) -> Vec<Effect> {
    if model.replay.is_some()
        || model
            .cuda_missing
            .as_ref()
            .is_some_and(CudaMissing::blocks_checks)
    {
        return Vec::new();
    }
    if let Some(live) = &model.live {
        // Only new text makes the running check stale (`r` reruns the same).
        let effects = if live.source == source {
            Vec::new()
        } else {
            vec![Effect::SupersedeRun(live.id)]
        };
        model.queued = Some(source);
        return effects;
    }
    let id = model.next_run;
    model.next_run += 1;
    model.live = Some(LiveRun {
        id,
        source: source.clone(),
        phase: Phase::Compiling,
        compile: None,
        cases: vec![None; model.cases.len()],
        quick: None,
        provisional: vec![None; model.cases.len()],
        timing: None,
        restarts: 0,
    });
    vec![Effect::StartRun { run: id, source }]
}

/// `r` or `f` while NVRTC or the CUDA headers are missing: starts `remedy`
/// unless one is under way.
fn remedy_missing_cuda(model: &mut Model, remedy: Remedy, effect: Effect) -> Vec<Effect> {
    let Some(missing) = model.cuda_missing.as_mut() else {
        model.notice = Some(
            "NVRTC is already found, and the file wants no missing CUDA header (`flashprof doctor` says where each is)"
                .into(),
        );
        return Vec::new();
    };
    if missing.remedy.is_some() {
        return Vec::new();
    }
    if matches!(remedy, Remedy::Fetching { .. }) {
        missing.fetch_failed = None;
    }
    missing.remedy = Some(remedy);
    vec![effect]
}

/// A library search's answer: with NVRTC (and the headers the file wanted)
/// found, the waiting text is checked.
fn on_libraries_searched(model: &mut Model, search: &LibrarySearch) -> Vec<Effect> {
    model.libraries = Some(search.clone());
    let before = model.cuda_missing.take();
    model.cuda_missing = CudaMissing::after(search, before.as_ref());
    let wanted_headers = before.is_some_and(|b| b.piece == CudaPiece::Headers);
    let still = model.cuda_missing.as_ref().map(|m| m.piece);
    let found = if wanted_headers {
        search
            .headers
            .clone()
            .map(|headers| format!("found {headers}"))
    } else {
        search
            .nvrtc
            .as_ref()
            .map(|nvrtc| format!("NVRTC found: {nvrtc}"))
    };
    let missing = match still {
        Some(CudaPiece::Headers) => "CUDA headers",
        _ => "NVRTC",
    };
    model.notice = Some(found.filter(|_| still.is_none()).unwrap_or_else(|| {
        format!(
            "looked again: still no {missing} (`flashprof doctor` says where it looked and what it refused)"
        )
    }));
    if still.is_some() {
        return Vec::new();
    }
    // The file is checked again even when a run is on screen: its compile
    // failed for want of what was just found.
    request_run(model, model.source.clone())
}

/// `f`'s fetch ended: look for what it installed, or say why it failed.
fn on_fetched(model: &mut Model, result: Result<String, String>) -> Vec<Effect> {
    let Some(missing) = model.cuda_missing.as_mut() else {
        return Vec::new();
    };
    match result {
        Ok(folder) => {
            missing.remedy = Some(Remedy::Searching);
            model.notice = Some(format!(
                "fetched into {folder}; looking for {} there",
                missing.noun()
            ));
            vec![Effect::SearchLibraries]
        }
        Err(reason) => {
            missing.remedy = None;
            missing.fetch_failed = Some(reason);
            Vec::new()
        }
    }
}

fn on_progress(model: &mut Model, run: RunId, progress: Progress) {
    match &progress {
        Progress::WorkerStarted { gpu, place, .. } => {
            model.gpu = Some(gpu.clone());
            model.worker_place = place.clone();
        }
        Progress::LinkMeasured {
            transport,
            added_ms,
        } => model.link = Some(format!("{transport} {added_ms:.0} ms")),
        Progress::QuickBuilt(outcome) | Progress::Compiled(outcome)
            if model.live.as_ref().is_some_and(|l| l.id == run) =>
        {
            note_missing_headers(model, outcome);
        }
        _ => {}
    }
    let Some(live) = model.live.as_mut().filter(|l| l.id == run) else {
        return;
    };
    match progress {
        Progress::WorkerStarted { .. } | Progress::LinkMeasured { .. } => {}
        Progress::QuickBuilt(outcome) => live.quick = Some(outcome),
        Progress::ProvisionalCase { index, outcome } => {
            if let Some(slot) = live.provisional.get_mut(index) {
                *slot = Some(outcome);
            }
        }
        Progress::Compiled(outcome) => {
            live.compile = Some(outcome);
            model.compile_scroll = 0;
        }
        Progress::CaseStarted { index } => live.phase = Phase::Case(index),
        Progress::CaseFinished { index, outcome } => {
            if let Some(slot) = live.cases.get_mut(index) {
                *slot = Some(outcome);
            }
        }
        Progress::WorkerRestarted { .. } => live.restarts += 1,
        Progress::TimingStarted => live.phase = Phase::Timing,
        Progress::TimingFinished(result) => live.timing = Some(result),
        Progress::CountersStarted { .. } => live.phase = Phase::Counters,
        Progress::CountersFinished(result) => show_counters(model, Some(&result)),
        Progress::LinesStarted => live.phase = Phase::Lines,
        Progress::LinesSampled(heat) => {
            live.phase = Phase::Counting;
            let now = Profiled {
                source: live.source.clone(),
                profile: *heat,
            };
            model.profiled_before = model.profiled.replace(now);
            model.heat_run = Some(run);
        }
    }
}

/// A compile that stopped for want of the CUDA headers makes them a missing
/// piece `f` fetches (on this machine's worker only); any other compile of
/// the file means they are not wanted now.
fn note_missing_headers(model: &mut Model, outcome: &CompileOutcome) {
    let wants_headers = outcome
        .problem
        .as_ref()
        .is_some_and(|p| p.kind == CompileProblemKind::HeadersMissing);
    match (&model.cuda_missing, &model.libraries) {
        (None, Some(search)) if wants_headers => {
            model.cuda_missing = Some(CudaMissing::of(CudaPiece::Headers, search, None));
        }
        // Even while a fetch for them is under way: the screen must not
        // call a file that compiled "not compiled". The fetch still lands,
        // and the next compile that wants them offers `r` to find it.
        (Some(missing), _) if missing.piece == CudaPiece::Headers && !wants_headers => {
            model.cuda_missing = None;
        }
        _ => {}
    }
}

fn on_run_finished(
    model: &mut Model,
    run: RunId,
    result: Result<Box<CheckReport>, CheckStopped>,
) -> Vec<Effect> {
    let Some(live) = model.live.take_if(|l| l.id == run) else {
        return Vec::new();
    };
    let heat_settled = settle_heat(model, run, result.as_ref().ok().map(|r| &**r));
    let mut effects = Vec::new();
    let stopped = result.as_ref().err().cloned();
    model.stopped = stopped.as_ref().map(|s| s.message.clone());
    match result {
        Ok(report) => {
            // Where the provisional verdicts were wrong, the footer says so:
            // a symptom in one build only is a finding about the kernel.
            if let Some(first) = report
                .quick_build
                .iter()
                .flat_map(|q| &q.differences)
                .next()
            {
                let more = report
                    .quick_build
                    .as_ref()
                    .map_or(0, |q| q.differences.len())
                    - 1;
                model.notice = Some(format!(
                    "quick and optimized builds differ on {}{}",
                    first.describe(),
                    if more > 0 {
                        format!(" (and {more} more case(s))")
                    } else {
                        String::new()
                    }
                ));
            }
            effects.push(Effect::RecordRun {
                source: live.source.clone(),
                report: report.clone(),
            });
            show_completed(
                model,
                Completed {
                    source: live.source,
                    report: *report,
                },
                heat_settled,
            );
        }
        Err(reason) => model.notice = Some(format!("the check could not run: {reason}")),
    }
    if let Some(notice) = link_notice(model, stopped.as_ref()) {
        model.notice = Some(notice);
    }
    if let Some(next) = model.queued.take() {
        effects.extend(request_run(model, next));
    }
    effects
}

/// When the remote worker's link failed or its Slurm allocation ended
/// (docs/REMOTE.md), the footer says so and how to ask again: the check's
/// stop when the link stopped it, else the cases the link left unrun in the
/// report on screen. The hint follows how the link failed, never its words.
fn link_notice(model: &Model, stopped: Option<&CheckStopped>) -> Option<String> {
    // A stop's notice is already in the footer.
    let stopped_by_link = stopped.and_then(|s| s.link).zip(model.notice.clone());
    let (loss, text) = match stopped_by_link {
        Some(found) => found,
        None => {
            let lost = model.last.as_ref()?.report.link_lost.as_ref()?;
            (lost.loss, lost.message.clone())
        }
    };
    Some(match loss {
        LinkLoss::Allocation => {
            format!("{text} -- r (or the next save) asks Slurm for a new allocation")
        }
        LinkLoss::Connection => format!("{text} -- r (or the next save) connects again"),
    })
}

/// Makes `completed` the result on screen, keeping the one before for deltas.
fn show_completed(model: &mut Model, completed: Completed, heat_settled: bool) {
    model.previous_resources = model
        .last
        .as_ref()
        .and_then(|c| c.report.compile.resources.clone());
    model.gpu = Some(completed.report.gpu.clone());
    // A new list of errors is read from its top; the same list keeps its place.
    let errors = model.compile().map(|shown| &shown.value.diagnostics);
    if errors != Some(&completed.report.compile.diagnostics) {
        model.compile_scroll = 0;
    }
    // A run that stopped short of counters (compile error, no GPU) clears
    // the panel rather than leave another version's figures under this one.
    show_counters(model, completed.report.counters.last());
    // A profile whose samples were on screen was put in place by
    // `settle_heat`; any other is the newest save's.
    if let Some(now) = profiled(&completed).filter(|_| !heat_settled) {
        model.profiled_before = model.profiled.replace(now);
    }
    model.last = Some(completed);
}

/// Ends the counting of `run`'s profile, whose samples are on screen: the
/// finished profile (`report`'s, with its counts) takes their place, not
/// the place of a newer save; a profile refused after all takes them off;
/// a run that ended without one leaves the samples, saying their counts
/// never came.
fn settle_heat(model: &mut Model, run: RunId, report: Option<&CheckReport>) -> bool {
    if model.heat_run.take_if(|heat| *heat == run).is_none() {
        return false;
    }
    match report.and_then(|r| r.lines.as_ref()) {
        Some(Ok(profile)) => {
            if let Some(shown) = model.profiled.as_mut() {
                shown.profile = profile.clone();
            }
        }
        // Refused after its samples were shown (its counted launch did not
        // compute its output): the save has no profile, and the view goes
        // back to the one before, as for any save without one.
        Some(Err(_)) => model.profiled = model.profiled_before.clone(),
        None => {
            if let Some(shown) = model.profiled.as_mut() {
                shown.profile.counts_missing =
                    Some("no counts: the check ended before them".into());
            }
        }
    }
    true
}

/// The line profile a finished check carries, with the text it is of.
fn profiled(completed: &Completed) -> Option<Profiled> {
    let profile = completed.report.lines.as_ref()?.as_ref().ok()?;
    Some(Profiled {
        source: completed.source.clone(),
        profile: profile.clone(),
    })
}

/// The counters panel's lines and the roofline plot of `result`, or neither.
fn show_counters(model: &mut Model, result: Option<&CountersResult>) {
    model.counters = result.map(CountersView::from_result);
    model.roofline = result.and_then(RooflinePlot::from_result);
}

fn on_key(model: &mut Model, key: KeyEvent) -> Vec<Effect> {
    if key.kind == KeyEventKind::Release {
        return Vec::new();
    }
    let Some(action) = action_for(&key) else {
        return Vec::new();
    };
    if action == Action::Quit {
        model.quitting = true;
        return vec![Effect::Quit];
    }
    match model.overlay.take() {
        Some(overlay) => on_overlay_key(model, overlay, action),
        None => on_panel_key(model, action),
    }
}

fn on_panel_key(model: &mut Model, action: Action) -> Vec<Effect> {
    match action {
        Action::Rerun if model.cuda_missing.is_some() => {
            return remedy_missing_cuda(model, Remedy::Searching, Effect::SearchLibraries)
        }
        Action::Rerun => return request_run(model, model.source.clone()),
        Action::FetchCuda if model.replay.is_none() => {
            let started = Remedy::Fetching {
                last_line: "starting pip...".into(),
            };
            return remedy_missing_cuda(model, started, Effect::FetchCuda);
        }
        Action::Help => model.overlay = Some(Overlay::Help),
        Action::Up
        | Action::Down
        | Action::PageUp
        | Action::PageDown
        | Action::First
        | Action::Last => move_in_panels(model, action),
        Action::CopyReproduce if model.replay.is_none() => return copy_reproduce(model),
        Action::MessagesUp | Action::MessagesDown => scroll_messages(model, action),
        Action::NextFailing => {
            if let Some(next) = model.next_failing(model.selected) {
                model.selected = next;
            }
        }
        Action::Open => {
            let has_map = model
                .case_outcome(model.selected)
                .is_some_and(|c| c.comparison.is_some());
            if has_map {
                model.overlay = Some(Overlay::Heatmap {
                    case: model.selected,
                });
            } else {
                model.notice = Some("this case has no heatmap: it produced no output".into());
            }
        }
        Action::History => model.overlay = Some(Overlay::History { selected: 0 }),
        Action::Counters => model.overlay = Some(Overlay::Counters),
        Action::Lines => {
            model.overlay = Some(Overlay::Lines {
                scroll: 0,
                hottest_first: false,
            })
        }
        Action::Pause => {
            if let Some(replay) = model.replay.as_mut() {
                replay.paused = !replay.paused;
            }
        }
        Action::StepForward => step_replay(model, 1),
        Action::StepBack => step_replay(model, -1),
        Action::Faster => return change_speed(model, -1),
        Action::Slower => return change_speed(model, 1),
        Action::Sanitize if model.replay.is_none() => {
            model.notice = Some(
                "compute-sanitizer (racecheck, memcheck, synccheck, initcheck) running on one small case...".into(),
            );
            return vec![Effect::Sanitize(model.source.clone())];
        }
        Action::UndoRestore if model.replay.is_none() => return undo_restore(model),
        Action::Close
        | Action::RestoreBest
        | Action::RestoreSelected
        | Action::UndoRestore
        | Action::Quit
        | Action::Sanitize
        | Action::CopyReproduce
        | Action::FetchCuda
        | Action::HottestFirst => {}
    }
    Vec::new()
}

/// Adds a run to the history; an open history overlay keeps its selection
/// on the same run (rows count from the newest).
fn push_history(model: &mut Model, summary: crate::app::history::RunSummary) {
    model.history.push(summary);
    if let Some(Overlay::History { selected }) = &mut model.overlay {
        *selected += 1;
    }
}

/// `u`: puts back the text the last restore replaced.
fn undo_restore(model: &mut Model) -> Vec<Effect> {
    if model.replay.is_some() {
        return Vec::new();
    }
    match model.undo_restore.clone() {
        Some(hash) => vec![Effect::Restore(RestoreTarget::Text(hash))],
        None => {
            model.notice = Some("no restore to undo in this session".into());
            Vec::new()
        }
    }
}

/// The arrows and the page keys move the case selection, or scroll the
/// errors while the file does not build (no case has run to select then).
fn move_in_panels(model: &mut Model, action: Action) {
    let areas = Areas::for_model(model, model.width, model.height);
    if model.not_built().is_some() {
        let page = usize::from(areas.compile.height.saturating_sub(2));
        let last = compile_scroll_limit(model, &areas);
        model.compile_scroll = moved(model.compile_scroll, action, page, last);
    } else {
        let last = model.cases.len().saturating_sub(1);
        model.selected = moved(model.selected, action, visible_case_rows(areas.cases), last);
    }
}

/// `[` and `]` scroll the compile panel a row whether or not the file builds,
/// so the warnings of a file that compiles can be read to their end too.
fn scroll_messages(model: &mut Model, action: Action) {
    let areas = Areas::for_model(model, model.width, model.height);
    let last = compile_scroll_limit(model, &areas);
    let step = if action == Action::MessagesUp {
        Action::Up
    } else {
        Action::Down
    };
    model.compile_scroll = moved(model.compile_scroll, step, 1, last);
}

/// Whether `action` moves through a list.
fn scrolls(action: Action) -> bool {
    matches!(
        action,
        Action::Up
            | Action::Down
            | Action::PageUp
            | Action::PageDown
            | Action::First
            | Action::Last
    )
}

/// Where `action` takes `position` in a list that shows `page` entries at
/// a time and can go up to `last`.
fn moved(position: usize, action: Action, page: usize, last: usize) -> usize {
    let page = page.max(1);
    let target = match action {
        Action::Up => position.saturating_sub(1),
        Action::Down => position.saturating_add(1),
        Action::PageUp => position.saturating_sub(page),
        Action::PageDown => position.saturating_add(page),
        Action::First => 0,
        Action::Last => last,
        _ => position,
    };
    target.min(last)
}

/// The command that reruns the check on screen, on the clipboard and in
/// the footer (not every terminal lets a program set its clipboard).
fn copy_reproduce(model: &mut Model) -> Vec<Effect> {
    let Some(command) = model.reproduce_command() else {
        model.notice = Some("no check has finished yet, so there is nothing to rerun".into());
        return Vec::new();
    };
    model.notice = Some(format!(
        "copied (where the terminal allows): {}",
        line_for_display(&command)
    ));
    vec![Effect::Copy(command)]
}

/// Shows a sanitizer pass: its first hazard (or that it is clean) in the
/// footer, and the pass in the report on screen, so the verdict counts it.
fn on_sanitized(
    model: &mut Model,
    result: Result<Box<crate::app::sanitize::SanitizerOutcome>, String>,
) {
    let pass = match result {
        Ok(pass) => pass,
        Err(reason) => {
            model.notice = Some(format!("sanitizer: {reason}"));
            return;
        }
    };
    let findings = pass.findings().count();
    model.notice = Some(match pass.findings().next() {
        Some(first) => format!(
            "sanitizer: {findings} hazard report(s); {}: {}",
            first.tool.name(),
            first.diagnosis
        ),
        None if pass.incomplete() => {
            let problems: Vec<String> = pass
                .tools
                .iter()
                .filter_map(|t| Some(format!("{}: {}", t.tool.name(), t.problem.as_deref()?)))
                .collect();
            format!("sanitizer did not finish: {}", problems.join("; "))
        }
        None => format!(
            "sanitizer: clean (racecheck, memcheck, synccheck, initcheck on {}, {:.1} s)",
            pass.case,
            pass.wall_ms / 1000.0
        ),
    });
    if let Some(last) = model.last.as_mut() {
        last.report.sanitizer = Some(*pass);
    }
}

fn on_overlay_key(model: &mut Model, overlay: Overlay, action: Action) -> Vec<Effect> {
    let mut effects = Vec::new();
    let kept = match (overlay, action) {
        (_, Action::Close) => None,
        (Overlay::Help, Action::Help) => None,
        (Overlay::Counters, Action::Counters) => None,
        (Overlay::Lines { .. }, Action::Lines) => None,
        (Overlay::Lines { hottest_first, .. }, Action::HottestFirst) => Some(Overlay::Lines {
            scroll: 0,
            hottest_first: !hottest_first,
        }),
        (
            Overlay::Lines {
                scroll,
                hottest_first,
            },
            action,
        ) if scrolls(action) => {
            // Any row can be brought to the top: rows take one screen
            // line or more (a reason, findings), so no page count is exact.
            let rows = overlay_rows(model.height);
            let last = model.source_rows(hottest_first).saturating_sub(1);
            Some(Overlay::Lines {
                scroll: moved(scroll, action, rows, last),
                hottest_first,
            })
        }
        (Overlay::Heatmap { .. }, Action::Open) => None,
        (Overlay::History { .. }, Action::History) => None,
        (Overlay::History { selected }, action) if scrolls(action) => {
            let (rows, last) = (overlay_rows(model.height), model.history.len());
            Some(Overlay::History {
                selected: moved(selected, action, rows, last.saturating_sub(1)),
            })
        }
        (Overlay::History { selected }, Action::Open) => {
            if let Some(run) = model.history.iter().rev().nth(selected) {
                effects.push(Effect::LoadDiff {
                    source_hash: run.source_hash.clone(),
                    title: format!("run {} → current text", model.history.len() - selected),
                });
            }
            Some(Overlay::History { selected })
        }
        (Overlay::History { selected }, Action::RestoreBest) => {
            if model.replay.is_none() {
                effects.push(Effect::Restore(RestoreTarget::BestPassing));
            }
            Some(Overlay::History { selected })
        }
        (Overlay::History { selected }, Action::RestoreSelected) => {
            if let Some(run) = model.history.iter().rev().nth(selected) {
                if model.replay.is_none() {
                    effects.push(Effect::Restore(RestoreTarget::Text(
                        run.source_hash.clone(),
                    )));
                }
            }
            Some(Overlay::History { selected })
        }
        (overlay, Action::UndoRestore) => {
            effects = undo_restore(model);
            Some(overlay)
        }
        (
            Overlay::Diff {
                title,
                lines,
                scroll,
            },
            action,
        ) if scrolls(action) => {
            // Scrolled to its end, the diff's last line is the overlay's last.
            let rows = overlay_rows(model.height);
            let scroll = moved(scroll, action, rows, lines.len().saturating_sub(rows));
            Some(Overlay::Diff {
                title,
                lines,
                scroll,
            })
        }
        (overlay, _) => Some(overlay),
    };
    model.overlay = kept;
    effects
}

fn on_mouse(model: &mut Model, mouse: MouseEvent) {
    if model.overlay.is_some() {
        return;
    }
    match mouse.kind {
        // Lecture mode draws no table to click in.
        MouseEventKind::Down(MouseButton::Left) if !model.present => {
            let areas = Areas::for_model(model, model.width, model.height);
            if let Some(index) = case_at(&areas, model, mouse.column, mouse.row) {
                model.selected = index;
            }
        }
        MouseEventKind::ScrollUp => move_in_panels(model, Action::Up),
        MouseEventKind::ScrollDown => move_in_panels(model, Action::Down),
        _ => {}
    }
}

/// Shows the replay run `delta` places away, stopping at either end.
fn step_replay(model: &mut Model, delta: isize) {
    let Some(replay) = model.replay.as_mut() else {
        return;
    };
    let last = replay.runs.len().saturating_sub(1);
    let target = replay.position.saturating_add_signed(delta).min(last);
    if target == last && delta > 0 {
        replay.paused = true;
    }
    replay.position = target;
    show_replay_position(model);
}

fn change_speed(model: &mut Model, slower: isize) -> Vec<Effect> {
    let Some(replay) = model.replay.as_mut() else {
        return Vec::new();
    };
    let current = replay.interval.as_millis() as u64;
    let index = REPLAY_INTERVALS_MS
        .iter()
        .position(|&ms| ms >= current)
        .unwrap_or(REPLAY_INTERVALS_MS.len() - 1);
    let next = index
        .saturating_add_signed(slower)
        .min(REPLAY_INTERVALS_MS.len() - 1);
    replay.interval = Duration::from_millis(REPLAY_INTERVALS_MS[next]);
    vec![Effect::SetTickInterval(replay.interval)]
}

/// Puts the replay's current run on screen as if it had just finished.
pub fn show_replay_position(model: &mut Model) {
    let Some(replay) = model.replay.as_ref() else {
        return;
    };
    let position = replay.position;
    let Some(run) = replay.runs.get(position).cloned() else {
        return;
    };
    let before = position
        .checked_sub(1)
        .and_then(|p| replay.runs.get(p))
        .and_then(|c| c.report.compile.resources.clone());
    let trend = replay
        .summaries
        .iter()
        .take(position + 1)
        .cloned()
        .collect();
    model.cases = run
        .report
        .cases
        .iter()
        .map(|c| CaseRow {
            name: c.name.clone(),
            shape: c.shape.clone(),
        })
        .collect();
    model.selected = model.selected.min(model.cases.len().saturating_sub(1));
    model.compile_scroll = 0;
    model.source = run.source.clone();
    model.gpu = Some(run.report.gpu.clone());
    // The newest profile up to this run, and the one before it.
    let mut profiles = replay.runs[..=position].iter().rev().filter_map(profiled);
    (model.profiled, model.profiled_before) = (profiles.next(), profiles.next());
    show_counters(model, run.report.counters.last());
    model.last = Some(run);
    model.previous_resources = before;
    model.history = trend;
}
