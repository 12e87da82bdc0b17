//! The compare screen's key map, in the same table form as the single-file
//! screen's (`tui::keys`), so its help overlay lists every key it reacts to.

use crossterm::event::{KeyCode, KeyEvent};

use crate::tui::keys::{ctrl_key, help_table, key, lookup, Binding};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareAction {
    Quit,
    Rerun,
    Help,
    Close,
}

impl CompareAction {
    /// Every action, in the order the help lists them.
    pub const ALL: [CompareAction; 4] = [Self::Quit, Self::Rerun, Self::Help, Self::Close];

    pub fn describe(self) -> &'static str {
        match self {
            Self::Quit => "quit",
            Self::Rerun => "compare both files again now, on fresh inputs",
            Self::Help => "show or hide this help",
            Self::Close => "close the help",
        }
    }
}

const BINDINGS: &[Binding<CompareAction>] = &[
    key(KeyCode::Char('q'), CompareAction::Quit),
    ctrl_key(KeyCode::Char('c'), CompareAction::Quit),
    key(KeyCode::Char('r'), CompareAction::Rerun),
    key(KeyCode::Char('?'), CompareAction::Help),
    key(KeyCode::Esc, CompareAction::Close),
];

pub fn action_for(event: &KeyEvent) -> Option<CompareAction> {
    lookup(BINDINGS, event)
}

/// One row per action: its keys, then what it does.
pub fn help_rows() -> Vec<(String, &'static str)> {
    help_table(&CompareAction::ALL, BINDINGS, CompareAction::describe)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossterm::event::KeyModifiers;

    #[test]
    fn every_action_has_a_key_and_a_help_row() {
        let rows = help_rows();
        assert_eq!(rows.len(), CompareAction::ALL.len());
        assert!(rows.iter().all(|(keys, _)| !keys.is_empty()), "{rows:?}");
    }

    #[test]
    fn keys_of_the_single_file_screen_do_nothing_here() {
        let history = KeyEvent::new(KeyCode::Char('h'), KeyModifiers::NONE);
        assert_eq!(action_for(&history), None);
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(action_for(&ctrl_c), Some(CompareAction::Quit));
    }
}
