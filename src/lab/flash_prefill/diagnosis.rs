//! A one-line verdict a student can act on.
//!
//! The comparison says how many elements fail and where; the runner adds
//! what the output alone cannot show (stray writes, modified inputs, a
//! result that moves between runs). Rules are tried from the most severe
//! down, because one root cause explains the rest: a race or an
//! out-of-bounds write can produce any wrong number, and an unwritten row is
//! a launch problem before it is an arithmetic one. The first rule that
//! fits names the likely cause and where it shows.

use super::contract::{Shape, DH, HQ};
use crate::grade::compare::{Comparison, Footprint, RowSpan, TILE_ROWS};
use crate::grade::integrity::{integrity_problem, Integrity};

/// Below this worst error-to-allowance ratio, failures read as lost precision, not a wrong formula.
const PRECISION_LOSS_RATIO: f64 = 10.0;

/// The likeliest cause of what `cmp` and `integrity` show, in one line.
pub fn diagnose(shape: Shape, cmp: &Comparison, integrity: &Integrity) -> String {
    if integrity.out_of_bounds_writes > 0 {
        return format!(
            "out-of-bounds write: the kernel wrote {} floats outside out; guard every store with \
             row < chunkLen and check the index arithmetic",
            integrity.out_of_bounds_writes
        );
    }
    if let Some(problem) = integrity_problem(integrity) {
        return problem;
    }
    if cmp.unwritten > 0 {
        return unwritten(shape, &cmp.where_unwritten);
    }
    if cmp.nan + cmp.inf > 0 {
        return non_finite(cmp);
    }
    if cmp.failing > 0 {
        return inaccurate(shape, cmp);
    }
    format!(
        "correct: all {} elements within tolerance (worst at {:.2} of the allowance)",
        cmp.elements, cmp.worst_ratio
    )
}

fn unwritten(shape: Shape, at: &Footprint) -> String {
    let Some(span) = at.rows else {
        return "some elements were never written".into();
    };
    let whole_rows = at.elements == at.row_count * HQ * DH;
    let contiguous = at.row_count == span.last - span.first + 1;
    if whole_rows && contiguous {
        return format!(
            "{} never written: check the early return and that the grid covers chunkLen ({})",
            rows(span),
            shape.chunk_len
        );
    }
    if at.heads != u32::MAX {
        return format!(
            "{} never written: blockIdx.y must reach every query head (or every KV group)",
            heads(at.heads)
        );
    }
    format!(
        "{} elements in {} never written: some threads skip their store \
         (does every lane write both of its dimensions?)",
        at.elements,
        rows(span)
    )
}

fn non_finite(cmp: &Comparison) -> String {
    let at = &cmp.where_non_finite;
    let kind = match (cmp.nan > 0, cmp.inf > 0) {
        (true, true) => "NaN and Inf",
        (true, false) => "NaN",
        _ => "Inf",
    };
    if at.heads == 1 {
        return format!(
            "{kind} only in head 0, where the case plants scores of 128: expf overflows; \
             subtract the running max before exponentiating"
        );
    }
    let place = at.rows.map(rows).unwrap_or_default();
    if cmp.nan > 0 {
        format!(
            "NaN in output ({place}): overflow in expf without max subtraction, 0/0, or a read \
             past an input's end (guard bands read as NaN)"
        )
    } else {
        format!(
            "Inf in output ({place}): expf overflowed (subtract the running max) or a sum was \
             divided by zero"
        )
    }
}

fn inaccurate(shape: Shape, cmp: &Comparison) -> String {
    let at = &cmp.where_failing;
    let Some(span) = at.rows else {
        return format!("{} elements outside tolerance", cmp.failing);
    };
    let through_the_end =
        span.last + 1 == shape.chunk_len && at.row_count == span.last - span.first + 1;
    let full_tiles = shape.chunk_len / TILE_ROWS * TILE_ROWS;

    if at.heads == 1 {
        return "wrong only in head 0, where the case plants large scores: the softmax loses \
                them; subtract the running max and rescale l and the accumulator when it grows"
            .into();
    }
    if full_tiles < shape.chunk_len && span.first >= full_tiles && full_tiles > 0 {
        return format!(
            "only the last, partial tile ({}) is wrong: a tile of fewer than {TILE_ROWS} rows \
             must still compute its rows",
            rows(span)
        );
    }
    if through_the_end && span.first > 0 && span.first % TILE_ROWS == 0 {
        return format!(
            "{} are wrong, rows before them right: tiles after the first (blockIdx.x > 0) use a \
             wrong row offset or causal limit",
            rows(span)
        );
    }
    let first_offset = at.tile_rows.trailing_zeros() as usize;
    let ends_at_tile_end = at.tile_rows >> (TILE_ROWS - 1) == 1;
    if first_offset > 0 && ends_at_tile_end {
        return format!(
            "only rows {first_offset}..{} of each {TILE_ROWS}-row tile are wrong: the rows a \
             block handles last (its last warps, or each warp's later rows) go astray",
            TILE_ROWS - 1
        );
    }
    if at.row_count == shape.chunk_len && at.heads != u32::MAX {
        return format!(
            "only {} are wrong, in every row: check which KV head a query head reads \
             (g = h / 4) and the head strides",
            heads(at.heads)
        );
    }
    if cmp.worst_ratio < PRECISION_LOSS_RATIO {
        return format!(
            "{} elements just outside tolerance (worst {:.1}x the allowance): lost precision, \
             e.g. a fast-math expf or a sum kept in lower precision",
            cmp.failing, cmp.worst_ratio
        );
    }
    if at.row_count == shape.chunk_len && at.heads == u32::MAX {
        return format!(
            "every row of every head is wrong (worst {}): check the 1/8 scale, the tensor \
             layout and the causal limit (row i sees keys up to prefixLen + i)",
            worst(cmp)
        );
    }
    format!(
        "{} of {} elements wrong, in {} and {}; worst {}",
        cmp.failing,
        cmp.elements,
        rows(span),
        heads(at.heads),
        worst(cmp)
    )
}

