//! The hardware counters panel. Counters are collected elsewhere; until
//! they arrive the panel says so, and without a GPU it says why not.
//!
//! Collected values are one line each and never wrap: the panel is small,
//! so a line must fit rather than push the lines after it out of sight.
//! When every full line fits, the panel shows them; when any would be cut
//! (its tail may be the busiest unit or the advice), it shows the compact
//! lines instead, each whole. Under them, when the panel has the rows, the
//! roofline plot. The counters overlay (`c`) shows every line whole,
//! wrapped, beside a large plot.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Wrap};
use ratatui::Frame;

use super::roofline;
use super::text::{full_overlay, panel, wrap_words};
use crate::tui::model::{CountersView, Model};

/// Text lines the panel keeps above the plot when it must choose.
const LINES_OVER_PLOT: u16 = 6;

pub fn draw(frame: &mut Frame, area: Rect, model: &Model) {
    let block = panel("counters", false, model.theme);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let compact = full_lines_cut(model, inner.width);
    let body = body(model, compact);
    let Some(plot) = model.roofline_plot() else {
        frame.render_widget(body, inner);
        return;
    };
    let wanted = match &model.counters {
        Some(CountersView::Collected {
            lines,
            compact: short,
        }) => {
            let shown = if compact { short } else { lines };
            u16::try_from(shown.len()).unwrap_or(u16::MAX)
        }
        _ => 1,
    };
    let plot_rows = inner.height.saturating_sub(wanted.min(LINES_OVER_PLOT));
    if plot_rows < roofline::MIN_HEIGHT + 1 {
        frame.render_widget(body, inner);
        return;
    }
    let [text_area, plot_area] =
        Layout::vertical([Constraint::Fill(1), Constraint::Length(plot_rows)]).areas(inner);
    frame.render_widget(body, text_area);
    roofline::draw(frame, plot_area, &plot, model.theme);
}

/// Whether a full line of the collected counters (its label, a space and
/// its value) is wider than `width`.
fn full_lines_cut(model: &Model, width: u16) -> bool {
    let Some(CountersView::Collected { lines, .. }) = &model.counters else {
        return false;
    };
    let width = usize::from(width);
    lines
        .iter()
        .any(|(label, value)| Line::raw(format!("{label} {value}")).width() > width)
}

/// The overlay: every line whole on the left, the plot on the right (under
/// the lines on a narrow screen).
pub fn draw_overlay(frame: &mut Frame, area: Rect, model: &Model) {
    let rect = full_overlay(frame, area);
    let block = Block::bordered()
        .title(Span::styled(
            " counters and roofline ",
            model.theme.accent(),
        ))
        .title_bottom(" c or esc close ");
    let inner = block.inner(rect);
    frame.render_widget(block, rect);
    let Some(plot) = model.roofline_plot() else {
        frame.render_widget(body(model, false).wrap(Wrap { trim: true }), inner);
        return;
    };
    let [text_area, plot_area] = if inner.width >= 100 {
        Layout::horizontal([Constraint::Percentage(45), Constraint::Fill(1)]).areas(inner)
    } else {
        let rows = whole_lines(model, inner.width).len() as u16;
        // The words come first; the plot keeps a row more than its least,
        // so roofs a few rows apart stay apart.
        let text_rows = rows.min(inner.height.saturating_sub(roofline::MIN_HEIGHT + 1));
        Layout::vertical([Constraint::Length(text_rows), Constraint::Fill(1)]).areas(inner)
    };
    frame.render_widget(
        Paragraph::new(whole_lines(model, text_area.width)),
        text_area,
    );
    roofline::draw(frame, plot_area, &plot, model.theme);
}

/// Every collected line wrapped to `width`, its label styled.
fn whole_lines(model: &Model, width: u16) -> Vec<Line<'static>> {
    let Some(CountersView::Collected { lines, .. }) = &model.counters else {
        return Vec::new();
    };
    let accent = model.theme.accent();
    lines
        .iter()
        .flat_map(|(label, value)| {
            let wrapped = wrap_words(
                &format!("{label} {value}"),
                usize::from(width.saturating_sub(2)),
            );
            wrapped.into_iter().enumerate().map(move |(i, text)| {
                match text.strip_prefix(label.as_str()).filter(|_| i == 0) {
                    Some(rest) => Line::from(vec![
                        Span::styled(label.clone(), accent),
                        Span::raw(rest.to_owned()),
                    ]),
                    None => Line::raw(format!("  {text}")),
                }
            })
        })
        .collect()
}

/// The panel's text: the collected lines (their `compact` form for a
/// narrow panel), or why there are none.
fn body(model: &Model, compact: bool) -> Paragraph<'static> {
    match (&model.counters, &model.gpu) {
        (
            Some(CountersView::Collected {
                lines,
                compact: short,
            }),
            _,
        ) => Paragraph::new(
            (if compact { short } else { lines })
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
    }
}

/// A sentence, wrapped to the panel: one thought, so no line to lose.
fn wrapped(text: String) -> Paragraph<'static> {
    Paragraph::new(text).wrap(Wrap { trim: true })
}
