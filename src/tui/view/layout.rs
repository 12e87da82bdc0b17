//! Where each panel goes. Each panel is sized by what it holds: a clean
//! compile takes one line, an error the lines it needs (up to a cap), the
//! selected case's diagnosis the lines it wraps to, and what is left goes
//! to the cases table and the bottom row (timing, resources, counters).
//!
//! A pure function of the model, so `update` can map a mouse click to the
//! row the view drew there.

use ratatui::layout::{Constraint, Layout, Rect};

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

impl Areas {
    /// The panels for `model` on a terminal of `width` x `height`.
    pub fn for_model(model: &Model, width: u16, height: u16) -> Self {
        let tall = usize::from(height >= TALL);
        let compile_height = compile::height(model, width).min(COMPILE_MAX[tall]);
        let detail_height = cases::detail_height(model, width, DETAIL_MAX[tall]);
        Self::of(
            width,
            height,
            compile_height,
            detail_height,
            model.cases.len() as u16,
        )
    }

    /// The panels for a terminal of `width` x `height`, a file panel of
    /// `compile_height` rows, a detail of `detail_height` and `case_count` cases.
    fn of(
        width: u16,
        height: u16,
        compile_height: u16,
        detail_height: u16,
        case_count: u16,
    ) -> Self {
        let full = Rect::new(0, 0, width, height);
        let rest = height.saturating_sub(2 + compile_height + detail_height);
        // The table asks for every case; the bottom row takes what the table
        // does not need, and at least its minimum while the table keeps its own.
        let cases_wanted = case_count + 3;
        let bottom_floor = BOTTOM_MIN.min(rest.saturating_sub(CASES_MIN));
        let bottom = rest
            .saturating_sub(cases_wanted)
            .max(bottom_floor)
            .min(rest * 3 / 5)
            .max(bottom_floor);
        let [header, compile, cases, detail, bottom, footer] = Layout::vertical([
            Constraint::Length(1),
            Constraint::Length(compile_height),
            Constraint::Fill(1),
            Constraint::Length(detail_height),
            Constraint::Length(bottom),
            Constraint::Length(1),
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
