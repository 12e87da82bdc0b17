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

/// `text` broken into lines of at most `width` characters at spaces (a word
/// longer than a line is cut across lines), so a caller knows the height
/// before drawing.
pub fn wrap_words(text: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let mut lines = Vec::new();
    let mut line = String::new();
    let mut line_chars = 0;
    for word in text.split_whitespace() {
        let mut word: Vec<char> = word.chars().collect();
        let gap = usize::from(line_chars > 0);
        if line_chars + gap + word.len() <= width {
            if gap == 1 {
                line.push(' ');
            }
            line.extend(word.iter());
            line_chars += gap + word.len();
            continue;
        }
        if line_chars > 0 {
            lines.push(std::mem::take(&mut line));
        }
        while word.len() > width {
            let rest = word.split_off(width);
            lines.push(word.into_iter().collect());
            word = rest;
        }
        line_chars = word.len();
        line = word.into_iter().collect();
    }
    if line_chars > 0 || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// `lines` cut to `max` lines, the last one ending in "…" when some were cut.
pub fn at_most(mut lines: Vec<String>, max: usize, width: usize) -> Vec<String> {
    if lines.len() > max && max > 0 {
        lines.truncate(max);
        if let Some(last) = lines.last_mut() {
            let keep: String = last.chars().take(width.saturating_sub(1)).collect();
            *last = format!("{keep}…");
        }
    }
    lines
}

/// `text` in at most `width` columns: whole, or cut after its last word
/// that fits, with an ellipsis.
pub fn between_words(text: &str, width: usize) -> String {
    let columns = |text: &str| Span::raw(text).width();
    if columns(text) <= width {
        return text.to_owned();
    }
    if width == 0 {
        return String::new();
    }
    let mut fitted = String::new();
    for word in text.split_inclusive(char::is_whitespace) {
        if columns((fitted.clone() + word).trim_end()) + 1 > width {
            break;
        }
        fitted.push_str(word);
    }
    format!("{}…", fitted.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_wrap_at_spaces_and_long_words_are_cut() {
        assert_eq!(
            wrap_words("only rows 40..63 are wrong", 10),
            ["only rows", "40..63 are", "wrong"]
        );
        assert_eq!(wrap_words("abcdefghij", 4), ["abcd", "efgh", "ij"]);
        assert_eq!(wrap_words("", 4), [""]);
    }

    #[test]
    fn cut_lines_end_in_an_ellipsis() {
        let lines = vec!["aaaa".to_string(), "bbbb".into(), "cccc".into()];
        assert_eq!(at_most(lines.clone(), 2, 4), ["aaaa", "bbb…"]);
        assert_eq!(at_most(lines, 3, 4).len(), 3);
    }

    #[test]
    fn a_long_name_is_cut_between_words_with_an_ellipsis() {
        let title = "  Decode walk, step 2: each KV head's keys read once";
        assert_eq!(between_words(title, 60), title);
        assert_eq!(between_words(title, 30), "  Decode walk, step 2: each…");
        assert!(between_words(title, 30).chars().count() <= 30);
        assert_eq!(between_words(title, 3), "…");
        assert_eq!(between_words(title, 0), "");
        // Any space is a place to cut, a no-break one included.
        assert_eq!(between_words("ab\u{a0}cd ef", 6), "ab\u{a0}cd…");
        assert_eq!(between_words("ab\u{a0}cd ef", 5), "ab…");
    }
}
