//! The key map: one table from keys to actions, read both to act on a key
//! and to draw the help overlay, so the help can never miss a key.
//!
//! The table machinery ([`Binding`], [`lookup`], [`help_table`]) is generic
//! over the action type so the compare screen, which has far fewer keys,
//! keeps its own table with the same guarantee.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// What a key asks for; `update` decides what it means in the current view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Quit,
    Rerun,
    Help,
    Up,
    Down,
    PageUp,
    PageDown,
    First,
    Last,
    NextFailing,
    MessagesUp,
    MessagesDown,
    Open,
    Close,
    History,
    RestoreBest,
    RestoreSelected,
    UndoRestore,
    Pause,
    StepForward,
    StepBack,
    Faster,
    Slower,
    Sanitize,
    Counters,
    Lines,
    HottestFirst,
    CopyReproduce,
    FetchCuda,
}

/// Which screen a key works on: watching a file, replaying a history, or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Both,
    Live,
    Replay,
}

impl Action {
    /// Every action, in the order the help lists them.
    pub const ALL: [Action; 29] = [
        Action::Quit,
        Action::Rerun,
        Action::Help,
        Action::Up,
        Action::Down,
        Action::PageUp,
        Action::PageDown,
        Action::First,
        Action::Last,
        Action::NextFailing,
        Action::MessagesUp,
        Action::MessagesDown,
        Action::Open,
        Action::Close,
        Action::Counters,
        Action::Lines,
        Action::HottestFirst,
        Action::History,
        Action::RestoreBest,
        Action::RestoreSelected,
        Action::UndoRestore,
        Action::CopyReproduce,
        Action::Pause,
        Action::StepForward,
        Action::StepBack,
        Action::Faster,
        Action::Slower,
        Action::Sanitize,
        Action::FetchCuda,
    ];

    pub fn describe(self) -> &'static str {
        match self {
            Action::Quit => "quit",
            Action::Rerun => "check the file again now (no NVRTC: look again)",
            Action::Help => "show or hide this help",
            Action::Up => "the case above; scroll up the errors, history, a diff",
            Action::Down => "the case below; scroll down the errors, history, a diff",
            Action::PageUp => "a page up (cases, errors, history, a diff)",
            Action::PageDown => "a page down (cases, errors, history, a diff)",
            Action::First => "to the first case, error, run or line",
            Action::Last => "to the last case, error, run or line",
            Action::NextFailing => "jump to the next case that did not pass",
            Action::MessagesUp => "scroll up the compiler's messages, warnings too",
            Action::MessagesDown => "scroll down the compiler's messages, warnings too",
            Action::Open => "heatmap of the selected case; in history, diff that run",
            Action::Close => "close the overlay",
            Action::Counters => "every counter line whole, and the roofline plot large",
            Action::Lines => "where the time goes, line by line (the source view)",
            Action::HottestFirst => "in the source view: the hottest lines first, or file order",
            Action::History => "past runs of this file",
            Action::RestoreBest => "in history: restore this file's best passing version",
            Action::RestoreSelected => "in history: restore the selected run's text",
            Action::UndoRestore => "undo the last restore (the text it replaced comes back)",
            Action::CopyReproduce => "copy the command that reruns this check (its seed too)",
            Action::Pause => "replay: pause or resume",
            Action::StepForward => "replay: next run",
            Action::StepBack => "replay: previous run",
            Action::Faster => "replay: faster",
            Action::Slower => "replay: slower",
            Action::Sanitize => "compute-sanitizer over the file on one small case",
            Action::FetchCuda => "fetch NVRTC or CUDA headers (flashprof fetch-cuda)",
        }
    }

    /// The screen the action works on: a replay checks, writes and copies
    /// nothing, and a watched file has no runs to step through.
    fn mode(self) -> Mode {
        match self {
            Action::Rerun
            | Action::RestoreBest
            | Action::RestoreSelected
            | Action::UndoRestore
            | Action::Sanitize
            | Action::CopyReproduce
            | Action::FetchCuda => Mode::Live,
            Action::Pause
            | Action::StepForward
            | Action::StepBack
            | Action::Faster
            | Action::Slower => Mode::Replay,
            _ => Mode::Both,
        }
    }

    /// Whether the action does anything on a replay (`replay`) or on a
    /// watched file.
    pub fn works_in(self, replay: bool) -> bool {
        match self.mode() {
            Mode::Both => true,
            Mode::Live => !replay,
            Mode::Replay => replay,
        }
    }
}

/// One key (with or without ctrl) and the action it asks for.
pub struct Binding<A> {
    code: KeyCode,
    ctrl: bool,
    action: A,
}

/// `code` pressed on its own.
pub const fn key<A>(code: KeyCode, action: A) -> Binding<A> {
    Binding {
        code,
        ctrl: false,
        action,
    }
}

/// `code` pressed with ctrl.
pub const fn ctrl_key<A>(code: KeyCode, action: A) -> Binding<A> {
    Binding {
        code,
        ctrl: true,
        action,
    }
}

