//! The runtime: threads in, one channel, effects out.
//!
//! Every source of events runs on its own thread and sends a [`Msg`] into
//! one channel: the key reader (blocked in `crossterm::event::read`), the
//! file watcher, the engine, the history writer and, in replay, a clock.
//! The loop (in [`super::shell`], shared with the compare screen) blocks on
//! that channel, applies every waiting message, carries out the effects,
//! and draws once. Nothing here waits on the GPU or the
//! disk: checks run on the engine thread, history reads and writes on a
//! disk thread, in the order they were asked for.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::time::Duration;

use anyhow::Context;
use crossterm::event::Event;
use ratatui::Frame;

use super::engine::Engine;
use super::model::{Completed, CudaMissing, Model, Replay};
use super::msg::{Effect, LibrarySearch, Msg};
use super::shell::{
    display_name, event_loop, pin_folder_of, planned_rows, watch_into, Flow, Program,
};
use super::terminal;
use super::theme::Theme;
use super::update::{show_replay_position, update};
use super::view;
use crate::app::check::CheckPlan;
use crate::app::history::{
    line_diff, HistoryRecord, HistoryStore, RestoreOutcome, RestoreTarget, RunSummary, LOG_FILE,
};
use crate::app::watch::Watched;
use crate::app::worker_handle::WorkerCommand;
use crate::display::{line_for_display, path_for_display};
use crate::gpu::found;
use crate::outcome::CheckReport;
use crate::report::ReproduceCommand;
use crate::sys::pinned::PinnedFolder;

/// What a live session needs: the file, the check to run on each save, and
/// how to start a worker.
pub struct LiveSetup {
    pub file: PathBuf,
    pub plan: CheckPlan,
    pub command: WorkerCommand,
    /// Lecture mode.
    pub present: bool,
    /// `flashprof check` with the options of this session, for `y`.
    pub reproduce: ReproduceCommand,
}

/// Seconds per run when a replay starts.
const REPLAY_START_INTERVAL: Duration = Duration::from_secs(1);

/// Work for the disk thread.
enum DiskJob {
    Record {
        source: String,
        report: Box<CheckReport>,
    },
    Diff {
        source_hash: String,
        title: String,
        current: String,
    },
    Restore(RestoreTarget),
}

/// Watches `setup.file` and checks every save until the user quits.
pub fn run_live(setup: LiveSetup) -> anyhow::Result<()> {
    let file_label = display_name(&setup.file);
    let rows = planned_rows(&setup.plan);
    let mut model = Model::new(&file_label, rows, Theme::from_env());
    model.present = setup.present;
    model.lines_off = setup.plan.lines().is_none();
    model.reproduce = Some(setup.reproduce);
    // A worker on this machine compiles with this machine's NVRTC; without
    // one the screen says so and offers the fetch instead of a check.
    if setup.command.remote.is_none() {
        let search = LibrarySearch::of(
            &found::current(),
            &crate::gpu::headers::current(),
            &found::Context::current(),
        );
        model.cuda_missing = CudaMissing::after(&search, None);
        model.libraries = Some(search);
    }
    let (messages, inbox) = mpsc::channel();
    // The watch reads, restores write, and runs are stored beside the
    // watched file only while its folder is still the one pinned now: one
    // pin serves all three.
    let watched = pin_folder_of(&setup.file)?;
    let store = HistoryStore::beside(&setup.file, setup.plan.lab().name()).through(watched.clone());
    let disk = start_disk_thread(
        store,
        Some((setup.file.clone(), watched.clone())),
        messages.clone(),
    )?;
    let sanitize_template = setup.plan.clone();
    let sanitizer_messages = messages.clone();
    let fetch_messages = messages.clone();
    // The engine thread is not waited for at quit: what it holds on a cluster is released here.
    let remote = setup.command.remote.clone();
    let engine = Engine::start(setup.plan, setup.command, messages.clone())?;
    let _watcher = watch_into(&setup.file, watched, &messages, |change| {
        Some(match change {
            Watched::Content(bytes) => Msg::FileChanged(bytes),
            Watched::Gone => Msg::FileGone,
        })
    })?;
    let result = event_loop(model, messages, &inbox, |effect, model| {
        match effect {
            Effect::Quit => return Flow::Quit,
            Effect::StartRun { run, source } => engine.check(run, source),
            Effect::SupersedeRun(run) => engine.supersede(run),
            Effect::SetTickInterval(_) => {}
            Effect::Sanitize(text) => {
                start_sanitizer(text, &sanitize_template, &sanitizer_messages)
            }
            Effect::Copy(text) => terminal::copy_to_clipboard(&text),
            Effect::SearchLibraries => engine.search_libraries(),
            Effect::FetchCuda => start_fetch(&fetch_messages),
            other => send_disk_job(&disk, other, model),
        }
        Flow::Continue
    });
    if let Some(remote) = remote {
        remote.release();
    }
    result
}

