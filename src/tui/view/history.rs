//! The history overlays: the list of past runs of this file (in this lab),
//! and a diff of one past text against the current one.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};
use ratatui::Frame;

use super::text::{clock_utc, full_overlay, popup};
use crate::app::history::DiffLine;
use crate::tui::model::Model;

pub fn draw_runs(frame: &mut Frame, area: Rect, model: &Model, selected: usize) {
    let theme = model.theme;
    let rect = popup(frame, area, 72, area.height.saturating_sub(2));
    let block = Block::bordered()
        .title(Span::styled(
            format!(" history of {} (newest first) ", model.file_label),
            theme.accent(),
        ))
        .title_bottom(" enter diff  t restore this  b best passing  u undo  esc ");
    let inner_height = usize::from(rect.height.saturating_sub(2));
    let total = model.history.len();
    let first = selected.saturating_sub(inner_height.saturating_sub(1));
    let lines: Vec<Line> = if total == 0 {
        vec![Line::raw("no runs recorded yet")]
    } else {
        model
            .history
            .iter()
            .rev()
            .enumerate()
            .skip(first)
            .take(inner_height)
            .map(|(i, run)| {
                let (verdict, style) = match run.outcome {
                    None => ("saved before a restore".to_string(), theme.stale()),
                    Some(o) if !o.compiled => ("compile error".to_string(), theme.bad()),
                    Some(o) if !o.graded => ("compiled, not graded".to_string(), theme.warn()),
                    Some(o) if o.all_passed => {
                        (format!("PASS {}/{}", o.cases_passed, o.cases), theme.good())
                    }
                    Some(o) => (format!("FAIL {}/{}", o.cases_passed, o.cases), theme.bad()),
                };
                // A failing run's speedup is no result: it is not shown as one.
                let speedup = match run.outcome {
                    Some(o) if o.speedup.is_some() && !o.all_passed => "not counted".into(),
                    outcome => outcome
                        .and_then(|o| o.speedup)
                        .map_or(String::new(), |s| format!("{s:.2}x")),
                };
                let line = Line::from(vec![
                    Span::raw(format!(
                        "#{:<4} {} UTC  ",
                        total - i,
                        clock_utc(run.unix_ms)
                    )),
                    Span::styled(format!("{verdict:<24}"), style),
                    Span::raw(format!(
                        "{speedup:>11}  {}",
                        &run.source_hash[..8.min(run.source_hash.len())]
                    )),
                ]);
                if i == selected {
                    line.style(theme.selected())
                } else {
                    line
                }
            })
            .collect()
    };
    frame.render_widget(Paragraph::new(lines).block(block), rect);
}

pub fn draw_diff(
    frame: &mut Frame,
    area: Rect,
    model: &Model,
    title: &str,
    lines: &[DiffLine],
    scroll: usize,
) {
    let theme = model.theme;
    let rect = full_overlay(frame, area);
    let block = Block::bordered()
        .title(Span::styled(format!(" {title} "), theme.accent()))
        .title_bottom(" ↑↓ scroll  esc close ");
    let changed = lines.iter().any(|l| !matches!(l, DiffLine::Same(_)));
    let body: Vec<Line> = if !changed {
        vec![Line::raw("no difference from the current text")]
    } else {
        lines
            .iter()
            .skip(scroll)
            .map(|line| match line {
                DiffLine::Same(t) => Line::raw(format!("  {t}")),
                DiffLine::Removed(t) => Line::styled(format!("- {t}"), theme.bad()),
                DiffLine::Added(t) => Line::styled(format!("+ {t}"), theme.good()),
            })
            .collect()
    };
    frame.render_widget(Paragraph::new(body).block(block), rect);
}