const BINDINGS: &[Binding<Action>] = &[
    key(KeyCode::Char('q'), Action::Quit),
    ctrl_key(KeyCode::Char('c'), Action::Quit),
    key(KeyCode::Char('r'), Action::Rerun),
    key(KeyCode::Char('?'), Action::Help),
    key(KeyCode::Up, Action::Up),
    key(KeyCode::Char('k'), Action::Up),
    key(KeyCode::Down, Action::Down),
    key(KeyCode::Char('j'), Action::Down),
    key(KeyCode::PageUp, Action::PageUp),
    key(KeyCode::PageDown, Action::PageDown),
    key(KeyCode::Home, Action::First),
    key(KeyCode::Char('g'), Action::First),
    key(KeyCode::End, Action::Last),
    key(KeyCode::Char('G'), Action::Last),
    key(KeyCode::Tab, Action::NextFailing),
    key(KeyCode::Char('['), Action::MessagesUp),
    key(KeyCode::Char(']'), Action::MessagesDown),
    key(KeyCode::Enter, Action::Open),
    key(KeyCode::Esc, Action::Close),
    key(KeyCode::Char('c'), Action::Counters),
    key(KeyCode::Char('l'), Action::Lines),
    key(KeyCode::Char('o'), Action::HottestFirst),
    key(KeyCode::Char('h'), Action::History),
    key(KeyCode::Char('b'), Action::RestoreBest),
    key(KeyCode::Char('t'), Action::RestoreSelected),
    key(KeyCode::Char('u'), Action::UndoRestore),
    key(KeyCode::Char(' '), Action::Pause),
    key(KeyCode::Right, Action::StepForward),
    key(KeyCode::Char('n'), Action::StepForward),
    key(KeyCode::Left, Action::StepBack),
    key(KeyCode::Char('p'), Action::StepBack),
    key(KeyCode::Char('+'), Action::Faster),
    key(KeyCode::Char('='), Action::Faster),
    key(KeyCode::Char('-'), Action::Slower),
    key(KeyCode::Char('s'), Action::Sanitize),
    key(KeyCode::Char('y'), Action::CopyReproduce),
    key(KeyCode::Char('f'), Action::FetchCuda),
];

/// The action bound to `event`, if any.
pub fn action_for(event: &KeyEvent) -> Option<Action> {
    lookup(BINDINGS, event)
}

/// The action `bindings` give `event`, if any. Shift is ignored because it
/// is how `?` and `+` are typed on most layouts.
pub fn lookup<A: Copy>(bindings: &[Binding<A>], event: &KeyEvent) -> Option<A> {
    let ctrl = event.modifiers.contains(KeyModifiers::CONTROL);
    bindings
        .iter()
        .find(|b| b.code == event.code && b.ctrl == ctrl)
        .map(|b| b.action)
}

fn label<A>(binding: &Binding<A>) -> String {
    let name = match binding.code {
        KeyCode::Char(' ') => "space".to_string(),
        KeyCode::Char(c) => c.to_string(),
        KeyCode::Up => "↑".into(),
        KeyCode::Down => "↓".into(),
        KeyCode::Left => "←".into(),
        KeyCode::Right => "→".into(),
        KeyCode::Tab => "tab".into(),
        KeyCode::Enter => "enter".into(),
        KeyCode::Esc => "esc".into(),
        KeyCode::PageUp => "PgUp".into(),
        KeyCode::PageDown => "PgDn".into(),
        // crossterm's own name: `Home`, `End`, `F1`...
        other => other.to_string(),
    };
    if binding.ctrl {
        format!("ctrl-{name}")
    } else {
        name
    }
}

/// One row per action that works on this screen (a replay, or a watched
/// file): its keys, then what it does.
pub fn help_rows(replay: bool) -> Vec<(String, &'static str)> {
    let actions: Vec<Action> = Action::ALL
        .into_iter()
        .filter(|action| action.works_in(replay))
        .collect();
    help_table(&actions, BINDINGS, Action::describe)
}

/// One row per action of `actions`, in that order: every key `bindings`
/// give it, then `describe` of it.
pub fn help_table<A: Copy + PartialEq>(
    actions: &[A],
    bindings: &[Binding<A>],
    describe: fn(A) -> &'static str,
) -> Vec<(String, &'static str)> {
    actions
        .iter()
        .map(|&action| {
            let keys: Vec<String> = bindings
                .iter()
                .filter(|b| b.action == action)
                .map(label)
                .collect();
            (keys.join(" / "), describe(action))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_action_has_a_key_and_a_help_row_on_the_screen_it_works_on() {
        let (live, replay) = (help_rows(false), help_rows(true));
        let shared = Action::ALL
            .iter()
            .filter(|a| a.works_in(false) && a.works_in(true));
        assert_eq!(
            live.len() + replay.len() - shared.count(),
            Action::ALL.len()
        );
        assert!(live.iter().chain(&replay).all(|(keys, _)| !keys.is_empty()));
    }

    #[test]
    fn each_screen_s_help_leaves_out_the_other_s_keys() {
        let said = |replay| -> Vec<&str> {
            help_rows(replay)
                .into_iter()
                .map(|(_, what)| what)
                .collect()
        };
        let live = said(false);
        assert!(live.contains(&Action::Rerun.describe()), "{live:?}");
        assert!(!live.contains(&"replay: pause or resume"), "{live:?}");
        let replay = said(true);
        assert!(replay.contains(&"replay: pause or resume"), "{replay:?}");
        for missing in [
            Action::Rerun,
            Action::Sanitize,
            Action::RestoreBest,
            Action::RestoreSelected,
            Action::UndoRestore,
            Action::CopyReproduce,
            Action::FetchCuda,
        ] {
            assert!(!replay.contains(&missing.describe()), "{replay:?}");
        }
    }

    #[test]
    fn ctrl_c_quits_but_plain_c_opens_the_counters() {
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(action_for(&ctrl_c), Some(Action::Quit));
        let c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::NONE);
        assert_eq!(action_for(&c), Some(Action::Counters));
        let x = KeyEvent::new(KeyCode::Char('x'), KeyModifiers::NONE);
        assert_eq!(action_for(&x), None);
        let question = KeyEvent::new(KeyCode::Char('?'), KeyModifiers::SHIFT);
        assert_eq!(action_for(&question), Some(Action::Help));
    }
}
