//! The hardware counters panel. Counters are collected elsewhere; until
//! they arrive the panel says so, and without a GPU it says why not.
//!
//! Collected values are one line each and never wrap: the panel is small,
//! so a long line loses its tail rather than pushing the lines after it
//! out of sight, and the model lists the most telling line first.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};
use ratatui::Frame;

use super::text::panel;
use crate::tui::model::{CountersView, Model};

pub fn draw(frame: &mut Frame, area: Rect, model: &Model) {
    let block = panel("counters", false, model.theme);
    let body = match (&model.counters, &model.gpu) {
        (Some(CountersView::Collected { lines }), _) => Paragraph::new(
            lines
                .iter()
                .map(|(label, value)| {
                    Line::from(vec![
                        Span::styled(format!("{label} "), model.theme.accent()),
                        Span::raw(value.clone()),
                    ])
                })
                .collect::<Vec<_>>(),
        ),
        (Some(CountersView::Unavailable { reason }), _) => {
            wrapped(format!("unavailable: {reason}"))
        }
        (None, Some(Err(_))) => wrapped("unavailable: no GPU".into()),
        (None, _) => wrapped("not collected yet".into()),
    };
    frame.render_widget(body.block(block), area);
}

/// A sentence, wrapped to the panel: one thought, so no line to lose.
fn wrapped(text: String) -> Paragraph<'static> {
    Paragraph::new(text).wrap(Wrap { trim: true })
}
