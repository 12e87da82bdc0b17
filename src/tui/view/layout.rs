//! Where each panel goes for a terminal size. A pure function of the size,
//! so `update` can map a mouse click to the row the view drew there.

use ratatui::layout::{Constraint, Layout, Rect};

use crate::tui::model::Model;

/// The screen cut into panels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Areas {
    pub full: Rect,
    pub header: Rect,
    pub compile: Rect,
    pub cases: Rect,
    pub timing: Rect,
    pub resources: Rect,
    pub counters: Rect,
    pub footer: Rect,
}

/// Height at which panels get room for more than the essentials.
const TALL: u16 = 36;
/// Width from which the counters panel gets the largest share of the bottom
/// row: its roofline line and verdict need about forty columns, and below
/// this width timing and resources would lose their own lines to make room.
const WIDE: u16 = 100;

impl Areas {
    pub fn of(width: u16, height: u16) -> Self {
        let full = Rect::new(0, 0, width, height);
        let tall = height >= TALL;
        let [header, compile, cases, bottom, footer] = Layout::vertical([
            Constraint::Length(1),
            Constraint::Length(if tall { 10 } else { 5 }),
            Constraint::Min(4),
            Constraint::Length(if tall { 9 } else { 6 }),
            Constraint::Length(1),
        ])
        .areas(full);
        let shares = if width >= WIDE { [3, 3, 4] } else { [4, 4, 2] };
        let [timing, resources, counters] =
            Layout::horizontal(shares.map(|share| Constraint::Ratio(share, 10))).areas(bottom);
        Self {
            full,
            header,
            compile,
            cases,
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
