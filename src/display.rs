//! Text from students and compilers made safe to show on a terminal.
//!
//! A kernel file, its name or an `#error` line can hold escape sequences
//! that would retitle the terminal, move the cursor, rewrite what is on
//! screen or reorder it (bidi overrides). Everything a person reads through
//! flashprof (the `check` table, the TUI, the gradebook CSV) passes through
//! [`for_display`]; JSON keeps the exact text (serde escapes it).
//!
//! Figures read from a stored report are hostile too (a history written by
//! hand may say a level moves 1e308 bytes a second): [`figure`] keeps each
//! one to a screen's width.
//!
//! Whether anything is coloured at all is one rule too, [`colour`]: the
//! command line's `--color`, then `NO_COLOR`, then whether it is a terminal.

use std::borrow::Cow;
use std::ffi::OsStr;
use std::path::Path;
use std::sync::OnceLock;

/// `--color`: when output is coloured.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorChoice {
    /// At a terminal, unless `NO_COLOR` is set to anything non-empty.
    #[default]
    Auto,
    Always,
    Never,
}

static COLOR_CHOICE: OnceLock<ColorChoice> = OnceLock::new();

/// Records the command line's choice, once, for every output of the process.
pub fn choose_colour(choice: ColorChoice) {
    let _ = COLOR_CHOICE.set(choice);
}

/// Whether output to a terminal (`to_terminal`) or elsewhere is coloured.
pub fn colour(to_terminal: bool) -> bool {
    let choice = COLOR_CHOICE.get().copied().unwrap_or_default();
    colour_for(choice, to_terminal, std::env::var_os("NO_COLOR").as_deref())
}

/// The rule (<https://no-color.org>): `always` and `never` are obeyed;
/// `auto` colours a terminal unless `NO_COLOR` is set and not empty.
fn colour_for(choice: ColorChoice, to_terminal: bool, no_color: Option<&OsStr>) -> bool {
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => to_terminal && no_color.is_none_or(OsStr::is_empty),
    }
}

/// Spaces a tab becomes.
const TAB: &str = "    ";

/// Whether `c` is a bidirectional embedding, override or isolate
/// (U+202A..U+202E, U+2066..U+2069), which can make text read in another order.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` with every control character made visible: C0 controls and DEL in
/// caret notation (`^[` for ESC, `^G` for BEL, `^?` for DEL), C1 controls as
/// `\u{9b}`, tabs as spaces, bidi controls removed. Line breaks are kept;
/// a carriage return is shown as `^M` so it cannot overwrite a line.
pub fn for_display(text: &str) -> Cow<'_, str> {
    let clean = |c: char| (c == '\n' || !c.is_control()) && !is_bidi_control(c);
    if text.chars().all(clean) {
        return Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => shown.push('\n'),
            '\t' => shown.push_str(TAB),
            c if is_bidi_control(c) => {}
            '\u{7f}' => shown.push_str("^?"),
            c if (c as u32) < 0x20 => {
                shown.push('^');
                shown.push(char::from(b'@' + c as u8));
            }
            c if c.is_control() => shown.push_str(&c.escape_unicode().to_string()),
            c => shown.push(c),
        }
    }
    Cow::Owned(shown)
}

/// [`for_display`] for one line: a line break is shown as `^J` too.
pub fn line_for_display(text: &str) -> Cow<'_, str> {
    if !text.contains('\n') {
        return for_display(text);
    }
    Cow::Owned(for_display(text).replace('\n', "^J"))
}

/// A path as a message quotes it, on any stream: a student's file or
/// folder name may hold escape sequences or line breaks, so every message
/// that names an outside path goes through here (bytes that are not UTF-8
/// show as U+FFFD).
pub fn path_for_display(path: &Path) -> String {
    line_for_display(&path.to_string_lossy()).into_owned()
}

/// Outside text quoted inside a one-line message, cut to `max_chars`
/// characters and `...`: a value a student wrote may be a megabyte long.
pub fn quoted_short(text: &str, max_chars: usize) -> String {
    let cut: String = text.chars().take(max_chars).collect();
    let shown = line_for_display(&cut).into_owned();
    if cut.len() < text.len() {
        format!("{shown}...")
    } else {
        shown
    }
}

/// The longest figure written out in full; no figure a GPU gives is longer.
const MAX_PLAIN_FIGURE: usize = 12;

/// `x` with `decimals` after the point, or in scientific notation
/// (`1.00e308`) when written out it would be longer than a screen's figure.
pub fn figure(x: f64, decimals: usize) -> String {
    let plain = format!("{x:.decimals$}");
    if plain.len() <= MAX_PLAIN_FIGURE {
        plain
    } else {
        format!("{x:.2e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_follows_the_flag_then_no_color_then_the_terminal() {
        let set = Some(OsStr::new("1"));
        let empty = Some(OsStr::new(""));
        assert!(colour_for(ColorChoice::Auto, true, None));
        assert!(colour_for(ColorChoice::Auto, true, empty));
        assert!(!colour_for(ColorChoice::Auto, true, set));
        assert!(!colour_for(ColorChoice::Auto, false, None));
        assert!(colour_for(ColorChoice::Always, false, set));
        assert!(!colour_for(ColorChoice::Never, true, None));
    }

    #[test]
    fn figures_stay_short_whatever_a_report_says() {
        assert_eq!(figure(1343.5, 0), "1344");
        assert_eq!(figure(29.74, 1), "29.7");
        assert_eq!(figure(1e308, 0), "1.00e308");
        assert_eq!(figure(-1e300, 1), "-1.00e300");
        assert_eq!(figure(1e-308, 1), "0.0");
        assert_eq!(figure(f64::NAN, 1), "NaN");
    }

    #[test]
    fn control_characters_become_visible_and_bidi_controls_go() {
        assert!(matches!(for_display("plain text\n"), Cow::Borrowed(_)));
        assert_eq!(
            for_display("a\u{1b}[2Jb\u{7}\tc\r\u{7f}"),
            "a^[[2Jb^G    c^M^?"
        );
        assert_eq!(for_display("x\u{9b}31m"), "x\\u{9b}31m");
        assert_eq!(for_display("abc\u{202e}fed\u{2066}"), "abcfed");
        assert_eq!(line_for_display("two\nlines"), "two^Jlines");
        assert_eq!(for_display("ünïcödé"), "ünïcödé");
    }

    #[test]
    fn paths_and_quoted_values_are_one_visible_line() {
        use std::os::unix::ffi::OsStrExt;
        let name = std::ffi::OsStr::from_bytes(b"a\x1b]52;c;eA==\x07\n\xffb.cu");
        assert_eq!(
            path_for_display(Path::new(name)),
            "a^[]52;c;eA==^G^J\u{fffd}b.cu"
        );
        assert_eq!(quoted_short("short", 64), "short");
        let long = "x".repeat(900_000);
        assert_eq!(quoted_short(&long, 64), format!("{}...", "x".repeat(64)));
        assert_eq!(quoted_short("\u{1b}[2J", 64), "^[[2J");
    }
}
