//! The timing panel: for a lab graded on bytes its achieved bandwidth
//! first, then both medians, the speedup with its interval, and
//! under them the trend over the file's saves (speedup, registers, max
//! error), one plot each.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::text::{panel, wrap_words};
use super::trend;
use crate::tui::model::{Model, TimingCell};

pub fn draw(frame: &mut Frame, area: Rect, model: &Model) {
    let theme = model.theme;
    let shown = model.timing();
    let block = panel("timing", shown.is_some_and(|s| s.stale), theme);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    // A sentence instead of figures is wrapped to the panel, whole.
    let sentence = |text: &str, style| -> Vec<Line<'static>> {
        wrap_words(text, usize::from(inner.width))
            .into_iter()
            .map(|line| Line::styled(line, style))
            .collect()
    };
    let lines = match shown.map(|s| s.value) {
        None => sentence(not_timed_reason(model), Style::new()),
        Some(TimingCell::Running) => sentence("timing against the starter...", theme.warn()),
        Some(TimingCell::Failed(reason)) => sentence(reason, theme.warn()),
        Some(TimingCell::Timed(t)) => {
            let mut lines = Vec::new();
            // A lab graded on bytes: achieved bandwidth and its share first
            // (short lines: the panel is a third of an 80-column screen).
            if let Some(b) = &t.bandwidth {
                lines.push(Line::styled(
                    format!(
                        "{:.0} GB/s {:.1}%",
                        b.achieved_bytes_per_s / 1e9,
                        b.share() * 100.0
                    ),
                    theme.accent(),
                ));
                lines.push(Line::raw(format!(
                    "of {:.0} GB/s roof",
                    b.roof_bytes_per_s() / 1e9
                )));
            }
            lines.push(Line::raw(format!("student {:>9.3} ms", t.student.median)));
            lines.push(Line::raw(format!("starter {:>9.3} ms", t.starter.median)));
            let failed = model.cases_failed();
            match &t.speedup {
                // A wrong kernel's speed is no result, however fast.
                Some(s) if failed > 0 => {
                    lines.push(Line::styled(
                        format!("{:.2}x, not counted", s.point),
                        theme.bad(),
                    ));
                    lines.extend(sentence(
                        &format!("{failed} of {} cases fail", model.cases.len()),
                        theme.bad(),
                    ));
                }
                Some(s) => {
                    lines.push(Line::from(vec![
                        Span::styled(format!("speedup {:.2}x", s.point), theme.accent()),
                        Span::styled(if s.noisy { " noisy" } else { "" }, theme.warn()),
                    ]));
                    lines.push(Line::raw(format!(
                        "interval {:.2}-{:.2}x",
                        s.ci_low, s.ci_high
                    )));
                }
                None => {
                    let reason = t.withheld().unwrap_or_default();
                    lines.extend(sentence(&format!("no speedup: {reason}"), theme.bad()));
                }
            }
            lines
        }
    };
    let [text_area, trend_area] =
        Layout::vertical([Constraint::Length(lines.len() as u16), Constraint::Fill(1)])
            .areas(inner);
    frame.render_widget(Paragraph::new(lines), text_area);
    trend::draw(frame, trend_area, model);
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