/// Runs the sanitizer pass over `text`, the file as the watch last read it,
/// on the plan's first case, on a thread of its own; the result comes back
/// as [`Msg::Sanitized`].
fn start_sanitizer(text: String, template: &CheckPlan, messages: &Sender<Msg>) {
    use crate::app::sanitize::{locate, run_pass};
    let (template, replies) = (template.clone(), messages.clone());
    let spawned = std::thread::Builder::new()
        .name("flashprof-sanitizer".into())
        .spawn(move || {
            let result = (|| {
                let sanitizer = locate()?;
                let exe = std::env::current_exe()
                    .map_err(|e| format!("cannot locate flashprof itself: {e}"))?;
                let plan = template
                    .of_source(template.source_path().to_owned(), text)
                    .with_sanitizer(sanitizer)
                    .sanitize_pass(exe)
                    .ok_or("no case to run")?;
                Ok(Box::new(run_pass(&plan)))
            })();
            let _ = replies.send(Msg::Sanitized(result));
        });
    if let Err(e) = spawned {
        let _ = messages.send(Msg::Sanitized(Err(format!("cannot start its thread: {e}"))));
    }
}

/// Fetches NVIDIA's wheels (`f`) on a thread of its own, each line of
/// pip's output a [`Msg::FetchProgress`], the end a [`Msg::Fetched`].
fn start_fetch(messages: &Sender<Msg>) {
    let replies = messages.clone();
    let spawned = std::thread::Builder::new()
        .name("flashprof-fetch".into())
        .spawn(move || {
            let mut progress = |line: &str| {
                let _ = replies.send(Msg::FetchProgress(line.to_owned()));
            };
            let result = crate::gpu::fetch::fetch(&found::Context::current(), &mut progress);
            let _ = replies.send(Msg::Fetched(result.map(|f| path_for_display(&f))));
        });
    if let Err(e) = spawned {
        let _ = messages.send(Msg::Fetched(Err(format!("cannot start its thread: {e}"))));
    }
}

/// Plays back the runs of a history store, in lecture mode when `present`.
pub fn run_replay(store: HistoryStore, present: bool) -> anyhow::Result<()> {
    let history = store.read().with_context(|| {
        format!(
            "cannot read the history in {}",
            path_for_display(store.dir())
        )
    })?;
    let skipped = history.unreadable_lines;
    let older = history.older_bytes_not_read;
    let (runs, summaries) = replayable(&store, history.records);
    anyhow::ensure!(
        !runs.is_empty(),
        "no completed runs in {}",
        path_for_display(store.dir())
    );
    let label = runs[0].report.source_path.clone();
    let mut model = Model::new(&label, Vec::new(), Theme::from_env());
    model.present = present;
    model.replay = Some(Replay::new(runs, summaries, REPLAY_START_INTERVAL));
    show_replay_position(&mut model);
    let skipped_note = (skipped > 0 || older > 0).then(|| {
        let log = path_for_display(&store.dir().join(LOG_FILE));
        let mut note = format!(
            "{skipped} lines of {log} skipped (not UTF-8, unknown schema or a bad source hash)"
        );
        if older > 0 {
            note.push_str(&format!(
                "; its oldest {older} bytes not read (only the newest 64 MiB are)"
            ));
        }
        note
    });
    if let Some(note) = &skipped_note {
        model.notice = Some(note.clone());
    }
    let (messages, inbox) = mpsc::channel();
    let disk = start_disk_thread(store, None, messages.clone())?;
    let clock = start_clock(REPLAY_START_INTERVAL, messages.clone())?;
    let result = event_loop(model, messages, &inbox, |effect, model| {
        match effect {
            Effect::Quit => return Flow::Quit,
            Effect::SetTickInterval(interval) => {
                let _ = clock.send(interval);
            }
            Effect::StartRun { .. }
            | Effect::SupersedeRun(_)
            | Effect::Restore(_)
            | Effect::RecordRun { .. }
            | Effect::Copy(_)
            | Effect::SearchLibraries
            | Effect::FetchCuda => {}
            other => send_disk_job(&disk, other, model),
        }
        Flow::Continue
    });
    // Said again once the screen is back, where it stays readable.
    if let Some(note) = skipped_note {
        eprintln!("flashprof replay: {}", line_for_display(&note));
    }
    result
}

