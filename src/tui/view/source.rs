//! The source view (`l`): the profiled text line by line, each with a heat
//! bar of its share of the stall samples, its change since the save
//! profiled before, and under a sampled line its main stall reason and the
//! memory findings. A terminal 150 columns wide or more shows the starter's
//! hottest lines beside it; a narrower one names the starter's hottest line.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};
use ratatui::Frame;

use super::text::{full_overlay, wrap_words};
use crate::grade::lines::{reason_shown, LineProfile};
use crate::tui::model::Model;
use crate::tui::source_view::{self, Change, SourceRow};
use crate::tui::theme::Theme;

/// The width from which the starter's lines get a pane of their own.
const STARTER_PANE_FROM: u16 = 150;
const STARTER_PANE_WIDTH: u16 = 62;
/// Cells of a heat bar; the hottest line fills them all.
const BAR_CELLS: usize = 8;
/// A line at this share or more shows its reason on a row of its own.
const DETAIL_FROM: f64 = 0.005;
/// The starter's lines its pane lists.
const STARTER_LINES: usize = 10;

pub fn draw(frame: &mut Frame, area: Rect, model: &Model, scroll: usize, hottest_first: bool) {
    let theme = model.theme;
    let rect = full_overlay(frame, area);
    let order = if hottest_first {
        "o file order"
    } else {
        "o hottest first"
    };
    let block = Block::bordered()
        .title(Span::styled(
            format!(" where the time goes: {} ", model.file_label),
            theme.accent(),
        ))
        .title_bottom(format!(" {order}  ↑↓ PgUp PgDn scroll  l or esc close "));
    let inner = block.inner(rect);
    frame.render_widget(block, rect);

    let starter = model
        .profiled
        .as_ref()
        .and_then(|p| p.profile.starter.as_ref());
    let (main, side) = match starter {
        Some(_) if inner.width >= STARTER_PANE_FROM => {
            let [main, side] =
                Layout::horizontal([Constraint::Fill(1), Constraint::Length(STARTER_PANE_WIDTH)])
                    .areas(inner);
            (main, Some(side))
        }
        _ => (inner, None),
    };
    let mut lines = status_lines(model, side.is_none(), usize::from(main.width));
    let Some(now) = &model.profiled else {
        frame.render_widget(Paragraph::new(lines), main);
        return;
    };
    let rows = source_view::rows(now, model.profiled_before.as_ref());
    let rows = if hottest_first {
        source_view::hottest_first(rows)
    } else {
        rows
    };
    let hottest = rows.iter().map(SourceRow::share).fold(0.0, f64::max);
    lines.push(Line::styled(
        format!(
            "{:>4} {:width$} {:>6} {:>6}  source",
            "line",
            "",
            "share",
            "change",
            width = BAR_CELLS
        ),
        theme.stale(),
    ));
    // A newer, shorter profile may have come in under an old scroll.
    for row in rows.iter().skip(scroll.min(rows.len().saturating_sub(1))) {
        lines.extend(row_lines(row, hottest, usize::from(main.width), theme));
        if lines.len() >= usize::from(main.height) {
            break;
        }
    }
    frame.render_widget(Paragraph::new(lines), main);
    if let (Some(side), Some(starter)) = (side, starter) {
        draw_starter(frame, side, starter, theme);
    }
}

/// What the profile is (samples, chip, flashprof's own share), why the
/// newest save has none of its own when so, and, without the starter's
/// pane, the starter's hottest line.
fn status_lines(model: &Model, name_starter: bool, width: usize) -> Vec<Line<'static>> {
    let theme = model.theme;
    let mut lines = Vec::new();
    if let Some(why) = model.lines_missing() {
        let shown = if model.profiled.is_some() {
            format!("{why}; shown: the last save profiled")
        } else {
            why
        };
        push_wrapped(&mut lines, &shown, width, theme.warn());
    }
    let Some(now) = &model.profiled else {
        return lines;
    };
    let profile = &now.profile;
    let taken = format!(
        "{} stall samples on {} (every 2^{} cycles), {:.0} ms; flashprof's own code {:.1}%",
        profile.total_samples,
        profile.chip,
        profile.period_log2,
        profile.collect_ms,
        100.0 * source_view::own_share(profile)
    );
    push_wrapped(&mut lines, &taken, width, Style::new());
    if let Some(why) = &profile.counts_missing {
        let said = format!("memory findings: {why}");
        push_wrapped(&mut lines, &said, width, theme.stale());
    }
    if name_starter {
        let said = match &profile.starter {
            None => return lines,
            Some(Err(why)) => format!("starter: not profiled: {why}"),
            Some(Ok(starter)) => match starter.lines.first() {
                Some(top) => format!(
                    "starter's hottest: line {} {:.1}% {}",
                    line_number(top.line),
                    100.0 * top.share,
                    top.main_reason().map(reason_shown).unwrap_or_default()
                ),
                None => "starter: no samples".into(),
            },
        };
        push_wrapped(&mut lines, &said, width, theme.stale());
    }
    lines
}

