//! Colours and glyphs. Every state is told by a word or a glyph as well as
//! a colour, so the screen reads the same in monochrome, which is what
//! `NO_COLOR` (no-color.org) asks for. The colours are the terminal's basic
//! ANSI ones, which the user's palette already tunes for contrast.

use ratatui::style::{Color, Modifier, Style};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Theme {
    pub color: bool,
}

impl Theme {
    /// Colour as `--color` and `NO_COLOR` say ([`crate::display::colour`]);
    /// the TUI draws only on a terminal.
    pub fn from_env() -> Self {
        Self {
            color: crate::display::colour(true),
        }
    }

    fn pick(self, colored: Style, mono: Style) -> Style {
        if self.color {
            colored
        } else {
            mono
        }
    }

    pub fn good(self) -> Style {
        self.pick(Style::new().fg(Color::Green), Style::new())
    }

    pub fn bad(self) -> Style {
        let strong = Style::new().add_modifier(Modifier::BOLD);
        self.pick(strong.fg(Color::Red), strong)
    }

    pub fn warn(self) -> Style {
        self.pick(
            Style::new().fg(Color::Yellow),
            Style::new().add_modifier(Modifier::UNDERLINED),
        )
    }

    /// Results from an earlier save, shown while the new one runs.
    pub fn stale(self) -> Style {
        Style::new().add_modifier(Modifier::ITALIC)
    }

    pub fn accent(self) -> Style {
        self.pick(
            Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD),
            Style::new().add_modifier(Modifier::BOLD),
        )
    }

    pub fn selected(self) -> Style {
        Style::new().add_modifier(Modifier::REVERSED)
    }

    /// A plot's line colour: `color`, or the terminal's own in monochrome.
    pub fn plot(self, color: Color) -> Color {
        if self.color {
            color
        } else {
            Color::Reset
        }
    }

    /// A heatmap cell for `ratio` = error / tolerance: a glyph that grows
    /// with the error, and a colour that says pass or fail.
    pub fn heat(self, ratio: f32) -> (char, Style) {
        let (glyph, color) = if ratio <= 0.5 {
            ('·', Color::Green)
        } else if ratio <= 1.0 {
            ('░', Color::Yellow)
        } else if ratio <= 10.0 {
            ('▒', Color::Red)
        } else if ratio <= 1000.0 {
            ('▓', Color::Red)
        } else {
            ('█', Color::Magenta)
        };
        (glyph, self.pick(Style::new().fg(color), Style::new()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monochrome_uses_no_colour_at_all() {
        let mono = Theme { color: false };
        let styles = [mono.good(), mono.bad(), mono.warn(), mono.accent()];
        assert!(styles.iter().all(|s| s.fg.is_none() && s.bg.is_none()));
        assert!([0.1, 0.9, 5.0, 500.0, f32::INFINITY]
            .iter()
            .all(|&r| mono.heat(r).1.fg.is_none()));
    }

    #[test]
    fn heat_glyphs_grow_with_the_error_and_infinity_is_worst() {
        let theme = Theme { color: true };
        let glyphs: Vec<char> = [0.1, 0.9, 5.0, 500.0, f32::INFINITY]
            .iter()
            .map(|&r| theme.heat(r).0)
            .collect();
        assert_eq!(glyphs, ['·', '░', '▒', '▓', '█']);
    }
}