/// Records with a report, paired with their source text.
fn replayable(
    store: &HistoryStore,
    records: Vec<HistoryRecord>,
) -> (Vec<Completed>, Vec<RunSummary>) {
    records
        .into_iter()
        .filter_map(|record| {
            let summary = record.summary();
            let source = store
                .source(&record.source_hash)
                .unwrap_or_else(|e| format!("// the text of this run is missing: {e}"));
            let report = record.report?;
            Some((Completed { source, report }, summary))
        })
        .unzip()
}

/// Carries out a restore into `file`, whose text is read and written at
/// `through` (the same file, reached through its pinned folder), and says
/// what it did, in the words the footer shows.
fn restore_message(
    store: &HistoryStore,
    file: &Path,
    through: &Path,
    target: &RestoreTarget,
) -> Msg {
    let name = display_name(file);
    let lab = store.scope().map_or("", |scope| scope.lab.as_str());
    let what = match target {
        RestoreTarget::BestPassing => "the best passing version",
        RestoreTarget::Text(_) => "that version",
    };
    let short = |hash: &str| hash[..8.min(hash.len())].to_owned();
    match store.restore(through, target) {
        Ok(RestoreOutcome::Restored { from, replaced }) => Msg::Restored {
            note: match &replaced {
                Some(_) => format!(
                    "restored {what} ({}) into {name}; u puts back the text it replaced",
                    short(&from.source_hash)
                ),
                None => format!("restored {what} ({}) into {name}", short(&from.source_hash)),
            },
            replaced: replaced.as_deref().map(HistoryRecord::summary),
        },
        Ok(RestoreOutcome::AlreadyCurrent(record)) => Msg::Notice(format!(
            "{name} already holds {what} ({}): nothing written",
            short(&record.source_hash)
        )),
        Ok(RestoreOutcome::NothingPassed {
            other_files_passed: 0,
        }) => Msg::Notice(format!(
            "no run of {name} has passed in {lab} yet, so nothing was restored (t restores any run)"
        )),
        Ok(RestoreOutcome::NothingPassed { other_files_passed }) => Msg::Notice(format!(
            "no run of {name} has passed in {lab}: the {other_files_passed} passing run(s) in this \
             folder are other files' or labs', never restored here; nothing written"
        )),
        Ok(RestoreOutcome::NotInScope) => Msg::Notice(format!(
            "that text is not one of {name}'s runs in {lab}: not restored"
        )),
        Err(e) => Msg::Notice(format!("restore failed: {e}")),
    }
}

impl Program for Model {
    type Msg = Msg;
    type Effect = Effect;

    fn update(&mut self, msg: Msg) -> Vec<Effect> {
        update(self, msg)
    }

    fn draw(&self, frame: &mut Frame) {
        view::draw(frame, self);
    }

    fn terminal_event(event: Event) -> Option<Msg> {
        match event {
            Event::Key(key) => Some(Msg::Key(key)),
            Event::Mouse(mouse) => Some(Msg::Mouse(mouse)),
            Event::Resize(width, height) => Some(Msg::Resize { width, height }),
            _ => None,
        }
    }
}

/// The replay clock: a tick every `interval`, changed by sending a new one.
/// It sleeps in `recv_timeout`, so a change takes effect at once.
fn start_clock(interval: Duration, messages: Sender<Msg>) -> std::io::Result<Sender<Duration>> {
    let (control, changes) = mpsc::channel();
    std::thread::Builder::new()
        .name("flashprof-clock".into())
        .spawn(move || {
            let mut interval = interval;
            loop {
                match changes.recv_timeout(interval) {
                    Ok(next) => interval = next,
                    Err(RecvTimeoutError::Timeout) => {
                        if messages.send(Msg::Tick).is_err() {
                            return;
                        }
                    }
                    Err(RecvTimeoutError::Disconnected) => return,
                }
            }
        })?;
    Ok(control)
}

