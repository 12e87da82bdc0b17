//! Drawing: one file per panel, each a function of `&Model` only.
//!
//! Views decide nothing and remember nothing; what to show (fresh or stale,
//! running or done) is asked of the model, and where to draw it comes from
//! [`layout`], which `update` shares to place mouse clicks.

mod bigtext;
mod cases;
pub mod compare;
mod compile;
mod counters;
mod header;
mod heatmap;
mod help;
mod history;
pub mod layout;
mod present;
mod resources;
mod text;
mod timing;

use ratatui::Frame;

use super::model::{Model, Overlay};
use layout::Areas;

/// Draws the whole screen.
pub fn draw(frame: &mut Frame, model: &Model) {
    let area = frame.area();
    if model.present {
        present::draw(frame, model);
    } else {
        let areas = Areas::of(area.width, area.height);
        header::draw(frame, areas.header, model);
        compile::draw(frame, areas.compile, model);
        cases::draw(frame, areas.cases, model);
        timing::draw(frame, areas.timing, model);
        resources::draw(frame, areas.resources, model);
        counters::draw(frame, areas.counters, model);
        header::draw_footer(frame, areas.footer, model);
    }
    match &model.overlay {
        None => {}
        Some(Overlay::Help) => help::draw(frame, area, model),
        Some(Overlay::Heatmap { case }) => heatmap::draw(frame, area, model, *case),
        Some(Overlay::History { selected }) => history::draw_runs(frame, area, model, *selected),
        Some(Overlay::Diff {
            title,
            lines,
            scroll,
        }) => history::draw_diff(frame, area, model, title, lines, *scroll),
    }
}
