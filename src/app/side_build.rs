//! The optimized build, made beside the GPU worker while the quick build's
//! verdicts come in (docs/PERFORMANCE.md, "Verdicts before the optimizer").
//!
//! NVRTC has no way to stop a compile, so the build runs in a process of its
//! own: a worker started without a GPU, sandboxed like every worker. A save
//! that makes the build stale ends that process, never the GPU worker and
//! its warm CUDA context. Starting it (a process here, a session over ssh)
//! happens on a thread, so the quick build never waits for it.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use super::worker_handle::{compile_timed_out, WorkerCommand, WorkerFailure, WorkerHandle};
use crate::protocol::{CompileOutcome, Event, Request};
use crate::worker::GpuSelection;

/// How often a wait looks at whether the build became stale.
const CANCEL_POLL: Duration = Duration::from_millis(10);

/// An optimized build under way.
pub struct SideBuild {
    state: State,
    deadline: Instant,
    timeout: Duration,
}

enum State {
    /// The builder is starting; it arrives with its request sent (or why not).
    Starting(Receiver<Result<WorkerHandle, String>>),
    Building(Box<WorkerHandle>),
}

/// How a side build ended.
#[derive(Debug)]
pub enum SideBuildEnd {
    /// The builder's answer; also a compile that went past the time or
    /// memory limit, which is the submission's compile error.
    Built(CompileOutcome),
    /// The text it was building is stale: the builder was stopped.
    Cancelled,
    /// No answer from the builder (it could not start, died or overstayed).
    Failed(String),
}

impl SideBuild {
    /// Starts a GPU-less worker from `command` and sends it `compile`,
    /// which must be answered within `timeout`.
    pub fn start(command: &WorkerCommand, compile: Request, timeout: Duration) -> Self {
        let command = command.clone().on_gpu(GpuSelection::Disabled);
        let (handed, builder) = mpsc::channel();
        let starter = handed.clone();
        let spawned = std::thread::Builder::new()
            .name("flashprof-side-build".into())
            .spawn(move || {
                let started = WorkerHandle::spawn(&command, timeout)
                    .map_err(|e| e.to_string())
                    .and_then(|mut handle| {
                        handle.send(&compile).map_err(|e| e.to_string())?;
                        Ok(handle)
                    });
                // When the build was cancelled meanwhile, nobody listens:
                // dropping the handle here stops the builder.
                let _ = starter.send(started);
            });
        if let Err(e) = spawned {
            let _ = handed.send(Err(format!("cannot start a thread for the build: {e}")));
        }
        Self {
            state: State::Starting(builder),
            deadline: Instant::now() + timeout,
            timeout,
        }
    }

    /// How the build ended, if it did within `wait`; `None` while it compiles.
    pub fn poll(&mut self, wait: Duration) -> Option<SideBuildEnd> {
        if let State::Starting(handed) = &self.state {
            match handed.recv_timeout(wait) {
                Ok(Ok(handle)) => {
                    // The compile's own time starts now, not the builder's start-up.
                    self.deadline = Instant::now() + self.timeout;
                    self.state = State::Building(Box::new(handle));
                }
                Ok(Err(reason)) => return Some(SideBuildEnd::Failed(reason)),
                Err(RecvTimeoutError::Disconnected) => {
                    return Some(SideBuildEnd::Failed("the builder thread ended".into()))
                }
                Err(RecvTimeoutError::Timeout) => return self.overstayed(),
            }
        }
        let State::Building(handle) = &mut self.state else {
            return None;
        };
        let memory_mb = handle.sandbox.as_ref().and_then(|s| s.compile_memory_mb);
        let over_limit = |failure: &WorkerFailure| {
            failure
                .compile_over_limit(memory_mb)
                .map(|problem| SideBuildEnd::Built(CompileOutcome::failed(Some(problem))))
        };
        let end = match handle.poll(wait) {
            // Dropping the handle when the build ends stops the builder.
            None if Instant::now() >= self.deadline => SideBuildEnd::Built(CompileOutcome::failed(
                Some(compile_timed_out(self.timeout)),
            )),
            None => return None,
            Some(Ok(Event::Compiled(outcome))) => SideBuildEnd::Built(outcome),
            Some(Ok(Event::Failed { message, .. })) => SideBuildEnd::Failed(message),
            Some(Ok(other)) => {
                SideBuildEnd::Failed(format!("unexpected answer to compile: {other:?}"))
            }
            Some(Err(failure)) => {
                over_limit(&failure).unwrap_or_else(|| SideBuildEnd::Failed(failure.to_string()))
            }
        };
        Some(end)
    }

    fn overstayed(&self) -> Option<SideBuildEnd> {
        (Instant::now() >= self.deadline)
            .then(|| SideBuildEnd::Failed(format!("no build within {:?}", self.timeout)))
    }

    /// Waits for the build, and stops it as soon as `stale()` says its text
    /// is no longer wanted. Dropping `self` stops the builder process.
    pub fn finish(mut self, stale: &dyn Fn() -> bool) -> SideBuildEnd {
        loop {
            if stale() {
                return SideBuildEnd::Cancelled;
            }
            if let Some(end) = self.poll(CANCEL_POLL) {
                return end;
            }
        }
    }
}