fn send_disk_job(disk: &Sender<DiskJob>, effect: Effect, model: &Model) {
    let job = match effect {
        Effect::LoadDiff { source_hash, title } => DiskJob::Diff {
            source_hash,
            title,
            current: model.source.clone(),
        },
        Effect::Restore(target) => DiskJob::Restore(target),
        Effect::RecordRun { source, report } => DiskJob::Record { source, report },
        Effect::StartRun { .. }
        | Effect::SupersedeRun(_)
        | Effect::SetTickInterval(_)
        | Effect::Sanitize(_)
        | Effect::Copy(_)
        | Effect::SearchLibraries
        | Effect::FetchCuda
        | Effect::Quit => return,
    };
    let _ = disk.send(job);
}

/// The history store's thread: appends, diffs and restores, one at a time,
/// answering with messages.
fn start_disk_thread(
    store: HistoryStore,
    file: Option<(PathBuf, PinnedFolder)>,
    messages: Sender<Msg>,
) -> std::io::Result<Sender<DiskJob>> {
    let (jobs, inbox) = mpsc::channel::<DiskJob>();
    match store.read() {
        Ok(history) if file.is_some() => {
            let summaries = history.records.iter().map(HistoryRecord::summary).collect();
            let _ = messages.send(Msg::HistoryLoaded(summaries));
        }
        Ok(_) => {}
        Err(e) => {
            let _ = messages.send(Msg::Notice(format!("history unreadable: {e}")));
        }
    }
    std::thread::Builder::new()
        .name("flashprof-history".into())
        .spawn(move || {
            for job in inbox {
                let watched = file.as_ref().map(|(path, pinned)| (path.as_path(), pinned));
                let reply = run_disk_job(&store, watched, job);
                if messages.send(reply).is_err() {
                    return;
                }
            }
        })?;
    Ok(jobs)
}

fn run_disk_job(store: &HistoryStore, file: Option<(&Path, &PinnedFolder)>, job: DiskJob) -> Msg {
    match job {
        DiskJob::Record { source, report } => match store.append_run(&source, &report) {
            Ok(record) => Msg::Recorded(record.summary()),
            Err(e) => Msg::Notice(format!(
                "could not write the history in {}: {e}",
                path_for_display(store.dir())
            )),
        },
        DiskJob::Diff {
            source_hash,
            title,
            current,
        } => match store.source(&source_hash) {
            Ok(old) => Msg::DiffReady {
                title,
                lines: line_diff(&old, &current),
            },
            Err(e) => Msg::Notice(format!("the text of that run is missing: {e}")),
        },
        DiskJob::Restore(target) => match file {
            None => Msg::Notice("nothing to restore into during a replay".into()),
            // The file is read and written through the folder held open
            // for the whole restore, so a swap midway reaches nothing else.
            Some((file, pinned)) => match pinned.open() {
                Ok(opened) => restore_message(store, file, &opened.file(), &target),
                Err(e) => Msg::Notice(format!("nothing restored into {}: {e}", display_name(file))),
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restore_after_the_watched_folder_was_swapped_for_a_link_writes_nothing() {
        let root = tempfile::tempdir().expect("temp dir");
        let (work, private) = (root.path().join("work"), root.path().join("private"));
        std::fs::create_dir(&work).expect("work");
        std::fs::create_dir(&private).expect("private");
        std::fs::write(private.join("prefill.cu"), "the TA's").expect("the TA's file");
        let file = work.join("prefill.cu");
        std::fs::write(&file, "mine").expect("the student's file");
        let store = HistoryStore::beside(&file, "flash-prefill");
        let pinned = PinnedFolder::of(&file).expect("pinned");
        std::fs::rename(&work, root.path().join("moved")).expect("moved away");
        std::os::unix::fs::symlink(&private, &work).expect("a link in its place");
        let reply = run_disk_job(
            &store,
            Some((&file, &pinned)),
            DiskJob::Restore(RestoreTarget::BestPassing),
        );
        let Msg::Notice(notice) = reply else {
            panic!("a restore through a swapped folder must be refused");
        };
        assert!(notice.contains("no longer the folder"), "{notice}");
        let ta_file = std::fs::read_to_string(private.join("prefill.cu")).expect("read");
        assert_eq!(ta_file, "the TA's");
        assert!(
            !private.join(".flashprof").exists(),
            "nothing stored in the TA's folder"
        );
    }
}
