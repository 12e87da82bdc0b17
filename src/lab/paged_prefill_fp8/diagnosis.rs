//! A one-line verdict in the FP8 lab's terms: scales, formats, the X = 16
//! packing, the walk over cached keys.
//!
//! The launch's own evidence comes first, as in the second lab (stray
//! writes, edited inputs, races, the experiments; shared through
//! [`crate::lab::paged::diagnosis`]). Then each planted bug's CPU
//! model ([`super::bugs`]) is run on the case and compared with what the
//! kernel wrote: a model that reproduces the output
//! names the cause with certainty (NaN for NaN, as a stray read of an FP8
//! NaN byte gives both; where several models agree, all are named). Then
//! the misreadings no planted bug models, as the second lab tries them
//! ([`crate::lab::paged::misread`]: another KV head, a context off by one
//! or two). Failing that, rows left unwritten are told as unwritten, the
//! failing heads' pattern across KV groups is read, and last the worst
//! element is shown.

use super::bugs::{model, Bug};
use super::oracle::{evaluate, value_scales, Model};
use super::{bf16, passes, Inputs, DH, HKV, HQ, LAYOUT};
use crate::grade::compare::Footprint;
use crate::lab::definition::{Diagnosis, Graded};
use crate::lab::evidence::{self, Replay, Written};
use crate::lab::experiment::shared_reading;
use crate::lab::paged::diagnosis::{output_diagnosis, place, worst_element};
use crate::lab::paged::high_blocks::overflow_line;
use crate::lab::paged::misread::{
    self, context_line, head_pattern, kv_map_found, kv_map_line, Misreading, CONTEXT_SHIFTS,
};
use crate::lab::verdict::cause;

/// A case's diagnosis: the launch's evidence, then the bug models, then the output.
pub fn case_diagnosis(inputs: &Inputs, graded: &Graded<'_>) -> Diagnosis {
    let batch = &inputs.tensors.batch;
    let place = |at: &Footprint| place(batch, at);
    if let Some(said) = shared_reading(graded, &place) {
        return said;
    }
    if let Some(said) = modelled(inputs, graded.out, graded) {
        return said;
    }
    // Where the failures lie under NaN bytes, every model that reads one is
    // blind; the rerun with those bytes tagged tells them apart.
    if let Some(out) = graded.experiments.tagged_output.as_deref() {
        if let Some(said) = modelled(&inputs.sentinels_tagged(), out, graded) {
            return said.seen_on_tagged_rerun();
        }
    }
    let agrees = agreement(inputs, graded.out);
    let failing = |k: usize| !agrees(k, graded.reference[k]);
    if let Some(said) = output_diagnosis(batch, graded, &place) {
        // NaN that shrinking the scores removes is an exp that overflowed:
        // the planted missing max subtraction, found by experiment.
        if said.cause == Some(cause::NAN_EXP_OVERFLOW) {
            return Diagnosis::new(said.line, Bug::MissingMaxSubtraction.name());
        }
        return said;
    }
    let failing_heads: [bool; HQ] = std::array::from_fn(|head| {
        (0..batch.total_new()).any(|row| {
            let at = LAYOUT.head_index(row, head, 0);
            (at..at + DH).any(&failing)
        })
    });
    let worst = worst_element(batch, graded.comparison);
    match head_pattern(&failing_heads) {
        Some(pattern) => Diagnosis::plain(format!("{}: {pattern}", worst.line)),
        None => worst,
    }
}

/// The planted bug, or else the misreading, whose model reproduces `out`
/// (a launch on `inputs`), named; the counts and places are `graded`'s.
fn modelled(inputs: &Inputs, out: &[f32], graded: &Graded<'_>) -> Option<Diagnosis> {
    let bugs = reproducing_bugs(inputs, out, graded.reference);
    if let Some((&bug, others)) = bugs.split_first() {
        let cmp = graded.comparison;
        // Two defects can write the same output on a case: the line names
        // every one that does.
        let also: String = others
            .iter()
            .map(|&other| format!("; or: {}", bug_line(other, inputs)))
            .collect();
        return Some(Diagnosis::new(
            format!(
                "{}: {} of {} elements wrong, {}{also}",
                bug_line(bug, inputs),
                cmp.failing,
                cmp.elements,
                place(&inputs.tensors.batch, &cmp.where_failing)
            ),
            bug.name(),
        ));
    }
    let agrees = agreement(inputs, out);
    let failing = |k: usize| !agrees(k, graded.reference[k]);
    misread_diagnosis(inputs, out, &failing)
}

