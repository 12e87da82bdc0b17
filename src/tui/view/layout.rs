//! Where each panel goes. Each panel is sized by what it holds: a clean
//! compile takes one line, an error the lines it needs (up to a cap), the
//! selected case's diagnosis the lines it wraps to, and what is left goes
//! to the cases table and the bottom row (timing, resources, counters).
//! While the file does not build, the cases are one line and the errors
//! take the room they need, up to all of it. A notice too long for the
//! footer's line gets a second one.
//!
//! A pure function of the model, so `update` can map a mouse click to the
//! row the view drew there.

use ratatui::layout::{Constraint, Layout, Rect};

use super::text::wrap_words;
use super::{cases, compile};
use crate::tui::model::Model;

/// The screen cut into panels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Areas {
    pub full: Rect,
    pub header: Rect,
    pub compile: Rect,
    pub cases: Rect,
    /// The selected case's whole diagnosis, wrapped, under the table.
    pub detail: Rect,
    pub timing: Rect,
    pub resources: Rect,
    pub counters: Rect,
    pub footer: Rect,
}

/// Height at which panels get room for more than the essentials.
const TALL: u16 = 36;
/// Shares of the bottom row: the counters panel gets the most, its lines
/// (and its roofline plot) are the widest.
const BOTTOM_SHARES: [u32; 3] = [3, 3, 4];
/// The bottom row's least height: four figures of timing with a one-row
/// trend per series, and the resources panel's five lines plus its borders.
const BOTTOM_MIN: u16 = 9;
/// Rows the cases table keeps at least: borders, header and two cases.
const CASES_MIN: u16 = 5;
/// Most rows of the file panel, short and tall terminals: a longer list
/// of errors shows its first ones, as the compiler ordered them.
const COMPILE_MAX: [u16; 2] = [7, 12];
/// Most lines of the selected case's diagnosis, short and tall terminals;
/// a longer one ends in "…".
const DETAIL_MAX: [usize; 2] = [3, 5];
/// Most lines of the footer: a notice longer than that loses its end.
const FOOTER_MAX: usize = 2;

impl Areas {
    /// The panels for `model` on a terminal of `width` x `height`.
    pub fn for_model(model: &Model, width: u16, height: u16) -> Self {
        let tall = usize::from(height >= TALL);
        let footer = footer_height(model, width);
        if model.not_built().is_some() {
            return Self::not_built(width, height, footer, compile::height(model, width));
        }
        let compile_height = compile::height(model, width).min(COMPILE_MAX[tall]);
        let detail_height = cases::detail_height(model, width, DETAIL_MAX[tall]);
        Self::of(
            width,
            height,
            footer,
            compile_height,
            detail_height,
            model.cases.len() as u16,
        )
    }

    /// The panels while the file does not build: the errors take the
    /// `compile_wanted` rows they need, and the bottom row what is left;
    /// a bottom row too low for its panels gives its rows to the errors.
    fn not_built(width: u16, height: u16, footer: u16, compile_wanted: u16) -> Self {
        let room = height.saturating_sub(2 + footer);
        let mut compile = compile_wanted.min(room);
        if room - compile < BOTTOM_MIN {
            compile = room;
        }
        // The cases' one line is what the others leave.
        Self::cut(width, height, footer, [compile, 0, room - compile])
    }

    /// The panels for a terminal of `width` x `height`, a footer of
    /// `footer` rows, a file panel of `compile_height` rows, a detail of
    /// `detail_height` and `case_count` cases.
    fn of(
        width: u16,
        height: u16,
        footer: u16,
        compile_height: u16,
        detail_height: u16,
        case_count: u16,
    ) -> Self {
        let rest = height.saturating_sub(1 + footer + compile_height + detail_height);
        // The table asks for every case; the bottom row takes what the table
        // does not need, and at least its minimum while the table keeps its own.
        let cases_wanted = case_count + 3;
        let bottom_floor = BOTTOM_MIN.min(rest.saturating_sub(CASES_MIN));
        let bottom = rest
            .saturating_sub(cases_wanted)
            .max(bottom_floor)
            .min(rest * 3 / 5)
            .max(bottom_floor);
        Self::cut(
            width,
            height,
            footer,
            [compile_height, detail_height, bottom],
        )
    }

    /// The screen cut into the header, the `rows` of the file panel, the
    /// detail and the bottom row, the footer's rows, and the cases table
    /// between them in what they leave.
    fn cut(width: u16, height: u16, footer: u16, rows: [u16; 3]) -> Self {
        let full = Rect::new(0, 0, width, height);
        let [compile_height, detail_height, bottom] = rows;
        let [header, compile, cases, detail, bottom, footer] = Layout::vertical([
            Constraint::Length(1),
            Constraint::Length(compile_height),
            Constraint::Fill(1),
            Constraint::Length(detail_height),
            Constraint::Length(bottom),
            Constraint::Length(footer),
        ])
        .areas(full);
        let [timing, resources, counters] =
            Layout::horizontal(BOTTOM_SHARES.map(|share| Constraint::Ratio(share, 10)))
                .areas(bottom);
        Self {
            full,
            header,
            compile,
            cases,
            detail,
            timing,
            resources,
            counters,
            footer,
        }
    }
}

/// Rows of the footer: one, or two for a notice longer than the screen is wide.
fn footer_height(model: &Model, width: u16) -> u16 {
    let lines = model
        .notice
        .as_deref()
        .map_or(1, |n| footer_lines(n, width).len());
    lines.max(1) as u16
}

/// The footer's lines: the notice wrapped to `width`, at most as many as
/// [`Areas`] gives the footer.
pub(super) fn footer_lines(notice: &str, width: u16) -> Vec<String> {
    let mut lines = wrap_words(notice, usize::from(width));
    lines.truncate(FOOTER_MAX);
    lines
}

/// Rows of the compile panel's text hidden below its bottom when it is
/// scrolled to its top: how far it scrolls.
pub fn compile_scroll_limit(model: &Model, areas: &Areas) -> usize {
    compile::hidden_rows(model, areas.compile)
}

/// Entries a list overlay (history, a diff) shows at once on a terminal
/// `height` rows high: all of it but the status lines and its borders.
pub fn overlay_rows(height: u16) -> usize {
    usize::from(height.saturating_sub(4))
}

/// Case rows that fit in the cases panel (borders and the header row aside).
pub fn visible_case_rows(cases: Rect) -> usize {
    usize::from(cases.height.saturating_sub(3))
}

/// The first case drawn, chosen so the selected case is always visible.
pub fn first_visible_case(selected: usize, visible: usize) -> usize {
    selected.saturating_sub(visible.saturating_sub(1))
}

/// The case drawn at screen cell (`x`, `y`), if any.
pub fn case_at(areas: &Areas, model: &Model, x: u16, y: u16) -> Option<usize> {
    let table = areas.cases;
    let first_row_y = table.y + 2;
    let inside = x > table.x && x + 1 < table.right() && y >= first_row_y && y + 1 < table.bottom();
    if !inside {
        return None;
    }
    let visible = visible_case_rows(table);
    let index = first_visible_case(model.selected, visible) + usize::from(y - first_row_y);
    (index < model.cases.len()).then_some(index)
}
