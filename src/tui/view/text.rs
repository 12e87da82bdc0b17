//! Small pieces every panel uses: a bordered block whose title says when
//! its content is stale, a centred popup, and number formats.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear};
use ratatui::Frame;

use crate::tui::theme::Theme;

/// A panel frame titled `title`, with " (previous save)" when `stale`.
pub fn panel(title: &str, stale: bool, theme: Theme) -> Block<'static> {
    let mut spans = vec![Span::styled(format!(" {title} "), theme.accent())];
    if stale {
        spans.push(Span::styled("(previous save) ", theme.stale()));
    }
    Block::bordered().title(Line::from(spans))
}

/// A rectangle of at most `width` x `height` centred in `area`, cleared.
pub fn popup(frame: &mut Frame, area: Rect, width: u16, height: u16) -> Rect {
    let width = width.min(area.width);
    let height = height.min(area.height);
    let rect = Rect::new(
        area.x + (area.width - width) / 2,
        area.y + (area.height - height) / 2,
        width,
        height,
    );
    frame.render_widget(Clear, rect);
    rect
}

/// The whole screen but its top and bottom lines, cleared: for overlays
/// that need all the room there is and leave the status lines readable.
pub fn full_overlay(frame: &mut Frame, area: Rect) -> Rect {
    popup(frame, area, area.width, area.height.saturating_sub(2))
}

/// Bytes as `B`, `KiB` or `MiB`, whichever reads best.
pub fn bytes(n: u32) -> String {
    match n {
        0..1024 => format!("{n} B"),
        1024..1_048_576 => format!("{:.1} KiB", f64::from(n) / 1024.0),
        _ => format!("{:.1} MiB", f64::from(n) / 1_048_576.0),
    }
}

/// A signed change, or nothing when there is no change or nothing to compare.
pub fn delta(now: u32, before: Option<u32>) -> String {
    match before.map(|b| i64::from(now) - i64::from(b)) {
        Some(0) | None => String::new(),
        Some(d) => format!(" ({d:+})"),
    }
}

/// Clock time of a Unix timestamp, UTC, as `HH:MM:SS`.
pub fn clock_utc(unix_ms: u64) -> String {
    let seconds = unix_ms / 1000;
    let (h, m, s) = ((seconds / 3600) % 24, (seconds / 60) % 60, seconds % 60);
    format!("{h:02}:{m:02}:{s:02}")
}
