//! The heatmap overlay: for one case, the worst error over tolerance in
//! each band of query rows (down) and each query head (across), so the
//! shape of a bug shows at a glance: one KV group, one tile edge, the rows
//! past some length.
//!
//! Columns are grouped by KV head (4 query heads share one), and a mark
//! in the margin shows where each 64-row tile of the lab's launch begins.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};
use ratatui::Frame;

use super::text::full_overlay;
use crate::grade::compare::{ErrorMap, TILE_ROWS};
use crate::protocol::CaseOutcome;
use crate::tui::model::Model;
use crate::tui::theme::Theme;

/// Width of the row label, `r 1000-1063` plus the tile mark.
const LABEL: usize = 13;

pub fn draw(frame: &mut Frame, area: Rect, model: &Model, case: usize) {
    let Some(outcome) = model.case_outcome(case).filter(|o| o.comparison.is_some()) else {
        return;
    };
    let rect = full_overlay(frame, area);
    draw_framed(frame, rect, model, outcome, " enter/esc close ", 2);
}

/// The heatmap of `outcome` in a bordered `rect`, its cells at most
/// `widest_cell` columns wide (wider cells when there is room to spare).
pub fn draw_framed(
    frame: &mut Frame,
    rect: Rect,
    model: &Model,
    outcome: &CaseOutcome,
    footer: &str,
    widest_cell: usize,
) {
    let Some(comparison) = &outcome.comparison else {
        return;
    };
    let map = &comparison.heatmap;
    let title = format!(" heatmap: {} ({}) ", outcome.name, outcome.shape.detail);
    let group = outcome.shape.head_group.max(1);
    let block = Block::bordered()
        .title(Span::styled(title, model.theme.accent()))
        .title_bottom(footer.to_owned());
    let inner = block.inner(rect);
    frame.render_widget(block, rect);

    let groups = map.heads.div_ceil(group);
    let cell_width = (1..=widest_cell.max(1))
        .rev()
        .find(|w| LABEL + map.heads * w + groups <= usize::from(inner.width))
        .unwrap_or(1);
    let bands = usize::from(inner.height)
        .saturating_sub(3)
        .min(map.rows)
        .max(1);
    let mut lines = vec![
        Line::raw(caption(&outcome.shape.row_hint, usize::from(inner.width))),
        head_axis(map.heads, group, cell_width),
    ];
    // A batch marks where each sequence starts; one sequence marks its tiles.
    let batch = outcome.shape.sequence_starts.len() > 1;
    let marks: Vec<usize> = if batch {
        outcome.shape.sequence_starts.clone()
    } else {
        (TILE_ROWS..map.output_rows).step_by(TILE_ROWS).collect()
    };
    lines.extend(
        (0..bands)
            .map(|band| band_line(map, band, bands, (group, cell_width), &marks, model.theme)),
    );
    lines.push(legend(
        model.theme,
        if batch {
            "╶ a sequence starts"
        } else {
            "╶ 64-row tile starts"
        },
    ));
    frame.render_widget(Paragraph::new(lines), inner);
}

/// What the map shows and which keys a row sees, in the words that fit
/// `width` columns: an 80-column terminal gets the short form, so the row
/// hint (the keys each row may read) is not the part cut off.
fn caption(row_hint: &str, width: usize) -> String {
    let long = format!("worst |err|/tolerance: query rows down, query heads across; {row_hint}");
    match long.chars().count() <= width {
        true => long,
        false => format!("worst |err|/tol, rows ↓ heads →; {row_hint}"),
    }
}

fn head_axis(heads: usize, group: usize, cell_width: usize) -> Line<'static> {
    let mut text = format!("{:<LABEL$}", "rows \\ head");
    for head in 0..heads {
        if head > 0 && head % group == 0 {
            text.push(' ');
        }
        let label = if head % group == 0 {
            head.to_string()
        } else {
            String::new()
        };
        text.push_str(&format!("{label:<cell_width$}"));
    }
    Line::raw(text)
}

/// One screen row: the map bins of band `band` out of `bands`, worst kept;
/// `marks` are the rows whose band gets a tick (tile or sequence starts).
fn band_line(
    map: &ErrorMap,
    band: usize,
    bands: usize,
    (group, cell_width): (usize, usize),
    marks: &[usize],
    theme: Theme,
) -> Line<'static> {
    let first_bin = band * map.rows / bands;
    let end_bin = ((band + 1) * map.rows / bands).max(first_bin + 1);
    let rows = map.rows_of_bin(first_bin).start..map.rows_of_bin(end_bin - 1).end;
    let starts_tile = marks.iter().any(|&r| r > 0 && rows.contains(&r));
    let label = format!(
        "{}r {}-{}",
        if starts_tile { "╶" } else { " " },
        rows.start,
        rows.end.saturating_sub(1)
    );
    let mut spans = vec![Span::raw(format!("{label:<LABEL$}"))];
    for head in 0..map.heads {
        if head > 0 && head % group == 0 {
            spans.push(Span::raw("│"));
        }
        let worst = (first_bin..end_bin)
            .map(|bin| map.cell(bin, head))
            .fold(0.0f32, |a, b| if b.is_nan() || b > a { b } else { a });
        let (glyph, style) = theme.heat(worst);
        spans.push(Span::styled(glyph.to_string().repeat(cell_width), style));
    }
    Line::from(spans)
}

fn legend(theme: Theme, marks: &'static str) -> Line<'static> {
    let mut spans = Vec::new();
    for (ratio, text) in [
        (0.1, "≤.5 "),
        (0.9, "≤1 pass  "),
        (5.0, "≤10 "),
        (500.0, "≤1e3 "),
        (f32::INFINITY, "worse/NaN/unwritten  "),
    ] {
        let (glyph, style) = theme.heat(ratio);
        spans.push(Span::styled(format!("{glyph} "), style));
        spans.push(Span::raw(text));
    }
    spans.push(Span::raw(marks));
    Line::from(spans)
}
