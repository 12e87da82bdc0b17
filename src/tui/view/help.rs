//! The help overlay, drawn from a key map itself: only the keys of the
//! screen in use (watching a file, or a replay).

use ratatui::layout::{Constraint, Rect};
use ratatui::text::Span;
use ratatui::widgets::{Block, Row, Table};
use ratatui::Frame;

use super::text::popup;
use crate::tui::keys::help_rows;
use crate::tui::model::Model;
use crate::tui::theme::Theme;

pub fn draw(frame: &mut Frame, area: Rect, model: &Model) {
    draw_rows(frame, area, help_rows(model.replay.is_some()), model.theme);
}

/// A popup listing `rows` (keys, what they do), sized to fit them.
pub fn draw_rows(frame: &mut Frame, area: Rect, rows: Vec<(String, &'static str)>, theme: Theme) {
    let height = rows.len() as u16 + 2;
    let rect = popup(frame, area, 76, height);
    let block = Block::bordered()
        .title(Span::styled(" keys ", theme.accent()))
        .title_bottom(" ? or esc close ");
    let table = Table::new(
        rows.into_iter()
            .map(|(keys, what)| Row::new([keys, what.to_string()])),
        [Constraint::Length(16), Constraint::Fill(1)],
    )
    .block(block);
    frame.render_widget(table, rect);
}