fn worst(cmp: &Comparison) -> String {
    match &cmp.worst {
        Some(e) => format!(
            "at row {}, head {}, dim {}: got {:.6e}, expected {:.6e} (allowed ±{:.1e})",
            e.row, e.head, e.dim, e.got, e.expected, e.allowed
        ),
        None => "unknown".into(),
    }
}

fn rows(span: RowSpan) -> String {
    if span.first == span.last {
        format!("row {}", span.first)
    } else {
        format!("rows {} to {}", span.first, span.last)
    }
}

/// `"head 3"`, `"heads 4-7, 12"`: runs of set bits as ranges.
fn heads(mask: u32) -> String {
    let mut runs = Vec::new();
    let mut head = 0;
    while head < HQ {
        if mask & (1 << head) == 0 {
            head += 1;
            continue;
        }
        let start = head;
        while head < HQ && mask & (1 << head) != 0 {
            head += 1;
        }
        runs.push(if head - start == 1 {
            start.to_string()
        } else {
            format!("{start}-{}", head - 1)
        });
    }
    let noun = if mask.count_ones() == 1 {
        "head"
    } else {
        "heads"
    };
    format!("{noun} {}", runs.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grade::compare::{compare, POISON_BITS};

    const SHAPE: Shape = Shape {
        chunk_len: 150,
        prefix_len: 31,
    };

    /// A comparison of an output that is exact except where `spoil` says.
    fn output_with(spoil: impl Fn(usize, usize, usize) -> Option<f32>) -> Comparison {
        let reference = vec![0.5; SHAPE.q_elems()];
        let mut out = vec![0.5f32; SHAPE.q_elems()];
        for row in 0..SHAPE.chunk_len {
            for head in 0..HQ {
                for dim in 0..DH {
                    if let Some(value) = spoil(row, head, dim) {
                        out[Shape::q_index(row, head, dim)] = value;
                    }
                }
            }
        }
        compare(
            SHAPE.problem().output,
            super::super::contract::TOLERANCE,
            &out,
            &reference,
        )
    }

    fn diagnose_output(spoil: impl Fn(usize, usize, usize) -> Option<f32>) -> String {
        diagnose(SHAPE, &output_with(spoil), &Integrity::default())
    }

    const POISON: Option<f32> = Some(f32::from_bits(POISON_BITS));
    const WRONG: Option<f32> = Some(3.0);

    #[test]
    fn a_correct_output_says_so() {
        let line = diagnose_output(|_, _, _| None);
        assert!(line.starts_with("correct: all 307200 elements"), "{line}");
    }

    #[test]
    fn integrity_failures_come_first_in_order() {
        let broken = output_with(|_, _, _| POISON);
        let all = Integrity {
            out_of_bounds_writes: 7,
            inputs_modified: vec!["q".into(), "vCache".into()],
            runs_differ: true,
        };
        let line = diagnose(SHAPE, &broken, &all);
        assert!(
            line.starts_with("out-of-bounds write: the kernel wrote 7 floats"),
            "{line}"
        );
        let modified = Integrity {
            out_of_bounds_writes: 0,
            ..all.clone()
        };
        let line = diagnose(SHAPE, &broken, &modified);
        assert!(
            line.starts_with("the kernel wrote into q and vCache (inputs are const)"),
            "{line}"
        );
        let race = Integrity {
            runs_differ: true,
            ..Integrity::default()
        };
        assert!(diagnose(SHAPE, &broken, &race).starts_with("race:"));
        // A race is reported even when this run happened to come out right.
        let fine = output_with(|_, _, _| None);
        assert!(diagnose(SHAPE, &fine, &race).starts_with("race:"));
    }

    #[test]
    fn trailing_rows_never_written_point_at_the_grid() {
        let line = diagnose_output(|row, _, _| if row >= 128 { POISON } else { None });
        assert_eq!(
            line,
            "rows 128 to 149 never written: check the early return and that the grid covers chunkLen (150)"
        );
        let line = diagnose_output(|row, _, _| if row == 0 { POISON } else { WRONG });
        assert!(line.starts_with("row 0 never written"), "{line}");
    }

    #[test]
    fn heads_never_written_point_at_grid_y() {
        let line = diagnose_output(|_, head, _| if head >= 8 { POISON } else { None });
        assert!(
            line.starts_with("heads 8-31 never written: blockIdx.y"),
            "{line}"
        );
    }

    #[test]
    fn scattered_unwritten_elements_point_at_the_store() {
        let line = diagnose_output(|row, _, dim| if dim >= 32 && row < 3 { POISON } else { None });
        assert!(
            line.starts_with("3072 elements in rows 0 to 2 never written"),
            "{line}"
        );
    }

    #[test]
    fn nan_in_head_0_alone_is_the_planted_overflow() {
        let line = diagnose_output(|row, head, _| (head == 0 && row % 3 == 0).then_some(f32::NAN));
        assert!(line.starts_with("NaN only in head 0"), "{line}");
        assert!(line.contains("subtract the running max"));
    }

    #[test]
    fn nan_and_inf_elsewhere_list_their_causes() {
        let line = diagnose_output(|row, head, _| (head == 5 && row > 140).then_some(f32::NAN));
        assert!(
            line.starts_with("NaN in output (rows 141 to 149)"),
            "{line}"
        );
        assert!(line.contains("guard bands read as NaN"));
        let line = diagnose_output(|row, head, _| (head > 3 && row == 9).then_some(f32::INFINITY));
        assert!(
            line.starts_with("Inf in output (row 9): expf overflowed"),
            "{line}"
        );
    }

    #[test]
    fn wrong_only_in_head_0_is_the_planted_overflow() {
        let line = diagnose_output(|_, head, _| if head == 0 { WRONG } else { None });
        assert!(line.starts_with("wrong only in head 0"), "{line}");
    }

    #[test]
    fn a_wrong_last_partial_tile() {
        let line = diagnose_output(|row, _, _| if row >= 140 { WRONG } else { None });
        assert!(
            line.starts_with("only the last, partial tile (rows 140 to 149)"),
            "{line}"
        );
    }

    #[test]
    fn wrong_from_the_second_tile_on() {
        let line = diagnose_output(|row, _, _| if row >= 64 { WRONG } else { None });
        assert!(
            line.starts_with("rows 64 to 149 are wrong, rows before them right"),
            "{line}"
        );
    }

    #[test]
    fn wrong_tail_of_every_tile() {
        let line = diagnose_output(|row, _, _| if row % 64 >= 56 { WRONG } else { None });
        assert!(
            line.starts_with("only rows 56..63 of each 64-row tile are wrong"),
            "{line}"
        );
    }

    #[test]
    fn some_heads_wrong_in_every_row_is_the_kv_mapping() {
        let line = diagnose_output(|_, head, _| if head % 4 != 0 { WRONG } else { None });
        assert!(line.starts_with("only heads 1-3, 5-7, 9-11"), "{line}");
        assert!(line.contains("g = h / 4"));
    }

    #[test]
    fn near_misses_read_as_precision_loss() {
        let line = diagnose_output(|row, head, dim| {
            (row == 70 && head == 9 && dim < 2).then_some(0.5 + 0.0012)
        });
        assert!(
            line.starts_with("2 elements just outside tolerance (worst 2.0x"),
            "{line}"
        );
    }

    #[test]
    fn everything_wrong_points_at_scale_and_layout() {
        let line = diagnose_output(|_, _, _| WRONG);
        assert!(
            line.starts_with(
                "every row of every head is wrong (worst at row 0, head 0, dim 0: got 3.000000e0"
            ),
            "{line}"
        );
    }

    #[test]
    fn anything_else_reports_counts_and_the_worst_element() {
        let line = diagnose_output(|row, head, dim| {
            (row == 10 && dim == 0 && (head == 2 || head == 30)).then_some(if head == 2 {
                1.0
            } else {
                2.0
            })
        });
        assert!(
            line.starts_with("2 of 307200 elements wrong, in row 10 and heads 2, 30; worst at row 10, head 30, dim 0: got 2.000000e0"),
            "{line}"
        );
    }

    #[test]
    fn head_lists_are_compact() {
        assert_eq!(heads(1 << 3), "head 3");
        assert_eq!(heads(0b1111_0000 | (1 << 12)), "heads 4-7, 12");
        assert_eq!(heads(u32::MAX), "heads 0-31");
    }
}
