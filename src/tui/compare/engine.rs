//! The compare engine thread: runs a comparison's two checks, A then B,
//! each in a fresh worker (as `flashprof compare` does, so neither kernel
//! can disturb the other), on one seed, streaming progress to the screen.
//!
//! It works through requests in order; `update` never sends a second one
//! before the first has finished.

use std::sync::mpsc::{self, Receiver, Sender};

use super::model::{Column, Pair};
use super::msg::CompareMsg;
use crate::app::check::{run_check_alone, CheckPlan};
use crate::app::worker_handle::WorkerCommand;
use crate::tui::msg::RunId;

pub struct CompareEngine {
    requests: Sender<(RunId, Pair<String>)>,
}

impl CompareEngine {
    /// Starts the thread. `plan` is the template of every check; its seed
    /// is advanced by the run number, so each comparison draws fresh
    /// inputs and both sides of one comparison draw the same ones.
    pub fn start(
        plan: CheckPlan,
        paths: Pair<String>,
        command: WorkerCommand,
        messages: Sender<CompareMsg>,
    ) -> std::io::Result<Self> {
        let (requests, inbox) = mpsc::channel();
        std::thread::Builder::new()
            .name("flashprof-compare".into())
            .spawn(move || serve(&plan, &paths, &command, &inbox, &messages))?;
        Ok(Self { requests })
    }

    pub fn compare(&self, run: RunId, sources: Pair<String>) {
        // A closed channel means the thread ended with the UI; nothing to do.
        let _ = self.requests.send((run, sources));
    }
}

fn serve(
    template: &CheckPlan,
    paths: &Pair<String>,
    command: &WorkerCommand,
    inbox: &Receiver<(RunId, Pair<String>)>,
    messages: &Sender<CompareMsg>,
) {
    while let Ok((run, mut sources)) = inbox.recv() {
        let mut check = |column: Column| {
            let plan = template
                .of_source(
                    paths.get(column).clone(),
                    std::mem::take(sources.get_mut(column)),
                )
                .for_run(run);
            run_check_alone(&plan, command, |progress| {
                let _ = messages.send(CompareMsg::Progress {
                    run,
                    column,
                    progress: Box::new(progress),
                });
            })
            .map_err(|e| format!("{}: {e}", column.letter()))
        };
        // B runs even when A's kernel is broken (a report says so); only a
        // check that could not run at all ends the comparison.
        let result = check(Column::A)
            .and_then(|a| {
                Ok(Pair {
                    a,
                    b: check(Column::B)?,
                })
            })
            .map(Box::new);
        if messages.send(CompareMsg::Finished { run, result }).is_err() {
            return;
        }
    }
}
