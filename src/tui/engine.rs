//! The engine thread: owns the worker process and runs one check at a time,
//! streaming its progress into the UI's channel.
//!
//! The worker is kept between checks (starting one costs CUDA
//! initialisation), and only this thread touches it, so no lock is needed.
//! Scheduling (which save runs next) is decided in `update`; this thread
//! just works through what it is sent, in order. A search for NVIDIA's
//! libraries runs here too, between checks, because its answer changes how
//! the next worker is started.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;

use crate::app::check::{run_check_unless_stale, CheckError, CheckPlan, LineWorker};
use crate::app::worker_handle::{WorkerCommand, WorkerHandle};
use crate::gpu::found;

use super::msg::{LibrarySearch, Msg, RunId};

/// What the engine thread is asked to do.
enum Job {
    Check(RunId, String),
    /// Look for the libraries again; the next worker starts with what is found.
    SearchLibraries,
}

pub struct Engine {
    requests: Sender<Job>,
    /// The newest run whose text is stale (0: none).
    superseded: Arc<AtomicU64>,
}

impl Engine {
    /// Starts the thread. `plan` is the template of every check: its text
    /// is replaced by each save, and its seed advanced by the run number so
    /// each check draws fresh inputs that its report can reproduce.
    pub fn start(
        plan: CheckPlan,
        command: WorkerCommand,
        messages: Sender<Msg>,
    ) -> std::io::Result<Self> {
        let (requests, inbox) = mpsc::channel();
        let superseded = Arc::new(AtomicU64::new(0));
        let stale_up_to = Arc::clone(&superseded);
        std::thread::Builder::new()
            .name("flashprof-engine".into())
            .spawn(move || serve(&plan, command, &inbox, &stale_up_to, &messages))?;
        Ok(Self {
            requests,
            superseded,
        })
    }

    /// Marks `run`'s text stale: a check of it still waiting for its
    /// optimized build stops. Run ids grow, so this also covers older runs.
    pub fn supersede(&self, run: RunId) {
        self.superseded.fetch_max(run, Ordering::SeqCst);
    }

    /// Queues a check of `source`; its messages carry `run`.
    pub fn check(&self, run: RunId, source: String) {
        // A closed channel means the thread ended with the UI; nothing to do.
        let _ = self.requests.send(Job::Check(run, source));
    }

    /// Queues a search for NVIDIA's libraries, answered by [`Msg::LibrariesSearched`].
    pub fn search_libraries(&self) {
        let _ = self.requests.send(Job::SearchLibraries);
    }
}

fn serve(
    template: &CheckPlan,
    mut command: WorkerCommand,
    inbox: &Receiver<Job>,
    superseded: &AtomicU64,
    messages: &Sender<Msg>,
) {
    let mut worker: Option<WorkerHandle> = None;
    // Kept between saves: the next save's line worker is readied while the
    // student reads this one's profile, and the starter's profile is kept.
    let mut line_worker = LineWorker::for_saves();
    while let Ok(job) = inbox.recv() {
        let (run, source) = match job {
            Job::Check(run, source) => (run, source),
            Job::SearchLibraries => {
                command.search_libraries_again();
                // A worker started before the search knows only the old answer.
                if let Some(old) = worker.take() {
                    old.shutdown();
                }
                std::mem::replace(&mut line_worker, LineWorker::for_saves()).shutdown();
                let search = LibrarySearch::of(
                    &found::current(),
                    &crate::gpu::headers::current(),
                    &found::Context::current(),
                );
                if messages.send(Msg::LibrariesSearched(search)).is_err() {
                    break;
                }
                continue;
            }
        };
        let plan = template
            .of_source(template.source_path().to_owned(), source)
            .for_run(run);
        let stale = || superseded.load(Ordering::SeqCst) >= run;
        let result = run_check_unless_stale(
            &plan,
            &command,
            &mut worker,
            &mut line_worker,
            &stale,
            |progress| {
                let _ = messages.send(Msg::Progress {
                    run,
                    progress: Box::new(progress),
                });
            },
        );
        let finished = match result {
            Err(CheckError::Superseded) => Msg::RunSuperseded(run),
            result => Msg::RunFinished {
                run,
                result: result.map(Box::new).map_err(|e| e.stopped()),
            },
        };
        if messages.send(finished).is_err() {
            break;
        }
    }
    if let Some(worker) = worker {
        worker.shutdown();
    }
    line_worker.shutdown();
}