/// The misreading whose model reproduces `out` everywhere, named; `failing`
/// tells the elements of `out` that fail.
fn misread_diagnosis(
    inputs: &Inputs,
    out: &[f32],
    failing: &dyn Fn(usize) -> bool,
) -> Option<Diagnosis> {
    let batch = &inputs.tensors.batch;
    let agrees = agreement(inputs, out);
    let read_by_all: Vec<Vec<f64>> = (0..HKV)
        .map(|g| evaluate(inputs, Model::Misread(Misreading::all_read(g))))
        .collect();
    let head_reads = |head: usize, g: usize| {
        (0..batch.total_new()).all(|row| {
            let at = LAYOUT.head_index(row, head, 0);
            (at..at + DH).all(|k| agrees(k, read_by_all[g][k]))
        })
    };
    if let Some(map) = kv_map_found(head_reads) {
        return Some(Diagnosis::new(
            kv_map_line(&map),
            misread::cause::KV_HEAD_MAPPING,
        ));
    }
    let shift = CONTEXT_SHIFTS.into_iter().find(|&shift| {
        let modelled = evaluate(inputs, Model::Misread(Misreading::ContextShift(shift)));
        (0..out.len()).all(|k| agrees(k, modelled[k]))
    })?;
    let row = (0..out.len()).find(|&k| failing(k))? / (HQ * DH);
    let (seq, _) = batch.sequence_of_row(row);
    Some(Diagnosis::new(
        context_line(shift, row, seq, batch.context[seq]),
        misread::cause::CONTEXT_LENGTH,
    ))
}

/// Whether element `at` of `out` agrees with a model's value `want`: both
/// finite and within the case's tolerance. An element the kernel never
/// wrote agrees with no model (every model writes every row), and a NaN or
/// Inf beside a non-finite model value proves nothing ([`evidence`]).
fn agreement<'a>(inputs: &Inputs, out: &'a [f32]) -> impl Fn(usize, f64) -> bool + 'a {
    let scales = value_scales(inputs);
    move |at: usize, want: f64| {
        let got = out[at];
        got.is_finite() && want.is_finite() && passes(f64::from(got), want, scales[at / DH])
    }
}

/// The planted bugs whose models reproduce `out` ([`evidence::replay`]),
/// where `out` fails somewhere. A model's value past bf16's range counts as
/// the Inf the output would hold, so it is no evidence.
pub fn reproducing_bugs(inputs: &Inputs, out: &[f32], reference: &[f64]) -> Vec<Bug> {
    let agrees = agreement(inputs, out);
    if (0..out.len()).all(|at| agrees(at, reference[at])) {
        return Vec::new();
    }
    let scales = value_scales(inputs);
    let as_output = |want: f64| match bf16::round(want as f32) {
        x if x.is_finite() => want,
        x => f64::from(x),
    };
    let reproduces = |bug: Bug| {
        let modelled = model(inputs, bug);
        let replayed = evidence::replay_output(
            0..out.len(),
            out,
            reference,
            |at| Written::Value(as_output(modelled[at])),
            |at, got, want| passes(got, want, scales[at / DH]),
        );
        replayed == Replay::Reproduces
    };
    Bug::ALL
        .into_iter()
        .filter(|&bug| reproduces(bug))
        .collect()
}

/// A value `factor` times what it should be, in words: "2.000x too large",
/// "1.700x too small".
fn off_by(factor: f32) -> String {
    if factor >= 1.0 {
        format!("{factor:.3}x too large")
    } else {
        format!("{:.3}x too small", 1.0 / factor)
    }
}

/// The cause in this case's numbers.
fn bug_line(bug: Bug, inputs: &Inputs) -> String {
    let (k, v) = (inputs.k_scale, inputs.v_scale);
    match bug {
        Bug::KScaleIgnored => format!(
            "cached keys are read without kScale ({k}): their scores are {}; multiply each \
             decoded key byte by kScale",
            off_by(1.0 / k)
        ),
        Bug::VScaleIgnored => format!(
            "cached values are read without vScale ({v}): each cached value is {}; multiply \
             each decoded value byte by vScale",
            off_by(1.0 / v)
        ),
        Bug::ScalesSwapped => format!(
            "kScale and vScale are swapped: cached keys are scaled by {v} instead of {k}, values \
             by {k} instead of {v}"
        ),
        Bug::FormatIgnored => format!(
            "E4M3 bytes decoded as E5M2: this case's cache is {} (kvFormat = {}); decode with \
             the format kvFormat names",
            inputs.format,
            inputs.format.code()
        ),
        Bug::Int32Offset(wrap) => overflow_line(
            &inputs.tensors.batch,
            wrap,
            "the rows that read a wrapped block fail",
        )
        .unwrap_or_else(|| wrap.defect().to_owned()),
        _ => bug.defect().to_owned(),
    }
}
