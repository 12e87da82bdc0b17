//! The compare screen's state machine: `update(model, msg)` changes the
//! model and returns the effects the runtime carries out.
//!
//! Scheduling is a single-job queue, as in the single-file screen: at most
//! one comparison is in flight, and saves that arrive meanwhile (of A, of
//! B, or of both, any number of times) collapse into one flag. When the
//! running comparison ends, one more starts on the files' newest texts, so
//! a burst of saves costs one extra comparison and never a stale one.

use crossterm::event::{KeyEvent, KeyEventKind};

use super::keys::{action_for, CompareAction};
use super::model::{Column, CompareModel, Comparison, LiveComparison, Pair};
use super::msg::{CompareEffect, CompareMsg};
use crate::outcome::{CheckReport, Progress};
use crate::tui::model::Phase;
use crate::tui::msg::RunId;

pub fn update(model: &mut CompareModel, msg: CompareMsg) -> Vec<CompareEffect> {
    match msg {
        CompareMsg::Key(key) => on_key(model, key),
        CompareMsg::Resize { width, height } => {
            model.width = width;
            model.height = height;
            Vec::new()
        }
        CompareMsg::FileChanged { column, bytes } => on_file_changed(model, column, bytes),
        // The last comparison stays on screen; the next save compares again.
        CompareMsg::FileGone { column } => {
            *model.gone.get_mut(column) = true;
            Vec::new()
        }
        CompareMsg::Progress {
            run,
            column,
            progress,
        } => {
            on_progress(model, run, column, *progress);
            Vec::new()
        }
        CompareMsg::Finished { run, result } => on_finished(model, run, result),
    }
}

fn on_file_changed(model: &mut CompareModel, column: Column, bytes: Vec<u8>) -> Vec<CompareEffect> {
    *model.gone.get_mut(column) = false;
    match String::from_utf8(bytes) {
        Ok(text) => {
            *model.sources.get_mut(column) = Some(text);
            model.notice = None;
            request_comparison(model)
        }
        Err(_) => {
            model.notice = Some(format!(
                "{} ({}) is not UTF-8 text; fix the encoding to compare it",
                model.files.get(column),
                column.letter()
            ));
            Vec::new()
        }
    }
}

/// Starts a comparison of the newest texts now, or flags one to follow the
/// running one. Nothing starts until both files have been read.
fn request_comparison(model: &mut CompareModel) -> Vec<CompareEffect> {
    let (Some(a), Some(b)) = (&model.sources.a, &model.sources.b) else {
        return Vec::new();
    };
    if model.live.is_some() {
        model.rerun_waiting = true;
        return Vec::new();
    }
    let sources = Pair {
        a: a.clone(),
        b: b.clone(),
    };
    let run = model.next_run;
    model.next_run += 1;
    model.live = Some(LiveComparison {
        id: run,
        sources: sources.clone(),
        column: Column::A,
        phase: Phase::Compiling,
    });
    vec![CompareEffect::StartComparison { run, sources }]
}

fn on_progress(model: &mut CompareModel, run: RunId, column: Column, progress: Progress) {
    if let Progress::WorkerStarted { gpu, .. } = &progress {
        model.gpu = Some(gpu.clone());
    }
    let Some(live) = model.live.as_mut().filter(|l| l.id == run) else {
        return;
    };
    live.column = column;
    live.phase = match progress {
        // Each side has a worker of its own, so a new worker is a new side.
        Progress::WorkerStarted { .. } => Phase::Compiling,
        Progress::CaseStarted { index } => Phase::Case(index),
        Progress::TimingStarted => Phase::Timing,
        Progress::CountersStarted { .. } => Phase::Counters,
        _ => live.phase,
    };
}

fn on_finished(
    model: &mut CompareModel,
    run: RunId,
    result: Result<Box<Pair<CheckReport>>, String>,
) -> Vec<CompareEffect> {
    let Some(live) = model.live.take_if(|l| l.id == run) else {
        return Vec::new();
    };
    match result {
        Ok(reports) => {
            model.gpu = Some(reports.a.gpu.clone());
            model.last = Some(Comparison {
                sources: live.sources,
                reports: *reports,
            });
        }
        Err(reason) => model.notice = Some(format!("the comparison could not run: {reason}")),
    }
    if std::mem::take(&mut model.rerun_waiting) {
        request_comparison(model)
    } else {
        Vec::new()
    }
}

fn on_key(model: &mut CompareModel, key: KeyEvent) -> Vec<CompareEffect> {
    if key.kind == KeyEventKind::Release {
        return Vec::new();
    }
    match action_for(&key) {
        Some(CompareAction::Quit) => {
            model.quitting = true;
            vec![CompareEffect::Quit]
        }
        Some(CompareAction::Rerun) => request_comparison(model),
        Some(CompareAction::Help) => {
            model.help = !model.help;
            Vec::new()
        }
        Some(CompareAction::Close) => {
            model.help = false;
            Vec::new()
        }
        None => Vec::new(),
    }
}
