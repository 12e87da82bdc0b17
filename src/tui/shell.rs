//! What every live screen needs around its model, whatever the model is:
//! the terminal taken and given back, a thread turning terminal events into
//! messages, watched files turned into messages, and the loop that applies
//! messages and draws.
//!
//! The single-file TUI and the compare screen differ only in their model,
//! messages and effects, so those are the [`Program`]'s associated types
//! and the loop is written once. Effects are handed to a closure the caller
//! supplies, because what an effect touches (an engine, a history store) is
//! the caller's business.

use std::path::Path;
use std::sync::mpsc::{Receiver, Sender};

use anyhow::Context;
use crossterm::event::Event;
use ratatui::Frame;

use super::model::CaseRow;
use super::terminal::TerminalSession;
use crate::app::check::CheckPlan;
use crate::app::watch::{watch_pinned, FileWatcher, Watched, DEFAULT_DEBOUNCE};
use crate::display::path_for_display;
use crate::lab::definition::Problem;
use crate::lab::source::{read_pinned_file, MAX_SOURCE_BYTES};
use crate::sys::pinned::PinnedFolder;

/// An Elm-style program: state that messages change and a view draws.
pub trait Program {
    type Msg: Send + 'static;
    type Effect;
    fn update(&mut self, msg: Self::Msg) -> Vec<Self::Effect>;
    fn draw(&self, frame: &mut Frame);
    /// The message a terminal event (key, mouse, resize) becomes, if any.
    fn terminal_event(event: Event) -> Option<Self::Msg>;
}

/// Whether the loop goes on after an effect.
#[derive(PartialEq, Eq)]
pub enum Flow {
    Continue,
    Quit,
}

/// Takes the terminal, then applies messages and draws until an effect
/// says quit or every sender is gone. The terminal is restored on return.
pub fn event_loop<P: Program>(
    mut program: P,
    messages: Sender<P::Msg>,
    inbox: &Receiver<P::Msg>,
    mut apply: impl FnMut(P::Effect, &P) -> Flow,
) -> anyhow::Result<()> {
    let mut session = TerminalSession::enter().context("cannot set up the terminal")?;
    let size = session.terminal.size()?;
    // The real size reaches the model before the first frame, through the
    // same message a later resize sends.
    if let Some(resize) = P::terminal_event(Event::Resize(size.width, size.height)) {
        for effect in program.update(resize) {
            if apply(effect, &program) == Flow::Quit {
                return Ok(());
            }
        }
    }
    start_terminal_reader::<P>(messages)?;
    loop {
        session.terminal.draw(|frame| program.draw(frame))?;
        let Ok(first) = inbox.recv() else {
            return Ok(());
        };
        // Everything already waiting is applied before the next frame, so a
        // burst of progress draws once.
        let waiting: Vec<P::Msg> = std::iter::once(first).chain(inbox.try_iter()).collect();
        for msg in waiting {
            for effect in program.update(msg) {
                if apply(effect, &program) == Flow::Quit {
                    return Ok(());
                }
            }
        }
    }
}

/// Blocks in `crossterm::event::read` on its own thread, so a slow model
/// never delays a key and an idle screen costs no CPU.
fn start_terminal_reader<P: Program>(messages: Sender<P::Msg>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("flashprof-keys".into())
        .spawn(move || loop {
            let msg = match crossterm::event::read() {
                Ok(event) => P::terminal_event(event),
                Err(_) => return,
            };
            if let Some(msg) = msg {
                if messages.send(msg).is_err() {
                    return;
                }
            }
        })?;
    Ok(())
}

/// The folder of a file the TUI watches, pinned as it is now
/// ([`PinnedFolder`]): the watch and every restore use it.
pub fn pin_folder_of(file: &Path) -> anyhow::Result<PinnedFolder> {
    PinnedFolder::of(file)
        .with_context(|| format!("cannot open the folder of {}", path_for_display(file)))
}

/// Watches `file`, in the folder `pinned` holds, and sends `wrap` of its
/// current content and then of every save that changes it, and of its
/// disappearance (`wrap` may send nothing for that). The watch lasts as
/// long as the returned handle.
pub fn watch_into<M: Send + 'static>(
    file: &Path,
    pinned: PinnedFolder,
    messages: &Sender<M>,
    wrap: fn(Watched) -> Option<M>,
) -> anyhow::Result<FileWatcher> {
    // Never blocks on a FIFO or device node, and never reads past the size limit.
    // Never a link: the TUI compiles, shows and stores only the file itself,
    // and only from the pinned folder (one swapped later for a link is not
    // read from).
    let initial = read_pinned_file(&pinned, file, MAX_SOURCE_BYTES)
        .map(|read| read.bytes)
        .with_context(|| format!("cannot read {}", path_for_display(file)))?;
    let watcher_messages = messages.clone();
    let watcher = watch_pinned(pinned, file, DEFAULT_DEBOUNCE, move |change| {
        if let Some(msg) = wrap(change) {
            let _ = watcher_messages.send(msg);
        }
    })?;
    if let Some(msg) = wrap(Watched::Content(initial)) {
        let _ = messages.send(msg);
    }
    Ok(watcher)
}

/// A file's name as a header shows it: the last component, or the whole
/// path when it has none.
pub fn display_name(file: &Path) -> String {
    file.file_name().map_or_else(
        || file.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// Names for two files that tell them apart: each one's file name, or as
/// many of its last path components as it takes (`alice/prefill.cu` and
/// `bob/prefill.cu`), or the whole path when only the start differs.
pub fn names_telling_apart(a: &Path, b: &Path) -> (String, String) {
    let tail = |path: &Path, count: usize| {
        let parts: Vec<_> = path.components().collect();
        let from = parts.len().saturating_sub(count);
        parts[from..]
            .iter()
            .collect::<std::path::PathBuf>()
            .display()
            .to_string()
    };
    let longest = a.components().count().max(b.components().count());
    (1..=longest)
        .map(|count| (tail(a, count), tail(b, count)))
        .find(|(x, y)| x != y)
        .unwrap_or_else(|| (a.display().to_string(), b.display().to_string()))
}

/// The table rows of the cases `plan` will run, before any has run.
pub fn planned_rows(plan: &CheckPlan) -> Vec<CaseRow> {
    plan.cases()
        .iter()
        .map(|c| CaseRow {
            name: c.name.clone(),
            shape: plan.lab().problem(c).unwrap_or_else(|_| Problem::unknown()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::names_telling_apart;
    use std::path::Path;

    fn names(a: &str, b: &str) -> (String, String) {
        names_telling_apart(Path::new(a), Path::new(b))
    }

    #[test]
    fn two_files_are_named_by_as_much_of_their_paths_as_tells_them_apart() {
        let pair = |a: &str, b: &str| (a.to_string(), b.to_string());
        assert_eq!(names("a.cu", "b.cu"), pair("a.cu", "b.cu"));
        assert_eq!(
            names("class/alice/prefill.cu", "class/bob/prefill.cu"),
            pair("alice/prefill.cu", "bob/prefill.cu")
        );
        assert_eq!(
            names(
                "/srv/2026/alice/v1/prefill.cu",
                "/srv/2026/alice/v2/prefill.cu"
            ),
            pair("v1/prefill.cu", "v2/prefill.cu")
        );
        assert_eq!(
            names("alice/prefill.cu", "prefill.cu"),
            pair("alice/prefill.cu", "prefill.cu")
        );
        // The same file twice: nothing tells them apart, so the paths as given.
        assert_eq!(names("x/k.cu", "x/k.cu"), pair("x/k.cu", "x/k.cu"));
    }
}
