//! The timing panel: both medians, the speedup with its interval, and a
//! sparkline of the speedup over the file's saves.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Sparkline};
use ratatui::Frame;

use super::text::panel;
use crate::tui::model::{Model, TimingCell};

pub fn draw(frame: &mut Frame, area: Rect, model: &Model) {
    let theme = model.theme;
    let shown = model.timing();
    let block = panel("timing", shown.is_some_and(|s| s.stale), theme);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let [text_area, trend_area] =
        Layout::vertical([Constraint::Fill(1), Constraint::Length(1)]).areas(inner);
    let lines = match shown.map(|s| s.value) {
        None => vec![Line::raw(not_timed_reason(model))],
        Some(TimingCell::Running) => {
            vec![Line::styled("timing against the starter...", theme.warn())]
        }
        Some(TimingCell::Failed(reason)) => vec![Line::styled(reason.to_owned(), theme.warn())],
        Some(TimingCell::Timed(t)) => {
            let mut lines = vec![
                Line::raw(format!("student {:>9.3} ms", t.student.median)),
                Line::raw(format!("starter {:>9.3} ms", t.starter.median)),
            ];
            lines.push(match &t.speedup {
                Some(s) => Line::from(vec![
                    Span::styled(format!("speedup {:.2}x", s.point), theme.accent()),
                    Span::raw(format!(" [{:.2}-{:.2}]", s.ci_low, s.ci_high)),
                    Span::styled(if s.noisy { " noisy" } else { "" }, theme.warn()),
                ]),
                None => Line::styled("speedup withheld: output wrong", theme.bad()),
            });
            lines
        }
    };
    frame.render_widget(Paragraph::new(lines), text_area);
    draw_trend(frame, trend_area, model);
}

fn not_timed_reason(model: &Model) -> &'static str {
    let compiled = model.compile().is_none_or(|c| c.value.ok);
    match &model.gpu {
        Some(Err(_)) => "not timed: no GPU",
        _ if !compiled => "not timed: no kernel",
        _ if model.live.is_some() => "timed after the cases",
        _ => "not timed yet",
    }
}

/// Speedup per save, scaled so 1.0x is a visible bar and untimed saves are gaps.
fn draw_trend(frame: &mut Frame, area: Rect, model: &Model) {
    let trend = model.speedup_trend();
    if trend.iter().all(Option::is_none) {
        return;
    }
    let label = "saves ";
    let [label_area, bars_area] =
        Layout::horizontal([Constraint::Length(label.len() as u16), Constraint::Fill(1)])
            .areas(area);
    let width = usize::from(bars_area.width);
    let data: Vec<u64> = trend
        .iter()
        .skip(trend.len().saturating_sub(width))
        .map(|s| s.map_or(0, |x| (x * 100.0).round().max(1.0) as u64))
        .collect();
    frame.render_widget(Paragraph::new(label), label_area);
    frame.render_widget(
        Sparkline::default().data(&data).style(model.theme.accent()),
        bars_area,
    );
}
