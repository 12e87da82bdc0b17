//! Block digits for lecture mode: numbers drawn from full-block cells, so a
//! speedup and a pass count read from the back of a room.
//!
//! Each glyph is a 3x5 grid of pixels. A pixel is drawn `scale` cells wide
//! and about half as many rows tall, because terminal cells are roughly
//! twice as tall as they are wide: that keeps the digits' proportions at
//! every size. Only what the lecture screen shows has a glyph (digits and
//! `.`, `x`, `/`, `-`, `%`); anything else draws as `?` so a missing glyph
//! is visible rather than silently blank.

/// Pixels across one glyph.
const GLYPH_WIDTH: usize = 3;
/// Pixel rows in one glyph.
const GLYPH_HEIGHT: usize = 5;
/// The largest scale tried: bigger than this no longer helps reading.
const MAX_SCALE: u16 = 8;

/// The glyph of `c`, top row first, `#` for an inked pixel.
fn glyph(c: char) -> [&'static str; GLYPH_HEIGHT] {
    match c {
        '0' => ["###", "# #", "# #", "# #", "###"],
        '1' => [" # ", "## ", " # ", " # ", "###"],
        '2' => ["###", "  #", "###", "#  ", "###"],
        '3' => ["###", "  #", " ##", "  #", "###"],
        '4' => ["# #", "# #", "###", "  #", "  #"],
        '5' => ["###", "#  ", "###", "  #", "###"],
        '6' => ["###", "#  ", "###", "# #", "###"],
        '7' => ["###", "  #", " # ", " # ", " # "],
        '8' => ["###", "# #", "###", "# #", "###"],
        '9' => ["###", "# #", "###", "  #", "###"],
        '.' => ["   ", "   ", "   ", "   ", " # "],
        'x' => ["   ", "# #", " # ", "# #", "   "],
        '/' => ["  #", "  #", " # ", "#  ", "#  "],
        '-' => ["   ", "   ", "###", "   ", "   "],
        '%' => ["# #", "  #", " # ", "#  ", "# #"],
        ' ' => ["   ", "   ", "   ", "   ", "   "],
        _ => ["###", "  #", " ##", "   ", " # "],
    }
}

/// Rows one pixel takes at `scale`: half the width, rounded up.
fn pixel_rows(scale: u16) -> u16 {
    scale.div_ceil(2)
}

/// Columns and rows `text` takes at `scale`, a one-pixel gap between glyphs.
pub fn size(text: &str, scale: u16) -> (u16, u16) {
    let glyphs = text.chars().count() as u16;
    let pixels_across = glyphs * (GLYPH_WIDTH as u16 + 1) - u16::from(glyphs > 0);
    (
        pixels_across * scale,
        GLYPH_HEIGHT as u16 * pixel_rows(scale),
    )
}

/// The largest scale at which `text` fits in `width` x `height`, if any.
pub fn fitting_scale(text: &str, width: u16, height: u16) -> Option<u16> {
    (1..=MAX_SCALE).rev().find(|&scale| {
        let (w, h) = size(text, scale);
        w <= width && h <= height
    })
}

/// `text` drawn in blocks at `scale`, one string per screen row.
pub fn render(text: &str, scale: u16) -> Vec<String> {
    let scale = usize::from(scale.max(1));
    let gap = " ".repeat(scale);
    let mut rows = Vec::new();
    for pixel_row in 0..GLYPH_HEIGHT {
        let mut line = String::new();
        for (i, c) in text.chars().enumerate() {
            if i > 0 {
                line.push_str(&gap);
            }
            for pixel in glyph(c)[pixel_row].chars() {
                let cell = if pixel == '#' { '█' } else { ' ' };
                line.extend(std::iter::repeat_n(cell, scale));
            }
        }
        rows.extend(std::iter::repeat_n(
            line,
            usize::from(pixel_rows(scale as u16)),
        ));
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_digit_at_scale_one_is_its_glyph() {
        assert_eq!(render("7", 1), ["███", "  █", " █ ", " █ ", " █ "]);
    }

    #[test]
    fn scale_widens_pixels_and_adds_rows_at_half_the_rate() {
        let rows = render("1/", 2);
        assert_eq!(rows.len(), 5);
        assert_eq!(rows[0], "  ██        ██");
        let (width, height) = size("1/", 2);
        assert_eq!(usize::from(height), rows.len());
        assert!(rows.iter().all(|r| r.chars().count() == usize::from(width)));
        assert_eq!(render("1", 3).len(), 10);
    }

    #[test]
    fn every_shown_character_has_its_own_glyph() {
        let unknown = glyph('?');
        let shown = "0123456789.x/-% ";
        for c in shown.chars() {
            assert_ne!(glyph(c), unknown, "{c:?} falls back to the unknown glyph");
        }
        let distinct: std::collections::HashSet<_> = shown.chars().map(glyph).collect();
        assert_eq!(distinct.len(), shown.chars().count());
    }

    #[test]
    fn the_fitting_scale_is_the_largest_that_fits() {
        let text = "13/14";
        let scale = fitting_scale(text, 60, 12).expect("fits");
        let (w, h) = size(text, scale);
        assert!(w <= 60 && h <= 12);
        let (w, h) = size(text, scale + 1);
        assert!(w > 60 || h > 12);
        assert_eq!(fitting_scale(text, 10, 12), None);
    }
}
