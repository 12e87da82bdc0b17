//! The compare screen's runtime: two file watchers, the compare engine and
//! the key reader feed one channel; the shared loop in `tui::shell` applies
//! the messages, draws, and hands effects back here.

use std::path::PathBuf;
use std::sync::mpsc;

use crossterm::event::Event;
use ratatui::Frame;

use super::engine::CompareEngine;
use super::model::{Column, CompareModel, Pair};
use super::msg::{CompareEffect, CompareMsg};
use super::update::update;
use crate::app::check::CheckPlan;
use crate::app::watch::Watched;
use crate::app::worker_handle::WorkerCommand;
use crate::tui::shell::{
    event_loop, names_telling_apart, pin_folder_of, planned_rows, watch_into, Flow, Program,
};
use crate::tui::theme::Theme;
use crate::tui::view;

/// What a compare session needs: the two files, the check both get, and
/// how to start a worker.
pub struct CompareSetup {
    /// A, then B.
    pub files: [PathBuf; 2],
    /// The check of either file, but for its path and text.
    pub plan: CheckPlan,
    pub command: WorkerCommand,
}

impl Program for CompareModel {
    type Msg = CompareMsg;
    type Effect = CompareEffect;

    fn update(&mut self, msg: CompareMsg) -> Vec<CompareEffect> {
        update(self, msg)
    }

    fn draw(&self, frame: &mut Frame) {
        view::compare::draw(frame, self);
    }

    fn terminal_event(event: Event) -> Option<CompareMsg> {
        match event {
            Event::Key(key) => Some(CompareMsg::Key(key)),
            Event::Resize(width, height) => Some(CompareMsg::Resize { width, height }),
            _ => None,
        }
    }
}

/// Watches both files and compares them after every save until the user quits.
pub fn run_compare(setup: CompareSetup) -> anyhow::Result<()> {
    let [file_a, file_b] = setup.files;
    let rows = planned_rows(&setup.plan);
    let (a, b) = names_telling_apart(&file_a, &file_b);
    let labels = Pair { a, b };
    let model = CompareModel::new(labels, rows, Theme::from_env());
    let paths = Pair {
        a: file_a.display().to_string(),
        b: file_b.display().to_string(),
    };
    let (messages, inbox) = mpsc::channel();
    // The engine thread is not waited for at quit: what it holds on a cluster is released here.
    let remote = setup.command.remote.clone();
    let engine = CompareEngine::start(setup.plan, paths, setup.command, messages.clone())?;
    let _watch_a = watch_into(&file_a, pin_folder_of(&file_a)?, &messages, |change| {
        saved(Column::A, change)
    })?;
    let _watch_b = watch_into(&file_b, pin_folder_of(&file_b)?, &messages, |change| {
        saved(Column::B, change)
    })?;
    let result = event_loop(model, messages, &inbox, |effect, _| match effect {
        CompareEffect::Quit => Flow::Quit,
        CompareEffect::StartComparison { run, sources } => {
            engine.compare(run, sources);
            Flow::Continue
        }
    });
    if let Some(remote) = remote {
        remote.release();
    }
    result
}

/// A save of one file, or its deletion, as a message.
fn saved(column: Column, change: Watched) -> Option<CompareMsg> {
    match change {
        Watched::Content(bytes) => Some(CompareMsg::FileChanged { column, bytes }),
        Watched::Gone => Some(CompareMsg::FileGone { column }),
    }
}
