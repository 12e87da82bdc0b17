//! What the output of a paged prefill launch says by itself, in the
//! family's words: where a footprint lies (new tokens, their sequences and
//! positions, heads), rows the kernel never wrote, NaN or Inf it computed,
//! and, last, the worst element. Each lab tries its own models first.

use super::batch::Batch;
use super::layout::HQ;
use crate::grade::compare::{Comparison, Footprint};
use crate::lab::definition::{Diagnosis, Graded};
use crate::lab::experiment::non_finite_reading;
use crate::lab::verdict::cause;

/// What the output itself says when no planted bug's model reproduced it:
/// rows the kernel never wrote (told as unwritten, whatever else they
/// hold), then NaN or Inf it computed, as the non-finite experiment read them.
pub fn output_diagnosis(
    batch: &Batch,
    graded: &Graded<'_>,
    place: &dyn Fn(&Footprint) -> String,
) -> Option<Diagnosis> {
    let cmp = graded.comparison;
    if cmp.unwritten > 0 {
        return Some(unwritten(batch, cmp, place));
    }
    non_finite_reading(graded, place)
}

/// Elements the kernel left holding the poison: no thread stored there.
fn unwritten(batch: &Batch, cmp: &Comparison, place: &dyn Fn(&Footprint) -> String) -> Diagnosis {
    let where_ = place(&cmp.where_unwritten);
    let rows = cmp
        .where_unwritten
        .rows
        .map_or(0, |span| span.last + 1 - span.first);
    let hint = if rows > 0 && cmp.unwritten == batch.total_new().min(rows) * HQ * batch.layout.dim {
        "whole rows: check that the grid covers every sequence's new tokens (blockIdx.z * \
         rows per block up to qStart[s+1] - qStart[s]) and that each row is stored"
    } else {
        "check the store's index and the guard that skips rows or heads"
    };
    Diagnosis::new(
        format!(
            "{} of {} elements were never written (they still hold the poison), {where_}: {hint}",
            cmp.unwritten, cmp.elements
        ),
        cause::NEVER_WRITTEN,
    )
}

/// The last word: how many elements are wrong and the worst of them.
pub fn worst_element(batch: &Batch, cmp: &Comparison) -> Diagnosis {
    Diagnosis::plain(match &cmp.worst {
        Some(e) => {
            let (seq, position) = batch.sequence_of_row(e.row);
            format!(
                "{} of {} elements wrong; worst at new token {} (sequence {seq}, \
                 position {position}), head {}: got {:.6e}, expected {:.6e}",
                cmp.failing, cmp.elements, e.row, e.head, e.got, e.expected
            )
        }
        None => format!("{} of {} elements wrong", cmp.failing, cmp.elements),
    })
}

/// Rows (new tokens, with their sequences) and heads of a footprint.
pub fn place(batch: &Batch, at: &Footprint) -> String {
    let Some(span) = at.rows else {
        return "no element".into();
    };
    let (first_seq, first_pos) = batch.sequence_of_row(span.first);
    let (last_seq, last_pos) = batch.sequence_of_row(span.last);
    let rows = if span.first == span.last {
        format!(
            "new token {} (sequence {first_seq}, position {first_pos})",
            span.first
        )
    } else if first_seq == last_seq {
        format!(
            "new tokens {} to {} (sequence {first_seq}, positions {first_pos} to {last_pos})",
            span.first, span.last
        )
    } else {
        format!(
            "new tokens {} to {} (sequences {first_seq} to {last_seq})",
            span.first, span.last
        )
    };
    format!("{rows}, {}", crate::lab::experiment::heads(at.heads, HQ))
}
