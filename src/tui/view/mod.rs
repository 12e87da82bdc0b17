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
mod roofline;
mod source;
mod text;
mod timing;
mod trend;

use ratatui::Frame;

use super::model::{Model, Overlay};
use layout::Areas;

/// Draws the whole screen.
pub fn draw(frame: &mut Frame, model: &Model) {
    let area = frame.area();
    if model.present {
        present::draw(frame, model);
    } else {
        let areas = Areas::for_model(model, area.width, area.height);
        header::draw(frame, areas.header, model);
        compile::draw(frame, areas.compile, model);
        cases::draw(frame, areas.cases, model);
        cases::draw_detail(frame, areas.detail, model, usize::from(areas.detail.height));
        timing::draw(frame, areas.timing, model);
        resources::draw(frame, areas.resources, model);
        counters::draw(frame, areas.counters, model);
        header::draw_footer(frame, areas.footer, model);
    }
    match &model.overlay {
        None => {}
        Some(Overlay::Help) => help::draw(frame, area, model),
        Some(Overlay::Counters) => counters::draw_overlay(frame, area, model),
        Some(Overlay::Heatmap { case }) => heatmap::draw(frame, area, model, *case),
        Some(Overlay::History { selected }) => history::draw_runs(frame, area, model, *selected),
        Some(Overlay::Diff {
            title,
            lines,
            scroll,
        }) => history::draw_diff(frame, area, model, title, lines, *scroll),
        Some(Overlay::Lines {
            scroll,
            hottest_first,
        }) => source::draw(frame, area, model, *scroll, *hottest_first),
    }
    neutralise_controls(frame);
}

/// The last line of defence against terminal escape injection: any cell
/// still holding a control character or a bidi control (from a source line,
/// a file name, a compiler message that no view cleaned) is drawn as U+FFFD,
/// so no student text reaches the terminal as a command.
pub fn neutralise_controls(frame: &mut Frame) {
    let unsafe_char =
        |c: char| c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
    for cell in frame.buffer_mut().content.iter_mut() {
        if cell.symbol().chars().any(unsafe_char) {
            cell.set_symbol("\u{fffd}");
        }
    }
}
