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
use super::oracle::{evaluate, evaluate_rows, value_scales, Model};
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
    // As with the bugs (`reproducing_bugs`): a misreading is refuted on a
    // few failing rows before it is computed whole.
    let probe = probe_rows(out.len(), failing);
    let head_agrees = |modelled: &[f64], rows: &[usize], head: usize| {
        rows.iter().all(|&row| {
            let at = LAYOUT.head_index(row, head, 0);
            (at..at + DH).all(|k| agrees(k, modelled[k]))
        })
    };
    let read_by_all: Vec<Option<Vec<f64>>> = (0..HKV)
        .map(|g| {
            let model = Model::Misread(Misreading::all_read(g));
            let few = evaluate_rows(inputs, model, Some(&probe));
            let some_head = (0..HQ).any(|head| head_agrees(&few, &probe, head));
            some_head.then(|| evaluate(inputs, model))
        })
        .collect();
    let every_row: Vec<usize> = (0..batch.total_new()).collect();
    let head_reads = |head: usize, g: usize| {
        read_by_all[g]
            .as_ref()
            .is_some_and(|modelled| head_agrees(modelled, &every_row, head))
    };
    if let Some(map) = kv_map_found(head_reads) {
        return Some(Diagnosis::new(
            kv_map_line(&map),
            misread::cause::KV_HEAD_MAPPING,
        ));
    }
    let shift = CONTEXT_SHIFTS.into_iter().find(|&shift| {
        let model = Model::Misread(Misreading::ContextShift(shift));
        let few = evaluate_rows(inputs, model, Some(&probe));
        elements_of(&probe).all(|k| agrees(k, few[k])) && {
            let modelled = evaluate(inputs, model);
            (0..out.len()).all(|k| agrees(k, modelled[k]))
        }
    })?;
    let row = (0..out.len()).find(|&k| failing(k))? / ROW_LEN;
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
    let replayed = |modelled: &[f64], indices: &mut dyn Iterator<Item = usize>| {
        evidence::replay_output(
            indices,
            out,
            reference,
            |at| Written::Value(as_output(modelled[at])),
            |at, got, want| passes(got, want, scales[at / DH]),
        )
    };
    // A model that differs on one element differs on the whole output, and
    // a wrong model nearly always differs on the kernel's failing rows: it
    // is refuted there, at a few rows' cost, before a whole evaluation.
    let probe = probe_rows(out.len(), |at| !agrees(at, reference[at]));
    let reproduces = |bug: Bug| {
        let few = evaluate_rows(inputs, Model::Bug(bug), Some(&probe));
        if replayed(&few, &mut elements_of(&probe)) == Replay::Differs {
            return false;
        }
        replayed(&model(inputs, bug), &mut (0..out.len())) == Replay::Reproduces
    };
    Bug::ALL
        .into_iter()
        .filter(|&bug| reproduces(bug))
        .collect()
}

/// Rows to refute a model on first: the first, middle and last of the rows
/// of an output of `elements` elements that hold an element that `fails`.
fn probe_rows(elements: usize, fails: impl Fn(usize) -> bool) -> Vec<usize> {
    let failing: Vec<usize> = (0..elements / ROW_LEN)
        .filter(|&row| elements_of(&[row]).any(&fails))
        .collect();
    let mut probe: Vec<usize> = [0, failing.len() / 2, failing.len().saturating_sub(1)]
        .into_iter()
        .filter_map(|i| failing.get(i).copied())
        .collect();
    probe.dedup();
    probe
}

/// Elements of one output row (`[32][128]`).
const ROW_LEN: usize = HQ * DH;

/// Every output element of `rows`.
fn elements_of(rows: &[usize]) -> impl Iterator<Item = usize> + '_ {
    rows.iter()
        .flat_map(|&row| row * ROW_LEN..(row + 1) * ROW_LEN)
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