/// `text` wrapped to `width`, each line in `style`.
fn push_wrapped(lines: &mut Vec<Line<'static>>, text: &str, width: usize, style: Style) {
    lines.extend(
        wrap_words(text, width)
            .into_iter()
            .map(|line| Line::styled(line, style)),
    );
}

/// The columns before a line's text: number, bar, share, change.
const TEXT_COLUMN: usize = 4 + 1 + BAR_CELLS + 1 + 6 + 1 + 6 + 2;

/// A row of the file, and under it (when sampled enough) its reason and
/// each finding, wrapped to `width` under the text's column.
fn row_lines(row: &SourceRow<'_>, hottest: f64, width: usize, theme: Theme) -> Vec<Line<'static>> {
    let text_width = width.saturating_sub(TEXT_COLUMN);
    let share = row.share();
    let heat = if share >= 0.10 {
        theme.bad()
    } else if share >= 0.03 {
        theme.warn()
    } else {
        Style::new()
    };
    let (bar, percent) = match row.reading {
        Some(_) if share > 0.0 => (
            bar(share / hottest.max(f64::MIN_POSITIVE)),
            format!("{:>5.1}%", 100.0 * share),
        ),
        _ => (" ".repeat(BAR_CELLS), String::new()),
    };
    let change = match row.change {
        Change::Unknown => String::new(),
        Change::New => "new".into(),
        Change::Points(points) if points.abs() < 0.05 => String::new(),
        Change::Points(points) => format!("{points:+.1}"),
    };
    let text: String = row
        .text
        .replace('\t', "    ")
        .chars()
        .take(text_width)
        .collect();
    let mut lines = vec![Line::from(vec![
        Span::styled(format!("{:>4} ", row.line), theme.stale()),
        Span::styled(bar, heat),
        Span::styled(format!(" {percent:>6}"), heat),
        Span::raw(format!(" {change:>6}  ")),
        Span::raw(text),
    ])];
    let Some(reading) = row.reading.filter(|_| share >= DETAIL_FROM) else {
        return lines;
    };
    let reason = reading
        .main_reason()
        .map(|reason| (reason_shown(reason), theme.accent()));
    let findings = reading.findings().into_iter().map(|f| (f, theme.warn()));
    for (said, style) in reason.into_iter().chain(findings) {
        for part in wrap_words(&said, text_width) {
            lines.push(Line::from(vec![
                Span::raw(" ".repeat(TEXT_COLUMN)),
                Span::styled(part, style),
            ]));
        }
    }
    lines
}

/// A bar of `fraction` (0 to 1) of [`BAR_CELLS`] cells, in eighths.
fn bar(fraction: f64) -> String {
    const EIGHTHS: [char; 8] = ['▏', '▎', '▍', '▌', '▋', '▊', '▉', '█'];
    let eighths = (fraction.clamp(0.0, 1.0) * (BAR_CELLS * 8) as f64).round() as usize;
    let mut bar: String = "█".repeat(eighths / 8);
    if eighths % 8 > 0 {
        bar.push(EIGHTHS[eighths % 8 - 1]);
    }
    // At least a sliver for a sampled line, so it never looks unsampled.
    if bar.is_empty() {
        bar.push(EIGHTHS[0]);
    }
    format!("{bar:<BAR_CELLS$}")
}

fn line_number(line: crate::grade::lines::LineKey) -> String {
    match line {
        crate::grade::lines::LineKey::Student(n) => n.to_string(),
        crate::grade::lines::LineKey::Own => "own".into(),
    }
}

/// The starter's hottest lines, on the same inputs, for comparison.
fn draw_starter(
    frame: &mut Frame,
    area: Rect,
    starter: &Result<Box<LineProfile>, String>,
    theme: Theme,
) {
    let block = Block::bordered().title(Span::styled(" the starter, same inputs ", theme.accent()));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let lines: Vec<Line> = match starter {
        Err(why) => vec![Line::styled(format!("not profiled: {why}"), theme.warn())],
        Ok(profile) => {
            let mut lines = vec![Line::raw(format!(
                "{} samples, {:.0} ms",
                profile.total_samples, profile.collect_ms
            ))];
            let text_width = usize::from(inner.width).saturating_sub(14);
            for row in profile.lines.iter().take(STARTER_LINES) {
                lines.push(Line::from(vec![
                    Span::styled(format!("{:>4} ", line_number(row.line)), theme.stale()),
                    Span::raw(format!("{:>5.1}%  ", 100.0 * row.share)),
                    Span::raw(row.source.chars().take(text_width).collect::<String>()),
                ]));
                if let Some(reason) = row.main_reason() {
                    lines.push(Line::styled(
                        format!("             {}", reason_shown(reason)),
                        theme.accent(),
                    ));
                }
            }
            lines
        }
    };
    frame.render_widget(Paragraph::new(lines), inner);
}
