//! The hardware counters panel. Counters are collected elsewhere; until
//! they arrive the panel says so, and without a GPU it says why not.

use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Wrap};
use ratatui::Frame;

use super::text::panel;
use crate::tui::model::{CountersView, Model};

pub fn draw(frame: &mut Frame, area: Rect, model: &Model) {
    let block = panel("counters", false, model.theme);
    let lines = match (&model.counters, &model.gpu) {
        (Some(CountersView::Collected { lines }), _) => lines
            .iter()
            .map(|(label, value)| Line::raw(format!("{label} {value}")))
            .collect(),
        (Some(CountersView::Unavailable { reason }), _) => {
            vec![Line::raw(format!("unavailable: {reason}"))]
        }
        (None, Some(Err(_))) => vec![Line::raw("unavailable: no GPU")],
        (None, _) => vec![Line::raw("not collected yet")],
    };
    let body = Paragraph::new(lines).block(block).wrap(Wrap { trim: true });
    frame.render_widget(body, area);
}
